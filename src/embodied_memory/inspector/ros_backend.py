"""``inspect --ros``: the inspector's searches, questions and writes go to the running stack.

The memory node owns the store; the inspector reads its directory (found through
``/memory/stats``) over read-only SQLite for the pages, and sends everything else to the
stack's services: a search to ``/memory/query`` (semantic_observations), a question to the query
agent's Ask service (its planner, endpoint and time zone), a name to ``/memory/name_identity``,
a forget to ``/memory/forget`` (the memory node then tells perception to drop the person), a
merge as an IdentityMerge on the memory's merges topic, sent again until the memory node's Ack
names it (as perception sends its merges). One node of its own (own context, spun by a
background thread); each call waits on its reply, never on the executor.
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
READ_TIMEOUT_S = 30.0           # a search, the stats
READ_RETRY_S = 3.0              # a read is sent again after this (a reply lost before discovery settled)
WRITE_TIMEOUT_S = 300.0         # a name, merge or forget: the memory's writes run one at a time
MERGE_RESEND_S = 3.0
# the memory node's answers are "Kind: message" (nodes/health.error_text): the kind says whose fault
STATUS_BY_KIND = {"UnknownPersonError": 404, "InvalidArgumentError": 400, "InvalidRecordError": 400,
                  "ValueError": 400, "StoreError": 400, "NotActiveError": 503, "StoreWriteError": 503}


def status_of(message: str) -> int:
    return STATUS_BY_KIND.get(message.split(":", 1)[0].strip(), 502)


@dataclass(frozen=True)
class StackMemory:
    """What the running memory node says about its store."""
    data_dir: str
    timezone: str
    backend: str


@dataclass(frozen=True)
class StackNames:
    """The stack's service and topic names (the memory node's and query agent's defaults)."""
    query: str
    stats: str
    forget: str
    name: str
    ask: str
    merges: str
    acks: str

    @classmethod
    def defaults(cls, namespace: str = "", **overrides) -> "StackNames":
        """The names as they resolve for a stack launched in ``namespace`` (relative ones under it)."""
        from ..params import (ACKS_TOPIC, MEMORY_FORGET_SERVICE, MEMORY_NAME_SERVICE, MEMORY_QUERY_SERVICE,
                              MEMORY_STATS_SERVICE, MemoryNodeParams, QueryAgentNodeParams)
        names = {"query": MEMORY_QUERY_SERVICE, "stats": MEMORY_STATS_SERVICE, "forget": MEMORY_FORGET_SERVICE,
                 "name": MEMORY_NAME_SERVICE, "ask": QueryAgentNodeParams.ask_service,
                 "merges": MemoryNodeParams.merges_topic, "acks": ACKS_TOPIC}
        names = {**names, **{k: v for k, v in overrides.items() if v}}
        ns = namespace.strip("/")
        return cls(**{k: v if v.startswith("/") else "/" + "/".join(p for p in (ns, v) if p) for k, v in names.items()})


