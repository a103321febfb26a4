"""A fleet robot's outbox: observations its server could not take, kept on its own disk.

When the fleet's server is away (network, restart, a lock held past the timeout), the memory
node puts each observation here instead (one SQLite file, committed with ``synchronous=FULL``
before the observation is acknowledged), in arrival order, keyframe image included, and
``flush`` hands them to the server in that order once it answers again: a record is removed
here only after the server stored it (or already had it: the server's insert is idempotent by
observation id), so a crash between the two sends it once more and it is stored once.  A
record the server refuses for itself (row-level security after a robot_id change, a check the
server makes) is moved to ``refused`` with the reason and logged: it never blocks the others.

While the server is away, ``answer`` answers the retrieval tools from what waits here (an
embedded memory of this robot's unsent records, kept in step with the outbox): a robot still
answers about what it saw since the link went, and says the fleet's view is stale.
"""
from __future__ import annotations

import json
import logging
import shutil
import sqlite3
import threading
from dataclasses import replace
from pathlib import Path

from ..records_io import observation_from_dict, observation_to_dict
from ..types import Observation
from .errors import StoreConfigError, StoreError, StoreWriteError

log = logging.getLogger(__name__)

OUTBOX_FILE = "outbox.sqlite3"
VIEW_DIR = "outbox_view"
FLUSH_BATCH = 50


class Outbox:
    def __init__(self, folder: str | Path, store_params=None):
        """``folder``: the robot's data directory; ``store_params``: its store's parameters (the
        offline view is an embedded memory of the same dimensions and robot_id)."""
        self.folder = Path(folder).expanduser().resolve()
        self.folder.mkdir(parents=True, exist_ok=True)
        self._params = store_params
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.folder / OUTBOX_FILE, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("CREATE TABLE IF NOT EXISTS pending (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
                         "observation_id TEXT NOT NULL UNIQUE, stamp REAL NOT NULL, record TEXT NOT NULL, image BLOB)")
        self._db.execute("CREATE TABLE IF NOT EXISTS refused (observation_id TEXT PRIMARY KEY, record TEXT NOT NULL, "
                         "reason TEXT NOT NULL)")
        self._view = None
        self._view_seq = 0                  # the last outbox row the view holds
        self._view_lock = threading.Lock()
        shutil.rmtree(self.folder / VIEW_DIR, ignore_errors=True)   # a view left by an earlier run: rebuilt

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM pending").fetchone()[0]

    def refused(self) -> dict[str, str]:
        """Observation id -> why the server refused it (kept here for an operator)."""
        with self._lock:
            return dict(self._db.execute("SELECT observation_id, reason FROM refused").fetchall())

    def put(self, obs: Observation) -> bool:
        """Keep ``obs`` (durably, before it is acknowledged); False when it waits here already."""
        record = observation_to_dict(obs)
        if obs.image_jpeg:
            record["image_path"] = ""            # written where the server's record says, once sent
        try:
            with self._lock:
                cur = self._db.execute("INSERT OR IGNORE INTO pending (observation_id, stamp, record, image) "
                                       "VALUES (?, ?, ?, ?)", (obs.observation_id, obs.stamp,
                                                               json.dumps(record), obs.image_jpeg))
                return cur.rowcount == 1
        except sqlite3.OperationalError as exc:     # disk full, read-only: not kept, not acknowledged
            raise StoreWriteError(f"outbox {self.folder / OUTBOX_FILE}: {exc}") from exc

    def _rows(self, after: int = 0, limit: int = FLUSH_BATCH, images: bool = True) -> list[tuple[int, Observation]]:
        with self._lock:
            rows = self._db.execute(f"SELECT seq, record, {'image' if images else 'NULL'} FROM pending "
                                    "WHERE seq > ? ORDER BY seq LIMIT ?", (after, limit)).fetchall()
        out = []
        for seq, record, image in rows:
            obs = observation_from_dict(json.loads(record))
            obs.image_jpeg = image
            out.append((seq, obs))
        return out

    def _done(self, seqs: list[int], refused: dict[int, str]) -> None:
        with self._lock, self._db:
            self._db.execute("BEGIN")
            for seq, reason in refused.items():
                self._db.execute("INSERT OR REPLACE INTO refused (observation_id, record, reason) "
                                 "SELECT observation_id, record, ? FROM pending WHERE seq = ?", (reason, seq))
            self._db.executemany("DELETE FROM pending WHERE seq = ?", [(seq,) for seq in seqs])

    def flush(self, store, max_batches: int = 0) -> int:
        """Hand what waits here to ``store`` (the fleet's server), oldest first, at most
        ``max_batches`` batches of FLUSH_BATCH (0: all); returns how many were sent.  Raises
        StoreWriteError or StoreConfigError (the server away, a login refused: the rest stays)."""
        from .image_files import insert_with_images
        sent = batches = 0
        while not max_batches or batches < max_batches:
            rows = self._rows()
            if not rows:
                break
            batches += 1
            try:
                result = insert_with_images(store, [obs for _, obs in rows])      # stored or already there
                refused = {seq: result.rejected[obs.observation_id] for seq, obs in rows
                           if obs.observation_id in result.rejected}
            except (StoreWriteError, StoreConfigError):
                raise
            except StoreError:              # one record the server refuses: find it, keep sending the others
                refused = self._one_by_one(store, rows)
            for seq, reason in refused.items():
                log.error("outbox: the fleet's server refused observation %s (kept in %s, table refused): %s",
                          dict(rows)[seq].observation_id, self.folder / OUTBOX_FILE, reason)
            self._done([seq for seq, _ in rows], refused)
            sent += len(rows) - len(refused)
        if sent:
            log.info("outbox: %d observations handed to the fleet's server", sent)
        if not len(self):
            self._drop_view()
        return sent

    @staticmethod
    def _one_by_one(store, rows: list[tuple[int, Observation]]) -> dict[int, str]:
        from .image_files import insert_with_images
        refused = {}
        for seq, obs in rows:
            try:
                result = insert_with_images(store, [obs])
            except (StoreWriteError, StoreConfigError):
                raise
            except StoreError as exc:
                refused[seq] = f"{exc.kind}: {exc}"
                continue
            if obs.observation_id in result.rejected:
                refused[seq] = result.rejected[obs.observation_id]
        return refused

    def answer(self, tool: str, arguments: dict):
        """A retrieval tool's result over the observations waiting here (an embedded memory kept
        in step with the outbox, without their images), for questions while the server is away."""
        with self._view_lock:                  # questions in parallel, a flush dropping the view
            if self._view is None:
                from . import open_store
                shutil.rmtree(self.folder / VIEW_DIR, ignore_errors=True)
                self._view = open_store(replace(self._params, backend="sqlite_faiss", postgres_url="",
                                                data_dir=str(self.folder / VIEW_DIR)))
            while rows := self._rows(self._view_seq, limit=500, images=False):
                self._view.insert_batch([obs for _, obs in rows])
                self._view_seq = rows[-1][0]
            return self._view.call_tool(tool, arguments)

    def _drop_view(self) -> None:
        with self._view_lock:
            if self._view is not None:
                self._view.close()
                self._view, self._view_seq = None, 0
            shutil.rmtree(self.folder / VIEW_DIR, ignore_errors=True)

    def close(self) -> None:
        with self._view_lock:
            if self._view is not None:
                self._view.close()
                self._view = None
        self._db.close()
