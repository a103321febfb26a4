"""Person detectors: BGR image -> boxes.

``hog`` (embedded default, CPU): OpenCV's HOG + linear SVM people detector, run on an upscaled
image (people in robot footage are often small), with non-maximum suppression.
``yolo`` (GPU robot): ultralytics, weights from ``yolo_weights``.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import cv2
import numpy as np

from .weights import configured_file


@dataclass
class Detection:
    box: tuple[float, float, float, float]
    score: float


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> list[int]:
    order = list(np.argsort(-scores))
    keep = []
    while order:
        i = order.pop(0)
        keep.append(i)
        rest = []
        for j in order:
            xx1, yy1 = max(boxes[i, 0], boxes[j, 0]), max(boxes[i, 1], boxes[j, 1])
            xx2, yy2 = min(boxes[i, 2], boxes[j, 2]), min(boxes[i, 3], boxes[j, 3])
            inter = max(0.0, xx2 - xx1) * max(0.0, yy2 - yy1)
            area_i = (boxes[i, 2] - boxes[i, 0]) * (boxes[i, 3] - boxes[i, 1])
            area_j = (boxes[j, 2] - boxes[j, 0]) * (boxes[j, 3] - boxes[j, 1])
            # also drop a box mostly inside a stronger one (HOG fires on parts)
            if inter / (area_i + area_j - inter + 1e-9) < iou and inter / (area_j + 1e-9) < 0.7:
                rest.append(j)
        order = rest
    return keep


class HogPersonDetector:
    name = "hog"

    def __init__(self, upscale: float = 1.6, score_threshold: float = 0.3, nms_iou: float = 0.4):
        if not hasattr(cv2, "HOGDescriptor_getDefaultPeopleDetector"):
            raise RuntimeError("this OpenCV has no HOG people detector: pin opencv-python-headless>=4.12,<5")
        self._hog = cv2.HOGDescriptor()
        self._hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())
        self.upscale, self.score_threshold, self.nms_iou = upscale, score_threshold, nms_iou
        self._lock = threading.Lock()

    def detect(self, image: np.ndarray) -> list[Detection]:
        scaled = cv2.resize(image, None, fx=self.upscale, fy=self.upscale) if self.upscale != 1.0 else image
        if scaled.shape[0] < 128 or scaled.shape[1] < 64:   # smaller than HOG's window: OpenCV crashes
            return []
        with self._lock:
            rects, weights = self._hog.detectMultiScale(scaled, winStride=(8, 8), padding=(8, 8), scale=1.05)
        if len(rects) == 0:
            return []
        boxes = np.array([[x, y, x + w, y + h] for x, y, w, h in rects], dtype=np.float32) / self.upscale
        scores = np.asarray(weights, dtype=np.float32).reshape(-1)
        keep = [i for i in nms(boxes, scores, self.nms_iou) if scores[i] >= self.score_threshold]
        return [Detection(tuple(float(v) for v in boxes[i]), float(scores[i])) for i in keep]


class YoloPersonDetector:
    name = "yolo"

    def __init__(self, weights: str, score_threshold: float = 0.4, device: str = "cuda"):
        path = configured_file(weights, "yolo_weights", "person detector 'yolo'")
        try:
            from ultralytics import YOLO
        except ImportError as exc:
            raise RuntimeError("person_detector 'yolo' needs ultralytics (EXTRAS=gpu)") from exc
        self._model = YOLO(path)
        self.score_threshold, self.device = score_threshold, device

    def detect(self, image: np.ndarray) -> list[Detection]:
        result = self._model.predict(image, classes=[0], conf=self.score_threshold, device=self.device,
                                     verbose=False)[0]
        return [Detection(tuple(float(v) for v in box), float(conf))
                for box, conf in zip(result.boxes.xyxy.cpu().numpy(), result.boxes.conf.cpu().numpy())]
