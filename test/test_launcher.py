"""Integration: the launcher starts real nodes as processes that talk over DDS."""
import json
import os
import signal

import pytest
from embodied_memory_interfaces.srv import GetMemoryStats, QueryMemory
from rclpy.node import Node

from embodied_memory.records_io import observation_to_dict
from embodied_memory.types import Observation, PersonSighting, Pose

from rosutil import LaunchedStack, call, wait_until

pytestmark = pytest.mark.integration


def write_export(path, n=6):
    t0 = 1_800_000_000.0
    with open(path, "w") as handle:
        for i in range(n):
            obs = Observation(f"imp-{i}", t0 + 10 * i, "import_ep", Pose(float(i), 1.0, 0.0, 0.1),
                              description=f"a blue chair number {i} near the window", waypoint_id="wp_a",
                              people=[PersonSighting((1, 2, 30, 80), "person_0001", 0.9)] if i % 2 else [])
            handle.write(json.dumps(observation_to_dict(obs)) + "\n")


def write_stack(tmp_path, *, respawn=False, importer=True):
    export = tmp_path / "export.jsonl"
    write_export(export)
    text = f"""stack: test
nodes:
  memory:
    executable: memory_node
    required: true
    respawn: {str(respawn).lower()}
    respawn_delay_s: 0.2
    parameters: {{data_dir: "{tmp_path / 'store'}", text_embedder: hash, markers_period_s: 0.5}}
"""
    if importer:
        text += f"""  importer:
    executable: observation_importer
    required: false
    parameters: {{input_path: "{export}", rate_hz: 100.0}}
"""
    path = tmp_path / "stack.yaml"
    path.write_text(text)
    return path


def stats(node):
    return call(node, GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats


def test_two_nodes_exchange_observations_and_services(tmp_path, ros_context):
    stack = LaunchedStack(write_stack(tmp_path), tmp_path / "launch.log")
    node = Node("test_client", context=ros_context)
    try:
        # the importer's Observation messages reach the memory node over DDS
        wait_until(lambda: stats(node).observations == 6, 40, what="6 observations stored")
        s = stats(node)
        assert s.person_sightings == 3 and s.identities == 1 and s.backend == "sqlite_faiss"
        res = call(node, QueryMemory, "/memory/query",
                   QueryMemory.Request(tool="person_observations", arguments_json='{"person": "person_0001"}'))
        assert res.success, res.error
        assert [r["id"] for r in json.loads(res.result_json)] == ["imp-1", "imp-3", "imp-5"]
        bad = call(node, QueryMemory, "/memory/query", QueryMemory.Request(tool="nope", arguments_json="{}"))
        assert not bad.success and "unknown tool" in bad.error
        # the importer finished on its own: optional, so the stack keeps running
        wait_until(lambda: "node 'importer'" in stack.log() and "exit code 0" in stack.log(), 20,
                   what="importer exit reported")
        assert stack.process.poll() is None
        # a required node killed -> reported, stack stops with a non-zero status
        os.kill(stack.pid_of("memory"), signal.SIGKILL)
        assert stack.process.wait(timeout=30) == 1
        log = stack.log()
        assert "node 'memory'" in log and "killed by SIGKILL" in log
        assert "required node 'memory' failed" in log
    finally:
        stack.stop()
        node.destroy_node()


def test_respawn_and_signal_forwarding(tmp_path, ros_context):
    stack = LaunchedStack(write_stack(tmp_path, respawn=True, importer=False), tmp_path / "launch.log")
    node = Node("test_client", context=ros_context)
    try:
        first = stack.pid_of("memory")
        assert stats(node).observations == 0
        os.kill(first, signal.SIGKILL)
        second = stack.pid_of("memory", nth=2)
        assert second != first and "respawning 'memory'" in stack.log()
        assert stats(node).backend == "sqlite_faiss"  # the respawned node serves again
        # SIGTERM to the launcher is forwarded; the node shuts down; clean exit
        code = stack.stop(signal.SIGTERM)
        assert code == 0
        with pytest.raises(ProcessLookupError):
            os.kill(second, 0)
    finally:
        stack.stop()
        node.destroy_node()


def test_node_rejects_unknown_parameter_at_startup(tmp_path):
    import subprocess
    from rosutil import VENV_BIN
    params = tmp_path / "p.yaml"
    params.write_text("/memory:\n  ros__parameters:\n    data_dir: /tmp/x\n    bogus_key: 3\n")
    proc = subprocess.run([str(VENV_BIN / "memory_node"), "--ros-args", "--params-file", str(params)],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"})
    assert proc.returncode == 2
    assert "bogus_key" in proc.stderr and "/memory" in proc.stderr
