"""Sensor QoS over real DDS (nodes/sensor_qos.py): a camera driver (best effort,
``qos_profile_sensor_data``) and a bag player (reliable) both feed keyframes out of the frame
selector with the default ``sensor_qos: sensor_data``; ``sensor_qos: reliable`` with a best-effort
publisher is reported, naming the topic and the parameter to change."""
from __future__ import annotations

import threading
import time

import cv2
import numpy as np
import pytest
import rclpy
from embodied_memory_interfaces.msg import Keyframe as KeyframeMsg
from nav_msgs.msg import Odometry
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, CompressedImage, Image

from embodied_memory.config import ConfigError, parse_params
from embodied_memory.nodes.common import keyframe_qos, to_time_msg
from embodied_memory.nodes.health import NodeHealth
from embodied_memory.nodes.sensor_qos import SENSOR_QOS_CHOICES, SensorSubscriptions, sensor_qos
from embodied_memory.params import ExploreNodeParams, FrameSelectorNodeParams

pytestmark = pytest.mark.integration

W, H = 64, 48
BAG_PLAYER_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)   # as a bag player / relay
T0 = 1_700_000_000.0                                                               # the frames' own clock


@pytest.fixture
def contexts():
    """Two rclpy contexts (two DDS participants): the node under test, and the robot's side."""
    made = []
    for _ in range(2):
        context = Context()
        rclpy.init(context=context, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
        made.append(context)
    yield made
    for context in made:
        if context.ok():
            rclpy.shutdown(context=context)


class Spinner:
    """Spins one node in a background thread (its own executor, its own context)."""

    def __init__(self, node: Node):
        self.node, self._stop = node, threading.Event()
        self.executor = SingleThreadedExecutor(context=node.context)
        self.executor.add_node(node)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set() and self.node.context.ok():
            self.executor.spin_once(timeout_sec=0.02)

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=5)
        self.executor.remove_node(self.node)
        self.node.destroy_node()


def _frame(i: int) -> np.ndarray:
    rng = np.random.default_rng(i)
    image = cv2.resize(rng.integers(0, 255, (6, 8, 3), dtype=np.uint8), (W, H), interpolation=cv2.INTER_NEAREST)
    return np.ascontiguousarray(image)


class Robot:
    """What a robot's drivers publish: colour image (raw or JPEG), depth, camera info, odometry."""

    def __init__(self, node: Node, prefix: str, qos, compressed: bool):
        self.node, self.compressed = node, compressed
        self.image_topic = f"{prefix}/color/image_raw" + ("/compressed" if compressed else "")
        self.depth_topic, self.info_topic, self.odom_topic = f"{prefix}/depth", f"{prefix}/camera_info", f"{prefix}/odom"
        self.image = node.create_publisher(CompressedImage if compressed else Image, self.image_topic, qos)
        self.depth = node.create_publisher(Image, self.depth_topic, qos)
        self.info = node.create_publisher(CameraInfo, self.info_topic, qos)
        self.odom = node.create_publisher(Odometry, self.odom_topic, qos)
        self.sent = 0

    def publishers(self):
        return [self.image, self.depth, self.info, self.odom]

    def publish(self, i: int) -> None:
        stamp = to_time_msg(T0 + 0.1 * i)                  # 10 frames per second of the frames' clock
        odom = Odometry()
        odom.header.stamp, odom.header.frame_id, odom.child_frame_id = stamp, "odom", "base_link"
        odom.pose.pose.position.x, odom.pose.pose.orientation.w = 0.05 * i, 1.0
        self.odom.publish(odom)
        info = CameraInfo(width=W, height=H, distortion_model="plumb_bob")
        info.header.stamp, info.header.frame_id = stamp, "camera_optical_frame"
        info.k = [50.0, 0.0, W / 2, 0.0, 50.0, H / 2, 0.0, 0.0, 1.0]
        self.info.publish(info)
        depth = Image(height=H, width=W, encoding="16UC1", step=2 * W,
                      data=np.full((H, W), 1500, np.uint16).tobytes())
        depth.header.stamp, depth.header.frame_id = stamp, "camera_optical_frame"
        if self.compressed:              # a driver may publish depth before colour, a bag after it
            self.depth.publish(depth)
        frame = _frame(i)
        if self.compressed:
            ok, jpeg = cv2.imencode(".jpg", frame)
            image = CompressedImage(format="jpeg", data=jpeg.tobytes())
        else:
            image = Image(height=H, width=W, encoding="bgr8", step=3 * W, data=frame.tobytes())
        image.header.stamp, image.header.frame_id = stamp, "camera_optical_frame"
        self.image.publish(image)
        if not self.compressed:
            self.depth.publish(depth)
        self.sent += 1


