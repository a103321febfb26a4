"""StoreParams: where and how the memory is kept (the store's parameters, validated here).

``embodied_memory.params`` re-exports it (the memory node's parameters extend it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..calendar_windows import check_timezone
from .vector_index import APPROXIMATE_INDEXES


BACKENDS = ("sqlite_faiss", "postgres", "milvus")
ROBOT_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,63}$")   # a PostgreSQL role name; no '.' (it ends an identity prefix)
TAG_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")        # robot_id on an embedded memory: a tag on its records


def check_postgres_url(url: str) -> None:
    """A fleet server's URL: postgresql://user@host[:port]/database[?sslmode=...]; a password in
    it is refused (it would sit in a stack file and in logs): it comes from postgres_password_env."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres") or not parts.path.strip("/"):
        raise ValueError(f"postgres_url: {url!r} is not postgresql://USER@HOST:PORT/DATABASE")
    if parts.password is not None or "password=" in parts.query:
        raise ValueError("postgres_url: holds a password; put it in the environment variable "
                         "postgres_password_env names instead (never in YAML or logs)")


@dataclass(frozen=True)
class StoreParams:
    """Where and how the memory is kept (see embodied_memory.store)."""

    backend: str = "sqlite_faiss"          # sqlite_faiss (embedded) | postgres (a fleet's shared server) | milvus
    data_dir: str = "~/.local/share/embodied_memory"
    milvus_uri: str = ""                   # milvus: http://host:19530, or a file for Milvus Lite
    text_dim: int = 384                    # MiniLM-L6
    image_dim: int = 1280                  # MobileNetV2 pooled features (CLIP ViT-B/32: 512)
    face_dim: int = 128                    # SFace
    reid_dim: int = 1280
    max_description_chars: int = 8192
    timezone: str = "UTC"                  # for "per day" queries
    recency_weight_cos: float = 3.0        # HUMEMBR s = a*cos_dist + b*(1 - exp(-lambda*h))
    recency_weight_time: float = 1.0
    recency_horizon_hours: float = 120.0   # penalty reaches 0.95 at this age
    checkpoint_every: int = 50_000         # vector snapshot every N inserts (a restart re-adds at most
                                           # this many vectors from SQLite; a snapshot rewrites the index)
    approximate_min_vectors: int = 200_000  # FAISS: the exact flat index below, *_approximate_index above
    text_approximate_index: str = "hnsw"   # hnsw | ivf: semantic search (bench/store_bench.py measures both)
    image_approximate_index: str = "ivf"   # image recall: a 1280-d graph adds ~500 vectors/s on 2 cores, IVF ~60k
    text_embedder: str = "minilm"          # minilm | hash (tests/benchmarks without a model)
    forget_deletes_images: bool = True     # forget --identity also deletes the keyframe images showing them
    milvus_token_env: str = "MILVUS_TOKEN"         # env var holding the Milvus token ("" = none); never in YAML
    milvus_user: str = ""                          # Milvus user (password from milvus_password_env)
    milvus_password_env: str = "MILVUS_PASSWORD"   # env var holding that user's password
    robot_id: str = ""                     # the robot whose records these writes are ("" = none: one robot;
                                           # the memory node: "auto" = its namespace, else host name)
    postgres_url: str = ""                 # postgres: postgresql://USER@HOST:5432/DB?sslmode=verify-full (no password;
                                           # the memory node puts robot_id for "{robot_id}")
    postgres_password_env: str = "EMBODIED_MEMORY_DB_PASSWORD"   # env var holding USER's password ("" = libpq's own)
    postgres_connect_timeout_s: float = 10.0

    def validate(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend: unknown '{self.backend}' ({' | '.join(BACKENDS)})")
        if self.backend == "postgres":
            check_postgres_url(self.postgres_url)
        if self.robot_id and not (ROBOT_ID_RE if self.backend == "postgres" else TAG_RE).match(self.robot_id):
            raise ValueError(f"robot_id: {self.robot_id!r} must be 'auto' or 1-63 chars of [A-Za-z0-9_-]"
                             + ("" if self.backend == "postgres" else " (or '.')"))
        if self.postgres_connect_timeout_s <= 0:
            raise ValueError("postgres_connect_timeout_s: must be > 0")
        for name in ("text_dim", "image_dim", "face_dim", "reid_dim", "max_description_chars",
                     "checkpoint_every", "approximate_min_vectors"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}: must be > 0")
        if self.recency_horizon_hours <= 0:
            raise ValueError("recency_horizon_hours: must be > 0")
        check_timezone(self.timezone)
        for name in ("text_approximate_index", "image_approximate_index"):
            if getattr(self, name) not in APPROXIMATE_INDEXES:
                raise ValueError(f"{name}: unknown '{getattr(self, name)}' ({' | '.join(APPROXIMATE_INDEXES)})")
        if self.text_embedder not in ("minilm", "hash"):
            raise ValueError(f"text_embedder: unknown '{self.text_embedder}' (minilm | hash)")
