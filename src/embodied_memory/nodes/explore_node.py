"""explore_node: the Explore action (HIMM exploration with episodic and semantic memory).

Action      /explore (embodied_memory_interfaces/Explore): a question or a target description;
            feedback per step (cognitive state, frontiers left, path length, pose)
Publishes   /explore/map (nav_msgs/OccupancyGrid, transient local), /explore/frontiers (MarkerArray)
Memory      reads /memory/query (recall), publishes /memory/observations and /memory/episode_maps
Answers     through the query agent's /agent/ask when the goal is a question
Robot       (environment: robot) depth + camera info + colour + pose topics, NavigateToWaypoint
            goals with poses to the navigation bridge; the target is recognised by a VLM

The explorer core (embodied_memory.explore) runs in one worker thread: it owns the simulator's
GL context in ``environment: sim`` and serialises goals (a second goal while one runs is
rejected).

Time: episode ids, map and feedback stamps and a goal's ``max_duration_s`` are robot time, the
node clock (/clock under ``use_sim_time``; nodes/node_clock.py); waits on the query agent and
on worker threads are wall time.

/diagnostics: ``count.goals_received | goals_rejected | goals_succeeded | goals_failed |
goals_cancelled`` and the gauge ``goals_active``.
"""
from __future__ import annotations

import datetime as dt
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

import cv2
import numpy as np
from action_msgs.msg import GoalStatus
from embodied_memory_interfaces.action import Explore
from embodied_memory_interfaces.srv import Ask
from geometry_msgs.msg import Point
from nav_msgs.msg import OccupancyGrid as GridMsg
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from ..agent.answer import Answer
from ..explore.episode_answer import VlmAnswerer
from ..explore.episodic_recall import EpisodicRecall, FeatureMatchVerifier, MllmPlaceVerifier
from ..explore.explorer import Explorer, ExplorerParams
from ..explore.frontier_pruning import GeometricPruner, MllmPruner
from ..explore.instruction import LlmDecomposer
from ..explore.policies import PolicyConfig, make_policy
from ..explore.occupancy import GridParams
from ..params import ExploreNodeParams
from .common import node_options, node_params, run_node
from .conversions import answer_to_msg, grid_to_msg, pose_to_msg
from .health import NodeHealth
from .memory_client import RosExplorationMemory, RosMemoryClient
from .node_clock import RobotDeadline, now_msg, now_s


def episode_id_at(prefix: str, t: float) -> str:
    """``prefix-YYYYmmddTHHMMSS-mmm`` of robot time ``t`` (UTC)."""
    stamp = dt.datetime.fromtimestamp(t, tz=dt.timezone.utc)
    return f"{prefix}-{stamp.strftime('%Y%m%dT%H%M%S')}-{stamp.microsecond // 1000:03d}"


TARGET_IMAGE_MAX_BYTES = 8 * 1024 * 1024    # a goal's picture: larger compressed images are refused
TARGET_IMAGE_SIDE = 1024                    # ... and it is used at most this many pixels a side


