"""What every node shares: validated parameters, a main() wrapper that keeps spinning whatever a
callback raises, time conversions, the keyframe and acknowledgement QoS."""
from __future__ import annotations

import dataclasses
import logging
import sys
from typing import Callable, TypeVar

import rclpy
from builtin_interfaces.msg import Time
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node

from ..config import ConfigError, parse_params

T = TypeVar("T")


def node_params(node: Node, cls: type[T]) -> T:
    """Validate the node's ROS parameter overrides against ``cls`` (unknown keys are errors),
    declare every field with its default, and return the typed params."""
    overrides = {name: p.value for name, p in node._parameter_overrides.items()  # noqa: SLF001
                 if name != "use_sim_time"}
    params = parse_params(cls, overrides, f"node {node.get_fully_qualified_name()} parameters")
    for field in dataclasses.fields(cls):
        if not node.has_parameter(field.name):
            node.declare_parameter(field.name, getattr(params, field.name))
    return params


def to_time_msg(t: float) -> Time:
    sec = int(t // 1)
    return Time(sec=sec, nanosec=int(round((t - sec) * 1e9)) % 1_000_000_000)


# keyframes are large: volatile; a perception restart or late start is covered by the frame
# selector keeping every unacknowledged keyframe (nodes/delivery.py)
KEYFRAME_QOS_DEPTH = 200


def keyframe_qos():
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    return QoSProfile(depth=KEYFRAME_QOS_DEPTH, reliability=ReliabilityPolicy.RELIABLE)


SERVICE_QUEUE_DEPTH = 1000


def service_qos():
    """Services and their clients: the default depth (10) loses requests or replies when many
    are outstanding at once; these are small, so keep them all."""
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=SERVICE_QUEUE_DEPTH, reliability=ReliabilityPolicy.RELIABLE)


def forgotten_qos():
    """Forget requests are small and must reach a perception node that starts later."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    return QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)


def from_time_msg(msg: Time) -> float:
    return msg.sec + msg.nanosec * 1e-9


def run_node(make: Callable[[], Node], threads: int = 2) -> None:
    """rclpy.init, build the node, spin until SIGINT/SIGTERM; configuration errors exit 2."""
    # the ROS-free core logs with `logging`: show it beside the node's rclpy log
    logging.basicConfig(level=logging.INFO, format="[%(levelname)s] [%(name)s]: %(message)s", stream=sys.stderr)
    rclpy.init(args=sys.argv)
    node = None
    code = 0
    try:
        node = make()
        executor = MultiThreadedExecutor(num_threads=threads) if threads > 1 else SingleThreadedExecutor()
        executor.add_node(node)
        # a node that has a natural end sets node.exit_code (an importer, a one-shot tool)
        while rclpy.ok() and getattr(node, "exit_code", None) is None:
            try:
                executor.spin_once(timeout_sec=0.1)
            except (KeyboardInterrupt, ExternalShutdownException):
                raise
            except Exception as exc:  # noqa: BLE001 - last resort: a callback that raised must not stop the node
                node.get_logger().error(f"a callback raised (the node keeps running): {type(exc).__name__}: {exc}")
        code = getattr(node, "exit_code", None) or 0
    except ConfigError as exc:
        print(f"[FATAL] configuration error: {exc}", file=sys.stderr)
        code = 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            close = getattr(node, "close", None)
            if close is not None:
                close()
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    sys.exit(code)


