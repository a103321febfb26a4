"""Vector indexes behind one small interface, keyed by the SQLite row id.

``FaissVectorIndex`` (embedded default): exact inner product (IndexFlatIP) up to
``approximate_min_vectors``, then an approximate index built from its vectors (by the next
snapshot, in the background): ``hnsw`` (a graph that can forget, hnsw_graph.py; searched with
efSearch >= k; a filter of up to ``SUBSET_EXACT_MAX`` rows scored exactly; recency ranking
scores the newest rows exactly, store/retrieval.py) or ``ivf`` (nlist ~ sqrt(n), nprobe 32; a
filter probes every list). Either way an on-disk snapshot records the last row id and the store's
generation, so a restart only adds what came after the snapshot and a stale or corrupt
snapshot is rebuilt. How close each comes to exact is measured (recall@30 in
bench/store_bench.py), not assumed.

A snapshot is trusted only when its metadata matches it (generation, dimension and vector
count); any mismatch between snapshot, metadata and SQLite (a crash between writing the two
files, a copied file) rebuilds from SQLite, so the index holds exactly one vector per row.

``MilvusVectorIndex`` (fleets): the same calls on a Milvus collection; a ``milvus_uri``
ending in ``.db`` runs Milvus Lite in-process.  ``add`` is an upsert and the count is read
back from Milvus, so a re-sent row never drifts it; on open only the rows Milvus lacks (or
holds without a SQLite row) are synchronised.

Vectors are L2-normalised by the caller, so inner product = cosine similarity.
"""
from __future__ import annotations

import json
import logging
import math
import os
import threading
from pathlib import Path
from typing import Callable, Iterator, Optional, Protocol

import numpy as np

from .hnsw_graph import SUBSET_EXACT_MAX, MaskedGraph
from .stored_vectors import StoredVectors

log = logging.getLogger(__name__)


class CannotScoreIds(TypeError):
    """The index (IVF, or one that became IVF since the caller checked) holds no rows to score by id."""


class VectorIndex(Protocol):
    dim: int
    candidates: int  # how many nearest neighbours a ranked query fetches first for re-scoring
    max_k: int       # the most one search returns (a ranked query widens up to it)

    def limit_for(self, subset_size: Optional[int]) -> int: ...   # the widest search (for a filter of that size)
    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None: ...
    def remove(self, ids: np.ndarray) -> None: ...
    def search(self, vector: np.ndarray, k: int, subset: Optional[np.ndarray] = None
               ) -> tuple[np.ndarray, np.ndarray]: ...
    def count(self) -> int: ...
    def checkpoint(self, max_id: int, generation: int) -> None: ...
    def close(self) -> None: ...


Batches = Iterator[tuple[np.ndarray, np.ndarray]]
SNAPSHOT_COPY_MAX_BYTES = 1 << 30      # a larger index is written under its lock (no 2nd copy in RAM)
APPROXIMATE_INDEXES = ("hnsw", "ivf")
HNSW_MAX_K = 16384            # the widest ranked search on a graph (efSearch = k)
_query_thread = threading.local()


def _one_thread_per_query(faiss) -> None:
    """A single query runs on the calling thread alone: FAISS's OpenMP threads split one query
    across the cores and spin while a core is busy (on a robot it always is: perception runs
    beside the store), 3-4x slower than one thread on 2 cores. OpenMP's thread count is a
    per-thread setting, so the background index builds keep every core."""
    if not getattr(_query_thread, "set", False):
        faiss.omp_set_num_threads(1)
        _query_thread.set = True


