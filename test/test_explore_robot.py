"""The explorer on a robot: frames assembled from depth / camera info / colour / pose topics
(real DDS in-process), motion through a navigation client, and the VLM target detector's
protocol (scripted OpenAI-compatible server)."""
import json
import math
import threading
import time

import cv2
import numpy as np
import pytest
from nav_msgs.msg import Odometry
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, CompressedImage, Image

from embodied_memory.explore.explorer import Frame
from embodied_memory.explore.occupancy import OCCUPIED, CameraModel, GridParams, OccupancyGrid
from embodied_memory.llm.chat_client import ChatClient, LLMConfig
from embodied_memory.nodes.robot_exploration_env import RosExplorationEnv, SensorTimeout
from embodied_memory.params import ExploreNodeParams
from embodied_memory.perception.target_detector import VlmTargetDetector
from embodied_memory.types import Pose

from scripted_llm import ScriptedLLM, content

W, H = 160, 120


class FakeNavigate:
    """Records the poses the explorer asks for (the bridge itself is tested in test_nav_bridge)."""

    def __init__(self, odom_pub):
        self.goals, self.odom_pub = [], odom_pub

    def to_pose(self, x, y, yaw, frame_id="map", cancelled=None):
        self.goals.append((x, y, yaw))
        self.odom_pub(x, y, yaw)
        return {"success": True, "final_position": [x, y, 0.0]}


@pytest.fixture
def robot(ros_context):
    params = ExploreNodeParams(environment="robot", llm_base_url="http://127.0.0.1:9/v1", sensor_timeout_s=1.5)
    node = Node("explore_env", context=ros_context)
    sensors = Node("fake_sensors", context=ros_context)
    depth_pub = sensors.create_publisher(Image, params.depth_topic, qos_profile_sensor_data)
    info_pub = sensors.create_publisher(CameraInfo, params.camera_info_topic, qos_profile_sensor_data)
    image_pub = sensors.create_publisher(CompressedImage, params.image_topic, qos_profile_sensor_data)
    odom_pub = sensors.create_publisher(Odometry, params.pose_topic, 10)
    pose = {"x": 1.0, "y": 2.0, "yaw": 0.0}

    def publish_odom(x, y, yaw):
        pose.update(x=x, y=y, yaw=yaw)

    env = RosExplorationEnv(node, params, FakeNavigate(publish_odom))
    streaming = threading.Event()

    def tick():
        if not streaming.is_set():
            return
        info = CameraInfo(width=W, height=H)
        info.k = [100.0, 0.0, (W - 1) / 2, 0.0, 100.0, (H - 1) / 2, 0.0, 0.0, 1.0]
        info_pub.publish(info)
        odom = Odometry()
        odom.pose.pose.position.x, odom.pose.pose.position.y = pose["x"], pose["y"]
        odom.pose.pose.orientation.z, odom.pose.pose.orientation.w = math.sin(pose["yaw"] / 2), math.cos(pose["yaw"] / 2)
        odom_pub.publish(odom)
        ok, jpeg = cv2.imencode(".jpg", np.full((H, W, 3), 90, np.uint8))
        image_pub.publish(CompressedImage(format="jpeg", data=jpeg.tobytes()))
        depth = np.full((H, W), 2500, np.uint16)              # a wall 2.5 m ahead, in millimetres
        msg = Image(height=H, width=W, encoding="16UC1", step=2 * W, data=depth.tobytes())
        msg.header.stamp = node.get_clock().now().to_msg()
        depth_pub.publish(msg)
    sensors.create_timer(0.05, tick)
    executor = MultiThreadedExecutor(num_threads=2, context=ros_context)
    executor.add_node(node)
    executor.add_node(sensors)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    yield env, streaming, params
    executor.shutdown()
    node.destroy_node()
    sensors.destroy_node()


def test_frames_come_from_the_topics_and_motion_from_the_bridge(robot):
    env, streaming, params = robot
    with pytest.raises(SensorTimeout, match=params.depth_topic):
        env.observe()                                   # nothing published yet: a clear error
    streaming.set()
    frame = env.observe()
    assert frame.depth.shape == (H, W) and frame.depth[0, 0] == pytest.approx(2.5)
    assert frame.image.shape == (H, W, 3) and env.camera.fx == 100.0
    assert (frame.pose.x, frame.pose.y, frame.pose.z) == (1.0, 2.0, params.camera_height_m)
    grid = OccupancyGrid(GridParams(resolution=0.1, size_m=20, origin_x=-10, origin_y=-10))
    grid.integrate_depth(frame.depth, frame.pose.x, frame.pose.y, frame.pose.z, frame.pose.yaw, env.camera)
    rows, cols = np.nonzero(grid.values() == OCCUPIED)
    xs, _ = grid.to_world(rows, cols)
    assert len(xs) > 10 and np.all(np.abs(xs - 3.5) < 0.15)     # the wall 2.5 m in front of x = 1
    driven = env.move_along([(2.0, 2.0), (2.0, 3.0)])
    time.sleep(0.2)
    assert driven == pytest.approx(2.0, abs=0.05)
    env.turn_to(math.pi / 2)
    assert env.navigate.goals[-1] == pytest.approx((2.0, 3.0, math.pi / 2))


