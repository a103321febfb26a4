"""The fleet backend's connection: the store's SQL run on a PostgreSQL server many robots share.

The store is written once, in SQLite's SQL; this module runs the same statements on PostgreSQL
(``backend: postgres``) so every query tool, write, merge and forget behaves the same on the
fleet server as in the embedded memory:

- ``translate`` rewrites one statement (placeholders, ``INSERT OR IGNORE / REPLACE``, two-argument
  ``MAX``/``MIN``, ``group_concat``, ``INDEXED BY``, SQLite's case-insensitive ``LIKE``, the
  ``end`` column) and ``schema_statements`` the schema (``REAL`` -> double precision, ``BLOB`` ->
  bytea, ``INTEGER PRIMARY KEY`` -> an identity column, the R*-tree -> a plain table);
- :class:`PgConnection` looks like a ``sqlite3.Connection`` to the store (``execute`` /
  ``executemany`` / ``executescript``, rows readable by index and by name, ``lastrowid``) and turns
  PostgreSQL's errors into the ``sqlite3`` exception the store already handles: a server that
  cannot be reached is a write fault (``StoreWriteError``: keep the record and retry), a
  constraint an ``IntegrityError``, a refused privilege a ``DatabaseError``;
- ``BEGIN IMMEDIATE`` takes a fleet-wide advisory lock, so writers (robots) commit one at a time
  and row ids grow in commit order: a reader that has seen every row up to id N has seen every
  row committed before it (``MemoryStore`` catches up from there).

Credentials never come from YAML: the URL names the user and host, the password comes from the
environment variable ``postgres_password_env`` names (or libpq's own ``PGPASSWORD`` /
``~/.pgpass``); TLS is libpq's ``sslmode`` / ``sslrootcert`` / ``sslcert`` / ``sslkey``.
"""
from __future__ import annotations

import decimal
import functools
import logging
import os
import re
import sqlite3
from typing import Iterable, Optional, Sequence

from .errors import StoreConfigError

WRITE_LOCK_KEY = 0x656D656D   # pg_advisory_xact_lock key of the fleet's one write transaction ("emem")
UNREACHABLE = "unable to write: the memory server cannot be reached"   # a write fault (records._WRITE_FAULT_TEXT)
BUSY = "unable to write: the memory server did not answer in time"

# a robot's write holds the fleet's lock: a robot whose link dies mid-transaction must not hold it
# (the server ends its session), and a writer waits for the lock at most lock_timeout (then a write
# fault: the record is kept and resent); dead links are noticed by TCP keepalives in seconds
SESSION_LIMITS = {"options": "-c lock_timeout=15s -c idle_in_transaction_session_timeout=20s "
                             "-c statement_timeout=120s",
                  "keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3,
                  "tcp_user_timeout": 15000}
REFUSALS = ("password authentication failed", "no password supplied", "does not exist",
            "no pg_hba.conf entry", "permission denied for database")
_QUOTED = re.compile(r"'(?:[^']|'')*'")
_INSERT_OR = re.compile(r"^\s*INSERT\s+OR\s+(IGNORE|REPLACE)\s+INTO\s+(\w+)\s*(\(([^)]*)\))?", re.IGNORECASE)
_INDEXED_BY = re.compile(r"\s+INDEXED\s+BY\s+\w+", re.IGNORECASE)
_CASE_OR_END = re.compile(r"'(?:[^']|'')*'|(?<![\w\"])(case|end)(?![\w\"])", re.IGNORECASE)
_GROUP_CONCAT = re.compile(r"group_concat\(([^()]*)\)", re.IGNORECASE)
_RETURNS_ID = {"observations", "regions", "sightings", "identity_changes"}


def _outside_quotes(sql: str, edit) -> str:
    """``edit`` applied to the parts of ``sql`` outside string literals."""
    out, last = [], 0
    for m in _QUOTED.finditer(sql):
        out += [edit(sql[last:m.start()]), m.group(0)]
        last = m.end()
    out.append(edit(sql[last:]))
    return "".join(out)


