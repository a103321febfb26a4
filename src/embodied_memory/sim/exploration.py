"""Exploration episodes in the simulated office (HIMM's setting): the robot starts somewhere,
must find a target object, and may recall earlier episodes in the same building.

``SimExplorationEnv`` implements the explorer's environment on MiniWorld: RGB + depth from a
camera 1.5 m up tilted 25 degrees down, a base that drives exactly where it is sent (paths
come from the explorer's planner). Two labelled simulator oracles stand in for perception that
cannot run offline (no open-vocabulary detector or VLM weights here):
``GroundTruthTargetDetector`` (the target object is in view, not occluded per the depth image,
within ``max_range``) and ``ground_truth_description`` (the visible objects, written the way an
object-centric VLM describer would). Recall itself uses the real MobileNetV2 embeddings, ORB
verification and MiniLM text embeddings.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from .world import OfficeWorld, object_name  # noqa: I100  (world first: headless GL)
from .floor_plans import FloorPlan, floor_plan
from ..explore.explorer import Frame
from ..explore.occupancy import FREE, OCCUPIED, CameraModel, GridParams, OccupancyGrid
from ..types import Pose

KINDS = [("box", "red"), ("barrel", ""), ("cone", ""), ("medkit", ""), ("box", "blue"), ("duckie", "")]
CAMERA_PITCH_DEG = -25.0


@dataclass(frozen=True)
class SimTask:
    seed: int
    target_kind: str
    target_colour: str
    target_room: str
    layout: str = "office"                  # a floor plan of sim.floor_plans

    @property
    def target(self) -> str:
        return object_name(self.target_kind, self.target_colour)

    @property
    def plan(self) -> FloorPlan:
        return floor_plan(self.layout)


def make_task(seed: int, layout: str = "office") -> SimTask:
    """The seed's target (kind, colour) and the room it is hidden in, on the floor plan ``layout``."""
    rooms = floor_plan(layout).target_rooms
    rng = np.random.default_rng(seed)
    kind, colour = KINDS[int(rng.integers(len(KINDS)))]
    return SimTask(seed, kind, colour, rooms[int(rng.integers(len(rooms)))], layout)


