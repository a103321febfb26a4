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
        log.info("inspector write: %s %s", action, details.get("person", ""))   # names stay out of logs
        return entry

    def check_writable(self) -> None:
        """Raise PermissionError (or OSError) now rather than on the first write."""
        with self._lock, self.path.open("a", encoding="utf-8"):
            pass

    def forget_names_of(self, *ids: str) -> None:
        """A forgotten identity's display names leave the log too (its id and actions stay), also
        those given to the ids merged into it."""
        with self._lock:
            try:
                lines = self.path.read_text(encoding="utf-8").splitlines()
            except FileNotFoundError:
                return
            kept = []
            for line in lines:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if {entry.get("person"), entry.get("kept")} & set(ids) and "name" in entry:
                    entry["name"] = "(forgotten)"
                kept.append(json.dumps(entry, default=str))
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text("".join(k + "\n" for k in kept), encoding="utf-8")
            tmp.replace(self.path)

    def tail(self, n: int = 20) -> list[dict]:
        """The newest ``n`` entries, newest first."""
        try:
            with self.path.open(encoding="utf-8") as f:
                lines = deque(f, maxlen=n)
        except FileNotFoundError:
            return []
        out = []
        for line in reversed(lines):
            try:
                out.append(json.loads(line))
            except ValueError:        # a line cut by a crash
                continue
        return out
