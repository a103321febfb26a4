"""Sensor subscriptions that connect to camera drivers and bag players alike, and say so when not.

A camera driver publishes images best-effort (``qos_profile_sensor_data``); a bag player or a
relay usually publishes reliable. A RELIABLE subscription never matches a BEST_EFFORT publisher
(DDS "requested incompatible QoS: RELIABILITY") and, without a warning on our side, the node
just receives nothing. Parameter ``sensor_qos`` picks the subscription's policy:

- ``sensor_data`` (default): BEST_EFFORT, VOLATILE, KEEP_LAST depth. Matches best-effort *and*
  reliable publishers (a reliable publisher serves a best-effort reader best-effort).
- ``reliable``: RELIABLE, VOLATILE, KEEP_LAST depth. Matches only reliable publishers (a bag
  player, a relay); no sample that reached the reader is lost to the network, so use it when
  every frame must be seen (offline replay at full speed, evaluation runs).

:class:`SensorSubscriptions` creates such subscriptions, counts messages per topic (health gauges
``topic.<name>.messages`` and ``topic.<name>.rate_hz``), logs an incompatible-QoS event naming the
topic, the mismatched policy and the parameter to change, and warns once (until messages
arrive again) when a topic has publishers but nothing arrived for ``warn_after_s``.
"""
from __future__ import annotations

import inspect
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from rclpy.event_handler import QoSRequestedIncompatibleQoSInfo, SubscriptionEventCallbacks
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_policy_name_from_kind
from rclpy.subscription import Subscription

from .node_clock import steady_clock

from ..params import SENSOR_QOS_CHOICES

__all__ = ["SENSOR_QOS_CHOICES", "SensorSubscriptions", "sensor_qos"]

MAX_KEPT_WARNINGS = 100


def sensor_qos(policy: str, depth: int = 10) -> QoSProfile:
    """The subscription QoS of a camera/depth/camera-info/odometry topic (see module doc)."""
    if policy not in SENSOR_QOS_CHOICES:
        raise ValueError(f"sensor_qos: unknown '{policy}' ({' | '.join(SENSOR_QOS_CHOICES)})")
    if depth < 1:
        raise ValueError("sensor_qos depth: must be >= 1")
    reliability = ReliabilityPolicy.BEST_EFFORT if policy == "sensor_data" else ReliabilityPolicy.RELIABLE
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=reliability,
                      durability=DurabilityPolicy.VOLATILE)


def _describe(qos: QoSProfile) -> str:
    return f"{qos.reliability.name}/{qos.durability.name}"


@dataclass
class _Topic:
    topic: str
    policy: str
    qos: QoSProfile
    created: float
    messages: int = 0
    last_message: float | None = None
    publishers_since: float | None = None     # when publishers were first seen (since the last message)
    warned: bool = False
    incompatible: int = 0
    rate_hz: float = 0.0
    _rate_count: int = 0
    _rate_time: float = field(default_factory=time.monotonic)


