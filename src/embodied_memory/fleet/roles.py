"""Who may do what in a fleet's memory: a database role per robot and operator roles.

- A **robot** (role named as its ``robot_id``, member of ``em_robot``) reads the whole fleet's
  memory and writes only its own records: row-level security lets it insert and update the
  observations, episodes, sightings and regions of its own ``robot_id`` only, and it deletes
  none of them (a robot cannot forget, expire or overwrite another robot's records, nor its own:
  deleting is an operator's act on a shared memory).  It keeps the fleet's shared tables
  (identities it enrolls, merges its consolidation makes, summaries, waypoint statistics).
- An **operator** (member of ``em_operator``: the inspector, ``embodied-memory forget`` /
  ``consolidate`` against the server) names, merges, splits and forgets across the fleet.

``create_fleet`` makes the database and its tables (the store's own schema, opened once as
the server's administrator) and the two group roles; ``add_robot`` / ``add_operator`` make a
login role with a password (scram-sha-256).  Passwords are arguments, never logged.
"""
from __future__ import annotations

import logging
import re

from ..store.params import ROBOT_ID_RE

log = logging.getLogger(__name__)

ROBOT_GROUP, OPERATOR_GROUP = "em_robot", "em_operator"
OWN_ROWS = {        # table -> the condition that a row is the current robot's
    "observations": "robot_id = current_user",
    "episodes": "robot_id = current_user",
    "sightings": "EXISTS (SELECT 1 FROM observations o WHERE o.id = sightings.obs AND o.robot_id = current_user)",
    "regions": "EXISTS (SELECT 1 FROM observations o WHERE o.id = regions.obs AND o.robot_id = current_user)",
    "obs_xy": "EXISTS (SELECT 1 FROM observations o WHERE o.id = obs_xy.id AND o.robot_id = current_user)",
}
def _own(column: str) -> str:
    """The identity in ``column`` is one the current robot's perception minted (<robot_id>.person_NNNN)."""
    return f"{column} LIKE current_user || '.%'"


OWN_IDENTITIES = _own("identity_id")
OWN_ALIASES = f"{_own('alias_id')} OR {_own('identity_id')}"   # its ids, or pointing at its identity
SHARED_ROBOT_WRITES = {   # tables a robot keeps with the fleet: what it may do there
    "identities": "INSERT",
    "identity_changes": "INSERT, UPDATE",
    "summaries": "INSERT, UPDATE, DELETE",
    "waypoint_stats": "INSERT, UPDATE",
    "rules": "INSERT, UPDATE, DELETE",
    "occupancy_maps": "INSERT, UPDATE, DELETE",
    "meta": "INSERT, UPDATE",
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
    with _admin(fleet_url, admin_password) as conn:
        conn.execute(f"GRANT CONNECT ON DATABASE {db} TO {ROBOT_GROUP}, {OPERATOR_GROUP}")
        conn.execute(f"GRANT USAGE ON SCHEMA public TO {ROBOT_GROUP}, {OPERATOR_GROUP}")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {ROBOT_GROUP}")
        conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {ROBOT_GROUP}, {OPERATOR_GROUP}")
        conn.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {OPERATOR_GROUP}")
        for table, own in OWN_ROWS.items():
            conn.execute(f"GRANT INSERT, UPDATE ON {table} TO {ROBOT_GROUP}")
            conn.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
            for name, rule in (("read", f"FOR SELECT TO {ROBOT_GROUP}, {OPERATOR_GROUP} USING (true)"),
                               ("own_insert", f"FOR INSERT TO {ROBOT_GROUP} WITH CHECK ({own})"),
                               ("own_update", f"FOR UPDATE TO {ROBOT_GROUP} USING ({own}) WITH CHECK ({own})"),
                               ("operator", f"FOR ALL TO {OPERATOR_GROUP} USING (true) WITH CHECK (true)")):
                conn.execute(f"DROP POLICY IF EXISTS em_{name} ON {table}")
                conn.execute(f"CREATE POLICY em_{name} ON {table} {rule}")
        for table, rights in SHARED_ROBOT_WRITES.items():
            conn.execute(f"GRANT {rights} ON {table} TO {ROBOT_GROUP}")
        # the files of records an operator deleted: each robot removes (and then deletes the rows of) its own
        conn.execute(f"GRANT DELETE ON files_to_remove TO {ROBOT_GROUP}")
        conn.execute("ALTER TABLE files_to_remove ENABLE ROW LEVEL SECURITY")
        for name, rule in (("read", f"FOR SELECT TO {ROBOT_GROUP}, {OPERATOR_GROUP} USING (true)"),
                           ("own_delete", f"FOR DELETE TO {ROBOT_GROUP} USING (robot_id = current_user)"),
                           ("operator", f"FOR ALL TO {OPERATOR_GROUP} USING (true) WITH CHECK (true)")):
            conn.execute(f"DROP POLICY IF EXISTS em_{name} ON files_to_remove")
            conn.execute(f"CREATE POLICY em_{name} ON files_to_remove {rule}")
        # its perception merges (and its consolidation splits) its own identities: it updates and
        # deletes identities it minted, never another robot's, and names none (an operator's act)
        # (and an alias only for an id of its own: it cannot make another robot's person its own)
        for table, insert, own in (("identities", "true", OWN_IDENTITIES), ("identity_aliases", _own("alias_id"),
                                                                              OWN_ALIASES)):
            conn.execute(f"GRANT INSERT, UPDATE, DELETE ON {table} TO {ROBOT_GROUP}")
            conn.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
            for name, rule in (("read", f"FOR SELECT TO {ROBOT_GROUP}, {OPERATOR_GROUP} USING (true)"),
                               ("own_insert", f"FOR INSERT TO {ROBOT_GROUP} WITH CHECK ({insert})"),
                               ("own_update", f"FOR UPDATE TO {ROBOT_GROUP} USING ({own}) WITH CHECK ({own})"),
                               ("own_delete", f"FOR DELETE TO {ROBOT_GROUP} USING ({own})"),
                               ("operator", f"FOR ALL TO {OPERATOR_GROUP} USING (true) WITH CHECK (true)")):
                conn.execute(f"DROP POLICY IF EXISTS em_{name} ON {table}")
                conn.execute(f"CREATE POLICY em_{name} ON {table} {rule}")
    log.info("fleet memory %s ready (roles %s, %s)", database, ROBOT_GROUP, OPERATOR_GROUP)
    return fleet_url


def _add_login(admin_url: str, admin_password: str, name: str, password: str, group: str) -> None:
    if not password:
        raise ValueError(f"{name}: a login needs a password")
    with _admin(admin_url, admin_password) as conn:
        role = _ident(name)
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
        verb = "ALTER" if exists else "CREATE"
        conn.execute(f"{verb} ROLE {role} LOGIN PASSWORD %s".replace("%s", _literal(conn, password)))
        conn.execute(f"GRANT {group} TO {role}")


def _literal(conn, text: str) -> str:
    from psycopg.sql import Literal
    return Literal(text).as_string(conn)


def add_robot(admin_url: str, admin_password: str, robot_id: str, password: str) -> None:
    """A robot's login: its role is its robot_id (the rows it may write carry that id)."""
    if not ROBOT_ID_RE.match(robot_id):
        raise ValueError(f"robot_id {robot_id!r}: 1-64 chars of [A-Za-z0-9_.-]")
    _add_login(admin_url, admin_password, robot_id, password, ROBOT_GROUP)


def add_operator(admin_url: str, admin_password: str, name: str, password: str) -> None:
    _add_login(admin_url, admin_password, name, password, OPERATOR_GROUP)
