"""What keeps a node serving: guarded callbacks and the counters it reports on /diagnostics.

Every service callback goes through :func:`guard_service` (any exception becomes an error
answer: ``success=false`` and the error's kind and message), every subscription callback
through :meth:`NodeHealth.guard` (any exception becomes a counted, logged drop). Counters
(drops by reason, queue sizes, totals) are published as ``diagnostic_msgs/DiagnosticArray``
on ``/diagnostics`` every ``period_s``: ``count.<key>`` and ``dropped.<reason>`` (totals since
start), the gauges by their own names (queue lengths, ``*_total`` totals), and ``rate.<key>``:
per second over the last ``RATE_WINDOW_S`` for every count, drop and ``*_total`` gauge.
``embodied-memory status`` prints them (nodes/diagnostics_client.py).
"""
from __future__ import annotations

import os
import threading
import time
import traceback
from collections import Counter, deque
from typing import Callable

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node

from .node_clock import steady_clock

DIAGNOSTICS_TOPIC = "/diagnostics"
RATE_WINDOW_S = 10.0       # rate.<key>: the change per second over about this long


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
        self._samples: deque[tuple[float, dict[str, float]]] = deque()   # (monotonic time, totals)
        self._pub = node.create_publisher(DiagnosticArray, DIAGNOSTICS_TOPIC, 10)
        # wall time: /diagnostics keeps coming when /clock stops (use_sim_time, a replay that ended)
        node.create_timer(period_s, self.publish, clock=steady_clock())

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
            totals = {f"count.{k}": float(v) for k, v in self.counts.items()}
            totals.update({f"dropped.{k}": float(v) for k, v in self.drops.items()})
        values = [KeyValue(key=k, value=str(int(v))) for k, v in sorted(totals.items())]
        for key, gauge in self.gauges.items():
            try:
                value = gauge()
            except Exception as exc:  # noqa: BLE001 - a gauge must not stop the report
                values.append(KeyValue(key=key, value=f"error: {error_text(exc)}"))
                continue
            values.append(KeyValue(key=key, value=str(value)))
            if key.endswith("_total") and isinstance(value, (int, float)):
                totals[key] = float(value)
        values += [KeyValue(key=f"rate.{k.removeprefix('count.')}", value=f"{r:.3g}")
                   for k, r in sorted(self._rates(totals).items())]
        drops = sum(self.drops.values())
        return DiagnosticStatus(level=DiagnosticStatus.WARN if drops else DiagnosticStatus.OK,
                                name=self.node.get_fully_qualified_name(),
                                hardware_id=self.node.get_name(),
                                message=f"{drops} inputs dropped" if drops else "ok", values=values)

    def _rates(self, totals: dict[str, float]) -> dict[str, float]:
        """Per second since the oldest sample within the window (none on the first report)."""
        now = time.monotonic()
        with self._lock:
            self._samples.append((now, totals))
            while len(self._samples) > 2 and self._samples[1][0] <= now - RATE_WINDOW_S:
                self._samples.popleft()
            then, before = self._samples[0]
        if now - then <= 0:
            return {}
        return {k: max(0.0, v - before.get(k, 0.0)) / (now - then) for k, v in totals.items()}

    def publish(self) -> None:
        msg = DiagnosticArray(status=[self.status()])
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self._pub.publish(msg)


def dir_bytes(path) -> int:
    """Bytes of the files under ``path`` (a store's size on disk, its images included)."""
    total, stack = 0, [os.fspath(os.path.expanduser(path))]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:   # removed meanwhile (forget, a checkpoint)
                continue
    return total


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
