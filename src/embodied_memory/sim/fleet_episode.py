"""The building patrolled by several robots at once (the fleet benchmark's world).

One building (``BuildingSim``: the same people, schedules, faces and objects as the
single-robot world of the same seed), sensed by each robot of ``FleetConfig.robots`` along its
own plan: by default ``spot1`` patrols the north wing and waits in the kitchen at lunch,
``spot2`` patrols the south wing at the same hours, ``spot3`` patrols the whole building in the
early afternoon and evening and waits in the conference room.  Written: one bag per robot
(``<robot>/bag``, replayed into that robot's stack), each robot's truth
(``<robot>/ground_truth.json``) and the fleet's (``ground_truth.json``: every robot's frames in
time order, each with its ``robot_id``) that the fleet's questions are generated from.

Robots' camera frames are placed on disjoint sub-frame grids (robot i at i/10 s past its
frame period), so a stamp read back from a memory names one robot's frame.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .building_episode import BuildingConfig, BuildingSim, _Activity, plan_robot
from .episode import GroundTruth

log = logging.getLogger(__name__)

GRID_STEP_S = 0.1     # robot i's frames are i * GRID_STEP_S past the frame grid (naming's tolerance is 0.01 s)


@dataclass(frozen=True)
class FleetRobot:
    robot_id: str
    patrol_wings: tuple[str, ...]
    patrol_hours: tuple[float, ...]
    waits: tuple[tuple[str, float, float], ...] = ()


DEFAULT_ROBOTS = (
    FleetRobot("spot1", ("north",), (10.0, 15.5), (("kitchen", 12.0, 35),)),
    FleetRobot("spot2", ("south",), (10.0, 15.5)),
    FleetRobot("spot3", ("all",), (13.0, 17.0), (("conference_room", 14.0, 25),)),
)


@dataclass(frozen=True)
class FleetConfig(BuildingConfig):
    """The building (``BuildingConfig``'s fields; its patrol and waits are the robots') and its robots."""
    robots: tuple[FleetRobot, ...] = field(default=DEFAULT_ROBOTS)

    def building(self) -> BuildingConfig:
        """The building every robot senses: the fields of ``BuildingConfig``, waits of every robot."""
        fields = {k: getattr(self, k) for k in BuildingConfig.__dataclass_fields__}
        return BuildingConfig(**{**fields, "waits": tuple(w for r in self.robots for w in r.waits)})

    def robot_config(self, robot: FleetRobot) -> BuildingConfig:
        return replace(self.building(), patrol_wings=robot.patrol_wings, patrol_hours=robot.patrol_hours,
                       waits=robot.waits)


def _on_grid(activities: list[_Activity], fps: float, offset_s: float) -> list[_Activity]:
    """Each activity moved so that its frames fall ``offset_s`` past the 1/fps grid."""
    out = []
    for a in activities:
        t0 = a.frames[0][0]
        shift = round(t0 * fps) / fps + offset_s - t0
        out.append(_Activity(a.kind, [(t + shift, pose) for t, pose in a.frames]))
    return out


def generate_fleet_episode(cfg: FleetConfig, out_dir: Path, progress: bool = True) -> GroundTruth:
    """Write ``out_dir/<robot>/bag``, ``out_dir/<robot>/ground_truth.json`` and the fleet's
    ``out_dir/ground_truth.json``; returns the fleet's truth."""
    if len({r.robot_id for r in cfg.robots}) != len(cfg.robots) or not cfg.robots:
        raise ValueError(f"robots: one or more, each robot_id once ({[r.robot_id for r in cfg.robots]})")
    if len(cfg.robots) * GRID_STEP_S >= 1.0 / cfg.fps:
        raise ValueError(f"{len(cfg.robots)} robots do not fit disjoint frame grids at {cfg.fps} fps")
    sim = BuildingSim.build(cfg.building())
    fleet = replace(sim.truth, frames=[], patrols=[],
                    config={**sim.truth.config, "robots": [r.robot_id for r in cfg.robots]})
    for i, robot in enumerate(cfg.robots):
        rng = np.random.default_rng([cfg.seed, i + 1])
        activities = _on_grid(plan_robot(cfg.robot_config(robot), rng), cfg.fps, i * GRID_STEP_S)
        frames = sim.render(activities, out_dir / robot.robot_id / "bag", progress, robot=robot.robot_id)
        own = replace(sim.truth, frames=frames, patrols=[a.span for a in activities])
        own.save(out_dir / robot.robot_id / "ground_truth.json")
        fleet.frames += frames
        fleet.patrols += own.patrols
    sim.env.close()
    fleet.frames.sort(key=lambda f: f["t"])
    fleet.patrols.sort()
    fleet.save(out_dir / "ground_truth.json")
    log.info("fleet episode: %d robots, %d frames -> %s", len(cfg.robots), len(fleet.frames), out_dir)
    return fleet
