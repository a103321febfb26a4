"""Simulated days in the office building (benchmark v2): people follow seeded schedules
(``sim.schedules``), the robot patrols every room a few times a day and waits, still, in a
room or two; a rosbag2 (MCAP) of what it sensed and the ground truth of who was where.

Same conventions, topics and ground-truth format as ``sim.episode`` (the small world):
MiniWorld (x, z) is the map frame's (x, -z), yaw = MiniWorld ``dir``, bag time = simulated
wall time.  Waypoint tags: the room id inside a room, the nearest corridor waypoint
(``north_corridor_3``, ...) in a corridor.
"""
from __future__ import annotations

import logging
import math
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from ..progress import progress_bar
from .building import (CORRIDOR_OF, CORRIDORS, DOOR_WAYPOINT, ENTRANCE, PARKED, RECEPTION_WAYPOINT, ROOMS,
                       SHARED_ROOMS, WAYPOINTS, BuildingWorld, all_person_spots, bearing, furniture, in_view,
                       inward_dir, line_of_sight, room_of)
from .episode import GroundTruth, SimRobot, day_start, render_view, rooms_truth
from .schedules import Schedule, make_schedule
from .world import PERSON_WIDTH, object_name, photo_faces, usable_portraits

log = logging.getLogger(__name__)

GENERATOR_VERSION = 3          # bump when the simulation changes for the same config (invalidates caches)
PATROL_JITTER_S = 300.0
MAX_RANGE, MIN_RANGE = 7.0, 0.5
FACE_HALF_WIDTH = 0.15         # the head crop on a billboard is 0.30 m wide
ROUTE = ["reception",
         "north_corridor_3", "north_corridor_2", "open_office", "north_corridor_2", "north_corridor_1", "kitchen",
         "north_corridor_1", "north_corridor_3", "conference_room", "north_corridor_3", "north_corridor_4", "lab",
         "north_corridor_4", "north_corridor_5", "library", "north_corridor_5", "north_corridor_3", "reception",
         "south_corridor_3", "south_corridor_2", "design_studio", "south_corridor_2", "south_corridor_1", "lounge",
         "south_corridor_1", "south_corridor_3", "huddle_room", "south_corridor_3", "south_corridor_4", "workshop",
         "south_corridor_4", "south_corridor_5", "manager_office", "south_corridor_5", "south_corridor_3", "reception"]
WINGS = {"all": ROUTE, "north": ROUTE[:ROUTE.index("reception", 1) + 1],
         "south": ROUTE[ROUTE.index("reception", 1):]}     # a patrol of the whole building or one corridor's rooms
LOOK_AROUND = (math.pi / 2, -3 * math.pi / 2)   # in each room: turn left a quarter, then right three quarters
OBJECTS = [("box", "red", "kitchen"), ("duckie", "", "open_office"), ("box", "blue", "conference_room"),
           ("medkit", "", "reception"), ("cone", "", "workshop"), ("barrel", "", "lounge")]
OBJECT_ROOMS = ("kitchen", "open_office", "conference_room", "reception", "workshop", "lounge", "lab", "library")


@dataclass(frozen=True)
class BuildingConfig(SimRobot):
    seed: int = 0
    days: int = 1
    people: int = 8                         # regular staff (1..12)
    visitors: int = 1                       # one-off visitors, each on one day
    start_date: str = "2026-03-09"          # a Monday
    patrol_hours: tuple[float, ...] = (10.0, 15.5)   # each +-5 min
    patrol_wings: tuple[str, ...] = ("north", "south")   # WINGS keys, cycled (shifted by one each day)
    waits: tuple[tuple[str, float, float], ...] = (("kitchen", 12.0, 35), ("conference_room", 14.0, 25))
    fps: float = 2.0                        # camera frames per second while moving
    wait_frame_s: float = 30.0              # one frame every this many seconds while waiting still


