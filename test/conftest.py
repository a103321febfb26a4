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
