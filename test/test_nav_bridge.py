"""Integration: the navigation bridge against stand-ins implementing the upstream Nav2 and
spot_ros2 interfaces, each in its own process, over DDS: success, failure, cancel, timeout,
preemption, unknown waypoint, backend unavailable."""
import subprocess
import sys
import time
from pathlib import Path

import pytest
from embodied_memory_interfaces.action import NavigateToWaypoint
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from rosutil import LaunchedStack

pytestmark = pytest.mark.integration
R = NavigateToWaypoint.Result
HERE = Path(__file__).parent


@pytest.fixture
def standins():
    proc = subprocess.Popen([sys.executable, str(HERE / "nav_standins.py")])
    yield proc
    proc.terminate()
    proc.wait(timeout=20)


def bridge(tmp_path, backend, extra=""):
    waypoints = tmp_path / "waypoints.yaml"
    waypoints.write_text("waypoints:\n  wp_kitchen: {x: 3.0, y: 4.0, yaw: 0.0, names: [kitchen]}\n"
                         "  wp_far: {x: 500.0, y: 0.0}\n")
    stack = tmp_path / f"{backend}.yaml"
    stack.write_text(f"""nodes:
  nav_bridge:
    executable: nav_bridge_node
    parameters: {{backend: {backend}, waypoints_file: "{waypoints}", server_wait_s: 3.0, sim_speed: 5.0{extra}}}
""")
    return LaunchedStack(stack, tmp_path / f"{backend}.log")


class Client:
    count = 0

    def __init__(self, context):
        Client.count += 1
        self.node = Node(f"nav_test_client_{Client.count}", context=context)
        self.client = ActionClient(self.node, NavigateToWaypoint, "/navigate_to_waypoint")
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        assert self.client.wait_for_server(timeout_sec=30)

    def spin_until(self, future, timeout=30.0):
        end = time.monotonic() + timeout
        while not future.done() and time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.05)
        assert future.done(), "no answer from the bridge"
        return future.result()

    def send(self, **fields):
        goal = NavigateToWaypoint.Goal(**{k: v for k, v in fields.items() if k != "x"})
        if "x" in fields:
            goal.pose.header.frame_id = "map"
            goal.pose.pose.position.x = float(fields["x"])
            goal.pose.pose.orientation.w = 1.0
        # a server just discovered may not have matched this client's request topic yet (a known
        # DDS race after wait_for_server): a goal request lost that way is sent again, with its own
        # feedback list (a late answer to the first would preempt it, not mix into its feedback)
        for attempt in range(3):
            feedback = []
            sent = self.client.send_goal_async(goal, feedback_callback=feedback.append)
            try:
                handle = self.spin_until(sent, timeout=10.0)
                break
            except AssertionError:
                if attempt == 2:
                    raise
        assert handle.accepted
        return handle, feedback

    def result(self, handle, timeout=30.0):
        return self.spin_until(handle.get_result_async(), timeout).result


def test_nav2_backend(tmp_path, standins, ros_context):
    stack = bridge(tmp_path, "nav2")
    client = Client(ros_context)
    try:
        handle, feedback = client.send(waypoint_id="kitchen")
        res = client.result(handle)
        assert res.success and res.error_code == R.ERROR_NONE and feedback
        assert (res.final_pose.pose.position.x, res.final_pose.pose.position.y) == (3.0, 4.0)
        res = client.result(client.send(x=666)[0])
        assert not res.success and res.error_code == R.ERROR_UNREACHABLE and "no path" in res.message
        res = client.result(client.send(waypoint_id="attic")[0])
        assert res.error_code == R.ERROR_UNKNOWN_WAYPOINT and "wp_kitchen" in res.message
        res = client.result(client.send(x=999, timeout_s=1.5)[0])
        assert res.error_code == R.ERROR_TIMEOUT and res.elapsed_s < 5
        slow, _ = client.send(x=999)
        client.spin_until(slow.cancel_goal_async())
        res = client.result(slow)
        assert res.error_code == R.ERROR_CANCELED
        slow, _ = client.send(x=999)
        time.sleep(0.5)
        fresh, _ = client.send(waypoint_id="wp_kitchen")
        assert client.result(slow).error_code == R.ERROR_PREEMPTED
        assert client.result(fresh).success
    finally:
        client.node.destroy_node()
        stack.stop()


