"""Row times in memory, for ranking by recency without SQL per candidate.

``TimeTable``: row id -> time, ids ascending, read from the time index when the store opens or
rows are deleted, and extended by every insert. It is immutable and replaced whole (one
attribute store), so a query on another thread sees the table before an insert or after it,
never new ids with old times.

``NewestFirst``: the same rows newest first (retrieval's ``_ranked_newest_first``), kept up to
date cheaply: rows are appended to the table as they are stored, and usually they are the
newest, so they go in front; a row older than the newest (a late resend) or a delete (a new
table version) sorts everything again.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from .stored_vectors import find_sorted


@dataclass(frozen=True)
class TimeTable:
    ids: np.ndarray                  # int64, ascending
    times: np.ndarray                # float64, times[i] is the time of ids[i]
    version: int = 0                 # a new one after a delete: orders built on the old start afresh
    newest: float = -np.inf          # the largest time (kept, not scanned per question)

    @classmethod
    def of_rows(cls, ids: np.ndarray, times: np.ndarray, version: int) -> "TimeTable":
        order = np.argsort(ids, kind="stable")
        return cls(ids[order], times[order], version, float(times.max()) if len(times) else -np.inf)

    def appended(self, ids: np.ndarray, times: np.ndarray) -> "TimeTable":
        """With newly inserted rows (SQLite gives them larger ids than any held)."""
        return TimeTable(np.concatenate([self.ids, ids]), np.concatenate([self.times, times]), self.version,
                         max(self.newest, float(times.max())) if len(times) else self.newest)

    def times_of(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(times, known) for row ids; unknown = deleted since the caller found them."""
        at, known = find_sorted(self.ids, ids)
        return (self.times[at] if len(self.times) else np.zeros(len(ids))), known


class NewestFirst:
    def __init__(self):
        self._lock = threading.Lock()
        self._ids = np.zeros(0, np.int64)
        self._times = np.zeros(0, np.float64)          # descending
        self._rows, self._version = 0, None            # how much of which table is ordered

    def order(self, table: TimeTable) -> tuple[np.ndarray, np.ndarray]:
        """(ids, times) of ``table`` newest first."""
        with self._lock:
            rows = len(table.ids)
            if table.version == self._version and rows == self._rows:
                return self._ids, self._times
            tail_ids, tail_times = table.ids[self._rows:], table.times[self._rows:]
            if table.version == self._version and rows > self._rows and \
                    (not len(self._times) or float(tail_times.min()) >= float(self._times[0])):
                order = np.argsort(-tail_times, kind="stable")
                self._ids = np.concatenate([tail_ids[order], self._ids])
                self._times = np.concatenate([tail_times[order], self._times])
            else:
                order = np.argsort(-table.times, kind="stable")
                self._ids, self._times = table.ids[order], table.times[order]
            self._rows, self._version = rows, table.version
            return self._ids, self._times


def newer_than(times_desc: np.ndarray, t: float, inclusive: bool = False) -> int:
    """How many of ``times_desc`` (descending) are after ``t`` (at or after, ``inclusive``): a
    binary search on the reversed view, no copy of the array."""
    return len(times_desc) - int(np.searchsorted(times_desc[::-1], t, side="left" if inclusive else "right"))
