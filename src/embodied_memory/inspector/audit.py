"""Every write the inspector makes (name, merge, forget), appended as one JSON line with its time."""
from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from pathlib import Path

log = logging.getLogger(__name__)


class AuditLog:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()

    def write(self, action: str, **details) -> dict:
        entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "t": round(time.time(), 3), "action": action, **details}
        line = json.dumps(entry, default=str)
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
        log.info("inspector write: %s", line)
        return entry

    def tail(self, n: int = 20) -> list[dict]:
        """The newest ``n`` entries, newest first."""
        try:
            with self.path.open(encoding="utf-8") as f:
                lines = deque(f, maxlen=n)
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in reversed(lines) if line.strip()]