def _quote_end_column(sql: str) -> str:
    """The column ``end`` (episodes) quoted: a reserved word in PostgreSQL; the END of a CASE stays."""
    depth = 0

    def one(m: re.Match) -> str:
        nonlocal depth
        word = m.group(1)
        if word is None:                                  # a string literal
            return m.group(0)
        if word.lower() == "case":
            depth += 1
            return word
        if depth:
            depth -= 1
            return word
        return '"end"'
    return _CASE_OR_END.sub(one, sql)


def _two_argument_extrema(sql: str) -> str:
    """SQLite's scalar ``MAX(a, b)`` / ``MIN(a, b)`` as PostgreSQL's GREATEST / LEAST (the
    one-argument aggregates stay)."""
    out, i = [], 0
    pattern = re.compile(r"\b(MAX|MIN)\(", re.IGNORECASE)
    while True:
        m = pattern.search(sql, i)
        if m is None:
            out.append(sql[i:])
            return "".join(out)
        depth, j, comma = 1, m.end(), False
        while j < len(sql) and depth:
            depth += {"(": 1, ")": -1}.get(sql[j], 0)
            comma |= sql[j] == "," and depth == 1
            j += 1
        name = ("GREATEST" if m.group(1).upper() == "MAX" else "LEAST") if comma else m.group(1)
        out += [sql[i:m.start()], name, "(", _two_argument_extrema(sql[m.end():j - 1]), ")"]
        i = j


class Schema:
    """Each table's columns and primary key, read from the SQLite schema (for INSERT OR REPLACE)."""

    def __init__(self, sqlite_schema: str):
        self.columns: dict[str, list[str]] = {}
        self.keys: dict[str, list[str]] = {}
        for m in re.finditer(r"CREATE TABLE IF NOT EXISTS (\w+)\((.*?)\);", _strip_comments(sqlite_schema), re.S):
            table, body = m.group(1), m.group(2)
            parts = [p.strip() for p in re.split(r",(?![^()]*\))", body)]
            cols, key = [], []
            for part in parts:
                pk = re.match(r"PRIMARY KEY\s*\(([^)]*)\)", part, re.IGNORECASE)
                if pk:
                    key = [c.strip() for c in pk.group(1).split(",")]
                    continue
                name = part.split()[0]
                cols.append(name)
                if "PRIMARY KEY" in part.upper():
                    key = [name]
            self.columns[table], self.keys[table] = cols, key


def _strip_comments(sql: str) -> str:
    return re.sub(r"--[^\n]*", "", sql)


@functools.lru_cache(maxsize=1024)
def translate(sql: str, schema: Schema, with_params: bool) -> tuple[str, bool]:
    """One store statement in PostgreSQL's SQL; also whether it returns the new row's id."""
    upper = sql.lstrip().upper()
    if upper.startswith("PRAGMA"):
        return "", False
    if upper.startswith("BEGIN"):
        return f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK_KEY})", False
    suffix, returns_id = "", False
    m = _INSERT_OR.match(sql)
    if m:
        mode, table, cols = m.group(1).upper(), m.group(2), m.group(4)
        columns = [c.strip() for c in cols.split(",")] if cols else schema.columns[table]
        sql = f"INSERT INTO {table}({', '.join(columns)})" + sql[m.end():]
        key = schema.keys[table]
        if mode == "IGNORE":
            suffix = " ON CONFLICT DO NOTHING"
        else:
            updates = [c for c in columns if c not in key]
            suffix = (f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET "
                      + ", ".join(f"{c}=EXCLUDED.{c}" for c in updates)) if updates else " ON CONFLICT DO NOTHING"
    insert = re.match(r"^\s*INSERT\s+INTO\s+(\w+)", sql, re.IGNORECASE)
    if insert and insert.group(1) in _RETURNS_ID and "RETURNING" not in sql.upper():
        suffix += " RETURNING id"
        returns_id = True

    def edit(part: str) -> str:
        part = _INDEXED_BY.sub("", part)
        part = _GROUP_CONCAT.sub(r"string_agg(CAST(\1 AS TEXT), ',')", part)
        part = re.sub(r"\bLIKE\b", "ILIKE", part)                   # SQLite's LIKE ignores ASCII case
        if with_params:                                             # (every % doubled below)
            part = re.sub(r"\?(\d+)", r"%(p\1)s", part).replace("?", "%s")
        return part
    sql = _quote_end_column(sql.rstrip().rstrip(";"))
    if with_params:                      # a literal % too: psycopg reads every % of a statement with values
        sql = sql.replace("%", "%%")
    sql = _two_argument_extrema(_outside_quotes(sql, edit))
    return sql + suffix, returns_id


