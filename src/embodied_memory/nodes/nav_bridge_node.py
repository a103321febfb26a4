"""nav_bridge_node: serves /navigate_to_waypoint (embodied_memory_interfaces/NavigateToWaypoint)
on one of three backends:

- ``graphnav``: spot_ros2's ``navigate_to`` action (spot_msgs/NavigateTo, waypoint ids); the
  final pose from ``graph_nav_get_localization_pose``.  It never calls ``list_graph``
  (that clears and re-uploads the robot's graph).
- ``nav2``: ``navigate_to_pose`` (nav2_msgs/NavigateToPose) with a PoseStamped from the
  waypoint table (``waypoints_file``) or the goal's pose.
- ``sim``: a kinematic simulated base, so the whole stack runs without a robot.

Every backend gives feedback and honours cancellation, a timeout (goal ``timeout_s`` or
``default_timeout_s``) and preemption (a new goal aborts the running one).

Time: stamps (feedback, final pose, sim odometry, Nav2 goals), the goal timeout and the
"seen after arrival" check of ``verify_person_id`` are robot time, the node clock (/clock under
``use_sim_time``; see nodes/node_clock.py); waits on backend servers and services
(``server_wait_s``, the localisation call) and the simulated base's stepping are wall time.

/diagnostics: ``count.goals_received | goals_rejected | goals_succeeded | goals_failed |
goals_cancelled`` (failures also by reason: ``count.goals_failed.timeout`` ...) and the gauge
``goals_active``.
"""
from __future__ import annotations

import threading
import math
import time

from embodied_memory_interfaces.action import NavigateToWaypoint
from rclpy.action import ActionClient, ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from ..nav.sim_base import SimBase, SimBaseParams
from ..nav.waypoints import WaypointTable
from ..params import NavBridgeNodeParams
from ..types import Pose
from .common import node_options, node_params, run_node
from .conversions import pose_from_msg, pose_to_msg
from .health import NodeHealth
from .node_clock import Deadline, RobotDeadline, WallDeadline, now_s, steady_clock, waiting_for_clock

R = NavigateToWaypoint.Result
FAILURE_REASONS = {getattr(R, n): n[len("ERROR_"):].lower() for n in dir(R) if n.startswith("ERROR_")}


