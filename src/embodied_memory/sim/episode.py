"""Simulated days in the office world: people with routines, robot patrols, a rosbag2 (MCAP)
of what the robot sensed, and the ground truth of who was where.

Coordinates: MiniWorld's floor plane (x, z) maps to the map frame as (x, -z); yaw = MiniWorld
``dir``.  Bag time is simulated wall time (patrols happen at set hours of each day).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import cv2
import numpy as np
from ..cache import cache_dir
from ..progress import progress_bar

from .world import ROOMS, OfficeWorld, object_name, photo_faces, room_centre, room_of, usable_portraits

CORRIDOR_Z = -0.5
WAYPOINTS = {  # id -> (x, z) in MiniWorld coordinates
    "lobby": room_centre("lobby"), "corridor_west": (-6.25, CORRIDOR_Z), "kitchen": room_centre("kitchen"),
    "corridor_centre": (0.25, CORRIDOR_Z), "office": room_centre("office"),
    "corridor_east": (6.75, CORRIDOR_Z), "meeting_room": room_centre("meeting_room"),
}
ROUTE = ["lobby", "corridor_centre", "corridor_west", "kitchen", "corridor_west", "corridor_centre", "office",
         "corridor_centre", "corridor_east", "meeting_room", "corridor_east", "corridor_centre", "lobby"]
LOOK_AROUND = {"kitchen", "office", "meeting_room"}   # the robot turns once in place there
NAMES = ["alice", "bob", "carol", "dave", "erin", "frank"]
HOMES = ("office", "meeting_room")   # person i works in HOMES[i % 2]
GENERATOR_VERSION = 3          # bump when the simulation changes for the same config (invalidates caches)


@dataclass(frozen=True)
class SimRobot:
    """What both worlds share: the robot's motion and camera, objects, faces."""
    speed: float = 0.8                      # m/s
    turn_rate: float = 1.2                  # rad/s
    width: int = 640
    height: int = 480
    depth_scale: int = 4                    # depth image = colour size / this (16UC1 mm); 0 = no depth
    moving_objects: bool = True             # small objects change rooms between days
    faces_dir: str = ""                     # labelled photos (NAME/*.jpg) instead of MiniWorld's portraits


@dataclass(frozen=True)
class EpisodeConfig(SimRobot):
    seed: int = 0
    days: int = 1
    people: int = 2
    patrol_hours: tuple[float, ...] = (10.0, 12.5, 15.0)
    start_date: str = "2026-03-09"          # a Monday
    fps: float = 4.0


@dataclass
class Routine:
    name: str
    home: str
    arrive: float                           # hours of the day
    leave: float
    lunch: tuple[float, float]
    absent: bool

    def room_at(self, hour: float) -> Optional[str]:
        if self.absent or not (self.arrive <= hour < self.leave):
            return None
        return "kitchen" if self.lunch[0] <= hour < self.lunch[1] else self.home

    def intervals(self) -> list[tuple[float, float, str]]:
        """(from hour, to hour, room) of the day, as ``room_at`` gives it."""
        if self.absent:
            return []
        parts = [(self.arrive, self.lunch[0], self.home), (self.lunch[0], self.lunch[1], "kitchen"),
                 (self.lunch[1], self.leave, self.home)]
        return [(max(a, self.arrive), min(b, self.leave), room) for a, b, room in parts
                if min(b, self.leave) > max(a, self.arrive)]


def make_routines(cfg: EpisodeConfig, rng: np.random.Generator) -> list[list[Routine]]:
    """routines[day][person]"""
    out = []
    for day in range(cfg.days):
        today = []
        for i in range(cfg.people):
            lunch = 12.0 + float(rng.normal(0.25, 0.15))
            today.append(Routine(NAMES[i], HOMES[i % 2], float(rng.normal(8.5, 0.3)), float(rng.normal(17.5, 0.3)),
                                 (lunch, lunch + 0.75 + float(rng.normal(0, 0.1))),
                                 absent=bool(day > 0 and rng.random() < 0.15)))
        out.append(today)
    return out