class FaissVectorIndex:
    def __init__(self, path: Path, dim: int, *, approximate_min_vectors: int = 200_000, nprobe: int = 32,
                 approximate: str = "hnsw"):
        import faiss  # imported here: the Milvus backend does not need it
        if approximate not in APPROXIMATE_INDEXES:
            raise ValueError(f"approximate index {approximate!r}: one of {', '.join(APPROXIMATE_INDEXES)}")
        self._faiss = faiss
        self.path = Path(path)
        self.meta_path = self.path.with_suffix(".json")
        self.dim = dim
        self.approximate_min_vectors = approximate_min_vectors
        self.nprobe = nprobe
        self.approximate = approximate
        self._lock = threading.RLock()
        self._snapshot_lock = threading.Lock()
        self._index = self._new_flat()       # IndexIDMap2(IndexFlatIP) | MaskedGraph | IndexIVFFlat
        self._flat_stored: Optional[StoredVectors] = None     # the flat index's rows by id (score_ids)
        self.max_id = 0        # highest row id the snapshot (or memory) holds
        self.generation = -1

    def _new_flat(self):
        return self._faiss.IndexIDMap2(self._faiss.IndexFlatIP(self.dim))

    @property
    def kind(self) -> str:
        """flat: IndexIDMap2(IndexFlatIP); hnsw: a MaskedGraph; ivf: IndexIVFFlat with its own
        ids (an id map over IVF would renumber wrongly on remove_ids)."""
        if isinstance(self._index, MaskedGraph):
            return "hnsw"
        return "ivf" if isinstance(self._faiss.downcast_index(self._index), self._faiss.IndexIVF) else "flat"

    @property
    def candidates(self) -> int:
        """How many nearest neighbours a ranked query fetches first (then widened)."""
        return 256 if self.kind == "hnsw" else 2048

    @property
    def max_k(self) -> int:
        return HNSW_MAX_K if self.kind == "hnsw" else 2**62      # flat, ivf: every vector

    def limit_for(self, subset_size: Optional[int]) -> int:
        """The widest ranked search: a graph scores a filter of up to SUBSET_EXACT_MAX rows
        exactly, so it can widen to all of them."""
        if self.kind == "hnsw" and subset_size is not None and subset_size <= SUBSET_EXACT_MAX:
            return subset_size
        return self.max_k

    @property
    def wants_rebuild(self) -> bool:
        """Past the flat size (or holding another approximate kind than configured), or a graph
        with masked / re-added rows: the next snapshot builds the approximate index first."""
        with self._lock:
            return (self.count() >= self.approximate_min_vectors and self.kind != self.approximate) or \
                (self.kind == "hnsw" and self._index.dirty)

    # -- persistence --------------------------------------------------------------------------
    def open(self, generation: int, rows_after: Callable[[int], Batches], count_rows: Callable[[], int]) -> None:
        """Load the snapshot if it matches ``generation`` and its metadata; else rebuild from
        ``rows_after(0)`` (a flat index: the approximate one is built by the next snapshot, in
        the background, while this one answers).  Rows newer than the snapshot are added from
        ``rows_after(max_id)`` (never twice).  Then the index must hold exactly ``count_rows()``
        vectors, else it is rebuilt (``count_rows`` reads a partial index of the rows with a vector)."""
        loaded = False
        if self.path.exists() and self.meta_path.exists():
            try:
                meta = json.loads(self.meta_path.read_text())
                if meta.get("generation") == generation and meta.get("dim") == self.dim:
                    index = self._faiss.read_index(str(self.path))  # already the concrete type
                    if index.d != self.dim:
                        raise ValueError("dimension mismatch")
                    kind = "hnsw" if MaskedGraph.holds_graph(self._faiss, index) else \
                        "ivf" if isinstance(index, self._faiss.IndexIVF) else "flat"
                    if int(meta.get("count", -1)) != index.ntotal:
                        log.warning("%s holds %d vectors, its metadata says %s (written apart by a crash?): "
                                    "rebuilding from SQLite", self.path.name, index.ntotal, meta.get("count"))
                    elif kind not in ("flat", self.approximate):
                        log.warning("%s is an %s index, the configuration says %s: rebuilding from SQLite",
                                    self.path.name, kind.upper(), self.approximate.upper())
                    else:
                        self._index = MaskedGraph(self._faiss, self.dim, index) if kind == "hnsw" else index
                        self.max_id = int(meta["max_id"])
                        loaded = True
                else:
                    log.warning("%s is stale (generation %s, store %s): rebuilding",
                                self.path.name, meta.get("generation"), generation)
            except Exception as exc:  # noqa: BLE001 - any damage means rebuild
                log.warning("%s is unreadable (%s): rebuilding from SQLite", self.path.name, exc)
        total_rows = None
        if not loaded:
            total_rows = count_rows()
            if total_rows and self.meta_path.exists() and not self.path.exists():
                log.warning("%s is missing: rebuilding from SQLite", self.path.name)
            elif total_rows and not self.path.exists():
                log.info("building %s from SQLite (%d vectors)", self.path.name, total_rows)
            self._index = self._new_flat()
            self.max_id = 0
        self.generation = generation
        added = self._add_batches(self._unindexed(rows_after(self.max_id)) if loaded else rows_after(self.max_id),
                                  total_rows, f"indexing {self.path.stem}")
        if loaded:
            expected = count_rows()
            if self.count() != expected:
                log.warning("%s holds %d vectors for %d rows with one: rebuilding from SQLite",
                            self.path.name, self.count(), expected)
                self._index = self._new_flat()
                self.max_id = 0
                added = self._add_batches(rows_after(0), expected, f"indexing {self.path.stem}")
                loaded = False
        if (not loaded or added) and not self.wants_rebuild:
            self.checkpoint(self.max_id, generation)   # else the store's background snapshot builds, then writes

    def _ids(self) -> Optional[np.ndarray]:
        """The ids a flat or hnsw index holds (None for IVF: no cheap list)."""
        if self.kind == "ivf":
            return None
        if self.kind == "hnsw":
            return self._index.ids()
        return self._faiss.vector_to_array(self._index.id_map).astype(np.int64)

    def _unindexed(self, batches: Batches) -> Batches:
        """Catch-up batches without the ids the index already holds (a snapshot written after
        its metadata holds rows newer than the metadata's max_id)."""
        held = self._ids()
        for ids, vectors in batches:
            if held is not None:
                keep = ~np.isin(ids, held)
            else:
                keep = np.ones(len(ids), dtype=bool)
                with self._lock:
                    self._index.remove_ids(np.asarray(ids, dtype=np.int64))  # upsert: never twice
            if keep.any():
                yield ids[keep], vectors[keep]

    def _add_batches(self, batches: Batches, total: Optional[int], label: str) -> int:
        added = 0
        progress = None
        if total and total > 50_000:
            from ..progress import progress_bar
            progress = progress_bar(total=total, desc=label, unit="vec", leave=False)
        for ids, vectors in batches:
            self.add(ids, vectors)
            added += len(ids)
            if progress is not None:
                progress.update(len(ids))
        if progress is not None:
            progress.close()
        return added

    def _new_approximate(self, ids: np.ndarray, vecs: np.ndarray):
        if self.approximate == "hnsw":
            log.info("building the HNSW graph for %s: %d vectors", self.path.stem, len(ids))
            return MaskedGraph.build(self._faiss, self.dim, ids, vecs)
        faiss = self._faiss
        nlist = int(min(4096, max(16, math.sqrt(len(ids)))))     # 447 lists at 200k, 1000 at 1M
        log.info("building the IVF index for %s: %d vectors, nlist %d", self.path.stem, len(ids), nlist)
        ivf = faiss.IndexIVFFlat(faiss.IndexFlatIP(self.dim), self.dim, nlist, faiss.METRIC_INNER_PRODUCT)
        rng = np.random.default_rng(0)
        sample = vecs[rng.choice(len(vecs), size=min(len(vecs), 40 * nlist), replace=False)]
        ivf.train(sample)
        ivf.nprobe = self.nprobe
        ivf.add_with_ids(vecs, ids)
        return ivf

    def _held_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, vectors) of every live row of a flat or hnsw index, sorted by id (under the lock)."""
        if self.kind == "hnsw":
            ids, vecs = self._index.held()
        else:
            vecs = self._faiss.downcast_index(self._index.index).reconstruct_n(0, self._index.ntotal)
            ids = self._faiss.vector_to_array(self._index.id_map).astype(np.int64)
        order = np.argsort(ids, kind="stable")
        return ids[order], vecs[order]

    def _rebuild_outside_lock(self) -> None:
        """Build the approximate index (``wants_rebuild``) from a copy of the vectors while adds,
        removes and searches go on; then, under the lock, swap it in and apply what changed
        meanwhile through the normal paths: rows added, removed, or replaced by a new vector
        (a re-embedded description: the copy's old one must not survive)."""
        with self._lock:
            if not self.wants_rebuild or self.kind == "ivf":   # an IVF index is never rebuilt from itself
                return
            ids, vecs = self._held_vectors()
        fresh = self._new_approximate(ids, vecs)
        with self._lock:
            ids_now, vecs_now = self._held_vectors()
            self._index, self._flat_stored = fresh, None      # the flat index's id map goes with it
            gone = ids[~np.isin(ids, ids_now)]
            if len(gone):
                self._index.remove_ids(gone)
            common = np.isin(ids_now, ids)
            at = np.searchsorted(ids, ids_now[common])
            replaced = ids_now[common][np.any(vecs[at] != vecs_now[common], axis=1)]
            if len(replaced):
                self._index.remove_ids(replaced)
            renew = ~common | np.isin(ids_now, replaced)
            if renew.any():
                self._index.add_with_ids(np.ascontiguousarray(vecs_now[renew]), ids_now[renew])

    def checkpoint(self, max_id: int, generation: int) -> None:
        """Write the snapshot (after building the approximate index if it is due): the index is
        copied to memory under its lock (adds and searches wait for a copy, never for the disk;
        above SNAPSHOT_COPY_MAX_BYTES of vectors it is written under the lock instead), then
        written to a temporary file, synced and renamed over the old one, then its metadata (the
        snapshot's own highest id and count: a crash between the two is seen at the next start
        and rebuilt from SQLite). Snapshots are written one at a time, in the order their copies
        were taken. A graph that got masked rows while it was being built is not written (a
        snapshot never holds masks): the next snapshot rebuilds it."""
        with self._snapshot_lock:
            self._rebuild_outside_lock()
            with self._lock:
                if self.kind == "hnsw" and self._index.dirty:
                    log.info("%s: rows were removed while its graph was built; the snapshot waits for the next one",
                             self.path.stem)
                    return
                index = self._index.graph if self.kind == "hnsw" else self._index
                meta = {"generation": generation, "max_id": self.max_id, "dim": self.dim, "count": int(index.ntotal)}
                self.generation = generation
                tmp = self.path.with_suffix(".faiss.tmp")
                if meta["count"] * self.dim * 4 > SNAPSHOT_COPY_MAX_BYTES:   # no second copy in memory:
                    self._faiss.write_index(index, str(tmp))                # written under the lock
                    data = None
                else:
                    data = self._faiss.serialize_index(index)
            with open(tmp, "r+b") if data is None else open(tmp, "wb") as f:
                if data is not None:
                    f.write(memoryview(data))
                    f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            meta_tmp = self.meta_path.with_suffix(".json.tmp")
            meta_tmp.write_text(json.dumps(meta))
            os.replace(meta_tmp, self.meta_path)

    # -- data ---------------------------------------------------------------------------------
    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        if len(ids) == 0:
            return
        ids = np.asarray(ids, dtype=np.int64)
        with self._lock:
            self._index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), ids)
            self.max_id = max(self.max_id, int(np.max(ids)))

    def remove(self, ids: np.ndarray) -> None:
        if len(ids):
            with self._lock:
                self._index.remove_ids(np.asarray(ids, dtype=np.int64))
                if self._flat_stored is not None:
                    self._flat_stored.forget_order()      # a flat index moved its rows up

    def search(self, vector, k, subset=None):
        faiss = self._faiss
        query = np.ascontiguousarray(vector, dtype=np.float32).reshape(1, -1)
        _one_thread_per_query(faiss)
        with self._lock:
            if self.count() == 0:
                return np.zeros(0, np.int64), np.zeros(0, np.float32)
            if self.kind == "hnsw":
                return self._index.search(query, k, subset)
            k = min(k, self.count())
            params = None
            if subset is not None:
                selector = faiss.IDSelectorBatch(np.asarray(subset, dtype=np.int64))
                if self.kind == "ivf":  # a filter must not depend on which lists are probed
                    params = faiss.SearchParametersIVF(sel=selector, nprobe=self._index.nlist)
                else:
                    params = faiss.SearchParameters(sel=selector)
            sims, ids = self._index.search(query, k, params=params)
        keep = ids[0] >= 0
        return ids[0][keep], sims[0][keep]

    def count(self) -> int:
        return int(self._index.ntotal)

    @property
    def scores_ids(self) -> bool:
        """Whether ``score_ids`` is available (flat and hnsw: their stored vectors by id; not IVF)."""
        return self.kind != "ivf"

    def scores_filter_by_id(self, subset_size: int) -> bool:
        """Whether a filter of this many rows is searched best by scoring each of its rows
        (``score_ids``): exact, and cheaper than a flat scan with a selector or a graph search
        that finds few of them."""
        return self.kind == "flat" or (self.kind == "hnsw" and subset_size <= SUBSET_EXACT_MAX)

    def score_ids(self, vector, ids: np.ndarray) -> np.ndarray:
        """Exact similarities to the rows ``ids`` (-inf for a row not held); flat and hnsw."""
        query = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
        with self._lock:
            if self.kind == "hnsw":
                return self._index.score_ids(query, ids)
            if self.kind != "flat":
                raise CannotScoreIds(f"{self.path.stem}: an {self.kind.upper()} index cannot score rows by id")
            if self._flat_stored is None or self._flat_stored.index is not self._index:
                self._flat_stored = StoredVectors(self._faiss, self._index)
            return self._flat_stored.score(query, ids)[0]

    def close(self) -> None:
        pass


