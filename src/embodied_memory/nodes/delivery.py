"""At-least-once delivery between nodes: a sender keeps every record until its receiver
acknowledges it, and sends it again to a receiver that (re)appears.

The memory acknowledges each observation and identity merge (``embodied_memory_interfaces/Ack``
on ``/memory/acks``: stored, duplicate or rejected); perception acknowledges each keyframe it
queued (accepted) and those it had to drop. The frame selector keeps unacknowledged keyframes
and perception unacknowledged observations and merges:

- when a subscriber of their topic matches (a crashed receiver was respawned; the DDS
  "matched" event, which sees a new receiver even while the dead one's lease has not yet run
  out and the subscriber count stays the same) everything not yet final is sent again,
  accepted records included (they died with it);
- a record neither accepted nor final after ``resend_after_s`` is sent again (lost in a full
  queue), then after 2x, 4x, 8x that (backoff: an overloaded receiver is not flooded); an
  accepted one only after 8x (its receiver may have died and come back unnoticed); the
  receiver answers a record it already handled at once, so nothing is resent forever.

Inserts are idempotent on the id, so a record sent twice is stored once. What cannot be kept
(more than ``max_unacked``) is dropped oldest first and counted. Acks are small and kept
transient-local, so a sender whose ack subscription matches late still gets them.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Callable, Optional

from embodied_memory_interfaces.msg import Ack
from rclpy.event_handler import PublisherEventCallbacks, UnsupportedEventTypeError
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from .health import NodeHealth

ACK_STATUS = {Ack.STORED: "stored", Ack.DUPLICATE: "duplicate", Ack.REJECTED: "rejected", Ack.DROPPED: "dropped",
              Ack.ACCEPTED: "accepted"}
MAX_BACKOFF_STEPS = 3          # resend_after_s * 2**3 at most between timed resends of one record


def ack_qos() -> QoSProfile:
    return QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)


class _Pending:
    __slots__ = ("msg", "sent", "attempts", "accepted")

    def __init__(self, msg, now: float):
        self.msg, self.sent, self.attempts, self.accepted = msg, now, 0, False

    def due(self, now: float, resend_after_s: float) -> bool:
        """Not accepted: after resend_after_s, then 2x, 4x, 8x.  Accepted: only after the longest
        wait (a receiver that died and came back between two looks at its subscriber count)."""
        steps = MAX_BACKOFF_STEPS if self.accepted else min(self.attempts, MAX_BACKOFF_STEPS)
        return now - self.sent >= resend_after_s * 2 ** steps


class AckPublisher:
    """The receiver's side: one Ack per record."""

    def __init__(self, node: Node, topic: str):
        self._node = node
        self._pub = node.create_publisher(Ack, topic, ack_qos())

    def send(self, record_id: str, status: int, reason: str = "") -> None:
        self._pub.publish(Ack(stamp=self._node.get_clock().now().to_msg(), sender=self._node.get_name(),
                              id=record_id, status=status, reason=reason[:500]))


class AcknowledgedPublisher:
    """The sender's side: publishes records and keeps each until an Ack names its id."""

    def __init__(self, node: Node, msg_type, topic: str, qos: QoSProfile, *, acks_topic: str,
                 health: NodeHealth, id_of: Callable[[object], str], what: str,
                 max_unacked: int = 500, resend_after_s: float = 60.0, resend_batch: int = 20,
                 period_s: float = 0.25, on_done: Optional[Callable[[str, int], None]] = None):
        """``on_done(id, status)``: a record was acknowledged for good (stored, duplicate,
        rejected, dropped) and is no longer kept."""
        self._node, self._health, self._id_of, self.what = node, health, id_of, what
        self._on_done = on_done
        self.max_unacked, self.resend_after_s, self.resend_batch = max_unacked, resend_after_s, resend_batch
        self._lock = threading.Lock()
        self._unacked: OrderedDict[str, _Pending] = OrderedDict()
        self._subscribers = 0
        self._matched = False      # a subscription matched since the last tick
        try:
            self._pub = node.create_publisher(msg_type, topic, qos, event_callbacks=PublisherEventCallbacks(
                matched=health.guard(self._on_matched, "matched event")))
        except UnsupportedEventTypeError:   # an rmw without the event: the subscriber count alone
            self._pub = node.create_publisher(msg_type, topic, qos)
        node.create_subscription(Ack, acks_topic, health.guard(self._on_ack, "ack"), ack_qos())
        # wall time (steady): resends must go on when /clock stops (use_sim_time, a replay that ended)
        from .node_clock import steady_clock
        node.create_timer(period_s, health.guard(self._tick, f"{what} resend"), clock=steady_clock())
        health.gauges[f"{what}s_unacknowledged"] = lambda: len(self._unacked)

    @property
    def unacknowledged(self) -> int:
        return len(self._unacked)

    def pending(self, record_id: str) -> bool:
        return record_id in self._unacked

    def get_subscription_count(self) -> int:
        return self._pub.get_subscription_count()

    def publish(self, msg) -> None:
        key = self._id_of(msg)
        with self._lock:
            self._unacked[key] = _Pending(msg, time.monotonic())
            self._unacked.move_to_end(key)
            evicted = 0
            while len(self._unacked) > self.max_unacked:
                self._unacked.popitem(last=False)
                evicted += 1
        if evicted:
            self._health.drop(f"{self.what}_unacknowledged_overflow", f"{evicted} unacknowledged {self.what}(s)", evicted)
        self._pub.publish(msg)
        self._health.count(f"{self.what}s_sent")

    def _on_matched(self, info) -> None:
        if info.total_count_change > 0:
            with self._lock:
                self._matched = True

    def _on_ack(self, ack: Ack) -> None:
        if ack.sender == self._node.get_name():
            return   # our own answer about another stream (perception acks keyframes, sends observations)
        with self._lock:
            if ack.status == Ack.ACCEPTED:
                entry = self._unacked.get(ack.id)
                if entry is not None:
                    entry.accepted = True
                return
            found = self._unacked.pop(ack.id, None) is not None
        if found:
            if self._on_done is not None:
                self._on_done(ack.id, ack.status)
            self._health.count(f"{self.what}s_{ACK_STATUS.get(ack.status, 'acknowledged')}")
            if ack.status in (Ack.REJECTED, Ack.DROPPED):
                self._health.drop(f"{self.what}_{ACK_STATUS[ack.status]}_by_{ack.sender or 'receiver'}",
                                  f"{self.what} {ack.id} ({ack.reason})")

    def _tick(self) -> None:
        subscribers = self._pub.get_subscription_count()
        now = time.monotonic()
        with self._lock:
            appeared, self._matched = subscribers > self._subscribers or self._matched, False
            if appeared and subscribers and self._unacked:
                self._node.get_logger().info(
                    f"a {self.what} receiver appeared ({subscribers} now): sending {len(self._unacked)} "
                    f"unacknowledged {self.what}(s) again")
                for entry in self._unacked.values():   # what it had accepted died with it
                    entry.sent, entry.attempts, entry.accepted = float("-inf"), 0, False
            self._subscribers = subscribers
            if subscribers == 0:
                return
            due = [entry for entry in self._unacked.values() if entry.due(now, self.resend_after_s)]
            due = due[:self.resend_batch]
            for entry in due:
                entry.attempts += 1 if entry.sent != float("-inf") else 0
                entry.sent = now
        for entry in due:
            self._pub.publish(entry.msg)
        if due:
            self._health.count(f"{self.what}s_resent", len(due))
