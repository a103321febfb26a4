"""Progress bars for long CLI work: live on a terminal, a line every few seconds in logs."""
from __future__ import annotations

import sys

from tqdm import tqdm


def progress_bar(**kwargs) -> tqdm:
    interactive = sys.stderr.isatty()
    kwargs.setdefault("mininterval", 0.1 if interactive else 10.0)
    kwargs.setdefault("dynamic_ncols", interactive)
    return tqdm(**kwargs)
