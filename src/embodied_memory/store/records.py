"""The records: getting observations and episodes into SQLite, valid and durable.

SQLite schema, per-thread connections (WAL, ``synchronous=FULL``), the one write transaction
(``_transaction``: a write fault comes out as ``StoreWriteError`` with everything rolled
back), the meta table (configured dimensions, the generation every delete bumps), validation
of each observation (``_validate``; rejections counted per kind) and the writes:
``insert`` / ``insert_batch`` (one transaction, each observation with its sightings and
regions atomic), ``add_episode`` and the waypoint summary table.  Also the vector blob
helpers (``_blob``, ``_unblob``, ``_unit``) the other parts store vectors with.
"""
from __future__ import annotations

import collections
import errno
import json
import logging
import math
import re
import sqlite3
import time
from contextlib import contextmanager
from importlib import resources
from typing import Optional, Sequence

import numpy as np

from ..types import Episode, Observation, as_vector
from .errors import InsertResult, InvalidRecordError, StoreConfigError, StoreError, StoreWriteError
from .migrations import SCHEMA_VERSION

log = logging.getLogger(__package__ + ".memory_store")   # the store's one logger (as before the split)

_SCHEMA = resources.files(__package__).joinpath("schema.sql").read_text(encoding="utf-8")
_ID_RE = re.compile(r"^[A-Za-z0-9_.:/@-]{1,128}$")


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


def _enroll(conn, identity_id: str, display_name: str = "", created: float | None = None) -> None:
    """The identity's row, unless it has one (never an INSERT of a row that exists: on a fleet's
    server a robot may insert only identities it minted, and a conflicting insert is checked too)."""
    conn.execute("INSERT INTO identities(identity_id, display_name, created) SELECT ?, ?, ? WHERE NOT EXISTS "
                 "(SELECT 1 FROM identities WHERE identity_id=?)",
                 (identity_id, display_name, time.time() if created is None else created, identity_id))


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


