"""Body re-ID embedders for faceless sightings.

The embedded default reuses MobileNetV2 appearance features (generic, weak: see
``IdentityParams.reid_threshold``).  ``torchscript`` loads a real re-ID network (e.g. OSNet or
KPR exported with ``torch.jit.trace``; input 256x128 RGB, ImageNet normalisation) from
``reid_weights``.
"""
from __future__ import annotations

from typing import Sequence

import cv2
import numpy as np

from .weights import configured_file

_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


class TorchScriptReid:
    name = "torchscript-reid"

    def __init__(self, weights: str, device: str = "cuda"):
        path = configured_file(weights, "reid_weights", "re-ID backend 'torchscript'")
        import torch
        self._torch = torch
        self.device = device if (device != "cuda" or torch.cuda.is_available()) else "cpu"
        self._model = torch.jit.load(path, map_location=self.device).eval()

    def embed(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        batch = np.stack([(cv2.resize(cv2.cvtColor(c, cv2.COLOR_BGR2RGB), (128, 256)).astype(np.float32) / 255.0
                           - _MEAN) / _STD for c in crops]).transpose(0, 3, 1, 2)
        with self._torch.no_grad():
            out = self._model(self._torch.from_numpy(np.ascontiguousarray(batch)).to(self.device)).float().cpu().numpy()
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
