"""Shared fixtures. Every test keeps DDS on loopback with its own ROS_DOMAIN_ID."""
from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
# one domain per test session (xdist workers / parallel CI jobs do not see each other)
os.environ.setdefault("ROS_DOMAIN_ID", str(random.Random(os.getpid()).randint(10, 100)))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("EMBODIED_MEMORY_SHARED_DATA", REPO.parent / "shared" / "data"))
VENV_BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True)
def _ros_log_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ROS_LOG_DIR", str(tmp_path / "ros_log"))


@pytest.fixture
def ros_context():
    """A fresh rclpy Context for one test."""
    import rclpy
    from rclpy.context import Context
    context = Context()
    rclpy.init(context=context, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    yield context
    if context.ok():
        rclpy.shutdown(context=context)


def shared_data(*parts: str) -> Path:
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"needs {path} (../shared/data is absent on a fresh clone)")
    return path


FLEET_TEST_PASSWORD = "fleet-test-superuser"     # the test server's superuser (scram-sha-256 over TCP)


@pytest.fixture(scope="session")
def fleet_server(tmp_path_factory):
    """A real PostgreSQL server (pgserver's binaries) started once per test session, on TCP with a
    password, as a fleet's server is reached; its superuser's password in the environment
    variable the store reads it from, as on a robot."""
    pytest.importorskip("psycopg", reason="the fleet backend's client (scripts/setup.sh installs it)")
    from embodied_memory.fleet.server import FleetServer
    server = FleetServer(tmp_path_factory.mktemp("fleet_server"), superuser_password=FLEET_TEST_PASSWORD).start()
    os.environ["EMBODIED_MEMORY_DB_PASSWORD"] = FLEET_TEST_PASSWORD
    yield server
    server.stop()


def new_fleet_database(server, key: str) -> str:
    """A fresh database on the test server; its URL."""
    import psycopg
    name = f"t{abs(hash(key)) % 10**12}_{os.getpid()}"
    with psycopg.connect(server.url(), password=FLEET_TEST_PASSWORD, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    return server.url(database=name)


@pytest.fixture
def fleet_database(fleet_server, request):
    """A fresh database on the test server for one test: its URL."""
    return new_fleet_database(fleet_server, request.node.nodeid)
