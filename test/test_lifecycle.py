"""Managed (lifecycle) memory and perception nodes over DDS: nothing heavy and nothing served
before configure/activate, nothing lost while inactive, configure failures reported, and the
launcher bringing a stack up to active (memory before perception), again after a respawn."""
import os
import re
import signal
import subprocess
import threading
import time

import pytest
import yaml
from embodied_memory_interfaces.msg import Observation as ObservationMsg
from embodied_memory_interfaces.srv import GetMemoryStats
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState, GetState
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from embodied_memory.config import ConfigError
from embodied_memory.nodes.conversions import observation_to_msg
from embodied_memory.nodes.delivery import AcknowledgedPublisher
from embodied_memory.nodes.diagnostics_client import read_diagnostics
from embodied_memory.nodes.health import NodeHealth
from embodied_memory.nodes.lifecycle import ServingGate
from embodied_memory.stack import parse_stack
from embodied_memory.types import Observation, Pose

from rosutil import VENV_BIN, LaunchedStack, call, wait_until

pytestmark = pytest.mark.integration

MEMORY = {"text_embedder": "hash", "image_dim": 16, "face_dim": 8, "reid_dim": 8, "markers_period_s": 0.5}
PERCEPTION = {"image_embedder": "none", "person_detector": "none", "face_backend": "none", "reid": "none",
              "text_embedder": "hash"}


class NodeProcess:
    """One node executable run by hand (``ros2 run``), its output in a file."""

    def __init__(self, tmp_path, executable: str, name: str, parameters: dict):
        params = tmp_path / f"{name}.yaml"
        params.write_text(yaml.safe_dump({f"/{name}": {"ros__parameters": parameters}}))
        self.log_path = tmp_path / f"{name}.log"
        self._log = open(self.log_path, "w")
        env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen([str(VENV_BIN / executable), "--ros-args", "-r", f"__node:={name}",
                                         "--params-file", str(params)],
                                        stdout=self._log, stderr=subprocess.STDOUT, env=env)

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
        finally:
            self._log.close()


def state(client, name: str) -> str:
    return call(client, GetState, f"{name}/get_state", GetState.Request(), timeout=60).current_state.label


def change(client, name: str, transition_id: int) -> bool:
    """One transition (never sent twice: a second configure would be refused)."""
    request = ChangeState.Request(transition=Transition(id=transition_id))
    return call(client, ChangeState, f"{name}/change_state", request, timeout=120, attempt_s=120).success


def served(client, service: str) -> bool:
    return service in dict(client.get_service_names_and_types())


class Sender:
    """What perception does with observations: keep each until the memory acknowledges it."""

    def __init__(self, context):
        self.node = Node("test_sender", context=context)
        self.publisher = AcknowledgedPublisher(
            self.node, ObservationMsg, "/memory/observations", QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE),
            acks_topic="/memory/acks", health=NodeHealth(self.node), id_of=lambda m: m.observation_id,
            what="observation", resend_after_s=600.0)   # only a (re)appearing memory triggers a resend here
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self):
        while not self._stop.is_set():
            self._executor.spin_once(timeout_sec=0.05)

    def send(self, *ids: str) -> None:
        for i, obs_id in enumerate(ids):
            obs = Observation(obs_id, 1_800_000_000.0 + i, "lifecycle_ep", Pose(float(i), 0.0, 0.0, 0.0),
                              description=f"a red mug number {i}")
            self.publisher.publish(observation_to_msg(obs))

    def close(self):
        self._stop.set()
        self._thread.join(5)
        self._executor.shutdown()
        self.node.destroy_node()