class SensorSubscriptions:
    """Sensor subscriptions of one node, with QoS-mismatch warnings and per-topic counts."""

    def __init__(self, node: Node, health=None, warn_after_s: float = 5.0):
        if not warn_after_s > 0:
            raise ValueError("warn_after_s: must be > 0")
        self.node = node
        self.health = health                   # nodes/health.NodeHealth or None
        self.warn_after_s = warn_after_s
        self.warnings: list[str] = []          # the last MAX_KEPT_WARNINGS warnings (status, tests)
        self._lock = threading.Lock()
        self._topics: dict[str, _Topic] = {}
        # steady clock: a paused bag (sim time standing still) must not silence the check
        self._timer = node.create_timer(warn_after_s, self._check, clock=steady_clock())

    def subscribe(self, msg_type, topic: str, callback: Callable, policy: str, depth: int = 10,
                  callback_group=None) -> Subscription:
        """``create_subscription`` with :func:`sensor_qos` (``policy``, ``depth``), counted and watched."""
        qos = sensor_qos(policy, depth)
        entry = _Topic(topic=topic, policy=policy, qos=qos, created=time.monotonic())

        def on_incompatible(event: QoSRequestedIncompatibleQoSInfo) -> None:
            self._on_incompatible(entry, event)

        sub = self.node.create_subscription(
            msg_type, topic, self._counted(entry, callback), qos, callback_group=callback_group,
            event_callbacks=SubscriptionEventCallbacks(incompatible_qos=on_incompatible))
        entry.topic = sub.topic_name            # resolved and remapped: what the graph knows
        with self._lock:
            self._topics[entry.topic] = entry
        if self.health is not None:
            key = f"topic.{entry.topic.lstrip('/')}"
            self.health.gauges[f"{key}.messages"] = lambda: entry.messages
            self.health.gauges[f"{key}.rate_hz"] = lambda: round(entry.rate_hz, 2)
        return sub

    # -- counting ------------------------------------------------------------------------
    def _counted(self, entry: _Topic, callback: Callable) -> Callable:
        def seen() -> None:
            with self._lock:
                entry.messages += 1
                entry.last_message = time.monotonic()
                entry.publishers_since = None
                entry.warned = False

        try:   # keep the callback's shape: rclpy passes MessageInfo to two-argument callbacks
            inspect.signature(callback).bind(object())
            takes_info = False
        except TypeError:
            takes_info = True
        if takes_info:
            def counted_with_info(msg, info):
                seen()
                return callback(msg, info)
            return counted_with_info

        def counted(msg):
            seen()
            return callback(msg)
        return counted

    def messages(self, topic: str) -> int:
        """Messages received on ``topic`` (resolved name, or as given to :meth:`subscribe`)."""
        entry = self._find(topic)
        return entry.messages if entry else 0

    def incompatible(self, topic: str) -> int:
        """Incompatible-QoS events seen on ``topic``."""
        entry = self._find(topic)
        return entry.incompatible if entry else 0

    def _find(self, topic: str) -> _Topic | None:
        with self._lock:
            if topic in self._topics:
                return self._topics[topic]
            return next((e for name, e in self._topics.items() if name.lstrip("/") == topic.lstrip("/")), None)

    # -- warnings --------------------------------------------------------------------------
    def _warn(self, text: str) -> None:
        with self._lock:
            self.warnings.append(text)
            del self.warnings[:-MAX_KEPT_WARNINGS]
        self.node.get_logger().warning(text)

    def _on_incompatible(self, entry: _Topic, event: QoSRequestedIncompatibleQoSInfo) -> None:
        policy_name = qos_policy_name_from_kind(event.last_policy_kind)
        with self._lock:
            entry.incompatible += 1
        if self.health is not None:
            self.health.count("sensor_qos.incompatible")
            self.health.count(f"sensor_qos.incompatible.{entry.topic.lstrip('/')}")
        other = "reliable" if entry.policy == "sensor_data" else "sensor_data"
        self._warn(f"incompatible QoS on {entry.topic}: a publisher does not offer the {policy_name} this "
                   f"subscription requests (sensor_qos: {entry.policy} = {_describe(entry.qos)}; "
                   f"{event.total_count} incompatible publisher(s) so far); no message from it will arrive. "
                   f"Set parameter sensor_qos: {other}" + (" (connects to best-effort and reliable publishers)"
                                                            if other == "sensor_data" else ""))

    def _check(self) -> None:
        now = time.monotonic()
        with self._lock:
            entries = list(self._topics.values())
        for entry in entries:
            with self._lock:      # rate over the last period
                elapsed = now - entry._rate_time
                if elapsed > 0:
                    entry.rate_hz = (entry.messages - entry._rate_count) / elapsed
                entry._rate_count, entry._rate_time = entry.messages, now
            try:
                publishers = self.node.count_publishers(entry.topic)
            except Exception:  # noqa: BLE001 - a node shutting down; the next tick tries again
                continue
            with self._lock:
                if publishers == 0:
                    entry.publishers_since = None
                    continue
                if entry.publishers_since is None:
                    entry.publishers_since = now
                quiet_since = max(entry.publishers_since, entry.last_message or entry.created)
                due = not entry.warned and now - quiet_since >= self.warn_after_s * 0.999
                if due:
                    entry.warned = True
            if due:
                self._warn_silent(entry, publishers, now - quiet_since)

    def _warn_silent(self, entry: _Topic, publishers: int, quiet_s: float) -> None:
        try:
            infos = self.node.get_publishers_info_by_topic(entry.topic)
        except Exception:  # noqa: BLE001
            infos = []
        offered = sorted({_describe(i.qos_profile) for i in infos}) or ["unknown"]
        best_effort_pub = any(i.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT for i in infos)
        if entry.policy == "reliable" and best_effort_pub:
            hint = "a best-effort publisher never serves a reliable subscription: set parameter sensor_qos: sensor_data"
        else:
            hint = ("the QoS is compatible: is the publisher publishing (a best-effort link may also drop large "
                    "images)? parameter sensor_qos selects this subscription's policy")
        if self.health is not None:
            self.health.count("sensor_qos.silent_topics")
        self._warn(f"no message on {entry.topic} for {quiet_s:.0f} s although {publishers} publisher(s) exist: "
                   f"publishers offer {', '.join(offered)}, this subscription requests {_describe(entry.qos)} "
                   f"(sensor_qos: {entry.policy}); {hint}")
