"""The AskAndAct action over DDS (every node its own process): questions that move the robot
drive the simulated base through the navigation bridge with feedback; cancelling the goal
cancels the bridge's goal (the base stops); a goal beyond the question queue is aborted
"busy:" and counted on /diagnostics; the Ask service never drives and names the action; the
CLI's ``ask --act`` prints feedback and Ctrl-C cancels.

One stack for the module (memory, query agent with one question slot and no queue, sim
bridge, importer); each test holds whatever position the base was left at.  First, in
process: the llm planner's side of the same rules (no navigate tool without the action,
driving time outside the planning budget, cancel stops the next model call)."""
import datetime as dt
import json
import math
import os
import signal
import subprocess
import threading
import time

import pytest
from action_msgs.msg import GoalStatus
from diagnostic_msgs.msg import DiagnosticArray
from embodied_memory_interfaces.action import AskAndAct, NavigateToWaypoint
from embodied_memory_interfaces.srv import Ask, GetMemoryStats
from nav_msgs.msg import Odometry
from rclpy.action import ActionClient
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node

from embodied_memory.agent.query_agent import AgentParams, QueryAgent
from embodied_memory.agent.tools import NAVIGATE, QuestionHooks, StoreMemoryClient
from embodied_memory.nodes.common import to_time_msg
from embodied_memory.records_io import observation_to_dict

from rosutil import VENV_BIN, LaunchedStack, call, wait_until
from scripted_llm import ScriptedLLM, content, tool_call
from store_fixtures import HOUR, T0, filled_store, fixture_observations

integration = pytest.mark.integration

AS_OF = T0 + 27 * HOUR
AS_OF_ISO = dt.datetime.fromtimestamp(AS_OF, tz=dt.timezone.utc).isoformat()
KITCHEN = (1.2, 1.2)          # alice was last seen in the kitchen
ENTRANCE = (0.0, -40.0)       # bob at the entrance: 40 s away at 1 m/s, time to cancel
ACTION = "/agent/ask_and_act"


FINAL = content(json.dumps({"type": "waypoint", "text": "At the kitchen.", "waypoint": "kitchen"}))


def llm_agent(tmp_path, url, **kw):
    return QueryAgent(StoreMemoryClient(filled_store(tmp_path, "sqlite_faiss")),
                      AgentParams(planner="llm", llm_base_url=url, llm_model="m", **kw))


def test_without_the_action_the_model_has_no_navigate_tool(tmp_path):
    refusal = f"the Ask service never moves the robot; use the AskAndAct action {ACTION}"
    with ScriptedLLM([tool_call(NAVIGATE, {"waypoint": "kitchen"}), FINAL]) as llm:
        ans = llm_agent(tmp_path, llm.base_url).ask("Go to the kitchen", as_of=AS_OF,
                                                   hooks=QuestionHooks(no_navigate=refusal))
    assert NAVIGATE not in [t["function"]["name"] for t in llm.requests[0]["tools"]]
    tool_reply = next(m for m in llm.requests[1]["messages"] if m["role"] == "tool")
    assert refusal in tool_reply["content"]                 # the model is told why, and where to go instead
    assert ans.status == "ok" and ans.waypoint == "kitchen" and f"not driven: {refusal}" in ans.error, ans


def test_driving_time_is_outside_the_planning_budget_and_progress_is_reported(tmp_path):
    drives, stages = [], []

    def navigate(waypoint, person):
        time.sleep(1.5)                                     # longer than the whole planning budget
        drives.append(waypoint)
        return {"success": True, "accepted": True, "waypoint": waypoint, "message": "arrived"}
    hooks = QuestionHooks(navigate=navigate, progress=lambda stage, message, calls: stages.append((stage, calls)))
    with ScriptedLLM([tool_call(NAVIGATE, {"waypoint": "kitchen"}), FINAL]) as llm:
        ans = llm_agent(tmp_path, llm.base_url, question_timeout_s=1.0).ask("Go to the kitchen", as_of=AS_OF,
                                                                             hooks=hooks)
    assert NAVIGATE in [t["function"]["name"] for t in llm.requests[0]["tools"]]
    assert drives == ["kitchen"] and len(llm.requests) == 2
    assert ans.status == "ok" and ans.planner == "llm" and not ans.error, ans   # not out of time: no fallback
    assert [s for s, _ in stages] == ["planning", f"tool:{NAVIGATE}", "planning"] and stages[-1][1] == 1


