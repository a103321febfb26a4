"""Parameters of every node, one dataclass each, with defaults that run offline on a CPU.

The registry ``NODE_PARAMS`` maps an executable name to its dataclass; the launcher and the
launch files validate a stack against it before any process starts, and each node validates
its own ROS parameters against it again at start-up (so ``ros2 run`` with a stray key fails
too).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .agent.query_agent import AgentParams
from .explore.policies import POLICIES as EXPLORE_POLICIES
from .ingest.offline import TopicParams
from .ingest.selection import SelectionParams
from .perception.pipeline import PerceptionParams
from .perception.regions import REGION_PROPOSERS
from .store.params import StoreParams


MEMORY_QUERY_SERVICE = "memory/query"              # embodied_memory_interfaces/QueryMemory (one retrieval tool)
MEMORY_STATS_SERVICE = "memory/stats"              # GetMemoryStats
MEMORY_FORGET_SERVICE = "memory/forget"            # Forget
MEMORY_NAME_SERVICE = "memory/name_identity"       # NameIdentity
ACKS_TOPIC = "memory/acks"                         # embodied_memory_interfaces/Ack (nodes/delivery.py)
FORGOTTEN_TOPIC = "memory/forgotten_identities"    # embodied_memory_interfaces/IdentityForgotten
MERGES_TOPIC = "memory/identity_merges"            # IdentityMerge (perception -> memory)
IDENTITY_CHANGES_TOPIC = "memory/identity_changes"  # IdentitySplit: consolidation's moves (perception -> memory)
CONSOLIDATE_SERVICE = "perception/consolidate"     # Consolidate (perception re-clusters the stored face tracks)
ATTACH_AFTER_IDLE_S = 3600.0                        # an idle robot's attach pass (perception node, offline ingest)
RESEND_AFTER_S = 10.0                               # neither accepted nor acknowledged this long: sent
                                                    # again (then after 2x, 4x, 8x)
SENSOR_QOS_CHOICES = ("sensor_data", "reliable")    # image/depth/camera-info/odometry subscriptions
                                                    # (nodes/sensor_qos.py): best effort, matches any
                                                    # publisher | reliable, matches reliable ones only


@dataclass(frozen=True)
class MemoryNodeParams(StoreParams):
    clip_weights: str = ""                 # CLIP checkpoint: words matched to stored image and region embeddings
                                           # (the regions tool; image_dim must be CLIP's); "" = no text-to-region
    clip_model: str = "ViT-B-32"
    device: str = "cuda"                   # for CLIP
    observations_topic: str = "memory/observations"
    markers_topic: str = "memory/markers"
    markers_period_s: float = 5.0
    markers_max: int = 2000
    map_frame: str = "map"
    fleet_poll_s: float = 10.0             # backend postgres: how often to look for forgets made elsewhere in the
                                           # fleet and to measure this clock against the server's
    max_clock_skew_s: float = 1.0          # backend postgres: a larger offset from the server's clock is warned of
    merges_topic: str = MERGES_TOPIC
    identity_changes_topic: str = IDENTITY_CHANGES_TOPIC
    episode_maps_topic: str = "memory/episode_maps"
    acks_topic: str = ACKS_TOPIC
    forgotten_topic: str = FORGOTTEN_TOPIC
    autostart: bool = False                # configure (open the store) + activate at start-up (a node run by
                                           # hand); false: a launch system drives it (nodes/lifecycle.py)

    # settable at run time (`ros2 param set`, nodes/parameters.py); every other one is read-only
    DYNAMIC: ClassVar[frozenset[str]] = frozenset({"markers_max"})

    def validate(self) -> None:
        super().validate()
        for name in ("markers_period_s", "fleet_poll_s", "max_clock_skew_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: must be > 0 (seconds)")


@dataclass(frozen=True)
class ObservationImporterParams:
    """Publishes observations from a JSON-lines export (another robot, an older store)."""

    input_path: str = ""
    observations_topic: str = "memory/observations"
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

    ask_service: str = "agent/ask"
    memory_query_service: str = MEMORY_QUERY_SERVICE
    memory_timeout_s: float = 10.0
    navigation_action: str = ""            # e.g. /navigate_to_waypoint: enables the navigate tool
    ask_and_act_action: str = "agent/ask_and_act"  # AskAndAct action: questions that may drive
                                           # (the only ones with the navigate tool); "" = not served
    navigation_timeout_s: float = 300.0    # one navigate call; past it the bridge goal is cancelled
    max_concurrent_questions: int = 4      # answered at the same time
    max_queued_questions: int = 16         # waiting for a free slot; beyond: "busy:" error at once

    # settable at run time (the next question uses them); every other one is read-only
    DYNAMIC: ClassVar[frozenset[str]] = frozenset({"planner", "match_threshold", "rules_top_k"})

    def validate(self) -> None:
        super().validate()
        if self.max_concurrent_questions < 1 or self.max_queued_questions < 0:
            raise ValueError("max_concurrent_questions must be >= 1 and max_queued_questions >= 0")
        if self.max_concurrent_questions + self.max_queued_questions > MAX_ADMITTED_QUESTIONS:
            raise ValueError(f"max_concurrent_questions + max_queued_questions: at most {MAX_ADMITTED_QUESTIONS}")
        if not self.memory_timeout_s > 0:
            raise ValueError("memory_timeout_s: must be > 0")
        if not self.navigation_timeout_s > 0:
            raise ValueError("navigation_timeout_s: must be > 0")

    def answer_wait_s(self) -> float:
        """The longest a caller waits for an answer (queue included): the question's budget and
        the node's grace to send the reply.  The CLI's default ``ask --timeout`` is this."""
        return self.question_timeout() + ANSWER_GRACE_S

    def act_wait_s(self) -> float:
        """The longest an AskAndAct goal runs: the question's budget (planning), the navigation's
        timeout (driving) and the grace; then it is stopped (the bridge goal cancelled)."""
        return self.question_timeout() + self.navigation_timeout_s + ANSWER_GRACE_S


WAYPOINT_RADIUS_M = 3.0        # a pose this near a table waypoint is at it (its views are tagged with it)
MAX_ADMITTED_QUESTIONS = 128   # concurrent + queued: each waiting question holds an executor thread
ANSWER_GRACE_S = 5.0           # beyond the question's budget: the reply's way back to the caller


@dataclass(frozen=True)
class FrameSelectorNodeParams(SelectionParams, TopicParams):
    """Synchronises camera + pose (+ depth, camera info, waypoint) and emits keyframes."""

    keyframes_topic: str = "memory/keyframes"
    progress_topic: str = "memory/frames_processed"   # replay --paced waits on it
    waypoints_file: str = ""                           # waypoint table: frames without a reported waypoint
                                                       # get the nearest one of it
    waypoint_radius_m: float = WAYPOINT_RADIUS_M       # within this distance (m) of a table waypoint
    episode_id: str = ""                               # "" = "run_<start time>"
    flush_after_s: float = 3.0                         # no frame for this long: close the segment
    acks_topic: str = ACKS_TOPIC                       # keyframes are kept until the memory (or
    max_unacked_keyframes: int = 500                   # perception, dropping one) acknowledges them
                                                       # (compressed 640x480 + depth: ~50 MB at most)
    resend_after_s: float = RESEND_AFTER_S
    sensor_qos: str = "sensor_data"                    # image/depth/camera_info/odometry subscriptions:
                                                       # sensor_data (best effort: camera drivers and bag
                                                       # players) | reliable (reliable publishers only)

    # settable at run time (the next frame uses them); every other one is read-only
    DYNAMIC: ClassVar[frozenset[str]] = frozenset({"flush_after_s", "waypoint_radius_m"})

    def validate(self) -> None:
        super().validate()
        check_sensor_qos(self.sensor_qos)
        self.check_frames()                            # fixed_frame, base_frame, transform_wait_s (TopicParams)
        if not self.flush_after_s > 0 or not self.waypoint_radius_m >= 0:
            raise ValueError("flush_after_s must be > 0 and waypoint_radius_m >= 0")
        if self.max_unacked_keyframes < 1 or not self.resend_after_s > 0:
            raise ValueError("max_unacked_keyframes must be >= 1 and resend_after_s > 0")


def check_sensor_qos(value: str) -> None:
    if value not in SENSOR_QOS_CHOICES:
        raise ValueError(f"sensor_qos: unknown '{value}' ({' | '.join(SENSOR_QOS_CHOICES)})")


@dataclass(frozen=True)
class PerceptionNodeParams(PerceptionParams):
    keyframes_topic: str = "memory/keyframes"
    observations_topic: str = "memory/observations"
    merges_topic: str = MERGES_TOPIC
    identity_changes_topic: str = IDENTITY_CHANGES_TOPIC
    acks_topic: str = ACKS_TOPIC                       # observations are kept until the memory
    max_unacked_observations: int = 500                # acknowledges them
    resend_after_s: float = RESEND_AFTER_S
    forgotten_topic: str = FORGOTTEN_TOPIC
    forgotten_person: str = "drop"                     # drop: later sightings of a forgotten face are
                                                       # not recorded | new_id: they get a fresh id
    max_queued_keyframes: int = 500                    # accepted, not yet perceived (more: resent later;
                                                       # a replay at 1000x real time fills it)
    max_attempts: int = 3                              # perception failures (VLM down) before a drop
    consolidate_every_h: float = 0.0                   # re-cluster the stored face tracks this often (steady clock;
                                                       # reads data_dir/memory.sqlite3); 0: only on a
                                                       # /perception/consolidate request
    attach_after_idle_s: float = ATTACH_AFTER_IDLE_S    # no keyframe for this long (node clock): the attach
                                                       # pass gives stored faces perception could not tell then
                                                       # the identity they now clearly match; 0: never
    autostart: bool = False                            # configure (load the models) + activate at start-up;
                                                       # false: a launch system drives it (nodes/lifecycle.py)

    # settable at run time (the next keyframe uses it); every other one is read-only
    DYNAMIC: ClassVar[frozenset[str]] = frozenset({"max_attempts"})

    def validate(self) -> None:
        super().validate()
        if self.forgotten_person not in ("drop", "new_id"):
            raise ValueError(f"forgotten_person: unknown '{self.forgotten_person}' (drop | new_id)")
        for name in ("max_unacked_observations", "max_queued_keyframes", "max_attempts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1")
        if not self.resend_after_s > 0:
            raise ValueError("resend_after_s: must be > 0")
        if not 0 <= self.consolidate_every_h <= 24 * 365:
            raise ValueError(f"consolidate_every_h: {self.consolidate_every_h} (hours, 0 = on request only)")
        if not 0 <= self.attach_after_idle_s <= 7 * 24 * 3600:
            raise ValueError(f"attach_after_idle_s: {self.attach_after_idle_s} (seconds, 0 = never)")


@dataclass(frozen=True)
class NavBridgeNodeParams:
    backend: str = "sim"                                # graphnav | nav2 | sim
    action_name: str = "navigate_to_waypoint"
    waypoints_file: str = ""                            # YAML: waypoints: {id: {x, y, yaw, names}}
    default_timeout_s: float = 300.0
    server_wait_s: float = 5.0                          # backend action server discovery
    nav2_action: str = "navigate_to_pose"
    graphnav_action: str = "navigate_to"                # relative: the robot namespace applies
    graphnav_localization_service: str = "graph_nav_get_localization_pose"
    map_frame: str = "map"
    sim_speed: float = 1.0
    sim_rate_hz: float = 20.0
    sim_start_x: float = 0.0
    sim_start_y: float = 0.0
    sim_odom_topic: str = "odom"                       # sim: the base's pose (nav_msgs/Odometry, map frame)
    arrive_tolerance_m: float = 0.25
    memory_query_service: str = MEMORY_QUERY_SERVICE         # verify_person_id: look for a fresh sighting
    verify_person_timeout_s: float = 20.0

    # settable at run time (the next goal uses them); every other one is read-only
    DYNAMIC: ClassVar[frozenset[str]] = frozenset({"default_timeout_s", "arrive_tolerance_m", "verify_person_timeout_s"})

    def validate(self) -> None:
        if self.backend not in ("graphnav", "nav2", "sim"):
            raise ValueError(f"backend: unknown '{self.backend}' (graphnav | nav2 | sim)")
        if self.sim_speed <= 0 or self.sim_rate_hz <= 0 or self.default_timeout_s <= 0:
            raise ValueError("sim_speed, sim_rate_hz and default_timeout_s must be > 0")


@dataclass(frozen=True)
class ExploreNodeParams:
    """Serves the Explore action (HIMM exploration with episodic and semantic memory)."""

    environment: str = "sim"               # sim: the simulated office in-process (oracle target detector,
                                           # a labelled stand-in) | robot: depth topics + navigation bridge
    action_name: str = "explore"
    map_topic: str = "explore/map"
    frontiers_topic: str = "explore/frontiers"
    map_frame: str = "map"
    episode_prefix: str = "explore"
    image_dir: str = "~/.local/share/embodied_memory/explore_images"
    memory_query_service: str = MEMORY_QUERY_SERVICE
    memory_timeout_s: float = 10.0
    observations_topic: str = "memory/observations"
    episode_maps_topic: str = "memory/episode_maps"
    ask_service: str = "agent/ask"        # the final answer to a question; "" = none
    max_steps: int = 60
    max_duration_s: float = 600.0          # a goal's default when it gives 0
    look_around_views: int = 6
    approach_radius_m: float = 1.0
    robot_radius_m: float = 0.3
    grid_resolution_m: float = 0.1
    grid_size_m: float = 40.0
    grid_origin_x: float = -20.0
    grid_origin_y: float = -20.0
    max_range_m: float = 6.0
    recall_top_k: int = 10
    target_threshold: float = 0.45
    d_min_m: float = 3.0
    explore_policy: str = "semantic"       # nearest | semantic (the views' descriptions vs the instruction,
                                           # MiniLM) | mllm (HIMM's planner: map + views to the model)
    planner_images: bool = True            # mllm: send the map and views as images (False: as text, for a
                                           # text-only model)
    decomposition: str = "words"           # words | llm: the instruction's target, related objects and areas
    waypoints_file: str = ""               # robot: YAML waypoints {id: {x, y, yaw, names}}: the stored views'
                                           # places (the nearest within waypoint_radius_m); sim: the floor plan
    waypoint_radius_m: float = WAYPOINT_RADIUS_M
    answerer: str = "memory"               # a question goal's answer: memory (the query agent at ask_service, over
                                           # what the episode stored) | vlm (the episode's views to llm_base_url)
    pruning: str = "geometric"             # geometric | mllm (needs llm_base_url)
    verifier: str = "feature_match"        # feature_match | mllm (needs llm_base_url)
    region_proposer: str = "none"          # none | segments (offline colour segments) | sam (sam_weights): each
                                           # view's regions stored, so a goal's target_image is recalled by region
    sam_weights: str = ""                  # region_proposer sam: the Segment Anything checkpoint
    sam_model_type: str = "vit_h"
    device: str = "cuda"                   # region_proposer sam: the torch device
    llm_base_url: str = ""                 # OpenAI-compatible multimodal endpoint
    llm_model: str = ""
    sim_layout: str = "office"             # a floor plan of sim.floor_plans: office | wing | hall
    sim_seed: int = 0
    sim_start: str = "lobby"               # a start of sim_layout (office: lobby | corridor_west | corridor_east |
                                           # corridor_centre)
    sim_target_room: str = ""              # "" = chosen by the seed; else one of sim_layout's target rooms
    sim_restart_each_goal: bool = True     # every goal is an episode from sim_start (benchmarks)
    navigation_action: str = "navigate_to_waypoint"
    depth_topic: str = "camera/depth/image_rect_raw"
    camera_info_topic: str = "camera/depth/camera_info"
    image_topic: str = "camera/color/image_raw/compressed"
    pose_topic: str = "odom"              # nav_msgs/Odometry in the map frame
    camera_height_m: float = 1.0
    camera_pitch_deg: float = 0.0
    sensor_timeout_s: float = 5.0
    sensor_qos: str = "sensor_data"        # robot: image/depth/camera_info/odometry subscriptions (sensor_data:
                                           # best effort, any publisher | reliable: reliable publishers only)

    # settable at run time (the next goal uses them); every other one is read-only
    DYNAMIC: ClassVar[frozenset[str]] = frozenset({"max_steps", "max_duration_s", "target_threshold"})

    def validate(self) -> None:
        check_sensor_qos(self.sensor_qos)
        if self.environment not in ("sim", "robot"):
            raise ValueError(f"environment: unknown '{self.environment}' (sim | robot)")
        if self.pruning not in ("geometric", "mllm"):
            raise ValueError(f"pruning: unknown '{self.pruning}' (geometric | mllm)")
        if self.verifier not in ("feature_match", "mllm"):
            raise ValueError(f"verifier: unknown '{self.verifier}' (feature_match | mllm)")
        if self.explore_policy not in EXPLORE_POLICIES:
            raise ValueError(f"explore_policy: unknown '{self.explore_policy}' ({' | '.join(EXPLORE_POLICIES)})")
        if self.decomposition not in ("words", "llm"):
            raise ValueError(f"decomposition: unknown '{self.decomposition}' (words | llm)")
        if self.waypoints_file and self.environment == "sim":
            raise ValueError("waypoints_file: the simulated office names its rooms from its floor plan; "
                             "set it only with environment: robot")
        if self.answerer not in ("memory", "vlm"):
            raise ValueError(f"answerer: unknown '{self.answerer}' (memory | vlm)")
        if self.region_proposer not in REGION_PROPOSERS:
            raise ValueError(f"region_proposer: unknown '{self.region_proposer}' ({' | '.join(REGION_PROPOSERS)})")
        if self.region_proposer == "sam" and not self.sam_weights:
            raise ValueError("region_proposer: sam needs sam_weights (a Segment Anything checkpoint)")
        for name, model in (("pruning", "mllm"), ("verifier", "mllm"), ("explore_policy", "mllm"),
                            ("decomposition", "llm"), ("answerer", "vlm")):
            if getattr(self, name) == model and not self.llm_base_url:
                raise ValueError(f"{name}: {model} needs llm_base_url (an OpenAI-compatible multimodal endpoint)")
        if self.environment == "robot" and not self.llm_base_url:
            raise ValueError("environment: robot recognises the target with a VLM; set llm_base_url "
                             "(no open-vocabulary detector ships offline)")
        if self.environment == "sim":
            check_sim_world(self.sim_layout, self.sim_target_room, self.sim_start)
        for name in ("max_steps", "look_around_views", "grid_resolution_m", "grid_size_m", "max_range_m",
                     "approach_radius_m", "max_duration_s", "sensor_timeout_s", "waypoint_radius_m"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}: must be > 0")


def check_sim_world(layout: str, target_room: str, start: str = "") -> None:
    """The simulated office's floor plan, target room and start exist (sim.floor_plans)."""
    from .sim.floor_plans import FLOOR_PLANS       # the simulator's own facts (plain Python, no rendering)
    plan = FLOOR_PLANS.get(layout)
    if plan is None:
        raise ValueError(f"sim_layout: unknown '{layout}' ({' | '.join(FLOOR_PLANS)})")
    if start and start not in plan.starts:
        raise ValueError(f"sim_start: unknown '{start}' on {plan.name} ({' | '.join(plan.starts)})")
    if target_room not in ("", *plan.target_rooms):
        raise ValueError(f"sim_target_room: unknown '{target_room}' on {plan.name} ({' | '.join(plan.target_rooms)})")


