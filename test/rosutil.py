"""Helpers for tests that talk to real nodes over DDS."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from rclpy.executors import SingleThreadedExecutor

VENV_BIN = Path(sys.executable).parent


def call(node, srv_type, name: str, request, timeout: float = 20.0, attempt_s: float = 5.0):
    """Call a service from a test node, waiting for discovery (never a fixed sleep).

    A request sent while discovery still lists a server that just died (or before a new one
    matched) is lost, so the call is repeated every ``attempt_s`` until ``timeout``."""
    client = node.create_client(srv_type, name)
    previous = node.executor            # a node spins in one executor at a time: give it back after
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    deadline = time.monotonic() + timeout
    try:
        assert client.wait_for_service(timeout_sec=timeout), f"service {name} not available"
        while time.monotonic() < deadline:
            future = client.call_async(request)
            attempt_end = min(deadline, time.monotonic() + attempt_s)
            while not future.done() and time.monotonic() < attempt_end:
                executor.spin_once(timeout_sec=0.05)
            if future.done():
                return future.result()
            client.remove_pending_request(future)
        raise AssertionError(f"service {name} did not answer in {timeout} s")
    finally:
        executor.remove_node(node)
        node.destroy_client(client)
        if previous is not None:
            previous.add_node(node)


def spin_until(executor, future, timeout: float, why=lambda: ""):
    """Spin ``executor`` until ``future`` is done; fail with ``why()`` (e.g. a node log) if not."""
    end = time.monotonic() + timeout
    while not future.done() and time.monotonic() < end:
        executor.spin_once(timeout_sec=0.05)
    assert future.done(), f"no answer in {timeout} s\n{why()}"
    return future.result()


def wait_until(predicate, timeout: float = 20.0, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class LaunchedStack:
    """``embodied-memory launch STACK`` as a child process, its log captured to a file."""

    def __init__(self, stack_path: Path, log_path: Path, *extra: str):
        self.log_path = log_path
        self._log = open(log_path, "w")
        env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen([str(VENV_BIN / "embodied-memory"), "launch", str(stack_path), *extra],
                                        stdout=self._log, stderr=subprocess.STDOUT, env=env)

    def log(self) -> str:
        return self.log_path.read_text()

    def pids(self, node: str, log: str = "") -> list[int]:
        """Every process the launcher started for ``node``, oldest first (from ``log``, a read of
        the launcher's log, or a fresh read)."""
        return [int(p) for p in re.findall(rf"started node '{node}' \(\S+, pid (\d+)\)", log or self.log())]

    def pid_of(self, node: str, nth: int = 1) -> int:
        def find():
            pids = self.pids(node)
            return pids[nth - 1] if len(pids) >= nth else None
        return wait_until(find, 20, what=f"launcher to start '{node}' (#{nth})")

    def stop(self, sig=signal.SIGINT, timeout: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout)
        finally:
            self._log.close()


def fixture_stack(tmp_path: Path, agent_parameters: str, memory_parameters: str = "text_embedder: hash") -> LaunchedStack:
    """A memory node and a query agent node, the memory filled with store_fixtures' six
    observations by the observation importer (its own process too)."""
    import json

    from embodied_memory.records_io import observation_to_dict

    from store_fixtures import fixture_observations
    export = tmp_path / "export.jsonl"
    export.write_text("".join(json.dumps(observation_to_dict(o)) + "\n" for o in fixture_observations(tmp_path)))
    path = tmp_path / "stack.yaml"
    memory_extra = f", {memory_parameters}" if memory_parameters else ""
    path.write_text(f"""nodes:
  memory:
    executable: memory_node
    parameters: {{data_dir: "{tmp_path / 'store'}", image_dim: 16, face_dim: 8, reid_dim: 8{memory_extra}}}
  query_agent:
    executable: query_agent_node
    parameters: {{{agent_parameters}}}
  importer:
    executable: observation_importer
    required: false
    parameters: {{input_path: "{export}"}}
""")
    return LaunchedStack(path, tmp_path / "launch.log")


def send_goal(node, action_type, name: str, goal, timeout: float = 60.0, feedback=None):
    """Send one action goal from a test node and wait for its result (waiting for discovery):
    the result response (``.status``, ``.result``); fails if the goal is rejected."""
    from rclpy.action import ActionClient
    client = ActionClient(node, action_type, name)
    previous = node.executor
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)
    try:
        assert client.wait_for_server(timeout_sec=timeout), f"action {name} not available"
        handle = spin_until(executor, client.send_goal_async(goal, feedback_callback=feedback), 20.0)
        assert handle.accepted, f"action {name} rejected the goal"
        return spin_until(executor, handle.get_result_async(), timeout)
    finally:
        executor.remove_node(node)
        client.destroy()
        if previous is not None:
            previous.add_node(node)
