"""Exact similarities of a query to rows by id, read from a FAISS index's own vector storage.

Used by the flat index (IndexIDMap2 over IndexFlatIP) and the HNSW graph (IndexIDMap2 over
IndexHNSWFlat): both keep their vectors in one contiguous float32 array, in the order they were
added, with an id map beside it. ``StoredVectors`` keeps the id map sorted (ids -> positions),
extended cheaply while rows are appended with growing ids (the usual case: SQLite row ids) and
re-sorted only after a removal or an out-of-order add. Rows that lie close together in the
storage (the newest rows a recency ranking scores first were added together) are scored as one
slice: a matrix product over a slice runs at memory speed, a gather of scattered rows ~5x slower.
"""
from __future__ import annotations

import numpy as np

SLICE_SPAN = 2          # score a slice when it is at most this many times the rows wanted


def find_sorted(sorted_ids: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions, held): where each of ``ids`` is in ``sorted_ids`` (ascending, unique), and
    whether it is there at all (a position of a missing id is any valid one). Consecutive ids
    (SQLite row ids with nothing deleted) are found by subtraction: a binary search over a
    million ids costs ~1 ms per few thousand lookups in a process that holds the indexes."""
    ids = np.asarray(ids, np.int64)
    size = len(sorted_ids)
    if not size:
        return np.zeros(len(ids), np.int64), np.zeros(len(ids), bool)
    first = int(sorted_ids[0])
    if int(sorted_ids[-1]) - first + 1 == size:
        at = ids - first
        at = np.where((at >= 0) & (at < size), at, 0)
        return at, sorted_ids[at] == ids          # checked: an unsorted or repeated input finds nothing wrong
    at = np.minimum(np.searchsorted(sorted_ids, ids), size - 1)
    return at, sorted_ids[at] == ids


class StoredVectors:
    """Not thread-safe by itself: its owners call it under their lock."""

    def __init__(self, faiss, id_mapped):
        """``id_mapped``: an IndexIDMap2 whose inner index is, or stores in, an IndexFlat."""
        self._faiss = faiss
        self.index = id_mapped
        self._sorted_ids = np.zeros(0, np.int64)
        self._positions = np.zeros(0, np.int64)
        self._covered = 0          # how many of the id map's entries the sorted arrays hold

    def forget_order(self) -> None:
        """After a removal: positions moved (flat) or the caller wants a fresh map."""
        self._sorted_ids, self._positions, self._covered = np.zeros(0, np.int64), np.zeros(0, np.int64), 0

    def _storage(self):
        inner = self._faiss.downcast_index(self.index.index)
        return self._faiss.downcast_index(inner.storage) if hasattr(inner, "storage") else inner

    def _update(self) -> None:
        total = int(self.index.ntotal)
        if total == self._covered:
            return
        ids = self._faiss.vector_to_array(self.index.id_map).astype(np.int64)
        tail = ids[self._covered:]
        if total > self._covered and len(tail) and np.all(np.diff(tail) > 0) and \
                (not len(self._sorted_ids) or tail[0] > self._sorted_ids[-1]):
            self._sorted_ids = np.concatenate([self._sorted_ids, tail])
            self._positions = np.concatenate([self._positions, np.arange(self._covered, total, dtype=np.int64)])
        else:
            order = np.argsort(ids, kind="stable")
            self._sorted_ids, self._positions = ids[order], order.astype(np.int64)
        self._covered = total

    def score(self, query: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(similarities, held): exact inner products of ``query`` (1-d) with the rows ``ids``;
        ``held`` is False (similarity -inf) for an id the storage does not hold."""
        self._update()
        ids = np.asarray(ids, np.int64)
        sims = np.full(len(ids), -np.inf, np.float32)
        if not len(self._sorted_ids) or not len(ids):
            return sims, np.zeros(len(ids), bool)
        at, held = find_sorted(self._sorted_ids, ids)
        if not held.any():
            return sims, held
        positions = self._positions[at[held]]
        storage = self._storage()
        dim = int(storage.d)
        xb = self._faiss.rev_swig_ptr(storage.get_xb(), int(storage.ntotal) * dim).reshape(-1, dim)
        low, high = int(positions.min()), int(positions.max()) + 1
        if high - low <= SLICE_SPAN * len(positions):
            sims[held] = (xb[low:high] @ query)[positions - low]
        else:
            sims[held] = xb[positions] @ query
        return sims, held