class _Abort(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


class NavBridgeNode(Node):
    def __init__(self, **kwargs):
        super().__init__("nav_bridge", **node_options(kwargs))
        p = self.params = node_params(self, NavBridgeNodeParams)
        self.waypoints = WaypointTable.from_yaml(p.waypoints_file) if p.waypoints_file else WaypointTable()
        self.sim = SimBase(SimBaseParams(speed=p.sim_speed, start_x=p.sim_start_x, start_y=p.sim_start_y)) \
            if p.backend == "sim" else None
        self._group = ReentrantCallbackGroup()
        self._lock = threading.Lock()
        self._active: ServerGoalHandle | None = None
        self._preempted: set = set()
        self._running = 0                    # goals executing (briefly two while one preempts another)
        self.health = NodeHealth(self)
        self.health.gauges["goals_active"] = lambda: self._running
        self._nav2 = self._graphnav = self._localize = None
        if p.backend == "nav2":
            from nav2_msgs.action import NavigateToPose
            self._nav2 = ActionClient(self, NavigateToPose, p.nav2_action, callback_group=self._group)
        elif p.backend == "graphnav":
            from spot_msgs.action import NavigateTo
            from spot_msgs.srv import GraphNavGetLocalizationPose
            self._graphnav = ActionClient(self, NavigateTo, p.graphnav_action, callback_group=self._group)
            self._localize = self.create_client(GraphNavGetLocalizationPose, p.graphnav_localization_service,
                                                callback_group=self._group)
        if self.sim is not None:   # a simulated base reports its pose like a robot's odometry
            from nav_msgs.msg import Odometry
            self._odom_pub = self.create_publisher(Odometry, p.sim_odom_topic, 10)
            # the simulated base moves in wall time: its odometry keeps coming when /clock stops
            self.create_timer(1.0 / p.sim_rate_hz, self.health.guard(self._publish_sim_odom, "sim odometry"),
                              callback_group=self._group, clock=steady_clock())
        self._server = ActionServer(self, NavigateToWaypoint, p.action_name, execute_callback=self._execute,
                                    goal_callback=self._on_goal,
                                    cancel_callback=lambda _g: CancelResponse.ACCEPT,
                                    handle_accepted_callback=self._accepted, callback_group=self._group)
        self.get_logger().info(f"navigation bridge on {p.action_name}: backend {p.backend}, "
                               f"{len(self.waypoints)} waypoints")

    def _publish_sim_odom(self) -> None:
        from nav_msgs.msg import Odometry
        if waiting_for_clock(self):   # no odometry stamped 0 before the first /clock: a counted, logged drop
            self.health.drop("use_sim_time set, no /clock yet", "simulated odometry")
            return
        msg = Odometry(child_frame_id="base_link")
        stamped = pose_to_msg(self.sim.pose, now_s(self))
        msg.header = stamped.header
        msg.header.frame_id = self.params.map_frame
        msg.pose.pose = stamped.pose
        self._odom_pub.publish(msg)

    # -- goal bookkeeping ----------------------------------------------------------------------
    def _on_goal(self, goal) -> GoalResponse:
        """Reject a goal no base could follow (NaN/inf pose or timeout, absurd ids) at once."""
        p, q = goal.pose.pose.position, goal.pose.pose.orientation
        numbers = (p.x, p.y, p.z, q.x, q.y, q.z, q.w, goal.timeout_s)
        problem = ("pose or timeout has NaN/inf" if not all(math.isfinite(v) for v in numbers) else
                   "timeout_s is negative" if goal.timeout_s < 0 else
                   "waypoint_id or verify_person_id is longer than 256 characters"
                   if max(len(goal.waypoint_id), len(goal.verify_person_id)) > 256 else "")
        self.health.count("goals_received")
        if problem:
            self.health.count("goals_rejected")
            self.get_logger().warning(f"rejected a navigation goal: {problem}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _accepted(self, goal_handle: ServerGoalHandle) -> None:
        with self._lock:
            if self._active is not None and self._active.is_active:
                self._preempted.add(id(self._active))   # its execute loop aborts with PREEMPTED
            self._active = goal_handle
        goal_handle.execute()

    def _check(self, goal_handle: ServerGoalHandle, deadline: Deadline | None) -> None:
        if goal_handle.is_cancel_requested:
            raise _Abort(R.ERROR_CANCELED, "canceled")
        if id(goal_handle) in self._preempted:
            raise _Abort(R.ERROR_PREEMPTED, "preempted by a newer goal")
        if deadline is not None and deadline.expired():
            raise _Abort(R.ERROR_TIMEOUT, "timed out")

    def _execute(self, goal_handle: ServerGoalHandle):
        goal = goal_handle.request
        # the goal's timeout is robot time: a simulator at half speed gets twice the wall time
        deadline = RobotDeadline(self, goal.timeout_s or self.params.default_timeout_s)
        result = R()
        with self._lock:
            self._running += 1
        try:
            if self.params.backend == "graphnav":
                final = self._run_graphnav(goal_handle, goal, deadline)
            else:
                target = self._target(goal)
                final = (self._run_sim if self.params.backend == "sim" else self._run_nav2)(goal_handle, target, deadline)
            result.success, result.error_code, result.message = True, R.ERROR_NONE, "arrived"
            if final is not None:
                result.final_pose = pose_to_msg(final, now_s(self))
            if goal.verify_person_id:
                result.person_verified = self._verify_person(goal_handle, goal.verify_person_id, deadline)
                if not result.person_verified:
                    result.success, result.error_code = False, R.ERROR_PERSON_NOT_FOUND
                    result.message = (f"arrived, but {goal.verify_person_id} was not seen within "
                                      f"{self.params.verify_person_timeout_s:.0f} s")
            if result.success:
                goal_handle.succeed()
            else:
                goal_handle.abort()
        except _Abort as exc:
            result.success, result.error_code, result.message = False, exc.code, str(exc)
            if exc.code == R.ERROR_CANCELED:
                goal_handle.canceled()
            else:
                goal_handle.abort()
            self.get_logger().warning(f"goal {goal.waypoint_id[:80] or 'pose'}: {exc}")
        except Exception as exc:  # noqa: BLE001 - no goal may stop the bridge: it fails, the bridge serves on
            result.success, result.error_code = False, R.ERROR_BACKEND_UNAVAILABLE
            result.message = f"{type(exc).__name__}: {exc}"[:500]
            goal_handle.abort()
            self.get_logger().error(f"goal {goal.waypoint_id[:80] or 'pose'} failed: {result.message}")
        finally:
            self._preempted.discard(id(goal_handle))
            with self._lock:
                self._running -= 1
        self._count_outcome(result)
        result.elapsed_s = deadline.elapsed()
        return result

    def _count_outcome(self, result) -> None:
        if result.success:
            self.health.count("goals_succeeded")
        elif result.error_code == R.ERROR_CANCELED:
            self.health.count("goals_cancelled")
        else:
            self.health.count("goals_failed")
            self.health.count(f"goals_failed.{FAILURE_REASONS.get(result.error_code, 'other')}")

    def _verify_person(self, goal_handle, person: str, deadline: float) -> bool:
        """HUMEMBR's check on arrival: the camera keeps streaming through perception into the
        memory; wait for a sighting of ``person`` made after arrival.  Sightings carry their
        image's stamp, so "after arrival" and the wait are robot time (the node clock); the goal
        timeout does not cut the check short."""
        from .memory_client import MemoryServiceError, RosMemoryClient
        if not hasattr(self, "_memory"):
            self._memory = RosMemoryClient(self, self.params.memory_query_service, 5.0)
        arrived = now_s(self)
        window = RobotDeadline(self, self.params.verify_person_timeout_s)
        while not window.expired():
            self._check(goal_handle, None)
            try:
                seen = self._memory.call("person_observations", {"person": person, "t_start": arrived - 1.0})
            except MemoryServiceError as exc:
                if "unknown person" not in str(exc):
                    self.get_logger().warning(f"person check: {exc}")
                seen = []
            if seen:
                return True
            time.sleep(0.5)          # a thread wait between polls (wall)
        return False

    def _target(self, goal) -> Pose:
        if goal.waypoint_id:
            wp = self.waypoints.resolve(goal.waypoint_id)
            if wp is None:
                raise _Abort(R.ERROR_UNKNOWN_WAYPOINT, f"unknown waypoint {goal.waypoint_id!r} "
                             f"(known: {', '.join(self.waypoints.ids()[:20]) or 'none: set waypoints_file'})")
            return wp.pose
        pose = pose_from_msg(goal.pose)
        if not pose.is_finite():
            raise _Abort(R.ERROR_UNREACHABLE, "goal pose has NaN/inf")
        return pose

    def _feedback(self, goal_handle, pose: Pose | None, remaining: float, status: str) -> None:
        fb = NavigateToWaypoint.Feedback(distance_remaining=float(remaining), status=status)
        if pose is not None:
            fb.current_pose = pose_to_msg(pose, now_s(self))
        goal_handle.publish_feedback(fb)

    # -- backends ----------------------------------------------------------------------------
    def _run_sim(self, goal_handle, target: Pose, deadline: Deadline) -> Pose:
        if not self.sim.reachable(target):
            raise _Abort(R.ERROR_UNREACHABLE, f"({target.x:.1f}, {target.y:.1f}) is outside the simulated map")
        period = 1.0 / self.params.sim_rate_hz
        while True:
            self._check(goal_handle, deadline)
            remaining = self.sim.step(target, period)
            self._feedback(goal_handle, self.sim.pose, remaining, "driving")
            if remaining <= self.params.arrive_tolerance_m:
                return self.sim.pose
            time.sleep(period)       # the simulated base steps in wall time

    def _wait(self, future, goal_handle, deadline: Deadline, downstream=None):
        """Wait for a future while honouring cancel / preemption / timeout (cancelling downstream)."""
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        while not done.wait(0.05):
            try:
                self._check(goal_handle, deadline)
            except _Abort:
                if downstream is not None:
                    downstream.cancel_goal_async()
                raise
        return future.result()

    def _send(self, client, goal_msg, goal_handle, deadline, feedback):
        if not client.wait_for_server(timeout_sec=self.params.server_wait_s):
            raise _Abort(R.ERROR_BACKEND_UNAVAILABLE,
                         f"{self.params.backend} action server {client._action_name} is not available")  # noqa: SLF001
        sent = self._wait(client.send_goal_async(goal_msg, feedback_callback=feedback), goal_handle, deadline)
        if not sent.accepted:
            raise _Abort(R.ERROR_UNREACHABLE, f"the {self.params.backend} server rejected the goal")
        return sent, self._wait(sent.get_result_async(), goal_handle, deadline, downstream=sent)

    def _run_nav2(self, goal_handle, target: Pose, deadline: Deadline) -> Pose | None:
        from action_msgs.msg import GoalStatus
        from nav2_msgs.action import NavigateToPose
        msg = NavigateToPose.Goal(pose=pose_to_msg(target, now_s(self)))
        msg.pose.header.frame_id = self.params.map_frame
        last = {}

        def on_feedback(fb):
            last["pose"] = pose_from_msg(fb.feedback.current_pose)
            self._feedback(goal_handle, last["pose"], fb.feedback.distance_remaining, "nav2")
        _sent, response = self._send(self._nav2, msg, goal_handle, deadline, on_feedback)
        if response.status != GoalStatus.STATUS_SUCCEEDED or response.result.error_code != 0:
            raise _Abort(R.ERROR_UNREACHABLE, f"nav2 failed (status {response.status}, error "
                         f"{response.result.error_code}: {response.result.error_msg or 'no message'})")
        return last.get("pose")

    def _run_graphnav(self, goal_handle, goal, deadline: Deadline) -> Pose | None:
        from spot_msgs.action import NavigateTo
        from spot_msgs.srv import GraphNavGetLocalizationPose
        waypoint = goal.waypoint_id
        if not waypoint:
            nearest = self.waypoints.nearest(*pose_from_msg(goal.pose).as_list()[:2])
            if nearest is None:
                raise _Abort(R.ERROR_UNKNOWN_WAYPOINT, "graphnav needs a waypoint id (or a waypoints_file to map poses)")
            waypoint = nearest.waypoint_id
        elif len(self.waypoints) and self.waypoints.resolve(waypoint) is not None:
            waypoint = self.waypoints.resolve(waypoint).waypoint_id  # names ("kitchen") -> GraphNav ids
        _sent, response = self._send(self._graphnav, NavigateTo.Goal(waypoint_id=waypoint), goal_handle, deadline,
                                     lambda fb: self._feedback(goal_handle, None, 0.0,
                                                               f"graphnav at {fb.feedback.waypoint_id}"))
        if not response.result.success:
            raise _Abort(R.ERROR_UNREACHABLE, f"graphnav failed: {response.result.message}")
        if self._localize.wait_for_service(timeout_sec=1.0):
            loc = self._wait(self._localize.call_async(GraphNavGetLocalizationPose.Request()), goal_handle,
                             WallDeadline(5.0))      # a service call: wall time
            if loc.success:
                pose = pose_from_msg(loc.pose)
                self.waypoints.learn(waypoint, pose)
                return pose
        return None


def main() -> None:
    run_node(NavBridgeNode, threads=4)


if __name__ == "__main__":
    main()
