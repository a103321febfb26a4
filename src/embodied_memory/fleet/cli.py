"""`embodied-memory fleet ...`: a fleet memory server, its logins and an operator's acts.

    export EMBODIED_MEMORY_FLEET_ADMIN_PASSWORD=...     # the server administrator's (set at its first start)
    embodied-memory fleet server --folder /srv/fleet --host 0.0.0.0 --port 5432
    embodied-memory fleet init --admin-url postgresql://postgres@fleet-server:5432/postgres
    EMBODIED_MEMORY_DB_PASSWORD=... embodied-memory fleet add-robot spot1 --admin-url ...
    EMBODIED_MEMORY_DB_PASSWORD=... embodied-memory fleet add-operator ops --admin-url ...
    # an operator (--url with the operator's login, its password in EMBODIED_MEMORY_DB_PASSWORD)
    embodied-memory fleet reconcile --url postgresql://ops@fleet-server:5432/fleet --every 300
    embodied-memory fleet name spot2.person_0004 Alice --url ...
    embodied-memory fleet journal --url ...            # merges and splits, numbered
    embodied-memory fleet undo 12 --url ...
    embodied-memory fleet forget Alice --url ...
    embodied-memory fleet stop --folder /srv/fleet

Passwords come from environment variables only (never arguments: they would sit in the shell
history and the process list).  A failure is one line on stderr and exit status 1.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

ADMIN_PASSWORD_ENV = "EMBODIED_MEMORY_FLEET_ADMIN_PASSWORD"
LOGIN_PASSWORD_ENV = "EMBODIED_MEMORY_DB_PASSWORD"
SERVER_ACTIONS = ("server", "stop")
ADMIN_ACTIONS = ("init", "add-robot", "add-operator")
OPERATOR_ACTIONS = ("reconcile", "name", "journal", "undo", "forget")
ROS_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")     # what a ROS namespace token may be


class FleetCliError(Exception):
    """A mistake the user can fix: printed as one line."""


def _env(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise FleetCliError(f"set the environment variable {name} (passwords are never arguments)")
    return value


def cmd_fleet(args) -> int:
    try:
        if args.action in SERVER_ACTIONS:
            return _server(args)
        if args.action in ADMIN_ACTIONS:
            return _admin(args)
        return _operator(args)
    except FleetCliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - a refused login, a server that is down, a bad name: one line
        import psycopg
        from ..store import StoreError
        if not isinstance(exc, (psycopg.Error, StoreError, ValueError, RuntimeError, subprocess.CalledProcessError)):
            raise
        detail = getattr(exc, "stderr", "") or str(exc)
        print(f"error: {detail.strip().splitlines()[-1] if detail.strip() else type(exc).__name__}", file=sys.stderr)
        return 1


def _server(args) -> int:
    from pathlib import Path
    from .server import ADDRESS_FILE, FleetServer
    made = (Path(args.folder).expanduser() / ADDRESS_FILE).exists()
    server = FleetServer(args.folder, superuser_password=os.environ.get(ADMIN_PASSWORD_ENV) or "unused",
                         host=args.host, port=args.port or (0 if made else 5432))
    if args.action == "stop":
        print(f"stopped the fleet memory server in {server.folder}" if server.stop()
              else f"no fleet memory server running in {server.folder}")
        return 0
    if not server.initialised():
        _env(ADMIN_PASSWORD_ENV)          # a new server's administrator password
    try:
        server.start()
    except subprocess.CalledProcessError:
        log_file = server.folder / "server.log"
        lines = log_file.read_text().strip().splitlines() if log_file.exists() else []
        why = next((line for line in lines if "FATAL" in line or "could not" in line), lines[-1] if lines else "no log")
        raise FleetCliError(f"the server did not start on {server.host}:{server.port}: {why.strip()} "
                            f"(log: {log_file}; a port in use? --port)") from None
    print(f"fleet memory server running (pid {server.pid()}): {server.url()}  "
          f"(log: {server.folder / 'server.log'}; stop: embodied-memory fleet stop --folder {args.folder})")
    return 0


def _admin(args) -> int:
    from ..store.params import StoreParams
    from .roles import add_operator, add_robot, create_fleet
    if not args.admin_url:
        raise FleetCliError("--admin-url postgresql://ADMIN@HOST:PORT/postgres is needed")
    _no_password_in(args.admin_url, "--admin-url", ADMIN_PASSWORD_ENV)
    if args.action != "init" and not args.name:
        raise FleetCliError(f"{args.action} needs a NAME")
    admin_password = _env(ADMIN_PASSWORD_ENV)
    if args.action == "init":
        dims = {k: getattr(args, k) for k in ("text_dim", "image_dim", "face_dim", "reid_dim")}
        url = create_fleet(args.admin_url, admin_password, args.database,
                           StoreParams(data_dir=_cache_dir(args), **dims))
        print(f"fleet memory ready: {url} (add logins: embodied-memory fleet add-robot ROBOT_ID ...)")
    elif args.action == "add-robot":
        made = add_robot(args.admin_url, admin_password, args.name, _env(LOGIN_PASSWORD_ENV))
        on_robot = f"--namespace {args.name}" if ROS_NAME_RE.match(args.name) else \
            f"--set memory.robot_id={args.name} (not a ROS namespace name)"
        print(f"robot login {args.name} {'made' if made else 'was there: its password changed'}: on that robot, "
              f"launch the fleet stack with {on_robot} and postgres_url "
              f"postgresql://{{robot_id}}@{_address(args.admin_url)}/{args.database}")
    else:
        made = add_operator(args.admin_url, admin_password, args.name, _env(LOGIN_PASSWORD_ENV))
        print(f"operator login {args.name} {'made' if made else 'was there: its password changed'}: "
              f"embodied-memory fleet reconcile|name|journal|undo|forget "
              f"--url postgresql://{args.name}@{_address(args.admin_url)}/{args.database}")
    return 0


def _cache_dir(args) -> str:
    """Where an administrator's or operator's store keeps its index cache: one folder per fleet URL."""
    if args.cache_dir:
        return args.cache_dir
    import hashlib
    key = hashlib.sha256((args.url or args.admin_url).encode()).hexdigest()[:12]
    return os.path.expanduser(f"~/.cache/embodied_memory/fleet_{key}")


def open_fleet_store(url: str, cache_dir: str):
    """The fleet's memory as an operator opens it (dimensions as the server's database holds them;
    the password from $EMBODIED_MEMORY_DB_PASSWORD)."""
    import psycopg
    from ..store import open_store
    from .roles import OPERATOR_GROUP
    from ..store.params import StoreParams
    with psycopg.connect(url, password=_env(LOGIN_PASSWORD_ENV), connect_timeout=10) as conn:
        user, operator = conn.execute("SELECT current_user, pg_has_role(current_user, %s, 'MEMBER') OR "
                                      "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user)",
                                      (OPERATOR_GROUP,)).fetchone()
        if not operator:
            raise FleetCliError(f"{user!r} is not an operator's login: operator commands need one "
                                "(embodied-memory fleet add-operator NAME)")
        dims = {k: int(v) for k, v in conn.execute(
            "SELECT key, value FROM meta WHERE key IN ('text_dim', 'image_dim', 'face_dim', 'reid_dim')").fetchall()}
    return open_store(StoreParams(backend="postgres", postgres_url=url, data_dir=cache_dir,
                                  postgres_password_env=LOGIN_PASSWORD_ENV, **dims))


def _address(url: str) -> str:
    """HOST:PORT of a libpq URL."""
    from urllib.parse import urlsplit
    return urlsplit(url).netloc.rpartition("@")[2] or "HOST:PORT"


def _no_password_in(url: str, option: str, env: str) -> None:
    from urllib.parse import urlsplit
    if urlsplit(url).password is not None:
        raise FleetCliError(f"no password in {option}: set the environment variable {env} instead")


def _operator(args) -> int:
    if not args.url:
        raise FleetCliError("--url postgresql://OPERATOR@HOST:PORT/fleet is needed (an operator's login)")
    _no_password_in(args.url, "--url", LOGIN_PASSWORD_ENV)
    if args.action == "undo" and not args.name.isdigit():
        raise FleetCliError(f"undo needs the CHANGE number (fleet journal), not {args.name!r}")
    needs = {"name": 2, "undo": 1, "forget": 1}.get(args.action, 0)
    given = [a for a in (args.name, args.value) if a != ""]
    if len(given) < needs:
        raise FleetCliError({"name": "name needs IDENTITY NAME", "undo": "undo needs the CHANGE number (fleet journal)",
                             "forget": "forget needs a PERSON (an identity id or its name)"}[args.action])
    store = open_fleet_store(args.url, _cache_dir(args))
    try:
        if args.action == "reconcile":
            return _reconcile(store, args)
        if args.action == "name":
            survivor = store.name_identity(store.resolve_person(args.name), args.value)
            print(f"{survivor} is {args.value!r}" + (f" (merged with {args.name}: the same name)"
                                                      if survivor != store.resolve_person(args.name) else ""))
        elif args.action == "journal":
            changes = store.identity_changes(limit=50)
            if not changes:
                print("no identity changes journalled yet")
            for change in changes:
                print(f"{change['change']:6d}  {change['time']}  {change['kind']:8s} {change['source'] or '-'} -> "
                      f"{change['target']}  ({change['sightings']} sightings){'  undone' if change['undone'] else ''}")
        elif args.action == "undo":
            print(f"moved {store.undo_identity_change(int(args.name))} sightings back")
        else:
            print(json.dumps(store.forget_identity(args.name, dry_run=args.dry_run), indent=2))
    finally:
        store.close()
    return 0


def _reconcile(store, args) -> int:
    from .identities import reconcile
    while True:
        try:
            merges = reconcile(store, dry_run=args.dry_run)
        except Exception as exc:  # noqa: BLE001 - a service: a server away for a while is retried
            if not args.every or args.dry_run:
                raise
            print(f"reconcile failed ({exc}); again in {args.every:.0f} s", file=sys.stderr, flush=True)
            merges = None
        for m in merges or ():
            print(f"{'would merge' if args.dry_run else 'merged'} {m.absorbed} into {m.survivor} "
                  f"(face distance {m.distance:.3f})")
        if merges is not None:
            print(f"{len(merges)} identities {'to merge' if args.dry_run else 'merged'} across robots (compared: "
                  "identities with 3 or more clear faces)", flush=True)
        if not args.every or args.dry_run:
            return 0
        try:
            time.sleep(args.every)
        except KeyboardInterrupt:
            return 0


def add_fleet_arguments(p) -> None:
    from ..store.params import StoreParams
    p.add_argument("action", choices=SERVER_ACTIONS + ADMIN_ACTIONS + OPERATOR_ACTIONS,
                   help="server: start (and on first use create) a PostgreSQL server in --folder; stop: stop it. "
                        "init: make the fleet database, its tables and roles; add-robot / add-operator NAME: a login "
                        f"(its password from ${LOGIN_PASSWORD_ENV}; the administrator's from ${ADMIN_PASSWORD_ENV}). "
                        "As an operator (--url, password from "
                        f"${LOGIN_PASSWORD_ENV}): reconcile: merge the identities different robots enrolled for one "
                        "person; name IDENTITY NAME; journal: the merges and splits, numbered; undo CHANGE; forget "
                        "PERSON: everything of them, fleet-wide")
    p.add_argument("name", nargs="?", default="", help="add-robot: the robot_id; add-operator: the login name; "
                                                        "name / forget: the person (identity id or name); undo: "
                                                        "the change number")
    p.add_argument("value", nargs="?", default="", help="name: the display name")
    p.add_argument("--folder", default="~/.local/share/embodied_memory/fleet_server", help="server / stop: its data")
    p.add_argument("--host", default="", help="server: the address it listens on (0.0.0.0: every interface, robots "
                                              "connect from the network; default: as before, else 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="server: its TCP port (default: as before, else 5432)")
    p.add_argument("--admin-url", default="", help="init / add-*: postgresql://postgres@HOST:PORT/postgres")
    p.add_argument("--url", default="", help="reconcile / name / journal / undo / forget: "
                                             "postgresql://OPERATOR@HOST:PORT/fleet")
    p.add_argument("--database", default="fleet", help="the fleet's database")
    p.add_argument("--every", type=float, default=0.0, metavar="S", help="reconcile: again every S seconds (a service)")
    p.add_argument("--dry-run", action="store_true", help="reconcile / forget: print what it would do, change nothing")
    p.add_argument("--cache-dir", default="", help="init and operator actions: the local index cache (default: one "
                                                   "per fleet URL under ~/.cache/embodied_memory)")
    for name in ("text_dim", "image_dim", "face_dim", "reid_dim"):
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, type=int, default=getattr(StoreParams, name),
                       help="init: as every robot's memory node sets it")
