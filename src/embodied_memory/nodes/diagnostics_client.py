"""Read what the running nodes report on /diagnostics (a short-lived node, like service_client)."""
from __future__ import annotations

import time

from diagnostic_msgs.msg import DiagnosticArray

from .health import DIAGNOSTICS_TOPIC
from .service_client import short_lived_node

# what a node still holds that the memory has not stored (nodes/delivery.py, perception's queue)
IN_FLIGHT_KEYS = ("keyframes_unacknowledged", "observations_unacknowledged", "keyframes_queued")


def read_diagnostics(listen_s: float = 3.0, nodes: tuple[str, ...] = ()) -> dict[str, dict[str, str]]:
    """node name -> its latest key/values, listening ``listen_s`` (or until every one of ``nodes``
    reported)."""
    seen: dict[str, dict[str, str]] = {}

    def on_msg(msg: DiagnosticArray) -> None:
        for status in msg.status:
            seen[status.name] = {kv.key: kv.value for kv in status.values}
    with short_lived_node("em_diag") as (node, executor):
        node.create_subscription(DiagnosticArray, DIAGNOSTICS_TOPIC, on_msg, 50)
        end = time.monotonic() + listen_s
        while time.monotonic() < end and not (nodes and all(n in seen for n in nodes)):
            executor.spin_once(timeout_sec=0.1)
    return seen


def records_in_flight(report: dict[str, dict[str, str]]) -> int:
    """Keyframes and observations the pipeline holds but the memory has not stored yet."""
    return sum(int(float(values.get(key, 0) or 0)) for values in report.values() for key in IN_FLIGHT_KEYS)