def _frame():
    depth = np.full((H, W), 3.0, np.float32)
    return Frame(np.zeros((H, W, 3), np.uint8), depth, Pose(0.0, 0.0, 1.0, math.pi / 2), time.time())


def test_a_cancelled_goal_stops_the_drive_in_progress(robot):
    """The explore node sets env.cancelled per goal: a drive in progress sees it (the bridge goal
    is cancelled by NavigateClient, tested in test_ask_and_act), not only the next step."""
    env, _streaming, _params = robot
    seen = []

    class BlockingNavigate:
        def to_pose(self, x, y, yaw, frame_id="map", cancelled=None):
            while not cancelled():          # the bridge drives until the goal is cancelled
                time.sleep(0.01)
            seen.append((x, y))
            return {"success": False, "message": "cancelled"}
    cancel = threading.Event()
    env.navigate, env.cancelled = BlockingNavigate(), cancel.is_set
    errors = []
    driver = threading.Thread(target=lambda: errors.append(pytest.raises(RuntimeError, env._go, 3.0, 4.0, 0.0)))
    driver.start()
    time.sleep(0.3)
    assert driver.is_alive() and not seen        # still driving
    cancel.set()
    driver.join(5)
    assert not driver.is_alive() and seen == [(3.0, 4.0)] and "cancelled" in str(errors[0].value)


def test_vlm_target_detector_places_the_pointed_pixel_through_depth():
    camera = CameraModel(100.0, 100.0, (W - 1) / 2, (H - 1) / 2, W, H)
    with ScriptedLLM([content('{"visible": true, "u": 79.5, "v": 59.5}'), content('{"visible": false}'),
                      content("I think I see it!")]) as llm:
        detector = VlmTargetDetector(ChatClient(LLMConfig(base_url=llm.base_url, model="m")), camera)
        spot = detector.detect(_frame(), "first aid kit")
        assert spot == pytest.approx((0.0, 3.0), abs=0.05)      # 3 m ahead of a robot facing +y
        assert detector.detect(_frame(), "first aid kit") is None
        assert detector.detect(_frame(), "first aid kit") is None  # malformed: not in view, logged
        assert "first aid kit" in llm.requests[0]["messages"][0]["content"][0]["text"]
    down = VlmTargetDetector(ChatClient(LLMConfig(base_url="http://127.0.0.1:9/v1", model="m")), camera)
    assert down.detect(_frame(), "first aid kit") is None


@pytest.mark.integration
def test_explore_node_drives_the_robot_through_the_navigation_bridge(tmp_path, ros_context):
    """environment: robot, in the loop with the real bridge (sim backend, publishing /odom) and a
    simulated RGB-D camera node; the VLM is a scripted endpoint that never sees the target, so
    the node explores until its step limit and reports it."""
    from embodied_memory_interfaces.action import Explore
    from nav_msgs.msg import OccupancyGrid
    from rclpy.action import ActionClient
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    from rosutil import LaunchedStack, spin_until
    with ScriptedLLM([content('{"visible": false}')]) as llm:
        stack_file = tmp_path / "robot.yaml"
        stack_file.write_text(f"""nodes:
  memory:
    executable: memory_node
    parameters: {{data_dir: "{tmp_path / 'memory'}"}}
  nav_bridge:
    executable: nav_bridge_node
    parameters: {{backend: sim, sim_speed: 4.0, sim_rate_hz: 50.0, sim_start_x: 0.25, sim_start_y: 4.75}}
  camera:
    executable: sim_camera_node
    parameters: {{sim_seed: 0, rate_hz: 10.0}}
  explore:
    executable: explore_node
    parameters: {{environment: robot, llm_base_url: "{llm.base_url}", max_steps: 3, look_around_views: 4,
                  camera_height_m: 1.5, camera_pitch_deg: -25.0, ask_service: "", image_dir: "{tmp_path / 'img'}",
                  sensor_timeout_s: 30.0}}
""")
        stack = LaunchedStack(stack_file, tmp_path / "launch.log")
        node = Node("robot_loop_client", context=ros_context)
        executor = SingleThreadedExecutor(context=ros_context)
        executor.add_node(node)
        maps = []
        node.create_subscription(OccupancyGrid, "/explore/map", maps.append, QoSProfile(
            depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE))
        client = ActionClient(node, Explore, "/explore")

        def spin(future, timeout):
            return spin_until(executor, future, timeout, lambda: stack.log()[-3000:])
        try:
            assert client.wait_for_server(timeout_sec=90), stack.log()
            handle = spin(client.send_goal_async(Explore.Goal(target_description="first aid kit")), 30)
            result = spin(handle.get_result_async(), 240).result
            assert not result.success and "step limit" in result.message and result.steps == 3
            assert result.path_length_m > 0.5                          # the base moved, through the bridge
            free = sum(v == 0 for v in maps[-1].data)
            assert free > 500 and sum(v == 100 for v in maps[-1].data) > 50
            detections = [r for r in llm.requests if "looking for: first aid kit" in json.dumps(r)]
            assert len(detections) >= 4 and any(part["type"] == "image_url"
                                                 for part in detections[0]["messages"][0]["content"])
        finally:
            node.destroy_node()
            assert stack.stop() == 0
