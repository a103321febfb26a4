"""What keeps a node serving: guarded callbacks and the counters it reports on /diagnostics.

Every service callback goes through :func:`guard_service` (any exception becomes an error
answer: ``success=false`` and the error's kind and message), every subscription callback
through :meth:`NodeHealth.guard` (any exception becomes a counted, logged drop). Counters
(drops by reason, queue sizes, totals) are published as ``diagnostic_msgs/DiagnosticArray``
on ``/diagnostics`` every ``period_s``.
"""
from __future__ import annotations

import threading
import traceback
from collections import Counter
from typing import Callable

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node

DIAGNOSTICS_TOPIC = "/diagnostics"


def error_text(exc: BaseException) -> str:
    """``Kind: message`` of an exception, bounded (a 1 MB argument must not come back whole)."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 500 else text[:500] + "..."


def _log_every(n: int) -> bool:
    return n in (1, 10, 100) or n % 1000 == 0


class NodeHealth:
    """Thread-safe counters of one node, published on /diagnostics."""

    def __init__(self, node: Node, period_s: float = 2.0):
        self.node = node
        self._lock = threading.Lock()
        self.counts: Counter = Counter()
        self.drops: Counter = Counter()
        self.gauges: dict[str, Callable[[], float]] = {}
        self._pub = node.create_publisher(DiagnosticArray, DIAGNOSTICS_TOPIC, 10)
        node.create_timer(period_s, self.publish)

    def count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.counts[key] += n

    def drop(self, reason: str, what: str = "", n: int = 1) -> None:
        """Count a dropped input by reason; log the 1st, 10th, 100th and every 1000th."""
        with self._lock:
            self.drops[reason] += n
            total = self.drops[reason]
        if _log_every(total):
            self.node.get_logger().warning(f"dropped {what or 'an input'} ({reason}; {total} so far)")

    def guard(self, callback: Callable, what: str) -> Callable:
        """A subscription/timer callback that never raises: an exception is a counted drop."""
        def guarded(*args):
            try:
                return callback(*args)
            except Exception as exc:  # noqa: BLE001 - no input may stop the node
                self.drop(f"{what}: {type(exc).__name__}", f"a {what} message: {error_text(exc)}")
                self.node.get_logger().debug(traceback.format_exc())
                return None
        return guarded

    def guard_service(self, callback: Callable, name: str) -> Callable:
        return guard_service(self.node, callback, name, self)

    def status(self) -> DiagnosticStatus:
        with self._lock:
            values = [KeyValue(key=f"count.{k}", value=str(v)) for k, v in sorted(self.counts.items())]
            values += [KeyValue(key=f"dropped.{k}", value=str(v)) for k, v in sorted(self.drops.items())]
        for key, gauge in self.gauges.items():
            try:
                values.append(KeyValue(key=key, value=str(gauge())))
            except Exception as exc:  # noqa: BLE001 - a gauge must not stop the report
                values.append(KeyValue(key=key, value=f"error: {error_text(exc)}"))
        drops = sum(self.drops.values())
        return DiagnosticStatus(level=DiagnosticStatus.WARN if drops else DiagnosticStatus.OK,
                                name=self.node.get_fully_qualified_name(),
                                hardware_id=self.node.get_name(),
                                message=f"{drops} inputs dropped" if drops else "ok", values=values)

    def publish(self) -> None:
        msg = DiagnosticArray(status=[self.status()])
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self._pub.publish(msg)


def guard_service(node: Node, callback: Callable, name: str, health: "NodeHealth | None" = None) -> Callable:
    """A service callback that always answers: an exception sets ``success=false`` and the
    error (``error``, ``message`` or ``answer.error``, whichever the response has)."""
    def guarded(request, response):
        try:
            return callback(request, response)
        except Exception as exc:  # noqa: BLE001 - no request may stop the node
            text = error_text(exc)
            if health is not None:
                health.count(f"{name}.errors")
            if isinstance(exc, ValueError) or getattr(exc, "kind", None):   # the caller's mistake
                node.get_logger().warning(f"{name}: request refused: {text}")
            else:                                                          # ours: with the traceback
                node.get_logger().error(f"{name}: request failed: {text}\n{traceback.format_exc()}")
            if hasattr(response, "success"):
                response.success = False
            for field in ("error", "message"):
                if hasattr(response, field):
                    setattr(response, field, text)
                    break
            else:
                if hasattr(response, "answer"):
                    response.answer.status, response.answer.error = "error", text
            return response
    return guarded
