"""Send one AskAndAct goal from a short-lived node (``embodied-memory ask --act``): feedback
as it comes, Ctrl-C cancels the goal (and with it the robot's drive) and waits for its result."""
from __future__ import annotations

import signal
import sys
import threading
import time
from typing import Callable, Optional

from embodied_memory_interfaces.action import AskAndAct
from rclpy.action import ActionClient

from .common import service_qos
from .service_client import ServiceCallError, short_lived_node, wait_until_discovered

CANCEL_RESULT_WAIT_S = 20.0   # after Ctrl-C: how long to wait for the cancelled goal's result
NAV_LINE_EVERY_S = 1.0        # navigation feedback comes at the bridge's rate: print one a second


def feedback_printer(out=sys.stdout) -> Callable:
    """A feedback callback printing one line per stage change (navigation at most once a second)."""
    last = {"line": "", "nav_at": 0.0}

    def show(fb) -> None:
        if fb.navigating:
            now = time.monotonic()
            if now - last["nav_at"] < NAV_LINE_EVERY_S:
                return
            last["nav_at"] = now
            p = fb.current_pose.pose.position
            line = (f"[navigating] {fb.waypoint_id}: {fb.distance_remaining:.2f} m to go, at "
                    f"({p.x:.2f}, {p.y:.2f}) {fb.navigation_status}")
        else:
            line = f"[{fb.stage}] " + (f"{fb.message} " if fb.message else "") + f"({fb.tool_calls} tool calls)"
            if line == last["line"]:
                return
        last["line"] = line
        print(line, file=out, flush=True)
    return show


def send_act_goal(action_name: str, goal, timeout_s: float, wait_s: float = 30.0,
                  on_feedback: Optional[Callable] = None, log=sys.stderr, namespace: str = ""):
    """The goal's (status, AskAndAct.Result, interrupted); ``interrupted``: Ctrl-C cancelled it.
    Raises ServiceCallError when there is no server, the goal is rejected or no result comes."""
    with short_lived_node("em_act", namespace) as (node, executor):
        client = ActionClient(node, AskAndAct, action_name, goal_service_qos_profile=service_qos(),
                              result_service_qos_profile=service_qos(), cancel_service_qos_profile=service_qos())
        wait_until_discovered(client.wait_for_server(timeout_sec=wait_s), executor, f"action {action_name}", wait_s)

        # Ctrl-C sets a flag the loop checks (a KeyboardInterrupt raised inside a callback the
        # executor runs could be swallowed there); a second Ctrl-C leaves at once
        ctrl_c = threading.Event()

        def on_sigint(_signum, _frame):
            signal.signal(signal.SIGINT, signal.default_int_handler)
            ctrl_c.set()
        previous = signal.signal(signal.SIGINT, on_sigint) if threading.current_thread() is threading.main_thread() \
            else None

        def spin_until(future, seconds: float, interruptible: bool = True) -> bool:
            end = time.monotonic() + seconds
            while not future.done() and time.monotonic() < end and not (interruptible and ctrl_c.is_set()):
                executor.spin_once(timeout_sec=0.05)
            return future.done()

        sent = client.send_goal_async(goal, feedback_callback=(lambda m: on_feedback(m.feedback))
                                      if on_feedback else None)
        result_future = None
        try:
            if not spin_until(sent, 30.0) and not ctrl_c.is_set():
                raise ServiceCallError(f"action {action_name} did not answer the goal within 30 s")
            if sent.done():
                handle = sent.result()
                if not handle.accepted:
                    raise ServiceCallError(f"action {action_name} rejected the goal")
                result_future = handle.get_result_async()
                if not spin_until(result_future, timeout_s) and not ctrl_c.is_set():
                    print(f"no result within {timeout_s:.0f} s: cancelling the goal", file=log, flush=True)
                    handle.cancel_goal_async()
                    if not spin_until(result_future, CANCEL_RESULT_WAIT_S):
                        raise ServiceCallError(f"action {action_name} gave no result within {timeout_s:.0f} s")
            if ctrl_c.is_set():
                print("interrupted: cancelling the goal (Ctrl-C again to leave at once)", file=log, flush=True)
                try:
                    if spin_until(sent, 10.0, interruptible=False) and sent.result().accepted:
                        handle = sent.result()
                        result_future = result_future or handle.get_result_async()
                        handle.cancel_goal_async()
                        spin_until(result_future, CANCEL_RESULT_WAIT_S, interruptible=False)
                except KeyboardInterrupt:
                    pass
                if result_future is None or not result_future.done():
                    raise ServiceCallError("interrupted; the goal's result did not come") from None
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        interrupted = ctrl_c.is_set()
        response = result_future.result()
        return response.status, response.result, interrupted
