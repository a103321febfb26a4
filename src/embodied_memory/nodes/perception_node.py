"""perception_node: /memory/keyframes -> /memory/observations (+ /memory/identity_merges).

Observations are kept until the memory acknowledges them (``/memory/acks``) and sent again to
a restarted memory node; keyframes it cannot use are acknowledged as dropped, so the frame
selector stops keeping them. ``/memory/forgotten_identities`` (from the memory node, on an
operator's forget request) makes it drop the identity's face and re-ID points at once.
"""
from __future__ import annotations

import dataclasses
from collections import OrderedDict

from embodied_memory_interfaces.msg import Ack, IdentityForgotten, IdentityMerge
from embodied_memory_interfaces.msg import Keyframe as KeyframeMsg
from embodied_memory_interfaces.msg import Observation as ObservationMsg
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from ..ingest.images import ImageDecodeError, decode_depth, decode_image_msg
from ..params import PerceptionNodeParams
from ..perception.pipeline import Perception, PerceptionParams
from ..types import Keyframe
from .common import forgotten_qos, from_time_msg, keyframe_qos, node_params, run_node
from .conversions import observation_to_msg, pose_from_msg
from .delivery import AckPublisher, AcknowledgedPublisher
from .health import NodeHealth

RECENT_KEYFRAMES = 2000   # keyframe ids already perceived (a resent keyframe is not perceived twice)


class PerceptionNode(Node):
    def __init__(self, **kwargs):
        super().__init__("perception", **kwargs)
        p = self.params = node_params(self, PerceptionNodeParams)
        core = {f.name: getattr(p, f.name) for f in dataclasses.fields(PerceptionParams)}
        self.perception = Perception(PerceptionParams(**core))  # missing weights: error naming the parameter
        self.health = NodeHealth(self)
        reliable = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self._observations = AcknowledgedPublisher(
            self, ObservationMsg, p.observations_topic, QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE),
            acks_topic=p.acks_topic, health=self.health, id_of=lambda m: m.observation_id, what="observation",
            max_unacked=p.max_unacked_observations, resend_after_s=p.resend_after_s)
        self._acks = AckPublisher(self, p.acks_topic)
        self._merge_pub = self.create_publisher(IdentityMerge, p.merges_topic, reliable)
        self.create_subscription(KeyframeMsg, p.keyframes_topic, self.health.guard(self._on_keyframe, "keyframe"),
                                 keyframe_qos())
        self.create_subscription(IdentityForgotten, p.forgotten_topic,
                                 self.health.guard(self._on_forgotten, "forgotten identity"), forgotten_qos())
        self._recent: OrderedDict[str, None] = OrderedDict()
        self.forgotten: set[str] = set()
        self.processed = 0
        self.health.gauges["keyframes_perceived"] = lambda: self.processed
        self.get_logger().info(f"perception: {self.perception.describer.name} describer, "
                               f"{p.person_detector} people, {p.face_backend} faces")

    def _drop(self, msg: KeyframeMsg, reason: str, detail: str) -> None:
        self.health.drop(reason, f"keyframe {msg.keyframe_id}: {detail}")
        self._acks.send(msg.keyframe_id, Ack.DROPPED, f"{reason}: {detail}")

    def _on_keyframe(self, msg: KeyframeMsg) -> None:
        if msg.keyframe_id in self._recent:
            self.health.count("keyframes_already_perceived")
            return
        try:
            image = decode_image_msg(msg.compressed_image if len(msg.compressed_image.data) else msg.image)
        except ImageDecodeError as exc:
            self._drop(msg, "undecodable_image", str(exc))
            return
        depth = None
        if msg.has_depth:
            d = msg.depth
            try:
                depth = decode_depth(d.encoding, d.height, d.width, d.step, d.data)
            except ImageDecodeError as exc:
                self.health.count("depth_ignored")
                self.get_logger().warning(f"keyframe {msg.keyframe_id}: depth ignored: {exc}")
        k = msg.camera_info.k
        intrinsics = (float(k[0]), float(k[4]), float(k[2]), float(k[5])) if k[0] > 0 else None
        kf = Keyframe(msg.keyframe_id, from_time_msg(msg.header.stamp), msg.episode_id, pose_from_msg(msg.pose),
                      image, segment_id=msg.segment_id, waypoint_id=msg.waypoint_id, depth=depth,
                      intrinsics=intrinsics, selection_score=msg.selection_score)
        try:
            observations = self.perception.process([kf])
        except Exception as exc:  # noqa: BLE001 - e.g. the VLM endpoint is down: keep running
            self._drop(msg, "perception_failed", f"{type(exc).__name__}: {exc}")
            return
        self._recent[msg.keyframe_id] = None
        while len(self._recent) > RECENT_KEYFRAMES:
            self._recent.popitem(last=False)
        for obs in observations:
            obs.people = [s for s in obs.people if s.identity_id not in self.forgotten]
            self._observations.publish(observation_to_msg(obs))
        for absorbed, survivor in self.perception.take_merges():
            self._merge_pub.publish(IdentityMerge(stamp=msg.header.stamp, absorbed_id=absorbed, surviving_id=survivor))
        self.processed += 1
        if self.processed % 50 == 0:
            self.perception.identities.save()

    def _on_forgotten(self, msg: IdentityForgotten) -> None:
        for identity in [msg.identity_id, *msg.aliases]:
            if identity and identity not in self.forgotten:
                self.forgotten.add(identity)
                known = self.perception.identities.forget(identity)
                self.get_logger().info(f"forgot identity {identity}" + ("" if known else " (not known here)"))

    def close(self) -> None:
        self.perception.close()


def main() -> None:
    run_node(PerceptionNode, threads=1)


if __name__ == "__main__":
    main()
