"""The vector indexes' life: opened on first use, fed from SQLite, snapshotted, closed.

``_index(kind)`` opens the text or image index (``vector_index.py``: FAISS or Milvus, with
``milvus_credentials`` from the environment) and lets it catch up from SQLite
(``_vector_batches``); ``checkpoint`` writes snapshots (every ``checkpoint_every`` inserts
in a background thread, after a delete with the new generation); ``warm_up`` opens every
index and loads the text embedder (``text_embedder`` / ``embed_text``) ahead of the first
call.  A snapshot is only a cache of SQLite: one that cannot be written is logged.
"""
from __future__ import annotations

import logging
import threading

import numpy as np

from .errors import StoreError
from .params import StoreParams
from .vector_index import FaissVectorIndex, MilvusVectorIndex

log = logging.getLogger(__package__ + ".memory_store")   # the store's one logger (as before the split)


class IndexLifecycleMixin:
    """The vector indexes and the text embedder of :class:`MemoryStore`.

    Relies on: ``params``, ``data_dir``, ``db_path``, ``_local``, ``_indexes``,
    ``_index_lock``, ``_text_embedder``, ``_checkpointer``, ``_checkpointer_lock`` and
    ``_inserted_since_checkpoint`` (set by ``MemoryStore.__init__``); ``_conn`` and
    ``_generation`` (records)."""

    VECTOR_KINDS = ("text", "image")

    def _index(self, kind: str):
        """The vector index of ``kind``, opened on first use (a time or person query never waits
        for vectors; a restart answers its first query sooner)."""
        index = self._indexes.get(kind)
        if index is not None:
            return index
        with self._index_lock:
            if kind in self._indexes:
                return self._indexes[kind]
            column, dim = {"text": ("text_emb", self.params.text_dim), "image": ("image_emb", self.params.image_dim)}[kind]
            if self.params.backend == "milvus":
                uri = self.params.milvus_uri or str(self.data_dir / "milvus.db")
                index = MilvusVectorIndex(uri, f"em_{kind}", dim, **milvus_credentials(self.params))
            else:
                index = FaissVectorIndex(self.data_dir / f"{kind}.faiss", dim,
                                         approximate_min_vectors=self.params.approximate_min_vectors,
                                         approximate=getattr(self.params, f"{kind}_approximate_index"))

            def count_rows() -> int:
                return self._conn().execute(f"SELECT COUNT(*) FROM observations INDEXED BY obs_{kind}_vec "
                                            f"WHERE {column} IS NOT NULL").fetchone()[0]

            index.open(self._generation(), lambda after: self._vector_batches(column, after), count_rows)
            self._indexes[kind] = index
            if getattr(index, "wants_rebuild", False):   # past the flat size: built by a background snapshot
                self._checkpoint_in_background()
            return index

    def _vector_batches(self, column: str, after_id: int, batch: int = 20_000, conn=None):
        """(ids, vectors) of the rows after ``after_id``; on a connection of its own unless one is
        given (an index's first fill is long: it never holds this thread's connection)."""
        own = conn is None
        conn = self._connect() if own else conn
        try:
            last = after_id
            while True:
                rows = conn.execute(f"SELECT id, {column} FROM observations WHERE id > ? AND {column} "
                                    f"IS NOT NULL ORDER BY id LIMIT ?", (last, batch)).fetchall()
                if not rows:
                    return
                ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                vecs = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
                yield ids, vecs
                last = int(ids[-1])
        finally:
            if own:
                conn.close()

    def follow_other_writers(self) -> None:
        """On a fleet server (backend postgres), take in what other robots committed since this
        process last looked: their rows' times and vectors, or everything again after a delete
        (a forget anywhere bumps the generation).  Writers commit one at a time under the
        server's lock, so row ids grow in commit order and "every id above the newest held" is
        exactly what is new.  A no-op on the embedded memory (this process is its only writer)."""
        if not self.on_server:
            return
        conn = self._conn()
        max_id, generation = conn.execute(
            "SELECT COALESCE(MAX(id), 0), (SELECT value FROM meta WHERE key='generation') FROM observations").fetchone()
        with self._follow_lock:
            if int(generation) != self._seen_generation:
                self._seen_generation = int(generation)
                self._load_times()
                with self._index_lock:
                    for index in self._indexes.values():
                        index.close()
                    self._indexes.clear()       # reopened on next use, caught up from the records
                return
            table = self._time_table
            held = int(table.ids[-1]) if len(table.ids) else 0
            if max_id > held:
                rows = conn.execute("SELECT id, t FROM observations WHERE id > ? ORDER BY id", (held,)).fetchall()
                self._time_table = table.appended(np.array([r[0] for r in rows], dtype=np.int64),
                                                  np.array([r[1] for r in rows], dtype=np.float64))
            with self._index_lock:
                for kind, index in self._indexes.items():
                    after = getattr(index, "max_id", 0)
                    if max_id > after:          # (nothing new: no query)
                        for ids, vecs in self._vector_batches(f"{kind}_emb", after, conn=conn):
                            index.add(ids, vecs)

    @property
    def text_embedder(self):
        if self._text_embedder is None:
            with self._index_lock:   # one load, even when the warm-up thread and a writer race
                if self._text_embedder is None:
                    from ..text_embedding import make_text_embedder
                    self._text_embedder = make_text_embedder(self.params.text_embedder, self.params.text_dim)
        return self._text_embedder

    def embed_text(self, text: str) -> np.ndarray:
        return self.text_embedder.embed([text])[0]

    def warm_up(self) -> None:
        """Open every vector index and load the text model now (a node calls this in the
        background after start, so the first write or query does not wait for them)."""
        for kind in self.VECTOR_KINDS:
            self._index(kind)
        self.embed_text("warm up")

    # -- snapshots ----------------------------------------------------------------------------
    def checkpoint(self) -> bool:
        """Snapshot the open vector indexes (a restart then has nothing to re-add).  A snapshot
        is only a cache of SQLite: one that cannot be written (disk full) is logged and skipped,
        the next start re-adds or rebuilds from SQLite.  Returns whether every snapshot was written."""
        max_id = self._conn().execute("SELECT COALESCE(MAX(id), 0) FROM observations").fetchone()[0]
        gen = self._generation()
        ok = True
        with self._index_lock:             # not held while writing: inserts and queries go on
            indexes = list(self._indexes.values())
        for index in indexes:
            ok = self._checkpoint_index(index, max_id, gen) and ok
        self._inserted_since_checkpoint = 0
        return ok

    def _checkpoint_in_background(self) -> None:
        """A snapshot written by a thread of its own, so no insert waits for it: every
        ``checkpoint_every`` inserts, and when an index wants its approximate form built. One
        at a time; asked for while one runs, it runs once more after it."""
        with self._checkpointer_lock:
            self._inserted_since_checkpoint = 0
            if self._checkpointer is not None and self._checkpointer.is_alive():
                self._checkpoint_again = True
                return
            self._checkpoint_again = False
            self._checkpointer = threading.Thread(target=self._checkpoint_and_close, name="vector_snapshot",
                                                  daemon=True)
            self._checkpointer.start()

    def _checkpoint_and_close(self) -> None:
        try:
            while True:
                self.checkpoint()
                with self._checkpointer_lock:
                    if not self._checkpoint_again:
                        break
                    self._checkpoint_again = False
        except Exception as exc:  # noqa: BLE001 - a snapshot is an optimisation; SQLite holds the records
            log.error("background vector snapshot failed: %s", exc)
        finally:
            conn = getattr(self._local, "conn", None)     # this thread's own connection
            if conn is not None:
                conn.close()

    def _checkpoint_index(self, index, max_id: int, gen: int) -> bool:
        try:
            index.checkpoint(max_id, gen)
            return True
        except Exception as exc:  # noqa: BLE001 - SQLite holds everything; the snapshot is a cache
            log.error("cannot write the vector snapshot in %s (%s): the next start rebuilds it from SQLite",
                      self.data_dir, exc)
            return False

    def _checkpoint_generation(self, gen: int) -> None:
        """After a delete: every index (opened if need be) is written with the new generation,
        so none is mistaken for stale and rebuilt on the next start."""
        max_id = self._conn().execute("SELECT COALESCE(MAX(id), 0) FROM observations").fetchone()[0]
        rebuild = False
        for kind in self.VECTOR_KINDS:
            index = self._index(kind)
            if getattr(index, "wants_rebuild", False):   # a graph with masked rows: rebuilt, then written,
                rebuild = True                           # in the background (a crash before: rebuilt on open)
            else:
                self._checkpoint_index(index, max_id, gen)
        if rebuild:
            self._checkpoint_in_background()


def milvus_credentials(params: StoreParams, environ=None) -> dict:
    """MilvusClient's token / user + password: secrets come from the environment variables the
    parameters name (``milvus_token_env``, ``milvus_password_env``), never from YAML."""
    import os
    environ = os.environ if environ is None else environ
    creds = {}
    token = environ.get(params.milvus_token_env, "") if params.milvus_token_env else ""
    if token:
        creds["token"] = token
    if params.milvus_user:
        password = environ.get(params.milvus_password_env, "") if params.milvus_password_env else ""
        if not password:
            raise StoreError(f"milvus_user is {params.milvus_user!r} but the environment variable "
                             f"{params.milvus_password_env or '(milvus_password_env)'} holding its password is empty")
        creds["user"], creds["password"] = params.milvus_user, password
    return creds
