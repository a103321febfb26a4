"""frame_selector_node: camera + pose (+ depth, camera info, waypoint) -> /memory/keyframes.

Image topic: sensor_msgs/CompressedImage when its name ends in "compressed", else Image.
Pose: nav_msgs/Odometry on ``odom_topic``, or /tf (``base_frame`` child) when it is "".
Poses with NaN/inf are rejected where they enter (counted, reported once; frames at those
times are dropped at once, never waited for). Keyframes are kept until the memory (or
perception, dropping one) acknowledges them and sent again to a restarted perception node
(nodes/delivery.py). Drops by reason and the unacknowledged count go to /diagnostics.
"""
from __future__ import annotations

import os
import time
from collections import deque
from datetime import datetime, timezone

from embodied_memory_interfaces.msg import Keyframe as KeyframeMsg
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, CompressedImage, Image
from std_msgs.msg import String, UInt64
from tf2_msgs.msg import TFMessage

from ..ingest.images import ImageDecodeError, decode_image_msg
from ..ingest.selection import FrameSelector
from ..ingest.sync import PoseBuffer, TimeBuffer, yaw_from_quaternion
from ..params import FrameSelectorNodeParams
from ..stack import RUN_ID_ENV
from ..types import Pose
from .common import from_time_msg, keyframe_qos, node_params, run_node
from .conversions import pose_to_msg
from .delivery import AcknowledgedPublisher
from .health import NodeHealth


