"""The memory's retrieval functions over ROS (the /memory/query service), for nodes that do
not own the store (query agent, navigation bridge)."""
from __future__ import annotations

import json
import threading

from embodied_memory_interfaces.srv import QueryMemory
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node


class MemoryServiceError(RuntimeError):
    pass


class RosMemoryClient:
    """MemoryClient over the /memory/query service (safe to call from a service callback of a
    multi-threaded executor: it waits on an event, not on the executor)."""

    def __init__(self, node: Node, service: str, timeout_s: float):
        self._client = node.create_client(QueryMemory, service, callback_group=ReentrantCallbackGroup())
        self.service = service
        self.timeout_s = timeout_s

    def call(self, tool: str, arguments: dict):
        if not self._client.wait_for_service(timeout_sec=self.timeout_s):
            raise MemoryServiceError(f"memory service {self.service} is not available")
        done = threading.Event()
        future = self._client.call_async(QueryMemory.Request(tool=tool, arguments_json=json.dumps(arguments)))
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(self.timeout_s):
            self._client.remove_pending_request(future)
            raise MemoryServiceError(f"memory service {self.service} did not answer {tool} in {self.timeout_s} s")
        response = future.result()
        if not response.success:
            raise MemoryServiceError(response.error)
        return json.loads(response.result_json)
