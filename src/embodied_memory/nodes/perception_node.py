"""perception_node: /memory/keyframes -> /memory/observations (+ /memory/identity_merges)."""
from __future__ import annotations

import dataclasses

from embodied_memory_interfaces.msg import IdentityMerge
from embodied_memory_interfaces.msg import Keyframe as KeyframeMsg
from embodied_memory_interfaces.msg import Observation as ObservationMsg
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from ..ingest.images import ImageDecodeError, decode_depth, decode_image_msg
from ..params import PerceptionNodeParams
from ..perception.pipeline import Perception, PerceptionParams
from ..types import Keyframe
from .common import from_time_msg, keyframe_qos, node_params, run_node
from .conversions import observation_to_msg, pose_from_msg


class PerceptionNode(Node):
    def __init__(self, **kwargs):
        super().__init__("perception", **kwargs)
        self.params = node_params(self, PerceptionNodeParams)
        core = {f.name: getattr(self.params, f.name) for f in dataclasses.fields(PerceptionParams)}
        self.perception = Perception(PerceptionParams(**core))  # missing weights: error naming the parameter
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self._obs_pub = self.create_publisher(ObservationMsg, self.params.observations_topic, reliable)
        self._merge_pub = self.create_publisher(IdentityMerge, self.params.merges_topic, reliable)
        self.create_subscription(KeyframeMsg, self.params.keyframes_topic, self._on_keyframe, keyframe_qos())
        self.processed = 0
        self.get_logger().info(f"perception: {self.perception.describer.name} describer, "
                               f"{self.params.person_detector} people, {self.params.face_backend} faces")

    def _on_keyframe(self, msg: KeyframeMsg) -> None:
        try:
            image = decode_image_msg(msg.compressed_image if len(msg.compressed_image.data) else msg.image)
        except ImageDecodeError as exc:
            self.get_logger().error(f"keyframe {msg.keyframe_id} skipped: {exc}")
            return
        depth = None
        if msg.has_depth:
            d = msg.depth
            try:
                depth = decode_depth(d.encoding, d.height, d.width, d.step, d.data)
            except ImageDecodeError as exc:
                self.get_logger().warning(f"keyframe {msg.keyframe_id}: depth ignored: {exc}")
        k = msg.camera_info.k
        intrinsics = (float(k[0]), float(k[4]), float(k[2]), float(k[5])) if k[0] > 0 else None
        kf = Keyframe(msg.keyframe_id, from_time_msg(msg.header.stamp), msg.episode_id, pose_from_msg(msg.pose),
                      image, segment_id=msg.segment_id, waypoint_id=msg.waypoint_id, depth=depth,
                      intrinsics=intrinsics, selection_score=msg.selection_score)
        try:
            observations = self.perception.process([kf])
        except Exception as exc:  # noqa: BLE001 - e.g. the VLM endpoint is down: keep running
            self.get_logger().error(f"keyframe {msg.keyframe_id}: perception failed: {exc}")
            return
        for obs in observations:
            self._obs_pub.publish(observation_to_msg(obs))
        for absorbed, survivor in self.perception.take_merges():
            self._merge_pub.publish(IdentityMerge(stamp=msg.header.stamp, absorbed_id=absorbed, surviving_id=survivor))
        self.processed += 1
        if self.processed % 50 == 0:
            self.perception.identities.save()

    def close(self) -> None:
        self.perception.close()


def main() -> None:
    run_node(PerceptionNode, threads=1)


if __name__ == "__main__":
    main()