def schema_statements(sqlite_schema: str) -> list[str]:
    """The SQLite schema as PostgreSQL DDL statements."""
    out = []
    for statement in _strip_comments(sqlite_schema).split(";"):
        s = statement.strip()
        if not s:
            continue
        rtree = re.match(r"CREATE VIRTUAL TABLE IF NOT EXISTS (\w+) USING rtree\((\w+), (.*)\)", s, re.S)
        if rtree:
            name, key, bounds = rtree.groups()
            cols = ", ".join(f"{c.strip()} DOUBLE PRECISION" for c in bounds.split(","))
            out.append(f"CREATE TABLE IF NOT EXISTS {name}({key} BIGINT PRIMARY KEY, {cols})")
            out.append(f"CREATE INDEX IF NOT EXISTS {name}_box ON {name}(min_x, min_y)")
            continue
        # ids from the server's sequence only (a writer choosing one would hide rows from catch-up by id)
        s = re.sub(r"\bINTEGER PRIMARY KEY\b", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", s)
        s = re.sub(r"\bINTEGER\b", "BIGINT", s)
        s = re.sub(r"\bREAL\b", "DOUBLE PRECISION", s)
        s = re.sub(r"\bBLOB\b", "BYTEA", s)
        s = _quote_end_column(s)
        out.append(s)
    return out


class Row(tuple):
    """A result row readable as ``row[0]`` and ``row["name"]`` (as ``sqlite3.Row``)."""

    __slots__ = ()
    _names: dict[str, int] = {}

    def __getitem__(self, key):
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_class(names: Sequence[str]) -> type:
    index = {name: i for i, name in enumerate(names)}
    return type("Row", (Row,), {"_names": index, "__slots__": ()})


def _value(v):
    if isinstance(v, decimal.Decimal):               # SUM over integers is numeric in PostgreSQL
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, memoryview):
        return bytes(v)
    return v


class Cursor:
    """What the store reads from ``execute``: rows, ``lastrowid``, ``rowcount``."""

    def __init__(self, rows: list, lastrowid: Optional[int], rowcount: int):
        self._rows, self.lastrowid, self.rowcount = rows, lastrowid, rowcount
        self._at = 0

    def fetchone(self):
        if self._at >= len(self._rows):
            return None
        self._at += 1
        return self._rows[self._at - 1]

    def fetchall(self) -> list:
        rows, self._at = self._rows[self._at:], len(self._rows)
        return rows

    def fetchmany(self, size: int = 1) -> list:
        rows = self._rows[self._at:self._at + size]
        self._at += len(rows)
        return rows

    def __iter__(self):
        return iter(self.fetchall())


def _as_sqlite_error(exc: Exception) -> Exception:
    import psycopg
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return sqlite3.DatabaseError(f"permission denied: {message}")
    if isinstance(exc, psycopg.IntegrityError):
        return sqlite3.IntegrityError(message)
    if isinstance(exc, psycopg.DataError):
        return sqlite3.DataError(message)
    if isinstance(exc, (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled,
                        psycopg.errors.IdleInTransactionSessionTimeout, psycopg.errors.InFailedSqlTransaction)):
        return sqlite3.OperationalError(f"{BUSY}: {message}")          # a write fault: kept and retried
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return sqlite3.OperationalError(f"{UNREACHABLE}: {message}")
    if isinstance(exc, psycopg.ProgrammingError):
        return sqlite3.OperationalError(message)
    return sqlite3.DatabaseError(message)


