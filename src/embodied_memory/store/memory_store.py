"""MemoryStore: durable records (SQLite, WAL) + vector indexes (FAISS or Milvus).

Every retrieval function is a plain method with typed arguments and a JSON-serialisable
result; the query agent exposes them as tools under the same names.

Durability: ``insert`` returns after its SQLite transaction is committed with
``synchronous=FULL``; vectors are rebuilt from SQLite for anything the index snapshot lacks,
so an acknowledged record survives ``kill -9``.  ``insert_batch`` validates each observation
before the transaction and rejects only the offending ones (an observation with its sightings
and regions is atomic); a write fault (disk full, read-only) raises ``StoreWriteError`` and
changes nothing.  ``call_tool`` checks arguments against ``tool_args`` first; every failure
of a store call is a ``StoreError``.
"""
from __future__ import annotations

import base64
import collections
import datetime as dt
import errno
import json
import logging
import math
import re
import sqlite3
import threading
import time
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence
from zoneinfo import ZoneInfo

import numpy as np

from ..calendar_windows import day_window
from ..params import StoreParams
from ..types import Episode, Identity, Observation, SemanticRule, as_vector
from .errors import (InsertResult, InvalidArgumentError, InvalidRecordError, StoreError, StoreWriteError,
                     UnknownPersonError)
from .image_files import file_in
from .migrations import SCHEMA_VERSION, migrate
from .recency import RecencyScore
from .tool_args import ToolTable, build_tool_table, json_schema, validate_arguments
from .vector_index import FaissVectorIndex, MilvusVectorIndex

log = logging.getLogger(__name__)

_SCHEMA = resources.files(__package__).joinpath("schema.sql").read_text(encoding="utf-8")
_ID_RE = re.compile(r"^[A-Za-z0-9_.:/@-]{1,128}$")
_OBS_COLUMNS = ("id, observation_id, t, episode_id, keyframe_id, segment_id, waypoint_id, "
                "x, y, z, yaw, frame_id, description, image_path, persons")
HISTORY_ORDERS = ("newest", "oldest")

Summariser = Callable[[str, str, list[dict]], str]
"""(person, date, sightings in time order) -> summary text"""


def _blob(vec: Optional[np.ndarray]) -> Optional[bytes]:
    return None if vec is None else np.asarray(vec, dtype=np.float32).tobytes()


def _unblob(data: Optional[bytes]) -> Optional[np.ndarray]:
    return None if data is None else np.frombuffer(data, dtype=np.float32)


PLACE_RADIUS_M = 4.0   # a person farther than this from every waypoint's centre stays at the robot's waypoint


def _nearest_waypoint(position, centres) -> Optional[str]:
    """The waypoint whose centre (the mean of the robot's positions there so far) is nearest a
    person's position, within PLACE_RADIUS_M: the place the person was in, which may not be the
    robot's (seen through a door).  None when no waypoint is that near (a room the robot has not
    been in yet): the caller keeps the robot's."""
    best = min(centres, key=lambda c: math.hypot(c[1] - position[0], c[2] - position[1]), default=None)
    if best is None or math.hypot(best[1] - position[0], best[2] - position[1]) > PLACE_RADIUS_M:
        return None
    return best[0]


def _unit(vec: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm > 0 else vec


# SQLite / OS errors that mean "the data directory cannot be written now" (transient for the caller)
_WRITE_FAULT_TEXT = ("database or disk is full", "readonly database", "disk i/o error", "unable to open database",
                     "database is locked", "cannot commit", "unable to write")
_WRITE_FAULT_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EFBIG, errno.EDQUOT, errno.EACCES, errno.EPERM}
_MAX_TEXT_FIELD = 4096   # characters of a short text field (ids, paths, labels, activity)


def _is_write_fault(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        return any(text in str(exc).lower() for text in _WRITE_FAULT_TEXT)
    return isinstance(exc, OSError) and exc.errno in _WRITE_FAULT_ERRNOS


def _utf8(text) -> bool:
    if not isinstance(text, str):
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _name_pattern(words: Iterable[str]) -> Optional[re.Pattern]:
    """Whole-word, case-insensitive match of any of ``words`` (identity ids, display names)."""
    words = sorted({w for w in words if w}, key=len, reverse=True)
    if not words:
        return None
    return re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(re.escape(w) for w in words) + r")(?![A-Za-z0-9_])",
                      re.IGNORECASE)


def scrub_identity(text: str, pattern: Optional[re.Pattern]) -> str:
    """A description with every mention of a forgotten identity replaced by "a person"."""
    return pattern.sub("a person", text) if pattern is not None and text else text


