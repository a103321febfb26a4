"""The AskAndAct action (embodied_memory_interfaces/AskAndAct) of the query agent node:
questions that may move the robot ("go to where you last saw Alice").

Served on ``ask_and_act_action`` (default /agent/ask_and_act) in a callback group of its own.
Only these goals get the navigate tool (the Ask service never drives); it sends
NavigateToWaypoint goals to the bridge on ``navigation_action``.

- **Admission**: the Ask service's (the same pool, slots and queue).  A goal beyond
  ``max_concurrent_questions + max_queued_questions`` is accepted and aborted at once with
  answer.error "busy: ..." (a ROS 2 goal rejection carries no reason, so the client could not
  tell why), counted as dropped.busy on /diagnostics; one still queued after the question's
  budget is aborted "busy: no free slot ...".
- **Feedback**: ``stage`` queued -> planning / tool:<name> -> navigating (with the bridge's
  pose, distance remaining and status) -> answering; ``tool_calls`` so far.
- **Cancel**: no further tool or model call; a running drive is cancelled on the bridge and
  its result awaited; the goal ends CANCELED with ``cancelled`` true and answer.error
  "cancelled: ...".  A model call already sent is not interrupted: the goal's result waits
  for the worker at most ``CANCEL_WAIT_S``, then reports the cancel and the worker stops at
  its next call.
- **Bounds**: planning has the question's budget (``question_timeout()``; time driving is not
  counted), each drive ``navigation_timeout_s``; a goal still running after
  ``act_wait_s()`` is stopped like a cancel and ends ABORTED with "timeout: ...".
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import CancelledError
from concurrent.futures import TimeoutError as FutureTimeout

from embodied_memory_interfaces.action import AskAndAct
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup

from ..agent.answer import STATUS_ERROR, Answer
from ..agent.tools import QuestionHooks
from ..params import ANSWER_GRACE_S
from ..types import Pose
from .common import service_qos
from .conversions import pose_to_msg

POLL_S = 0.05
CANCEL_WAIT_S = 10.0        # after a cancel: how long the result waits for the worker to stop
NO_BRIDGE = ("no navigation bridge is configured (set the query agent's navigation_action, "
             "e.g. /navigate_to_waypoint)")


class _Run:
    """One goal's state, shared by the executor's callback and the worker thread."""

    def __init__(self, handle):
        self.handle = handle
        self.stop = threading.Event()      # past act_wait_s(): stop as if cancelled
        self.navigation: dict = {}         # the last navigate call's outcome
        self.tool_calls = 0

    def cancelled(self) -> bool:
        return self.handle.is_cancel_requested or self.stop.is_set()


class AskAndActServer:
    def __init__(self, node, action_name: str):
        self.node = node
        self.action_name = action_name
        self._server = ActionServer(
            node, AskAndAct, action_name, execute_callback=self._execute,
            goal_callback=lambda _goal: GoalResponse.ACCEPT, cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=ReentrantCallbackGroup(), goal_service_qos_profile=service_qos(),
            result_service_qos_profile=service_qos(), cancel_service_qos_profile=service_qos())

    # -- the executor side: admission, waiting, the result ------------------------------------
    def _execute(self, goal_handle):
        node, goal = self.node, goal_handle.request
        received = time.monotonic()
        planner = goal.planner or node.params.planner
        run = _Run(goal_handle)
        answer = node.admit(planner, "an AskAndAct goal")
        if answer is None:
            self._feedback(run, "queued", "waiting for a free question slot")
            future, answer = node.submit(planner, self._act, run, goal, received + node.budget_s)
            if future is not None:
                answer = self._wait(future, run, received, planner)
        result = self._result(run, answer)
        if result.cancelled:
            goal_handle.canceled()
        elif result.answer.status == STATUS_ERROR:
            goal_handle.abort()
        else:
            goal_handle.succeed()
        node.health.count(f"act_{'cancelled' if result.cancelled else result.answer.status}")
        node.get_logger().info(
            f"act: {goal.question[:200]!r} -> [{result.answer.status}] {result.answer.text[:80]!r} "
            f"{result.answer.error[:120]!r} (navigated {result.navigated} to {result.waypoint_id!r}: "
            f"{result.navigation_message[:80]!r}; {result.answer.tool_calls} calls, {time.monotonic() - received:.2f} s)")
        return result

    def _wait(self, future, run: _Run, received: float, planner: str) -> Answer:
        node = self.node
        hard = received + node.params.act_wait_s()
        give_up = float("inf")         # after a cancel or the hard deadline: wait this long for the worker
        while True:
            try:
                return future.result(timeout=POLL_S)
            except FutureTimeout:
                pass
            except CancelledError:
                return node.no_slot(planner)
            except Exception as exc:  # noqa: BLE001 - agent.ask never raises; belt and braces
                return Answer(status=STATUS_ERROR, planner=planner, error=f"{type(exc).__name__}: {exc}")
            now = time.monotonic()
            if not future.running():   # still waiting for a slot
                if run.handle.is_cancel_requested and future.cancel():
                    return Answer(status=STATUS_ERROR, planner=planner,
                                  error="cancelled: the goal was cancelled while waiting for a slot")
                if now > received + node.budget_s and future.cancel():
                    return node.no_slot(planner)
                continue
            if now > hard and not run.stop.is_set():
                run.stop.set()         # the worker stops at its next call; a drive is cancelled
            if run.cancelled() and give_up == float("inf"):
                give_up = now + CANCEL_WAIT_S + ANSWER_GRACE_S / 2
            if now > give_up:
                return Answer(status=STATUS_ERROR, planner=planner, error=(
                    "cancelled: the goal was cancelled; its last model call is still running and "
                    "stops at its end"))

    def _result(self, run: _Run, answer: Answer):
        cancelled = run.handle.is_cancel_requested
        if run.stop.is_set() and not cancelled:
            answer.status = STATUS_ERROR
            answer.error = (f"timeout: the goal ran past {self.node.params.act_wait_s():.0f} s (question_timeout_s "
                            f"+ navigation_timeout_s) and was stopped ({answer.error or 'no answer'})")
        elif cancelled and not answer.error.startswith("cancelled"):
            answer.status = STATUS_ERROR
            answer.error = "cancelled: the goal was cancelled" + (f" ({answer.error})" if answer.error else "")
        nav = dict(run.navigation)
        result = AskAndAct.Result(
            answer=self.node.to_msg(answer), cancelled=cancelled, navigated=bool(nav.get("accepted")),
            waypoint_id=str(nav.get("waypoint", ""))[:256], navigation_success=bool(nav.get("success")),
            navigation_error_code=int(nav.get("error_code", 0)) & 0xFF,
            navigation_message=str(nav.get("message", ""))[:2000])
        if nav.get("final_position") and nav.get("accepted"):
            x, y, z = (float(v) for v in nav["final_position"])
            result.final_pose = pose_to_msg(Pose(x, y, z, float(nav.get("final_yaw", 0.0)),
                                                 nav.get("frame_id") or "map"),
                                            self.node.get_clock().now().nanoseconds * 1e-9)
        return result

    # -- the worker side: the question, with the navigate tool --------------------------------
    def _act(self, run: _Run, goal, deadline: float) -> Answer:
        node = self.node
        planner = goal.planner or node.params.planner
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return node.no_slot(planner)
        as_of = node.question_time(goal.as_of)
        if as_of is None:
            from .node_clock import NO_CLOCK_YET
            return Answer(status=STATUS_ERROR, planner=planner, error=NO_CLOCK_YET)
        self._feedback(run, "planning", goal.question[:200])
        hooks = QuestionHooks(
            navigate=self._navigate(run) if node.navigator is not None else None,
            no_navigate="" if node.navigator is not None else NO_BRIDGE,
            progress=lambda stage, message, calls: self._feedback(run, stage, message, calls),
            cancelled=run.cancelled)
        answer = node.agent.ask(goal.question, as_of=as_of, planner=goal.planner, timeout_s=remaining, hooks=hooks)
        self._feedback(run, "answering", f"[{answer.status}] {answer.text or answer.error}"[:300], answer.tool_calls)
        return answer

    def _navigate(self, run: _Run):
        def navigate(waypoint: str, person: str) -> dict:
            run.navigation = {"waypoint": waypoint}
            self._feedback(run, "navigating", f"driving to {waypoint}" + (f", then looking for {person}" if person else ""))
            outcome = self.node.navigator(waypoint, person, cancelled=run.cancelled,
                                          feedback=lambda fb: self._nav_feedback(run, waypoint, fb))
            run.navigation = outcome
            return outcome
        return navigate

    def _nav_feedback(self, run: _Run, waypoint: str, fb) -> None:
        msg = AskAndAct.Feedback(stage="navigating", message=f"driving to {waypoint}: {fb.status}"[:300],
                                 tool_calls=run.tool_calls, navigating=True, waypoint_id=waypoint[:256],
                                 current_pose=fb.current_pose, distance_remaining=float(fb.distance_remaining),
                                 navigation_status=fb.status[:200])
        self._publish(run, msg)

    def _feedback(self, run: _Run, stage: str, message: str = "", tool_calls: int | None = None) -> None:
        if tool_calls is not None:
            run.tool_calls = tool_calls
        self._publish(run, AskAndAct.Feedback(stage=stage[:80], message=message[:300], tool_calls=run.tool_calls))

    def _publish(self, run: _Run, msg) -> None:
        try:
            run.handle.publish_feedback(msg)
        except Exception as exc:  # noqa: BLE001 - the goal ended meanwhile; feedback is best effort
            self.node.get_logger().debug(f"act feedback not sent: {exc}")