class ExploreNode(Node):
    def __init__(self, **kwargs):
        super().__init__("explore", **node_options(kwargs))
        p = self.params = node_params(self, ExploreNodeParams)
        self.health = NodeHealth(self)
        self._running = 0
        self._last_episode, self._repeats = "", 0
        self._ready_answer = None           # the answer the ready-to-answer check got (this goal's)
        self._place_of = None               # (x, y) -> the named place there, for the views it stores
        self.health.gauges["goals_active"] = lambda: self._running
        self._client = None
        if p.llm_base_url:
            from ..llm.chat_client import ChatClient, LLMConfig
            self._client = ChatClient(LLMConfig(base_url=p.llm_base_url, model=p.llm_model))
        group = ReentrantCallbackGroup()
        self.memory = RosExplorationMemory(self, RosMemoryClient(self, p.memory_query_service, p.memory_timeout_s),
                                           p.observations_topic, p.episode_maps_topic, p.map_frame)
        self._ask = self.create_client(Ask, p.ask_service, callback_group=group) if p.ask_service else None
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
        self._map_pub = self.create_publisher(GridMsg, p.map_topic, latched)
        self._frontier_pub = self.create_publisher(MarkerArray, p.frontiers_topic, latched)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="explorer")
        self._busy = threading.Lock()
        from ..perception.image_embedding import MobileNetV2Embedder
        self.embedder = MobileNetV2Embedder()
        self.text_embedder = None
        if p.explore_policy != "nearest" or p.answerer == "vlm":
            from ..text_embedding import MiniLMTextEmbedder
            self.text_embedder = MiniLMTextEmbedder()
        self._decomposer = LlmDecomposer(self._client).decompose if p.decomposition == "llm" else None
        from ..perception.regions import make_region_proposer
        self.regions = make_region_proposer(p.region_proposer, p.sam_weights, p.sam_model_type, p.device)
        self.env, self.detector, self.describer = self._worker.submit(self._make_environment).result()
        self._server = ActionServer(self, Explore, p.action_name, execute_callback=self._execute,
                                    goal_callback=self._on_goal, cancel_callback=lambda _g: CancelResponse.ACCEPT,
                                    callback_group=group)
        self.get_logger().info(f"exploring on {p.action_name} ({p.environment}, policy {p.explore_policy}, "
                               f"pruning {p.pruning}, verifier {p.verifier})")

    def _make_environment(self):
        p = self.params
        if p.environment == "sim":
            from dataclasses import replace

            from ..sim.exploration import (GroundTruthTargetDetector, SimExplorationEnv, ground_truth_description,
                                           make_task, start_pose)
            task = make_task(p.sim_seed, p.sim_layout)
            if p.sim_target_room:
                task = replace(task, target_room=p.sim_target_room)
            env = SimExplorationEnv(task, start_pose(p.sim_start, p.sim_layout))
            self._place_of = task.plan.place_at     # the floor plan's room names, as an operator labels a map
            self.get_logger().warning(
                f"simulated office ({p.sim_layout}, seed {p.sim_seed}, {task.target} in the {task.target_room}): "
                "target detection and "
                "descriptions are simulator oracles (a labelled stand-in for a VLM)")
            return env, GroundTruthTargetDetector(env), (lambda frame: ground_truth_description(env, frame))
        from ..perception.describer import VLMDescriber
        from .navigation_client import NavigateClient
        from .robot_exploration_env import RosExplorationEnv
        env = RosExplorationEnv(self, p, NavigateClient(self, p.navigation_action))
        if p.waypoints_file:                        # the robot's named places tag the views (as the frame selector's)
            from ..nav.waypoints import WaypointTable
            table = WaypointTable.from_yaml(p.waypoints_file)
            self._place_of = lambda x, y: table.label_for(x, y, p.waypoint_radius_m)
        vlm = VLMDescriber(p.llm_base_url, p.llm_model)
        detector = _LazyCameraDetector(self._client, env)
        return env, detector, (lambda frame: vlm.describe([frame.image], {})[0])

    def _explorer(self, use_recall: bool, deadline: RobotDeadline, goal_handle) -> Explorer:
        p = self.params
        grid = GridParams(resolution=p.grid_resolution_m, size_m=p.grid_size_m, origin_x=p.grid_origin_x,
                          origin_y=p.grid_origin_y, max_range=p.max_range_m)
        params = ExplorerParams(max_steps=p.max_steps, look_around_views=p.look_around_views,
                                robot_radius_m=p.robot_radius_m, approach_radius_m=p.approach_radius_m,
                                use_episodic_memory=use_recall, recall_top_k=p.recall_top_k,
                                target_threshold=p.target_threshold, d_min_m=p.d_min_m, grid=grid)
        stop = lambda: goal_handle.is_cancel_requested or deadline.expired()  # noqa: E731
        if hasattr(self.env, "cancelled"):   # the robot's drives stop on cancel too, not only between steps
            self.env.cancelled = stop
        verifier = MllmPlaceVerifier(self._client) if p.verifier == "mllm" else FeatureMatchVerifier()
        pruner = MllmPruner(self._client, p.d_min_m) if p.pruning == "mllm" else GeometricPruner(p.d_min_m)
        policy = make_policy(PolicyConfig(p.explore_policy, max_range=p.max_range_m, send_images=p.planner_images),
                             self.text_embedder, self._client)
        return Explorer(self.env, self.detector, params, store=self.memory, embedder=self.embedder,
                        describer=self.describer,
                        recall=EpisodicRecall(self.memory, verifier, p.recall_top_k, p.target_threshold),
                        pruner=pruner, image_dir=Path(p.image_dir).expanduser(),
                        feedback=lambda ex, pose: self._on_step(goal_handle, ex, pose),
                        should_stop=stop, policy=policy, decomposer=self._decomposer, place_of=self._place_of,
                        regions=self.regions,
                        ready_to_answer=self._memory_answers if self._ask is not None and p.answerer == "memory"
                        else None)

    # -- action ---------------------------------------------------------------------------------
    def _on_goal(self, goal) -> GoalResponse:
        self.health.count("goals_received")
        problem = ("neither a question nor a target" if not (goal.question.strip() or goal.target_description.strip())
                   else "another one is running" if self._busy.locked() else "")
        if problem:
            self.health.count("goals_rejected")
            self.get_logger().warning(f"rejected an Explore goal: {problem}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _execute(self, goal_handle):
        with self._busy:
            self._running += 1
            try:
                return self._run_goal(goal_handle)
            finally:
                self._running -= 1
                status = goal_handle.status     # still executing if the goal raised: rclpy aborts it
                self.health.count("goals_cancelled" if status == GoalStatus.STATUS_CANCELED else
                                  "goals_succeeded" if status == GoalStatus.STATUS_SUCCEEDED else "goals_failed")

    def _run_goal(self, goal_handle):
        g = goal_handle.request
        target = g.target_description.strip()
        try:                                      # before anything moves or is stored
            picture = self._target_image(g.target_image, g.use_episodic_memory)
        except ValueError as exc:                 # a malformed goal: an error answer, the node goes on
            self.get_logger().warning(f"Explore goal aborted: {exc}")
            goal_handle.abort()
            return Explore.Result(success=False, message=str(exc))
        self._ready_answer = None
        episode_id = episode_id_at(self.params.episode_prefix, now_s(self))
        if episode_id == self._last_episode:    # a clock that stands still (a replay that ended)
            self._repeats += 1
            episode_id = f"{episode_id}-{self._repeats}"
        else:
            self._last_episode, self._repeats = episode_id, 0
        deadline = RobotDeadline(self, g.max_duration_s or self.params.max_duration_s)
        explorer = self._explorer(g.use_episodic_memory, deadline, goal_handle)
        if self.params.environment == "sim" and self.params.sim_restart_each_goal:
            from ..sim.exploration import start_pose
            self._worker.submit(self.env.teleport, *start_pose(self.params.sim_start, self.params.sim_layout)).result()
        try:
            result = self._worker.submit(explorer.run, target, episode_id, g.question.strip(),
                                         target_image=picture).result()
        except Exception as exc:  # noqa: BLE001 - the robot keeps serving goals; the error goes back
            self.get_logger().error(f"exploration failed: {exc}")
            goal_handle.abort()
            return Explore.Result(success=False, message=f"exploration failed: {exc}")
        self._publish_map(explorer, now_s(self))
        out = Explore.Result(success=result.success, message=result.message, path_length_m=result.path_length_m,
                             steps=result.steps)
        answer = self._answer(g.question.strip(), explorer.instruction.target, result)
        if answer is not None:
            out.answer = answer
        recall = result.recall
        self.get_logger().info(
            f"episode {episode_id}: {'success' if result.success else 'failed'} ({result.message}), "
            f"{result.path_length_m:.1f} m, {result.steps} steps"
            + (f", recall: {recall.reason}" if recall else ""))
        if goal_handle.is_cancel_requested:
            out.message = "canceled"
            goal_handle.canceled()
        elif result.success:
            goal_handle.succeed()
        else:
            goal_handle.abort()
        return out

    def _target_image(self, msg, use_recall: bool) -> Optional[np.ndarray]:
        """The goal's picture of the target (a recall hint, as GOAT-Bench's image goals), decoded
        and at most ``TARGET_IMAGE_SIDE`` pixels a side; None without one."""
        if not msg.data:
            return None
        if len(msg.data) > TARGET_IMAGE_MAX_BYTES:
            raise ValueError(f"target_image: {len(msg.data)} bytes, more than {TARGET_IMAGE_MAX_BYTES}")
        image = cv2.imdecode(np.frombuffer(bytes(msg.data), np.uint8), cv2.IMREAD_COLOR)
        if image is None:
            raise ValueError(f"target_image: {len(msg.data)} bytes that are not an image (format {msg.format!r})")
        scale = TARGET_IMAGE_SIDE / max(image.shape[:2])
        if scale < 1:
            image = cv2.resize(image, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
        if not use_recall:
            self.get_logger().warning("target_image unused: it is matched against earlier episodes, and this goal "
                                      "has use_episodic_memory false")
        elif self.regions is None:
            self.get_logger().warning("target_image with region_proposer 'none': earlier episodes are recalled by "
                                      "their descriptions of target_description; set region_proposer (segments | "
                                      "sam) to store regions the picture can match")
        return image

    def _ask_agent(self, question: str):
        """The query agent's answer message (from the explorer's worker thread or the goal's)."""
        if not self._ask.wait_for_service(timeout_sec=5.0):
            return answer_to_msg(Answer(status="error", error=f"query agent {self.params.ask_service} not running"))
        done = threading.Event()
        # asked now in robot time (0 before the first /clock: the agent then uses its own clock)
        future = self._ask.call_async(Ask.Request(question=question, as_of=now_msg(self)))
        future.add_done_callback(lambda _f: done.set())
        if done.wait(60.0):                 # a wait on a peer: wall time
            return future.result().answer
        return answer_to_msg(Answer(status="error", error="the query agent did not answer in 60 s"))

    def _memory_answers(self, question: str) -> bool:
        """The explorer's ready-to-answer check (near the target): the memory, with what this
        episode stored, answers the question; the answer is kept as the goal's answer."""
        answer = self._ask_agent(question)
        if answer.status == "ok":
            self._ready_answer = answer
            return True
        return False

    def _answer(self, question: str, target: str, result):
        if question and self.params.answerer == "vlm":     # the episode's views, to the model
            try:                                             # endpoint errors are answers; anything else too
                answer = VlmAnswerer(self._client, self.text_embedder).answer(question, result.views)
            except Exception as exc:  # noqa: BLE001 - the goal still returns its exploration result
                answer = Answer(status="error", error=f"answering from the views failed: {exc}", planner="vlm")
            return answer_to_msg(answer)
        if question and self._ask is not None:
            return self._ready_answer if self._ready_answer is not None else self._ask_agent(question)
        if result.success and result.target_xy is not None:
            x, y = result.target_xy
            return answer_to_msg(Answer(type="position", text=f"The {target} is at ({x:.1f}, {y:.1f}) in the map.",
                                        position=[x, y, 0.0], confidence=0.9, planner="explore"))
        return None

    # -- per-step output ------------------------------------------------------------------------------
    def _on_step(self, goal_handle, explorer: Explorer, pose) -> None:
        fb = Explore.Feedback(cognitive_state=explorer.meta.state.value, step=explorer.step,
                              frontiers_remaining=len(explorer.frontiers), path_length_m=explorer.path_length)
        stamp = now_s(self)
        fb.current_pose = pose_to_msg(pose, stamp)
        fb.current_pose.header.frame_id = self.params.map_frame
        goal_handle.publish_feedback(fb)
        self._publish_map(explorer, stamp)

    def _publish_map(self, explorer: Explorer, stamp: float) -> None:
        grid = explorer.grid
        self._map_pub.publish(grid_to_msg(grid.values(), grid.resolution, grid.origin, stamp, self.params.map_frame))
        markers = MarkerArray(markers=[Marker(action=Marker.DELETEALL)])
        for f in explorer.frontiers:
            m = Marker(ns="frontiers", id=f.frontier_id, type=Marker.SPHERE, action=Marker.ADD)
            m.header.frame_id = self.params.map_frame
            m.pose.position = Point(x=f.x, y=f.y, z=0.1)
            m.scale.x = m.scale.y = m.scale.z = 0.3
            m.color = ColorRGBA(r=0.9, g=0.1, b=0.1, a=1.0)
            m.text = json.dumps({"id": f.frontier_id, "size": f.size})
            markers.markers.append(m)
        self._frontier_pub.publish(markers)

    def close(self) -> None:
        self._worker.submit(getattr(self.env, "close", lambda: None)).result()
        self._worker.shutdown()


class _LazyCameraDetector:
    """The VLM detector once the camera info has arrived."""

    def __init__(self, client, env):
        self.client, self.env, self._detector = client, env, None

    def detect(self, frame, target):
        if self._detector is None:
            from ..perception.target_detector import VlmTargetDetector
            self._detector = VlmTargetDetector(self.client, self.env.camera)
        return self._detector.detect(frame, target)


def main() -> None:
    run_node(ExploreNode, threads=4)


if __name__ == "__main__":
    main()