def spot(person_index: int, room: str) -> tuple[float, float]:
    """Where a person stands in a room (away from the robot's waypoint at its centre)."""
    x0, x1, z0, z1 = ROOMS[room]
    offsets = [(-1.4, 1.3), (1.4, 1.6), (-1.2, -1.2), (1.3, -1.3), (2.0, 0.0), (-2.0, 0.2)]   # one per person
    ox, oz = offsets[person_index % len(offsets)]
    cx, cz = room_centre(room)
    return cx + ox, cz + oz


def day_start(cfg: EpisodeConfig, day: int) -> float:
    d = dt.date.fromisoformat(cfg.start_date) + dt.timedelta(days=day)
    return dt.datetime.combine(d, dt.time(0), tzinfo=dt.timezone.utc).timestamp()


@dataclass
class GroundTruth:
    """What really happened in a simulated episode (both worlds; map frame)."""
    config: dict                                            # the episode config + "world": small | building
    frames: list[dict] = field(default_factory=list)       # per camera frame: t, robot [x, y, yaw], waypoint,
    #   room, visible [names], seen {name: {u, room, position [x, y]}}, present [names], objects {name: room}
    routines: list[list[dict]] = field(default_factory=list)   # small world: per day per person
    patrols: list[tuple[float, float]] = field(default_factory=list)   # robot activity [t0, t1] (patrols, waits)
    positions: dict = field(default_factory=dict)           # small world: name -> {room: [x, y]}
    objects: list[dict] = field(default_factory=list)       # per day: object name -> {room, position [x, y]}
    faces: dict = field(default_factory=dict)               # faces_dir: name -> {person, photo, held_out}
    rooms: dict = field(default_factory=dict)               # id -> {label, bounds [xmin, xmax, ymin, ymax], shared}
    people: dict = field(default_factory=dict)              # name -> {visitor, home (room id or ""), portrait}
    stays: list[dict] = field(default_factory=list)         # where each person really was: person, day, room,
    #   start, end (unix s), kind (desk|meeting|lunch|visit|walk|wait), position [x, y] (None for walks)
    day_starts: list[float] = field(default_factory=list)   # unix time of each simulated day's 00:00 (UTC)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: Path) -> "GroundTruth":
        return cls(**json.loads(path.read_text()))


def rooms_truth(rooms: dict[str, tuple[float, float, float, float]], shared) -> dict:
    """The ground truth's rooms from MiniWorld rectangles (min_x, max_x, min_z, max_z): label (the
    id with spaces), map-frame bounds [xmin, xmax, ymin, ymax], shared (nobody's home)."""
    return {room: {"label": room.replace("_", " "), "bounds": [x0, x1, -z1, -z0], "shared": room in shared}
            for room, (x0, x1, z0, z1) in rooms.items()}


def _patrol_poses(cfg: EpisodeConfig):
    """(x, z, dir, waypoint) per frame along ROUTE, turning on the spot in LOOK_AROUND rooms."""
    dt_frame = 1.0 / cfg.fps
    (x, z), heading = WAYPOINTS[ROUTE[0]], 0.0
    for target_name in ROUTE[1:]:
        tx, tz = WAYPOINTS[target_name]
        goal = math.atan2(-(tz - z), tx - x)                   # MiniWorld dir of the segment
        while abs(math.atan2(math.sin(goal - heading), math.cos(goal - heading))) > 1e-3:
            delta = math.atan2(math.sin(goal - heading), math.cos(goal - heading))
            heading += max(-cfg.turn_rate * dt_frame, min(cfg.turn_rate * dt_frame, delta))
            yield x, z, heading, room_of(x, z) if room_of(x, z) != "corridor" else _nearest_waypoint(x, z)
        dist = math.hypot(tx - x, tz - z)
        steps = max(1, int(dist / (cfg.speed * dt_frame)))
        for k in range(1, steps + 1):
            px, pz = x + (tx - x) * k / steps, z + (tz - z) * k / steps
            yield px, pz, heading, _nearest_waypoint(px, pz)
        x, z = tx, tz
        if target_name in LOOK_AROUND:
            for _ in range(int(2 * math.pi / (cfg.turn_rate * dt_frame))):
                heading += cfg.turn_rate * dt_frame
                yield x, z, heading, target_name


OBJECTS = [("box", "red", "kitchen"), ("duckie", "", "office"), ("box", "blue", "meeting_room"),
           ("medkit", "", "lobby")]
