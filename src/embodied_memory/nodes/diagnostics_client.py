"""Read what the running nodes report on /diagnostics (a short-lived node, like service_client)."""
from __future__ import annotations

import os
import time
import uuid

import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor

from .health import DIAGNOSTICS_TOPIC

# what a node still holds that the memory has not stored (nodes/delivery.py, perception's queue)
IN_FLIGHT_KEYS = ("keyframes_unacknowledged", "observations_unacknowledged", "keyframes_queued")


def read_diagnostics(listen_s: float = 3.0, nodes: tuple[str, ...] = ()) -> dict[str, dict[str, str]]:
    """node name -> its latest key/values, listening ``listen_s`` (or until every one of ``nodes``
    reported)."""
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    context = Context()
    rclpy.init(context=context, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    node = rclpy.create_node(f"em_diag_{uuid.uuid4().hex[:8]}", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    seen: dict[str, dict[str, str]] = {}

    def on_msg(msg: DiagnosticArray) -> None:
        for status in msg.status:
            seen[status.name] = {kv.key: kv.value for kv in status.values}
    node.create_subscription(DiagnosticArray, DIAGNOSTICS_TOPIC, on_msg, 50)
    try:
        end = time.monotonic() + listen_s
        while time.monotonic() < end and not (nodes and all(n in seen for n in nodes)):
            executor.spin_once(timeout_sec=0.1)
        return seen
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)


def records_in_flight(report: dict[str, dict[str, str]]) -> int:
    """Keyframes and observations the pipeline holds but the memory has not stored yet."""
    return sum(int(float(values.get(key, 0) or 0)) for values in report.values() for key in IN_FLIGHT_KEYS)
