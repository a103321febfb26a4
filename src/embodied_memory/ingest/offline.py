"""The whole ingest as a library call: bag -> sync -> keyframe selection -> perception -> store.

The nodes (frame_selector, perception, memory) run the same core over DDS; this path runs it
in one process for tests, benchmarks and batch imports, and reports where the time goes.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..progress import progress_bar

from ..types import Keyframe, Observation, Pose
from .bag_reader import Bag, BagError
from .images import ImageDecodeError, decode_depth, decode_image_msg
from .selection import FrameSelector, SelectionParams
from .sync import PoseBuffer, TimeBuffer, yaw_from_quaternion

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicParams:
    """Which topics carry what (ReMEmbR users' first question: which topics?)."""

    image_topic: str = "/camera/color/image_raw/compressed"   # sensor_msgs Image or CompressedImage
    depth_topic: str = ""                                     # optional, 16UC1 mm or 32FC1 m
    camera_info_topic: str = ""
    odom_topic: str = "/odom"                                 # nav_msgs/Odometry ("" = use tf_topic)
    tf_topic: str = "/tf"                                     # used when odom_topic is ""
    base_frame: str = "base_link"                             # child frame of the pose in /tf
    waypoint_topic: str = "/waypoint"                         # std_msgs/String (GraphNav waypoint id), optional
    pose_tolerance_s: float = 0.25


@dataclass
class IngestReport:
    bag: str
    bag_duration_s: float = 0.0
    frames: int = 0
    keyframes: int = 0
    stored: int = 0
    skipped_no_pose: int = 0
    skipped_bad_image: int = 0
    wall_s: float = 0.0
    stage_s: dict[str, float] = field(default_factory=dict)

    @property
    def realtime_factor(self) -> float:
        return self.bag_duration_s / self.wall_s if self.wall_s else float("inf")

    def summary(self) -> str:
        stages = ", ".join(f"{k} {v:.1f}s" for k, v in sorted(self.stage_s.items(), key=lambda kv: -kv[1]))
        return (f"{self.bag}: {self.frames} frames over {self.bag_duration_s:.1f} s -> {self.keyframes} keyframes, "
                f"{self.stored} stored in {self.wall_s:.1f} s (real-time factor {self.realtime_factor:.2f}); "
                f"skipped {self.skipped_no_pose} without pose, {self.skipped_bad_image} undecodable; {stages}")


def pose_from_odometry(msg) -> Pose:
    p, q = msg.pose.pose.position, msg.pose.pose.orientation
    return Pose(p.x, p.y, p.z, yaw_from_quaternion(q.x, q.y, q.z, q.w), msg.header.frame_id or "odom")


def stamp_of(msg, fallback_ns: int) -> float:
    header = getattr(msg, "header", None)
    if header is not None and (header.stamp.sec or header.stamp.nanosec):
        return header.stamp.sec + header.stamp.nanosec * 1e-9
    return fallback_ns * 1e-9


def ingest_bag(bag_path: str, store, perception, *, topics: TopicParams = TopicParams(),
               selection: SelectionParams = SelectionParams(), episode_id: Optional[str] = None,
               progress: bool = True, describe_segments: bool = False,
               annotate: Optional[Callable[[Observation], None]] = None) -> IngestReport:
    """Replay ``bag_path`` through selection and perception into ``store`` (a MemoryStore).
    ``annotate`` may edit each observation before it is stored (labelled ablations only, e.g.
    the simulator's ground-truth object descriptions)."""
    from ..store.image_files import insert_with_images   # params imports this module: store later
    start_wall = time.perf_counter()
    report = IngestReport(bag=str(bag_path))
    poses, waypoints, depths = PoseBuffer(), TimeBuffer[str](), TimeBuffer()
    intrinsics = None
    embed = (lambda im: perception.embedder.embed([im])[0]) if selection.policy == "similarity" else None
    selector = FrameSelector(selection, embed)
    stage = {"decode": 0.0, "selection": 0.0, "store": 0.0}
    with Bag(bag_path) as bag:
        pose_topic = topics.odom_topic or topics.tf_topic
        present = bag.check_topics([topics.image_topic, pose_topic, topics.depth_topic, topics.waypoint_topic,
                                    topics.camera_info_topic], required=[topics.image_topic, pose_topic])
        report.bag_duration_s = bag.duration_s
        episode = episode_id or bag.path.stem
        total = bag.topics[topics.image_topic].count
        bar = progress_bar(total=total, desc=f"ingest {bag.path.name}", unit="frame", disable=not progress)

        def handle(selected):
            if not selected:
                return
            keyframes = [s.payload for s in selected]
            for kf, s in zip(keyframes, selected):
                kf.segment_id, kf.selection_score = s.segment_id, s.score
            observations = perception.process(keyframes, describe_together=describe_segments)
            if annotate is not None:
                for obs in observations:
                    annotate(obs)
            t = time.perf_counter()
            report.stored += len(insert_with_images(store, observations).stored)
            stage["store"] += time.perf_counter() - t
            report.keyframes += len(keyframes)
            for absorbed, survivor in perception.take_merges():
                store.merge_identities(absorbed, survivor)

        for msg in bag.messages(present):
            if msg.topic == topics.image_topic:
                report.frames += 1
                bar.update(1)
                t = time.perf_counter()
                try:
                    decoded = bag.deserialize(msg)
                    image = decode_image_msg(decoded)
                except (ImageDecodeError, BagError) as exc:
                    report.skipped_bad_image += 1
                    log.warning("frame %d skipped: %s", report.frames, exc)
                    continue
                stamp = stamp_of(decoded, msg.stamp_ns)
                stage["decode"] += time.perf_counter() - t
                pose = poses.at(stamp, topics.pose_tolerance_s)
                if pose is None or not pose.is_finite():
                    report.skipped_no_pose += 1
                    continue
                wp = waypoints.latest()
                depth = depths.nearest(stamp, 0.1)
                kf = Keyframe(f"{episode}/{int(round(stamp * 1e9))}", stamp, episode, pose, image,
                              waypoint_id=wp[1] if wp else "", depth=depth[1] if depth else None,
                              intrinsics=intrinsics)
                t = time.perf_counter()
                selected = selector.push(stamp, image, kf)
                stage["selection"] += time.perf_counter() - t
                handle(selected)
            elif msg.topic == pose_topic:
                decoded = bag.deserialize(msg)
                if topics.odom_topic:
                    pose = pose_from_odometry(decoded)
                    if all(math.isfinite(v) for v in (pose.x, pose.y, pose.z, pose.yaw)):
                        poses.add(stamp_of(decoded, msg.stamp_ns), pose)
                else:
                    for tf in decoded.transforms:
                        if tf.child_frame_id == topics.base_frame:
                            tr, q = tf.transform.translation, tf.transform.rotation
                            poses.add(stamp_of(tf, msg.stamp_ns), Pose(tr.x, tr.y, tr.z,
                                                                       yaw_from_quaternion(q.x, q.y, q.z, q.w),
                                                                       tf.header.frame_id))
            elif msg.topic == topics.camera_info_topic:
                k = bag.deserialize(msg).k
                intrinsics = (float(k[0]), float(k[4]), float(k[2]), float(k[5])) if k[0] > 0 else None
            elif msg.topic == topics.waypoint_topic:
                waypoints.add(msg.stamp_ns * 1e-9, bag.deserialize(msg).data)
            elif msg.topic == topics.depth_topic:
                d = bag.deserialize(msg)
                try:
                    depths.add(stamp_of(d, msg.stamp_ns), decode_depth(d.encoding, d.height, d.width, d.step, d.data))
                except ImageDecodeError as exc:
                    log.warning("depth skipped: %s", exc)
        handle(selector.flush())
        bar.close()
    report.wall_s = time.perf_counter() - start_wall
    report.stage_s = {**stage, **{k: round(v, 3) for k, v in perception.timings.items()}}
    return report