OBJECT_ROOMS = ("kitchen", "office", "meeting_room", "lobby")


def object_days(cfg: EpisodeConfig) -> list[dict]:
    """Where each small object is on each day (MiniWorld x, z): on day 0 in its first room; on
    later days (``moving_objects``) each one moves to another room with probability 0.5. Its own
    random stream, so people's routines do not depend on it."""
    from .world import object_name
    rng = np.random.default_rng(cfg.seed + 7919)
    rooms = {object_name(kind, colour): room for kind, colour, room in OBJECTS}
    days = []
    for day in range(cfg.days):
        placed = {}
        for name in rooms:
            if day > 0 and cfg.moving_objects and rng.random() < 0.5:
                rooms[name] = str(rng.choice([r for r in OBJECT_ROOMS if r != rooms[name]]))
            x0, x1, z0, z1 = ROOMS[rooms[name]]
            cx, cz = room_centre(rooms[name])
            for _ in range(1000):   # seen from the room centre (>= 2 m: a level camera misses closer
                x, z = float(rng.uniform(x0 + 0.7, x1 - 0.7)), float(rng.uniform(z0 + 0.7, z1 - 0.7))  # objects)
                if math.hypot(x - cx, z - cz) > 2.0 and math.hypot(x - cx - 1.5, z - cz - 1.5) > 1.2 and all(
                        math.hypot(x - sx, z - sz) > 0.8 for sx, sz in (spot(i, rooms[name]) for i in range(6))):
                    break
            placed[name] = {"room": rooms[name], "xz": [round(x, 3), round(z, 3)]}
        days.append(placed)
    return days


def _nearest_waypoint(x: float, z: float) -> str:
    return min(WAYPOINTS, key=lambda w: math.hypot(WAYPOINTS[w][0] - x, WAYPOINTS[w][1] - z))


def _line_of_sight(robot: tuple[float, float], target: tuple[float, float]) -> bool:
    """Same room, or from the corridor into a room through its door opening."""
    from .world import DOORS
    robot_room, target_room = room_of(*robot), room_of(*target)
    if robot_room == target_room:
        return True
    if robot_room != "corridor" or target_room not in DOORS:
        return False
    x0, x1, z0, z1 = ROOMS[target_room]
    cx0, cx1, cz0, cz1 = ROOMS["corridor"]
    wall_z = (cz1 + z0) / 2 if z0 > cz1 else (cz0 + z1) / 2     # the wall band between them
    (rx, rz), (tx, tz) = robot, target
    if (rz - wall_z) * (tz - wall_z) > 0:
        return False
    x_at_wall = rx + (tx - rx) * (wall_z - rz) / (tz - rz)
    a, b = DOORS[target_room]
    return a <= x_at_wall <= b


HALF_HFOV = math.atan(math.tan(math.radians(30)) * 640 / 480)   # MiniWorld: 60 degrees vertical, 4:3


def _visible(robot: tuple[float, float, float], target: tuple[float, float], max_dist: float = 7.0,
             min_dist: float = 0.5) -> bool:
    x, z, heading = robot
    dx, dz = target[0] - x, target[1] - z
    dist = math.hypot(dx, dz)
    angle = math.atan2(-dz, dx)
    off = abs(math.atan2(math.sin(angle - heading), math.cos(angle - heading)))
    return min_dist < dist < max_dist and off < HALF_HFOV and _line_of_sight((x, z), target)


GENERATOR_MODULES = ("world.py", "floor_plans.py", "episode.py", "building.py", "schedules.py", "building_episode.py",
                     "fleet_episode.py")


def generator_sources_hash() -> str:
    """A hash of the simulator's source files and the portraits it may use: any change to how
    an episode is generated makes a new cache entry (no stale episode after an upgrade)."""
    digest = hashlib.sha256()
    here = Path(__file__).parent
    for name in GENERATOR_MODULES:
        digest.update((here / name).read_bytes())
    from .world import portrait_paths
    digest.update("\n".join(p.name for p in portrait_paths()).encode())
    return digest.hexdigest()[:16]


