"""The memory's schema version and the migrations from older ones.

A memory written by an older release is migrated when opened: a copy of the database is kept
first (``memory.sqlite3.schema<N>.bak``, SQLite's online backup), then each step runs in one
transaction and the stored version is raised.  A memory written by a newer release is refused
(this release cannot know what its columns mean).  A new step is one entry in ``MIGRATIONS``
(plus the same columns in ``schema.sql`` for new memories).
"""
from __future__ import annotations

import logging
import re
import sqlite3
from pathlib import Path

from .errors import StoreError

log = logging.getLogger(__name__)

# version reached -> (what changed, statements)
MIGRATIONS: dict[int, tuple[str, tuple[str, ...]]] = {
    2: ("sightings record where the person stood (px, py, pz in the pose's frame, from depth)",
        ("ALTER TABLE sightings ADD COLUMN px REAL", "ALTER TABLE sightings ADD COLUMN py REAL",
         "ALTER TABLE sightings ADD COLUMN pz REAL")),
    3: ("sightings record the place the person was in when it is not the robot's (waypoint_id; NULL: "
        "the observation's, as for every older sighting)",
        ("ALTER TABLE sightings ADD COLUMN waypoint_id TEXT",)),
    4: ("identity changes (consolidation's merges and splits) are journalled: what moved, when, undoable",
        ("CREATE TABLE IF NOT EXISTS identity_changes(id INTEGER PRIMARY KEY, t REAL NOT NULL, kind TEXT NOT NULL, "
         "source TEXT NOT NULL, target TEXT NOT NULL, sightings TEXT NOT NULL, undone REAL)",)),
    5: ("an identity change keeps the names and aliases it changed (prior), so that undoing a merge gives "
        "each person their own name back",
        ("ALTER TABLE identity_changes ADD COLUMN prior TEXT",)),
    6: ("sightings record perception's short-term track (track), so that an identified sighting gives its "
        "identity to the track's earlier unidentified ones",
        ("ALTER TABLE sightings ADD COLUMN track INTEGER",)),
    7: ("observations and episodes record the robot that made them (robot_id; '' for a one-robot memory), "
        "so that a fleet's memory answers which robot saw what",
        ("ALTER TABLE observations ADD COLUMN robot_id TEXT NOT NULL DEFAULT ''",
         "ALTER TABLE episodes ADD COLUMN robot_id TEXT NOT NULL DEFAULT ''",
         "CREATE INDEX IF NOT EXISTS obs_robot ON observations(robot_id, t)")),
    8: ("a fleet's server hands the files of records an operator deleted to the robot that holds them",
        ("CREATE TABLE IF NOT EXISTS files_to_remove(robot_id TEXT NOT NULL, path TEXT NOT NULL, t REAL NOT NULL, "
         "PRIMARY KEY(robot_id, path))",)),
}
SCHEMA_VERSION = max(MIGRATIONS)


def stored_version(conn: sqlite3.Connection) -> int | None:
    """The schema version a memory was written with (None: a new, empty memory)."""
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    try:
        return None if row is None else int(row[0])
    except ValueError as exc:
        raise StoreError(f"the memory's schema version {row[0]!r} is not a number (a damaged meta table)") from exc


_ADD_COLUMN = re.compile(r"ALTER TABLE (\w+) ADD COLUMN (\w+)", re.IGNORECASE)


def _adds_an_existing_column(conn: sqlite3.Connection, statement: str) -> bool:
    """An ADD COLUMN whose column is there already (a memory written by a development build
    between releases): the step's other statements still run."""
    m = _ADD_COLUMN.match(statement)
    return bool(m) and any(row[1] == m.group(2) for row in conn.execute(f"PRAGMA table_info({m.group(1)})"))


def migrate_server(conn, where: str, schema: str) -> None:
    """The fleet server's database (backend postgres): created from ``schema`` (SQLite DDL, run
    translated) or brought to SCHEMA_VERSION, under the fleet's write lock so that robots starting
    together create it once.  No copy is kept: back the server up with pg_dump before upgrading."""
    from .errors import StoreConfigError
    from .postgres import schema_statements
    version_num = int(conn.execute("SHOW server_version_num").fetchone()[0])
    if version_num < 160000:
        raise StoreConfigError(f"{where}: PostgreSQL {version_num // 10000} is too old: the fleet memory needs 16 or newer")
    conn.execute("BEGIN IMMEDIATE")
    try:
        exists = conn.execute("SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() "
                              "AND table_name = 'meta'").fetchone()
        version = stored_version(conn) if exists else None
        if version is not None and version > SCHEMA_VERSION:
            raise StoreError(f"{where}: written by a newer release (schema {version}); this release reads "
                             f"schema {SCHEMA_VERSION} and older: upgrade embodied_memory on this robot")
        for target in range(version + 1, SCHEMA_VERSION + 1) if version is not None else ():
            for statement in MIGRATIONS[target][1]:
                for ddl in schema_statements(statement):
                    conn.execute(ddl.replace("ADD COLUMN", "ADD COLUMN IF NOT EXISTS"))
            conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(target),))
            log.warning("%s: migrated the fleet memory from schema %d to %d: %s", where, target - 1, target,
                        MIGRATIONS[target][0])
        if version != SCHEMA_VERSION:       # a robot's role may create nothing: it opens a made database
            for ddl in schema_statements(schema):
                conn.execute(ddl)
        conn.execute("COMMIT")
    except BaseException as exc:
        conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.DatabaseError) and ("must be owner" in str(exc) or "permission denied" in str(exc)):
            raise StoreConfigError(f"{where}: the fleet's memory is schema {version} and this release needs "
                                   f"{SCHEMA_VERSION}: an administrator upgrades it with `embodied-memory fleet init` "
                                   "(the same command that made it; it also grants the new tables)") from exc
        raise


def migrate(conn: sqlite3.Connection, db_path: Path) -> None:
    """Bring the memory behind ``conn`` (autocommit connection) to SCHEMA_VERSION, or refuse a
    newer one.  Runs before the current schema's ``CREATE ... IF NOT EXISTS`` statements."""
    has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
    version = stored_version(conn) if has_meta else None
    if version is None or version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise StoreError(f"{db_path}: written by a newer release (schema {version}); this release reads "
                         f"schema {SCHEMA_VERSION} and older: upgrade embodied_memory to open it")
    backup = db_path.with_name(f"{db_path.name}.schema{version}.bak")
    with sqlite3.connect(backup) as copy:
        conn.backup(copy)
    copy.close()
    for target in range(version + 1, SCHEMA_VERSION + 1):
        change, statements = MIGRATIONS[target]
        conn.execute("BEGIN IMMEDIATE")
        if stored_version(conn) >= target:      # another process opening this memory migrated it first
            conn.execute("COMMIT")
            continue
        try:
            for statement in statements:
                if not _adds_an_existing_column(conn, statement):
                    conn.execute(statement)
            conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(target),))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        log.warning("%s: migrated the memory from schema %d to %d: %s (the old memory is kept as %s)",
                    db_path, target - 1, target, change, backup)
