"""Row ids newest first, for ranking by recency (retrieval's ``_ranked_newest_first``).

Built from the store's id-sorted time table and kept up to date cheaply: rows are appended to
that table as they are stored, and usually they are the newest, so they go in front; a row
older than the newest (a late resend) or a delete (the table is reloaded, its version bumped)
sorts everything again. The times are also kept negated (ascending), so finding an age in
them is a binary search with no copy of a million-row array per question.
"""
from __future__ import annotations

import threading

import numpy as np


class NewestFirst:
    def __init__(self):
        self._lock = threading.Lock()
        self._ids = np.zeros(0, np.int64)
        self._times = np.zeros(0, np.float64)          # descending
        self._negated = np.zeros(0, np.float64)        # -times: ascending, for np.searchsorted
        self._rows, self._version = 0, None            # how much of which time table is ordered

    def order(self, time_ids: np.ndarray, time_vals: np.ndarray,
              version: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids, times, -times) newest first, of a time table (ids ascending, appended to
        between versions)."""
        with self._lock:
            rows = len(time_ids)
            if version == self._version and rows == self._rows:
                return self._ids, self._times, self._negated
            tail_ids, tail_times = time_ids[self._rows:], time_vals[self._rows:]
            if version == self._version and rows > self._rows and \
                    (not len(self._times) or float(tail_times.min()) >= float(self._times[0])):
                order = np.argsort(-tail_times, kind="stable")
                self._ids = np.concatenate([tail_ids[order], self._ids])
                self._times = np.concatenate([tail_times[order], self._times])
            else:
                order = np.argsort(-time_vals, kind="stable")
                self._ids, self._times = time_ids[order], time_vals[order]
            self._negated = -self._times
            self._rows, self._version = rows, version
            return self._ids, self._times, self._negated