def test_cancel_stops_further_model_and_tool_calls(tmp_path):
    cancelled = threading.Event()

    def navigate(waypoint, person):
        cancelled.set()                                     # cancelled while driving
        return {"success": False, "accepted": True, "cancelled": True, "waypoint": waypoint, "message": "canceled"}
    hooks = QuestionHooks(navigate=navigate, cancelled=cancelled.is_set)
    with ScriptedLLM([tool_call(NAVIGATE, {"waypoint": "kitchen"}), FINAL]) as llm:
        ans = llm_agent(tmp_path, llm.base_url).ask("Go to the kitchen", as_of=AS_OF, hooks=hooks)
    assert len(llm.requests) == 1                           # no model call after the cancel
    assert ans.status == "error" and ans.error.startswith("cancelled:") and ans.planner == "llm", ans
    assert ans.tool_calls == 1


@pytest.fixture(scope="module")
def robot(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ask_and_act")
    export = tmp / "export.jsonl"
    export.write_text("".join(json.dumps(observation_to_dict(o)) + "\n" for o in fixture_observations(tmp)))
    waypoints = tmp / "waypoints.yaml"
    waypoints.write_text(f"waypoints:\n  kitchen: {{x: {KITCHEN[0]}, y: {KITCHEN[1]}}}\n  corridor: {{x: 10.0, y: 0.0}}\n"
                         f"  entrance: {{x: {ENTRANCE[0]}, y: {ENTRANCE[1]}}}\n")
    stack_file = tmp / "stack.yaml"
    stack_file.write_text(f"""nodes:
  memory:
    executable: memory_node
    parameters: {{data_dir: "{tmp / 'store'}", image_dim: 16, face_dim: 8, reid_dim: 8, text_embedder: hash}}
  query_agent:
    executable: query_agent_node
    parameters: {{planner: rules, navigation_action: /navigate_to_waypoint, max_concurrent_questions: 1,
                  max_queued_questions: 0}}
  nav_bridge:
    executable: nav_bridge_node
    parameters: {{backend: sim, waypoints_file: "{waypoints}", sim_speed: 1.0}}
  importer:
    executable: observation_importer
    required: false
    parameters: {{input_path: "{export}"}}
""")
    stack = LaunchedStack(stack_file, tmp / "launch.log")
    try:
        import rclpy
        from rclpy.context import Context
        context = Context()
        rclpy.init(context=context, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
        node = Node("act_setup", context=context)
        wait_until(lambda: call(node, GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats.observations
                   == 6, 60, what="6 observations imported")
        node.destroy_node()
        rclpy.shutdown(context=context)
        yield stack
    finally:
        assert stack.stop() == 0, stack.log()


class ActProbe:
    """A test node spun in the background: the base's odometry, /diagnostics, an AskAndAct client."""

    def __init__(self, context):
        self.node = Node("act_tester", context=context)
        self.pose = None
        self.busy_drops = 0
        self.node.create_subscription(Odometry, "/odom", self._on_odom, 10)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)
        self.client = ActionClient(self.node, AskAndAct, ACTION)
        self.executor = MultiThreadedExecutor(num_threads=3, context=context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self.executor.spin, daemon=True)
        self._thread.start()
        assert self.client.wait_for_server(timeout_sec=30), f"action {ACTION} not available"

    def _on_odom(self, msg):
        self.pose = (msg.pose.pose.position.x, msg.pose.pose.position.y)

    def _on_diagnostics(self, msg):
        for status in msg.status:
            if status.hardware_id == "query_agent":
                for kv in status.values:
                    if kv.key.startswith("dropped.") and kv.key.endswith("busy"):
                        self.busy_drops = max(self.busy_drops, int(kv.value))

    def position(self):
        wait_until(lambda: self.pose is not None, 20, what="the base's odometry")
        return self.pose

    @staticmethod
    def wait(future, timeout: float, what: str):
        wait_until(future.done, timeout, interval=0.02, what=what)
        return future.result()

    def send(self, question: str, feedback: list | None = None):
        goal = AskAndAct.Goal(question=question, as_of=to_time_msg(AS_OF))
        on_feedback = (lambda msg: feedback.append(msg.feedback)) if feedback is not None else None
        handle = self.wait(self.client.send_goal_async(goal, feedback_callback=on_feedback), 20, "goal response")
        assert handle.accepted
        return handle

    def result(self, handle, timeout: float = 90.0):
        return self.wait(handle.get_result_async(), timeout, "the goal's result")

    def close(self):
        self.executor.shutdown()
        self.node.destroy_node()


@pytest.fixture
def tester(robot, ros_context):
    t = ActProbe(ros_context)
    yield t
    t.close()


def distance(a, b):
    return math.hypot(a[0] - b[0], a[1] - b[1])


def assert_stopped(tester, what):
    before = tester.position()
    time.sleep(1.5)
    after = tester.position()
    assert distance(before, after) < 0.05, f"{what}: the base still moves ({before} -> {after})"
    return after


@integration
def test_ask_service_never_drives_and_names_the_action(robot, tester, ros_context):
    start = tester.position()
    node = Node("asker", context=ros_context)
    answer = call(node, Ask, "/agent/ask", Ask.Request(question="Go to where you last saw alice",
                                                       as_of=to_time_msg(AS_OF)), timeout=60).answer
    node.destroy_node()
    # status ok with where the place is; the note says it did not drive and which action does
    assert answer.status == "ok" and answer.waypoint_id == "kitchen" and answer.has_position, answer
    assert "not driven" in answer.error and ACTION in answer.error, answer.error
    assert not answer.text.startswith("Arrived")
    assert distance(assert_stopped(tester, "after Ask"), start) < 0.05, "the Ask service moved the robot"


@integration
def test_ask_and_act_drives_with_feedback(robot, tester):
    feedback = []
    handle = tester.send("Go to where you last saw alice", feedback)
    response = tester.result(handle)
    result = response.result
    assert response.status == GoalStatus.STATUS_SUCCEEDED, result.answer.error + robot.log()
    assert result.answer.status == "ok" and result.answer.text.startswith("Arrived"), result.answer
    assert result.navigated and result.navigation_success and result.waypoint_id == "kitchen" and not result.cancelled
    assert distance((result.final_pose.pose.position.x, result.final_pose.pose.position.y), KITCHEN) < 0.3
    assert distance(tester.position(), KITCHEN) < 0.3
    wait_until(lambda: any(f.navigating for f in feedback), 5, what="navigation feedback")
    stages = [f.stage for f in feedback]
    assert "planning" in stages and any(s.startswith("tool:") for s in stages) and "navigating" in stages, stages
    assert stages.index("planning") < stages.index("navigating")
    assert any(f.navigating and f.waypoint_id == "kitchen" for f in feedback)
    assert max(f.tool_calls for f in feedback) >= 2


@integration
def test_cancel_stops_the_drive_and_busy_goals_are_aborted(robot, tester):
    feedback = []
    handle = tester.send("Take me to where you last saw bob", feedback)
    # the base is driving to the entrance (bridge feedback, distance shrinking)
    wait_until(lambda: sum(f.navigating for f in feedback) >= 5, 30, what="navigation feedback")
    first = next(f.distance_remaining for f in feedback if f.navigating)
    wait_until(lambda: feedback[-1].distance_remaining < first - 0.5, 20, what="the base to move")
    # the one question slot is taken, there is no queue: another goal is aborted "busy:" at once
    busy = tester.result(tester.send("Where did you last see the red mug?"), 30)
    assert busy.status == GoalStatus.STATUS_ABORTED and busy.result.answer.error.startswith("busy:"), busy.result
    assert not busy.result.navigated
    # cancel: the bridge goal is cancelled, the base stops, the result says cancelled
    tester.wait(handle.cancel_goal_async(), 20, "the cancel response")
    response = tester.result(handle, 30)
    result = response.result
    assert response.status == GoalStatus.STATUS_CANCELED, (response.status, result.answer.error)
    assert result.cancelled and result.answer.status == "error" and result.answer.error.startswith("cancelled"), result
    assert result.navigated and result.waypoint_id == "entrance" and not result.navigation_success
    assert result.navigation_error_code == NavigateToWaypoint.Result.ERROR_CANCELED, result.navigation_message
    stopped = assert_stopped(tester, "after the cancel")
    assert distance(stopped, ENTRANCE) > 5.0
    wait_until(lambda: tester.busy_drops >= 1, 15, what="dropped.busy on /diagnostics")


def _cli(question: str):
    return subprocess.Popen([str(VENV_BIN / "embodied-memory"), "ask", "--act", question, "--as-of", AS_OF_ISO],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "PYTHONUNBUFFERED": "1"})


def _read_lines(proc, lines: list):
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))


@integration
def test_cli_act_prints_feedback_and_ctrl_c_cancels(robot, tester):
    lines: list[str] = []
    proc = _cli("Take me to where you last saw bob")
    reader = threading.Thread(target=_read_lines, args=(proc, lines), daemon=True)
    reader.start()
    try:
        wait_until(lambda: sum(line.startswith("[navigating] entrance:") for line in lines) >= 2, 60,
                   what="two navigation feedback lines from the CLI (one a second)")
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(5)
    out = "\n".join(lines)
    print(out)
    assert code == 130, out
    assert "cancelled" in out and "[planning]" in out, out
    stopped = assert_stopped(tester, "after Ctrl-C")
    assert distance(stopped, ENTRANCE) > 5.0


@integration
def test_cli_act_drives_and_prints_the_outcome(robot, tester):
    proc = _cli("Go to where you last saw alice")
    out, _ = proc.communicate(timeout=120)
    print(out)
    assert proc.returncode == 0, out
    assert "[planning]" in out and "[navigating] kitchen" in out, out
    assert "Arrived" in out and "navigation: arrived at kitchen" in out, out
    assert distance(tester.position(), KITCHEN) < 0.3