def test_graphnav_backend_and_unavailable_server(tmp_path, standins, ros_context):
    stack = bridge(tmp_path, "graphnav")
    client = Client(ros_context)
    try:
        handle, feedback = client.send(waypoint_id="kitchen")        # a name -> the GraphNav id
        res = client.result(handle)
        assert res.success and res.final_pose.pose.position.x == float(len("wp_kitchen"))
        assert any("graphnav at wp_kitchen" in f.feedback.status for f in feedback)
        res = client.result(client.send(waypoint_id="wp_fail")[0])
        assert res.error_code == R.ERROR_UNREACHABLE and "not localized" in res.message
        slow, _ = client.send(waypoint_id="wp_slow")
        time.sleep(0.5)
        client.spin_until(slow.cancel_goal_async())
        assert client.result(slow).error_code == R.ERROR_CANCELED
    finally:
        client.node.destroy_node()
        stack.stop()
    stack = bridge(tmp_path, "nav2", extra=", nav2_action: no_such_server")
    client = Client(ros_context)
    try:
        res = client.result(client.send(waypoint_id="kitchen")[0])
        assert res.error_code == R.ERROR_BACKEND_UNAVAILABLE and "no_such_server" in res.message
    finally:
        client.node.destroy_node()
        stack.stop()


def test_sim_backend_drives_and_rejects_unreachable(tmp_path, ros_context):
    stack = bridge(tmp_path, "sim")
    client = Client(ros_context)
    try:
        handle, feedback = client.send(waypoint_id="kitchen")
        res = client.result(handle)
        assert res.success and abs(res.final_pose.pose.position.x - 3.0) < 0.3
        assert len(feedback) > 3 and feedback[-1].feedback.distance_remaining < feedback[0].feedback.distance_remaining
        res = client.result(client.send(waypoint_id="wp_far")[0])
        assert res.error_code == R.ERROR_UNREACHABLE
    finally:
        client.node.destroy_node()
        stack.stop()


def test_verify_person_on_arrival(tmp_path, ros_context):
    """HUMEMBR's check: after arrival the bridge waits for a fresh sighting in the memory."""
    from embodied_memory_interfaces.msg import Observation as ObservationMsg
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from embodied_memory.nodes.conversions import observation_to_msg
    from embodied_memory.types import Observation, PersonSighting, Pose
    waypoints = tmp_path / "waypoints.yaml"
    waypoints.write_text("waypoints:\n  wp_kitchen: {x: 3.0, y: 4.0, names: [kitchen]}\n")
    stack_file = tmp_path / "stack.yaml"
    stack_file.write_text(f"""nodes:
  memory:
    executable: memory_node
    parameters: {{data_dir: "{tmp_path / 'store'}", text_embedder: hash}}
  nav_bridge:
    executable: nav_bridge_node
    parameters: {{backend: sim, waypoints_file: "{waypoints}", sim_speed: 10.0, verify_person_timeout_s: 6.0}}
""")
    stack = LaunchedStack(stack_file, tmp_path / "launch.log")
    client = Client(ros_context)
    pub = client.node.create_publisher(ObservationMsg, "/memory/observations",
                                       QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
    try:
        res = client.result(client.send(waypoint_id="kitchen", verify_person_id="person_0001")[0])
        assert not res.success and res.error_code == R.ERROR_PERSON_NOT_FOUND and "arrived" in res.message
        handle, _ = client.send(waypoint_id="kitchen", verify_person_id="person_0001")
        time.sleep(1.5)  # the robot has arrived; the camera sees the person
        seen = Observation("look-1", time.time(), "live", Pose(3.0, 4.0), description="a person at the kitchen",
                           people=[PersonSighting((1, 1, 9, 9), "person_0001", 0.9)])
        pub.publish(observation_to_msg(seen))
        res = client.result(handle)
        assert res.success and res.person_verified
    finally:
        client.node.destroy_node()
        stack.stop()