class RosBackend:
    def __init__(self, names: StackNames, ask_timeout_s: Optional[float] = None):
        import rclpy
        from rclpy.validate_full_topic_name import validate_full_topic_name
        for key in ("query", "stats", "forget", "name", "ask"):
            try:
                validate_full_topic_name(getattr(names, key), is_service=True)
            except Exception as exc:  # noqa: BLE001 - rclpy's InvalidServiceNameException and kin
                raise ValueError(f"service name {getattr(names, key)!r}: {exc}") from exc
        self.names = names
        from ..cli import ask_timeout_s as default_wait   # the same wait as `embodied-memory ask`
        self.ask_timeout_s = ask_timeout_s or default_wait()
        self.live, self._closed = True, False
        self.describes = (f"the running stack: {names.query}, {names.ask}, {names.name}, {names.forget}, "
                          f"{names.merges} (ROS_DOMAIN_ID {os.environ.get('ROS_DOMAIN_ID', '0')})")
        self._waiting: dict[str, Optional[object]] = {}      # merge ack id -> its Ack once it came
        self._acks_changed = threading.Condition()
        self._context = None
        self._spin = None
        try:
            self._start(rclpy)
        except BaseException:
            self.close()
            raise

    def _start(self, rclpy) -> None:
        from embodied_memory_interfaces.msg import Ack, IdentityMerge
        from embodied_memory_interfaces.srv import Ask, Forget, GetMemoryStats, NameIdentity, QueryMemory
        from rclpy.callback_groups import ReentrantCallbackGroup
        from rclpy.context import Context
        from rclpy.executors import MultiThreadedExecutor

        from ..nodes.common import service_qos
        from ..nodes.delivery import ack_qos
        self._types = {"Ask": Ask, "Forget": Forget, "GetMemoryStats": GetMemoryStats, "NameIdentity": NameIdentity,
                       "QueryMemory": QueryMemory, "IdentityMerge": IdentityMerge, "Ack": Ack}
        self._context = Context()
        rclpy.init(context=self._context, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
        self.node = rclpy.create_node(f"memory_inspector_{uuid.uuid4().hex[:6]}", context=self._context)
        group = ReentrantCallbackGroup()
        self._clients = {key: self.node.create_client(srv, getattr(self.names, key), qos_profile=service_qos(),
                                                      callback_group=group)
                         for key, srv in (("query", QueryMemory), ("stats", GetMemoryStats), ("forget", Forget),
                                          ("name", NameIdentity), ("ask", Ask))}
        # the memory node's subscription: reliable, volatile, depth 50
        self._merge_pub = self.node.create_publisher(IdentityMerge, self.names.merges, 50)
        self.node.create_subscription(Ack, self.names.acks, self._on_ack, ack_qos(), callback_group=group)
        self._executor = MultiThreadedExecutor(num_threads=2, context=self._context)
        self._executor.add_node(self.node)
        self._spin = threading.Thread(target=self._spin_until_shutdown, name="inspector_ros", daemon=True)
        self._spin.start()

    def _spin_until_shutdown(self) -> None:
        try:
            self._executor.spin()
        except Exception as exc:  # noqa: BLE001 - ExternalShutdownException at close; anything else: said
            if self._context is not None and self._context.ok():
                log.error("the inspector's ROS executor stopped: %s", exc)

    # -- calls ------------------------------------------------------------------------------
    def _call(self, key: str, request, timeout_s: float, retry_s: Optional[float] = None):
        """One request and its response; ``retry_s`` (reads only) sends it again after retry_s,
        2*retry_s, ... until ``timeout_s``: the first response wins."""
        client, name = self._clients[key], getattr(self.names, key)
        if not client.wait_for_service(timeout_sec=min(timeout_s, 10.0)):
            raise BackendError(f"{name} is not available: is the stack running (ROS_DOMAIN_ID="
                               f"{os.environ.get('ROS_DOMAIN_ID', '0')})?", 503)
        done = threading.Event()
        futures = []

        def send():
            future = client.call_async(request)
            future.add_done_callback(lambda _f: done.set())
            futures.append(future)
        send()
        deadline, wait = time.monotonic() + timeout_s, retry_s
        while not done.wait(min(wait or timeout_s, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                for f in futures:
                    client.remove_pending_request(f)
                raise BackendError(f"{name} did not answer within {timeout_s:.0f} s"
                                   + ("" if retry_s else " (it may still be carrying the request out)"), 504)
            send()
            wait *= 2
        result = next(f for f in futures if f.done()).result()
        for f in futures:
            if not f.done():
                client.remove_pending_request(f)
        return result

    def stack_memory(self) -> StackMemory:
        """The memory node's data_dir, time zone and backend (its /memory/stats)."""
        stats = self._call("stats", self._types["GetMemoryStats"].Request(), READ_TIMEOUT_S, READ_RETRY_S).stats
        return StackMemory(data_dir=stats.data_dir, timezone=stats.timezone or "UTC", backend=stats.backend)

    def search(self, query: str, person: Optional[str], n: int, now: float) -> list[dict]:
        arguments = {"query": query, "n": n, "now": now, **({"person": person} if person else {})}
        res = self._call("query", self._types["QueryMemory"].Request(tool="semantic_observations",
                                                                     arguments_json=json.dumps(arguments)),
                         READ_TIMEOUT_S, READ_RETRY_S)
        if not res.success:
            raise BackendError(f"the memory node refused the search: {res.error}", status_of(res.error))
        return json.loads(res.result_json)

    def name(self, person: str, name: str) -> Optional[str]:
        res = self._call("name", self._types["NameIdentity"].Request(identity_id=person, display_name=name),
                         WRITE_TIMEOUT_S)
        if not res.success:
            raise BackendError(f"the memory node did not name {person}: {res.message}", status_of(res.message))
        return None          # the identity kept: the caller reads it from the memory (a name may merge)

    def merge(self, person: str, into: str) -> str:
        from ..nodes.common import to_time_msg
        merge_id = f"merge:{person}>{into}"      # the memory node's Ack id for this merge
        deadline = time.monotonic() + WRITE_TIMEOUT_S
        with self._acks_changed:
            self._waiting[merge_id] = None
        try:
            while self._merge_pub.get_subscription_count() == 0:
                if time.monotonic() > deadline:
                    raise BackendError(f"nothing subscribes to {self.names.merges}: is the memory node running?", 503)
                time.sleep(0.05)
            msg = self._types["IdentityMerge"](stamp=to_time_msg(time.time()), absorbed_id=person, surviving_id=into)
            with self._acks_changed:
                while self._waiting[merge_id] is None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise BackendError(f"no Ack on {self.names.acks} for the merge within {WRITE_TIMEOUT_S:.0f} s "
                                           "(the memory node may still carry it out)", 504)
                    self._merge_pub.publish(msg)      # again until acknowledged (none on a write fault)
                    self._acks_changed.wait(min(MERGE_RESEND_S, left))
                ack = self._waiting[merge_id]
        finally:
            with self._acks_changed:
                self._waiting.pop(merge_id, None)
        if ack.status == self._types["Ack"].REJECTED:
            raise BackendError(f"the memory node refused the merge: {ack.reason}", 400)
        return "done by the memory node"

    def undo_identity_change(self, change: int) -> str:
        raise BackendError("undoing an identity change goes to the memory directory, not the running stack: stop "
                           "the stack and open the inspector on its data_dir", 501)

    def consolidate(self, dry_run: bool):
        raise BackendError("proposals with crops need the memory directory at rest; on the running stack, call "
                           "/perception/consolidate (embodied_memory_interfaces/srv/Consolidate, dry_run: true first)",
                           501)

    def _on_ack(self, msg) -> None:
        with self._acks_changed:
            if msg.id in self._waiting:            # only the merges this inspector sent and waits for
                self._waiting[msg.id] = msg
                self._acks_changed.notify_all()

    def forget(self, person: str, dry_run: bool) -> dict:
        forget = self._types["Forget"]
        res = self._call("forget", forget.Request(mode=forget.Request.MODE_IDENTITY, identity_id=person,
                                                  dry_run=dry_run), READ_TIMEOUT_S if dry_run else WRITE_TIMEOUT_S)
        if not res.success:
            raise BackendError(f"the memory node did not forget {person}: {res.message}", status_of(res.message))
        return {"sightings_removed": res.sightings_removed, "files_removed": res.files_removed,
                "images_removed": res.images_removed, "observations_removed": res.observations_removed,
                "identity_id": res.identity_id or person, "dry_run": dry_run}

    def ask(self, question: str, planner: str, as_of: Optional[float]) -> dict:
        from ..nodes.common import to_time_msg
        from builtin_interfaces.msg import Time
        request = self._types["Ask"].Request(question=question, planner=planner or "",
                                             as_of=to_time_msg(as_of) if as_of else Time())
        answer = self._call("ask", request, self.ask_timeout_s).answer
        if answer.json:
            return json.loads(answer.json)
        return {"status": answer.status, "error": answer.error, "text": answer.text, "tool_calls": answer.tool_calls}

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        import rclpy
        executor = getattr(self, "_executor", None)
        if executor is not None:
            executor.shutdown(timeout_sec=2.0)
        if self._spin is not None:
            self._spin.join(timeout=2.0)
        node = getattr(self, "node", None)
        if node is not None:
            node.destroy_node()
        if self._context is not None and self._context.ok():
            rclpy.shutdown(context=self._context)
