"""The launcher: supervision of node processes (restart with backoff, crash loops, output),
with stand-in executables and with real nodes that talk over DDS."""
import io
import json
import logging
import os
import re
import signal

import pytest
from embodied_memory_interfaces.srv import GetMemoryStats, QueryMemory
from rclpy.node import Node

from embodied_memory.launcher import Launcher
from embodied_memory.records_io import observation_to_dict
from embodied_memory.stack import NodeSpec, StackSpec, parse_stack
from embodied_memory.config import ConfigError
from embodied_memory.types import Observation, PersonSighting, Pose

from rosutil import LaunchedStack, call, wait_until


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
    remappings: {{/memory/forget: /ltest/memory/forget}}
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


def delays(text, node):
    return [float(d) for d in re.findall(rf"respawning '{node}' in ([0-9.]+) s", text)]


def stats(node):
    return call(node, GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats


@pytest.mark.integration
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
        # (the history tools' order is the store's business: most recent first by default)
        assert sorted(r["id"] for r in json.loads(res.result_json)) == ["imp-1", "imp-3", "imp-5"]
        # the stack file's remappings reach the node (`-r /memory/forget:=/ltest/memory/forget`)
        services = lambda: {n for n, _ in node.get_service_names_and_types_by_node("memory", "/")}  # noqa: E731
        wait_until(lambda: "/ltest/memory/forget" in services(), 20, what="the remapped forget service")
        assert "/memory/forget" not in services()
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
        # the node's output went through the launcher, prefixed, and its last lines are printed
        assert re.search(r"^\[memory\] ", log, re.M) and "last " in log and "log lines of 'memory'" in log
    finally:
        stack.stop()
        node.destroy_node()


@pytest.mark.integration
def test_killed_node_is_restarted_with_growing_delay_and_signals_are_forwarded(tmp_path, ros_context):
    stack = LaunchedStack(write_stack(tmp_path, respawn=True, importer=False), tmp_path / "launch.log")
    node = Node("test_client", context=ros_context)
    try:
        first = stack.pid_of("memory")
        assert stats(node).observations == 0
        os.kill(first, signal.SIGKILL)
        second = stack.pid_of("memory", nth=2)
        assert second != first and "respawning 'memory'" in stack.log()
        assert stats(node).backend == "sqlite_faiss"  # the respawned node serves again
        os.kill(second, signal.SIGKILL)                # again, soon after: the delay doubles
        third = stack.pid_of("memory", nth=3)
        assert third not in (first, second)
        assert delays(stack.log(), "memory") == [0.2, 0.4]
        assert "killed by SIGKILL at" in stack.log() and "uptime" in stack.log()
        assert stats(node).backend == "sqlite_faiss" and stack.process.poll() is None  # the stack kept running
        # SIGTERM to the launcher is forwarded; the node shuts down; clean exit
        code = stack.stop(signal.SIGTERM)
        assert code == 0
        with pytest.raises(ProcessLookupError):
            os.kill(third, 0)
    finally:
        stack.stop()
        node.destroy_node()


@pytest.mark.integration
def test_real_node_in_a_crash_loop_stops_the_stack_with_its_last_lines(tmp_path):
    """An importer with no memory to publish to exits 1 at once, every time."""
    export = tmp_path / "export.jsonl"
    write_export(export, n=2)
    path = tmp_path / "stack.yaml"
    path.write_text(f"""stack: crashing
nodes:
  importer:
    executable: observation_importer
    respawn_delay_s: 0.1
    max_respawns: 2
    parameters: {{input_path: "{export}", wait_for_subscriber_s: 0.0, observations_topic: /nobody/listens}}
""")
    stack = LaunchedStack(path, tmp_path / "launch.log")
    try:
        assert stack.process.wait(timeout=120) == 1
        log = stack.log()
        assert len(re.findall(r"started node 'importer'", log)) == 3       # 1 start + 2 restarts
        assert delays(log, "importer") == [0.1, 0.2]
        assert "crash loop: 3 crashes within 60 s (max_respawns 2)" in log
        tail = log[log.index("log lines of 'importer'"):]
        assert "[importer]" in tail and "no subscriber on /nobody/listens" in tail
    finally:
        stack.stop()


# -- supervision with stand-in executables (no DDS) ------------------------------------------
def script(bin_dir, name, body):
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return name


def spec(name, executable, **kw):
    return NodeSpec(name=name, executable=executable, parameters={}, **kw)


@pytest.fixture
def bin_dir(tmp_path, monkeypatch):
    d = tmp_path / "bin"
    d.mkdir()
    monkeypatch.setenv("PATH", f"{d}{os.pathsep}{os.environ['PATH']}")
    return d


def launcher_log(caplog):
    return "\n".join(r.getMessage() for r in caplog.records if r.name == "embodied_memory.launcher")


def test_crash_loop_stops_the_stack_and_prints_the_last_lines(bin_dir, caplog):
    exe = script(bin_dir, "crasher", 'i=1; while [ $i -le 30 ]; do echo "line $i"; i=$((i+1)); done; '
                                     'echo "boom" >&2; exit 3')
    out = io.StringIO()
    stack = StackSpec("t", "test", [spec("crasher", exe, respawn_delay_s=0.05, respawn_max_delay_s=0.1,
                                         max_respawns=3)])
    with caplog.at_level(logging.INFO, logger="embodied_memory.launcher"):
        code = Launcher(stack, output=out, poll_s=0.01).run()
    log = launcher_log(caplog)
    assert code == 1
    assert log.count("started node 'crasher'") == 4
    assert delays(log, "crasher") == [0.05, 0.1, 0.1]           # doubling, capped at respawn_max_delay_s
    assert "exit code 3" in log and "(last output: boom)" in log
    assert "crash loop: 4 crashes within 60 s (max_respawns 3)" in log
    assert "required node 'crasher' failed" in log
    record = next(r.getMessage() for r in caplog.records if "log lines of 'crasher'" in r.getMessage())
    tail = record.splitlines()
    assert tail[0] == "last 20 log lines of 'crasher':" and len(tail) == 21
    assert tail[1] == "  [crasher] line 12" and tail[-1] == "  [crasher] boom"
    # every line of every run was forwarded, prefixed (stdout and stderr)
    assert out.getvalue().count("[crasher] line 1\n") == 4 and out.getvalue().count("[crasher] boom\n") == 4


def test_restart_delay_does_not_block_other_nodes(bin_dir, caplog):
    slow = script(bin_dir, "slow_crasher", "exit 1")
    fast = script(bin_dir, "fast_crasher", "exit 1")
    stack = StackSpec("t", "test", [
        spec("slow", slow, respawn_delay_s=600.0, respawn_max_delay_s=600.0),
        spec("fast", fast, required=False, respawn_delay_s=0.01, respawn_max_delay_s=0.01, max_respawns=3)])
    launcher = Launcher(stack, output=io.StringIO())
    with caplog.at_level(logging.INFO, logger="embodied_memory.launcher"):
        try:
            launcher.start()
            wait_until(lambda: (launcher.poll() or True) and "optional node 'fast' is not restarted"
                       in launcher_log(caplog), 60, interval=0.01, what="the fast node to be given up")
            assert launcher.poll()                 # the stack still runs: 'slow' waits for its restart
        finally:
            launcher.shutdown()
    log = launcher_log(caplog)
    assert log.count("started node 'fast'") == 4 and log.count("started node 'slow'") == 1
    assert delays(log, "slow") == [600.0]
    assert launcher.exit_code == 0


def test_backoff_resets_after_a_long_run(bin_dir, caplog):
    exe = script(bin_dir, "crasher", "exit 1")
    now = [0.0]
    stack = StackSpec("t", "test", [spec("n", exe, respawn_delay_s=0.1, max_respawns=5, crash_window_s=60.0)])
    launcher = Launcher(stack, output=io.StringIO(), clock=lambda: now[0])

    def crash_and_restart(at):
        runs = launcher_log(caplog).count("started node 'n'")
        wait_until(lambda: (launcher.poll() or True) and "respawning 'n'" in launcher_log(caplog).split(
            "started node 'n'")[-1], 30, interval=0.01, what="a crash")
        now[0] = at
        assert launcher.poll()
        assert launcher_log(caplog).count("started node 'n'") == runs + 1
    with caplog.at_level(logging.INFO, logger="embodied_memory.launcher"):
        try:
            launcher.start()
            crash_and_restart(1.0)     # crashed at uptime 0: 0.1 s
            crash_and_restart(2.0)     # again within the window: 0.2 s
            now[0] = 100.0             # this run lasts 99 s > crash_window_s
            crash_and_restart(101.0)   # back to the first delay
        finally:
            launcher.shutdown()
    assert delays(launcher_log(caplog), "n") == [0.1, 0.2, 0.1]


def test_clean_exit_is_not_a_crash_and_config_errors_are_not_retried(bin_dir, caplog):
    done = script(bin_dir, "done_node", "echo finished; exit 0")
    bad = script(bin_dir, "bad_config", "echo '[FATAL] configuration error: bogus_key' >&2; exit 2")
    with caplog.at_level(logging.INFO, logger="embodied_memory.launcher"):
        code = Launcher(StackSpec("t", "test", [spec("importer", done, required=False)]),
                        output=io.StringIO(), poll_s=0.01).run()
        assert code == 0
        assert "node 'importer'" in launcher_log(caplog) and "finished after" in launcher_log(caplog)
        assert "respawning" not in launcher_log(caplog) and "all nodes have exited" in launcher_log(caplog)
        caplog.clear()
        code = Launcher(StackSpec("t", "test", [spec("memory", bad)]), output=io.StringIO(), poll_s=0.01).run()
    log = launcher_log(caplog)
    assert code == 1 and log.count("started node 'memory'") == 1 and "respawning" not in log
    assert "configuration error, exit code 2" in log and "[memory] [FATAL] configuration error: bogus_key" in log


def test_supervision_keys_are_parsed_and_validated():
    def node(**keys):
        return parse_stack({"nodes": {"memory": {"executable": "memory_node", **keys}}}, "s.yaml").nodes[0]
    n = node()
    assert (n.respawn, n.respawn_delay_s, n.respawn_max_delay_s, n.max_respawns, n.crash_window_s) == \
        (True, 1.0, 30.0, 5, 60.0)
    assert [n.respawn_delay(k) for k in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    assert node(respawn_delay_s=45).respawn_max_delay_s == 45.0
    assert node(respawn=False, crash_window_s=5, max_respawns=0).max_respawns == 0
    remapped = node(remappings={"/memory/query": "/spot/memory/query"})
    assert remapped.ros_arguments("p.yaml")[-4:] == ["-r", "/memory/query:=/spot/memory/query", "--params-file", "p.yaml"]
    for bad, match in (({"respawn_delay_s": -1}, "respawn_delay_s"), ({"crash_window_s": 0}, "crash_window_s"),
                       ({"max_respawns": -1}, "max_respawns"), ({"respawn": "yes"}, "respawn"),
                       ({"respawn_delay_s": 5, "respawn_max_delay_s": 1}, "respawn_max_delay_s"),
                       ({"remappings": {"/a": "b:=c"}}, "remappings"), ({"remappings": ["/a"]}, "remappings")):
        with pytest.raises(ConfigError, match=match):
            node(**bad)


@pytest.mark.integration
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


def test_an_active_node_is_kept_when_its_lifecycle_driver_then_crashes(bin_dir, caplog):
    """The driver said the node is active, then died in its own teardown (a native crash in
    rclpy's shutdown): the node is not stopped (CI once lost an active memory node so). A driver
    that failed before the node was active still stops it."""
    import subprocess
    import time

    from embodied_memory.launcher import active_line
    launcher = Launcher(StackSpec("t", "test", [spec("memory", script(bin_dir, "sleeper", "sleep 30"))]),
                        output=io.StringIO())
    with caplog.at_level(logging.INFO, logger="embodied_memory.launcher"):
        try:
            launcher.start()
            node = launcher._nodes["memory"]
            for said, crashes in ((active_line("/memory", 4.9), "kill -SEGV $$"),
                                  ("/memory: activate did not finish within 300 s", "exit 1")):
                node.driver = subprocess.Popen(["sh", "-c", f"echo '{said}'; {crashes}"], stdout=subprocess.PIPE,
                                               stderr=subprocess.STDOUT)
                node.driver.wait()
                launcher._check_driver(node, time.monotonic())
                if crashes.startswith("kill"):
                    assert node.lifecycle_error is None and node.process.poll() is None
            assert node.lifecycle_error == ("/memory: activate did not finish within 300 s", False)
        finally:
            launcher.shutdown()
    log = launcher_log(caplog)
    assert "node 'memory' is active (/memory: active after 4.9 s); its lifecycle driver then ended with" in log
    assert "node 'memory' did not come up: /memory: activate did not finish" in log
