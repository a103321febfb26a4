"""``embodied-memory replay BAG``: play a rosbag2 (sqlite3 or MCAP) into live topics.

Messages are published as the raw CDR stored in the bag (no conversion), at ``rate`` times
real time, as fast as possible (``rate`` 0), or paced by the pipeline (``paced``: at most
``window`` camera frames ahead of what the frame selector has processed).  A corrupt or
truncated bag, a missing topic, or a type this machine cannot publish is reported clearly;
nothing waits forever.

/clock (rosgraph_msgs/Clock, as ``ros2 bag play --clock``) follows the bag time, so nodes
started with ``use_sim_time: true`` take the bag's time as "now" and stay there once the replay
ends.  A bag that recorded /clock is replayed as it is; otherwise each message's bag time is
published just before the message, and while the replay waits for the next one (``rate`` > 0)
the time in between at ``clock_hz``.  The publisher is RELIABLE, VOLATILE, depth 1: it matches
rclpy's and rclcpp's best-effort /clock subscriptions and reliable ones, and the last bag time
is delivered.  Before playing, the replay waits (within ``--wait``) until the number of /clock
subscribers has been stable for a second, and at the end it sends the final bag time once more
(for a node discovered while the bag played); a node started after the replay gets no /clock.

The frame selector acknowledges frames with a counter (std_msgs/UInt64 on ``progress_topic``:
the frames it has taken since it started).  A restarted frame selector counts from 0 again:
the replay re-bases on a decrease (or a new publisher), stops waiting for the frames that were
in flight to the node that died, and reports every frame the pipeline never acknowledged
(``frames_unacknowledged``).  Damaged parts of the bag are skipped, everything else is
replayed, and the damage is reported (``corrupt_chunks``).
"""
from __future__ import annotations

import importlib
import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from ..progress import progress_bar

from ..ingest.bag_reader import Bag, BagError, CorruptChunk

log = logging.getLogger("embodied_memory.replay")
# /clock: depth 1 (only the latest time matters), reliable (matches best-effort and reliable
# subscribers; the final bag time is not lost), volatile (rclpy/rclcpp subscribe volatile)
CLOCK_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
# before playing, wait (within wait_subscribers_s, at most CLOCK_SETTLE_MAX_S) until the number
# of /clock subscribers has been stable for CLOCK_SETTLE_S: nodes discovered late miss the start
CLOCK_SETTLE_S = 1.0
CLOCK_SETTLE_MAX_S = 5.0
# /tf_static as tf2's static broadcaster (and `ros2 bag play`) offers it: transient local, so
# tf listeners (which subscribe transient local) match it and late joiners still get it
STATIC_TF_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)


def message_class(msgtype: str):
    """'sensor_msgs/msg/Image' -> the rclpy class (None if not installed here)."""
    package, _kind, name = msgtype.split("/")
    try:
        return getattr(importlib.import_module(f"{package}.msg"), name)
    except (ImportError, AttributeError):
        return None


