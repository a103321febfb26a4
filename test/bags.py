"""Bags built by the tests from real material (vtest.avi pedestrians, labelled face photos)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import cv2
import numpy as np

from embodied_memory.ingest.bag_writer import BagWriter

from conftest import shared_data

T_START = 1_800_000_000.0


def on_canvas(image: np.ndarray, size=(640, 480)) -> np.ndarray:
    """A photo letterboxed into a 640x480 camera frame."""
    w, h = size
    scale = min(w / image.shape[1], h / image.shape[0])
    resized = cv2.resize(image, (int(image.shape[1] * scale), int(image.shape[0] * scale)))
    canvas = np.full((h, w, 3), 40, np.uint8)
    y, x = (h - resized.shape[0]) // 2, (w - resized.shape[1]) // 2
    canvas[y:y + resized.shape[0], x:x + resized.shape[1]] = resized
    return canvas


def people_and_faces_bag(path: Path, fps: float = 10.0, t_start: float = T_START) -> dict:
    """6 s of vtest pedestrians in the lobby, then 3 s each of Obama in the office, Biden in the
    kitchen and Obama (another photo) in the kitchen, the robot driving along x."""
    video = shared_data("video", "vtest.avi")
    faces = shared_data("faces", "face_recognition_knn", "train")
    capture = cv2.VideoCapture(str(video))
    scenes = []
    for _ in range(int(6 * fps)):
        ok, frame = capture.read()
        scenes.append((cv2.resize(frame, (640, 480)), "lobby"))
    for photo, place in (("obama/obama.jpg", "office"), ("biden/biden.jpg", "kitchen"),
                         ("obama/obama2.jpg", "kitchen")):
        image = on_canvas(cv2.imread(str(faces / photo)))
        scenes += [(image, place)] * int(3 * fps)
    with BagWriter(path) as bag:
        for i, (image, place) in enumerate(scenes):
            bag.frame(t_start + i / fps, image, 0.1 * i, 2.0, 0.0, waypoint=place)
    return {"frames": len(scenes), "duration_s": (len(scenes) - 1) / fps}


def portrait_people_bag(path: Path, fps: float = 10.0, t_start: float = T_START, seconds_each: float = 8.0,
                        depth_m: Optional[float] = None) -> dict:
    """Two of MiniWorld's stock portraits (they ship with the package: no ../shared/data), each
    in front of the camera for ``seconds_each`` at its own waypoint, the robot driving along x;
    with ``depth_m``, a depth image (a quarter of the size) with everything at that distance."""
    from embodied_memory.sim.world import usable_portraits
    usable = usable_portraits()
    # two painters' sitters (one painter's portraits may show the same person)
    portraits = [usable[0], next(p for p in usable if p.stem.rstrip("0123456789") != usable[0].stem.rstrip("0123456789"))]
    scenes = []
    for portrait, place in zip(portraits, ("office", "kitchen")):
        scenes += [(on_canvas(cv2.imread(str(portrait))), place)] * int(seconds_each * fps)
    with BagWriter(path) as bag:
        for i, (image, place) in enumerate(scenes):
            depth = None if depth_m is None else np.full((image.shape[0] // 4, image.shape[1] // 4), depth_m, np.float32)
            bag.frame(t_start + i / fps, image, 0.1 * i, 2.0, 0.0, waypoint=place, depth=depth)
    return {"frames": len(scenes), "people": len(portraits)}


def small_bag(path: Path, frames: int = 20, storage: str = "mcap", t_start: float = T_START) -> Path:
    """Synthetic grey frames (with depth) at 10 Hz at the dock, the robot driving along x."""
    with BagWriter(path, storage=storage) as bag:
        for i in range(frames):
            image = np.full((48, 64, 3), i * 10 % 255, np.uint8)
            bag.frame(t_start + i * 0.1, image, i * 0.1, 0.0, 0.0, depth=np.full((48, 64), 1.5, np.float32),
                      waypoint="dock")
    return path


def damage(bag_dir: Path, offset: int, size: int, seed: int = 0) -> Path:
    """Overwrite ``size`` bytes of the bag's MCAP file at ``offset`` (negative: from the middle)
    with random garbage; the file keeps its length, so its summary stays readable."""
    mcap = next(Path(bag_dir).glob("*.mcap"))
    data = bytearray(mcap.read_bytes())
    start = len(data) // 2 if offset < 0 else offset
    data[start:start + size] = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()
    mcap.write_bytes(bytes(data))
    return mcap


def _transform(bag: BagWriter, stamp: float, parent: str, child: str, x: float, y: float, yaw: float,
               z: float = 0.0):
    t = bag.t
    return t["geometry_msgs/msg/TransformStamped"](
        header=bag._header(stamp, parent), child_frame_id=child,
        transform=t["geometry_msgs/msg/Transform"](
            translation=t["geometry_msgs/msg/Vector3"](x=x, y=y, z=z),
            rotation=t["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=float(np.sin(yaw / 2)),
                                                       w=float(np.cos(yaw / 2)))))


def _publish_tf(bag: BagWriter, topic: str, stamp: float, transforms: list) -> None:
    bag._write(topic, "tf2_msgs/msg/TFMessage", stamp, bag.t["tf2_msgs/msg/TFMessage"](transforms=transforms))


def relocalising_tf_bag(path: Path, duration_s: float = 10.0, tf_until_s: float = 9.0, jump_at_s: float = 4.0,
                        jump: tuple[float, float] = (3.0, -2.0)) -> dict:
    """A robot driving a smooth path in ``map``, with a localiser's map->odom and odometry's
    odom->base_footprint on /tf at 20 Hz, base_footprint->base_link (z 0.1) once on /tf_static,
    and 64x48 camera frames at 10 Hz, each halfway between two /tf samples (so every pose is
    interpolated). At ``jump_at_s`` the odometry jumps by ``jump`` (drift corrected at once) and
    map->odom jumps by exactly as much the other way: the base moves continuously in ``map``
    while its odom pose jumps. /tf stops at ``tf_until_s``: later frames never get a transform.
    Waypoint "hall", then "dock" from 0.5 s before /tf stops. Returns the frames' stamps with
    their map and odom poses (x, y, yaw)."""
    import math

    def truth(t: float) -> tuple[float, float, float]:         # base_footprint in map
        return 0.5 * t, 0.8 * math.sin(0.4 * t), 0.1 * t

    def map_odom(t: float) -> tuple[float, float, float]:
        x, y = (1.0, -0.5) if t < jump_at_s else (1.0 - jump[0], -0.5 - jump[1])
        return x, y, 0.3

    def odom_pose(t: float) -> tuple[float, float, float]:     # truth expressed in odom = map_odom^-1 * truth
        mx, my, myaw = map_odom(t)
        gx, gy, gyaw = truth(t)
        c, s = math.cos(-myaw), math.sin(-myaw)
        return c * (gx - mx) - s * (gy - my), s * (gx - mx) + c * (gy - my), gyaw - myaw

    frames = []
    with BagWriter(path) as bag:
        _publish_tf(bag, "/tf_static", T_START, [_transform(bag, T_START, "base_footprint", "base_link", 0.0, 0.0,
                                                            0.0, z=0.1)])
        bag.waypoint(T_START, "hall")
        for k in range(int(round(duration_s / 0.05)) + 1):
            t = k * 0.05
            if t <= tf_until_s + 1e-9:
                _publish_tf(bag, "/tf", T_START + t, [_transform(bag, T_START + t, "map", "odom", *map_odom(t)),
                                                      _transform(bag, T_START + t, "odom", "base_footprint",
                                                                 *odom_pose(t))])
            if abs(t - (tf_until_s - 0.5)) < 1e-9:   # the robot reaches the dock
                bag.waypoint(T_START + t, "dock")
            if k % 2 == 0 and t + 0.025 < duration_s:
                ts = t + 0.025
                image = np.full((48, 64, 3), (k * 7) % 255, np.uint8)
                image[:, : (k % 64)] = 200
                bag.image(T_START + ts, image)
                frames.append({"stamp": T_START + ts, "map": truth(ts), "odom": odom_pose(ts)})
    return {"frames": frames, "jump_at": T_START + jump_at_s, "tf_until": T_START + tf_until_s}
