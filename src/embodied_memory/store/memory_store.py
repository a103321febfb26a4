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

Layout: :class:`MemoryStore` is composed here from one mixin per job (each names what it
relies on from the others): ``records.py`` (schema, connections, transactions, validation,
writes), ``index_lifecycle.py`` (vector indexes opened on first use, embedders, snapshots,
warm-up, ``milvus_credentials``), ``retrieval.py`` (ranking and the retrieval functions),
``identities.py`` (naming, merging, forgetting, export, privacy), ``episodes.py`` (episodes,
rules, occupancy maps, waypoint and people listings) and ``stats.py``; ``params.py`` holds
``StoreParams``.  This module keeps ``__init__``, ``close``, the tool table and
``open_store``, and re-exports the names callers import from it.  The package imports
nothing of embodied_memory but ``types`` and ``calendar_windows`` (test/test_store_layering.py).
"""
from __future__ import annotations

import collections
import contextlib
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable, Optional
from zoneinfo import ZoneInfo

from .episodes import EpisodesMixin
from .errors import (SERVER_UNREACHABLE, InsertResult, InvalidArgumentError, InvalidRecordError, StoreError,
                     StoreWriteError, UnknownPersonError)
from .identities import IdentitiesMixin, _name_pattern, scrub_identity
from .index_lifecycle import IndexLifecycleMixin, milvus_credentials
from .migrations import migrate, migrate_server
from .params import StoreParams
from .postgres import BUSY, UNREACHABLE
from .recency import RecencyScore
from .records import (_ID_RE, _MAX_TEXT_FIELD, _SCHEMA, _WRITE_FAULT_ERRNOS, _WRITE_FAULT_TEXT, PLACE_RADIUS_M,
                      RecordsMixin, _blob, _is_write_fault, _nearest_waypoint, _unblob, _unit, _utf8)
from .region_search import RegionSearchMixin
from .retrieval import _OBS_COLUMNS, HISTORY_ORDERS, RetrievalMixin
from .stats import StatsMixin
from .tool_args import ToolTable, validate_arguments
from .time_order import NewestFirst
from .tool_registry import QueryTool, registry_of, tool_table_of

__all__ = ["MemoryStore", "open_store", "milvus_credentials", "StoreParams", "Summariser", "HISTORY_ORDERS",
           "PLACE_RADIUS_M", "scrub_identity", "InsertResult", "InvalidArgumentError", "InvalidRecordError",
           "StoreError", "StoreWriteError", "UnknownPersonError",
           # private names, importable from here as before the split (tests import _is_write_fault)
           "_is_write_fault", "_name_pattern", "_blob", "_unblob", "_unit", "_utf8", "_nearest_waypoint",
           "_ID_RE", "_OBS_COLUMNS", "_SCHEMA", "_MAX_TEXT_FIELD", "_WRITE_FAULT_TEXT", "_WRITE_FAULT_ERRNOS"]

log = logging.getLogger(__name__)

Summariser = Callable[[str, str, list[dict]], str]
"""(person, date, sightings in time order) -> summary text"""


class MemoryStore(RecordsMixin, IndexLifecycleMixin, RetrievalMixin, RegionSearchMixin, IdentitiesMixin, EpisodesMixin,
                  StatsMixin):
    """The robot's long-term memory.  Thread-safe; one writer at a time, readers never wait
    for it (WAL)."""

    def __init__(self, params: StoreParams, *, text_embedder=None, image_query_embedder=None,
                 summariser: Optional[Summariser] = None):
        params.validate()                    # a library caller gets the node's start-up checks
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
        self._checkpoint_again = False
        self.rejections: collections.Counter = collections.Counter()  # rejected records per kind
        self._rejections_lock = threading.Lock()
        self.db_path = self.data_dir / "memory.sqlite3"
        if self.on_server:
            from .postgres import Schema
            self._pg_schema = Schema(_SCHEMA)
        try:
            conn = self._conn()
            if self.on_server:
                migrate_server(conn, self.location, _SCHEMA)
                self._check_login(conn)
            else:
                migrate(conn, self.db_path)
                conn.executescript(_SCHEMA)
            self._check_meta(conn)
        except (sqlite3.OperationalError, OSError) as exc:
            if _is_write_fault(exc):
                raise self._write_error(exc) from exc
            raise
        self._index_lock = threading.RLock()
        self._indexes: dict[str, Any] = {}
        self._newest_first = NewestFirst()
        self._follow_lock = threading.Lock()
        self._seen_generation = self._generation()
        self._load_times()

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

    # -- the tool registry (store/tool_registry.py: every @query_tool of the mixins) -----------
    TOOLS: dict[str, QueryTool] = {}     # set below, once the class exists (and for each subclass)
    QUERY_TOOLS: tuple[str, ...] = ()
    _TOOL_TABLE: ToolTable = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._register_tools()              # a subclass's own @query_tool methods are tools too

    @classmethod
    def _register_tools(cls) -> None:
        cls.TOOLS = registry_of(cls)
        cls.QUERY_TOOLS = tuple(cls.TOOLS)
        cls._TOOL_TABLE = tool_table_of(cls.TOOLS)

    @classmethod
    def tool_table(cls) -> ToolTable:
        """tool -> argument specs (typed, ranged, described)."""
        return cls._TOOL_TABLE

    @classmethod
    def tool_schema(cls, name: str) -> dict:
        """The JSON Schema of a query tool's arguments, each described."""
        return cls.TOOLS[name].json_schema()

    def call_tool(self, name: str, arguments: dict) -> Any:
        """Call a retrieval function by name with JSON arguments (the memory query service).

        Arguments are checked against the tool's schema first (InvalidArgumentError, naming
        the tool and the argument); any other failure comes out as a StoreError with the
        original error's kind, never as a sqlite3 / numpy error."""
        args = validate_arguments(self.tool_table(), name, arguments,
                                  {"image_dim": self.params.image_dim, "text_dim": self.params.text_dim})
        with self.read_errors(name):
            self.follow_other_writers()
            return getattr(self, name)(**args)

    @contextlib.contextmanager
    def read_errors(self, name: str):
        """A read's failure as a StoreError with the original error's kind (a fleet's server away:
        kind SERVER_UNREACHABLE, said in one line), never as a sqlite3 / numpy error."""
        try:
            yield
        except StoreError:
            raise
        except sqlite3.OperationalError as exc:
            if str(exc).startswith((UNREACHABLE, BUSY)):   # a fleet's server away: said once, no traceback
                raise StoreError(f"{name}: the fleet's memory server {self.location} is not reachable (down, or "
                                 "the network); ask again later", kind=SERVER_UNREACHABLE) from exc
            log.exception("%s failed", name)
            raise StoreError(f"{name}: {type(exc).__name__}: {exc}", kind=type(exc).__name__) from exc
        except Exception as exc:  # noqa: BLE001 - no request may take the store down
            log.exception("%s failed", name)
            raise StoreError(f"{name}: {type(exc).__name__}: {exc}", kind=type(exc).__name__) from exc


MemoryStore._register_tools()


def open_store(params: StoreParams, **kwargs) -> MemoryStore:
    """Open (or create) the store described by ``params``."""
    return MemoryStore(params, **kwargs)


def stored_dimensions(data_dir) -> dict[str, int]:
    """The vector dimensions a memory directory was written with (StoreParams fields), read
    read-only: a command that opens someone's memory opens it as it is."""
    db = Path(data_dir).expanduser() / "memory.sqlite3"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN "
                                 "('text_dim', 'image_dim', 'face_dim', 'reid_dim')").fetchall())
    finally:
        conn.close()
    return {key: int(value) for key, value in rows.items()}