def _world(cfg):
    """(cache prefix, generator, description, key extras) of a config's world."""
    if isinstance(cfg, EpisodeConfig):
        return "office", generate_episode, "the office: ", {"generator": GENERATOR_VERSION}
    from . import building_episode, fleet_episode
    if isinstance(cfg, fleet_episode.FleetConfig):
        return ("fleet", fleet_episode.generate_fleet_episode, f"the building with {len(cfg.robots)} robots: ",
                {"generator": building_episode.GENERATOR_VERSION, "world": "building"})
    if not isinstance(cfg, building_episode.BuildingConfig):
        raise TypeError(f"cached_episode: an EpisodeConfig or a BuildingConfig, not {type(cfg).__name__}")
    return ("building", building_episode.generate_building_episode, f"the building: {cfg.visitors} visitor(s), ",
            {"generator": building_episode.GENERATOR_VERSION, "world": "building"})


def episode_dir(cfg) -> Path:
    """Where ``cached_episode`` keeps the episode of ``cfg``: ``office_...`` for an
    ``EpisodeConfig``, ``building_...`` for a ``BuildingConfig``; the key covers the config, the
    world's generator version and the simulator's sources."""
    prefix, _, _, extra = _world(cfg)
    key = hashlib.sha256(json.dumps({**asdict(cfg), **extra, "sources": generator_sources_hash()},
                                    sort_keys=True).encode()).hexdigest()[:10]
    return cache_dir() / f"{prefix}_seed{cfg.seed}_{key}"


def cached_episode(cfg, progress: bool = True) -> Path:
    """The episode directory for ``cfg`` (bag + ground truth), generated on first use."""
    _, generate, what, _ = _world(cfg)
    path = episode_dir(cfg)
    if not (path / "ground_truth.json").exists():
        print(f"[sim] simulating {what}{cfg.days} day(s), {cfg.people} people, seed {cfg.seed} -> {path}",
              flush=True)
        generate(cfg, path, progress=progress)
    return path


