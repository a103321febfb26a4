"""The whole ingest as a library call: bag -> sync -> keyframe selection -> perception -> store.

The nodes (frame_selector, perception, memory) run the same core over DDS; this path runs it
in one process for tests, benchmarks and batch imports, and reports where the time goes.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..progress import progress_bar

from ..types import Keyframe, Observation
from .bag_reader import Bag, BagError
from .images import ImageDecodeError, decode_depth, decode_image_msg, pixel_intrinsics
from .selection import FrameSelector, SelectionParams
from .sync import DepthPairing, FramePoser, PosedFrame, TimeBuffer, odometry_transform, tf_transform
from .transforms import Transform, TransformBuffer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicParams:
    """Which topics carry what (ReMEmbR users' first question: which topics?)."""

    image_topic: str = "/camera/color/image_raw/compressed"   # sensor_msgs Image or CompressedImage
    depth_topic: str = ""                                     # optional, 16UC1 mm or 32FC1 m, registered to
                                                              # the colour image (any size): where people stood
    camera_info_topic: str = ""                               # the colour camera's CameraInfo (its pixels)
    odom_topic: str = "/odom"                                 # nav_msgs/Odometry, optional: its pose is one
                                                              # more transform (header.frame_id <- child_frame_id)
    tf_topic: str = "/tf"                                     # tf2_msgs/TFMessage (dynamic transforms)
    tf_static_topic: str = "/tf_static"                       # static transforms (transient local), kept forever
    fixed_frame: str = "odom"                                 # poses are base_frame in this frame at the image's
                                                              # stamp: odom | map (Nav2/AMCL) | spot/odom, spot/vision
    base_frame: str = "base_link"                             # the robot frame (Spot: spot/body)
    transform_wait_s: float = 1.0                             # a frame waits this long for its transform, then
                                                              # is stored with the waypoint only (counted)
    tf_cache_s: float = 10.0                                  # dynamic transforms kept this long (as tf2)
    waypoint_topic: str = "/waypoint"                         # std_msgs/String (GraphNav waypoint id), optional
    pose_tolerance_s: float = 0.25                            # a frame this close to a NaN/inf pose is dropped

    def check_frames(self) -> None:
        if not self.fixed_frame or not self.base_frame:
            raise ValueError("fixed_frame and base_frame must be frame ids (e.g. odom, base_link)")
        if self.fixed_frame.startswith("/") or self.base_frame.startswith("/"):
            raise ValueError("fixed_frame / base_frame: tf2 frame ids do not start with '/'")
        if self.fixed_frame == self.base_frame:
            raise ValueError(f"fixed_frame and base_frame are both {self.fixed_frame!r}")
        if self.transform_wait_s < 0 or not self.tf_cache_s > 0 or self.pose_tolerance_s < 0:
            raise ValueError("transform_wait_s and pose_tolerance_s must be >= 0, tf_cache_s > 0")


@dataclass
class IngestReport:
    bag: str
    bag_duration_s: float = 0.0
    frames: int = 0
    keyframes: int = 0
    stored: int = 0
    skipped_no_pose: int = 0            # dropped: the pose there had NaN/inf
    without_pose: int = 0               # no transform in time: selected and stored without a pose
    skipped_bad_image: int = 0
    idle_passes: int = 0                # on_idle calls (idle gaps in the recording)
    wall_s: float = 0.0
    stage_s: dict[str, float] = field(default_factory=dict)

    @property
    def realtime_factor(self) -> float:
        return self.bag_duration_s / self.wall_s if self.wall_s else float("inf")

    def summary(self) -> str:
        stages = ", ".join(f"{k} {v:.1f}s" for k, v in sorted(self.stage_s.items(), key=lambda kv: -kv[1]))
        return (f"{self.bag}: {self.frames} frames over {self.bag_duration_s:.1f} s -> {self.keyframes} keyframes, "
                f"{self.stored} stored in {self.wall_s:.1f} s (real-time factor {self.realtime_factor:.2f}); "
                f"{self.without_pose} frames without pose; skipped {self.skipped_no_pose} with a NaN/inf pose, "
                f"{self.skipped_bad_image} undecodable; {stages}")


def stamp_of(msg, fallback_ns: int) -> float:
    header = getattr(msg, "header", None)
    if header is not None and (header.stamp.sec or header.stamp.nanosec):
        return header.stamp.sec + header.stamp.nanosec * 1e-9
    return fallback_ns * 1e-9


def ingest_bag(bag_path: str, store, perception, *, topics: TopicParams = TopicParams(),
               selection: SelectionParams = SelectionParams(), episode_id: Optional[str] = None,
               progress: bool = True, describe_segments: bool = False,
               annotate: Optional[Callable[[Observation], None]] = None,
               on_idle: Optional[Callable[[], None]] = None, idle_s: float = 0.0, ids=None) -> IngestReport:
    """Replay ``bag_path`` through selection and perception into ``store`` (a MemoryStore).
    ``annotate`` may edit each observation before it is stored (labelled ablations only, e.g.
    the simulator's ground-truth object descriptions).  ``on_idle`` runs wherever the recording
    shows no keyframe for ``idle_s`` seconds (the robot idle: what a live stack does then, such as
    perception's attach pass), before the next keyframe is perceived.  ``ids``: a robot's
    ``fleet.ids.FleetIds`` on a fleet's memory (its records and identities qualified as the
    memory node qualifies them)."""
    from ..store.image_files import insert_with_images   # params imports this module: store later
    start_wall = time.perf_counter()
    report = IngestReport(bag=str(bag_path))
    topics.check_frames()
    poser: FramePoser[Keyframe] = FramePoser(TransformBuffer(topics.tf_cache_s), topics.fixed_frame,
                                             topics.base_frame, topics.transform_wait_s,
                                             non_finite_tolerance_s=topics.pose_tolerance_s)
    waypoints, depths = TimeBuffer[str](), DepthPairing()
    camera_info = None
    embed = (lambda im: perception.embedder.embed([im])[0]) if selection.policy == "similarity" else None
    selector = FrameSelector(selection, embed)
    stage = {"decode": 0.0, "selection": 0.0, "store": 0.0}
    with Bag(bag_path) as bag:
        pose_topics = [t for t in (topics.odom_topic, topics.tf_topic, topics.tf_static_topic) if t in bag.topics]
        if not pose_topics:
            raise BagError(f"{bag.path}: no pose source ({topics.odom_topic or '-'}, {topics.tf_topic or '-'}, "
                           f"{topics.tf_static_topic or '-'}) in the bag; it has " + ", ".join(sorted(bag.topics)))
        present = bag.check_topics([topics.image_topic, topics.depth_topic, topics.waypoint_topic,
                                    topics.camera_info_topic], required=[topics.image_topic]) + pose_topics
        report.bag_duration_s = bag.duration_s
        episode = episode_id or bag.path.stem
        total = bag.topics[topics.image_topic].count
        bar = progress_bar(total=total, desc=f"ingest {bag.path.name}", unit="frame", disable=not progress)

        last_keyframe = None      # the stamp of the last keyframe handled

        def handle(selected):
            nonlocal last_keyframe
            if not selected:
                return
            keyframes = [s.payload for s in selected]
            if on_idle is not None and idle_s > 0 and last_keyframe is not None and \
                    keyframes[0].stamp - last_keyframe >= idle_s:
                t = time.perf_counter()
                try:
                    on_idle()
                    report.idle_passes += 1
                except Exception:  # noqa: BLE001 - what runs when idle never stops the ingest
                    log.exception("the idle pass at %.1f failed; ingest goes on", keyframes[0].stamp)
                stage["on_idle"] = stage.get("on_idle", 0.0) + time.perf_counter() - t
            last_keyframe = keyframes[-1].stamp
            for kf, s in zip(keyframes, selected):
                kf.segment_id, kf.selection_score = s.segment_id, s.score
            observations = perception.process(keyframes, describe_together=describe_segments)
            for obs in observations:
                if ids is not None:
                    ids.qualify(obs)
                if annotate is not None:
                    annotate(obs)
            t = time.perf_counter()
            report.stored += len(insert_with_images(store, observations).stored)
            stage["store"] += time.perf_counter() - t
            report.keyframes += len(keyframes)
            for absorbed, survivor in perception.take_merges():
                if ids is not None:
                    absorbed, survivor = ids.identity(absorbed), ids.identity(survivor)
                store.merge_identities(absorbed, survivor)

        def posed(frames: list[PosedFrame[Keyframe]]) -> None:
            for f in frames:
                if f.pose is None and f.non_finite:
                    report.skipped_no_pose += 1
                    continue
                kf = f.payload
                kf.pose = f.pose
                if f.pose is None:
                    report.without_pose += 1
                    if report.without_pose in (1, 10, 100) or report.without_pose % 1000 == 0:
                        log.warning("frame at %.3f stored without a pose (%d so far): %s", f.stamp,
                                    report.without_pose, f.reason)
                t = time.perf_counter()
                selected = selector.push(f.stamp, kf.image, kf)
                stage["selection"] += time.perf_counter() - t
                handle(selected)

        def add_transform(parent: str, child: str, stamp: float, transform: Transform, static: bool) -> None:
            try:
                poser.add_transform(parent, child, stamp, transform, static)
            except ValueError as exc:
                log.warning("transform %s <- %s at %.3f rejected: %s", parent, child, stamp, exc)

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
                wp = waypoints.latest()
                kf = Keyframe(f"{episode}/{int(round(stamp * 1e9))}", stamp, episode, None, image,
                              waypoint_id=wp[1] if wp else "",
                              intrinsics=pixel_intrinsics(camera_info, (image.shape[1], image.shape[0]))
                              if camera_info is not None else None)
                if topics.depth_topic:
                    depths.on_frame(stamp, lambda metres, kf=kf: setattr(kf, "depth", metres))
                posed(poser.add_frame(stamp, kf, msg.stamp_ns * 1e-9))   # waits in bag time
            elif msg.topic == topics.odom_topic:
                decoded = bag.deserialize(msg)
                parent, child, transform = odometry_transform(decoded, topics.base_frame)
                add_transform(parent, child, stamp_of(decoded, msg.stamp_ns), transform, False)
            elif msg.topic in (topics.tf_topic, topics.tf_static_topic):
                for tf in bag.deserialize(msg).transforms:
                    add_transform(tf.header.frame_id, tf.child_frame_id, stamp_of(tf, msg.stamp_ns), tf_transform(tf),
                                  msg.topic == topics.tf_static_topic)
            elif msg.topic == topics.camera_info_topic:
                camera_info = bag.deserialize(msg)
            elif msg.topic == topics.waypoint_topic:
                waypoints.add(msg.stamp_ns * 1e-9, bag.deserialize(msg).data)
            elif msg.topic == topics.depth_topic:
                d = bag.deserialize(msg)
                try:
                    depth_stamp, metres = stamp_of(d, msg.stamp_ns), decode_depth(d.encoding, d.height, d.width,
                                                                                   d.step, d.data)
                except ImageDecodeError as exc:
                    log.warning("depth skipped: %s", exc)
                else:
                    depths.on_depth(depth_stamp, metres)
            if len(poser):
                posed(poser.poll(msg.stamp_ns * 1e-9))
        posed(poser.flush())
        handle(selector.flush())
        bar.close()
    report.wall_s = time.perf_counter() - start_wall
    report.stage_s = {**stage, **{k: round(v, 3) for k, v in perception.timings.items()}}
    return report
