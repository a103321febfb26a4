"""Body re-ID embedders for faceless sightings.

The embedded default reuses MobileNetV2 appearance features (generic, weak: see
``IdentityParams.reid_threshold``).  ``torchscript`` loads a real re-ID network (e.g. OSNet or
KPR exported with ``torch.jit.trace``; input 256x128 RGB, ImageNet normalisation) from
``reid_weights``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .image_embedding import imagenet_batch
from .weights import configured_file


class TorchScriptReid:
    name = "torchscript-reid"

    def __init__(self, weights: str, device: str = "cuda"):
        path = configured_file(weights, "reid_weights", "re-ID backend 'torchscript'")
        import torch
        self._torch = torch
        self.device = device if (device != "cuda" or torch.cuda.is_available()) else "cpu"
        self._model = torch.jit.load(path, map_location=self.device).eval()

    def embed(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        batch = imagenet_batch(crops, 128, 256)
        with self._torch.no_grad():
            out = self._model(self._torch.from_numpy(batch).to(self.device)).float().cpu().numpy()
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
