"""sensor_msgs Image / CompressedImage (rclpy or rosbags objects) -> numpy, with clear errors."""
from __future__ import annotations

import math
from typing import Optional

import cv2
import numpy as np


class ImageDecodeError(ValueError):
    pass


_CHANNELS = {"rgb8": 3, "bgr8": 3, "rgba8": 4, "bgra8": 4, "mono8": 1, "8uc1": 1, "8uc3": 3}


def decode_compressed(data, fmt: str = "") -> np.ndarray:
    buf = np.frombuffer(bytes(data), dtype=np.uint8)
    image = cv2.imdecode(buf, cv2.IMREAD_COLOR)
    if image is None:
        raise ImageDecodeError(f"compressed image ({fmt or 'unknown format'}, {buf.size} bytes) does not decode")
    return image


def decode_raw(encoding: str, height: int, width: int, step: int, data) -> np.ndarray:
    """BGR uint8 for colour/mono encodings."""
    enc = encoding.lower()
    if enc not in _CHANNELS:
        raise ImageDecodeError(f"image encoding '{encoding}' is not supported for colour frames "
                               f"(supported: {', '.join(_CHANNELS)})")
    channels = _CHANNELS[enc]
    raw = np.frombuffer(bytes(data), dtype=np.uint8)
    if step < width * channels or raw.size < step * height:
        raise ImageDecodeError(f"image data ({raw.size} bytes) does not match {width}x{height} {encoding} "
                               f"(step {step})")
    image = raw[: step * height].reshape(height, step)[:, : width * channels].reshape(height, width, channels)
    if enc in ("rgb8",):
        return cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
    if enc == "rgba8":
        return cv2.cvtColor(image, cv2.COLOR_RGBA2BGR)
    if enc == "bgra8":
        return cv2.cvtColor(image, cv2.COLOR_BGRA2BGR)
    if channels == 1:
        return cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    return image.copy()


def decode_depth(encoding: str, height: int, width: int, step: int, data) -> np.ndarray:
    """Depth in metres (float32): 16UC1 millimetres or 32FC1 metres."""
    enc = encoding.upper()
    raw = np.frombuffer(bytes(data), dtype=np.uint8)
    if enc in ("16UC1", "MONO16"):
        depth = raw[: step * height].view(np.uint16).reshape(height, step // 2)[:, :width].astype(np.float32) / 1000.0
    elif enc == "32FC1":
        depth = raw[: step * height].view(np.float32).reshape(height, step // 4)[:, :width].copy()
    else:
        raise ImageDecodeError(f"depth encoding '{encoding}' is not supported (16UC1 mm, 32FC1 m)")
    depth[~np.isfinite(depth)] = 0.0
    return depth


def pixel_intrinsics(info, image_size: tuple[int, int]) -> Optional[tuple[float, float, float, float]]:
    """(fx, fy, cx, cy) of a sensor_msgs/CameraInfo in the pixels of an image of ``image_size``
    (width, height) showing the same view: the colour camera's info as it is, a registered depth
    camera's scaled to the colour image.  None without a calibration (K all zero)."""
    k = info.k
    values = [float(k[0]), float(k[4]), float(k[2]), float(k[5])]
    if not all(math.isfinite(v) and v > 0 for v in values):
        return None
    sx = image_size[0] / info.width if info.width else 1.0
    sy = image_size[1] / info.height if info.height else 1.0
    if abs(sx - sy) > 0.01 * sx:        # another aspect ratio: not a registered view of this image
        return None
    fx, fy, cx, cy = values
    return fx * sx, fy * sy, cx * sx, cy * sy


def decode_image_msg(msg) -> np.ndarray:
    """Either message kind (by its fields)."""
    if hasattr(msg, "format") and not hasattr(msg, "encoding"):
        return decode_compressed(msg.data, msg.format)
    return decode_raw(msg.encoding, msg.height, msg.width, msg.step, msg.data)