@dataclass(frozen=True)
class SimCameraNodeParams:
    """A simulated RGB-D camera on the simulated base: renders the office at the odometry pose
    (the simulator side of a robot-in-the-loop test; no robot code knows it is simulated)."""

    sim_layout: str = "office"             # the explore node's sim_layout, sim_seed and sim_target_room
    sim_seed: int = 0
    sim_target_room: str = ""
    width: int = 320
    height: int = 240
    rate_hz: float = 5.0
    odom_topic: str = "odom"
    image_topic: str = "camera/color/image_raw/compressed"
    depth_topic: str = "camera/depth/image_rect_raw"
    camera_info_topic: str = "camera/depth/camera_info"

    def validate(self) -> None:
        if self.rate_hz <= 0 or self.width < 16 or self.height < 16:
            raise ValueError("rate_hz must be > 0 and the image at least 16x16")
        check_sim_world(self.sim_layout, self.sim_target_room)


NODE_PARAMS: dict[str, type] = {
    "sim_camera_node": SimCameraNodeParams,
    "explore_node": ExploreNodeParams,
    "nav_bridge_node": NavBridgeNodeParams,
    "frame_selector_node": FrameSelectorNodeParams,
    "perception_node": PerceptionNodeParams,
    "memory_node": MemoryNodeParams,
    "query_agent_node": QueryAgentNodeParams,
    "observation_importer": ObservationImporterParams,
}

__all__ = ["NODE_PARAMS", "MEMORY_QUERY_SERVICE", "MEMORY_STATS_SERVICE", "MEMORY_FORGET_SERVICE",
           "MEMORY_NAME_SERVICE", "StoreParams", "MemoryNodeParams", "ObservationImporterParams", "QueryAgentNodeParams"]
