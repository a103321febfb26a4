"""The explorer: HIMM's exploration loop over an environment, ROS-free.

Each step the explorer is in one cognitive state (``cognitive_state``):
exploration (go to the best frontier of the occupancy grid, pruned with a recalled episode),
target verification (turn to the detection and look again), target approaching (drive to within
``approach_radius_m``), check ready to answer (close enough and the target in view, or the
question answered). Every view is fused into the grid and stored in the memory as an
observation of the episode (pose, global embedding, description, image), so later episodes can
recall it; the grid is saved with the episode.

The environment (``ExplorationEnv``) is a simulator or a robot (the planner node adapts the
navigation bridge and the depth topics to it).
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Protocol, Sequence

import cv2
import numpy as np

from ..perception.regions import Box3D, box_of_points
from ..types import Episode, Observation, Pose
from .cognitive_state import CognitiveState as S
from .cognitive_state import MetaMemory
from .episodic_recall import EpisodicRecall, RecallResult
from .frontier_pruning import GeometricPruner, PruneResult
from .frontiers import detect_frontiers
from .instruction import Instruction, decompose
from .occupancy import CameraModel, GridParams, OccupancyGrid
from .planning import GridPaths, nearest_cell_within, simplify, traversable
from .policies import ExplorationPolicy, NearestPolicy, PolicyContext, View
from .rule_extraction import ExecutionStep

log = logging.getLogger(__name__)


@dataclass
class Frame:
    image: np.ndarray                 # BGR
    depth: np.ndarray                 # metres, REP 118
    pose: Pose                        # camera: x, y, z = height above the floor, yaw
    stamp: float


class ExplorationEnv(Protocol):
    camera: CameraModel

    def observe(self) -> Frame: ...

    def current_pose(self) -> Pose:
        """The camera pose now (without waiting for a new image)."""

    def turn_to(self, yaw: float) -> None: ...

    def move_along(self, points: Sequence[tuple[float, float]]) -> float:
        """Drive through the points (map frame); returns the metres driven."""


class TargetDetector(Protocol):
    def detect(self, frame: Frame, target: str) -> Optional[tuple[float, float]]:
        """The target's position in the map frame when it is in view, else None."""


@dataclass(frozen=True)
class ExplorerParams:
    max_steps: int = 60
    max_path_m: float = 250.0
    look_around_views: int = 6
    observe_every_m: float = 1.0
    segment_m: float = 5.0                 # re-plan after this many metres
    robot_radius_m: float = 0.3
    frontier_min_size: int = 5
    approach_radius_m: float = 1.0
    use_episodic_memory: bool = True
    recall_top_k: int = 10
    target_threshold: float = 0.45
    d_min_m: float = 3.0
    landmark_weight: float = 1.0           # frontier cost = path + weight * distance to the landmarks
    rules_top_k: int = 3                   # semantic memory rules given to the planner
    grid: GridParams = GridParams()

    @property
    def reached_within_m(self) -> float:
        """An episode that ends this close to the target has reached it."""
        return self.approach_radius_m + 0.5


@dataclass
class ExplorationResult:
    success: bool
    message: str
    episode_id: str
    path_length_m: float
    steps: int
    target_xy: Optional[tuple[float, float]]
    final_pose: Pose
    log: list[ExecutionStep] = field(default_factory=list)
    meta: MetaMemory = field(default_factory=MetaMemory)
    recall: Optional[RecallResult] = None
    prunes: list[PruneResult] = field(default_factory=list)
    grid: Optional[OccupancyGrid] = None
    views: list["EpisodeView"] = field(default_factory=list)


@dataclass(frozen=True)
class EpisodeView:
    """One view of the episode as stored (what an answerer reads when the explorer is ready to answer)."""
    observation_id: str
    pose: Pose
    place: str                        # the named place the robot was at ("" without a place table)
    description: str
    image_path: str                   # "" without an image directory
    step: int


Feedback = Callable[["Explorer", Pose], None]     # called once per step (state, frontiers, map)