@dataclass
class Pose:
    x: float
    z: float
    heading: float          # MiniWorld dir
    waypoint: str


def waypoint_tag(x: float, z: float) -> str:
    room = room_of(x, z)
    if room not in CORRIDORS:
        return room
    return min((w for w in WAYPOINTS if w.startswith(room)), key=lambda w: math.dist(WAYPOINTS[w], (x, z)))


class _Driver:
    """The robot's poses, one per camera frame (1/fps apart), turning on the spot and driving straight."""

    def __init__(self, cfg: BuildingConfig, start: str, heading: float):
        self.cfg, self.dt = cfg, 1.0 / cfg.fps
        (self.x, self.z), self.heading = WAYPOINTS[start], heading

    def _pose(self, x=None, z=None) -> Pose:
        x, z = (self.x, self.z) if x is None else (x, z)
        return Pose(x, z, math.atan2(math.sin(self.heading), math.cos(self.heading)), waypoint_tag(x, z))

    def turn(self, delta: float) -> Iterator[Pose]:
        step = self.cfg.turn_rate * self.dt
        for _ in range(int(abs(delta) / step)):
            self.heading += math.copysign(step, delta)
            yield self._pose()
        rest = delta - math.copysign(step * int(abs(delta) / step), delta)
        if abs(rest) > 1e-3:
            self.heading += rest
            yield self._pose()

    def drive(self, target: str) -> Iterator[Pose]:
        tx, tz = WAYPOINTS[target]
        if math.hypot(tx - self.x, tz - self.z) < 1e-6:
            return
        goal = math.atan2(-(tz - self.z), tx - self.x)
        yield from self.turn(math.atan2(math.sin(goal - self.heading), math.cos(goal - self.heading)))
        dist = math.hypot(tx - self.x, tz - self.z)
        steps = max(1, int(dist / (self.cfg.speed * self.dt)))
        x0, z0 = self.x, self.z
        for k in range(1, steps + 1):
            yield self._pose(x0 + (tx - x0) * k / steps, z0 + (tz - z0) * k / steps)
        self.x, self.z = tx, tz

    def look_around(self) -> Iterator[Pose]:
        for delta in LOOK_AROUND:
            yield from self.turn(delta)


def patrol_poses(cfg: BuildingConfig, wing: str = "all") -> list[Pose]:
    """One patrol along ``WINGS[wing]``, a look-around in every room (the first time it is reached)."""
    route = WINGS[wing]
    driver = _Driver(cfg, route[0], math.pi / 2 if wing != "south" else -math.pi / 2)
    poses, looked = list(driver.look_around()), {route[0]}
    for name in route[1:]:
        poses += driver.drive(name)
        if name in ROOMS and name not in looked:
            poses += driver.look_around()
            looked.add(name)
    return poses


def _way_to(room: str) -> list[str]:
    """Waypoints from reception to a room's door pose."""
    if room == "reception":
        return []
    return [RECEPTION_WAYPOINT[CORRIDOR_OF[room]], DOOR_WAYPOINT[room], room]


def wait_poses(cfg: BuildingConfig, room: str) -> tuple[list[Pose], Pose, list[Pose]]:
    """(driving there from reception, the still pose inside the door facing in, driving back)."""
    if room not in WAYPOINTS or room in CORRIDORS:
        raise ValueError(f"waits: {room!r} is not a room with a door pose ({', '.join(r for r in ROOMS)})")
    driver = _Driver(cfg, "reception", -math.pi / 2 if CORRIDOR_OF.get(room) == "north_corridor" else math.pi / 2)
    there = [p for w in _way_to(room) for p in driver.drive(w)]
    facing = inward_dir(room) if room != "reception" else math.pi
    there += driver.turn(math.atan2(math.sin(facing - driver.heading), math.cos(facing - driver.heading)))
    still = driver._pose()
    back = [p for w in list(reversed(_way_to(room)))[1:] + ["reception"] for p in driver.drive(w)]
    return there, still, back


