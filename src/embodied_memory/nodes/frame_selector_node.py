"""frame_selector_node: camera (+ depth, camera info, waypoint) and the robot's pose -> /memory/keyframes.

Image topic: sensor_msgs/CompressedImage when its name ends in "compressed", else Image.
Pose: ``base_frame`` in ``fixed_frame`` at the image's stamp, looked up through /tf and
/tf_static (tf2_ros.Buffer on a full install, else ingest/transforms.py: the same lookup,
interpolation and extrapolation rules); nav_msgs/Odometry on ``odom_topic`` is one more
transform (header.frame_id <- child_frame_id). A frame whose transform is not there yet waits up
to ``transform_wait_s`` (retried on every transform and on a timer), then is kept with its
waypoint only, no pose (``count.frames_without_pose`` on /diagnostics). Transforms with NaN/inf
are rejected where they enter (counted, reported once); a frame that gets no pose because of one
(within ``pose_tolerance_s`` of it) is dropped (``dropped.non_finite_pose``).
Keyframes are kept until the memory (or perception, dropping one) acknowledges them and sent
again to a restarted perception node (nodes/delivery.py). Drops by reason and the
unacknowledged count go to /diagnostics.
"""
from __future__ import annotations

import math
import os
import time
from datetime import datetime, timezone

from embodied_memory_interfaces.msg import Keyframe as KeyframeMsg
from nav_msgs.msg import Odometry
from rclpy.clock import JumpThreshold
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, CompressedImage, Image
from std_msgs.msg import String, UInt64
from tf2_msgs.msg import TFMessage

from ..ingest.images import ImageDecodeError, decode_image_msg
from ..ingest.selection import FrameSelector
from ..ingest.sync import DepthPairing, FramePoser, PosedFrame, odometry_transform, tf_transform
from ..ingest.transforms import strip_slash
from ..params import FrameSelectorNodeParams
from ..stack import RUN_ID_ENV
from .common import from_time_msg, keyframe_qos, node_options, node_params, run_node
from .conversions import optional_pose_to_msg
from .delivery import AcknowledgedPublisher
from .health import NodeHealth
from .node_clock import steady_clock
from .sensor_qos import SensorSubscriptions
from .tf_buffer import make_transform_buffer

MAX_PENDING_FRAMES = 50     # frames waiting for their transform; beyond, the oldest goes on as it is

# tf2_ros' listener QoS: /tf reliable volatile, /tf_static reliable transient local (late joiners
# get the static transforms published before they started)
SENSOR_IMAGE_DEPTH = 10   # images queued per subscription (sensor-data convention: a late frame is a stale one)
TF_QOS = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                    durability=DurabilityPolicy.VOLATILE)
TF_STATIC_QOS = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL)


def _first_times(n: int) -> bool:
    return n in (1, 10, 100) or n % 1000 == 0


