"""Stand-ins for the robot's navigation servers, implementing the upstream interfaces:
Nav2's navigate_to_pose (nav2_msgs/NavigateToPose) and spot_ros2's navigate_to
(spot_msgs/NavigateTo) + graph_nav_get_localization_pose.  Run as a separate process.

Behaviour by goal: pose x == 666 / waypoint "wp_fail" -> failure; x == 999 / "wp_slow" -> runs
for 60 s (honours cancel); anything else succeeds after 0.5 s with feedback.
"""
import math
import os
import sys
import time

import rclpy
from nav2_msgs.action import NavigateToPose
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from spot_msgs.action import NavigateTo
from spot_msgs.srv import GraphNavGetLocalizationPose
from std_msgs.msg import String


class Standins(Node):
    def __init__(self):
        super().__init__("nav_standins")
        group = ReentrantCallbackGroup()
        self.events = self.create_publisher(String, "/standin/events", 50)
        ActionServer(self, NavigateToPose, "navigate_to_pose", self.nav2, callback_group=group,
                     goal_callback=lambda _g: GoalResponse.ACCEPT, cancel_callback=self.on_cancel)
        ActionServer(self, NavigateTo, "navigate_to", self.spot, callback_group=group,
                     goal_callback=lambda _g: GoalResponse.ACCEPT, cancel_callback=self.on_cancel)
        self.create_service(GraphNavGetLocalizationPose, "graph_nav_get_localization_pose", self.localize,
                            callback_group=group)
        self.at = (0.0, 0.0)

    def on_cancel(self, _goal):
        self.events.publish(String(data="cancel"))
        return CancelResponse.ACCEPT

    def _run(self, handle, seconds, feedback):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if handle.is_cancel_requested:
                handle.canceled()
                return False
            feedback()
            time.sleep(0.1)
        return True

    def nav2(self, handle):
        goal = handle.request.pose.pose.position
        result = NavigateToPose.Result()
        if goal.x == 666:
            handle.abort()
            result.error_code, result.error_msg = NavigateToPose.Result.UNKNOWN, "no path to the goal"
            return result

        def feedback():
            fb = NavigateToPose.Feedback()
            fb.current_pose = handle.request.pose
            fb.distance_remaining = 1.0
            handle.publish_feedback(fb)
        if self._run(handle, 60.0 if goal.x == 999 else 0.5, feedback):
            handle.succeed()
        return result

    def spot(self, handle):
        wp = handle.request.waypoint_id
        result = NavigateTo.Result()
        if wp == "wp_fail":
            handle.abort()
            result.success, result.message = False, "robot is not localized"
            return result
        if self._run(handle, 60.0 if wp == "wp_slow" else 0.5,
                     lambda: handle.publish_feedback(NavigateTo.Feedback(waypoint_id=wp))):
            handle.succeed()
            result.success, result.message = True, "arrived"
            self.at = (float(len(wp)), 2.0)
        return result

    def localize(self, _request, response):
        response.success = True
        response.pose.header.frame_id = "map"
        response.pose.pose.position.x, response.pose.pose.position.y = self.at
        response.pose.pose.orientation.w = math.cos(0.0)
        return response


def main():
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    rclpy.init(args=sys.argv)
    node = Standins()
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, rclpy.executors.ExternalShutdownException):
        pass


if __name__ == "__main__":
    main()