class SimExplorationEnv:
    def __init__(self, task: SimTask, start: tuple[float, float, float], width: int = 320, height: int = 240):
        plan = task.plan
        others = [k for k in KINDS if k != (task.target_kind, task.target_colour)]
        distractor_rooms = [r for r in plan.target_rooms if r != task.target_room] + [plan.entrance]
        objects = [(task.target_kind, task.target_colour, task.target_room)] + [
            (kind, colour, room) for (kind, colour), room in zip(others, distractor_rooms)]
        self.world = OfficeWorld([], seed=task.seed, width=width, height=height, objects=objects, object_size=0.7,
                                 plan=plan)
        self.world.reset(seed=task.seed)
        self.world.agent.cam_pitch = CAMERA_PITCH_DEG
        self.task = task
        self.camera = CameraModel.from_fov(width, height, self.world.agent.cam_fov_y, math.radians(CAMERA_PITCH_DEG))
        self.clock = time.time()
        self.teleport(*start)

    # -- pose: MiniWorld (x, z, dir) <-> map (x, -z, yaw = dir) ------------------------------------
    def teleport(self, x: float, y: float, yaw: float) -> None:
        self.world.agent.pos = np.array([x, 0.0, -y])
        self.world.agent.dir = yaw

    @property
    def pose(self) -> Pose:
        a = self.world.agent
        return Pose(float(a.pos[0]), float(-a.pos[2]), a.cam_height, float(a.dir))

    def current_pose(self) -> Pose:
        return self.pose

    def observe(self) -> Frame:
        rgb = self.world.render_obs()
        depth = self.world.obs_fb.get_depth_map(0.04, 100.0)[..., 0].copy()
        self.clock = max(time.time(), self.clock + 1e-3)   # real time: the memory takes no future stamps
        return Frame(np.ascontiguousarray(rgb[:, :, ::-1]), depth, self.pose, self.clock)

    def turn_to(self, yaw: float) -> None:
        self.world.agent.dir = yaw

    def move_along(self, points: Sequence[tuple[float, float]]) -> float:
        driven = 0.0
        for x, y in points:
            p = self.pose
            d = math.hypot(x - p.x, y - p.y)
            if d > 1e-6:
                self.teleport(x, y, math.atan2(y - p.y, x - p.x))
                driven += d
        return driven

    def close(self) -> None:
        self.world.close()

    # -- ground truth ---------------------------------------------------------------------------------
    def target_position(self) -> tuple[float, float]:
        ent = self.world.objects[0][2]
        return float(ent.pos[0]), float(-ent.pos[2])

    def entities(self) -> list[tuple[str, object]]:
        out = [(object_name(kind, colour), ent) for kind, colour, ent in self.world.objects]
        for ent in self.world.entities:
            mesh = getattr(ent, "mesh_name", "")
            if mesh in ("office_desk", "office_chair"):
                out.append((object_name(mesh), ent))
        return out

    def visible(self, frame: Frame, x: float, y: float, top: float, max_range: float) -> bool:
        """A point column (x, y) up to height ``top`` is in view and not occluded (depth test)."""
        p = frame.pose
        dx, dy = x - p.x, y - p.y
        if math.hypot(dx, dy) > max_range:
            return False
        c, s = math.cos(p.yaw), math.sin(p.yaw)
        fwd, left = c * dx + s * dy, -s * dx + c * dy
        for h in np.linspace(0.1, top, 4):
            u, v, depth = self.camera.to_pixel(fwd, left, h - p.z)
            if depth <= 0.1 or not (0 <= u < self.camera.width and 0 <= v < self.camera.height):
                continue
            seen = frame.depth[int(v), int(u)]
            if abs(seen - depth) < 0.5:
                return True
        return False

    def ground_truth_grid(self, params: GridParams = GridParams()) -> OccupancyGrid:
        """The true map (rooms, door openings, furniture and objects) on the explorer's grid."""
        grid = OccupancyGrid(params)
        rows, cols = np.indices(grid.shape)
        x, y = grid.to_world(rows, cols)
        z = -y
        free = np.zeros(grid.shape, bool)
        for x0, x1, z0, z1 in self.task.plan.free_rects():
            free |= (x >= x0) & (x <= x1) & (z >= z0) & (z <= z1)
        for _, ent in self.entities():
            free &= np.hypot(x - ent.pos[0], z - ent.pos[2]) > ent.radius
        values = np.where(free, FREE, OCCUPIED).astype(np.int8)
        return OccupancyGrid.from_values(values, params.resolution, (params.origin_x, params.origin_y))


class GroundTruthTargetDetector:
    """Simulator oracle (labelled): the target object is in view within ``max_range`` metres.
    The target text names the object ("rubber duck", or a question that mentions it)."""

    def __init__(self, env: SimExplorationEnv, max_range: float = 4.0):
        self.env, self.max_range = env, max_range

    def detect(self, frame: Frame, target: str) -> Optional[tuple[float, float]]:
        for name, ent in self.env.entities():
            if name in target.lower() and self.env.visible(frame, ent.pos[0], -ent.pos[2], ent.height, self.max_range):
                return float(ent.pos[0]), float(-ent.pos[2])
        return None


def ground_truth_description(env: SimExplorationEnv, frame: Frame, max_range: float = 6.0) -> str:
    """Simulator oracle describer (labelled ablation): the visible objects, object-centric prose."""
    p = frame.pose
    parts = []
    for name, ent in env.entities():
        x, y = float(ent.pos[0]), float(-ent.pos[2])
        if env.visible(frame, x, y, ent.height, max_range):
            d = math.hypot(x - p.x, y - p.y)
            bearing = math.atan2(y - p.y, x - p.x) - p.yaw
            side = math.atan2(math.sin(bearing), math.cos(bearing))
            where = "ahead" if abs(side) < 0.3 else ("on the left" if side > 0 else "on the right")
            parts.append(f"a {name} about {d:.1f} m {where}")
    return ("I see " + ", ".join(parts) + ".") if parts else "An empty stretch of wall and floor."


def start_pose(name: str, layout: str = "office") -> tuple[float, float, float]:
    """A floor plan's named start pose (map frame x, y, yaw) for exploration episodes."""
    plan = floor_plan(layout)
    if name not in plan.starts:
        raise ValueError(f"floor plan {layout}: unknown start {name!r} ({' | '.join(plan.starts)})")
    return plan.starts[name]
