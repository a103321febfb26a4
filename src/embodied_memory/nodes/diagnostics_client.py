"""Read what the running nodes report on /diagnostics (a short-lived node, like service_client),
and lay it out for ``embodied-memory status``."""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from diagnostic_msgs.msg import DiagnosticArray

from .health import DIAGNOSTICS_TOPIC
from .service_client import short_lived_node

# what a node still holds that the memory has not stored (nodes/delivery.py, perception's queue)
IN_FLIGHT_KEYS = ("keyframes_unacknowledged", "observations_unacknowledged", "keyframes_queued")
LEVELS = {0: "OK", 1: "WARN", 2: "ERROR", 3: "STALE"}     # diagnostic_msgs/DiagnosticStatus


@dataclass
class NodeReport:
    """The latest DiagnosticStatus of one node."""

    name: str
    level: int = 0
    message: str = ""
    hardware_id: str = ""
    values: dict[str, str] = field(default_factory=dict)
    received: float = 0.0          # time.time() it arrived

    @property
    def level_name(self) -> str:
        return LEVELS.get(self.level, str(self.level))

    def sections(self) -> dict[str, dict[str, str]]:
        """values by kind: queues (and other gauges), drops, rates, totals."""
        out: dict[str, dict[str, str]] = {"queues": {}, "drops": {}, "rates": {}, "totals": {}}
        for key, value in sorted(self.values.items()):
            if key.startswith("rate.") or key.endswith(".rate_hz"):
                out["rates"][key.removeprefix("rate.")] = value
            elif key.startswith("dropped."):
                out["drops"][key.removeprefix("dropped.")] = value
            elif key.startswith("count.") or key.endswith(("_total", ".messages")):
                out["totals"][key.removeprefix("count.")] = value
            else:
                out["queues"][key] = value
        return out

    def to_dict(self) -> dict:
        return {**asdict(self), "level_name": self.level_name, **self.sections()}


def _level(value) -> int:
    return value[0] if isinstance(value, (bytes, bytearray)) and value else int(value or 0)


def read_reports(listen_s: float = 3.0, nodes: tuple[str, ...] = ()) -> dict[str, NodeReport]:
    """node name -> its latest report, listening ``listen_s`` (or until every one of ``nodes``
    reported)."""
    seen: dict[str, NodeReport] = {}

    def on_msg(msg: DiagnosticArray) -> None:
        for status in msg.status:
            seen[status.name] = NodeReport(status.name, _level(status.level), status.message, status.hardware_id,
                                           {kv.key: kv.value for kv in status.values}, time.time())
    with short_lived_node("em_diag") as (node, executor):
        node.create_subscription(DiagnosticArray, DIAGNOSTICS_TOPIC, on_msg, 50)
        end = time.monotonic() + listen_s
        while time.monotonic() < end and not (nodes and all(n in seen for n in nodes)):
            executor.spin_once(timeout_sec=0.1)
    return seen


def read_diagnostics(listen_s: float = 3.0, nodes: tuple[str, ...] = ()) -> dict[str, dict[str, str]]:
    """node name -> its latest key/values (see :func:`read_reports`)."""
    return {name: report.values for name, report in read_reports(listen_s, nodes).items()}


def records_in_flight(report: dict[str, dict[str, str]]) -> int:
    """Keyframes and observations the pipeline holds but the memory has not stored yet."""
    return sum(int(float(values.get(key, 0) or 0)) for values in report.values() for key in IN_FLIGHT_KEYS)


def format_reports(reports: dict[str, NodeReport]) -> str:
    """One block per node: name, level, message, then its queues, drops, rates and totals."""
    lines = []
    for name in sorted(reports):
        r = reports[name]
        lines.append(f"{name:28s} {r.level_name:6s} {r.message}")
        for section, values in r.sections().items():
            text = "  ".join(f"{k}={v}" for k, v in values.items()) or "-"
            if section == "rates" and values:
                text = "  ".join(f"{k}={v}/s" for k, v in values.items())
            lines.append(f"    {section:7s} {text}")
    return "\n".join(lines)
