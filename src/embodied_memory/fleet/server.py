"""A fleet memory server on this machine: PostgreSQL started from a data folder, reached by URL
with a password over TCP, as a building's server would be.

For trials, CI and a server in a robot lab; a production fleet points ``postgres_url`` at its own
managed PostgreSQL (16+) instead.  The binaries come from ``pgserver`` (PyPI: PostgreSQL 16 with
pgvector, no system install) or a system PostgreSQL (``pg_config --bindir``, Debian's
``/usr/lib/postgresql/<v>/bin``).  PostgreSQL never runs as root: as root the server runs as
the system user ``pgserver`` (created if missing, as pgserver itself does).

``FleetServer(folder).start()`` initialises the folder on first use (superuser ``postgres``
with the password given, scram-sha-256 on TCP, no trust), starts ``postgres`` listening on
``host:port`` and waits for it; ``stop()`` shuts it down cleanly, ``kill()`` as a power cut
would (``SIGKILL``).  The roles and tables of a fleet are made by ``fleet.roles``.
"""
from __future__ import annotations

import glob
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Optional

log = logging.getLogger(__name__)

SYSTEM_USER = "pgserver"     # the system user the server runs as when this process is root
ADDRESS_FILE = "address.json"   # host and port the folder's server listens on (a restart keeps them)


def postgres_bindir() -> Path:
    """The folder holding initdb / pg_ctl / postgres, or a clear error naming what to install."""
    try:
        with warnings.catch_warnings():        # pgserver asks platformdirs for a runtime dir it does not use here
            warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
            from pgserver._commands import POSTGRES_BIN_PATH
        return Path(POSTGRES_BIN_PATH)
    except ImportError:
        pass
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True).stdout.strip()
        if out and (Path(out) / "initdb").exists():
            return Path(out)
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if debian:
        return Path(debian[-1]).parent
    raise RuntimeError("no PostgreSQL server binaries: `pip install pgserver` (PostgreSQL 16 + pgvector from "
                       "PyPI) or install the system's postgresql package")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class FleetServer:
    """A PostgreSQL server in ``folder`` on ``host:port`` (a free port when 0; a folder made
    before keeps the address it was made with unless another is given)."""

    def __init__(self, folder, *, superuser_password: str, host: str = "", port: int = 0):
        if not superuser_password:
            raise ValueError("superuser_password: a fleet server never trusts a connection without one")
        self.folder = Path(folder).expanduser().resolve()
        self.pgdata = self.folder / "pgdata"
        saved = self._saved_address()
        self.host = host or saved.get("host", "127.0.0.1")
        self.port = port or saved.get("port") or free_port(self.host if self.host != "0.0.0.0" else "127.0.0.1")
        self._password = superuser_password
        self._bindir = postgres_bindir()
        self._user = SYSTEM_USER if os.geteuid() == 0 else None

    def _saved_address(self) -> dict:
        try:
            return json.loads((self.folder / ADDRESS_FILE).read_text())
        except (OSError, ValueError):
            return {}

    def url(self, user: str = "postgres", database: str = "postgres") -> str:
        """The URL a client connects with (the password comes from the environment, never here);
        a server listening on every interface is reached by this machine's name."""
        host = socket.getfqdn() if self.host in ("0.0.0.0", "*", "::") else self.host
        return f"postgresql://{user}@{host}:{self.port}/{database}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([str(self._bindir / args[0]), *args[1:]], capture_output=True, text=True,
                              check=check, user=self._user, cwd="/")

    def _prepare_for_system_user(self) -> None:
        if self._user is None:
            return
        from pgserver.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists
        import stat
        entry = ensure_user_exists(self._user)
        ensure_prefix_permissions(self._bindir)
        ensure_folder_permissions(self._bindir, stat.S_IXGRP | stat.S_IXOTH | stat.S_IRGRP | stat.S_IROTH)
        ensure_folder_permissions(self._bindir.parent / "lib", stat.S_IRGRP | stat.S_IROTH)
        self.folder.mkdir(parents=True, exist_ok=True)
        ensure_prefix_permissions(self.folder)
        os.chown(self.folder, entry.pw_uid, entry.pw_gid)

    def initialised(self) -> bool:
        return (self.pgdata / "PG_VERSION").exists()

    def start(self, timeout_s: float = 60.0) -> "FleetServer":
        self.folder.mkdir(parents=True, exist_ok=True)
        self._prepare_for_system_user()
        if not self.initialised():
            with tempfile.NamedTemporaryFile("w", dir=self.folder, delete=False) as pw:
                pw.write(self._password + "\n")
            try:
                if self._user is not None:
                    import pwd
                    entry = pwd.getpwnam(self._user)
                    os.chown(pw.name, entry.pw_uid, entry.pw_gid)
                self._run("initdb", "-D", str(self.pgdata), "-U", "postgres", "--auth=scram-sha-256",
                          "--encoding=UTF8", "--locale=C", f"--pwfile={pw.name}")
            finally:
                os.unlink(pw.name)
            log.info("initialised a fleet memory server in %s", self.pgdata)
        if self.pid() is not None and self._alive(self.pid()):
            raise RuntimeError(f"a fleet memory server is running in {self.folder} already (pid {self.pid()}, "
                               f"{self.url()}); stop it first: embodied-memory fleet stop --folder {self.folder}")
        self._allow_remote_clients()
        (self.folder / ADDRESS_FILE).write_text(json.dumps({"host": self.host, "port": self.port}))
        self._run("pg_ctl", "-D", str(self.pgdata), "-w", "-t", str(int(timeout_s)), "-l", str(self.folder / "server.log"),
                  "-o", f"-h {self.host} -p {self.port} -k {self.pgdata}", "start")
        log.info("fleet memory server on %s:%d", self.host, self.port)
        return self

    def _allow_remote_clients(self) -> None:
        """initdb lets only this machine in: a server on another address lets robots in from the
        network, each with its password (scram-sha-256).  No TLS here: put the server on a trusted
        network or behind TLS (a managed PostgreSQL, or ssl=on with a certificate in postgresql.conf)."""
        hba = self.pgdata / "pg_hba.conf"
        lines = hba.read_text().splitlines()
        remote = ["host all all 0.0.0.0/0 scram-sha-256", "host all all ::/0 scram-sha-256"]
        wanted = self.host not in ("127.0.0.1", "localhost", "::1")
        kept = [line for line in lines if line.strip() not in remote]
        if wanted:
            kept += remote
        if kept != lines:
            hba.write_text("\n".join(kept) + "\n")

    @staticmethod
    def _alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True

    def pid(self) -> Optional[int]:
        try:
            return int((self.pgdata / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> bool:
        """Stop it cleanly; False when no server was running in the folder."""
        pid = self.pid()
        if pid is None or not self._alive(pid):
            return False
        self._run("pg_ctl", "-D", str(self.pgdata), "-m", "fast", "-w", "stop", check=False)
        return True

    def kill(self) -> None:
        """The server's processes die at once (a power cut or OOM kill): committed data survives in
        PostgreSQL's WAL; the next ``start`` recovers it."""
        pid = self.pid()
        if pid is None:
            return
        children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
        for p in [pid, *map(int, children)]:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
                time.sleep(0.05)
            except ProcessLookupError:
                break
        (self.pgdata / "postmaster.pid").unlink(missing_ok=True)
