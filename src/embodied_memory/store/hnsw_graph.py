"""An HNSW graph that can forget, behind FaissVectorIndex's ``hnsw`` kind.

FAISS's IndexHNSWFlat cannot delete a vector. Here a removed row is masked (never returned,
not counted) and a row added again after its removal (a description re-embedded when a person
is forgotten) goes to a small exact overlay searched beside the graph, so neither waits for a
rebuild. ``dirty`` says the graph holds masked rows or has an overlay: the next snapshot
rebuilds it without them (a snapshot is only ever written of a clean graph, so it needs no
list of masks). A filter (``subset``) of up to ``SUBSET_EXACT_MAX`` rows is scored exactly from
the graph's stored vectors: a graph search under a selective filter finds few of them.
Not thread-safe by itself: FaissVectorIndex calls it under its lock.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .stored_vectors import StoredVectors

M = 32                        # graph degree
EF_CONSTRUCTION = 80
EF_SEARCH = 128               # at least; a search for k neighbours uses max(k, this)
SUBSET_EXACT_MAX = 200_000


class MaskedGraph:
    kind = "hnsw"

    def __init__(self, faiss, dim: int, graph=None):
        """``graph``: an IndexIDMap2 over IndexHNSWFlat (read from a snapshot), or None: empty."""
        self._faiss, self.dim = faiss, dim
        if graph is None:
            hnsw = faiss.IndexHNSWFlat(dim, M, faiss.METRIC_INNER_PRODUCT)
            hnsw.hnsw.efConstruction = EF_CONSTRUCTION
            hnsw.hnsw.efSearch = EF_SEARCH
            graph = faiss.IndexIDMap2(hnsw)
        self.graph = graph
        self._masked: set[int] = set()
        self._overlay = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
        self._stored = StoredVectors(faiss, self.graph)

    @classmethod
    def build(cls, faiss, dim: int, ids: np.ndarray, vectors: np.ndarray) -> "MaskedGraph":
        graph = cls(faiss, dim)
        if len(ids):
            graph.graph.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), np.asarray(ids, np.int64))
        return graph

    @staticmethod
    def holds_graph(faiss, index) -> bool:
        """Whether a FAISS index read from disk is one of these graphs."""
        index = faiss.downcast_index(index)
        return isinstance(index, faiss.IndexIDMap2) and isinstance(faiss.downcast_index(index.index), faiss.IndexHNSW)

    @property
    def ntotal(self) -> int:
        return int(self.graph.ntotal) - len(self._masked) + int(self._overlay.ntotal)

    @property
    def dirty(self) -> bool:
        return bool(self._masked) or self._overlay.ntotal > 0

    def _graph_ids(self) -> np.ndarray:
        return self._faiss.vector_to_array(self.graph.id_map).astype(np.int64)

    def ids(self) -> np.ndarray:
        """Every live id (graph rows not masked, then the overlay's)."""
        ids = self._graph_ids()
        if self._masked:
            ids = ids[~np.isin(ids, np.fromiter(self._masked, np.int64))]
        return np.concatenate([ids, self._faiss.vector_to_array(self._overlay.id_map).astype(np.int64)])

    def held(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, vectors) of every live row: what a rebuild is built from."""
        storage = self._faiss.downcast_index(self._faiss.downcast_index(self.graph.index).storage)
        vecs = storage.reconstruct_n(0, self.graph.ntotal)
        ids = self._graph_ids()
        if self._masked:
            keep = ~np.isin(ids, np.fromiter(self._masked, np.int64))
            ids, vecs = ids[keep], vecs[keep]
        over = self._faiss.downcast_index(self._overlay.index).reconstruct_n(0, self._overlay.ntotal)
        return (np.concatenate([ids, self._faiss.vector_to_array(self._overlay.id_map).astype(np.int64)]),
                np.concatenate([vecs, over]))

    def add_with_ids(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        ids = np.asarray(ids, np.int64)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        again = np.isin(ids, np.fromiter(self._masked, np.int64)) if self._masked else np.zeros(len(ids), bool)
        if again.any():                      # the graph keeps the old vector masked; the new one is exact
            self._overlay.remove_ids(ids[again])
            self._overlay.add_with_ids(vectors[again], ids[again])
        if (~again).any():
            self.graph.add_with_ids(vectors[~again], ids[~again])

    def remove_ids(self, ids: np.ndarray) -> None:
        ids = np.asarray(ids, np.int64)
        self._overlay.remove_ids(ids)
        self._masked.update(ids[np.isin(ids, self._graph_ids())].tolist())

    def search(self, query: np.ndarray, k: int, subset: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray]:
        faiss = self._faiss
        k = max(1, min(k, self.ntotal))
        if subset is not None and len(subset) <= SUBSET_EXACT_MAX:
            ids, sims = self._score_subset(query[0], np.asarray(subset, np.int64), k)
        else:
            allowed = None if subset is None else np.asarray(subset, np.int64)
            masked = np.fromiter(self._masked, np.int64) if self._masked else None
            if allowed is not None and masked is not None:
                allowed = allowed[~np.isin(allowed, masked)]
            selector = (faiss.IDSelectorBatch(allowed) if allowed is not None else
                        faiss.IDSelectorNot(faiss.IDSelectorBatch(masked)) if masked is not None else None)
            params = faiss.SearchParametersHNSW(efSearch=max(EF_SEARCH, k), sel=selector)
            sims, ids = self.graph.search(query, k, params=params)
            keep = ids[0] >= 0
            ids, sims = ids[0][keep], sims[0][keep]
        if self._overlay.ntotal and (subset is None or len(subset) > SUBSET_EXACT_MAX):   # rows added again
            params = None if subset is None else faiss.SearchParameters(
                sel=faiss.IDSelectorBatch(np.asarray(subset, np.int64)))
            osims, oids = self._overlay.search(query, min(k, self._overlay.ntotal), params=params)
            keep = oids[0] >= 0
            ids, sims = np.concatenate([ids, oids[0][keep]]), np.concatenate([sims, osims[0][keep]])
            order = np.argsort(-sims, kind="stable")[:k]
            ids, sims = ids[order], sims[order]
        return ids, sims

    def score_ids(self, query: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Exact similarities of ``query`` to the rows ``ids`` (-inf for a row not held)."""
        ids = np.asarray(ids, np.int64)
        sims, held = self._stored.score(query, ids)
        if self._masked and held.any():
            sims[np.isin(ids, np.fromiter(self._masked, np.int64))] = -np.inf
        if self._overlay.ntotal:
            over = np.flatnonzero(np.isin(ids, self._faiss.vector_to_array(self._overlay.id_map)))
            for i in over:
                sims[i] = float(self._overlay.reconstruct(int(ids[i])) @ query)
        return sims

    def _score_subset(self, query: np.ndarray, subset: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        sims = self.score_ids(query, subset)
        held = np.isfinite(sims)
        ids, sims = subset[held], sims[held]
        if len(ids) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        k = min(k, len(ids))
        top = np.argpartition(-sims, k - 1)[:k] if k < len(ids) else np.arange(len(ids))
        top = top[np.argsort(-sims[top], kind="stable")]
        return ids[top], sims[top]