def test_memory_node_serves_only_while_active_and_nothing_is_lost_while_inactive(tmp_path, ros_context):
    store = tmp_path / "store"
    memory = NodeProcess(tmp_path, "memory_node", "memory", {"data_dir": str(store), **MEMORY})
    client = Node("test_client", context=ros_context)
    sender = None
    try:
        # unconfigured: cheap (no store opened), nothing served
        assert state(client, "/memory") == "unconfigured"
        assert not store.exists() and not served(client, "/memory/stats")
        assert change(client, "/memory", Transition.TRANSITION_CONFIGURE)
        assert state(client, "/memory") == "inactive"
        assert store.is_dir() and not served(client, "/memory/stats")     # the store is open, not served
        report = read_diagnostics(20.0, ("/memory",))                    # /diagnostics in every state
        assert report["/memory"]["lifecycle_state"] == "inactive", report
        assert change(client, "/memory", Transition.TRANSITION_ACTIVATE)
        assert state(client, "/memory") == "active"
        stats = call(client, GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats
        assert stats.observations == 0 and stats.backend == "sqlite_faiss"

        sender = Sender(ros_context)
        wait_until(lambda: sender.publisher.get_subscription_count() == 1, 30, what="the memory's subscription")
        sender.send("lc-1", "lc-2")
        wait_until(lambda: sender.publisher.unacknowledged == 0, 60, what="the first two acknowledged")

        # inactive: not served, not subscribed; what is sent now is not acknowledged: the sender keeps it
        assert change(client, "/memory", Transition.TRANSITION_DEACTIVATE)
        assert state(client, "/memory") == "inactive"
        wait_until(lambda: not served(client, "/memory/stats"), 30, what="/memory/stats to go")
        wait_until(lambda: sender.publisher.get_subscription_count() == 0, 30, what="the subscription to go")
        sender.send("lc-3", "lc-4", "lc-5")
        time.sleep(2.0)   # nothing could acknowledge them; give a wrong ack time to arrive
        assert sender.publisher.unacknowledged == 3

        # active again: the sender sees the subscription come back and sends them all again
        assert change(client, "/memory", Transition.TRANSITION_ACTIVATE)
        wait_until(lambda: sender.publisher.unacknowledged == 0, 60, what="the kept observations acknowledged")
        stats = call(client, GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats
        assert stats.observations == 5

        # back down to unconfigured (the store closed) and shut down from there
        assert change(client, "/memory", Transition.TRANSITION_DEACTIVATE)
        assert change(client, "/memory", Transition.TRANSITION_CLEANUP)
        assert state(client, "/memory") == "unconfigured"
        assert change(client, "/memory", Transition.TRANSITION_UNCONFIGURED_SHUTDOWN)
        assert state(client, "/memory") == "finalized"
        assert memory.stop() == 0
        log = memory.log()
        assert "configure: done" in log and "activate: done" in log and "cleanup: done" in log
        assert "Traceback" not in log
    finally:
        if sender is not None:
            sender.close()
        client.destroy_node()
        memory.stop()


def test_configure_failure_is_logged_and_the_node_stays_unconfigured(tmp_path, ros_context):
    not_a_dir = tmp_path / "a_file"
    not_a_dir.write_text("not a directory")
    memory = NodeProcess(tmp_path, "memory_node", "memory", {"data_dir": str(not_a_dir / "store"), **MEMORY})
    client = Node("test_client", context=ros_context)
    try:
        assert state(client, "/memory") == "unconfigured"
        assert not change(client, "/memory", Transition.TRANSITION_CONFIGURE)
        assert state(client, "/memory") == "unconfigured"        # still up, still answering
        log = memory.log()
        assert "configure failed" in log and str(not_a_dir) in log
        assert memory.process.poll() is None
    finally:
        client.destroy_node()
        memory.stop()


def test_configure_waits_for_a_store_server_that_is_not_up_yet(monkeypatch, tmp_path):
    """A store that fails for a reason that may pass (Milvus still starting) is tried again with
    backoff; a configuration error is not; after the wait the last error stands."""
    import logging

    from embodied_memory.nodes import memory_node
    from embodied_memory.params import StoreParams
    attempts, sleeps = [], []

    def flaky(params, failures: int, exc: Exception):
        attempts.append(params)
        if len(attempts) <= failures:
            raise exc
        return "store"
    log = logging.getLogger("test")
    monkeypatch.setattr(memory_node, "open_store", lambda p: flaky(p, 2, RuntimeError("milvus: connection refused")))
    assert memory_node.open_store_waiting(StoreParams(), log, sleep=sleeps.append) == "store"
    assert len(attempts) == 3 and sleeps == [1.0, 2.0]
    attempts.clear()
    monkeypatch.setattr(memory_node, "open_store", lambda p: flaky(p, 9, ValueError("backend: unknown")))
    with pytest.raises(ValueError):
        memory_node.open_store_waiting(StoreParams(), log, sleep=sleeps.append)
    assert len(attempts) == 1                       # a configuration error: no retry
    attempts.clear()
    monkeypatch.setattr(memory_node, "open_store", lambda p: flaky(p, 99, ConnectionError("no route")))
    with pytest.raises(ConnectionError):
        memory_node.open_store_waiting(StoreParams(), log, wait_s=0.0, sleep=sleeps.append)
    assert len(attempts) == 1                       # no time left to wait


def test_perception_loads_its_models_in_configure(tmp_path, ros_context):
    data = tmp_path / "data"
    good = NodeProcess(tmp_path, "perception_node", "perception", {"data_dir": str(data), **PERCEPTION})
    bad = NodeProcess(tmp_path, "perception_node", "perception_yolo",
                      {"data_dir": str(tmp_path / "yolo"), **PERCEPTION, "person_detector": "yolo",
                       "yolo_weights": str(tmp_path / "absent.pt")})
    client = Node("test_client", context=ros_context)
    try:
        assert state(client, "/perception") == "unconfigured"
        assert not (data / "identities").exists()                 # nothing loaded yet
        assert change(client, "/perception", Transition.TRANSITION_CONFIGURE)
        assert state(client, "/perception") == "inactive" and (data / "identities").is_dir()
        assert change(client, "/perception", Transition.TRANSITION_ACTIVATE)
        assert state(client, "/perception") == "active"
        assert change(client, "/perception", Transition.TRANSITION_DEACTIVATE)
        assert change(client, "/perception", Transition.TRANSITION_CLEANUP)
        assert state(client, "/perception") == "unconfigured"
        # missing weights: the unconfigured node started fine; configure fails and says which parameter
        assert state(client, "/perception_yolo") == "unconfigured"
        assert not change(client, "/perception_yolo", Transition.TRANSITION_CONFIGURE)
        assert state(client, "/perception_yolo") == "unconfigured"
        assert "configure failed" in bad.log() and "yolo_weights" in bad.log()
        assert good.stop() == 0
    finally:
        client.destroy_node()
        good.stop()
        bad.stop()


def write_stack(tmp_path, memory_data_dir, respawn: bool = True) -> "os.PathLike":
    path = tmp_path / "stack.yaml"
    path.write_text(yaml.safe_dump({"stack": "lifecycle", "nodes": {
        "perception": {"executable": "perception_node", "respawn": respawn,
                       "parameters": {"data_dir": str(tmp_path / "data"), **PERCEPTION}},
        "memory": {"executable": "memory_node", "respawn": respawn, "respawn_delay_s": 0.2,
                   "parameters": {"data_dir": str(memory_data_dir), **MEMORY}},
        "manual": {"executable": "perception_node", "required": False, "autostart": False,
                   "parameters": {"data_dir": str(tmp_path / "manual"), **PERCEPTION}},
    }}))
    return path


def test_launcher_brings_the_stack_to_active_memory_first_and_again_after_a_respawn(tmp_path, ros_context):
    stack = LaunchedStack(write_stack(tmp_path, tmp_path / "store"), tmp_path / "launch.log")
    client = Node("test_client", context=ros_context)
    try:
        wait_until(lambda: "node 'perception' is active" in stack.log() and "node 'memory' is active" in stack.log(),
                   180, what="both managed nodes active")
        assert state(client, "/memory") == "active" and state(client, "/perception") == "active"
        assert state(client, "/manual") == "unconfigured"        # autostart: false
        log = stack.log()
        # perception was activated only once the memory was active
        memory_active = re.search(r"^\[memory\] .*activate: done", log, re.M).start()
        perception_active = re.search(r"^\[perception\] .*activate: done", log, re.M).start()
        assert memory_active < perception_active
        assert call(client, GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats.observations == 0

        # a crashed memory comes back unconfigured: the launcher drives the new process to active again
        os.kill(stack.pid_of("memory"), signal.SIGKILL)
        stack.pid_of("memory", nth=2)
        wait_until(lambda: stack.log().count("node 'memory' is active") == 2, 120, what="the respawned memory active")
        assert state(client, "/memory") == "active"
        assert call(client, GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats.backend == "sqlite_faiss"
        assert stack.stop() == 0
    finally:
        client.destroy_node()
        stack.stop()


def test_launcher_treats_a_failed_configure_as_a_configuration_error(tmp_path):
    not_a_dir = tmp_path / "a_file"
    not_a_dir.write_text("not a directory")
    stack = LaunchedStack(write_stack(tmp_path, not_a_dir / "store"), tmp_path / "launch.log")
    try:
        assert stack.process.wait(timeout=180) == 1
        log = stack.log()
        assert log.count("started node 'memory'") == 1 and "respawning 'memory'" not in log
        assert "configure failed" in log and "configuration error" in log
        assert "required node 'memory' failed" in log
    finally:
        stack.stop()


def test_launcher_restarts_a_node_that_does_not_come_up_in_time(tmp_path):
    """No answer within transition_timeout_s (a hung configure) is handled as a crash: stopped,
    restarted with backoff, a crash loop in the end."""
    path = tmp_path / "stack.yaml"
    path.write_text(yaml.safe_dump({"nodes": {"memory": {
        "executable": "memory_node", "transition_timeout_s": 0.001, "respawn_delay_s": 0.1, "max_respawns": 1,
        "parameters": {"data_dir": str(tmp_path / "store"), **MEMORY}}}}))
    stack = LaunchedStack(path, tmp_path / "launch.log")
    try:
        assert stack.process.wait(timeout=180) == 1
        log = stack.log()
        assert log.count("did not come up") >= 2 and "respawning 'memory'" in log and "crash loop" in log
        assert "configuration error" not in log
    finally:
        stack.stop()


def test_stack_lifecycle_keys_are_validated():
    def node(executable="memory_node", **keys):
        return parse_stack({"nodes": {"n": {"executable": executable, **keys}}}, "s.yaml").nodes[0]
    n = node()
    assert n.lifecycle and n.autostart and n.transition_timeout_s == 300.0
    assert not node(autostart=False).autostart and node(transition_timeout_s=5).transition_timeout_s == 5.0
    assert not node("query_agent_node").lifecycle
    for executable, keys, match in (("query_agent_node", {"autostart": False}, "not a managed"),
                                    ("memory_node", {"autostart": "no"}, "autostart"),
                                    ("memory_node", {"transition_timeout_s": 0}, "transition_timeout_s")):
        with pytest.raises(ConfigError, match=match):
            node(executable, **keys)


def test_serving_gate_waits_for_callbacks_in_progress():
    gate = ServingGate()
    with gate.entered() as active:
        assert not active                      # closed at first: nothing runs
    gate.open()
    inside, release = threading.Event(), threading.Event()

    def callback():
        with gate.entered() as active:
            assert active
            inside.set()
            release.wait(10)
    worker = threading.Thread(target=callback)
    worker.start()
    assert inside.wait(10)
    assert not gate.close(timeout=0.2)         # one still running
    with gate.entered() as active:
        assert not active                      # closed: new callbacks are refused
    release.set()
    worker.join(10)
    assert gate.close(timeout=5)


def test_launch_file_starts_managed_nodes_as_lifecycle_nodes(monkeypatch):
    """launch/embodied_memory.launch.py with stand-ins for launch and launch_ros (not installed
    here): memory and perception are LifecycleNodes with autostart, the others plain Nodes; a
    respawned one is configured and activated again; a failed configure shuts the launch down."""
    import importlib.util
    import sys
    import types
    from pathlib import Path

    class Action:
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs

        def perform(self, _context):   # LaunchConfiguration("stack")
            return "default"
    kinds = {}

    def kind(name):
        return kinds.setdefault(name, type(name, (Action,), {}))
    modules = {
        "launch": ["LaunchDescription"],
        "launch.actions": ["DeclareLaunchArgument", "EmitEvent", "OpaqueFunction", "RegisterEventHandler", "Shutdown"],
        "launch.event_handlers": ["OnProcessStart"], "launch.events": [], "launch.substitutions": ["LaunchConfiguration"],
        "launch_ros": [], "launch_ros.actions": ["LifecycleNode", "Node"], "launch_ros.event_handlers": ["OnStateTransition"],
        "launch_ros.events": [], "launch_ros.events.lifecycle": ["ChangeState"]}
    for name, classes in modules.items():
        module = types.ModuleType(name)
        for cls in classes:
            setattr(module, cls, kind(cls))
        monkeypatch.setitem(sys.modules, name, module)
    sys.modules["launch.events"].matches_action = lambda action: action
    path = Path(__file__).resolve().parents[1] / "launch" / "embodied_memory.launch.py"
    spec = importlib.util.spec_from_file_location("embodied_memory_launch_file", path)
    launch_file = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch_file)
    opaque = next(a for a in launch_file.generate_launch_description().args[0] if type(a).__name__ == "OpaqueFunction")
    actions = opaque.kwargs["function"](None)
    managed = {a.kwargs["name"]: a for a in actions if type(a).__name__ == "LifecycleNode"}
    plain = {a.kwargs["name"] for a in actions if type(a).__name__ == "Node"}
    assert set(managed) == {"memory", "perception"} and {"frame_selector", "query_agent"} <= plain
    assert all(a.kwargs["autostart"] is True and a.kwargs["namespace"] == "" for a in managed.values())
    handlers = [a.kwargs["event_handler"] for a in actions if type(a).__name__ == "RegisterEventHandler"]
    memory = managed["memory"]
    on_start = next(h for h in handlers if type(h).__name__ == "OnProcessStart" and h.kwargs["target_action"] is memory)
    configured = next(h for h in handlers if type(h).__name__ == "OnStateTransition" and
                      h.kwargs["target_lifecycle_node"] is memory and h.kwargs["goal_state"] == "inactive")
    failed = next(h for h in handlers if type(h).__name__ == "OnStateTransition" and
                  h.kwargs["target_lifecycle_node"] is memory and h.kwargs["goal_state"] == "unconfigured")
    activate_again = configured.kwargs["entities"][0].kwargs["function"]

    def transition_of(emitted):
        (emit,) = emitted
        return emit.kwargs["event"].kwargs["transition_id"]
    assert on_start.kwargs["on_start"](None, None) is None and activate_again(None) is None   # autostart's turn
    assert transition_of(on_start.kwargs["on_start"](None, None)) == Transition.TRANSITION_CONFIGURE   # respawned
    assert transition_of(activate_again(None)) == Transition.TRANSITION_ACTIVATE and activate_again(None) is None
    assert type(failed.kwargs["entities"][0]).__name__ == "Shutdown"
    assert actions.index(on_start_action := next(a for a in actions if a.kwargs.get("event_handler") is on_start)) \
        < actions.index(memory), on_start_action   # registered before the node starts