def _frame_selector(context, robot: Robot, prefix: str, policy: str, **extra):
    from embodied_memory.nodes.frame_selector_node import FrameSelectorNode
    values = dict(policy=policy, segment_s=1.0, frames_per_segment=2, image_topic=robot.image_topic,
                  depth_topic=robot.depth_topic, camera_info_topic=robot.info_topic, odom_topic=robot.odom_topic,
                  waypoint_topic="", keyframes_topic=f"{prefix}/keyframes", acks_topic=f"{prefix}/acks",
                  progress_topic=f"{prefix}/frames_processed", episode_id="qos_test", **extra)
    return FrameSelectorNode(context=context,
                             parameter_overrides=[Parameter(k, value=v) for k, v in values.items()])


def _sensor_subscriptions(node: Node) -> SensorSubscriptions:
    found = [v for v in vars(node).values() if isinstance(v, SensorSubscriptions)]
    assert found, "the frame selector does not subscribe through nodes/sensor_qos.SensorSubscriptions"
    return found[0]


@pytest.mark.parametrize("publisher, qos, compressed, policy", [
    ("camera_driver", qos_profile_sensor_data, True, "uniform"),
    ("bag_player", BAG_PLAYER_QOS, False, "psfr"),
])
def test_best_effort_and_reliable_publishers_both_feed_keyframes(contexts, publisher, qos, compressed, policy):
    prefix = f"/qos_{publisher}"
    side = Node(f"{publisher}_robot", context=contexts[1])
    robot = Robot(side, prefix, qos, compressed)
    keyframes: dict[str, KeyframeMsg] = {}
    side.create_subscription(KeyframeMsg, f"{prefix}/keyframes", lambda m: keyframes.setdefault(m.keyframe_id, m),
                             keyframe_qos())
    selector = _frame_selector(contexts[0], robot, prefix, policy)   # default sensor_qos: sensor_data
    assert selector.params.sensor_qos == "sensor_data"
    spinner = Spinner(selector)
    executor = SingleThreadedExecutor(context=contexts[1])
    executor.add_node(side)
    try:
        # every sensor publisher is matched by the frame selector's subscription (QoS compatible)
        matched = lambda: all(p.get_subscription_count() >= 1 for p in robot.publishers())  # noqa: E731
        end = time.monotonic() + 20
        while not matched() and time.monotonic() < end:
            executor.spin_once(timeout_sec=0.05)
        assert matched(), f"{publisher}: not matched: " + ", ".join(
            p.topic_name for p in robot.publishers() if p.get_subscription_count() == 0)
        started = time.monotonic()
        end = started + 60
        while len(keyframes) < 4 and time.monotonic() < end:
            robot.publish(robot.sent)
            pause = time.monotonic() + 1 / 30
            while time.monotonic() < pause:
                executor.spin_once(timeout_sec=0.005)
        took = time.monotonic() - started
        print(f"\n{publisher} ({'CompressedImage' if compressed else 'Image'}, {policy}): {robot.sent} frames "
              f"sent -> {selector.frames} received -> {len(keyframes)} keyframes in {took:.1f} s")
        assert len(keyframes) >= 4, f"{publisher}: {robot.sent} frames sent, {selector.frames} received, " \
                                    f"{len(keyframes)} keyframes"
        kfs = list(keyframes.values())
        assert all(k.selection_policy == policy for k in kfs)
        assert all((len(k.compressed_image.data) > 0) == compressed for k in kfs)
        with_depth = [k for k in kfs if k.has_depth and k.depth.width == W]
        assert with_depth, "no keyframe carries the depth image"
        assert all(k.depth.header.stamp == k.header.stamp for k in with_depth), "a keyframe carries another's depth"
        assert len(with_depth) >= len(kfs) - 1, f"{len(kfs) - len(with_depth)} of {len(kfs)} keyframes lack depth"
        assert any(k.camera_info.width == W for k in kfs), "no keyframe carries the camera info"
        assert any(k.pose.pose.position.x > 0 for k in kfs), "poses did not come from the odometry"
        sensors = _sensor_subscriptions(selector)
        assert sensors.messages(robot.image_topic) >= selector.frames > 0
        assert sensors.messages(robot.odom_topic) > 0
        assert not [w for w in sensors.warnings if "incompatible" in w], sensors.warnings
        gauges = {kv.key: kv.value for kv in selector.health.status().values}
        assert int(gauges[f"topic.{robot.image_topic.lstrip('/')}.messages"]) > 0, gauges
    finally:
        executor.remove_node(side)
        side.destroy_node()
        spinner.stop()


