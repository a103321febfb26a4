"""Call a service once from a short-lived node (what ``ros2 service call`` does)."""
from __future__ import annotations

import os
import time
import uuid
from contextlib import contextmanager

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor

from .common import service_qos


class ServiceCallError(RuntimeError):
    pass


@contextmanager
def short_lived_node(prefix: str, namespace: str = ""):
    """(node, executor) in a context of their own, torn down on exit (CLI calls, one-off reads);
    relative names resolve in ``namespace`` (a robot's stack: /spot1)."""
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    context = Context()
    rclpy.init(context=context, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
    node = rclpy.create_node(f"{prefix}_{uuid.uuid4().hex[:8]}", context=context,
                             namespace="/" + namespace.strip("/"))
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    try:
        yield node, executor
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)


def wait_until_discovered(ready: bool, executor, what: str, wait_s: float) -> None:
    """After ``wait_for_service``/``wait_for_server`` (``ready``): raise if it was not found, else
    spin DISCOVERY_SETTLE_S so the server also sees this client's reply readers."""
    if not ready:
        raise ServiceCallError(f"{what} was not discovered within {wait_s:.0f} s (is the stack running? "
                               f"ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')})")
    settle = time.monotonic() + DISCOVERY_SETTLE_S
    while time.monotonic() < settle:
        executor.spin_once(timeout_sec=0.05)


def call_service(srv_type, name: str, request, timeout_s: float = 30.0, wait_s: float = 10.0,
                 retry_s: float | None = None, namespace: str = ""):
    """One request, its response (raises ServiceCallError on no server / no answer).

    A server can answer before it has discovered this short-lived client's response reader;
    Fast DDS then drops the response ("failed to send response"). So the call first lets
    discovery settle, and ``retry_s`` (for requests that are safe to repeat: reads, never questions)
    sends the request again after retry_s, 2*retry_s, ... until ``timeout_s``; the first
    response wins.  Discovery waits at most ``timeout_s`` too (``--timeout 3`` is not 10 s)."""
    wait_s = min(wait_s, timeout_s)
    with short_lived_node("em_cli", namespace) as (node, executor):
        client = node.create_client(srv_type, name, qos_profile=service_qos())
        name = client.srv_name                 # as resolved, for messages
        wait_until_discovered(client.wait_for_service(timeout_sec=wait_s), executor, f"service {name}", wait_s)
        start = time.monotonic()
        deadline = start + timeout_s
        futures = [client.call_async(request)]
        next_retry = start + retry_s if retry_s else float("inf")
        while not any(f.done() for f in futures):
            now = time.monotonic()
            if now > deadline:
                raise ServiceCallError(f"service {name} did not answer within {timeout_s:.0f} s")
            if now >= next_retry:
                futures.append(client.call_async(request))
                next_retry = now + retry_s * 2 ** (len(futures) - 1)
            executor.spin_once(timeout_sec=0.1)
        done = next(f for f in futures if f.done())
        for f in futures:
            if f is not done:
                client.remove_pending_request(f)
        return done.result()


DISCOVERY_SETTLE_S = 0.5
