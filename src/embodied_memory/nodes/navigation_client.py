"""The agent's navigate tool over ROS: sends NavigateToWaypoint goals to the bridge and waits
(safe in a worker thread or a callback of a multi-threaded executor: it waits on events).

A goal can be cancelled while it runs (``cancelled()`` turns true: the bridge goal is
cancelled and its result awaited, at most ``CANCEL_WAIT_S``), and the bridge's feedback can be
forwarded (``feedback(msg)``, the NavigateToWaypoint feedback).  A goal that outlives
``timeout_s`` is cancelled on the bridge too: the base never keeps driving for a caller that
gave up.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Optional

from embodied_memory_interfaces.action import NavigateToWaypoint
from rclpy.action import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from .conversions import pose_from_msg

CANCEL_WAIT_S = 10.0          # after a cancel: how long to wait for the bridge's final result
POLL_S = 0.05                 # how often a running goal checks ``cancelled``


class NavigateClient:
    def __init__(self, node: Node, action_name: str, timeout_s: float = 300.0):
        self._client = ActionClient(node, NavigateToWaypoint, action_name, callback_group=ReentrantCallbackGroup())
        self.action_name, self.timeout_s = action_name, timeout_s

    def _wait(self, future, timeout: float):
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout):
            raise TimeoutError(f"{self.action_name} did not answer in {timeout:.0f} s")
        return future.result()

    def __call__(self, waypoint: str, person: str = "", cancelled: Optional[Callable[[], bool]] = None,
                 feedback: Optional[Callable] = None) -> dict:
        return self._send(NavigateToWaypoint.Goal(waypoint_id=waypoint, verify_person_id=person), waypoint,
                          cancelled, feedback)

    def to_pose(self, x: float, y: float, yaw: float, frame_id: str = "map",
                cancelled: Optional[Callable[[], bool]] = None) -> dict:
        """Drive to a map-frame pose (the explorer's path points and turns); ``cancelled()``
        true cancels the bridge goal (an Explore goal cancelled mid-drive stops the base)."""
        from ..types import Pose
        from .conversions import pose_to_msg
        goal = NavigateToWaypoint.Goal(pose=pose_to_msg(Pose(x, y, 0.0, yaw, frame_id), 0.0))
        return self._send(goal, f"({x:.2f}, {y:.2f})", cancelled)

    def _send(self, goal, waypoint: str, cancelled: Optional[Callable[[], bool]] = None,
              feedback: Optional[Callable] = None) -> dict:
        cancelled = cancelled or (lambda: False)
        if not self._client.wait_for_server(timeout_sec=5.0):
            return {"success": False, "message": f"navigation bridge {self.action_name} is not running"}
        if cancelled():
            return {"success": False, "cancelled": True, "waypoint": waypoint,
                    "message": "cancelled before the goal was sent"}
        on_feedback = (lambda msg: feedback(msg.feedback)) if feedback is not None else None
        handle = self._wait(self._client.send_goal_async(goal, feedback_callback=on_feedback), 10.0)
        if not handle.accepted:
            return {"success": False, "message": "the bridge rejected the goal"}
        outcome = {"accepted": True, "waypoint": waypoint}
        result_future = handle.get_result_async()
        done = threading.Event()
        result_future.add_done_callback(lambda _f: done.set())
        deadline = time.monotonic() + self.timeout_s
        stop_reason = ""
        while not done.wait(POLL_S):
            if stop_reason:
                if time.monotonic() > deadline:
                    return {**outcome, "success": False, "cancelled": stop_reason == "cancelled",
                            "message": f"{stop_reason}; the bridge did not confirm the cancel in {CANCEL_WAIT_S:.0f} s"}
                continue
            if cancelled():
                stop_reason = "cancelled"
            elif time.monotonic() > deadline:
                stop_reason = f"no result in {self.timeout_s:.0f} s: cancelled the goal"
            if stop_reason:
                handle.cancel_goal_async()
                deadline = time.monotonic() + CANCEL_WAIT_S
        result = result_future.result().result
        message = (result.message if not stop_reason or result.success or stop_reason == "cancelled" else
                   f"{stop_reason} (bridge: {result.message})")
        outcome.update({"success": result.success, "error_code": int(result.error_code), "message": message,
                        "cancelled": stop_reason == "cancelled" and not result.success,
                        "elapsed_s": round(result.elapsed_s, 1)})
        if result.final_pose.header.frame_id:   # the bridge knows where the base ended (not after a cancel)
            final = pose_from_msg(result.final_pose)
            outcome.update({"final_position": [round(final.x, 2), round(final.y, 2), round(final.z, 2)],
                            "final_yaw": round(final.yaw, 3), "frame_id": final.frame_id})
        return outcome