def test_reliable_sensor_qos_with_a_best_effort_camera_warns_naming_the_topic(contexts):
    prefix = "/qos_mismatch"
    side = Node("mismatch_robot", context=contexts[1])
    robot = Robot(side, prefix, qos_profile_sensor_data, compressed=True)
    keyframes: set[str] = set()
    side.create_subscription(KeyframeMsg, f"{prefix}/keyframes", lambda m: keyframes.add(m.keyframe_id), keyframe_qos())
    selector = _frame_selector(contexts[0], robot, prefix, "uniform", sensor_qos="reliable")
    spinner = Spinner(selector)
    executor = SingleThreadedExecutor(context=contexts[1])
    executor.add_node(side)
    try:
        sensors = _sensor_subscriptions(selector)
        image_topic = robot.image_topic

        def warned():
            return [w for w in sensors.warnings if image_topic in w and "incompatible" in w]
        end = time.monotonic() + 30
        while not warned() and time.monotonic() < end:
            robot.publish(robot.sent)
            executor.spin_once(timeout_sec=0.05)
        for _ in range(20):   # a few more frames: none may get through
            robot.publish(robot.sent)
            executor.spin_once(timeout_sec=0.02)
        warning = warned()
        assert warning, f"no incompatible-QoS warning naming {image_topic}: {sensors.warnings}"
        print("\n" + warning[0])
        assert "RELIABILITY" in warning[0] and "sensor_qos" in warning[0] and "sensor_data" in warning[0]
        assert sensors.incompatible(image_topic) >= 1
        assert selector.health.counts["sensor_qos.incompatible"] >= 1
        assert selector.health.counts[f"sensor_qos.incompatible.{image_topic.lstrip('/')}"] >= 1
        assert all(p.get_subscription_count() == 0 for p in robot.publishers())   # nothing matched
        assert selector.frames == 0 and sensors.messages(image_topic) == 0 and not keyframes
    finally:
        executor.remove_node(side)
        side.destroy_node()
        spinner.stop()