@dataclass
class _Activity:
    kind: str                       # patrol | wait
    frames: list[tuple[float, Pose]]

    @property
    def span(self) -> tuple[float, float]:
        return self.frames[0][0], self.frames[-1][0]


def plan_robot(cfg: BuildingConfig, rng: np.random.Generator) -> list[_Activity]:
    """Every camera frame of every day: patrols at ``patrol_hours`` (+-5 min), waits at ``waits``."""
    if not cfg.patrol_wings or any(w not in WINGS for w in cfg.patrol_wings):
        raise ValueError(f"patrol_wings {cfg.patrol_wings}: one or more of {', '.join(WINGS)}")
    patrols = {wing: patrol_poses(cfg, wing) for wing in set(cfg.patrol_wings)}
    legs = {room: wait_poses(cfg, room) for room, _, _ in cfg.waits}
    out: list[_Activity] = []
    for day in range(cfg.days):
        base = day_start(cfg, day)
        for i, hour in enumerate(cfg.patrol_hours):
            wing = cfg.patrol_wings[(day + i) % len(cfg.patrol_wings)]
            t0 = base + hour * 3600 + float(rng.uniform(-PATROL_JITTER_S, PATROL_JITTER_S))
            out.append(_Activity("patrol", [(t0 + k / cfg.fps, p) for k, p in enumerate(patrols[wing])]))
        for room, hour, minutes in cfg.waits:
            there, still, back = legs[room]
            t_still = base + hour * 3600
            frames = [(t_still - (len(there) - k) / cfg.fps, p) for k, p in enumerate(there)]
            frames += [(t_still + j * cfg.wait_frame_s, still) for j in range(int(minutes * 60 / cfg.wait_frame_s))]
            frames += [(t_still + minutes * 60 + k / cfg.fps, p) for k, p in enumerate(back)]
            out.append(_Activity("wait", frames))
    out.sort(key=lambda a: a.span[0])
    for a, b in zip(out, out[1:]):
        if a.span[1] >= b.span[0]:
            raise ValueError(f"robot activities overlap: a {a.kind} until {a.span[1]:.0f} and a {b.kind} from "
                             f"{b.span[0]:.0f} (patrol_hours {cfg.patrol_hours}, waits {cfg.waits})")
    return out


def sightings(robot: tuple[float, float, float], where: dict[str, tuple[float, float, str]], half_fov: float,
              fx: float, width: int) -> dict[str, dict]:
    """The people the camera sees, name -> {u, room, position}: in the field of view, 0.5-7 m away,
    in line of sight, and no nearer person's billboard over their face (angular overlap)."""
    x, z, _ = robot
    near = []                                   # everyone in line of sight: seen or in the way
    for name, (px, pz, room) in where.items():
        dist = math.hypot(px - x, pz - z)
        if 0.2 < dist < MAX_RANGE and line_of_sight((x, z), (px, pz)):
            near.append((dist, bearing(robot, (px, pz)), name, px, pz, room))
    near.sort()
    seen = {}
    for i, (dist, off, name, px, pz, room) in enumerate(near):
        if dist <= MIN_RANGE or abs(off) >= half_fov:
            continue
        face = math.atan(FACE_HALF_WIDTH / dist)
        if any(abs(math.atan2(math.sin(off - o), math.cos(off - o))) < math.atan(PERSON_WIDTH / 2 / d) + face
               for d, o, *_ in near[:i]):
            continue
        seen[name] = {"u": round(width / 2 - fx * math.tan(off), 1), "room": room,
                      "position": [round(px, 3), round(-pz, 3)]}
    return seen


