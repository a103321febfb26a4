"""Camera pixels with depth -> points in the map frame (pinhole model, planar robot pose).

Camera frame: x right, y down, z forward (optical); the camera looks along the robot's yaw from
the pose's position (the camera's offset and pitch on the base are not modelled).  Intrinsics are the colour camera's (``fx, fy, cx, cy`` in colour
pixels); a depth image registered to it may be smaller (a scaled copy of the same view).
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ..types import Pose

MAX_DEPTH_M = 8.0          # farther depth readings are too coarse to place anything
PERSON_DEPTH_BAND_M = 0.5  # depth pixels this far behind the nearest quarter belong to the background


def pixels_to_map(u: np.ndarray, v: np.ndarray, z: np.ndarray, intrinsics: tuple[float, float, float, float],
                  pose: Pose) -> np.ndarray:
    """(N, 3) map-frame points of colour pixels (u, v) at depths z (metres)."""
    fx, fy, cx, cy = intrinsics
    x_cam, y_cam = (u - cx) * z / fx, (v - cy) * z / fy
    fwd, left, up = z, -x_cam, -y_cam          # optical -> robot (forward, left, up)
    c, s = math.cos(pose.yaw), math.sin(pose.yaw)
    return np.stack([pose.x + c * fwd - s * left, pose.y + s * fwd + c * left, pose.z + up], axis=-1)


def person_position(box: tuple[float, float, float, float], depth: np.ndarray, image_size: tuple[int, int],
                    intrinsics: tuple[float, float, float, float], pose: Pose,
                    max_depth: float = MAX_DEPTH_M) -> Optional[tuple[float, float, float]]:
    """Where a person detected in ``box`` (colour pixels) stands, in the map frame (z: the
    base's, i.e. the floor; the camera is taken as level, as on a Spot body camera or a Nav2
    base's forward camera; a pitched camera is not modelled): the torso's
    depth (the middle third of the box's width, 20-60 % of its height; the nearest readings, not
    the wall behind) at the box's centre column.  None without enough valid depth there.

    ``image_size``: (width, height) of the colour image the box and intrinsics refer to."""
    width, height = image_size
    dh, dw = depth.shape[:2]
    sx, sy = dw / width, dh / height
    x1, y1, x2, y2 = box
    bw, bh = x2 - x1, y2 - y1
    c0, c1 = int(math.floor((x1 + bw / 3) * sx)), int(math.ceil((x2 - bw / 3) * sx))
    r0, r1 = int(math.floor((y1 + 0.2 * bh) * sy)), int(math.ceil((y1 + 0.6 * bh) * sy))
    patch = depth[max(0, r0):min(dh, max(r1, r0 + 1)), max(0, c0):min(dw, max(c1, c0 + 1))]
    values = patch[(patch > 0.05) & (patch < max_depth)]
    if values.size < 3:
        return None
    near = np.percentile(values, 25)
    z = float(np.median(values[values <= near + PERSON_DEPTH_BAND_M]))
    u, v = (x1 + x2) / 2, y1 + 0.4 * bh
    point = pixels_to_map(np.array([u]), np.array([v]), np.array([z]), intrinsics, pose)[0]
    if not np.all(np.isfinite(point)):
        return None
    return float(point[0]), float(point[1]), float(pose.z)   # z: the floor they stand on (the base's)
