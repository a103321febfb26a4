"""Bags built by the tests from real material (vtest.avi pedestrians, labelled face photos)."""
from __future__ import annotations

from pathlib import Path

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


def people_and_faces_bag(path: Path, fps: float = 10.0) -> dict:
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
            bag.frame(T_START + i / fps, image, 0.1 * i, 2.0, 0.0, waypoint=place)
    return {"frames": len(scenes), "duration_s": (len(scenes) - 1) / fps}


def small_bag(path: Path, frames: int = 20, storage: str = "mcap") -> Path:
    """Synthetic grey frames (with depth) at 10 Hz at the dock, the robot driving along x."""
    with BagWriter(path, storage=storage) as bag:
        for i in range(frames):
            image = np.full((48, 64, 3), i * 10 % 255, np.uint8)
            bag.frame(T_START + i * 0.1, image, i * 0.1, 0.0, 0.0, depth=np.full((48, 64), 1.5, np.float32),
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
