"""The agent's navigate tool over ROS: sends NavigateToWaypoint goals to the bridge and waits
(safe inside a service callback of a multi-threaded executor: it waits on events)."""
from __future__ import annotations

import threading

from embodied_memory_interfaces.action import NavigateToWaypoint
from rclpy.action import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node


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

    def __call__(self, waypoint: str, person: str = "") -> dict:
        return self._send(NavigateToWaypoint.Goal(waypoint_id=waypoint, verify_person_id=person), waypoint)

    def to_pose(self, x: float, y: float, yaw: float, frame_id: str = "map") -> dict:
        """Drive to a map-frame pose (the explorer's path points and turns)."""
        from ..types import Pose
        from .conversions import pose_to_msg
        goal = NavigateToWaypoint.Goal(pose=pose_to_msg(Pose(x, y, 0.0, yaw, frame_id), 0.0))
        return self._send(goal, f"({x:.2f}, {y:.2f})")

    def _send(self, goal, waypoint: str) -> dict:
        if not self._client.wait_for_server(timeout_sec=5.0):
            return {"success": False, "message": f"navigation bridge {self.action_name} is not running"}
        handle = self._wait(self._client.send_goal_async(goal), 10.0)
        if not handle.accepted:
            return {"success": False, "message": "the bridge rejected the goal"}
        result = self._wait(handle.get_result_async(), self.timeout_s).result
        p = result.final_pose.pose.position
        return {"success": result.success, "error_code": int(result.error_code), "message": result.message,
                "waypoint": waypoint, "final_position": [round(p.x, 2), round(p.y, 2), round(p.z, 2)],
                "elapsed_s": round(result.elapsed_s, 1)}
