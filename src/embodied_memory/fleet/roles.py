"""Who may do what in a fleet's memory: a database role per robot and operator roles.

- A **robot** (role named as its ``robot_id``, member of ``em_robot``) reads the whole fleet's
  memory and writes only its own records (``ROBOT_RIGHTS``, row-level security): it inserts and
  updates the observations, episodes, sightings and regions carrying its ``robot_id`` and the
  identities and aliases it minted (``<robot_id>.<id>``), journals its perception's merges and
  splits (moves of its own sightings), writes its own episodes' maps and keeps the shared
  caches (summaries, waypoint statistics, rules).  It deletes
  no record, not even its own: forgetting and retention are an operator's acts on a shared
  memory, and a robot cannot forget, overwrite or re-label another robot's records or make
  another robot's person its own.  ``meta`` (the dimensions) it may only create.
- An **operator** (member of ``em_operator``: ``embodied-memory fleet forget / name / reconcile /
  journal / undo --url``) names, merges, splits and forgets across the fleet.

``create_fleet`` makes the database and its tables (the store's own schema, opened once as
the server's administrator), the two group roles and the policies (in one transaction);
``add_robot`` / ``add_operator`` make a login with a password, sent to the server already
hashed (scram-sha-256), never logged.
"""
from __future__ import annotations

import logging
import re

from ..store.params import ROBOT_ID_RE
from ..store.postgres import Schema
from ..store.identities import UNDOABLE_CHANGES
from ..store.records import _SCHEMA

log = logging.getLogger(__name__)

ROBOT_GROUP, OPERATOR_GROUP = "em_robot", "em_operator"
OWN_RECORD = "robot_id = current_user"


def _own_record(id_column: str) -> str:
    """A record of the current robot: its robot_id, and an id in its own range (``<robot_id>/...``,
    as its memory node qualifies them), so that no robot can take an id another will send."""
    return f"robot_id = current_user AND starts_with({id_column}, current_user || '/')"


def _own_obs(table: str, column: str = "obs") -> str:
    return f"EXISTS (SELECT 1 FROM observations o WHERE o.id = {table}.{column} AND o.robot_id = current_user)"


def _own(column: str) -> str:
    """The identity in ``column`` is one the current robot minted: ``<robot_id>.<its id>`` (robot ids
    hold no '.', and starts_with has no wildcards)."""
    return f"starts_with({column}, current_user || '.')"


# table -> (what a robot may do there, the rows it may insert, the rows it may update / delete);
# None: no row-level security (every row).  SELECT: every row of every table, for robots and operators.
ROBOT_RIGHTS: dict[str, tuple[str, str | None, str | None]] = {
    "observations": ("INSERT, UPDATE", _own_record("observation_id"), _own_record("observation_id")),
    "episodes": ("INSERT, UPDATE", _own_record("episode_id"), _own_record("episode_id")),
    "sightings": ("INSERT, UPDATE", _own_obs("sightings"), _own_obs("sightings")),
    "regions": ("INSERT, UPDATE", _own_obs("regions"), _own_obs("regions")),
    "obs_xy": ("INSERT, UPDATE", _own_obs("obs_xy", "id"), _own_obs("obs_xy", "id")),
    # people its perception enrolled, merged and split: its own ids only
    "identities": ("INSERT, UPDATE, DELETE", _own("identity_id"), _own("identity_id")),
    # an alias for an id of its own (never making another robot's person its own); it re-points
    # aliases at its own identity when it merges (column identity_id only: an alias's id never changes)
    "identity_aliases": ("INSERT, UPDATE (identity_id), DELETE", _own("alias_id"),
                         f"{_own('alias_id')} OR {_own('identity_id')}"),
    # its journal entries: its perception's moves of its own sightings only, never marked undone or reviewed
    # (undo and review are an operator's)
    "identity_changes": ("INSERT", f"kind IN ({', '.join(repr(k) for k in UNDOABLE_CHANGES)}) AND undone IS NULL AND "
                         "NOT EXISTS (SELECT 1 FROM json_array_elements_text("
                         "CAST(identity_changes.sightings AS json)) AS moved(sid) JOIN sightings s ON "
                         "s.id = CAST(moved.sid AS bigint) JOIN observations o ON o.id = s.obs "
                         "WHERE o.robot_id IS DISTINCT FROM current_user)", "false"),
    "files_to_remove": ("DELETE", "false", OWN_RECORD),  # the files of its records an operator deleted
    "summaries": ("INSERT, UPDATE, DELETE", None, None),  # caches of answers
    "waypoint_stats": ("INSERT, UPDATE", None, None),
    "rules": ("INSERT, UPDATE, DELETE", None, None),
    "occupancy_maps": ("INSERT, UPDATE, DELETE", "starts_with(episode_id, current_user || '/')",
                       "starts_with(episode_id, current_user || '/')"),    # its own episodes' maps
    "meta": ("INSERT", None, None),                       # the configured dimensions, once; never changed
}
_ROLE_RE = re.compile(r"^[A-Za-z0-9_.-]{1,63}$")


def _ident(name: str) -> str:
    if not _ROLE_RE.match(name):
        raise ValueError(f"role {name!r}: 1-63 chars of [A-Za-z0-9_.-]")
    return f'"{name}"'


def _admin(url: str, password: str):
    import psycopg
    return psycopg.connect(url, password=password, autocommit=True)


