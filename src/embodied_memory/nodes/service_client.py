"""Call a service once from a short-lived node (what ``ros2 service call`` does)."""
from __future__ import annotations

import os
import time
import uuid

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor

from .common import service_qos


class ServiceCallError(RuntimeError):
    pass


def call_service(srv_type, name: str, request, timeout_s: float = 30.0, wait_s: float = 10.0):
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    context = Context()
    rclpy.init(context=context, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    node = rclpy.create_node(f"em_cli_{uuid.uuid4().hex[:8]}", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        client = node.create_client(srv_type, name, qos_profile=service_qos())
        if not client.wait_for_service(timeout_sec=wait_s):
            raise ServiceCallError(f"service {name} is not available (is the stack running? "
                                   f"ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')})")
        future = client.call_async(request)
        deadline = time.monotonic() + timeout_s
        while not future.done():
            if time.monotonic() > deadline:
                raise ServiceCallError(f"service {name} did not answer within {timeout_s:.0f} s")
            executor.spin_once(timeout_sec=0.1)
        return future.result()
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
