"""What every node shares: validated parameters, a main() wrapper that keeps spinning whatever a
callback raises, time conversions, the keyframe and acknowledgement QoS."""
from __future__ import annotations

import logging
import re
import socket
import sys
from typing import Callable

import rclpy
from builtin_interfaces.msg import Time
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node

from ..config import ConfigError
from .parameters import node_options, node_params  # noqa: F401 - every node imports them from here


def robot_id_of(namespace: str) -> str:
    """A fleet robot's id when robot_id is "auto" (or unset on a fleet server): its ROS namespace
    (/spot2 -> spot2, /site/spot2 -> site_spot2), else the host name."""
    name = namespace.strip("/").replace("/", "_") or socket.gethostname().split(".")[0]
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:63]


def to_time_msg(t: float) -> Time:
    sec = int(t // 1)
    return Time(sec=sec, nanosec=int(round((t - sec) * 1e9)) % 1_000_000_000)


KEYFRAME_QOS_DEPTH = 50   # keyframes in DDS history per endpoint (with raw 640x480 depth: ~35 MB)


def keyframe_qos():
    """Keyframes between our own nodes (frame selector -> perception): RELIABLE, VOLATILE,
    KEEP_LAST ``KEYFRAME_QOS_DEPTH``.

    Keyframes carry full images, so nothing is kept in a transient-local history and the DDS
    queues stay short. A consumer that starts late or restarts gets nothing from DDS history:
    the frame selector keeps every unacknowledged keyframe (at most ``max_unacked_keyframes``,
    oldest dropped first and counted) and resends them when a subscriber (re)appears or when
    one stays unacknowledged for ``resend_after_s`` (nodes/delivery.py). A keyframe that falls
    out of a full DDS queue is therefore resent, not lost."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=KEYFRAME_QOS_DEPTH,
                      reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)


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