def object_days(cfg: BuildingConfig) -> list[dict]:
    """Where each small object is on each day (MiniWorld x, z): on day 0 in its first room, later
    (``moving_objects``) each moves to another room with probability 0.5; 2-4.8 m from the room's
    robot pose (seen on a look-around), clear of people's spots, furniture and the entrance."""
    rng = np.random.default_rng(cfg.seed + 7919)
    rooms = {object_name(kind, colour): room for kind, colour, room in OBJECTS}
    keep_clear = [p for _, _, p in all_person_spots()] + [p for _, p, _ in furniture()] + [ENTRANCE]
    days = []
    for day in range(cfg.days):
        placed = {}
        for name in rooms:
            if day > 0 and cfg.moving_objects and rng.random() < 0.5:
                rooms[name] = str(rng.choice([r for r in OBJECT_ROOMS if r != rooms[name]]))
            x0, x1, z0, z1 = ROOMS[rooms[name]]
            pose = WAYPOINTS[rooms[name]]
            for _ in range(5000):
                x, z = float(rng.uniform(x0 + 0.6, x1 - 0.6)), float(rng.uniform(z0 + 0.6, z1 - 0.6))
                if 2.0 <= math.dist((x, z), pose) <= 4.8 and all(math.dist((x, z), p) > 0.8 for p in keep_clear):
                    break
            placed[name] = {"room": rooms[name], "xz": [round(x, 3), round(z, 3)]}
        days.append(placed)
    return days


def _faces(cfg: BuildingConfig, names: list[str], rng: np.random.Generator) -> tuple[list[Path], dict]:
    if cfg.faces_dir:
        photos = photo_faces(cfg.faces_dir)
        if len(photos) < len(names):
            raise ValueError(f"faces_dir {cfg.faces_dir}: {len(photos)} people with two usable photos, "
                             f"{len(names)} needed")
        return [photo for _, photo, _ in photos[:len(names)]], {
            name: {"person": who, "photo": str(photo), "held_out": str(held_out)}
            for name, (who, photo, held_out) in zip(names, photos)}
    portraits = usable_portraits()
    if len(portraits) < len(names):
        raise ValueError(f"{len(portraits)} usable portraits for {len(names)} people")
    return [portraits[i] for i in rng.choice(len(portraits), size=len(names), replace=False)], {}