class FrameSelectorNode(Node):
    def __init__(self, **kwargs):
        super().__init__("frame_selector", **node_options(kwargs))
        p = self.params = node_params(self, FrameSelectorNodeParams)
        embed = None
        if p.policy == "similarity":  # HUMEMBR's filter compares global image embeddings
            from ..perception.image_embedding import MobileNetV2Embedder
            embedder = MobileNetV2Embedder()
            embed = lambda image: embedder.embed([image])[0]  # noqa: E731
        self.selector = FrameSelector(p, embed)
        # "" = this run of the stack (the launcher's id survives a respawn), else the start time
        self.episode = p.episode_id or os.environ.get(RUN_ID_ENV) or \
            datetime.now(timezone.utc).strftime("run_%Y%m%dT%H%M%S")
        self.tf_buffer, self.tf_buffer_kind = make_transform_buffer(p.tf_cache_s)
        self.poser: FramePoser = FramePoser(self.tf_buffer, p.fixed_frame, p.base_frame, p.transform_wait_s,
                                            max_pending=MAX_PENDING_FRAMES, non_finite_tolerance_s=p.pose_tolerance_s)
        self.depths: DepthPairing = DepthPairing()   # depth may arrive before or after its colour frame
        self.health = h = NodeHealth(self)
        self.sensors = SensorSubscriptions(self, h)
        self.waypoint, self.camera_info = "", None
        self.waypoint_table = None
        if p.waypoints_file:
            from ..nav.waypoints import WaypointTable
            self.waypoint_table = WaypointTable.from_yaml(p.waypoints_file)
        reliable = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
        compressed = p.image_topic.rstrip("/").endswith("compressed")
        self.sensors.subscribe(CompressedImage if compressed else Image, p.image_topic,
                               h.guard(self._on_image, "image"), p.sensor_qos, depth=SENSOR_IMAGE_DEPTH)
        if p.odom_topic:
            self.sensors.subscribe(Odometry, p.odom_topic, h.guard(self._on_odom, "odometry"), p.sensor_qos,
                                   depth=100)
        if p.tf_topic:
            self.create_subscription(TFMessage, p.tf_topic, h.guard(lambda m: self._on_tf(m, False), "tf"), TF_QOS)
        if p.tf_static_topic:
            self.create_subscription(TFMessage, p.tf_static_topic, h.guard(lambda m: self._on_tf(m, True), "tf_static"),
                                     TF_STATIC_QOS)
        if p.waypoint_topic:
            self.create_subscription(String, p.waypoint_topic, lambda m: setattr(self, "waypoint", m.data), reliable)
        if p.depth_topic:
            self.sensors.subscribe(Image, p.depth_topic, lambda m: self.depths.on_depth(from_time_msg(m.header.stamp), m),
                                   p.sensor_qos, depth=SENSOR_IMAGE_DEPTH)
        if p.camera_info_topic:
            self.sensors.subscribe(CameraInfo, p.camera_info_topic, lambda m: setattr(self, "camera_info", m),
                                   p.sensor_qos, depth=10)
        self._pub = AcknowledgedPublisher(self, KeyframeMsg, p.keyframes_topic, keyframe_qos(), acks_topic=p.acks_topic,
                                          health=h, id_of=lambda m: m.keyframe_id, what="keyframe",
                                          max_unacked=p.max_unacked_keyframes, resend_after_s=p.resend_after_s,
                                          resend_batch=10)
        self._progress = self.create_publisher(UInt64, p.progress_topic, reliable)
        self.frames = self.processed = self.keyframes = self.without_pose = self.bad_images = 0
        for name in ("frames", "keyframes"):
            h.gauges[f"{name}_total"] = lambda name=name: getattr(self, name)
        h.gauges["frames_pending_transform"] = lambda: len(self.poser)
        h.gauges["tf_buffer"] = lambda: self.tf_buffer_kind
        self._last_frame = None
        self._reported_reparent = 0
        self._tf_children: set[str] = set()   # frames /tf moves: odometry of the same edge is ignored
        # as tf2_ros: a jump back in time (a bag played again under use_sim_time) clears the buffer
        self._jump = self.get_clock().create_jump_callback(
            JumpThreshold(min_forward=None, min_backward=Duration(nanoseconds=-1), on_clock_change=False),
            post_callback=self._on_time_jump)
        period = min(0.5, max(0.05, p.transform_wait_s / 4))
        # steady: waits and the end-of-stream flush go on when a bag's /clock stops
        self.create_timer(period, h.guard(self._on_timer, "flush"), clock=steady_clock())
        self.get_logger().info(f"episode {self.episode}: {p.policy} K={p.frames_per_segment} T={p.segment_s}s "
                               f"from {p.image_topic}; poses: {p.base_frame} in {p.fixed_frame} "
                               f"({self.tf_buffer_kind} TF buffer, transform_wait_s={p.transform_wait_s})")

    # -- transforms -----------------------------------------------------------------------
    def _add_transform(self, parent: str, child: str, stamp: float, transform, static: bool, source: str) -> None:
        try:
            self.poser.add_transform(parent, child, stamp, transform, static)
        except ValueError as exc:   # rejected where it enters; frames near it are dropped at once
            finite = transform.is_finite() and math.isfinite(stamp)
            key = "non_finite_poses" if not finite else "invalid_transforms"
            self.health.count(key)
            if self.health.counts[key] == 1:
                self.get_logger().error(f"a transform {parent} <- {child} at t={stamp:.3f} from {source}: {exc}: "
                                        "rejected; frames at such times are dropped (counted on /diagnostics)")
        reparented = getattr(self.tf_buffer, "reparented", [])
        while len(reparented) > self._reported_reparent:
            child_frame, old, new = reparented[self._reported_reparent]
            self._reported_reparent += 1
            self.get_logger().warning(f"frame {child_frame!r} changed parent {old!r} -> {new!r} (two sources "
                                      f"disagree? e.g. {self.params.odom_topic or 'odometry'} and /tf)")

    def _on_odom(self, msg: Odometry) -> None:
        parent, child, transform = odometry_transform(msg, self.params.base_frame)
        if strip_slash(child) in self._tf_children:   # /tf already has this edge (e.g. robot_localization's
            self.health.count("odometry_ignored_tf_has_edge")  # EKF): two estimators would make poses jitter
            if self.health.counts["odometry_ignored_tf_has_edge"] == 1:
                self.get_logger().info(f"{self.params.odom_topic}: /tf already publishes {parent} -> {child}; "
                                       "odometry messages are ignored (set odom_topic: '' to silence this)")
            return
        self._add_transform(parent, child, from_time_msg(msg.header.stamp), transform, False, self.params.odom_topic)
        self._deliver(self.poser.poll(time.monotonic()))

    def _on_tf(self, msg: TFMessage, static: bool) -> None:
        topic = self.params.tf_static_topic if static else self.params.tf_topic
        for tf in msg.transforms:
            if not static:
                self._tf_children.add(strip_slash(tf.child_frame_id))
            self._add_transform(tf.header.frame_id, tf.child_frame_id, from_time_msg(tf.header.stamp),
                                tf_transform(tf), static, topic)
        self._deliver(self.poser.poll(time.monotonic()))

    def _on_time_jump(self, jump) -> None:
        if jump.delta.nanoseconds < 0:
            self.tf_buffer.clear()
            self.get_logger().warning("time jumped back (a bag played again?): the TF buffer was cleared")

    # -- frames ---------------------------------------------------------------------------
    def _on_image(self, msg) -> None:
        self.frames += 1
        self._last_frame = time.monotonic()
        stamp = from_time_msg(msg.header.stamp)
        paired: dict = {}                   # its depth image, now or when it arrives
        if self.params.depth_topic:
            self.depths.on_frame(stamp, lambda depth: paired.__setitem__("depth", depth))
        self._deliver(self.poser.add_frame(stamp, (msg, self.waypoint, paired), time.monotonic()))

    def _deliver(self, frames: list[PosedFrame]) -> None:
        for f in frames:
            msg, waypoint, paired = f.payload
            if f.pose is None:
                if f.non_finite:
                    self.health.drop("non_finite_pose", "a frame whose pose had NaN/inf")
                    self._processed()
                    continue
                self.without_pose += 1
                self.health.count("frames_without_pose")
                if _first_times(self.without_pose):
                    self.get_logger().warning(
                        f"a frame at t={f.stamp:.3f} has no pose of {self.params.base_frame} in "
                        f"{self.params.fixed_frame} within transform_wait_s={self.params.transform_wait_s}: kept "
                        f"with its waypoint only ({self.without_pose} so far): {f.reason}")
            self._select(f.stamp, msg, f.pose, waypoint, paired)

    def _waypoint_for(self, pose, reported: str) -> str:
        """The reported waypoint (GraphNav), else the nearest one of the table within the radius."""
        if reported or self.waypoint_table is None or pose is None:
            return reported
        return self.waypoint_table.label_for(pose.x, pose.y, self.params.waypoint_radius_m)

    def _select(self, stamp: float, msg, pose, waypoint: str, paired: dict) -> None:
        try:
            image = decode_image_msg(msg)
            self._emit(self.selector.push(stamp, image, (msg, pose, self._waypoint_for(pose, waypoint), paired)))
        except ImageDecodeError as exc:
            self.bad_images += 1
            self.health.drop("undecodable_image", f"a frame: {exc}")
        finally:
            self._processed()

    def _processed(self) -> None:
        self.processed += 1
        self._progress.publish(UInt64(data=self.processed))

    def _emit(self, selected) -> None:
        for sel in selected:
            image_msg, pose, waypoint, paired = sel.payload
            stamp = from_time_msg(image_msg.header.stamp)
            kf = KeyframeMsg(keyframe_id=f"{self.episode}/{image_msg.header.stamp.sec}.{image_msg.header.stamp.nanosec:09d}",
                             waypoint_id=waypoint, episode_id=self.episode, segment_id=sel.segment_id,
                             selection_policy=self.params.policy, selection_score=float(sel.score))
            kf.header = image_msg.header
            if isinstance(image_msg, CompressedImage):
                kf.compressed_image = image_msg
            else:
                kf.image = image_msg
            kf.pose = optional_pose_to_msg(pose, stamp)     # no pose: an empty frame_id
            if "depth" in paired:
                kf.has_depth, kf.depth = True, paired["depth"]
            if self.camera_info is not None:
                kf.camera_info = self.camera_info
            self._pub.publish(kf)
            self.keyframes += 1

    def _on_timer(self) -> None:
        self._deliver(self.poser.poll(time.monotonic()))     # frames whose wait is over
        if self._last_frame is not None and time.monotonic() - self._last_frame > self.params.flush_after_s:
            self._deliver(self.poser.flush())   # end of stream: whatever transform is there now
            self._emit(self.selector.flush())
            self._last_frame = None
            self.get_logger().info(f"{self.frames} frames -> {self.keyframes} keyframes "
                                   f"({self.without_pose} without pose, {self.bad_images} undecodable)")


def main() -> None:
    run_node(FrameSelectorNode, threads=1)


if __name__ == "__main__":
    main()
