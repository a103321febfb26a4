"""Helpers for tests that break the running stack: a listener for acknowledgements and
/diagnostics, a simulated day to replay, and the identities' ground truth."""
from __future__ import annotations

import os
import subprocess
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

from diagnostic_msgs.msg import DiagnosticArray
from embodied_memory_interfaces.msg import Ack
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from embodied_memory.nodes.delivery import ack_qos
from embodied_memory.sim.episode import EpisodeConfig, GroundTruth, cached_episode

from rosutil import VENV_BIN

# one patrol of the simulated office (452 frames, two people at their desks; ~40 s to simulate once)
ONE_PATROL = EpisodeConfig(seed=5, patrol_hours=(10.0,))


def simulated_day(config: EpisodeConfig = ONE_PATROL) -> tuple[Path, GroundTruth]:
    path = cached_episode(config, progress=False)
    return path, GroundTruth.load(path / "ground_truth.json")


class Listener:
    """Collects /memory/acks and the latest /diagnostics status of every node, spinning in a thread."""

    def __init__(self, context):
        self.node = Node("chaos_listener", context=context)
        self.acks: dict[int, Counter] = defaultdict(Counter)   # status -> ids
        self.status: dict[str, dict[str, str]] = {}
        self.received: dict[str, float] = {}      # node -> time.monotonic() of its latest report
        self.banked: Counter = Counter()     # (node, counter) -> what earlier lives of the node reported
        self._lock = threading.Lock()
        self.node.create_subscription(Ack, "/memory/acks", self._on_ack, ack_qos())
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 50)
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self):
        while not self._stop.is_set():
            self._executor.spin_once(timeout_sec=0.05)

    def _on_ack(self, msg: Ack):
        if msg.sender == "memory":
            with self._lock:
                self.acks[msg.status][msg.id] += 1

    def _on_diagnostics(self, msg: DiagnosticArray):
        with self._lock:
            for s in msg.status:
                values = {kv.key: kv.value for kv in s.values}
                # a counter that went back, or is gone (a node lists a count once it has counted):
                # the node restarted, and what its earlier life reported is banked
                for key, before in self.status.get(s.name, {}).items():
                    if key.startswith("count.") and float(values.get(key, 0.0)) < float(before):
                        self.banked[(s.name, key)] += float(before)
                self.status[s.name] = values
                self.received[s.name] = time.monotonic()

    def cumulative(self, node: str, key: str) -> float:
        """A counter summed over every life of ``node`` (its restarts start it from 0)."""
        with self._lock:
            return self.banked[(node, key)] + float(self.status.get(node, {}).get(key, 0))

    def stored_ids(self) -> set[str]:
        with self._lock:
            return set(self.acks[Ack.STORED])

    def value(self, node: str, key: str, default: float = 0.0) -> float:
        with self._lock:
            return float(self.status.get(node, {}).get(key, default))

    def report(self, node: str) -> dict[str, str]:
        with self._lock:
            return dict(self.status.get(node, {}))

    def close(self):
        self._stop.set()
        self._thread.join(5)
        self._executor.shutdown()
        self.node.destroy_node()


def start_replay(bag: Path, log_path: Path) -> subprocess.Popen:
    env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([str(VENV_BIN / "embodied-memory"), "replay", str(bag), "--rate", "paced", "--wait", "120"],
                            stdout=open(log_path, "w"), stderr=subprocess.STDOUT, env=env)


def people_in_view(truth: GroundTruth, stamp: float, tolerance: float = 0.13) -> list[str]:
    """The simulator's people visible at a frame time (the test's ground truth, never the system's)."""
    best = min(truth.frames, key=lambda f: abs(f["t"] - stamp))
    return list(best.get("visible") or []) if abs(best["t"] - stamp) <= tolerance else []