class Explorer:
    def __init__(self, env: ExplorationEnv, detector: TargetDetector, params: ExplorerParams = ExplorerParams(),
                 store=None, embedder=None, describer: Optional[Callable[[Frame], str]] = None,
                 recall: Optional[EpisodicRecall] = None, pruner=None, image_dir: Optional[Path] = None,
                 ready_to_answer: Optional[Callable[[str], bool]] = None, feedback: Optional[Feedback] = None,
                 should_stop: Optional[Callable[[], bool]] = None, policy: Optional[ExplorationPolicy] = None,
                 decomposer: Optional[Callable[[str, str], Instruction]] = None,
                 place_of: Optional[Callable[[float, float], str]] = None, regions=None):
        self.env, self.detector, self.params = env, detector, params
        self.policy = policy or NearestPolicy(params.landmark_weight)
        self.decompose = decomposer or decompose
        self.store, self.embedder, self.describer = store, embedder, describer
        self.recall_engine, self.pruner = recall, pruner or GeometricPruner(d_min=params.d_min_m)
        self.image_dir = Path(image_dir) if image_dir else None
        self.ready_to_answer, self.feedback, self.should_stop = ready_to_answer, feedback, should_stop
        self.place_of = place_of         # (x, y) -> the named place there (the robot's waypoint table)
        self.regions = regions           # a region proposer (perception.regions): each view's regions are stored
        self.grid = OccupancyGrid(params.grid)
        self._radius_cells = int(math.ceil(params.robot_radius_m / params.grid.resolution))

    # -- perception of one view -------------------------------------------------------------
    def _view(self, target: str, action: str) -> tuple[Frame, Optional[tuple[float, float]], Optional[np.ndarray]]:
        frame = self.env.observe()
        p = frame.pose
        if not p.is_finite():
            raise ValueError("the environment returned a non-finite pose")
        self.grid.integrate_depth(frame.depth, p.x, p.y, p.z, p.yaw, self.env.camera)
        self.grid.mark_free_disc(p.x, p.y, self.params.robot_radius_m)
        seen = self.detector.detect(frame, target)
        embedding = self.embedder.embed([frame.image])[0] if self.embedder is not None else None
        description = self.describer(frame) if self.describer else ""
        self.policy.observe(View(p, description, frame.image, self.step))
        image_path = ""
        if self.image_dir is not None:
            path = self.image_dir / self.episode_id / f"{len(self.log):05d}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(path), frame.image, [cv2.IMWRITE_JPEG_QUALITY, 85])
            image_path = str(path)
        observation_id = f"{self.episode_id}/{len(self.log):05d}"
        place = self.place_of(p.x, p.y) if self.place_of is not None else ""
        if self.store is not None:
            regions = (self.regions.propose(frame.image, self.embedder, box_of=self._region_box(frame))
                       if self.regions is not None else [])
            self.store.insert([Observation(observation_id, frame.stamp, self.episode_id, Pose(p.x, p.y, p.z, p.yaw),
                                           description=description, image_path=image_path, waypoint_id=place,
                                           global_embedding=embedding, regions=regions)])
        self.views.append(EpisodeView(observation_id, Pose(p.x, p.y, p.z, p.yaw), place, description, image_path,
                                      self.step))
        self.log.append(ExecutionStep(self.step, self.meta.state.value, p.x, p.y, p.yaw, action,
                                      f"target in view at ({seen[0]:.1f}, {seen[1]:.1f})" if seen else "",
                                      image_path))
        if seen is not None:
            self.target_xy = seen
        return frame, seen, embedding

    def _region_box(self, frame: Frame) -> Callable[[np.ndarray], Optional[Box3D]]:
        """A region mask's 3D box in the map frame, through this camera's model (pitch included)."""
        depth, cam = frame.depth, self.env.camera        # intrinsics of the depth image

        def box(mask: np.ndarray) -> Optional[Box3D]:
            if mask.shape != depth.shape[:2]:             # a colour mask on a depth image of another size
                mask = cv2.resize(mask.astype(np.uint8), depth.shape[1::-1], interpolation=cv2.INTER_NEAREST) > 0
            v, u = np.nonzero(mask & (depth > 0.05) & (depth < self.params.grid.max_range))
            if len(u) < 20:
                return None
            fwd, left, up = cam.to_body(u, v, depth[v, u])
            p = frame.pose
            c, s = math.cos(p.yaw), math.sin(p.yaw)
            return box_of_points(np.stack([p.x + c * fwd - s * left, p.y + s * fwd + c * left, p.z + up], axis=-1))
        return box

    def _look_around(self, target: str, views: int) -> list[tuple[np.ndarray, np.ndarray]]:
        here = self.env.current_pose()
        yaw0 = here.yaw
        self._looked_from.append((here.x, here.y))
        out = []
        for k in range(views):
            self.env.turn_to(yaw0 + 2 * math.pi * k / views)
            frame, _, emb = self._view(target, f"look around ({k + 1}/{views})")
            if emb is not None:
                out.append((frame.image, emb))
        return out

    # -- motion -----------------------------------------------------------------------------
    def _drive(self, cells: list[tuple[int, int]], target: str, budget_m: float) -> None:
        """Drive along a grid path for at most ``budget_m``, looking ahead every ``observe_every_m``."""
        pts = [tuple(float(v) for v in self.grid.to_world(r, c)) for r, c in simplify(cells, 3)]
        here = self.env.current_pose()
        driven, since_view, prev = 0.0, 0.0, (here.x, here.y)
        for pt in pts:
            seg = math.hypot(pt[0] - prev[0], pt[1] - prev[1])
            if seg < 1e-6:
                continue
            self.path_length += self.env.move_along([pt])
            driven += seg
            since_view += seg
            prev = pt
            if since_view >= self.params.observe_every_m:
                since_view = 0.0
                self._view(target, f"drive towards ({pts[-1][0]:.1f}, {pts[-1][1]:.1f})")
                if self.target_xy is not None and self.meta.state == S.EXPLORATION:
                    return
            if driven >= budget_m:
                return

    def _paths(self) -> tuple[GridPaths, np.ndarray]:
        values = self.grid.values()
        pose = self.env.current_pose()
        r, c = self.grid.to_cell(pose.x, pose.y)
        return GridPaths(traversable(values, self._radius_cells), (int(r), int(c)), self.grid.resolution), values

    def _goal_near(self, paths: GridPaths, x: float, y: float, radius: float) -> Optional[tuple[int, int]]:
        return nearest_cell_within(paths, self.grid, x, y, radius)

    # -- the loop -----------------------------------------------------------------------------
    def run(self, target: str, episode_id: str, question: str = "", world: str = "",
            target_image: Optional[np.ndarray] = None) -> ExplorationResult:
        """``target_image``: a picture of the target (a goal given as an image): recall matches
        it against the stored regions of the recalled episodes (image to region)."""
        p = self.params
        self.episode_id, self.step, self.path_length = episode_id, 0, 0.0
        self.grid = OccupancyGrid(p.grid)          # each episode has its own map
        self.log: list[ExecutionStep] = []
        self.views: list[EpisodeView] = []
        self.meta = MetaMemory()
        self.target_xy: Optional[tuple[float, float]] = None
        self._looked_from: list[tuple[float, float]] = []
        self.frontiers = []
        prunes: list[PruneResult] = []
        self.instruction = self.decompose(question or target, target)
        target = self.instruction.target
        self.rules = rules = self._rules()
        if getattr(self.env, "camera", None) is None:     # a robot knows its camera from the first frame
            self.env.observe()
        cam = self.env.camera
        self.policy.start(self.instruction, self.grid, 2 * math.atan2(cam.width / 2, cam.fx), rules)
        if self.store is not None:
            self.store.add_episode(Episode(episode_id, self.env.observe().stamp, name=target or question, world=world))
        views = self._look_around(target, p.look_around_views)
        recall, previous = None, None
        if p.use_episodic_memory and self.recall_engine is not None and views:
            try:
                target_vector = (self.embedder.embed([target_image])[0]
                                 if target_image is not None and self.embedder is not None else None)
                recall = self.recall_engine.recall(views, target, episode_id, target_vector)
                log.info("episodic recall: I_explore=%s (%s)", int(recall.i_explore), recall.reason)
                if recall.prior_episode and self.store is not None:
                    stored = self.store.load_occupancy_map(recall.prior_episode)
                    if stored is not None:
                        previous = OccupancyGrid.from_values(stored["grid"], stored["resolution"], stored["origin"])
            except Exception as exc:  # noqa: BLE001 - the memory is optional for exploring: go on without it
                log.warning("episodic recall failed (%s): exploring without memory", exc)
                recall, previous = None, None
        message = f"step limit ({p.max_steps}) reached"
        success = False
        while self.step < p.max_steps and self.path_length < p.max_path_m:
            if self.should_stop is not None and self.should_stop():
                message = "stopped"
                break
            self.step += 1
            state = self.meta.state
            pose = self.env.current_pose()
            if self.feedback is not None:
                self.feedback(self, pose)
            if state == S.EXPLORATION and self.target_xy is not None:
                self.meta.switch(S.TARGET_VERIFICATION, self.step, f"target seen at {self._fmt(self.target_xy)}")
                continue
            if state == S.TARGET_VERIFICATION:
                tx, ty = self.target_xy
                self.env.turn_to(math.atan2(ty - pose.y, tx - pose.x))
                _, seen, _ = self._view(target, "verify the target")
                if seen is not None:
                    self.meta.switch(S.TARGET_APPROACHING, self.step, "target confirmed by a second view")
                else:
                    self.target_xy = None
                    self.meta.switch(S.EXPLORATION, self.step, "target not confirmed")
                continue
            if state == S.TARGET_APPROACHING:
                paths, _ = self._paths()
                goal = self._goal_near(paths, *self.target_xy, p.approach_radius_m)
                if goal is not None:
                    self._drive(paths.path_to(goal), target, budget_m=float("inf"))
                pose = self.env.current_pose()
                tx, ty = self.target_xy
                self.env.turn_to(math.atan2(ty - pose.y, tx - pose.x))
                self.meta.switch(S.CHECK_READY_TO_ANSWER, self.step,
                                 "arrived near the target" if goal is not None else "no reachable cell near the target")
                continue
            if state == S.CHECK_READY_TO_ANSWER:
                _, seen, _ = self._view(target, "check ready to answer")
                near = seen is not None and math.hypot(seen[0] - pose.x, seen[1] - pose.y) <= p.reached_within_m
                answered = bool(question) and self.ready_to_answer is not None and self.ready_to_answer(question)
                if near or answered:
                    success, message = True, ("target reached" if near else "the memory answers the question")
                    break
                self.meta.switch(S.EXPLORATION, self.step, "target not in reach; exploring again")
                continue
            # exploration
            paths, _ = self._paths()
            frontiers = detect_frontiers(self.grid, paths.reachable, p.frontier_min_size)
            if recall is not None and (previous is not None or not recall.i_explore) and frontiers:
                decision = self.pruner.prune(self.grid, previous, frontiers, paths.reachable, recall.i_explore,
                                             recall.landmarks, question or target)
                prunes.append(decision)
                candidates = decision.kept or frontiers
            else:
                candidates = frontiers
            self.frontiers = candidates
            goal = self._memory_goal(paths, recall)
            if goal is None:
                landmarks = recall.landmarks if recall is not None and not recall.i_explore else ()
                decision = self.policy.choose(PolicyContext(self.grid, paths, candidates, pose, self.instruction,
                                                            landmarks, rules, self.step, bool(question)))
                if decision.ready:
                    self.log.append(ExecutionStep(self.step, self.meta.state.value, pose.x, pose.y, pose.yaw,
                                                  "ready to answer", decision.reason))
                    success, message = True, f"ready to answer: {decision.reason}"
                    break
                chosen, goal = decision.frontier, decision.goal
                if goal is not None:
                    where = (f"frontier {chosen.frontier_id} {self._fmt((chosen.x, chosen.y))}" if chosen is not None
                             else f"the place at {self._fmt(self.grid.to_world(*goal))}")
                    action = f"go to {where} ({paths.dist[goal]:.1f} m): {decision.reason}"
                else:
                    goal = self._unsearched_goal(paths)
                    if goal is None:
                        message = "explored and searched everything reachable: the target was not found"
                        break
                    action = f"search the unsearched space at {self._fmt(self.grid.to_world(*goal))}"
            else:
                action = f"go to the remembered view at {self._fmt(self.grid.to_world(*goal))} (episodic memory)"
            self.log.append(ExecutionStep(self.step, self.meta.state.value, pose.x, pose.y, pose.yaw, action,
                                          f"{len(frontiers)} frontiers, {len(candidates)} after pruning"))
            path = paths.path_to(goal)
            self._drive(path, target, p.segment_m)
            end = self.env.current_pose()
            if self.target_xy is None and math.hypot(*(np.array(self.grid.to_world(*goal)) - (end.x, end.y))) < 0.6:
                self._look_around(target, max(4, p.look_around_views // 2 + 1))
        final = self.env.current_pose()
        if self.store is not None:
            self.store.save_occupancy_map(episode_id, self.grid.values(), self.grid.resolution, self.grid.origin)
        return ExplorationResult(success, message, episode_id, round(self.path_length, 3), self.step, self.target_xy,
                                 final, self.log, self.meta, recall, prunes, self.grid,
                                 self.views)

    def _rules(self) -> list[str]:
        """The semantic memory's rules for this instruction, as lines for the planner."""
        if self.store is None or self.params.rules_top_k <= 0 or not hasattr(self.store, "rules_for"):
            return []
        try:
            found = self.store.rules_for(self.instruction.text or self.instruction.target, self.params.rules_top_k)
        except Exception as exc:  # noqa: BLE001 - rules are an optional hint
            log.warning("no semantic rules for the planner (%s)", exc)
            return []
        return [f"{r['kind'].replace('_', '-')} ({r['key']}): if {r['condition']} then {r['action']}"
                for r in found or [] if isinstance(r, dict) and {"kind", "key", "condition", "action"} <= r.keys()]

    def _memory_goal(self, paths: GridPaths, recall: Optional[RecallResult]) -> Optional[tuple[int, int]]:
        """With the target in a recalled episode (I_explore = 0): the remembered camera pose
        itself, once the current map connects to it."""
        if recall is None or recall.i_explore or not recall.landmarks:
            return None
        unchecked = [(x, y, yaw) for x, y, yaw in recall.landmarks
                     if not any(math.hypot(x - a, y - b) < 0.75 for a, b in self._looked_from)]
        if not unchecked:
            # HIMM does not trust the past blindly: the target is not where it was seen
            recall.i_explore = True
            recall.reason += "; not found at the remembered places (it moved): exploring"
            log.info("episodic memory outdated: the target is not at the remembered places")
            self.log.append(ExecutionStep(self.step, self.meta.state.value, *self._xyyaw(), "memory outdated",
                                          "the target was not at any remembered place; exploring"))
            return None
        best = None
        for x, y, _ in unchecked:
            cell = self._goal_near(paths, x, y, 0.5)
            if cell is not None and (best is None or paths.dist[cell] < paths.dist[best]):
                best = cell
        return best

    def _unsearched_goal(self, paths: GridPaths) -> Optional[tuple[int, int]]:
        """No frontier left: the nearest reachable free space not yet seen from close enough
        to recognise an object there (cluster centre of at least 4 frontier sizes)."""
        from scipy import ndimage
        mask = paths.reachable & ~self.grid.searched
        labels, n = ndimage.label(mask, structure=np.ones((3, 3), bool))
        best = None
        for lab in range(1, n + 1):
            rr, cc = np.nonzero(labels == lab)
            if rr.size < 4 * self.params.frontier_min_size:
                continue
            k = int(np.argmin((rr - rr.mean()) ** 2 + (cc - cc.mean()) ** 2))
            cell = (int(rr[k]), int(cc[k]))
            if best is None or paths.dist[cell] < paths.dist[best]:
                best = cell
        return best

    def _xyyaw(self) -> tuple[float, float, float]:
        p = self.env.current_pose()
        return p.x, p.y, p.yaw

    @staticmethod
    def _fmt(xy) -> str:
        return f"({float(xy[0]):.1f}, {float(xy[1]):.1f})"
