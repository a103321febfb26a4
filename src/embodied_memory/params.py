"""Parameters of every node, one dataclass each, with defaults that run offline on a CPU.

The registry ``NODE_PARAMS`` maps an executable name to its dataclass; the launcher and the
launch files validate a stack against it before any process starts, and each node validates
its own ROS parameters against it again at start-up (so ``ros2 run`` with a stray key fails
too).
"""
from __future__ import annotations

from dataclasses import dataclass

from .agent.query_agent import AgentParams, check_timezone
from .ingest.offline import TopicParams
from .ingest.selection import SelectionParams
from .perception.pipeline import PerceptionParams


@dataclass(frozen=True)
class StoreParams:
    """Where and how the memory is kept (see embodied_memory.store)."""

    backend: str = "sqlite_faiss"          # sqlite_faiss (embedded) | milvus
    data_dir: str = "~/.local/share/embodied_memory"
    milvus_uri: str = ""                   # milvus: http://host:19530, or a file for Milvus Lite
    text_dim: int = 384                    # MiniLM-L6
    image_dim: int = 1280                  # MobileNetV2 pooled features (CLIP ViT-B/32: 512)
    face_dim: int = 128                    # SFace
    reid_dim: int = 1280
    max_description_chars: int = 8192
    timezone: str = "UTC"                  # for "per day" queries
    recency_weight_cos: float = 3.0        # HUMEMBR s = a*cos_dist + b*(1 - exp(-lambda*h))
    recency_weight_time: float = 1.0
    recency_horizon_hours: float = 120.0   # penalty reaches 0.95 at this age
    checkpoint_every: int = 50_000         # vector snapshot every N inserts (a restart re-adds at most
                                           # this many vectors from SQLite; a snapshot rewrites the index)
    ivf_min_vectors: int = 200_000         # FAISS: exact flat index below, IVF (approximate) above
    text_embedder: str = "minilm"          # minilm | hash (tests/benchmarks without a model)

    def validate(self) -> None:
        if self.backend not in ("sqlite_faiss", "milvus"):
            raise ValueError(f"backend: unknown '{self.backend}' (sqlite_faiss | milvus)")
        for name in ("text_dim", "image_dim", "face_dim", "reid_dim", "max_description_chars",
                     "checkpoint_every", "ivf_min_vectors"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}: must be > 0")
        if self.recency_horizon_hours <= 0:
            raise ValueError("recency_horizon_hours: must be > 0")
        check_timezone(self.timezone)
        if self.text_embedder not in ("minilm", "hash"):
            raise ValueError(f"text_embedder: unknown '{self.text_embedder}' (minilm | hash)")


@dataclass(frozen=True)
class MemoryNodeParams(StoreParams):
    observations_topic: str = "/memory/observations"
    markers_topic: str = "/memory/markers"
    markers_period_s: float = 5.0
    markers_max: int = 2000
    map_frame: str = "map"
    merges_topic: str = "/memory/identity_merges"


@dataclass(frozen=True)
class ObservationImporterParams:
    """Publishes observations from a JSON-lines export (another robot, an older store)."""

    input_path: str = ""
    observations_topic: str = "/memory/observations"
    rate_hz: float = 50.0
    wait_for_subscriber_s: float = 10.0

    def validate(self) -> None:
        if not self.input_path:
            raise ValueError("input_path: required (a .jsonl file of observations)")
        if self.rate_hz <= 0:
            raise ValueError("rate_hz: must be > 0")


@dataclass(frozen=True)
class QueryAgentNodeParams(AgentParams):
    """Serves /agent/ask; reaches the memory through the memory node's query service."""

    ask_service: str = "/agent/ask"
    memory_query_service: str = "/memory/query"
    memory_timeout_s: float = 10.0
    navigation_action: str = ""            # e.g. /navigate_to_waypoint: enables the navigate tool


@dataclass(frozen=True)
class FrameSelectorNodeParams(SelectionParams, TopicParams):
    """Synchronises camera + pose (+ depth, camera info, waypoint) and emits keyframes."""

    keyframes_topic: str = "/memory/keyframes"
    progress_topic: str = "/memory/frames_processed"   # replay --paced waits on it
    waypoints_file: str = ""                           # tag frames with the nearest waypoint when
    waypoint_radius_m: float = 3.0                     # no waypoint topic says where the robot is
    episode_id: str = ""                               # "" = "run_<start time>"
    flush_after_s: float = 3.0                         # no frame for this long: close the segment


@dataclass(frozen=True)
class PerceptionNodeParams(PerceptionParams):
    keyframes_topic: str = "/memory/keyframes"
    observations_topic: str = "/memory/observations"
    merges_topic: str = "/memory/identity_merges"


@dataclass(frozen=True)
class NavBridgeNodeParams:
    backend: str = "sim"                                # graphnav | nav2 | sim
    action_name: str = "/navigate_to_waypoint"
    waypoints_file: str = ""                            # YAML: waypoints: {id: {x, y, yaw, names}}
    default_timeout_s: float = 300.0
    server_wait_s: float = 5.0                          # backend action server discovery
    nav2_action: str = "navigate_to_pose"
    graphnav_action: str = "navigate_to"                # relative: the robot namespace applies
    graphnav_localization_service: str = "graph_nav_get_localization_pose"
    map_frame: str = "map"
    sim_speed: float = 1.0
    sim_rate_hz: float = 20.0
    arrive_tolerance_m: float = 0.25
    memory_query_service: str = "/memory/query"         # verify_person_id: look for a fresh sighting
    verify_person_timeout_s: float = 20.0

    def validate(self) -> None:
        if self.backend not in ("graphnav", "nav2", "sim"):
            raise ValueError(f"backend: unknown '{self.backend}' (graphnav | nav2 | sim)")
        if self.sim_speed <= 0 or self.sim_rate_hz <= 0 or self.default_timeout_s <= 0:
            raise ValueError("sim_speed, sim_rate_hz and default_timeout_s must be > 0")


NODE_PARAMS: dict[str, type] = {
    "nav_bridge_node": NavBridgeNodeParams,
    "frame_selector_node": FrameSelectorNodeParams,
    "perception_node": PerceptionNodeParams,
    "memory_node": MemoryNodeParams,
    "query_agent_node": QueryAgentNodeParams,
    "observation_importer": ObservationImporterParams,
}

__all__ = ["NODE_PARAMS", "StoreParams", "MemoryNodeParams", "ObservationImporterParams", "QueryAgentNodeParams"]