@dataclass
class BuildingSim:
    """One simulated building (people, schedules, faces, objects, the renderer) that one or
    more robots sense: ``render`` writes one robot's bag and its frames into a truth."""
    cfg: "BuildingConfig"
    rng: np.random.Generator
    schedule: Schedule
    placements: list[dict]
    env: BuildingWorld
    truth: GroundTruth           # everything but the robots' frames and patrols

    @classmethod
    def build(cls, cfg: "BuildingConfig") -> "BuildingSim":
        """``cfg.waits``: every robot's waits (a meeting is held in each waited-in room)."""
        rng = np.random.default_rng(cfg.seed)
        day_starts = [day_start(cfg, d) for d in range(cfg.days)]
        schedule: Schedule = make_schedule(day_starts, cfg.people, cfg.visitors, cfg.seed, cfg.waits)
        names = list(schedule.people)
        portraits, faces = _faces(cfg, names, rng)
        placements = object_days(cfg)
        env = BuildingWorld(list(zip(names, portraits)), seed=cfg.seed, width=cfg.width, height=cfg.height,
                            objects=OBJECTS, days=cfg.days)
        truth = GroundTruth(
            config={**asdict(cfg), "world": "building"}, faces=faces, day_starts=day_starts,
            rooms=rooms_truth(ROOMS, SHARED_ROOMS),
            people={n: {"visitor": p.visitor, "home": p.home, "portrait": str(portrait),
                        "outfits": [asdict(o) for o in outfits]}
                    for (n, p), portrait, outfits in zip(schedule.people.items(), portraits, env.outfits)},
            stays=[s.to_dict() for s in sorted(schedule.stays, key=lambda s: (s.start, s.person))],
            objects=[{name: {"room": p["room"], "position": [p["xz"][0], -p["xz"][1]]} for name, p in day.items()}
                     for day in placements])
        return cls(cfg, rng, schedule, placements, env, truth)

    def render(self, activities: list[_Activity], bag_dir: Path, progress: bool = True,
               robot: str = "") -> list[dict]:
        """Write ``bag_dir`` (MCAP) of one robot's ``activities``; its ground-truth frames
        (each with ``robot`` when one is named)."""
        from ..ingest.bag_writer import BagWriter
        cfg, env, schedule, placements = self.cfg, self.env, self.schedule, self.placements
        day_starts = self.truth.day_starts
        object_entities = {object_name(kind, colour): ent for kind, colour, ent in env.objects}
        fx = cfg.height / 2 / math.tan(math.radians(env.agent.cam_fov_y / 2))
        half_fov = math.atan(cfg.width / 2 / fx)
        if bag_dir.exists():          # left by an interrupted run (the truth is written last)
            shutil.rmtree(bag_dir)
        bag_dir.parent.mkdir(parents=True, exist_ok=True)
        bar = progress_bar(total=sum(len(a.frames) for a in activities),
                           desc=f"simulating the building{' for ' + robot if robot else ''}", unit="frame",
                           disable=not progress)
        frames, day = [], -1
        with BagWriter(bag_dir) as bag:
            for activity in activities:
                for t, pose in activity.frames:
                    while day + 1 < len(day_starts) and t >= day_starts[day + 1]:
                        day += 1
                        env.dress(day)
                        for name, placed in placements[day].items():
                            object_entities[name].pos = np.array([placed["xz"][0], 0.0, placed["xz"][1]])
                    robot_pose = (pose.x, pose.z, pose.heading)
                    where = {}
                    for i, person in enumerate(env.people):
                        at = schedule.position_at(person.name, t)
                        if at is None:
                            person.entity.pos = np.array([PARKED[0] + 3 * i, 0.0, PARKED[1]])
                            continue
                        where[person.name] = at
                        person.entity.pos = np.array([at[0], 0.0, at[1]])
                        person.entity.dir = math.atan2(-(pose.z - at[1]), pose.x - at[0])   # people look at the robot
                    seen = sightings(robot_pose, where, half_fov, fx, cfg.width)
                    robot_room = room_of(pose.x, pose.z)
                    objects_seen = {name: p["room"] for name, p in placements[day].items()
                                    if in_view(robot_pose, tuple(p["xz"]), half_fov, max_dist=5.0, min_dist=1.8)}
                    bgr, depth = render_view(env, cfg, pose.x, pose.z, pose.heading)
                    bag.frame(t, bgr, pose.x, -pose.z, pose.heading, waypoint=pose.waypoint, fx=fx, depth=depth)
                    frames.append({"t": t, "robot": [round(pose.x, 3), round(-pose.z, 3), round(pose.heading, 3)],
                                   "waypoint": pose.waypoint, "room": robot_room, "visible": list(seen),
                                   "present": [n for n, w in where.items() if w[2] == robot_room], "seen": seen,
                                   "objects": objects_seen, **({"robot_id": robot} if robot else {})})
                    bar.update(1)
        bar.close()
        return frames


def generate_building_episode(cfg: BuildingConfig, out_dir: Path, progress: bool = True) -> GroundTruth:
    """Write ``out_dir/bag`` (MCAP) and ``out_dir/ground_truth.json``."""
    sim = BuildingSim.build(cfg)
    activities = plan_robot(cfg, sim.rng)
    truth = sim.truth
    truth.patrols = [a.span for a in activities]
    out_dir.mkdir(parents=True, exist_ok=True)
    truth.frames = sim.render(activities, out_dir / "bag", progress)
    sim.env.close()
    truth.save(out_dir / "ground_truth.json")
    log.info("building episode: %d frames, %d stays -> %s", len(truth.frames), len(truth.stays), out_dir)
    return truth