class MemoryStore:
    """The robot's long-term memory.  Thread-safe; one writer at a time, readers never wait
    for it (WAL)."""

    def __init__(self, params: StoreParams, *, text_embedder=None, image_query_embedder=None,
                 summariser: Optional[Summariser] = None):
        self.params = params
        self.data_dir = Path(params.data_dir).expanduser()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.images_dir = self.data_dir / "images"
        self.tz = ZoneInfo(params.timezone)
        self.recency = RecencyScore(params.recency_weight_cos, params.recency_weight_time,
                                    params.recency_horizon_hours)
        self._text_embedder = text_embedder
        self._image_query_embedder = image_query_embedder  # text -> image space (CLIP), optional
        self.summariser = summariser
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._inserted_since_checkpoint = 0
        self._checkpointer: Optional[threading.Thread] = None     # the background snapshot, when one runs
        self._checkpointer_lock = threading.Lock()
        self.rejections: collections.Counter = collections.Counter()  # rejected records per kind
        self._rejections_lock = threading.Lock()
        self.db_path = self.data_dir / "memory.sqlite3"
        conn = self._conn()
        try:
            migrate(conn, self.db_path)
            conn.executescript(_SCHEMA)
            self._check_meta(conn)
        except (sqlite3.OperationalError, OSError) as exc:
            if _is_write_fault(exc):
                raise self._write_error(exc) from exc
            raise
        self._index_lock = threading.RLock()
        self._indexes: dict[str, Any] = {}
        self._load_times()

    # -- connections ----------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.db_path, timeout=30.0, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA cache_size=-65536")
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
        return conn

    def _write_error(self, exc: BaseException) -> StoreWriteError:
        return StoreWriteError(f"cannot write the memory in {self.data_dir}: {exc} (disk full, read-only or over a "
                               "file-size limit?); nothing of this call was stored: keep the record and retry",
                               kind="StoreWriteError")

    @contextmanager
    def _transaction(self):
        """One write transaction; a write fault (disk full, read-only, file-size limit) comes
        out as StoreWriteError with everything rolled back, other SQLite errors as StoreError."""
        conn = self._conn()
        with self._write_lock:
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        try:
                            conn.execute("ROLLBACK")
                        except sqlite3.Error as exc:  # SQLite may have rolled back itself
                            log.warning("rollback failed: %s", exc)
                    raise
            except (sqlite3.Error, OSError) as exc:
                if _is_write_fault(exc):
                    raise self._write_error(exc) from exc
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"{type(exc).__name__}: {exc}", kind=type(exc).__name__) from exc
                raise

    def _check_meta(self, conn: sqlite3.Connection) -> None:
        wanted = {"schema_version": str(SCHEMA_VERSION), "text_dim": str(self.params.text_dim),
                  "image_dim": str(self.params.image_dim), "face_dim": str(self.params.face_dim),
                  "reid_dim": str(self.params.reid_dim)}
        stored = {r["key"]: r["value"] for r in conn.execute("SELECT key, value FROM meta")}
        for key, value in wanted.items():
            if key in stored and stored[key] != value:
                raise StoreError(f"{self.db_path}: stored {key} is {stored[key]} but the configuration "
                                 f"says {value}; use another data_dir or matching dimensions")
        conn.executemany("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)",
                         list(wanted.items()) + [("generation", "0")])
        if conn.execute("SELECT 1 FROM waypoint_stats LIMIT 1").fetchone() is None and \
                conn.execute("SELECT 1 FROM observations WHERE waypoint_id != '' AND x IS NOT NULL "
                             "LIMIT 1").fetchone() is not None:
            self._rebuild_waypoint_stats(conn)  # a store written before the summary existed

    def _generation(self, conn=None) -> int:
        row = (conn or self._conn()).execute("SELECT value FROM meta WHERE key='generation'").fetchone()
        return int(row[0])

    def _bump_generation(self, conn) -> int:
        gen = self._generation(conn) + 1
        conn.execute("UPDATE meta SET value=? WHERE key='generation'", (str(gen),))
        return gen

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
                                         ivf_min_vectors=self.params.ivf_min_vectors)

            def count_rows() -> int:
                return self._conn().execute(f"SELECT COUNT(*) FROM observations INDEXED BY obs_{kind}_vec "
                                            f"WHERE {column} IS NOT NULL").fetchone()[0]

            index.open(self._generation(), lambda after: self._vector_batches(column, after), count_rows)
            self._indexes[kind] = index
            return index

    def _vector_batches(self, column: str, after_id: int, batch: int = 20_000):
        conn = sqlite3.connect(self.db_path, timeout=30.0)
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
            conn.close()

    @property
    def text_embedder(self):
        if self._text_embedder is None:
            with self._index_lock:   # one load, even when the warm-up thread and a writer race
                if self._text_embedder is None:
                    from ..perception.text_embedding import make_text_embedder
                    self._text_embedder = make_text_embedder(self.params.text_embedder, self.params.text_dim)
        return self._text_embedder

    def embed_text(self, text: str) -> np.ndarray:
        return self.text_embedder.embed([text])[0]

    def close(self) -> None:
        with self._checkpointer_lock:
            checkpointer = self._checkpointer
        if checkpointer is not None:
            checkpointer.join()
        with self._write_lock:
            self.checkpoint()
            for index in self._indexes.values():
                index.close()
            self._indexes.clear()
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

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
        """Every ``checkpoint_every`` inserts: a snapshot written by a thread of its own, so no
        insert waits for it (one at a time; the next one is due after as many inserts again)."""
        with self._checkpointer_lock:
            if self._checkpointer is not None and self._checkpointer.is_alive():
                return
            self._inserted_since_checkpoint = 0
            self._checkpointer = threading.Thread(target=self._checkpoint_and_close, name="vector_snapshot",
                                                  daemon=True)
            self._checkpointer.start()

    def _checkpoint_and_close(self) -> None:
        try:
            self.checkpoint()
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

    # -- writing ----------------------------------------------------------------------------
    def add_episode(self, episode: Episode) -> None:
        if not _ID_RE.match(episode.episode_id):
            raise InvalidRecordError(f"episode_id {episode.episode_id!r}: 1-128 chars of [A-Za-z0-9_.:/@-]")
        with self._transaction() as conn:
            conn.execute("INSERT INTO episodes(episode_id, start, end, name, world, last_stamp) "
                         "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(episode_id) DO UPDATE SET "
                         "end=excluded.end, name=excluded.name, world=excluded.world",
                         (episode.episode_id, episode.start, episode.end, episode.name,
                          episode.world, episode.start))

    def _validate(self, obs: Observation) -> None:
        """Raises InvalidRecordError with ``kind`` (the rejection counter's key)."""
        p = self.params

        def reject(kind: str, message: str):
            raise InvalidRecordError(message, kind=kind)
        if not (isinstance(obs.observation_id, str) and _ID_RE.match(obs.observation_id)):
            reject("bad_id", "observation_id must be 1-128 chars of [A-Za-z0-9_.:/@-]")
        if not (isinstance(obs.episode_id, str) and _ID_RE.match(obs.episode_id)):
            reject("bad_id", "episode_id must be 1-128 chars of [A-Za-z0-9_.:/@-]")
        if not (isinstance(obs.stamp, (int, float)) and not isinstance(obs.stamp, bool)
                and math.isfinite(obs.stamp) and 0 < obs.stamp <= 1e11):
            reject("bad_stamp", f"stamp must be a finite UNIX time, got {obs.stamp!r}")
        try:   # no pose (no transform in time) is allowed: stored with the waypoint only
            finite_pose = obs.pose is None or obs.pose.is_finite()
        except (TypeError, AttributeError):
            finite_pose = False
        if not finite_pose:
            reject("non_finite_pose", f"pose has NaN/inf (or is not numbers): {obs.pose}")
        for name, text in (("description", obs.description), ("description_json", obs.description_json)):
            if not _utf8(text):
                reject("bad_text", f"{name} must be UTF-8 text")
            if len(text) > p.max_description_chars:
                reject("description_too_long", f"{name} has {len(text)} characters, "
                       f"max_description_chars is {p.max_description_chars}")
        short = [("keyframe_id", obs.keyframe_id), ("waypoint_id", obs.waypoint_id), ("image_path", obs.image_path)]
        if obs.pose is not None:
            short.append(("pose.frame_id", obs.pose.frame_id))
        short += [(f"regions[{i}].label", r.label) for i, r in enumerate(obs.regions)]
        for i, s in enumerate(obs.people):
            short += [(f"people[{i}].{f}", getattr(s, f)) for f in ("activity", "clothing", "crop_path")]
        for name, text in short:
            if not _utf8(text) or len(text) > _MAX_TEXT_FIELD:
                reject("bad_text", f"{name} must be UTF-8 text of at most {_MAX_TEXT_FIELD} characters")
        if not isinstance(obs.segment_id, (int, np.integer)) or isinstance(obs.segment_id, bool) \
                or not -2**63 <= int(obs.segment_id) < 2**63:
            reject("bad_field", f"segment_id must be a 64-bit integer, got {obs.segment_id!r}")
        checks = [("text_embedding", obs.text_embedding, p.text_dim),
                  ("global_embedding", obs.global_embedding, p.image_dim)]
        checks += [(f"regions[{i}].embedding", r.embedding, None) for i, r in enumerate(obs.regions)]
        boxes = [(f"regions[{i}].box", r.box, 4) for i, r in enumerate(obs.regions)]
        for i, s in enumerate(obs.people):
            checks += [(f"people[{i}].face_embedding", s.face_embedding, p.face_dim),
                       (f"people[{i}].reid_embedding", s.reid_embedding, p.reid_dim)]
            if s.identity_id and not (isinstance(s.identity_id, str) and _ID_RE.match(s.identity_id)):
                reject("bad_id", f"people[{i}].identity_id {s.identity_id!r} is not a valid id")
            boxes.append((f"people[{i}].box", s.box, 4))
            if s.face_box is not None:
                boxes.append((f"people[{i}].face_box", s.face_box, 4))
            boxes.append((f"people[{i}].confidence", (s.identity_confidence, s.detection_score), 2))
            if s.position is not None:
                boxes.append((f"people[{i}].position", s.position, 3))
        for i, r in enumerate(obs.regions):
            boxes += [(f"regions[{i}].score", (r.score,), 1)]
            boxes += [(f"regions[{i}].{f}", getattr(r, f), 3) for f in ("center_3d", "size_3d")
                      if getattr(r, f) is not None]
        for name, values, size in boxes:
            try:
                ok = len(values) == size and all(math.isfinite(float(v)) for v in values)
            except (TypeError, ValueError):
                ok = False
            if not ok:
                reject("non_finite_box", f"{name} must be {size} finite numbers (NaN/inf), got {values!r}")
        for name, vec, dim in checks:
            if vec is None:
                continue
            if dim is not None and vec.shape != (dim,):
                reject("bad_embedding_dim", f"{name} has {vec.size} values, configured dimension is {dim}")
            if not np.all(np.isfinite(vec)):
                reject("non_finite_embedding", f"{name} has NaN/inf")

    @staticmethod
    def _vectors_of(obs: Observation) -> None:
        """Embeddings as float32 vectors (raises for values that are not numbers)."""
        obs.text_embedding = as_vector(obs.text_embedding)
        obs.global_embedding = as_vector(obs.global_embedding)
        for s in obs.people:
            s.face_embedding, s.reid_embedding = as_vector(s.face_embedding), as_vector(s.reid_embedding)
        for r in obs.regions:
            r.embedding = as_vector(r.embedding)

    def _count(self, kind: str, n: int = 1) -> None:
        with self._rejections_lock:
            self.rejections[kind] += n

    def _reject(self, result: InsertResult, obs, exc: InvalidRecordError) -> None:
        key = obs.observation_id if isinstance(obs.observation_id, str) else repr(obs.observation_id)
        key = key[:200]
        while key in result.rejected:
            key += "'"
        result.rejected[key] = f"{exc.kind}: {exc}"
        self._count(exc.kind)
        log.warning("rejected observation %r: %s: %s", key, exc.kind, exc)

    def _forgotten_among(self, conn, ids: Iterable[str]) -> set[str]:
        ids = sorted(set(ids))
        found: set[str] = set()
        for start in range(0, len(ids), 900):
            chunk = ids[start:start + 900]
            found.update(r[0] for r in conn.execute(
                f"SELECT identity_id FROM forgotten_identities WHERE identity_id IN ({','.join('?' * len(chunk))})",
                chunk))
        return found

    @staticmethod
    def _drop_forgotten(obs: Observation, forgotten: set[str]) -> tuple[int, list[str]]:
        """Remove the sightings of forgotten identities from ``obs`` and scrub their ids from its
        description (as forget_identity does); returns (how many, their crop files)."""
        dropped = [s for s in obs.people if s.identity_id in forgotten]
        if not dropped:
            return 0, []
        obs.people = [s for s in obs.people if s.identity_id not in forgotten]
        pattern = _name_pattern(s.identity_id for s in dropped)
        description = scrub_identity(obs.description, pattern)
        if description != obs.description:
            obs.description, obs.text_embedding = description, None  # re-embedded from the scrubbed text
        obs.description_json = scrub_identity(obs.description_json, pattern)
        return len(dropped), [s.crop_path for s in dropped if s.crop_path]

    def insert(self, observations: Sequence[Observation]) -> list[str]:
        """Store a batch; returns the ids stored now (see :meth:`insert_batch` for the ids
        rejected or already stored).  Raises StoreWriteError when nothing could be written."""
        return self.insert_batch(observations).stored

    def insert_batch(self, observations: Sequence[Observation]) -> InsertResult:
        """Store what is valid in a batch, in one transaction; each observation with its
        sightings and regions is atomic.

        Rejected (reason in ``rejected``, counted per kind in ``self.rejections``): NaN/inf
        poses or boxes, wrong embedding sizes, oversized or non-UTF-8 text, invalid ids or
        stamps.  Records may come out of time order (resends after a restart).  Already stored
        ids (a re-send) are ``duplicates``.  Sightings of forgotten identities (or their aliases) are dropped
        (``sightings_dropped``), the rest of the observation is stored.  Raises
        StoreWriteError (nothing written) when the data directory cannot be written.
        """
        try:
            return self._insert_batch(list(observations))
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. the text embedder failed
            if _is_write_fault(exc):
                raise self._write_error(exc) from exc
            log.exception("insert failed")
            raise StoreError(f"insert: {type(exc).__name__}: {exc}", kind=type(exc).__name__) from exc

    def _insert_batch(self, observations: list[Observation]) -> InsertResult:
        result = InsertResult()
        candidates: list[Observation] = []
        seen: set[str] = set()
        for obs in observations:
            try:
                try:
                    self._vectors_of(obs)
                except (TypeError, ValueError) as exc:
                    raise InvalidRecordError(f"an embedding is not numbers: {exc}", kind="bad_embedding") from None
                self._validate(obs)
            except InvalidRecordError as exc:
                self._reject(result, obs, exc)
                continue
            if obs.observation_id in seen:   # repeated in the batch: the first one counts
                result.duplicates.append(obs.observation_id)
                continue
            seen.add(obs.observation_id)
            candidates.append(obs)
        dropped_crops: list[str] = []
        dropped: dict[str, int] = collections.Counter()

        def drop(batch, ids):
            for obs in batch:
                n, crops = self._drop_forgotten(obs, ids)
                dropped[obs.observation_id] += n
                dropped_crops.extend(crops)
        forgotten = self._forgotten_among(self._conn(), (s.identity_id for o in candidates for s in o.people
                                                        if s.identity_id))
        drop(candidates, forgotten)
        self._embed_missing_text(candidates)
        new_vectors: dict[str, list] = {"text": [], "image": []}
        inserted_rows: list[int] = []
        inserted_times: list[float] = []
        with self._transaction() as conn:
            existing = set()
            ids = [o.observation_id for o in candidates]
            for start in range(0, len(ids), 500):
                chunk = ids[start:start + 500]
                existing.update(r[0] for r in conn.execute(
                    f"SELECT observation_id FROM observations WHERE observation_id IN "
                    f"({','.join('?' * len(chunk))})", chunk))
            fresh = [o for o in candidates if o.observation_id not in existing]
            result.duplicates += [o.observation_id for o in candidates if o.observation_id in existing]
            person_ids = {s.identity_id for o in fresh for s in o.people if s.identity_id}
            late = self._forgotten_among(conn, person_ids) - forgotten  # forgotten while we embedded
            if late:
                drop(fresh, late)
                self._embed_missing_text(fresh)
                person_ids -= late
            if person_ids:  # ids merged into another identity are stored under the survivor
                aliases = dict(conn.execute(f"SELECT alias_id, identity_id FROM identity_aliases WHERE alias_id IN "
                                            f"({','.join('?' * len(person_ids))})", list(person_ids)).fetchall())
                for obs in fresh:
                    for sighting in obs.people:
                        sighting.identity_id = aliases.get(sighting.identity_id, sighting.identity_id)
            # records may arrive out of time order (a sender resends what a restarted node never
            # acknowledged): every query orders by time, so a late record is simply stored
            last_stamp: dict[str, Optional[float]] = {}
            first_stamp: dict[str, float] = {}
            known_episodes: set[str] = set()
            now = time.time()
            for obs in fresh:
                if obs.episode_id not in last_stamp:
                    row = conn.execute("SELECT last_stamp FROM episodes WHERE episode_id=?",
                                       (obs.episode_id,)).fetchone()
                    last_stamp[obs.episode_id] = row[0] if row else None
                    if row is not None:
                        known_episodes.add(obs.episode_id)
                conn.execute("SAVEPOINT obs")
                try:
                    if obs.episode_id not in known_episodes:
                        conn.execute("INSERT INTO episodes(episode_id, start, last_stamp) VALUES (?,?,?)",
                                     (obs.episode_id, obs.stamp, obs.stamp))
                    row_id, text_vec, image_vec = self._write_observation(conn, obs, now)
                except (sqlite3.IntegrityError, sqlite3.InterfaceError, sqlite3.ProgrammingError,
                        sqlite3.DataError, ValueError, TypeError, OverflowError) as exc:
                    conn.execute("ROLLBACK TO obs")
                    conn.execute("RELEASE obs")
                    self._reject(result, obs, InvalidRecordError(f"{type(exc).__name__}: {exc}", kind="unstorable"))
                    continue
                conn.execute("RELEASE obs")
                known_episodes.add(obs.episode_id)
                previous = last_stamp[obs.episode_id]
                last_stamp[obs.episode_id] = obs.stamp if previous is None else max(previous, obs.stamp)
                first_stamp[obs.episode_id] = min(first_stamp.get(obs.episode_id, obs.stamp), obs.stamp)
                if text_vec is not None:
                    new_vectors["text"].append((row_id, text_vec))
                if image_vec is not None:
                    new_vectors["image"].append((row_id, image_vec))
                result.stored.append(obs.observation_id)
                inserted_rows.append(row_id)
                inserted_times.append(obs.stamp)
            for episode_id, stamp in last_stamp.items():
                if stamp is not None and episode_id in known_episodes:
                    conn.execute("UPDATE episodes SET last_stamp=MAX(last_stamp, ?), end=MAX(COALESCE(end, 0), ?), "
                                 "start=MIN(start, ?) WHERE episode_id=?",
                                 (stamp, stamp, first_stamp.get(episode_id, stamp), episode_id))
        # committed (durable): now the in-memory indexes; a crash here is repaired on open
        result.sightings_dropped = sum(dropped[i] for i in result.stored)
        if result.sightings_dropped:
            self._count("forgotten_identity_sighting", result.sightings_dropped)
            log.info("dropped %d sightings of forgotten identities (%d observations stored)",
                     result.sightings_dropped, len(result.stored))
        if result.stored:
            new_ids = np.array(inserted_rows, dtype=np.int64)
            self._time_ids = np.concatenate([self._time_ids, new_ids])
            self._time_vals = np.concatenate([self._time_vals, np.array(inserted_times, dtype=np.float64)])
        # committed: nothing below may fail the call (the sender would take a stored record for lost)
        with self._index_lock:  # an index not open yet reads these rows from SQLite when it opens
            for kind, items in new_vectors.items():
                index = self._indexes.get(kind)
                items = [(i, v) for i, v in items if i > getattr(index, "max_id", -1)]
                if index is not None and items:
                    try:
                        index.add(np.array([i for i, _ in items], dtype=np.int64), np.stack([v for _, v in items]))
                    except Exception as exc:  # noqa: BLE001 - e.g. Milvus unreachable: reopen (and catch up) later
                        log.error("the %s index could not take %d new vectors (%s): it is reopened from SQLite "
                                  "on next use", kind, len(items), exc)
                        self._indexes.pop(kind, None)
        try:
            self._remove_files(dropped_crops)
            self._inserted_since_checkpoint += len(result.stored)
            if self._inserted_since_checkpoint >= self.params.checkpoint_every:
                self._checkpoint_in_background()
        except Exception as exc:  # noqa: BLE001 - a snapshot is an optimisation; SQLite holds the records
            log.error("after storing %d observations: %s", len(result.stored), exc)
        return result

    def _embed_missing_text(self, observations: Sequence[Observation]) -> None:
        missing = [o for o in observations if o.text_embedding is None and o.description]
        if missing:
            vecs = self.text_embedder.embed([o.description for o in missing])
            for obs, vec in zip(missing, vecs):
                obs.text_embedding = vec

    def _write_observation(self, conn, obs: Observation, now: float):
        """The rows of one observation; returns (row id, text vector, image vector)."""
        p = obs.pose                 # None: NULL position, no rtree row, not in the waypoint's mean position
        x, y, z, yaw, frame_id = (p.x, p.y, p.z, p.yaw, p.frame_id) if p is not None else (None,) * 5
        persons = ",".join(dict.fromkeys(s.identity_id for s in obs.people if s.identity_id))
        text_vec = _unit(obs.text_embedding) if obs.text_embedding is not None else None
        image_vec = _unit(obs.global_embedding) if obs.global_embedding is not None else None
        cur = conn.execute(
            "INSERT INTO observations(observation_id, t, episode_id, keyframe_id, segment_id, "
            "waypoint_id, x, y, z, yaw, frame_id, description, description_json, image_path, "
            "persons, text_emb, image_emb) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (obs.observation_id, obs.stamp, obs.episode_id, obs.keyframe_id, int(obs.segment_id),
             obs.waypoint_id, x, y, z, yaw, frame_id, obs.description,
             obs.description_json, obs.image_path, persons, _blob(text_vec), _blob(image_vec)))
        row_id = cur.lastrowid
        if p is not None:
            conn.execute("INSERT INTO obs_xy(id, min_x, max_x, min_y, max_y) VALUES (?,?,?,?,?)",
                         (row_id, x, x, y, y))
        for r in obs.regions:
            c3, s3 = r.center_3d or (None,) * 3, r.size_3d or (None,) * 3
            conn.execute("INSERT INTO regions(obs, label, score, x1, y1, x2, y2, emb, cx, cy, cz, "
                         "sx, sy, sz) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                         (row_id, r.label, r.score, *r.box, _blob(r.embedding), *c3, *s3))
        if obs.waypoint_id and p is not None:   # the summary: observations with a position
            conn.execute("INSERT INTO waypoint_stats(waypoint_id, n, sx, sy, last) VALUES (?, 1, ?, ?, ?) "
                         "ON CONFLICT(waypoint_id) DO UPDATE SET n=n+1, sx=sx+excluded.sx, sy=sy+excluded.sy, "
                         "last=MAX(last, excluded.last)", (obs.waypoint_id, x, y, obs.stamp))
        centres = None
        for s in obs.people:
            if s.identity_id:
                conn.execute("INSERT OR IGNORE INTO identities(identity_id, created) VALUES (?, ?)",
                             (s.identity_id, now))
            position = s.position if p is not None else None     # no pose: no frame to place them in
            if position is not None and centres is None:
                centres = conn.execute("SELECT waypoint_id, sx / n, sy / n FROM waypoint_stats").fetchall()
            place = _nearest_waypoint(position, centres) if position is not None else None
            conn.execute(
                "INSERT INTO sightings(obs, identity_id, t, confidence, detection_score, x1, y1, x2, "
                "y2, face_box, face_emb, reid_emb, activity, clothing, crop_path, px, py, pz, waypoint_id) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (row_id, s.identity_id or None, obs.stamp, s.identity_confidence, s.detection_score,
                 *s.box, json.dumps(list(s.face_box)) if s.face_box else None,
                 _blob(s.face_embedding), _blob(s.reid_embedding), s.activity, s.clothing,
                 s.crop_path, *(position if position is not None else (None, None, None)),
                 place if place and place != obs.waypoint_id else None))   # NULL: the observation's place
        return row_id, text_vec, image_vec

    # -- helpers for results ----------------------------------------------------------------
    def iso(self, t: float) -> str:
        return dt.datetime.fromtimestamp(t, tz=self.tz).isoformat(timespec="seconds")

    def _record(self, row: sqlite3.Row, score: Optional[float] = None, key: str = "score") -> dict:
        rec = {"id": row["observation_id"], "time": self.iso(row["t"]), "t": round(row["t"], 3),
               "episode": row["episode_id"], "waypoint": row["waypoint_id"] or "",
               "position": [round(row["x"], 2), round(row["y"], 2), round(row["z"], 2)]
               if row["x"] is not None else None,               # None: stored without a pose
               "yaw": round(row["yaw"], 3) if row["yaw"] is not None else None,
               "description": row["description"] or "",
               "persons": [p for p in (row["persons"] or "").split(",") if p]}
        if row["image_path"]:
            rec["image_path"] = row["image_path"]
        if score is not None:
            rec[key] = round(float(score), 4)
        return rec

    def _rows_by_id(self, ids: Iterable[int]) -> dict[int, sqlite3.Row]:
        ids = [int(i) for i in ids]
        out: dict[int, sqlite3.Row] = {}
        conn = self._conn()
        for start in range(0, len(ids), 900):
            chunk = ids[start:start + 900]
            for row in conn.execute(f"SELECT {_OBS_COLUMNS} FROM observations WHERE id IN "
                                    f"({','.join('?' * len(chunk))})", chunk):
                out[row["id"]] = row
        return out

    def _episode_row_ids(self, episode: str, column: str) -> np.ndarray:
        return np.fromiter((r[0] for r in self._conn().execute(
            f"SELECT id FROM observations WHERE episode_id=? AND {column} IS NOT NULL", (episode,))), np.int64)

    def _person_row_ids(self, person: str) -> np.ndarray:
        identity = self.resolve_person(person)
        rows = self._conn().execute("SELECT DISTINCT obs FROM sightings WHERE identity_id=?", (identity,))
        return np.fromiter((r[0] for r in rows), dtype=np.int64)

    def resolve_person(self, person: str) -> str:
        """An identity id from an id or an operator-given display name (case-insensitive).
        An empty name names nobody (identities without a display name have '')."""
        person = person.strip() if isinstance(person, str) else ""
        row = self._conn().execute(
            "SELECT identity_id FROM identities WHERE identity_id=? OR (display_name != '' AND "
            "lower(display_name)=lower(?)) ORDER BY identity_id=? DESC LIMIT 1", (person, person, person)).fetchone() \
            if person else None
        if row is None:
            raise UnknownPersonError(f"unknown person {person!r}: no identity with that id or name "
                                     f"(known: {', '.join(i.identity_id for i in self.identities()[:20]) or 'none'})")
        return row[0]

    def _load_times(self) -> None:
        """Row id -> time, in memory (ids only grow), so ranking needs no SQL per candidate.
        Read from the time index (small), not the table (embeddings make its rows large)."""
        rows = self._conn().execute("SELECT id, t FROM observations INDEXED BY obs_t").fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        times = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
        order = np.argsort(ids, kind="stable")
        self._time_ids, self._time_vals = ids[order], times[order]

    def _times_of(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(times, known) for row ids; unknown = deleted since the index was written."""
        time_ids, time_vals = self._time_ids, self._time_vals
        pos = np.searchsorted(time_ids, ids)
        pos_clipped = np.minimum(pos, max(len(time_ids) - 1, 0))
        known = (pos < len(time_ids)) & (time_ids[pos_clipped] == ids) if len(time_ids) else np.zeros(len(ids), bool)
        return (time_vals[pos_clipped] if len(time_ids) else np.zeros(len(ids))), known

    def _ranked(self, kind: str, query_vec: np.ndarray, n: int, *, before: Optional[float],
                now: Optional[float], use_recency: bool, subset: Optional[np.ndarray] = None,
                accept: Optional[Callable[[sqlite3.Row], bool]] = None) -> list[tuple[float, sqlite3.Row]]:
        """Top-n rows by score (lower is better), exact for an exact index (flat FAISS, Milvus
        within its top-k limit) under every filter (``subset``, ``before``, ``accept``).

        A vector search fetches the k nearest by cosine (first the index's ``candidates``); they
        are re-scored with the recency term and filtered. A record outside them has a similarity
        of at most the k-th one's, so its score is at least ``bound`` = a*(1 - s_k) plus the
        smallest time penalty any eligible record can have; while the n-th score found is above
        that bound (or fewer than n passed the filters), k grows fourfold, up to every vector.
        ``now`` (the question's time, needed only with ``use_recency``) is what "hours ago"
        counts from."""
        if use_recency and now is None:
            raise StoreError("recency ranking needs the question time (now)")
        index = self._index(kind)
        query_vec = _unit(np.asarray(query_vec, dtype=np.float32))
        if query_vec.shape != (index.dim,):
            raise StoreError(f"{kind} query has {query_vec.size} values, index dimension is {index.dim}")
        total = index.count() if subset is None else len(subset)
        if total == 0:
            return []
        least_penalty = 0.0
        if use_recency and len(self._time_vals):
            newest = float(self._time_vals.max()) if before is None else min(before, float(self._time_vals.max()))
            least_penalty = self.recency.weight_time * float(self.recency.penalty((now - newest) / 3600.0))
        k = min(total, max(index.candidates, 4 * n), index.max_k)
        while True:
            ids, sims = index.search(query_vec, k, subset)
            best = self._best_of(ids, sims, n, before=before, now=now, use_recency=use_recency, accept=accept)
            if len(ids) < k or k >= min(total, index.max_k):
                if k < total:
                    log.warning("%s search: %d of %d vectors ranked (the index's top-k limit): the result is "
                                "exact among them only", kind, k, total)
                return best
            bound = self.recency.weight_cos * (1.0 - float(sims.min())) + least_penalty
            if len(best) == n and best[-1][0] <= bound:
                return best
            k = min(total, k * 4, index.max_k)

    def _best_of(self, ids: np.ndarray, sims: np.ndarray, n: int, *, before: Optional[float], now: Optional[float],
                 use_recency: bool, accept) -> list[tuple[float, sqlite3.Row]]:
        """The n best-scored of these search hits that pass the filters."""
        times, known = self._times_of(ids)
        keep = known & ((times <= before) if before is not None else True)
        ids, sims, times = ids[keep], sims[keep].astype(np.float64), times[keep]
        if use_recency:
            scores = self.recency.score(sims, (now - times) / 3600.0)
        else:
            scores = self.recency.weight_cos * (1.0 - sims)
        order = np.argsort(scores, kind="stable")
        best: list[tuple[float, sqlite3.Row]] = []
        start = 0
        while len(best) < n and start < len(order):  # rows for the best candidates only
            chunk = order[start:start + max(n * 2, 16)]
            rows = self._rows_by_id(ids[chunk])
            for i in chunk:
                row = rows.get(int(ids[i]))
                if row is not None and (accept is None or accept(row)):
                    best.append((float(scores[i]), row))
                    if len(best) == n:
                        break
            start += len(chunk)
        return best

    # -- retrieval functions (agent tools) ----------------------------------------------------
    def semantic_observations(self, query: str, person: Optional[str] = None,
                              before: Optional[float] = None, n: int = 30,
                              now: Optional[float] = None) -> list[dict]:
        """HUMEMBR: observations ranked by a*cosine_distance + b*(1-exp(-lambda*hours_ago)),
        optionally only those showing ``person`` and only up to ``before``.  Hours ago count
        from ``now``, the question's time (the agent passes it: under use_sim_time a replayed
        bag's day); without it from ``before``, and only with neither from the wall clock."""
        now = now if now is not None else (before if before is not None else time.time())
        subset = self._person_row_ids(person) if person else None
        hits = self._ranked("text", self.embed_text(query), n, before=before, now=now,
                            use_recency=True, subset=subset)
        return [self._record(row, score) for score, row in hits]

    def text_observations(self, query: str, k: int = 5, before: Optional[float] = None,
                          episode: Optional[str] = None) -> list[dict]:
        """ReMEmbR ``retrieve_from_text``: plain cosine top-k over descriptions (optionally of
        one episode: HIMM's target query on a recalled episode)."""
        hits = self._ranked("text", self.embed_text(query), k, before=before, now=None,
                            use_recency=False, subset=self._episode_row_ids(episode, "text_emb") if episode else None)
        return [self._record(row, 1.0 - score / self.recency.weight_cos, "similarity") for score, row in hits]

    def image_retrieval(self, query: str, m: int = 3, before: Optional[float] = None) -> list[dict]:
        """LVMem: the M observations whose images best match ``query`` (with their image paths).

        With an image-space text encoder (CLIP backend) the query is matched against the global
        image embeddings; otherwise against the descriptions of observations that have images."""
        def has_image(row):
            return bool(row["image_path"])
        if self._image_query_embedder is not None:
            vec = self._image_query_embedder.embed([query])[0]
            hits = self._ranked("image", vec, m, before=before, now=None, use_recency=False,
                                accept=has_image)
        else:
            hits = self._ranked("text", self.embed_text(query), m, before=before, now=None,
                                use_recency=False, accept=has_image)
        return [self._record(row, 1.0 - score / self.recency.weight_cos, "similarity") for score, row in hits]

    def visual_similarity(self, embedding: Sequence[float], k: int = 10, episode: Optional[str] = None,
                          exclude_episode: Optional[str] = None) -> list[dict]:
        """Top-k observations by global image embedding (episodic recall across episodes)."""
        vec = as_vector(embedding)
        if vec is None:
            raise StoreError("visual_similarity: empty embedding")
        subset = self._episode_row_ids(episode, "image_emb") if episode else None
        accept = (lambda row: row["episode_id"] != exclude_episode) if exclude_episode else None
        hits = self._ranked("image", vec, k, before=None, now=None, use_recency=False,
                            subset=subset, accept=accept)
        return [self._record(row, 1.0 - score / self.recency.weight_cos, "similarity") for score, row in hits]

    def observations_near(self, x: float, y: float, radius: Optional[float] = None, k: int = 4,
                          before: Optional[float] = None) -> list[dict]:
        """Observations within ``radius`` metres of (x, y), nearest first; without a radius the
        k nearest (ReMEmbR ``retrieve_from_position``)."""
        if not all(math.isfinite(v) for v in (x, y)):
            raise StoreError("observations_near: x and y must be finite")
        conn = self._conn()
        total = conn.execute("SELECT COUNT(*) FROM obs_xy").fetchone()[0]   # observations with a position
        r = radius if radius is not None else 1.0
        while True:
            rows = conn.execute(
                f"SELECT {', '.join('o.' + c.strip() for c in _OBS_COLUMNS.split(','))} FROM obs_xy "
                "JOIN observations o ON o.id = obs_xy.id WHERE min_x >= ? AND max_x <= ? AND min_y >= ? "
                "AND max_y <= ?" + (" AND o.t <= ?" if before is not None else ""),
                (x - r, x + r, y - r, y + r) + ((before,) if before is not None else ())).fetchall()
            with_dist = sorted(((math.hypot(row["x"] - x, row["y"] - y), row) for row in rows),
                               key=lambda item: (item[0], -item[1]["t"]))
            within = [item for item in with_dist if item[0] <= r]
            if radius is not None:
                chosen = within[:k] if k else within
                break
            if len(within) >= k or len(rows) >= total or r > 1e6:
                chosen = within[:k]
                break
            r *= 4
        return [{**self._record(row), "distance_m": round(d, 2)} for d, row in chosen]

    def observations_between(self, t_start: float, t_end: float, limit: int = 50) -> list[dict]:
        rows = self._conn().execute(f"SELECT {_OBS_COLUMNS} FROM observations WHERE t >= ? AND t <= ? "
                                    "ORDER BY t LIMIT ?", (t_start, t_end, limit))
        return [self._record(r) for r in rows]

    def observations_at(self, t: float, k: int = 4) -> list[dict]:
        """The k observations closest in time to ``t`` (ReMEmbR ``retrieve_from_time``)."""
        conn = self._conn()
        before = conn.execute(f"SELECT {_OBS_COLUMNS} FROM observations WHERE t <= ? ORDER BY t DESC LIMIT ?",
                              (t, k)).fetchall()
        after = conn.execute(f"SELECT {_OBS_COLUMNS} FROM observations WHERE t > ? ORDER BY t LIMIT ?",
                             (t, k)).fetchall()
        rows = sorted(before + after, key=lambda r: abs(r["t"] - t))[:k]
        return [{**self._record(r), "dt_s": round(r["t"] - t, 1)} for r in rows]

    @staticmethod
    def _order_sql(order: str, column: str) -> str:
        if order not in HISTORY_ORDERS:
            raise InvalidArgumentError(f"order must be one of {', '.join(HISTORY_ORDERS)}, got {order!r}")
        return f"ORDER BY {column} {'DESC' if order == 'newest' else 'ASC'}"

    def waypoint_observations(self, waypoint_id: str, t_start: Optional[float] = None,
                              t_end: Optional[float] = None, limit: int = 50,
                              order: str = "newest") -> list[dict]:
        """HUMEMBR waypoint history: what was seen at waypoint W in [t_start, t_end]: the robot's
        observations there and views from elsewhere of a person standing at W (through a door:
        ``waypoint`` W, ``robot_waypoint`` where the robot was); each record's ``persons`` are
        the people who were at W.  ``order`` "newest" = the most recent ``limit``, newest first;
        "oldest" = the earliest, oldest first.  Two ordered index scans, merged."""
        conn = self._conn()
        window = (0.0 if t_start is None else t_start, 1e18 if t_end is None else t_end)
        order_sql = self._order_sql(order, "t")
        here = conn.execute(f"SELECT {_OBS_COLUMNS} FROM observations WHERE waypoint_id=? AND t >= ? AND t <= ? "
                            f"{order_sql} LIMIT ?", (waypoint_id, *window, limit)).fetchall()
        views = conn.execute(
            f"SELECT {', '.join('o.' + c.strip() for c in _OBS_COLUMNS.split(','))} FROM observations o WHERE o.id IN "
            f"(SELECT obs FROM sightings WHERE waypoint_id=? AND t >= ? AND t <= ? {order_sql} LIMIT ?) "
            f"{self._order_sql(order, 'o.t')}", (waypoint_id, *window, 4 * limit)).fetchall()   # a view: several people
        view_ids = {r["id"] for r in views}
        rows = sorted({r["id"]: r for r in [*here, *views]}.values(), key=lambda r: (r["t"], r["id"]),
                      reverse=order == "newest")[:limit]
        places_of: dict[int, dict[str, set]] = {}   # observation -> person -> places (None: the robot's)
        for start in range(0, len(rows), 900):
            chunk = [r["id"] for r in rows[start:start + 900]]
            for s in conn.execute(f"SELECT obs, identity_id, waypoint_id FROM sightings WHERE obs IN "
                                  f"({','.join('?' * len(chunk))}) AND identity_id IS NOT NULL", chunk):
                places_of.setdefault(s["obs"], {}).setdefault(s["identity_id"], set()).add(s["waypoint_id"])
        records = []
        for r in rows:
            rec, places = self._record(r), places_of.get(r["id"], {})
            if r["id"] in view_ids and rec["waypoint"] != waypoint_id:     # a view from elsewhere
                rec["robot_waypoint"], rec["waypoint"] = rec["waypoint"], waypoint_id
                rec["persons"] = [x for x in rec["persons"] if waypoint_id in places.get(x, ())]
            else:                                  # the robot was there: all but those standing elsewhere
                rec["persons"] = [x for x in rec["persons"] if places.get(x, {None}) & {None, waypoint_id}]
            records.append(rec)
        return records

    def person_observations(self, person: str, t_start: Optional[float] = None,
                            t_end: Optional[float] = None, limit: int = 50,
                            order: str = "newest") -> list[dict]:
        """HUMEMBR person history: sightings of ``person`` in [t_start, t_end]; ``order`` as
        for waypoint_observations (default the most recent ``limit``, newest first)."""
        identity = self.resolve_person(person)
        rows = self._conn().execute(
            f"SELECT {', '.join('o.' + c.strip() for c in _OBS_COLUMNS.split(','))}, s.confidence, "
            "s.activity, s.px, s.py, s.pz, s.waypoint_id AS place FROM sightings s JOIN observations o "
            f"ON o.id = s.obs WHERE s.identity_id=? AND s.t >= ? AND s.t <= ? {self._order_sql(order, 's.t')} "
            "LIMIT ?", (identity, 0.0 if t_start is None else t_start, 1e18 if t_end is None else t_end, limit))
        return [self._sighting_record(r) for r in rows]

    def _sighting_record(self, r: sqlite3.Row) -> dict:
        """An observation as a sighting of one person: ``waypoint`` is where the person was (the
        waypoint nearest where they stood, when depth placed them), ``robot_waypoint`` where
        the robot was when that differs, ``person_position`` where they stood (when known)."""
        rec = {**self._record(r), "confidence": round(r["confidence"] or 0.0, 3),
               **({"activity": r["activity"]} if r["activity"] else {})}
        if r["px"] is not None:
            rec["person_position"] = [round(r["px"], 2), round(r["py"], 2), round(r["pz"], 2)]
        if r["place"] and r["place"] != rec["waypoint"]:
            rec["robot_waypoint"], rec["waypoint"] = rec["waypoint"], r["place"]
        return rec

    def day_bounds(self, date: str) -> tuple[float, float]:
        """[start, end) UNIX times of a calendar day (YYYY-MM-DD) in the store's time zone."""
        try:
            day = dt.date.fromisoformat(date)
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"date {date!r} is not a calendar date (YYYY-MM-DD): {exc}") from exc
        return day_window(day, self.tz)

    def _newest(self) -> Optional[float]:
        return self._conn().execute("SELECT MAX(t) FROM observations").fetchone()[0]

    def _covers_everything(self, before: Optional[float]) -> bool:
        """True when ``before`` excludes nothing stored (the fast paths then answer)."""
        if before is None:
            return True
        newest = self._newest()
        return newest is None or before >= newest

    def persons_between(self, t_start: float, t_end: float) -> list[dict]:
        """Everyone with a sighting in [t_start, t_end] (UNIX times), ordered by first sighting
        in the window: person (identity id), name (when named), sightings (count), first_seen /
        last_seen (ISO in the store's zone), first_t / last_t (UNIX, ms), first_id / last_id
        (observation ids of the first and last sighting in the window).  An empty or reversed
        window gives []."""
        if not t_start <= t_end:
            return []
        rows = self._conn().execute(
            "SELECT g.identity_id, g.n, g.first, g.last, i.display_name, "
            "(SELECT o.observation_id FROM sightings s JOIN observations o ON o.id = s.obs WHERE s.identity_id = "
            "g.identity_id AND s.t >= ?1 AND s.t <= ?2 ORDER BY s.t, s.id LIMIT 1) AS first_id, "
            "(SELECT o.observation_id FROM sightings s JOIN observations o ON o.id = s.obs WHERE s.identity_id = "
            "g.identity_id AND s.t >= ?1 AND s.t <= ?2 ORDER BY s.t DESC, s.id DESC LIMIT 1) AS last_id "
            "FROM (SELECT identity_id, COUNT(*) AS n, MIN(t) AS first, MAX(t) AS last FROM sightings "
            "WHERE t >= ?1 AND t <= ?2 GROUP BY identity_id) g JOIN identities i ON i.identity_id = g.identity_id "
            "ORDER BY g.first, g.identity_id", (t_start, t_end))
        return [{"person": r["identity_id"], **({"name": r["display_name"]} if r["display_name"] else {}),
                 "sightings": r["n"], "first_seen": self.iso(r["first"]), "last_seen": self.iso(r["last"]),
                 "first_t": round(r["first"], 3), "last_t": round(r["last"], 3),
                 "first_id": r["first_id"], "last_id": r["last_id"]} for r in rows]

    def persons_per_day(self, date: str, before: Optional[float] = None) -> list[dict]:
        """HUMEMBR available persons: everyone seen on ``date`` (a calendar day in the store's
        zone) up to ``before``: :meth:`persons_between` of that day's window."""
        t0, t1 = self.day_bounds(date)
        t_end = math.nextafter(t1, -math.inf)
        return self.persons_between(t0, t_end if before is None else min(t_end, before))

    def daily_summary(self, date: str, person: str, before: Optional[float] = None) -> dict:
        """HUMEMBR person daily summary of the whole day in time order (up to ``before``; an
        identity first seen after ``before`` is unknown).  Summariser injectable; cached per
        person and day (a day cut by ``before`` is summarised afresh and not cached)."""
        identity = self.resolve_person(person)
        t0, t1 = self.day_bounds(date)
        conn = self._conn()
        if before is not None and conn.execute("SELECT 1 FROM sightings WHERE identity_id=? AND t <= ? LIMIT 1",
                                               (identity, before)).fetchone() is None:
            raise UnknownPersonError(f"unknown person {person!r} as of {self.iso(before)}")
        t_end = t1 - 1e-6
        partial = before is not None and before < t_end
        sightings = self.person_observations(identity, t0, before if partial else t_end, limit=100_000,
                                             order="oldest")
        cached = None if partial else conn.execute(
            "SELECT text, sightings FROM summaries WHERE identity_id=? AND day=?", (identity, date)).fetchone()
        if cached and cached["sightings"] == len(sightings):
            return {"person": identity, "date": date, "sightings": len(sightings), "summary": cached["text"]}
        summariser = self.summariser or self._fallback_summary
        try:
            text = summariser(identity, date, sightings)
        except Exception as exc:  # noqa: BLE001 - an LLM summariser may fail: fall back
            log.warning("summariser failed (%s): using the deterministic summary", exc)
            text = self._fallback_summary(identity, date, sightings)
        if partial:
            return {"person": identity, "date": date, "sightings": len(sightings), "summary": text}
        with self._transaction() as tx:
            tx.execute("INSERT OR REPLACE INTO summaries(identity_id, day, text, sightings, created) "
                       "VALUES (?,?,?,?,?)", (identity, date, text, len(sightings), time.time()))
        return {"person": identity, "date": date, "sightings": len(sightings), "summary": text}

    def _fallback_summary(self, person: str, date: str, sightings: list[dict]) -> str:
        if not sightings:
            return f"{person} was not seen on {date}."
        places: dict[str, int] = {}
        for s in sightings:
            places[s["waypoint"] or "unknown place"] = places.get(s["waypoint"] or "unknown place", 0) + 1
        first, last = sightings[0]["time"][11:16], sightings[-1]["time"][11:16]
        where = ", ".join(f"{w} ({n})" for w, n in sorted(places.items(), key=lambda kv: -kv[1]))
        lines = [f"{person} on {date} ({self.params.timezone}): seen {len(sightings)} times between "
                 f"{first} and {last}; at {where}."]
        step = max(1, len(sightings) // 12)
        for s in sightings[::step]:
            lines.append(f"{s['time'][11:16]} {s['waypoint'] or 'at ' + str(s['position'][:2])}: "
                         f"{s['description'][:100]}")
        return "\n".join(lines)

    # -- identities and privacy ----------------------------------------------------------------
    def identities(self) -> list[Identity]:
        rows = self._conn().execute(
            "SELECT i.identity_id, i.display_name, i.created, COUNT(s.id) AS n, MIN(s.t) AS first, "
            "MAX(s.t) AS last FROM identities i LEFT JOIN sightings s ON s.identity_id = i.identity_id "
            "GROUP BY i.identity_id ORDER BY i.identity_id")
        return [Identity(r["identity_id"], r["display_name"], r["created"], r["n"], r["first"], r["last"])
                for r in rows]

    def name_identity(self, identity_id: str, display_name: str) -> str:
        """An operator names an identity.  Naming it like another identity says they are one
        person: it is merged into that one (returned), and later sightings follow."""
        with self._transaction() as conn:
            if conn.execute("SELECT 1 FROM identities WHERE identity_id=?", (identity_id,)).fetchone() is None:
                raise UnknownPersonError(f"unknown person {identity_id!r}")
            same = conn.execute("SELECT identity_id FROM identities WHERE lower(display_name)=lower(?) AND "
                                "display_name != '' AND identity_id != ? ORDER BY identity_id LIMIT 1",
                                (display_name, identity_id)).fetchone()
            conn.execute("UPDATE identities SET display_name=? WHERE identity_id=?", (display_name, identity_id))
        if same is not None:
            survivor, absorbed = sorted((same[0], identity_id))
            self.merge_identities(absorbed, survivor)
            return survivor
        return identity_id

    def merge_identities(self, absorbed: str, survivor: str) -> int:
        """Perception found two identities to be one person: relabel every sighting of
        ``absorbed`` as ``survivor``; returns the number of sightings moved."""
        if absorbed == survivor:
            return 0
        with self._transaction() as conn:
            names = {r[0]: r[1] for r in conn.execute(
                "SELECT identity_id, display_name FROM identities WHERE identity_id IN (?, ?)", (absorbed, survivor))}
            if conn.execute("SELECT 1 FROM forgotten_identities WHERE identity_id=?", (survivor,)).fetchone():
                log.warning("not merging %s into %s: %s was forgotten", absorbed, survivor, survivor)
                return 0
            if absorbed not in names:
                # the merge came before any sighting of ``absorbed`` (topics are not ordered across
                # resends): remember the alias, so those sightings are stored under the survivor
                conn.execute("UPDATE identity_aliases SET identity_id=? WHERE identity_id=?", (survivor, absorbed))
                conn.execute("INSERT OR REPLACE INTO identity_aliases(alias_id, identity_id) VALUES (?, ?)",
                             (absorbed, survivor))
                return 0
            conn.execute("INSERT OR IGNORE INTO identities(identity_id, display_name, created) VALUES (?, ?, ?)",
                         (survivor, names.get(absorbed, ""), time.time()))
            if not names.get(survivor) and names.get(absorbed):
                conn.execute("UPDATE identities SET display_name=? WHERE identity_id=?", (names[absorbed], survivor))
            moved = conn.execute("UPDATE sightings SET identity_id=? WHERE identity_id=?", (survivor, absorbed)).rowcount
            for rid, persons in conn.execute("SELECT id, persons FROM observations WHERE id IN "
                                             "(SELECT obs FROM sightings WHERE identity_id=?)", (survivor,)).fetchall():
                ids = list(dict.fromkeys(survivor if p == absorbed else p for p in (persons or "").split(",") if p))
                conn.execute("UPDATE observations SET persons=? WHERE id=?", (",".join(ids), rid))
            conn.execute("DELETE FROM summaries WHERE identity_id IN (?, ?)", (absorbed, survivor))
            conn.execute("DELETE FROM identities WHERE identity_id=?", (absorbed,))
            conn.execute("UPDATE identity_aliases SET identity_id=? WHERE identity_id=?", (survivor, absorbed))
            conn.execute("INSERT OR REPLACE INTO identity_aliases(alias_id, identity_id) VALUES (?, ?)",
                         (absorbed, survivor))
        log.info("merged identity %s into %s (%d sightings)", absorbed, survivor, moved)
        return moved

    def forgotten_identities(self, limit: int = 1000) -> list[str]:
        """The most recently forgotten identity ids (tombstones), for perception to forget too."""
        rows = self._conn().execute("SELECT identity_id FROM forgotten_identities ORDER BY forgotten_at DESC LIMIT ?",
                                    (limit,))
        return [r[0] for r in rows]

    def export_identity(self, person: str, include_embeddings: bool = False) -> dict:
        """Everything stored about one identity (a subject-access export)."""
        identity = self.resolve_person(person)
        conn = self._conn()
        ident = conn.execute("SELECT * FROM identities WHERE identity_id=?", (identity,)).fetchone()
        sightings = []
        for r in conn.execute(
                "SELECT s.*, s.waypoint_id AS place, o.observation_id, o.episode_id, o.waypoint_id AS robot_waypoint, "
                "o.x, o.y, o.image_path "
                "FROM sightings s JOIN observations o ON o.id = s.obs WHERE s.identity_id=? ORDER BY s.t",
                (identity,)):
            item = {"observation_id": r["observation_id"], "time": self.iso(r["t"]), "t": round(r["t"], 3),
                    "episode": r["episode_id"],
                    "waypoint": r["place"] or r["robot_waypoint"], "robot_waypoint": r["robot_waypoint"],
                    "position": [r["x"], r["y"]] if r["x"] is not None else None,
                    "person_position": [r["px"], r["py"], r["pz"]] if r["px"] is not None else None,
                    "box": [r["x1"], r["y1"], r["x2"], r["y2"]],
                    "confidence": r["confidence"], "image_path": r["image_path"], "crop_path": r["crop_path"],
                    "activity": r["activity"], "clothing": r["clothing"],
                    "has_face_embedding": r["face_emb"] is not None, "has_reid_embedding": r["reid_emb"] is not None}
            if include_embeddings:
                for col in ("face_emb", "reid_emb"):
                    vec = _unblob(r[col])
                    item[col] = None if vec is None else [round(float(v), 6) for v in vec]
            sightings.append(item)
        summaries = [dict(r) for r in conn.execute("SELECT day, text, created FROM summaries WHERE identity_id=?",
                                                    (identity,))]
        return {"identity_id": identity, "display_name": ident["display_name"], "created": self.iso(ident["created"]),
                "sightings": sightings, "summaries": summaries}

    def _deletable(self, paths: Iterable[str]) -> list[Path]:
        """Existing files among ``paths`` inside the data directory (never delete outside it;
        a memory moved since finds them in its own directory: ``file_in``)."""
        return [p for p in (file_in(self.data_dir, path) for path in paths) if p is not None]

    def _remove_files(self, paths: Iterable[str]) -> int:
        """Delete files after the rows naming them are committed (a read-only or full disk
        fails the transaction first, changing nothing); one the file system still refuses is
        logged.  Returns how many were deleted."""
        removed = 0
        for p in dict.fromkeys(self._deletable(paths)):
            try:
                p.unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.error("cannot delete %s: %s", p, exc)
                continue
            removed += 1
        return removed

    def forget_identity(self, person: str, dry_run: bool = False) -> dict:
        """Delete every sighting, embedding, crop and summary of ``person`` (and of the ids
        merged into it); its ids are tombstoned, so later sightings of them are dropped on
        insert; descriptions naming it are scrubbed (and re-embedded).  With
        ``forget_deletes_images`` the keyframe images of every observation it was seen in are
        deleted too (file, image_path, image embedding).  Returns counts."""
        identity = self.resolve_person(person)
        conn = self._conn()
        name = conn.execute("SELECT display_name FROM identities WHERE identity_id=?", (identity,)).fetchone()[0]
        aliases = [r[0] for r in conn.execute("SELECT alias_id FROM identity_aliases WHERE identity_id=?", (identity,))]
        crops = [r[0] for r in conn.execute("SELECT crop_path FROM sightings WHERE identity_id=?", (identity,))]
        obs_rows = [r[0] for r in conn.execute("SELECT DISTINCT obs FROM sightings WHERE identity_id=?", (identity,))]
        forget_ids = {identity, *aliases}
        pattern = _name_pattern([*forget_ids, name])
        mentioned = set()   # descriptions naming it without a sighting (e.g. an id merged later)
        for word in sorted(w for w in {*forget_ids, name} if w):
            like = "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            mentioned.update(r[0] for r in conn.execute(
                "SELECT id FROM observations WHERE description LIKE ? ESCAPE '\\' OR description_json LIKE ? "
                "ESCAPE '\\'", (like, like)))
        rows = self._rows_by_id(set(obs_rows) | mentioned)
        json_text = self._description_json(rows)
        with_images: list[int] = []
        images: list[str] = []
        image_vectors: list[int] = []
        if self.params.forget_deletes_images and obs_rows:
            for rid, has_vec in self._image_state(obs_rows):
                with_images.append(rid)
                if rows[rid]["image_path"]:
                    images.append(rows[rid]["image_path"])
                if has_vec:
                    image_vectors.append(rid)
        files = [c for c in crops if c] + images
        counts = {"observations_removed": 0, "sightings_removed": len(crops),
                  "images_removed": len(images), "files_removed": len(files)}
        if dry_run:
            return {**counts, "identity_id": identity, "dry_run": True}
        updates = []
        for rid, row in rows.items():
            text = scrub_identity(row["description"] or "", pattern)
            persons = ",".join(p for p in (row["persons"] or "").split(",") if p and p not in forget_ids)
            updates.append((rid, text, persons, text != (row["description"] or ""),
                            scrub_identity(json_text.get(rid, ""), pattern)))
        stale_summaries = [(r[0], r[1]) for r in conn.execute("SELECT identity_id, day, text FROM summaries")
                           if pattern.search(r[2] or "")]
        changed_text = [u for u in updates if u[3]]
        new_vecs = self.text_embedder.embed([u[1] for u in changed_text]) if changed_text else []
        stamp = time.time()
        with self._transaction() as tx:
            tx.execute("DELETE FROM sightings WHERE identity_id=?", (identity,))
            tx.execute("DELETE FROM summaries WHERE identity_id=?", (identity,))
            tx.execute("DELETE FROM identities WHERE identity_id=?", (identity,))
            tx.executemany("INSERT OR REPLACE INTO forgotten_identities(identity_id, forgotten_at) VALUES (?,?)",
                           [(i, stamp) for i in sorted(forget_ids)])
            tx.execute("DELETE FROM identity_aliases WHERE identity_id=?", (identity,))
            tx.executemany("DELETE FROM summaries WHERE identity_id=? AND day=?", stale_summaries)
            for rid, text, persons, _changed, text_json in updates:
                tx.execute("UPDATE observations SET description=?, persons=?, description_json=? WHERE id=?",
                           (text, persons, text_json, rid))
            for (rid, *_rest), vec in zip(changed_text, new_vecs):
                tx.execute("UPDATE observations SET text_emb=? WHERE id=?", (_blob(_unit(vec)), rid))
            tx.executemany("UPDATE observations SET image_path='', image_emb=NULL WHERE id=?",
                           [(rid,) for rid in with_images])
            gen = self._bump_generation(tx)
        if changed_text:
            ids = np.array([u[0] for u in changed_text], dtype=np.int64)
            self._index("text").remove(ids)
            self._index("text").add(ids, np.stack([_unit(v) for v in new_vecs]))
        if image_vectors:
            self._index("image").remove(np.array(image_vectors, dtype=np.int64))
        counts["files_removed"] = self._remove_files(files)
        self._checkpoint_generation(gen)
        log.info("forgot identity %s: %d sightings, %d files", identity, counts["sightings_removed"],
                 counts["files_removed"])
        return {**counts, "identity_id": identity, "aliases": sorted(aliases), "dry_run": False}

    def _description_json(self, rows) -> dict[int, str]:
        out = {}
        ids = [int(i) for i in rows]
        for start in range(0, len(ids), 900):
            chunk = ids[start:start + 900]
            out.update((r[0], r[1] or "") for r in self._conn().execute(
                f"SELECT id, description_json FROM observations WHERE id IN ({','.join('?' * len(chunk))})", chunk))
        return out

    def _image_state(self, row_ids: Sequence[int]) -> list[tuple[int, bool]]:
        """(row id, has an image embedding) of the rows among ``row_ids`` with an image or its vector."""
        out = []
        ids = [int(i) for i in row_ids]
        for start in range(0, len(ids), 900):
            chunk = ids[start:start + 900]
            out += [(r[0], bool(r[1])) for r in self._conn().execute(
                f"SELECT id, image_emb IS NOT NULL FROM observations WHERE id IN ({','.join('?' * len(chunk))}) "
                "AND (image_path != '' OR image_emb IS NOT NULL)", chunk)]
        return out

    def _checkpoint_generation(self, gen: int) -> None:
        """After a delete: every index (opened if need be) is written with the new generation,
        so none is mistaken for stale and rebuilt on the next start."""
        max_id = self._conn().execute("SELECT COALESCE(MAX(id), 0) FROM observations").fetchone()[0]
        for kind in self.VECTOR_KINDS:
            self._checkpoint_index(self._index(kind), max_id, gen)

    def warm_up(self) -> None:
        """Open every vector index and load the text model now (a node calls this in the
        background after start, so the first write or query does not wait for them)."""
        for kind in self.VECTOR_KINDS:
            self._index(kind)
        self.embed_text("warm up")

    def _delete_observations(self, where: str, args: tuple, dry_run: bool) -> dict:
        conn = self._conn()
        ids = [r[0] for r in conn.execute(f"SELECT id FROM observations WHERE {where}", args)]
        files = [r[0] for r in conn.execute(f"SELECT image_path FROM observations WHERE {where}", args)]
        marks_sql = f"SELECT id FROM observations WHERE {where}"
        crops = [r[0] for r in conn.execute(f"SELECT crop_path FROM sightings WHERE obs IN ({marks_sql})", args)]
        counts = {"observations_removed": len(ids), "sightings_removed": len(crops),
                  "files_removed": sum(1 for f in files + crops if f)}
        if dry_run or not ids:
            return {**counts, "dry_run": dry_run}
        with self._transaction() as tx:
            for table, col in (("sightings", "obs"), ("regions", "obs"), ("obs_xy", "id")):
                tx.execute(f"DELETE FROM {table} WHERE {col} IN ({marks_sql})", args)
            tx.execute(f"DELETE FROM observations WHERE {where}", args)
            self._rebuild_waypoint_stats(tx)
            tx.execute("DELETE FROM summaries WHERE identity_id NOT IN (SELECT DISTINCT identity_id FROM sightings "
                       "WHERE identity_id IS NOT NULL)")
            gen = self._bump_generation(tx)
        id_array = np.array(ids, dtype=np.int64)
        for kind in self.VECTOR_KINDS:
            self._index(kind).remove(id_array)
        self._load_times()
        counts["files_removed"] = self._remove_files(files + crops)
        self._checkpoint_generation(gen)
        return {**counts, "dry_run": False}

    def forget_older_than(self, hours: float, now: Optional[float] = None, dry_run: bool = False) -> dict:
        """Retention: delete every observation (and its sightings, regions, files) older than ``hours``."""
        if not (math.isfinite(hours) and hours >= 0):
            raise StoreError("forget_older_than: hours must be a finite number >= 0")
        cutoff = (now if now is not None else time.time()) - hours * 3600.0
        result = self._delete_observations("t < ?", (cutoff,), dry_run)
        if not dry_run:
            with self._transaction() as tx:
                tx.execute("DELETE FROM episodes WHERE episode_id NOT IN (SELECT DISTINCT episode_id FROM observations) "
                           "AND last_stamp < ?", (cutoff,))
        return result

    def forget_episode(self, episode_id: str, dry_run: bool = False) -> dict:
        """Delete one episode and everything recorded in it (an unknown episode is an error)."""
        conn = self._conn()
        if conn.execute("SELECT 1 FROM episodes WHERE episode_id=? UNION SELECT 1 FROM observations WHERE "
                        "episode_id=? LIMIT 1", (episode_id, episode_id)).fetchone() is None:
            known = [r[0] for r in conn.execute("SELECT episode_id FROM episodes ORDER BY start DESC LIMIT 10")]
            raise StoreError(f"no episode {episode_id[:128]!r} (latest: {', '.join(known) or 'none'})",
                             kind="UnknownEpisodeError")
        result = self._delete_observations("episode_id = ?", (episode_id,), dry_run)
        if not dry_run:
            with self._transaction() as tx:
                tx.execute("DELETE FROM episodes WHERE episode_id=?", (episode_id,))
                tx.execute("DELETE FROM occupancy_maps WHERE episode_id=?", (episode_id,))
        return result

    # -- episodes, rules, maps -----------------------------------------------------------------
    def episodes(self) -> list[Episode]:
        return [Episode(r["episode_id"], r["start"], r["end"], r["name"] or "", r["world"] or "")
                for r in self._conn().execute("SELECT * FROM episodes ORDER BY start")]

    def add_rule(self, rule: SemanticRule) -> None:
        vec = rule.embedding if rule.embedding is not None else self.embed_text(
            f"{rule.key}: {rule.condition} -> {rule.action}")
        with self._transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO rules VALUES (?,?,?,?,?,?,?,?)",
                         (rule.rule_id, rule.kind, rule.key, rule.condition, rule.action, rule.episode_id,
                          rule.created or time.time(), _blob(_unit(as_vector(vec)))))

    def rules_for(self, query: str, k: int = 3) -> list[dict]:
        """Top-k semantic rules by similarity to ``query`` (for the agent's system prompt)."""
        rows = self._conn().execute("SELECT * FROM rules").fetchall()
        if not rows:
            return []
        mat = np.stack([_unblob(r["emb"]) for r in rows])
        sims = mat @ _unit(self.embed_text(query))
        order = np.argsort(-sims)[:k]
        return [{"rule_id": rows[i]["rule_id"], "kind": rows[i]["kind"], "key": rows[i]["key"],
                 "condition": rows[i]["condition"], "action": rows[i]["action"],
                 "similarity": round(float(sims[i]), 3)} for i in order]

    def save_occupancy_map(self, episode_id: str, grid: np.ndarray, resolution: float,
                           origin: tuple[float, float]) -> None:
        grid = np.ascontiguousarray(grid, dtype=np.int8)
        with self._transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO occupancy_maps VALUES (?,?,?,?,?,?,?,?)",
                         (episode_id, resolution, origin[0], origin[1], grid.shape[1], grid.shape[0],
                          grid.tobytes(), time.time()))

    def load_occupancy_map(self, episode_id: str) -> Optional[dict]:
        r = self._conn().execute("SELECT * FROM occupancy_maps WHERE episode_id=?", (episode_id,)).fetchone()
        if r is None:
            return None
        grid = np.frombuffer(r["data"], dtype=np.int8).reshape(r["height"], r["width"])
        return {"grid": grid, "resolution": r["resolution"], "origin": (r["origin_x"], r["origin_y"])}

    def occupancy_map(self, episode_id: str) -> Optional[dict]:
        """An episode's occupancy map as JSON (the query service): values base64-coded int8 rows,
        row 0 at the lowest y (nav_msgs/OccupancyGrid layout)."""
        stored = self.load_occupancy_map(episode_id)
        if stored is None:
            return None
        grid = stored["grid"]
        return {"episode": episode_id, "resolution": stored["resolution"], "origin": list(stored["origin"]),
                "width": int(grid.shape[1]), "height": int(grid.shape[0]),
                "data_b64": base64.b64encode(np.ascontiguousarray(grid, np.int8).tobytes()).decode()}

    def observation_count(self) -> int:
        return len(self._time_ids)

    def waypoints(self, before: Optional[float] = None) -> list[dict]:
        """Every waypoint the robot recorded observations with a position at (up to ``before``):
        id, count, mean position, last visit (observations stored without a pose are found by
        ``waypoint_observations``, not counted here)."""
        if self._covers_everything(before):
            rows = self._conn().execute("SELECT waypoint_id, n, sx / n AS x, sy / n AS y, last FROM waypoint_stats "
                                        "WHERE n > 0 ORDER BY waypoint_id")
        else:
            rows = self._conn().execute(
                "SELECT waypoint_id, COUNT(*) AS n, AVG(x) AS x, AVG(y) AS y, MAX(t) AS last FROM observations "
                "INDEXED BY obs_t WHERE t <= ? AND waypoint_id != '' AND x IS NOT NULL GROUP BY waypoint_id "
                "ORDER BY waypoint_id",
                (before,))
        return [{"waypoint": r["waypoint_id"], "observations": r["n"], "position": [round(r["x"], 2), round(r["y"], 2)],
                 "last_visit": self.iso(r["last"])} for r in rows]

    @staticmethod
    def _rebuild_waypoint_stats(conn) -> None:
        conn.execute("DELETE FROM waypoint_stats")
        conn.execute("INSERT INTO waypoint_stats(waypoint_id, n, sx, sy, last) SELECT waypoint_id, COUNT(*), SUM(x), "
                     "SUM(y), MAX(t) FROM observations WHERE waypoint_id != '' AND x IS NOT NULL GROUP BY waypoint_id")

    def people(self, before: Optional[float] = None) -> list[dict]:
        """Every stored identity with its display name and last sighting (index lookups only);
        with ``before`` only those seen by then, with their last sighting by then."""
        if self._covers_everything(before):
            rows = self._conn().execute(
                "SELECT i.identity_id, i.display_name, (SELECT MAX(t) FROM sightings s WHERE s.identity_id = "
                "i.identity_id) AS last FROM identities i ORDER BY i.identity_id")
        else:
            rows = self._conn().execute(
                "SELECT i.identity_id, i.display_name, (SELECT MAX(t) FROM sightings s WHERE s.identity_id = "
                "i.identity_id AND s.t <= ?) AS last FROM identities i WHERE last IS NOT NULL ORDER BY i.identity_id",
                (before,))
        return [{"person": r["identity_id"], **({"name": r["display_name"]} if r["display_name"] else {}),
                 **({"last_seen": self.iso(r["last"])} if r["last"] else {})} for r in rows]

    def recent_positions(self, limit: int) -> list[tuple[float, float, float, bool]]:
        """(x, y, z, has_person) of the newest ``limit`` observations (for map markers)."""
        rows = self._conn().execute("SELECT x, y, z, persons FROM observations WHERE x IS NOT NULL "
                                    "ORDER BY t DESC LIMIT ?", (limit,))
        return [(r["x"], r["y"], r["z"], bool(r["persons"])) for r in rows]

    def get_observation(self, observation_id: str) -> Optional[dict]:
        row = self._conn().execute(f"SELECT {_OBS_COLUMNS} FROM observations WHERE observation_id=?",
                                   (observation_id,)).fetchone()
        return self._record(row) if row else None

    def latest_observation(self, before: Optional[float] = None) -> Optional[dict]:
        row = self._conn().execute(f"SELECT {_OBS_COLUMNS} FROM observations WHERE t <= ? ORDER BY t DESC LIMIT 1",
                                   (before if before is not None else 1e18,)).fetchone()
        return self._record(row) if row else None

    def bytes_on_disk(self) -> int:
        """The database, its WAL and the vector snapshots (images/ and identities/ not counted)."""
        return sum(p.stat().st_size for p in self.data_dir.iterdir() if p.is_file())

    def stats(self) -> dict:
        conn = self._conn()
        count = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
        t = conn.execute("SELECT MIN(t), MAX(t) FROM observations").fetchone()
        size = self.bytes_on_disk()
        return {"backend": self.params.backend, "data_dir": str(self.data_dir.resolve()),
                "episodes": count("SELECT COUNT(*) FROM episodes"),
                "observations": count("SELECT COUNT(*) FROM observations"),
                "regions": count("SELECT COUNT(*) FROM regions"),
                "person_sightings": count("SELECT COUNT(*) FROM sightings"),
                "identities": count("SELECT COUNT(*) FROM identities"),
                "rules": count("SELECT COUNT(*) FROM rules"),
                "bytes_on_disk": size, "oldest": t[0], "newest": t[1],
                "rejections": dict(self.rejections),
                "vectors": {k: self._index(k).count() for k in self.VECTOR_KINDS}}

    # -- the tool table ----------------------------------------------------------------------
    QUERY_TOOLS = ("semantic_observations", "text_observations", "image_retrieval", "visual_similarity",
                   "observations_near", "observations_between", "observations_at", "waypoint_observations",
                   "person_observations", "persons_between", "persons_per_day", "daily_summary",
                   "export_identity", "rules_for", "get_observation", "latest_observation", "waypoints", "people",
                   "occupancy_map")

    _tool_table: Optional[ToolTable] = None

    @classmethod
    def tool_table(cls) -> ToolTable:
        """tool -> argument specs, derived once from the methods' signatures (store/tool_args.py)."""
        if cls._tool_table is None:
            cls._tool_table = build_tool_table({name: getattr(cls, name) for name in cls.QUERY_TOOLS})
        return cls._tool_table

    @classmethod
    def tool_schema(cls, name: str) -> dict:
        """The JSON Schema of a query tool's arguments."""
        return json_schema(cls.tool_table(), name)

    def call_tool(self, name: str, arguments: dict) -> Any:
        """Call a retrieval function by name with JSON arguments (the memory query service).

        Arguments are checked against the tool's schema first (InvalidArgumentError, naming
        the tool and the argument); any other failure comes out as a StoreError with the
        original error's kind, never as a sqlite3 / numpy error."""
        args = validate_arguments(self.tool_table(), name, arguments,
                                  {"image_dim": self.params.image_dim, "text_dim": self.params.text_dim})
        try:
            return getattr(self, name)(**args)
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - no request may take the store down
            log.exception("tool %s failed", name)
            raise StoreError(f"{name}: {type(exc).__name__}: {exc}", kind=type(exc).__name__) from exc


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


def open_store(params: StoreParams, **kwargs) -> MemoryStore:
    """Open (or create) the store described by ``params``."""
    return MemoryStore(params, **kwargs)