class RecordsMixin:
    """Connections, transactions, meta, validation and the writes of :class:`MemoryStore`.

    Relies on: ``params``, ``data_dir``, ``db_path``, ``_local``, ``_write_lock``,
    ``rejections``, ``_rejections_lock``, ``_indexes``, ``_index_lock`` and
    ``_inserted_since_checkpoint`` (set by ``MemoryStore.__init__``); ``_time_table``
    (retrieval's row id -> time table, extended on insert); ``text_embedder``
    and ``_checkpoint_in_background`` (index_lifecycle); ``_forgotten_among``,
    ``_drop_forgotten`` and ``_remove_files`` (identities)."""

    # -- connections ----------------------------------------------------------------------------
    @property
    def on_server(self) -> bool:
        """Records on a server other processes (robots) write too (backend postgres)."""
        return self.params.backend == "postgres"

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection (a PgConnection on the fleet server, reopened after the
        server went away)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and getattr(conn, "broken", False):
            conn.close()
            conn = self._local.conn = None
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    def _connect(self):
        """A new connection to the records, autocommit (the store writes BEGIN / COMMIT itself)."""
        if self.on_server:
            from .postgres import PgConnection, password_from
            env = self.params.postgres_password_env
            password = password_from(env)
            hint = "" if password else f" (the environment variable {env or 'postgres_password_env'} is empty)"
            return PgConnection(self.params.postgres_url, self._pg_schema, password=password,
                                connect_timeout_s=self.params.postgres_connect_timeout_s, password_hint=hint)
        conn = sqlite3.connect(self.db_path, timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA cache_size=-65536")
        conn.row_factory = sqlite3.Row
        return conn

    def _check_login(self, conn) -> None:
        """A robot's login on a fleet's server writes as that robot only: robot_id must be the
        login's name (a robot login (em_robot) without robot_id, or with another, is refused
        here, not record by record)."""
        user, robot_login = conn.execute(      # (a superuser is a member of every role: not a robot's login)
            "SELECT current_user, CASE WHEN (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN false "
            "WHEN EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'em_robot') THEN "
            "pg_has_role(current_user, 'em_robot', 'MEMBER') ELSE false END").fetchone()
        if robot_login and self.params.robot_id != user:
            raise StoreConfigError(f"{self.location}: logged in as robot {user!r} but robot_id is "
                                   f"{self.params.robot_id!r}: set robot_id to the login's name (or log in as "
                                   f"{self.params.robot_id!r})")

    def server_clock_offset_s(self) -> float:
        """The fleet server's clock minus this machine's (seconds, at the middle of one round
        trip): robots' stamps are comparable only as far as their clocks agree."""
        before = time.time()
        server = float(self._conn().execute("SELECT EXTRACT(EPOCH FROM clock_timestamp())").fetchone()[0])
        return server - (before + time.time()) / 2.0

    @property
    def location(self) -> str:
        """Where the records are, for messages (the server URL holds no password)."""
        return self.params.postgres_url if self.on_server else str(self.db_path)

    def _write_error(self, exc: BaseException) -> StoreWriteError:
        why = "server down or unreachable?" if self.on_server else "disk full, read-only or over a file-size limit?"
        return StoreWriteError(f"cannot write the memory in {self.location}: {exc} ({why}); nothing of this "
                               "call was stored: keep the record and retry",
                               kind="StoreWriteError")

    @contextmanager
    def _transaction(self):
        """One write transaction; a write fault (disk full, read-only, file-size limit) comes
        out as StoreWriteError with everything rolled back, other SQLite errors as StoreError."""
        conn = self._conn()
        with self._write_lock:
            try:
                try:       # (a BEGIN that fails half way -- the fleet's lock not given in time -- is rolled back too)
                    conn.execute("BEGIN IMMEDIATE")
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        try:
                            conn.execute("ROLLBACK")
                        except sqlite3.Error as exc:  # SQLite may have rolled back itself; a server gone, too
                            (log.debug if self.on_server else log.warning)("rollback failed: %s", exc)
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
                raise StoreError(f"{self.location}: stored {key} is {stored[key]} but the configuration "
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
        self._seen_generation = gen        # this process redoes its own state after its delete
        return gen

    @staticmethod
    def _rebuild_waypoint_stats(conn) -> None:
        conn.execute("DELETE FROM waypoint_stats")
        conn.execute("INSERT INTO waypoint_stats(waypoint_id, n, sx, sy, last) SELECT waypoint_id, COUNT(*), SUM(x), "
                     "SUM(y), MAX(t) FROM observations WHERE waypoint_id != '' AND x IS NOT NULL GROUP BY waypoint_id")

    # -- writing ----------------------------------------------------------------------------
    def add_episode(self, episode: Episode) -> None:
        if not _ID_RE.match(episode.episode_id):
            raise InvalidRecordError(f"episode_id {episode.episode_id!r}: 1-128 chars of [A-Za-z0-9_.:/@-]")
        with self._transaction() as conn:
            conn.execute("INSERT INTO episodes(episode_id, start, end, name, world, last_stamp, robot_id) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(episode_id) DO UPDATE SET "
                         "end=excluded.end, name=excluded.name, world=excluded.world",
                         (episode.episode_id, episode.start, episode.end, episode.name,
                          episode.world, episode.start, self.params.robot_id))

    def rejection(self, obs: Observation) -> Optional[str]:
        """Why ``insert`` would reject ``obs`` (its own checks, no database), or None."""
        try:
            self._validate(obs)
        except InvalidRecordError as exc:
            return f"{exc.kind}: {exc}"
        return None

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
            if not isinstance(s.track_id, (int, np.integer)) or isinstance(s.track_id, bool) or \
                    not s.track_id < 2 ** 63:
                self._count("bad_track_id")      # not a track number: the sighting stays, untracked
                s.track_id = 0
            elif s.track_id < 0:
                s.track_id = 0                   # a tracker's "untracked" (-1)
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

    def observation_times(self) -> list[float]:
        """Every stored observation's stamp, oldest first."""
        return [r[0] for r in self._conn().execute("SELECT t FROM observations ORDER BY t")]

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
        if isinstance(observations, Observation):      # one record: a batch of one
            observations = [observations]
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
            # row ids are never reused: after the newest rows were deleted SQLite would hand their ids
            # out again, and an open index that held them takes only ids above its max_id
            with self._index_lock:
                indexed_to = max((getattr(ix, "max_id", 0) for ix in self._indexes.values()), default=0)
            next_id = indexed_to + 1 if not self.on_server and conn.execute(
                "SELECT COALESCE(MAX(id), 0) FROM observations").fetchone()[0] < indexed_to else None  # (a server never reuses ids)
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
                        conn.execute("INSERT INTO episodes(episode_id, start, last_stamp, robot_id) VALUES (?,?,?,?)",
                                     (obs.episode_id, obs.stamp, obs.stamp, self.params.robot_id))
                    row_id, text_vec, image_vec = self._write_observation(conn, obs, now, next_id)
                except (sqlite3.IntegrityError, sqlite3.InterfaceError, sqlite3.ProgrammingError,
                        sqlite3.DataError, ValueError, TypeError, OverflowError) as exc:
                    conn.execute("ROLLBACK TO obs")
                    conn.execute("RELEASE obs")
                    self._reject(result, obs, InvalidRecordError(f"{type(exc).__name__}: {exc}", kind="unstorable"))
                    continue
                conn.execute("RELEASE obs")
                next_id = None                     # the next ones follow it
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
        if self.on_server:            # other robots' rows may lie between ours: read them all in id order
            try:
                self.follow_other_writers()
            except Exception as exc:  # noqa: BLE001 - committed: the next query catches up
                log.error("after storing %d observations, catching up with the server failed: %s",
                          len(result.stored), exc)
            new_vectors = {"text": [], "image": []}
        elif result.stored:
            self._time_table = self._time_table.appended(np.array(inserted_rows, dtype=np.int64),
                                                         np.array(inserted_times, dtype=np.float64))
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

    def _write_observation(self, conn, obs: Observation, now: float, row_id: Optional[int] = None):
        """The rows of one observation (under ``row_id``, else SQLite's next); returns (row id,
        text vector, image vector)."""
        p = obs.pose                 # None: NULL position, no rtree row, not in the waypoint's mean position
        x, y, z, yaw, frame_id = (p.x, p.y, p.z, p.yaw, p.frame_id) if p is not None else (None,) * 5
        persons = ",".join(dict.fromkeys(s.identity_id for s in obs.people if s.identity_id))
        text_vec = _unit(obs.text_embedding) if obs.text_embedding is not None else None
        image_vec = _unit(obs.global_embedding) if obs.global_embedding is not None else None
        values = (obs.observation_id, obs.stamp, obs.episode_id, obs.keyframe_id, int(obs.segment_id),
                  obs.waypoint_id, x, y, z, yaw, frame_id, obs.description, obs.description_json, obs.image_path,
                  persons, _blob(text_vec), _blob(image_vec), self.params.robot_id)
        columns = ("observation_id, t, episode_id, keyframe_id, segment_id, waypoint_id, x, y, z, yaw, frame_id, "
                   "description, description_json, image_path, persons, text_emb, image_emb, robot_id")
        if row_id is not None:
            columns, values = "id, " + columns, (row_id, *values)
        cur = conn.execute(f"INSERT INTO observations({columns}) VALUES ({','.join('?' * len(values))})", values)
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
                         "ON CONFLICT(waypoint_id) DO UPDATE SET n=waypoint_stats.n+1, sx=waypoint_stats.sx+excluded.sx, "
                         "sy=waypoint_stats.sy+excluded.sy, last=MAX(waypoint_stats.last, excluded.last)", (obs.waypoint_id, x, y, obs.stamp))
        centres = None
        for s in obs.people:
            if s.identity_id:
                _enroll(conn, s.identity_id, created=now)
            position = s.position if p is not None else None     # no pose: no frame to place them in
            if position is not None and centres is None:
                centres = conn.execute("SELECT waypoint_id, sx / n, sy / n FROM waypoint_stats").fetchall()
            place = _nearest_waypoint(position, centres) if position is not None else None
            conn.execute(
                "INSERT INTO sightings(obs, identity_id, t, confidence, detection_score, x1, y1, x2, "
                "y2, face_box, face_emb, reid_emb, activity, clothing, crop_path, px, py, pz, waypoint_id, track) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (row_id, s.identity_id or None, obs.stamp, s.identity_confidence, s.detection_score,
                 *s.box, json.dumps(list(s.face_box)) if s.face_box else None,
                 _blob(s.face_embedding), _blob(s.reid_embedding), s.activity, s.clothing,
                 s.crop_path, *(position if position is not None else (None, None, None)),
                 place if place and place != obs.waypoint_id else None,   # NULL: the observation's place
                 int(s.track_id) or None))
        for s in obs.people:
            if s.identity_id and s.track_id:
                self._fill_track(conn, s.track_id, s.identity_id, obs.stamp, obs.episode_id)
        return row_id, text_vec, image_vec