def test_silent_topic_warns_once_with_both_sides_qos_and_counts_messages(contexts):
    """SensorSubscriptions alone: a reliable subscription with a best-effort publisher gets an
    incompatible-QoS warning and, after warn_after_s, one 'publishers exist but nothing arrives'
    warning naming both QoS; sensor_data subscriptions receive from both kinds of publisher."""
    node = Node("qos_watch", context=contexts[0])
    health = NodeHealth(node)
    sensors = SensorSubscriptions(node, health, warn_after_s=1.0)
    got = {"mismatch": 0, "from_be": 0, "from_rel": 0}

    def count(key):
        def callback(msg):
            got[key] += 1
        return callback
    sensors.subscribe(Odometry, "/qos_watch/mismatch", count("mismatch"), "reliable")
    sensors.subscribe(Odometry, "/qos_watch/from_be", count("from_be"), "sensor_data")
    sensors.subscribe(Odometry, "qos_watch/from_rel", count("from_rel"), "sensor_data", depth=5)   # relative name
    spinner = Spinner(node)
    side = Node("qos_watch_pub", context=contexts[1])
    pubs = [side.create_publisher(Odometry, "/qos_watch/mismatch", qos_profile_sensor_data),
            side.create_publisher(Odometry, "/qos_watch/from_be", qos_profile_sensor_data),
            side.create_publisher(Odometry, "/qos_watch/from_rel", BAG_PLAYER_QOS)]
    try:
        def silent():
            return [w for w in sensors.warnings if w.startswith("no message on /qos_watch/mismatch")]
        end = time.monotonic() + 30
        while not (silent() and got["from_be"] and got["from_rel"]) and time.monotonic() < end:
            for pub in pubs:
                pub.publish(Odometry())
            time.sleep(0.05)
        assert silent(), sensors.warnings
        print("\n" + "\n".join(sensors.warnings))
        assert "BEST_EFFORT/VOLATILE" in silent()[0] and "RELIABLE/VOLATILE" in silent()[0]
        assert "sensor_qos: sensor_data" in silent()[0]
        assert sensors.incompatible("/qos_watch/mismatch") >= 1 and got["mismatch"] == 0
        assert got["from_be"] > 0 and got["from_rel"] > 0
        # once per topic until messages arrive: three more periods, still one warning
        end = time.monotonic() + 3.5
        while time.monotonic() < end:
            for pub in pubs:
                pub.publish(Odometry())
            time.sleep(0.05)
        assert len(silent()) == 1, sensors.warnings
        assert not [w for w in sensors.warnings if "from_be" in w or "from_rel" in w], sensors.warnings
        gauges = {kv.key: kv.value for kv in health.status().values}
        assert gauges["topic.qos_watch/mismatch.messages"] == "0"
        assert int(gauges["topic.qos_watch/from_rel.messages"]) == sensors.messages("/qos_watch/from_rel") > 0
        assert float(gauges["topic.qos_watch/from_be.rate_hz"]) > 0
        assert health.counts["sensor_qos.silent_topics"] == 1
    finally:
        side.destroy_node()
        spinner.stop()


def test_sensor_qos_profiles_and_parameters():
    be, rel = sensor_qos("sensor_data", 7), sensor_qos("reliable")
    assert (be.reliability, be.durability, be.depth) == (ReliabilityPolicy.BEST_EFFORT, DurabilityPolicy.VOLATILE, 7)
    assert (rel.reliability, rel.durability) == (ReliabilityPolicy.RELIABLE, DurabilityPolicy.VOLATILE)
    with pytest.raises(ValueError, match="sensor_qos"):
        sensor_qos("best_effort")
    kf = keyframe_qos()   # between our own nodes: reliable, nothing kept for late joiners, bounded
    assert kf.reliability == ReliabilityPolicy.RELIABLE and kf.durability == DurabilityPolicy.VOLATILE
    assert kf.depth <= 100
    for cls in (FrameSelectorNodeParams, ExploreNodeParams):
        assert cls().sensor_qos == "sensor_data"
        for choice in SENSOR_QOS_CHOICES:
            assert parse_params(cls, {"sensor_qos": choice}, "test").sensor_qos == choice
        with pytest.raises(ConfigError, match="sensor_qos"):
            parse_params(cls, {"sensor_qos": "best_effort"}, "test")