class FrameSelectorNode(Node):
    def __init__(self, **kwargs):
        super().__init__("frame_selector", **kwargs)
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
        self.poses, self.depths = PoseBuffer(), TimeBuffer(max_items=30)
        self.bad_poses: TimeBuffer[None] = TimeBuffer(max_items=200)   # stamps of NaN/inf poses
        self._last_pose_stamp = float("-inf")                          # of any pose message
        self.health = h = NodeHealth(self)
        self.waypoint, self.camera_info = "", None
        self.waypoint_table = None
        if p.waypoints_file:
            from ..nav.waypoints import WaypointTable
            self.waypoint_table = WaypointTable.from_yaml(p.waypoints_file)
        reliable = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
        compressed = p.image_topic.rstrip("/").endswith("compressed")
        self.create_subscription(CompressedImage if compressed else Image, p.image_topic,
                                 h.guard(self._on_image, "image"), reliable)
        if p.odom_topic:
            self.create_subscription(Odometry, p.odom_topic, h.guard(self._on_odom, "odometry"), reliable)
        else:
            self.create_subscription(TFMessage, p.tf_topic, h.guard(self._on_tf, "tf"), reliable)
        if p.waypoint_topic:
            self.create_subscription(String, p.waypoint_topic, lambda m: setattr(self, "waypoint", m.data), reliable)
        if p.depth_topic:
            self.create_subscription(Image, p.depth_topic, lambda m: self.depths.add(from_time_msg(m.header.stamp), m),
                                     qos_profile_sensor_data)
        if p.camera_info_topic:
            self.create_subscription(CameraInfo, p.camera_info_topic, lambda m: setattr(self, "camera_info", m), reliable)
        self._pub = AcknowledgedPublisher(self, KeyframeMsg, p.keyframes_topic, keyframe_qos(), acks_topic=p.acks_topic,
                                          health=h, id_of=lambda m: m.keyframe_id, what="keyframe",
                                          max_unacked=p.max_unacked_keyframes, resend_after_s=p.resend_after_s,
                                          resend_batch=10)
        self._progress = self.create_publisher(UInt64, p.progress_topic, reliable)
        self.frames = self.processed = self.keyframes = self.no_pose = self.bad_images = 0
        for name in ("frames", "keyframes"):
            h.gauges[f"{name}_total"] = lambda name=name: getattr(self, name)
        self._pending: deque = deque(maxlen=50)
        self._last_frame = None
        self.create_timer(0.5, h.guard(self._maybe_flush, "flush"))
        self.get_logger().info(f"episode {self.episode}: {p.policy} K={p.frames_per_segment} T={p.segment_s}s "
                               f"from {p.image_topic}")

    def _on_odom(self, msg: Odometry) -> None:
        q, pos = msg.pose.pose.orientation, msg.pose.pose.position
        self._add_pose(from_time_msg(msg.header.stamp),
                       Pose(pos.x, pos.y, pos.z, yaw_from_quaternion(q.x, q.y, q.z, q.w), msg.header.frame_id or "odom"))

    def _add_pose(self, stamp: float, pose: Pose) -> None:
        self._last_pose_stamp = max(self._last_pose_stamp, stamp)
        if pose.is_finite():
            self.poses.add(stamp, pose)
        else:   # rejected where it enters; frames near it are dropped at once (never waited for)
            self.bad_poses.add(stamp, None)
            self.health.count("non_finite_poses")
            if self.health.counts["non_finite_poses"] == 1:
                self.get_logger().error(f"a pose with NaN/inf at t={stamp:.3f} (from "
                                        f"{self.params.odom_topic or self.params.tf_topic}): rejected; frames at "
                                        "such times are dropped (counted on /diagnostics)")
        self._retry_pending()

    def _pose_may_come(self, stamp: float) -> bool:
        """No pose message (valid or not) has arrived yet at or after the frame's time."""
        return self._last_pose_stamp < stamp + self.params.pose_tolerance_s

    def _retry_pending(self) -> None:
        """Frames that arrived before their pose (topics are not ordered across writers)."""
        while self._pending:
            stamp, msg, waypoint = self._pending[0]
            pose = self.poses.at(stamp, self.params.pose_tolerance_s)
            if pose is None and self._pose_may_come(stamp):
                return  # its pose may still come
            self._pending.popleft()
            self._select(stamp, msg, pose, waypoint)

    def _on_tf(self, msg: TFMessage) -> None:
        for tf in msg.transforms:
            if tf.child_frame_id == self.params.base_frame:
                tr, q = tf.transform.translation, tf.transform.rotation
                self._add_pose(from_time_msg(tf.header.stamp), Pose(tr.x, tr.y, tr.z,
                                                                    yaw_from_quaternion(q.x, q.y, q.z, q.w),
                                                                    tf.header.frame_id))

    def _on_image(self, msg) -> None:
        self.frames += 1
        self._last_frame = time.monotonic()
        stamp = from_time_msg(msg.header.stamp)
        pose = self.poses.at(stamp, self.params.pose_tolerance_s)
        if pose is None and self._pose_may_come(stamp) and len(self._pending) < self._pending.maxlen:
            self._pending.append((stamp, msg, self.waypoint))  # wait for the pose a little
        else:
            self._retry_pending()
            self._select(stamp, msg, pose, self.waypoint)

    def _waypoint_for(self, pose, reported: str) -> str:
        """The reported waypoint (GraphNav), else the nearest one of the table within the radius."""
        if reported or self.waypoint_table is None or pose is None:
            return reported
        return self.waypoint_table.label_for(pose.x, pose.y, self.params.waypoint_radius_m)

    def _select(self, stamp: float, msg, pose, waypoint: str) -> None:
        try:
            if pose is None:
                self.no_pose += 1
                if self.bad_poses.nearest(stamp, self.params.pose_tolerance_s) is not None:
                    self.health.drop("non_finite_pose", "a frame whose pose had NaN/inf")
                else:
                    self.health.drop("no_pose", f"a frame without a pose within {self.params.pose_tolerance_s}s "
                                                f"(is {self.params.odom_topic or self.params.tf_topic} publishing?)")
                return
            image = decode_image_msg(msg)
            self._emit(self.selector.push(stamp, image, (msg, pose, self._waypoint_for(pose, waypoint))))
        except ImageDecodeError as exc:
            self.bad_images += 1
            self.health.drop("undecodable_image", f"a frame: {exc}")
        finally:
            self.processed += 1
            self._progress.publish(UInt64(data=self.processed))

    def _emit(self, selected) -> None:
        for sel in selected:
            image_msg, pose, waypoint = sel.payload
            stamp = from_time_msg(image_msg.header.stamp)
            kf = KeyframeMsg(keyframe_id=f"{self.episode}/{image_msg.header.stamp.sec}.{image_msg.header.stamp.nanosec:09d}",
                             waypoint_id=waypoint, episode_id=self.episode, segment_id=sel.segment_id,
                             selection_policy=self.params.policy, selection_score=float(sel.score))
            kf.header = image_msg.header
            if isinstance(image_msg, CompressedImage):
                kf.compressed_image = image_msg
            else:
                kf.image = image_msg
            kf.pose = pose_to_msg(pose, stamp)
            depth = self.depths.nearest(stamp, 0.1)
            if depth is not None:
                kf.has_depth, kf.depth = True, depth[1]
            if self.camera_info is not None:
                kf.camera_info = self.camera_info
            self._pub.publish(kf)
            self.keyframes += 1

    def _maybe_flush(self) -> None:
        if self._last_frame is not None and time.monotonic() - self._last_frame > self.params.flush_after_s:
            while self._pending:  # end of stream: no pose will come for these
                stamp, msg, waypoint = self._pending.popleft()
                self._select(stamp, msg, self.poses.at(stamp, self.params.pose_tolerance_s), waypoint)
            self._emit(self.selector.flush())
            self._last_frame = None
            self.get_logger().info(f"{self.frames} frames -> {self.keyframes} keyframes "
                                   f"({self.no_pose} without pose, {self.bad_images} undecodable)")


def main() -> None:
    run_node(FrameSelectorNode, threads=1)


if __name__ == "__main__":
    main()