def create_fleet(admin_url: str, admin_password: str, database: str, store_params) -> str:
    """The fleet's database with the store's tables, group roles and row-level security; returns
    its URL for the administrator.  Idempotent (a second run re-applies the grants)."""
    from urllib.parse import urlsplit, urlunsplit
    from ..store import open_store
    db = _ident(database)
    with _admin(admin_url, admin_password) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone() is None:
            conn.execute(f"CREATE DATABASE {db}")
        for group in (ROBOT_GROUP, OPERATOR_GROUP):
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (group,)).fetchone() is None:
                conn.execute(f"CREATE ROLE {group} NOLOGIN")
    parts = urlsplit(admin_url)
    fleet_url = urlunsplit(parts._replace(path="/" + database))
    import dataclasses
    import os
    env = store_params.postgres_password_env or "EMBODIED_MEMORY_DB_PASSWORD"
    previous = os.environ.get(env)
    os.environ[env] = admin_password         # the tables are made by the store itself, as administrator
    try:
        open_store(dataclasses.replace(store_params, backend="postgres", postgres_url=fleet_url, robot_id="",
                                       postgres_password_env=env)).close()
    finally:
        if previous is None:
            os.environ.pop(env, None)
        else:
            os.environ[env] = previous
    with _admin(fleet_url, admin_password) as conn, conn.transaction():     # all or nothing
        groups = f"{ROBOT_GROUP}, {OPERATOR_GROUP}"
        conn.execute(f"GRANT CONNECT ON DATABASE {db} TO {groups}")
        conn.execute(f"GRANT USAGE ON SCHEMA public TO {groups}")
        conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {groups}")
        conn.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {OPERATOR_GROUP}")
        conn.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {ROBOT_GROUP}")   # a re-run: only what is below
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {ROBOT_GROUP}")
        schema = Schema(_SCHEMA)
        for table, (rights, insert, own) in ROBOT_RIGHTS.items():
            if "id" in schema.columns.get(table, ()) and table != "obs_xy":   # ids from the server's sequence only
                conn.execute(f"ALTER TABLE {table} ALTER COLUMN id SET GENERATED ALWAYS")
                columns = ", ".join(c for c in schema.columns[table] if c != "id")
                rights = rights.replace("INSERT", f"INSERT ({columns})")      # (no OVERRIDING SYSTEM VALUE)
            conn.execute(f"GRANT {rights} ON {table} TO {ROBOT_GROUP}")
            if own is None:
                continue
            conn.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
            for name in ("read", "own_insert", "own_update", "own_delete", "operator"):
                conn.execute(f"DROP POLICY IF EXISTS em_{name} ON {table}")
            conn.execute(f"CREATE POLICY em_read ON {table} FOR SELECT TO {groups} USING (true)")
            conn.execute(f"CREATE POLICY em_operator ON {table} FOR ALL TO {OPERATOR_GROUP} USING (true) "
                         "WITH CHECK (true)")
            conn.execute(f"CREATE POLICY em_own_insert ON {table} FOR INSERT TO {ROBOT_GROUP} WITH CHECK ({insert})")
            conn.execute(f"CREATE POLICY em_own_update ON {table} FOR UPDATE TO {ROBOT_GROUP} USING ({own}) "
                         f"WITH CHECK ({own})")
            conn.execute(f"CREATE POLICY em_own_delete ON {table} FOR DELETE TO {ROBOT_GROUP} USING ({own})")
    log.info("fleet memory %s ready (roles %s, %s)", database, ROBOT_GROUP, OPERATOR_GROUP)
    return fleet_url


def _add_login(admin_url: str, admin_password: str, name: str, password: str, group: str) -> bool:
    """A login in ``group`` (its password changed when it is one already: returns False); an
    existing role that is not in ``group`` (the administrator, a robot made an operator) is refused."""
    if not password:
        raise ValueError(f"{name}: a login needs a password")
    with _admin(admin_url, admin_password) as conn:
        role = _ident(name)
        row = conn.execute("SELECT pg_has_role(%s, %s, 'MEMBER'), rolsuper FROM pg_roles WHERE rolname = %s",
                           (name, group, name)).fetchone()
        if row is not None and (row[1] or not row[0]):
            raise ValueError(f"{name} is a role of this server already, not a {group} login: choose another name")
        hashed = conn.pgconn.encrypt_password(password.encode(), name.encode(), b"scram-sha-256").decode()
        verb = "ALTER" if row else "CREATE"
        conn.execute(f"{verb} ROLE {role} LOGIN PASSWORD {_literal(conn, hashed)}")
        conn.execute(f"GRANT {group} TO {role}")
        return row is None


def _literal(conn, text: str) -> str:
    from psycopg.sql import Literal
    return Literal(text).as_string(conn)


def add_robot(admin_url: str, admin_password: str, robot_id: str, password: str) -> bool:
    """A robot's login: its role is its robot_id (the rows it may write carry that id).  True:
    made; False: it was there, its password changed."""
    if not ROBOT_ID_RE.match(robot_id):
        raise ValueError(f"robot_id {robot_id!r}: 1-63 chars of [A-Za-z0-9_-]")
    return _add_login(admin_url, admin_password, robot_id, password, ROBOT_GROUP)


def add_operator(admin_url: str, admin_password: str, name: str, password: str) -> bool:
    return _add_login(admin_url, admin_password, name, password, OPERATOR_GROUP)
