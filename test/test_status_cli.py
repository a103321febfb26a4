"""`embodied-memory status` over DDS: with a node running, its /diagnostics row is printed
(level, message, queues, drops, rates, totals); no report from a named node is exit status 1.
NodeHealth's rates: rate.<key> from two reports of growing counters."""
from __future__ import annotations

import json
import os
import subprocess
import threading

import pytest
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter

from embodied_memory.nodes.diagnostics_client import NodeReport, format_reports
from embodied_memory.nodes.health import NodeHealth, dir_bytes

from rosutil import VENV_BIN

pytestmark = pytest.mark.integration


def status(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    return subprocess.run([str(VENV_BIN / "embodied-memory"), "status", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_status_prints_the_running_nodes_row(ros_context):
    from embodied_memory.nodes.query_agent_node import QueryAgentNode
    agent = QueryAgentNode(context=ros_context, parameter_overrides=[
        Parameter("memory_query_service", value="/status_test/no_memory"), Parameter("max_queued_questions", value=6)])
    agent.health.count("answers_ok", 5)
    agent.health.drop("busy", "a question")
    stop = threading.Event()
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(agent)

    def spin():
        while not stop.is_set():
            executor.spin_once(timeout_sec=0.05)
    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        plain = status("--node", "/query_agent", "--listen", "30")
        assert plain.returncode == 0, plain.stderr
        row = [line for line in plain.stdout.splitlines() if line.startswith("/query_agent")]
        assert row and "WARN" in row[0] and "1 inputs dropped" in row[0], plain.stdout
        assert "questions_capacity=10" in plain.stdout and "busy=1" in plain.stdout, plain.stdout
        print("\n" + plain.stdout)

        machine = status("--json", "--node", "/query_agent", "--listen", "30")
        assert machine.returncode == 0, machine.stderr
        report = json.loads(machine.stdout)["/query_agent"]
        assert report["level_name"] == "WARN" and report["level"] == 1
        assert report["queues"]["questions_capacity"] == "10" and report["queues"]["questions_admitted"] == "0"
        assert report["drops"] == {"busy": "1"} and report["totals"]["answers_ok"] == "5"

        missing = status("--node", "/no_such_node", "--listen", "2")
        assert missing.returncode == 1 and "/no_such_node" in missing.stderr, (missing.stdout, missing.stderr)
    finally:
        stop.set()
        thread.join(timeout=5)
        executor.remove_node(agent)
        agent.close()
        agent.destroy_node()


def test_health_reports_rates_of_counters_and_totals(ros_context, tmp_path):
    node = Node("rates_probe", context=ros_context)
    try:
        health = NodeHealth(node, period_s=3600)
        frames = [0]
        health.gauges["frames_total"] = lambda: frames[0]
        health.gauges["queue_length"] = lambda: 7
        first = {kv.key: kv.value for kv in health.status().values}
        assert not [k for k in first if k.startswith("rate.")], first      # one report: no rate yet
        health.count("messages", 40)
        health.drop("bad", n=4)
        frames[0] = 10
        values = {kv.key: kv.value for kv in health.status().values}
        assert float(values["rate.messages"]) > 0 and float(values["rate.dropped.bad"]) > 0, values
        assert float(values["rate.frames_total"]) > 0 and "rate.queue_length" not in values, values
        assert float(values["rate.messages"]) == pytest.approx(10 * float(values["rate.dropped.bad"]), rel=1e-2)
        report = NodeReport("/rates_probe", 1, "4 inputs dropped", values=values)
        sections = report.sections()
        assert sections["queues"] == {"queue_length": "7"} and sections["drops"] == {"bad": "4"}
        assert set(sections["rates"]) == {"messages", "dropped.bad", "frames_total"}
        assert sections["totals"] == {"messages": "40", "frames_total": "10"}
        assert "/rates_probe" in format_reports({"/rates_probe": report})
    finally:
        node.destroy_node()
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"x" * 1000)
    (tmp_path / "g").write_bytes(b"y" * 24)
    assert dir_bytes(tmp_path) == 1024


def test_a_short_timeout_bounds_the_wait_for_discovery_too():
    env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    done = subprocess.run([str(VENV_BIN / "embodied-memory"), "stats", "--timeout", "2"], capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode != 0 and "not discovered within 2 s" in done.stderr + done.stdout, done.stderr