class PgConnection:
    """A PostgreSQL connection that the store uses as it uses a ``sqlite3.Connection``
    (autocommit; the store's BEGIN / COMMIT / SAVEPOINT statements run as written)."""

    def __init__(self, conninfo: str, schema: Schema, *, password: str = "", connect_timeout_s: float = 10.0,
                 password_hint: str = ""):
        import psycopg
        self._schema = schema
        kwargs = {"autocommit": True, "connect_timeout": max(1, int(connect_timeout_s)),
                  "cursor_factory": psycopg.ClientCursor,      # SQLite-like literal binding: untyped ? work
                  **SESSION_LIMITS}
        if password:
            kwargs["password"] = password
        try:
            self._pg = psycopg.connect(conninfo, **kwargs)
        except psycopg.Error as exc:
            text = str(exc)
            if any(refusal in text for refusal in REFUSALS):     # retrying will not help
                raise StoreConfigError(f"the memory server refused this login: {text.strip().splitlines()[-1]}"
                                       f"{password_hint}") from exc
            raise _as_sqlite_error(exc) from exc
        self.row_factory = None       # the store sets sqlite3.Row; rows here are always readable by name

    @property
    def broken(self) -> bool:
        return self._pg.closed or self._pg.broken

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus
        return self._pg.info.transaction_status != TransactionStatus.IDLE

    def execute(self, sql: str, params: Sequence = ()) -> Cursor:
        import psycopg
        from psycopg.pq import TransactionStatus
        statement, returns_id = translate(sql, self._schema, bool(params))
        if not statement:
            return Cursor([], None, 0)
        if self._pg.info.transaction_status == TransactionStatus.INERROR and statement != "ROLLBACK":
            # a failed transaction nobody rolled back would refuse every later statement
            logging.getLogger(__name__).warning("rolling back a failed transaction left open")
            self._pg.execute("ROLLBACK")
        try:
            with self._pg.cursor() as cur:
                cur.execute(statement, _bound(statement, params) if params else None)
                rows = self._rows(cur)
                rowcount = cur.rowcount
        except psycopg.Error as exc:
            raise _as_sqlite_error(exc) from exc
        lastrowid = rows[0][0] if returns_id and rows else None
        return Cursor(rows, lastrowid, rowcount)

    def executemany(self, sql: str, seq: Iterable[Sequence]) -> Cursor:
        import psycopg
        seq = [[_param(p) for p in params] for params in seq]
        if not seq:
            return Cursor([], None, 0)
        statement, returns_id = translate(sql, self._schema, True)
        if returns_id:
            statement = statement[:-len(" RETURNING id")]
        try:
            with self._pg.cursor() as cur:
                cur.executemany(statement, seq)
                rowcount = cur.rowcount
        except psycopg.Error as exc:
            raise _as_sqlite_error(exc) from exc
        return Cursor([], None, rowcount)

    def executescript(self, script: str) -> None:
        for statement in script.split(";"):
            if statement.strip():
                self.execute(statement)

    @staticmethod
    def _rows(cur) -> list:
        if cur.description is None:
            return []
        row_class = _row_class([c.name for c in cur.description])
        return [row_class([_value(v) for v in values]) for values in cur.fetchall()]

    def close(self) -> None:
        self._pg.close()


def _bound(statement: str, params: Sequence):
    """Positional values, or {"p1": ...} for SQLite's numbered ?1 placeholders."""
    values = [_param(p) for p in params]
    return {f"p{i}": v for i, v in enumerate(values, 1)} if "%(p1)s" in statement else values


def _param(value):
    """numpy scalars as Python numbers (sqlite3 refuses them too; psycopg would quote them)."""
    if hasattr(value, "item") and not isinstance(value, (bytes, str)):
        return value.item()
    return value


def password_from(env_name: str, environ=None) -> str:
    """The password the variable named ``env_name`` holds ("" = libpq's PGPASSWORD / ~/.pgpass)."""
    environ = os.environ if environ is None else environ
    return environ.get(env_name, "") if env_name else ""
