"""Where derived files that can always be rebuilt are kept (simulated episodes, embedded intent
banks): ``$EMBODIED_MEMORY_CACHE``, else ``~/.cache/embodied_memory``."""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    return Path(os.environ.get("EMBODIED_MEMORY_CACHE", Path.home() / ".cache" / "embodied_memory"))