class FrameAcks:
    """The camera frames a replay sent and those the pipeline acknowledged, from the frame
    selector's counter of frames taken since it started.

    The counter starts again from 0 when the node restarts: a value below the last one (or a
    message from another publisher) is a restart: the count is re-based and the frames that
    were in flight to the node that died are given up for pacing (they stay unacknowledged).
    ``first_is_ours``: the counter was matched before the first frame was sent, so its first
    value acknowledges that frame (a counter that was already running, from an earlier
    replay, is offset); else the first value is assumed to cover every frame sent so far.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self.sent = 0
        self.restarts = 0
        self.seen = False
        self.first_is_ours = True
        self.healthy = True          # False after giving up on frames, until the counter moves
        self._done = 0               # acknowledged by earlier runs of the node
        self._offset = 0             # the current run's count before this replay's frames
        self._count = 0              # the current run's last value
        self._publisher = None
        self._given_up = 0           # frames pacing no longer waits for
        self.last_progress = self._last_give_up = self._busy_since = clock()

    @property
    def acknowledged(self) -> int:
        return min(self.sent, self._done + max(0, self._count - self._offset))

    @property
    def unacknowledged(self) -> int:
        return max(0, self.sent - self.acknowledged)

    @property
    def in_flight(self) -> int:
        """Frames sent and still waited for."""
        return max(0, self.sent - self.acknowledged - self._given_up)

    def sent_one(self) -> None:
        if self.healthy and self.in_flight == 0:   # waiting starts now, not at the last progress
            self._busy_since = self._clock()
        self.sent += 1

    def update(self, value: int, publisher=None) -> bool:
        """A counter message; True when it shows that the node restarted."""
        restarted = False
        if not self.seen:
            self.seen = True
            if self.sent == 0:   # a count from before this replay (e.g. an earlier one)
                self._offset = value
            else:
                self._offset = max(0, value - 1) if self.first_is_ours else max(0, value - self.sent)
        elif value < self._count or (publisher is not None and self._publisher is not None
                                     and publisher != self._publisher):
            restarted = True
            self.restarts += 1
            self._done = self.acknowledged
            self._offset = 0
            # what the node that died had not acknowledged is lost: do not wait for it
            self._given_up = max(0, self.sent - self._done - value)
        self._count = value
        if publisher is not None:
            self._publisher = publisher
        self._given_up = min(self._given_up, max(0, self.sent - self.acknowledged))
        self.last_progress = self._clock()
        self.healthy = True
        return restarted

    def give_up(self) -> int:
        """Stop waiting for the frames in flight (no acknowledgement came); how many."""
        n = self.in_flight
        self._given_up = max(0, self.sent - self.acknowledged)
        self._last_give_up = self._clock()
        self.healthy = False
        return n

    def waited_s(self) -> float:
        """Seconds waited for the frames in flight: since the counter last moved, pacing last
        gave up, or a frame was sent with nothing in flight."""
        return self._clock() - max(self.last_progress, self._last_give_up, self._busy_since)

    def silent_s(self) -> float:
        """Seconds the pipeline has not acknowledged anything while frames were due (giving
        up on frames does not restart this)."""
        return self._clock() - max(self.last_progress, self._busy_since)


@dataclass
class ReplayReport:
    published: dict[str, int] = field(default_factory=dict)
    skipped_topics: dict[str, str] = field(default_factory=dict)
    bag_duration_s: float = 0.0
    wall_s: float = 0.0
    frames_sent: int = 0                            # camera frames published
    frames_acknowledged: Optional[int] = None       # None: no frame selector counter was seen
    frames_unacknowledged: Optional[int] = None     # sent, never acknowledged by the pipeline
    pipeline_restarts: int = 0                      # frame selector restarts seen
    corrupt_chunks: list[CorruptChunk] = field(default_factory=list)   # unreadable parts of the bag

    @property
    def messages_lost(self) -> Optional[int]:
        """Messages lost to bag damage (None: some loss cannot be counted)."""
        counts = [c.messages_lost for c in self.corrupt_chunks]
        return None if any(n is None for n in counts) else sum(counts)

    def summary(self) -> str:
        total = sum(self.published.values())
        factor = self.bag_duration_s / self.wall_s if self.wall_s else 0.0
        lines = [f"published {total} messages ({self.bag_duration_s:.1f} s of bag in {self.wall_s:.1f} s, "
                 f"{factor:.2f}x real time)"]
        lines += [f"  {topic}: {n}" for topic, n in sorted(self.published.items())]
        lines += [f"  skipped {topic}: {why}" for topic, why in self.skipped_topics.items()]
        if self.frames_unacknowledged is None:
            if self.frames_sent:
                lines.append(f"frames: {self.frames_sent} sent; no frame selector acknowledged any")
        else:
            restarts = (f" (the frame selector restarted {self.pipeline_restarts} time(s))"
                        if self.pipeline_restarts else "")
            lines.append(f"frames: {self.frames_sent} sent, {self.frames_acknowledged} acknowledged by the "
                         f"pipeline, frames_unacknowledged {self.frames_unacknowledged}{restarts}")
        if self.corrupt_chunks:
            lost = self.messages_lost
            lines.append(f"corrupt bag: {len(self.corrupt_chunks)} unreadable part(s), "
                         f"{'an unknown number of' if lost is None else lost} message(s) lost (not replayed):")
            lines += [f"  {c.describe()}" for c in self.corrupt_chunks]
        return "\n".join(lines)


def _publisher_key(info) -> Optional[str]:
    gid = info.get("publisher_gid") if isinstance(info, dict) else None
    return repr(gid) if gid else None


SHARED_TOPICS = ("/tf", "/tf_static", "/clock")   # one per ROS graph, whatever the robot namespaces


def replay(bag_path: str, *, rate: float = 1.0, paced: bool = False, window: int = 3,
           topics: Optional[list[str]] = None, remap: Optional[dict[str, str]] = None, clock: bool = True,
           image_topic: str = "/camera/color/image_raw/compressed", progress_topic: str = "memory/frames_processed",
           wait_subscribers_s: float = 10.0, stall_timeout_s: float = 60.0, ack_timeout_s: float = 5.0,
           progress: bool = True, clock_hz: float = 20.0, namespace: str = "") -> ReplayReport:
    """Play ``bag_path`` into live topics.  Paced: at most ``window`` frames unacknowledged;
    when no acknowledgement comes for ``ack_timeout_s`` (the frame selector died) the frames in
    flight are given up and one frame at a time is sent until the counter moves again; no
    acknowledgement at all for ``stall_timeout_s`` is an error.  At the end the replay waits
    (up to ``ack_timeout_s`` without progress) for the last acknowledgements.  ``namespace``: into
    one robot's stack (``launch --namespace``): the bag's topics are published under it (/camera/x
    as /NS/camera/x), except /tf, /tf_static and /clock, which every robot shares."""
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import UInt64
    remap = remap or {}
    report = ReplayReport()
    acks = FrameAcks()
    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("bag_replay", context=context, namespace="/" + namespace.strip("/"))

    def published_as(topic: str) -> str:
        name = remap.get(topic, topic)
        return name.lstrip("/") if namespace.strip("/") and name not in SHARED_TOPICS else name
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)

    def on_progress(msg, info) -> None:
        if acks.update(int(msg.data), _publisher_key(info)):
            log.warning("the frame selector restarted (its counter went back to %d): %d frame(s) sent to it "
                        "were never acknowledged so far", msg.data, acks.unacknowledged)

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
                publishers[topic] = node.create_publisher(cls, published_as(topic),
                                                          STATIC_TF_QOS if topic == "/tf_static" else qos)
            clock_pub = node.create_publisher(Clock, "/clock", CLOCK_QOS) if clock and "/clock" not in publishers \
                else None
            clock_at = {"ns": -1, "wall": 0.0}

            def publish_clock(stamp_ns: int) -> None:
                """Bag time on /clock; never backwards (bag messages are in time order)."""
                if clock_pub is None or stamp_ns <= clock_at["ns"]:
                    return
                sec, nsec = divmod(stamp_ns, 1_000_000_000)
                clock_pub.publish(Clock(clock=rclpy.time.Time(seconds=sec, nanoseconds=nsec).to_msg()))
                clock_at["ns"], clock_at["wall"] = stamp_ns, time.monotonic()
            progress_sub = node.create_subscription(UInt64, progress_topic, on_progress, qos)
            # wait (bounded) for the pipeline to subscribe, so the first frames are not lost,
            # and (paced) for its counter, so that its first value can be read right
            main_topic = published_as(image_topic)
            main_pub = publishers.get(image_topic)
            deadline = time.monotonic() + wait_subscribers_s

            def waiting() -> bool:
                if main_pub is None:
                    return False
                return main_pub.get_subscription_count() == 0 or (paced and progress_sub.get_publisher_count() == 0)
            while waiting() and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.05)
            if main_pub is not None and main_pub.get_subscription_count() == 0:
                log.warning("nobody subscribes to %s after %.0f s: replaying anyway", main_topic, wait_subscribers_s)
            any_clock = clock_pub if clock_pub is not None else publishers.get("/clock")
            if any_clock is not None and main_pub is not None:   # a /clock sent before a node matched is lost
                _settle(executor, any_clock.get_subscription_count, min(deadline, time.monotonic() + CLOCK_SETTLE_MAX_S))
            acks.first_is_ours = progress_sub.get_publisher_count() > 0
            report.bag_duration_s = bag.duration_s
            total = sum(bag_topics[t].count for t in publishers)
            bar = progress_bar(total=total, desc=f"replay {bag.path.name}", unit="msg", disable=not progress)
            start_wall, start_bag = time.monotonic(), None
            for msg in bag.messages(list(publishers)):
                if start_bag is None:
                    start_bag = msg.stamp_ns
                if rate > 0 and not paced:
                    due = start_wall + (msg.stamp_ns - start_bag) * 1e-9 / rate
                    while time.monotonic() < due:
                        executor.spin_once(timeout_sec=min(0.05, max(0.0, due - time.monotonic())))
                        if clock_hz > 0 and time.monotonic() - clock_at["wall"] >= 1.0 / clock_hz:
                            between = start_bag + int((time.monotonic() - start_wall) * rate * 1e9)
                            publish_clock(min(between, msg.stamp_ns))
                if msg.topic == image_topic:
                    if paced:
                        _wait_for_acks(executor, acks, window, stall_timeout_s, ack_timeout_s)
                    acks.sent_one()
                publish_clock(msg.stamp_ns)       # first: a node sees "now" >= the message's time
                publishers[msg.topic].publish(msg.rawdata)
                report.published[msg.topic] = report.published.get(msg.topic, 0) + 1
                bar.update(1)
                executor.spin_once(timeout_sec=0.0)
            bar.close()
            for pub in [*publishers.values(), *([clock_pub] if clock_pub is not None else [])]:
                # reliable delivery of what is still queued (the last bag time included)
                pub.wait_for_all_acked(rclpy.duration.Duration(seconds=5.0))
            if acks.sent and (paced or acks.seen):  # the last acknowledgements
                while acks.unacknowledged and acks.waited_s() < ack_timeout_s:
                    executor.spin_once(timeout_sec=0.05)
            if clock_pub is not None and clock_at["ns"] >= 0:
                # a node that matched /clock while the bag played (discovery is slow on a loaded
                # machine) would otherwise end with no time at all: the final bag time once more
                _settle(executor, clock_pub.get_subscription_count, time.monotonic() + CLOCK_SETTLE_MAX_S)
                sec, nsec = divmod(clock_at["ns"], 1_000_000_000)
                clock_pub.publish(Clock(clock=rclpy.time.Time(seconds=sec, nanoseconds=nsec).to_msg()))
                clock_pub.wait_for_all_acked(rclpy.duration.Duration(seconds=5.0))
            report.wall_s = time.monotonic() - start_wall
            report.corrupt_chunks = list(bag.corrupt_chunks)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
    report.frames_sent = acks.sent
    report.pipeline_restarts = acks.restarts
    if acks.seen:
        report.frames_acknowledged, report.frames_unacknowledged = acks.acknowledged, acks.unacknowledged
    if report.frames_unacknowledged:
        log.warning("%d of %d frame(s) were never acknowledged by the pipeline", report.frames_unacknowledged,
                    report.frames_sent)
    return report


def _settle(executor, count: Callable[[], int], deadline: float) -> None:
    """Spin until ``count()`` (subscribers of /clock) has not changed for CLOCK_SETTLE_S (every
    node with use_sim_time matched, as far as discovery can tell), at most until ``deadline``."""
    last, since = count(), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - since < CLOCK_SETTLE_S:
        executor.spin_once(timeout_sec=0.05)
        if count() != last:
            last, since = count(), time.monotonic()


def _wait_for_acks(executor, acks: FrameAcks, window: int, stall_timeout_s: float, ack_timeout_s: float) -> None:
    """Paced: spin until fewer than ``window`` frames are in flight (one after giving up)."""
    while acks.in_flight >= (window if acks.healthy else 1):
        executor.spin_once(timeout_sec=0.05)
        if acks.silent_s() > stall_timeout_s:
            raise BagError(f"the pipeline acknowledged no frame for {stall_timeout_s:.0f} s ({acks.acknowledged} "
                           f"of {acks.sent}); is the frame selector running?")
        if acks.in_flight and acks.waited_s() > ack_timeout_s:
            n = acks.give_up()
            log.warning("no acknowledgement from the frame selector for %.0f s: %d frame(s) in flight given up "
                        "(did it restart?); sending one frame at a time until it acknowledges again",
                        ack_timeout_s, n)