class MilvusVectorIndex:
    """One Milvus collection (id INT64 primary key, vector FLOAT_VECTOR, inner product).

    ``token`` or ``user`` + ``password`` authenticate with a Milvus server (the store reads
    them from the environment, see ``milvus_credentials``)."""

    candidates = 256  # result size is what Milvus (Lite especially) pays for
    max_k = 16384     # Milvus' topk limit
    _FILTER_IDS = 1000  # ids per "id in [...]" filter

    def __init__(self, uri: str, collection: str, dim: int, token: str = "", user: str = "", password: str = ""):
        try:
            from pymilvus import DataType, MilvusClient
        except ImportError as exc:
            raise RuntimeError("backend 'milvus' needs pymilvus (and milvus-lite for a .db uri)") from exc
        if uri.endswith(".db"):
            Path(uri).parent.mkdir(parents=True, exist_ok=True)
        auth = {k: v for k, v in (("token", token), ("user", user), ("password", password)) if v}
        try:
            self._client = MilvusClient(uri=uri, **auth)
        except Exception as exc:  # noqa: BLE001
            raise RuntimeError(f"milvus_uri '{uri}': cannot connect: {exc}") from exc
        self.dim = dim
        self.collection = collection
        if not self._client.has_collection(collection):
            schema = self._client.create_schema(auto_id=False, enable_dynamic_field=False)
            schema.add_field("id", DataType.INT64, is_primary=True)
            schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
            index_params = self._client.prepare_index_params()
            index_params.add_index(field_name="vector", index_type="FLAT", metric_type="IP")
            self._client.create_collection(collection, schema=schema, index_params=index_params)
        else:
            desc = self._client.describe_collection(collection)
            for fld in desc.get("fields", []):
                if fld.get("name") == "vector" and int(fld.get("params", {}).get("dim", dim)) != dim:
                    raise RuntimeError(f"Milvus collection '{collection}' has dim "
                                       f"{fld['params']['dim']}, configuration says {dim}")
        self._client.load_collection(collection)
        self._count: Optional[int] = None   # None: read back from Milvus on the next count()

    def limit_for(self, subset_size: Optional[int]) -> int:
        return self.max_k

    def open(self, generation: int, rows_after, count_rows) -> None:
        """Milvus is itself durable; add the rows SQLite has that Milvus lacks (a crash between
        the two) and delete the ones SQLite no longer has, without re-sending the others."""
        have = self.count()
        total_rows = count_rows()
        if have == total_rows:
            return
        log.warning("Milvus collection %s holds %d vectors, SQLite %d: synchronising", self.collection, have,
                    total_rows)
        sqlite_ids = []
        added = 0
        for ids, vectors in rows_after(0):
            sqlite_ids.append(ids)
            present = self._present(ids)
            missing = ~np.isin(ids, present)
            if missing.any():
                self.add(ids[missing], vectors[missing])
                added += int(missing.sum())
        removed = 0
        if self.count() != total_rows:
            known = set(np.concatenate(sqlite_ids).tolist()) if sqlite_ids else set()
            extra = [i for i in self._all_ids() if i not in known]
            self.remove(np.array(extra, dtype=np.int64))
            removed = len(extra)
        log.warning("Milvus collection %s: added %d, removed %d vectors; now %d", self.collection, added,
                    removed, self.count())

    def _present(self, ids: np.ndarray) -> np.ndarray:
        found = []
        for start in range(0, len(ids), self._FILTER_IDS):
            chunk = ids[start:start + self._FILTER_IDS]
            rows = self._client.query(self.collection, filter=f"id in [{','.join(str(int(i)) for i in chunk)}]",
                                      output_fields=["id"])
            found += [int(r["id"]) for r in rows]
        return np.array(found, dtype=np.int64)

    def _all_ids(self) -> list[int]:
        it = self._client.query_iterator(self.collection, batch_size=10_000, filter="id >= 0", output_fields=["id"])
        out: list[int] = []
        try:
            while True:
                batch = it.next()
                if not batch:
                    return out
                out += [int(r["id"]) for r in batch]
        finally:
            it.close()

    def add(self, ids, vectors):
        """Upsert: a row already there is replaced, never counted twice."""
        if len(ids) == 0:
            return
        rows = [{"id": int(i), "vector": np.asarray(v, np.float32).tolist()} for i, v in zip(ids, vectors)]
        for start in range(0, len(rows), 2000):
            self._client.upsert(self.collection, rows[start:start + 2000])
        self._count = None

    def remove(self, ids):
        ids = [int(i) for i in ids]
        for start in range(0, len(ids), 5000):
            self._client.delete(self.collection, ids=ids[start:start + 5000])
        if ids:
            self._count = None

    def search(self, vector, k, subset=None):
        kwargs = {}
        if subset is not None:
            if len(subset) == 0:
                return np.zeros(0, np.int64), np.zeros(0, np.float32)
            kwargs["filter"] = f"id in [{','.join(str(int(i)) for i in subset)}]"
        k = max(1, min(int(k), self.max_k))
        hits = self._client.search(self.collection, data=[np.asarray(vector, np.float32).tolist()],
                                   limit=k, anns_field="vector",
                                   search_params={"metric_type": "IP"}, **kwargs)[0]
        ids = np.array([h["id"] for h in hits], dtype=np.int64)
        sims = np.array([h["distance"] for h in hits], dtype=np.float32)
        return ids, sims

    def _query_count(self) -> int:
        res = self._client.query(self.collection, filter="", output_fields=["count(*)"],
                                 consistency_level="Strong")
        return int(res[0]["count(*)"]) if res else 0

    def count(self) -> int:
        if self._count is None:
            self._count = self._query_count()
        return self._count

    def checkpoint(self, max_id: int, generation: int) -> None:
        self._client.flush(self.collection)

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:  # noqa: BLE001
            pass
