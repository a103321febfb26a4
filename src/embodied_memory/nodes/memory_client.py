"""The memory's retrieval functions over ROS (the /memory/query service), for nodes that do
not own the store (query agent, navigation bridge)."""
from __future__ import annotations

import json
import threading

from embodied_memory_interfaces.srv import QueryMemory
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node

from ..agent.tools import MemoryUnavailable
from ..store.memory_store import MemoryStore
from ..store.errors import InvalidArgumentError
from ..store.tool_args import validate_arguments
from .common import service_qos


class MemoryServiceError(MemoryUnavailable):
    pass


class InvalidMemoryCall(MemoryServiceError, InvalidArgumentError):
    """A call the memory would refuse, refused before sending (callers handle it as any
    MemoryServiceError)."""


class RosMemoryClient:
    """MemoryClient over the /memory/query service (safe to call from a service callback of a
    multi-threaded executor: it waits on an event, not on the executor).  ``timeout_s`` is a
    wait on a peer: wall time, whatever use_sim_time says.  Arguments go through unchanged:
    the question time ("now", "before") is the caller's (the agent's ToolBox)."""

    def __init__(self, node: Node, service: str, timeout_s: float):
        self._client = node.create_client(QueryMemory, service, qos_profile=service_qos(),
                                          callback_group=ReentrantCallbackGroup())
        self.service = service
        self.timeout_s = timeout_s
        self._notices = threading.local()       # what the memory said beside its results, per asking thread

    def take_notices(self) -> list[str]:
        """The memory's notices (e.g. a stale fleet view) since the last call, in this thread."""
        notices, self._notices.items = getattr(self._notices, "items", []), []
        return list(dict.fromkeys(notices))

    def call(self, tool: str, arguments: dict):
        """Arguments are checked against the tool's declaration (store/tool_registry.py) before
        anything is sent: a wrong call fails here with the memory's own message."""
        try:
            validate_arguments(MemoryStore.tool_table(), tool, arguments)
        except InvalidArgumentError as exc:
            raise InvalidMemoryCall(str(exc)) from None
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
        if response.notice:
            self._notices.items = getattr(self._notices, "items", [])
            self._notices.items.append(response.notice)
        return json.loads(response.result_json)


class RosExplorationMemory:
    """The explorer's memory when the memory node owns the store: recall reads go through
    /memory/query, observations and the episode's map are published to the memory node."""

    def __init__(self, node: Node, client: RosMemoryClient, observations_topic: str, maps_topic: str,
                 map_frame: str = "map"):
        from embodied_memory_interfaces.msg import EpisodeMap, Observation
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        qos = QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE)
        self._node, self._client, self._map_frame = node, client, map_frame
        self._obs_pub = node.create_publisher(Observation, observations_topic, qos)
        self._map_pub = node.create_publisher(EpisodeMap, maps_topic, qos)
        self._episode_map = EpisodeMap

    def visual_similarity(self, embedding, k: int = 10, exclude_episode=None) -> list[dict]:
        return self._client.call("visual_similarity", {"embedding": [float(v) for v in embedding], "k": int(k),
                                                       "exclude_episode": exclude_episode})

    def text_observations(self, query: str, k: int = 5, episode=None) -> list[dict]:
        return self._client.call("text_observations", {"query": query, "k": int(k), "episode": episode})

    def similar_regions(self, embedding, k: int = 10, episode=None, exclude_episode=None) -> list[dict]:
        return self._client.call("similar_regions", {"embedding": [float(v) for v in embedding], "k": int(k),
                                                     "episode": episode, "exclude_episode": exclude_episode})

    def rules_for(self, query: str, k: int = 3) -> list[dict]:
        return self._client.call("rules_for", {"query": query, "k": int(k)})

    def load_occupancy_map(self, episode_id: str):
        import base64

        import numpy as np
        stored = self._client.call("occupancy_map", {"episode_id": episode_id})
        if not stored:
            return None
        grid = np.frombuffer(base64.b64decode(stored["data_b64"]), np.int8).reshape(stored["height"], stored["width"])
        return {"grid": grid, "resolution": stored["resolution"], "origin": tuple(stored["origin"])}

    def add_episode(self, episode) -> None:
        """The memory node creates the episode with its first observation."""

    def insert(self, observations) -> list[str]:
        from .conversions import observation_to_msg
        for obs in observations:
            self._obs_pub.publish(observation_to_msg(obs))
        return [o.observation_id for o in observations]

    def save_occupancy_map(self, episode_id: str, grid, resolution: float, origin) -> None:
        from .conversions import grid_to_msg
        from .node_clock import now_s
        self._map_pub.publish(self._episode_map(episode_id=episode_id, map=grid_to_msg(
            grid, resolution, origin, now_s(self._node), self._map_frame)))  # robot time