def render_view(env, cfg, x: float, z: float, heading: float) -> tuple[np.ndarray, Optional[np.ndarray]]:
    """The camera's BGR image from MiniWorld pose (x, z, heading) and, with ``cfg.depth_scale``,
    its depth (metres) at 1/depth_scale of the image size."""
    env.agent.pos = np.array([x, 0.0, z])
    env.agent.dir = heading
    rgb = env.render_obs()
    depth = None
    if cfg.depth_scale:
        full = env.obs_fb.get_depth_map(0.04, 100.0)[..., 0]
        depth = cv2.resize(full, (cfg.width // cfg.depth_scale, cfg.height // cfg.depth_scale),
                           interpolation=cv2.INTER_NEAREST)
    return rgb[:, :, ::-1].copy(), depth


def generate_episode(cfg: EpisodeConfig, out_dir: Path, progress: bool = True) -> GroundTruth:
    """Write ``out_dir/bag`` (MCAP) and ``out_dir/ground_truth.json``."""
    from ..ingest.bag_writer import BagWriter
    rng = np.random.default_rng(cfg.seed)
    faces = {}
    if cfg.faces_dir:
        photos = photo_faces(cfg.faces_dir)
        if len(photos) < cfg.people:
            raise ValueError(f"faces_dir {cfg.faces_dir}: {len(photos)} people with two usable photos, "
                             f"{cfg.people} needed")
        chosen = [photo for _, photo, _ in photos[:cfg.people]]
        faces = {NAMES[i]: {"person": who, "photo": str(photo), "held_out": str(held_out)}
                 for i, (who, photo, held_out) in enumerate(photos[:cfg.people])}
    else:
        portraits = usable_portraits()
        chosen = [portraits[i] for i in rng.choice(len(portraits), size=cfg.people, replace=False)]
    env = OfficeWorld([(NAMES[i], chosen[i]) for i in range(cfg.people)], seed=cfg.seed, width=cfg.width,
                      height=cfg.height, objects=OBJECTS)
    env.reset(seed=cfg.seed)
    routines = make_routines(cfg, rng)
    placements = object_days(cfg)
    day_starts = [day_start(cfg, day) for day in range(cfg.days)]
    truth = GroundTruth(config={**asdict(cfg), "world": "small"},
                        routines=[[asdict(r) for r in day] for day in routines], faces=faces,
                        objects=[{name: {"room": p["room"], "position": [p["xz"][0], -p["xz"][1]]}
                                  for name, p in day.items()} for day in placements],
                        rooms=rooms_truth(ROOMS, [r for r in ROOMS if r not in HOMES]), day_starts=day_starts,
                        people={NAMES[i]: {"visitor": False, "home": HOMES[i % 2], "portrait": str(chosen[i])}
                                for i in range(cfg.people)},
                        stays=sorted(({"person": r.name, "day": day, "room": room,
                                       "start": day_starts[day] + a * 3600, "end": day_starts[day] + b * 3600,
                                       "kind": "lunch" if room == "kitchen" else "desk",
                                       "position": [spot(i, room)[0], -spot(i, room)[1]]}
                                      for day, today in enumerate(routines) for i, r in enumerate(today)
                                      for a, b, room in r.intervals()), key=lambda s: (s["start"], s["person"])))
    object_entities = {object_name(kind, colour): ent for kind, colour, ent in env.objects}
    truth.positions = {p.name: {room: [spot(i, room)[0], -spot(i, room)[1]] for room in ("kitchen", "office",
                                                                                        "meeting_room")}
                       for i, p in enumerate(env.people)}
    route = list(_patrol_poses(cfg))
    fx = cfg.height / 2 / math.tan(math.radians(30))      # MiniWorld: 60 degree vertical field of view
    out_dir.mkdir(parents=True, exist_ok=True)
    if (out_dir / "bag").exists():          # left by an interrupted run (the truth is written last)
        shutil.rmtree(out_dir / "bag")
    total = len(route) * len(cfg.patrol_hours) * cfg.days
    bar = progress_bar(total=total, desc="simulating patrols", unit="frame", disable=not progress)
    with BagWriter(out_dir / "bag") as bag:
        for day in range(cfg.days):
            for name, placed in placements[day].items():
                object_entities[name].pos = np.array([placed["xz"][0], 0.0, placed["xz"][1]])
            for hour in cfg.patrol_hours:
                t0 = day_start(cfg, day) + hour * 3600 + float(rng.uniform(-300, 300))
                truth.patrols.append((t0, t0 + len(route) / cfg.fps))
                for k, (x, z, heading, waypoint) in enumerate(route):
                    t = t0 + k / cfg.fps
                    hour_now = (t - day_start(cfg, day)) / 3600
                    robot_room = room_of(x, z)
                    visible, present, seen = [], [], {}
                    for i, (person, routine) in enumerate(zip(env.people, routines[day])):
                        room = routine.room_at(hour_now)
                        ent = person.entity
                        if room is None:
                            ent.pos = np.array([100.0 + 3 * i, 0.0, 100.0])
                            continue
                        px, pz = spot(i, room)
                        ent.pos = np.array([px, 0.0, pz])
                        ent.dir = math.atan2(-(z - pz), x - px)       # people look at the robot
                        if room == robot_room:
                            present.append(person.name)
                        if _visible((x, z, heading), (px, pz)):
                            visible.append(person.name)
                            bearing = math.atan2(-(pz - z), px - x) - heading
                            bearing = math.atan2(math.sin(bearing), math.cos(bearing))
                            u = cfg.width / 2 - fx * math.tan(bearing)        # image column of the person
                            seen[person.name] = {"u": round(u, 1), "room": room, "position": [px, -pz]}
                    objects_seen = {name: placed["room"] for name, placed in placements[day].items()
                                    if _visible((x, z, heading), tuple(placed["xz"]), max_dist=5.0,
                                             min_dist=1.8)}   # 0.5 m objects, level camera 1.5 m up
                    bgr, depth = render_view(env, cfg, x, z, heading)
                    bag.frame(t, bgr, x, -z, heading, waypoint=waypoint, fx=fx, depth=depth)
                    truth.frames.append({"t": t, "robot": [round(x, 3), round(-z, 3), round(heading, 3)],
                                         "waypoint": waypoint, "room": robot_room, "visible": visible,
                                         "present": present, "seen": seen, "objects": objects_seen})
                    bar.update(1)
    bar.close()
    env.close()
    truth.save(out_dir / "ground_truth.json")
    return truth
