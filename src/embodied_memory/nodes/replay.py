"""``embodied-memory replay BAG``: play a rosbag2 (sqlite3 or MCAP) into live topics.

Messages are published as the raw CDR stored in the bag (no conversion), at ``rate`` times
real time, as fast as possible (``rate`` 0), or paced by the pipeline (``paced``: at most
``window`` camera frames ahead of what the frame selector has processed).  /clock follows the
bag time.  A corrupt or truncated bag, a missing topic, or a type this machine cannot publish
is reported clearly; nothing waits forever.
"""
from __future__ import annotations

import importlib
import logging
import time
from dataclasses import dataclass, field
from typing import Optional

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ..progress import progress_bar

from ..ingest.bag_reader import Bag, BagError

log = logging.getLogger("embodied_memory.replay")


def message_class(msgtype: str):
    """'sensor_msgs/msg/Image' -> the rclpy class (None if not installed here)."""
    package, _kind, name = msgtype.split("/")
    try:
        return getattr(importlib.import_module(f"{package}.msg"), name)
    except (ImportError, AttributeError):
        return None


@dataclass
class ReplayReport:
    published: dict[str, int] = field(default_factory=dict)
    skipped_topics: dict[str, str] = field(default_factory=dict)
    bag_duration_s: float = 0.0
    wall_s: float = 0.0

    def summary(self) -> str:
        total = sum(self.published.values())
        factor = self.bag_duration_s / self.wall_s if self.wall_s else 0.0
        lines = [f"published {total} messages ({self.bag_duration_s:.1f} s of bag in {self.wall_s:.1f} s, "
                 f"{factor:.2f}x real time)"]
        lines += [f"  {topic}: {n}" for topic, n in sorted(self.published.items())]
        lines += [f"  skipped {topic}: {why}" for topic, why in self.skipped_topics.items()]
        return "\n".join(lines)


def replay(bag_path: str, *, rate: float = 1.0, paced: bool = False, window: int = 3,
           topics: Optional[list[str]] = None, remap: Optional[dict[str, str]] = None, clock: bool = True,
           image_topic: str = "/camera/color/image_raw/compressed", progress_topic: str = "/memory/frames_processed",
           wait_subscribers_s: float = 10.0, stall_timeout_s: float = 60.0, progress: bool = True) -> ReplayReport:
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import UInt64
    remap = remap or {}
    report = ReplayReport()
    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("bag_replay", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
    try:
        with Bag(bag_path) as bag:
            bag_topics = bag.topics
            wanted = topics or list(bag_topics)
            missing = [t for t in wanted if t not in bag_topics]
            if missing:
                raise BagError(f"{bag_path}: topic(s) {', '.join(missing)} not in the bag; it has "
                               + ", ".join(sorted(bag_topics)))
            publishers = {}
            for topic in wanted:
                cls = message_class(bag_topics[topic].msgtype)
                if cls is None:
                    report.skipped_topics[topic] = f"type {bag_topics[topic].msgtype} is not installed here"
                    log.warning("skipping %s: %s", topic, report.skipped_topics[topic])
                    continue
                publishers[topic] = node.create_publisher(cls, remap.get(topic, topic), qos)
            clock_pub = node.create_publisher(Clock, "/clock", 10) if clock and "/clock" not in publishers else None
            processed = [0]
            if paced:
                node.create_subscription(UInt64, progress_topic, lambda m: processed.__setitem__(0, m.data), qos)
            # wait (bounded) for the pipeline to subscribe, so the first frames are not lost
            main_topic = remap.get(image_topic, image_topic)
            main_pub = publishers.get(image_topic)
            deadline = time.monotonic() + wait_subscribers_s
            while main_pub is not None and main_pub.get_subscription_count() == 0 and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.05)
            if main_pub is not None and main_pub.get_subscription_count() == 0:
                log.warning("nobody subscribes to %s after %.0f s: replaying anyway", main_topic, wait_subscribers_s)
            report.bag_duration_s = bag.duration_s
            total = sum(bag_topics[t].count for t in publishers)
            bar = progress_bar(total=total, desc=f"replay {bag.path.name}", unit="msg", disable=not progress)
            start_wall, start_bag = time.monotonic(), None
            images_sent = 0
            for msg in bag.messages(list(publishers)):
                if start_bag is None:
                    start_bag = msg.stamp_ns
                if rate > 0 and not paced:
                    due = start_wall + (msg.stamp_ns - start_bag) * 1e-9 / rate
                    while time.monotonic() < due:
                        executor.spin_once(timeout_sec=min(0.05, max(0.0, due - time.monotonic())))
                if paced and msg.topic == image_topic:
                    stalled_since = time.monotonic()
                    while images_sent - processed[0] >= window:
                        executor.spin_once(timeout_sec=0.05)
                        if time.monotonic() - stalled_since > stall_timeout_s:
                            raise BagError(f"the pipeline processed no frame for {stall_timeout_s:.0f} s "
                                           f"({processed[0]} of {images_sent}); is the frame selector running?")
                    images_sent += 1
                publishers[msg.topic].publish(msg.rawdata)
                report.published[msg.topic] = report.published.get(msg.topic, 0) + 1
                if clock_pub is not None:
                    sec, nsec = divmod(msg.stamp_ns, 1_000_000_000)
                    clock_pub.publish(Clock(clock=rclpy.time.Time(seconds=sec, nanoseconds=nsec).to_msg()))
                bar.update(1)
                executor.spin_once(timeout_sec=0.0)
            bar.close()
            for pub in publishers.values():  # reliable delivery of what is still queued
                pub.wait_for_all_acked(rclpy.duration.Duration(seconds=5.0))
            report.wall_s = time.monotonic() - start_wall
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
    return report
