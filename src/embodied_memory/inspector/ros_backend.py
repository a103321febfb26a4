"""``inspect --ros``: the inspector's searches, questions and writes go to the running stack.

The memory node owns the store; the inspector reads its directory (found through
``/memory/stats``) over read-only SQLite for the pages, and sends everything else to the
stack's services: a search to ``/memory/query`` (semantic_observations), a question to the query
agent's Ask service (its planner, endpoint and time zone), a name to ``/memory/name_identity``,
a forget to ``/memory/forget`` (the memory node then tells perception to drop the person), a
merge as an IdentityMerge on the memory's merges topic, confirmed by its Ack. One node of its own
(own context, spun by a background thread); each call waits on its reply, not on the executor.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Optional

from .backends import BackendError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StackMemory:
    """What the running memory node says about its store."""
    data_dir: str
    timezone: str
    backend: str


def _defaults():
    from ..params import (ACKS_TOPIC, MEMORY_FORGET_SERVICE, MEMORY_NAME_SERVICE, MEMORY_QUERY_SERVICE,
                          MEMORY_STATS_SERVICE, MemoryNodeParams, QueryAgentNodeParams)
    return {"query": MEMORY_QUERY_SERVICE, "stats": MEMORY_STATS_SERVICE, "forget": MEMORY_FORGET_SERVICE,
            "name": MEMORY_NAME_SERVICE, "ask": QueryAgentNodeParams.ask_service,
            "merges": MemoryNodeParams.merges_topic, "acks": ACKS_TOPIC}


class RosBackend:
    def __init__(self, ask_service: str = "", timeout_s: float = 30.0, ask_timeout_s: float = 120.0):
        import rclpy
        from embodied_memory_interfaces.msg import Ack, IdentityMerge
        from embodied_memory_interfaces.srv import Ask, Forget, GetMemoryStats, NameIdentity, QueryMemory
        from rclpy.callback_groups import ReentrantCallbackGroup
        from rclpy.context import Context
        from rclpy.executors import MultiThreadedExecutor

        from ..nodes.common import service_qos
        from ..nodes.delivery import ack_qos
        self.live, self._closed = True, False
        self.names = {**_defaults(), **({"ask": ask_service} if ask_service else {})}
        self.timeout_s, self.ask_timeout_s = timeout_s, ask_timeout_s
        self.describes = (f"the running stack: {self.names['query']}, {self.names['ask']}, {self.names['name']}, "
                          f"{self.names['forget']}, {self.names['merges']} (ROS_DOMAIN_ID "
                          f"{os.environ.get('ROS_DOMAIN_ID', '0')})")
        self._types = {"Ask": Ask, "Forget": Forget, "GetMemoryStats": GetMemoryStats, "NameIdentity": NameIdentity,
                       "QueryMemory": QueryMemory, "IdentityMerge": IdentityMerge}
        self._context = Context()
        rclpy.init(context=self._context, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
        self.node = rclpy.create_node(f"memory_inspector_{uuid.uuid4().hex[:6]}", context=self._context)
        group = ReentrantCallbackGroup()
        self._clients = {key: self.node.create_client(srv, self.names[key], qos_profile=service_qos(),
                                                      callback_group=group)
                         for key, srv in (("query", QueryMemory), ("stats", GetMemoryStats), ("forget", Forget),
                                          ("name", NameIdentity), ("ask", Ask))}
        self._merge_pub = self.node.create_publisher(IdentityMerge, self.names["merges"], 50)
        self._acks: dict[str, object] = {}
        self._acks_changed = threading.Condition()
        self.node.create_subscription(Ack, self.names["acks"], self._on_ack, ack_qos(), callback_group=group)
        self._executor = MultiThreadedExecutor(num_threads=2, context=self._context)
        self._executor.add_node(self.node)
        self._spin = threading.Thread(target=self._spin_until_shutdown, name="inspector_ros", daemon=True)
        self._spin.start()

    def _spin_until_shutdown(self) -> None:
        from rclpy.executors import ExternalShutdownException
        try:
            self._executor.spin()
        except ExternalShutdownException:
            pass

    # -- calls ------------------------------------------------------------------------------
    def _call(self, key: str, request, timeout_s: Optional[float] = None):
        timeout_s = timeout_s or self.timeout_s
        client, name = self._clients[key], self.names[key]
        if not client.wait_for_service(timeout_sec=min(timeout_s, 10.0)):
            raise BackendError(f"{name} is not available: is the stack running (ROS_DOMAIN_ID="
                               f"{os.environ.get('ROS_DOMAIN_ID', '0')})?", 503)
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout_s):
            client.remove_pending_request(future)
            raise BackendError(f"{name} did not answer within {timeout_s:.0f} s", 504)
        return future.result()

    def stack_memory(self) -> StackMemory:
        """The memory node's data_dir, time zone and backend (its /memory/stats)."""
        stats = self._call("stats", self._types["GetMemoryStats"].Request()).stats
        return StackMemory(data_dir=stats.data_dir, timezone=stats.timezone or "UTC", backend=stats.backend)

    def search(self, query: str, person: Optional[str], n: int, now: float) -> list[dict]:
        arguments = {"query": query, "n": n, "now": now, **({"person": person} if person else {})}
        res = self._call("query", self._types["QueryMemory"].Request(tool="semantic_observations",
                                                                     arguments_json=json.dumps(arguments)))
        if not res.success:
            raise BackendError(f"search failed in the memory node: {res.error}", 400)
        return json.loads(res.result_json)

    def name(self, person: str, name: str) -> str:
        res = self._call("name", self._types["NameIdentity"].Request(identity_id=person, display_name=name))
        if not res.success:
            raise BackendError(f"the memory node did not name {person}: {res.message}",
                               404 if "unknown person" in res.message else 400)
        return ""        # the identity kept: the caller knows it from the names before (reader.merged_by_name)

    def merge(self, person: str, into: str) -> str:
        from ..nodes.common import to_time_msg
        from embodied_memory_interfaces.msg import Ack
        merge_id = f"merge:{person}>{into}"      # the memory node's Ack id for this merge
        deadline = time.monotonic() + self.timeout_s
        while self._merge_pub.get_subscription_count() == 0:      # reliable, volatile: wait for the memory
            if time.monotonic() > deadline:
                raise BackendError(f"no memory node subscribes to {self.names['merges']}: is the stack running?", 503)
            time.sleep(0.05)
        with self._acks_changed:
            self._acks.pop(merge_id, None)
        self._merge_pub.publish(self._types["IdentityMerge"](stamp=to_time_msg(time.time()), absorbed_id=person,
                                                             surviving_id=into))
        with self._acks_changed:
            if not self._acks_changed.wait_for(lambda: merge_id in self._acks, max(0.0, deadline - time.monotonic())):
                raise BackendError(f"the memory node did not acknowledge the merge within {self.timeout_s:.0f} s", 504)
            ack = self._acks.pop(merge_id)
        if ack.status == Ack.REJECTED:
            raise BackendError(f"the memory node refused the merge: {ack.reason}", 400)
        return "done by the memory node"

    def _on_ack(self, msg) -> None:
        if msg.id.startswith("merge:"):
            with self._acks_changed:
                self._acks[msg.id] = msg
                self._acks_changed.notify_all()

    def forget(self, person: str, dry_run: bool) -> dict:
        forget = self._types["Forget"]
        res = self._call("forget", forget.Request(mode=forget.Request.MODE_IDENTITY, identity_id=person,
                                                  dry_run=dry_run))
        if not res.success:
            raise BackendError(f"the memory node did not forget {person}: {res.message}", 400)
        return {"sightings_removed": res.sightings_removed, "files_removed": res.files_removed,
                "images_removed": res.images_removed, "observations_removed": res.observations_removed,
                "identity_id": res.identity_id or person, "dry_run": dry_run}

    def ask(self, question: str, planner: str, as_of: Optional[float]) -> tuple[dict, list[str]]:
        from ..nodes.common import to_time_msg
        from builtin_interfaces.msg import Time
        request = self._types["Ask"].Request(question=question, planner=planner or "",
                                             as_of=to_time_msg(as_of) if as_of else Time())
        answer = self._call("ask", request, self.ask_timeout_s).answer
        result = json.loads(answer.json) if answer.json else {"status": answer.status, "error": answer.error,
                                                               "text": answer.text}
        # the query agent's tool trace stays in its node (its log); the count comes with the answer
        return result, [f"{answer.tool_calls} tool calls in {self.names['ask']} (the query agent node's log lists them)"]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._executor.shutdown(timeout_sec=2.0)
            self.node.destroy_node()
        finally:
            if self._context.ok():
                import rclpy
                rclpy.shutdown(context=self._context)
        self._spin.join(timeout=2.0)
