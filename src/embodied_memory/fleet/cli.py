"""`embodied-memory fleet ...`: a fleet memory server and its logins, from the command line.

    export EMBODIED_MEMORY_FLEET_ADMIN_PASSWORD=...     # the server administrator's
    embodied-memory fleet server --folder /srv/fleet --host 0.0.0.0 --port 5432
    embodied-memory fleet init --admin-url postgresql://postgres@fleet-server:5432/postgres
    EMBODIED_MEMORY_DB_PASSWORD=... embodied-memory fleet add-robot spot1 --admin-url ...
    EMBODIED_MEMORY_DB_PASSWORD=... embodied-memory fleet add-operator alice --admin-url ...
    EMBODIED_MEMORY_DB_PASSWORD=... embodied-memory fleet forget Alice --url postgresql://alice@fleet-server:5432/fleet
    EMBODIED_MEMORY_DB_PASSWORD=... embodied-memory fleet reconcile --url postgresql://alice@fleet-server:5432/fleet --every 300
    embodied-memory fleet stop --folder /srv/fleet

Passwords come from environment variables only (never arguments: they would sit in the shell
history and the process list).
"""
from __future__ import annotations

import json
import os
import sys

ADMIN_PASSWORD_ENV = "EMBODIED_MEMORY_FLEET_ADMIN_PASSWORD"
LOGIN_PASSWORD_ENV = "EMBODIED_MEMORY_DB_PASSWORD"


def _env(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise SystemExit(f"error: set the environment variable {name} (passwords are never arguments)")
    return value


def cmd_fleet(args) -> int:
    from ..store.params import StoreParams
    from .roles import add_operator, add_robot, create_fleet
    from .server import FleetServer
    if args.action in ("server", "stop"):
        server = FleetServer(args.folder, superuser_password=_env(ADMIN_PASSWORD_ENV) if args.action == "server"
                             else "unused", host=args.host, port=args.port)
        if args.action == "stop":
            server.stop()
            print(f"stopped the fleet memory server in {server.folder}")
            return 0
        server.start()
        print(f"fleet memory server running (pid {server.pid()}): {server.url()}  "
              f"(log: {server.folder / 'server.log'}; stop: embodied-memory fleet stop --folder {args.folder})")
        return 0
    if args.action in ("reconcile", "forget"):
        if not args.url:
            raise SystemExit("error: --url postgresql://OPERATOR@HOST:PORT/fleet is needed (an operator's login)")
        return _reconcile(args) if args.action == "reconcile" else _forget(args)
    if not args.admin_url:
        raise SystemExit("error: --admin-url postgresql://ADMIN@HOST:PORT/postgres is needed")
    if args.action != "init" and not args.name:
        raise SystemExit(f"error: {args.action} needs a NAME")
    admin_password = _env(ADMIN_PASSWORD_ENV)
    if args.action == "init":
        dims = {k: getattr(args, k) for k in ("text_dim", "image_dim", "face_dim", "reid_dim")}
        url = create_fleet(args.admin_url, admin_password, args.database,
                           StoreParams(data_dir=args.cache_dir, **dims))
        print(f"fleet memory ready: {url} (add logins: embodied-memory fleet add-robot ROBOT_ID ...)")
    elif args.action == "add-robot":
        add_robot(args.admin_url, admin_password, args.name, _env(LOGIN_PASSWORD_ENV))
        print(f"robot login {args.name}: set robot_id: {args.name} and postgres_url: "
              f"postgresql://{args.name}@HOST:PORT/{args.database} on that robot")
    else:
        add_operator(args.admin_url, admin_password, args.name, _env(LOGIN_PASSWORD_ENV))
        print(f"operator login {args.name}")
    return 0


def open_fleet_store(url: str, cache_dir: str):
    """The fleet's memory as an operator opens it (dimensions as the server's database holds them;
    the password from $EMBODIED_MEMORY_DB_PASSWORD)."""
    import psycopg
    from ..store import open_store
    from ..store.params import StoreParams
    with psycopg.connect(url, password=_env(LOGIN_PASSWORD_ENV)) as conn:
        dims = {k: int(v) for k, v in conn.execute(
            "SELECT key, value FROM meta WHERE key IN ('text_dim', 'image_dim', 'face_dim', 'reid_dim')").fetchall()}
    return open_store(StoreParams(backend="postgres", postgres_url=url, data_dir=cache_dir,
                                  postgres_password_env=LOGIN_PASSWORD_ENV, **dims))


def _forget(args) -> int:
    """Everything of one person, on every robot's records (their images stay on the robots' disks
    until each robot's own retention removes them: the server holds no image)."""
    if not args.name:
        raise SystemExit("error: forget needs a PERSON (an identity id or its name)")
    from ..store import StoreError
    store = open_fleet_store(args.url, args.cache_dir)
    try:
        print(json.dumps(store.forget_identity(args.name, dry_run=args.dry_run), indent=2))
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        store.close()
    return 0


def _reconcile(args) -> int:
    import time
    from .identities import reconcile
    store = open_fleet_store(args.url, args.cache_dir)
    try:
        while True:
            merges = reconcile(store, dry_run=args.dry_run)
            for m in merges:
                print(f"{'would merge' if args.dry_run else 'merged'} {m.absorbed} into {m.survivor} "
                      f"(face distance {m.distance:.3f})")
            print(f"{len(merges)} identities {'to merge' if args.dry_run else 'merged'} across robots", flush=True)
            if not args.every or args.dry_run:
                return 0
            time.sleep(args.every)
    except KeyboardInterrupt:
        return 0
    finally:
        store.close()


def add_fleet_arguments(p) -> None:
    from ..store.params import StoreParams
    p.add_argument("action", choices=("server", "stop", "init", "add-robot", "add-operator", "reconcile", "forget"),
                   help="server: start (and on first use create) a PostgreSQL server in --folder; stop: stop it; "
                        "init: make the fleet database, its tables and roles; add-robot / add-operator NAME: a login "
                        f"(its password from ${LOGIN_PASSWORD_ENV}; the administrator's from ${ADMIN_PASSWORD_ENV}); "
                        "reconcile: merge the identities different robots enrolled for one person; forget PERSON: "
                        f"everything of them fleet-wide (both with an operator's --url, password from "
                        f"${LOGIN_PASSWORD_ENV})")
    p.add_argument("name", nargs="?", default="", help="add-robot: the robot_id; add-operator: the login name; "
                                                        "forget: the person (identity id or name)")
    p.add_argument("--folder", default="~/.local/share/embodied_memory/fleet_server", help="server / stop: its data")
    p.add_argument("--host", default="127.0.0.1", help="server: the address it listens on (0.0.0.0: every interface)")
    p.add_argument("--port", type=int, default=5432, help="server: its TCP port")
    p.add_argument("--admin-url", default="", help="init / add-*: postgresql://postgres@HOST:PORT/postgres")
    p.add_argument("--database", default="fleet", help="the fleet's database")
    p.add_argument("--url", default="", help="reconcile: postgresql://OPERATOR@HOST:PORT/fleet")
    p.add_argument("--every", type=float, default=0.0, metavar="S", help="reconcile: again every S seconds (a service)")
    p.add_argument("--dry-run", action="store_true", help="reconcile / forget: print what it would do, change nothing")
    p.add_argument("--cache-dir", default="~/.cache/embodied_memory/fleet_admin", help="init: the store's local cache")
    for name in ("text_dim", "image_dim", "face_dim", "reid_dim"):
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, type=int, default=getattr(StoreParams, name),
                       help="init: as every robot's memory node sets it")

