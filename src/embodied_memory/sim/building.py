"""The office building of benchmark v2 ("building" world): its layout, the spots where people
stand, the robot's waypoints, line of sight through free space, and the MiniWorld scene.

Layout (MiniWorld floor coordinates x, z; the map frame is (x, -z)): five north rooms (z 5..11)
on a north corridor (z 2..4), a reception in the middle (x -4..4, z -2..1) joining it to a south
corridor (z -5..-3) with five south rooms (z -12..-6).  Rooms are 7 m wide with 1 m gaps; the
gaps are walls, crossed only through door passages (MiniWorld ``connect_rooms``).

The layout part (everything above ``BuildingWorld``) is plain Python; the scene reuses
``sim.world``'s people billboards (real portrait faces) and switches pyglet to headless.
"""
from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from .world import Outfit, PersonBillboard, SimPerson, Texture, person_texture  # first: switches pyglet to headless
from miniworld.entity import Box, Entity, MeshEnt  # noqa: E402
from miniworld.miniworld import MiniWorldEnv  # noqa: E402

NORTH_ROOMS = ("kitchen", "open_office", "conference_room", "lab", "library")        # west to east
SOUTH_ROOMS = ("lounge", "design_studio", "huddle_room", "workshop", "manager_office")
ROOM_WIDTH, ROOM_GAP = 7.0, 1.0
NORTH_Z, SOUTH_Z = (5.0, 11.0), (-12.0, -6.0)
_WEST = -(5 * ROOM_WIDTH + 4 * ROOM_GAP) / 2          # -19.5: the building's west wall
_XS = [(_WEST + i * (ROOM_WIDTH + ROOM_GAP), _WEST + i * (ROOM_WIDTH + ROOM_GAP) + ROOM_WIDTH) for i in range(5)]
ROOMS: dict[str, tuple[float, float, float, float]] = {   # id -> (min_x, max_x, min_z, max_z)
    **{name: (*_XS[i], *NORTH_Z) for i, name in enumerate(NORTH_ROOMS)},
    **{name: (*_XS[i], *SOUTH_Z) for i, name in enumerate(SOUTH_ROOMS)},
    "north_corridor": (_WEST, -_WEST, 2.0, 4.0),
    "reception": (-4.0, 4.0, -2.0, 1.0),
    "south_corridor": (_WEST, -_WEST, -5.0, -3.0),
}
CORRIDORS = ("north_corridor", "south_corridor")
CORRIDOR_OF = {**{r: "north_corridor" for r in NORTH_ROOMS}, **{r: "south_corridor" for r in SOUTH_ROOMS}}
ROOM_DOOR_WIDTH, RECEPTION_DOOR_WIDTH = 1.6, 2.0
PERSON_GAP = 0.6          # people's spots are at least this far apart (billboards are 0.5 m wide)
ROBOT_CLEARANCE = 1.5     # ... and at least this far from any robot waypoint / wait pose


def room_centre(room: str) -> tuple[float, float]:
    x0, x1, z0, z1 = ROOMS[room]
    return (x0 + x1) / 2, (z0 + z1) / 2


@dataclass(frozen=True)
class Door:
    """A passage through the 1 m wall gap between two rooms, ``lo..hi`` along x."""
    rooms: tuple[str, str]      # (the room on the lower-z side, the one on the higher-z side)
    lo: float
    hi: float

    @property
    def rect(self) -> tuple[float, float, float, float]:
        below, above = self.rooms
        return self.lo, self.hi, ROOMS[below][3], ROOMS[above][2]

    @property
    def mid(self) -> tuple[float, float]:
        x0, x1, z0, z1 = self.rect
        return (x0 + x1) / 2, (z0 + z1) / 2


def _door(below: str, above: str, x: float, width: float) -> Door:
    return Door((below, above), x - width / 2, x + width / 2)


DOORS: list[Door] = (
    [_door("north_corridor", r, room_centre(r)[0], ROOM_DOOR_WIDTH) for r in NORTH_ROOMS]
    + [_door(r, "south_corridor", room_centre(r)[0], ROOM_DOOR_WIDTH) for r in SOUTH_ROOMS]
    + [_door("reception", "north_corridor", 0.0, RECEPTION_DOOR_WIDTH),
       _door("south_corridor", "reception", 0.0, RECEPTION_DOOR_WIDTH)])
FREE_SPACE = [ROOMS[r] for r in ROOMS] + [d.rect for d in DOORS]   # the union is where one can see and walk

# -- room-local coordinates: u across the room (along x), v inwards from the door wall --------
DOOR_POSE_DEPTH = 1.0     # the robot's pose in a room: this far inside the door, facing in


def local(room: str, u: float, v: float) -> tuple[float, float]:
    """MiniWorld (x, z) of a point ``u`` m across and ``v`` m in from the door wall of a side room."""
    x0, x1, z0, z1 = ROOMS[room]
    cx = (x0 + x1) / 2
    return (cx + u, z0 + v) if room in NORTH_ROOMS else (cx + u, z1 - v)


def inward_dir(room: str) -> float:
    """MiniWorld ``dir`` looking into a side room from its door (dir vector = (cos, -sin))."""
    return -math.pi / 2 if room in NORTH_ROOMS else math.pi / 2


def _polar(room: str, bearing_deg: float, rng: float) -> tuple[float, float]:
    """A point at a bearing (degrees from straight in) and range from the room's door pose."""
    b = math.radians(bearing_deg)
    return local(room, rng * math.sin(b), DOOR_POSE_DEPTH + rng * math.cos(b))


# -- robot waypoints ----------------------------------------------------------------------------
WAYPOINTS: dict[str, tuple[float, float]] = {   # id -> (x, z): room ids (door-inside poses) + corridor points
    **{r: local(r, 0.0, DOOR_POSE_DEPTH) for r in NORTH_ROOMS + SOUTH_ROOMS},
    "reception": room_centre("reception"),
    **{f"north_corridor_{i + 1}": (room_centre(r)[0], 3.0) for i, r in enumerate(NORTH_ROOMS)},
    **{f"south_corridor_{i + 1}": (room_centre(r)[0], -4.0) for i, r in enumerate(SOUTH_ROOMS)},
}
DOOR_WAYPOINT = {r: f"{CORRIDOR_OF[r]}_{i + 1}" for rooms in (NORTH_ROOMS, SOUTH_ROOMS)   # in front of each door
                 for i, r in enumerate(rooms)}
RECEPTION_WAYPOINT = {c: f"{c}_3" for c in CORRIDORS}   # in front of reception's doors

# -- where people stand --------------------------------------------------------------------------
_DESKS_LOCAL = {   # home rooms: ((u, v) of a desk spot, (u, v) where a visitor to that desk stands)
    "open_office": [((-2.5, 2.6), (-1.8, 3.1)), ((2.5, 2.6), (1.8, 3.1)), ((-1.3, 4.4), (-2.3, 4.7)),
                    ((1.3, 4.4), (2.3, 4.7)), ((0.0, 5.0), (0.8, 5.2))],
    "lab": [((-2.3, 3.2), (-1.5, 3.7)), ((2.3, 3.2), (1.5, 3.7))],
    "design_studio": [((-2.0, 4.0), (-1.2, 4.4)), ((2.2, 2.4), (1.6, 3.0))],
    "manager_office": [((-1.8, 3.6), (-1.0, 4.0))],
    "library": [((-2.4, 4.2), (-1.6, 4.6)), ((1.8, 2.8), (1.2, 3.4))],
}
DESKS: dict[str, list[tuple[float, float]]] = {r: [local(r, *desk) for desk, _ in spots]
                                               for r, spots in _DESKS_LOCAL.items()}
VISIT_SPOTS: dict[str, list[tuple[float, float]]] = {r: [local(r, *visit) for _, visit in spots]
                                                     for r, spots in _DESKS_LOCAL.items()}
# person i's desk (room, index): open_office several, the others spread over the home rooms
DESK_ORDER = [("open_office", 0), ("lab", 0), ("open_office", 1), ("design_studio", 0), ("manager_office", 0),
              ("library", 0), ("open_office", 2), ("lab", 1), ("open_office", 3), ("design_studio", 1),
              ("library", 1), ("open_office", 4)]
# seats fanned out in front of the door pose (bearing deg, range m): everyone in view of a robot
# waiting at the door, none hiding another (adjacent bearings >= 10 degrees apart)
_FAN = [(0, 4.0), (-11, 3.4), (11, 3.4), (-22, 4.2), (22, 4.2), (-32, 3.3), (32, 3.3)]
MEETING_ROOMS = ("conference_room", "huddle_room")
LUNCH_ROOMS = ("kitchen", "lounge")
SEATS: dict[str, list[tuple[float, float]]] = {
    "conference_room": [_polar("conference_room", b, r) for b, r in _FAN],
    "huddle_room": [_polar("huddle_room", b, r) for b, r in _FAN[:5]],
    "kitchen": [_polar("kitchen", b, r) for b, r in _FAN],
    "lounge": [_polar("lounge", b, r) for b, r in _FAN],
}
RECEPTION_SPOTS = [(-2.7, 0.2), (-1.9, -1.3)]   # visitors wait here
ENTRANCE = (-3.5, -0.5)                         # the way in and out of the building (in reception)


SHARED_ROOMS = tuple(r for r in ROOMS if r not in DESKS)   # nobody's home


def all_person_spots() -> list[tuple[str, str, tuple[float, float]]]:
    """(kind, room, (x, z)) of every spot a person can stand still at."""
    out = [("desk", r, p) for r, ps in DESKS.items() for p in ps]
    out += [("visit", r, p) for r, ps in VISIT_SPOTS.items() for p in ps]
    out += [("meeting" if r in MEETING_ROOMS else "lunch", r, p) for r, ps in SEATS.items() for p in ps]
    out += [("wait", "reception", p) for p in RECEPTION_SPOTS]
    return out


# -- geometry --------------------------------------------------------------------------------------
def _inside(rect, x: float, z: float, margin: float = 0.0) -> bool:
    x0, x1, z0, z1 = rect
    return x0 - margin <= x <= x1 + margin and z0 - margin <= z <= z1 + margin


def room_of(x: float, z: float) -> str:
    """The room a point is in; a point in a door passage belongs to the nearer of its two rooms
    (the passage's middle line splits it), a point outside the building to the nearest room."""
    for room, rect in ROOMS.items():
        if _inside(rect, x, z):
            return room
    for door in DOORS:
        if _inside(door.rect, x, z):
            return door.rooms[0] if z < door.mid[1] else door.rooms[1]
    return min(ROOMS, key=lambda r: math.hypot(max(ROOMS[r][0] - x, 0, x - ROOMS[r][1]),
                                               max(ROOMS[r][2] - z, 0, z - ROOMS[r][3])))


def _clip(rect, p, q) -> tuple[float, float] | None:
    """The parameter interval [t0, t1] of segment p -> q inside rect (Liang-Barsky), or None."""
    t0, t1 = 0.0, 1.0
    for d, lo, hi, s in ((q[0] - p[0], rect[0], rect[1], p[0]), (q[1] - p[1], rect[2], rect[3], p[1])):
        if abs(d) < 1e-12:
            if s < lo or s > hi:
                return None
            continue
        a, b = (lo - s) / d, (hi - s) / d
        t0, t1 = max(t0, min(a, b)), min(t1, max(a, b))
        if t0 > t1:
            return None
    return t0, t1


def line_of_sight(p: tuple[float, float], q: tuple[float, float]) -> bool:
    """Whether the segment p -> q stays in free space (rooms and door passages), i.e. crosses no wall."""
    spans = sorted(s for s in (_clip(rect, p, q) for rect in FREE_SPACE) if s is not None)
    reached = 0.0
    for a, b in spans:
        if a > reached + 1e-9:
            return False
        reached = max(reached, b)
    return reached >= 1.0 - 1e-9


def bearing(robot: tuple[float, float, float], target: tuple[float, float]) -> float:
    """The target's angle off the camera axis (radians, positive to the left / image left)."""
    x, z, heading = robot
    off = math.atan2(-(target[1] - z), target[0] - x) - heading
    return math.atan2(math.sin(off), math.cos(off))


def in_view(robot: tuple[float, float, float], target: tuple[float, float], half_fov: float,
            max_dist: float = 7.0, min_dist: float = 0.5) -> bool:
    """In the camera's horizontal field of view, within range and in line of sight."""
    dist = math.dist(robot[:2], target)
    return (min_dist < dist < max_dist and abs(bearing(robot, target)) < half_fov
            and line_of_sight(robot[:2], target))


# -- walking paths --------------------------------------------------------------------------------
def _neighbours(room: str) -> list[tuple[str, Door]]:
    return [(d.rooms[1] if d.rooms[0] == room else d.rooms[0], d) for d in DOORS if room in d.rooms]


def door_route(a: str, b: str) -> list[tuple[str, Door]]:
    """The doors crossed going from room a to room b: [(room entered, door), ...] (shortest in doors)."""
    paths, frontier = {a: []}, [a]
    while frontier and b not in paths:
        nxt = []
        for room in frontier:
            for other, door in _neighbours(room):
                if other not in paths:
                    paths[other] = paths[room] + [(other, door)]
                    nxt.append(other)
        frontier = nxt
    return paths[b]


def _approach(room: str, door: Door) -> tuple[float, float]:
    """Where a walker stands in ``room`` just before/after crossing ``door``: the corridor's middle
    line, or 0.6 m inside a room."""
    x = (door.lo + door.hi) / 2
    x0, x1, z0, z1 = ROOMS[room]
    if room in CORRIDORS:
        return x, (z0 + z1) / 2
    return (x, z0 + 0.6) if door.mid[1] < z0 else (x, z1 - 0.6)


def walk_path(a: tuple[float, float], b: tuple[float, float]) -> list[tuple[str, list[tuple[float, float]]]]:
    """The way a person walks from a to b, split by room: [(room, polyline), ...]; consecutive
    polylines share their end point (a door passage's middle)."""
    room = room_of(*a)
    legs, current = [], [a]
    for entered, door in door_route(room, room_of(*b)):
        current += [_approach(room, door), door.mid]
        legs.append((room, current))
        room, current = entered, [door.mid, _approach(entered, door)]
    legs.append((room, current + [b]))
    return legs


def path_length(points: list[tuple[float, float]]) -> float:
    return sum(math.dist(p, q) for p, q in zip(points, points[1:]))


def point_along(points: list[tuple[float, float]], fraction: float) -> tuple[float, float]:
    """The point a fraction (0..1) of the way along a polyline."""
    remaining = max(0.0, min(1.0, fraction)) * path_length(points)
    for p, q in zip(points, points[1:]):
        step = math.dist(p, q)
        if remaining <= step and step > 0:
            f = remaining / step
            return p[0] + (q[0] - p[0]) * f, p[1] + (q[1] - p[1]) * f
        remaining -= step
    return points[-1]


# -- the MiniWorld scene --------------------------------------------------------------------------
_TEXTURES = {   # room -> (wall, floor): rooms look different from each other
    "kitchen": ("stucco", "marble"), "open_office": ("drywall", "floor_tiles_bw"),
    "conference_room": ("wood", "wood_planks"), "lab": ("white", "concrete"),
    "library": ("brick_wall", "wood"), "lounge": ("stucco", "wood_planks"),
    "design_studio": ("white", "concrete_tiles"), "huddle_room": ("wood", "floor_tiles_bw"),
    "workshop": ("cinder_blocks", "concrete"), "manager_office": ("drywall", "wood"),
    "reception": ("marble", "marble"), "north_corridor": ("concrete", "concrete_tiles"),
    "south_corridor": ("concrete", "concrete_tiles"),
}
CEILING_TEXTURE = "concrete_tiles"
SHIRTS = [(40, 40, 200), (200, 80, 40), (40, 160, 40), (150, 60, 150), (30, 140, 200), (20, 90, 120),
          (120, 120, 30), (90, 30, 90), (170, 170, 170), (30, 30, 30), (60, 110, 200), (200, 140, 90),
          (100, 60, 20), (0, 120, 90), (160, 40, 110)]
TROUSERS = [(60, 50, 40), (40, 40, 40), (120, 80, 30), (150, 150, 150), (90, 60, 30), (30, 30, 90)]
PARKED = (100.0, 100.0)   # where people out of the building are kept (far outside)


def daily_outfits(people: int, days: int, seed: int) -> list[list[Outfit]]:
    """What each person wears each day (``[person][day]``): a shirt from ``SHIRTS``, trousers,
    sometimes stripes or a cap, drawn anew every day (people do not dress alike all week), so
    body appearance is evidence of identity within a day only.  Day 0 is each person's own
    shirt of the palette (as every earlier version dressed them)."""
    rng = np.random.default_rng([seed, 7919])
    out = []
    for i in range(people):
        week = [Outfit(SHIRTS[i % len(SHIRTS)])]
        for _ in range(1, days):
            shirt = SHIRTS[int(rng.integers(len(SHIRTS)))]
            stripes = SHIRTS[int(rng.integers(len(SHIRTS)))] if rng.random() < 0.3 else None
            week.append(Outfit(shirt, TROUSERS[int(rng.integers(len(TROUSERS)))],
                               stripes if stripes != shirt else None,
                               TROUSERS[int(rng.integers(len(TROUSERS)))] if rng.random() < 0.2 else None))
        out.append(week)
    return out


def furniture() -> list[tuple[str, tuple[float, float], float]]:
    """(mesh, (x, z), dir) of the furniture: a desk behind every desk spot with a chair beside it,
    a table with two chairs in the meeting and lunch rooms, a reception desk."""
    out = []
    for room, desks in DESKS.items():
        px, pz = WAYPOINTS[room]
        for (x, z), (vx, vz) in zip(desks, VISIT_SPOTS[room]):
            out_x, out_z = (x - px), (z - pz)
            n = math.hypot(out_x, out_z)
            ux, uz = out_x / n, out_z / n                           # away from the door pose
            facing = math.atan2(-uz, ux)
            out.append(("office_desk", (x + 0.6 * ux, z + 0.6 * uz), facing + math.pi / 2))
            sx, sz = x - vx, z - vz                                 # the chair on the side away from visitors
            s = math.hypot(sx, sz)
            out.append(("office_chair", (x + 0.45 * sx / s + 0.3 * ux, z + 0.45 * sz / s + 0.3 * uz), facing))
    for room in SEATS:
        out.append(("office_desk", local(room, 0.0, 2.9), 0.0))
        out.append(("office_chair", local(room, -0.9, 2.6), inward_dir(room)))
        out.append(("office_chair", local(room, 0.9, 2.6), inward_dir(room)))
    out.append(("office_desk", (2.8, -0.1), 0.0))
    out.append(("office_chair", (2.8, 0.45), -math.pi / 2))
    return out


def _rgba_copy(src: Path, dst: Path) -> Path:
    """An RGBA copy of a PNG: pyglet converts RGB textures pixel by pixel in Python (~0.5 s per
    512 x 512), RGBA ones load in ~10 ms."""
    image = cv2.imread(str(src), cv2.IMREAD_UNCHANGED)
    cv2.imwrite(str(dst), image if image.ndim == 3 and image.shape[2] == 4 else cv2.cvtColor(image, cv2.COLOR_BGR2BGRA))
    return dst


class BuildingWorld(MiniWorldEnv):
    """The building's rooms and door passages, furniture, small objects (moved by the episode
    between days) and people billboards (kept far away when out of the building).  The scene
    is built once, in the constructor (every position is given: no seeded placement)."""

    def __init__(self, people: list[tuple[str, Path]], seed: int = 0, width: int = 640, height: int = 480,
                 objects: list[tuple[str, str, str]] = (), object_size: float = 0.5, days: int = 1):
        from miniworld.utils import get_file_path
        self._objects_spec = list(objects)   # (kind, colour, room)
        self._object_size = object_size
        self._seed = seed
        self._tex_tmp = tempfile.TemporaryDirectory(prefix="em_building_tex_")   # removed with the world
        tex_dir = Path(self._tex_tmp.name)
        self._textures = {}
        for name in sorted({t for pair in _TEXTURES.values() for t in pair} | {CEILING_TEXTURE}):
            self._textures[name] = f"em_rgba_{name}"
            Texture.tex_paths[self._textures[name]] = [str(_rgba_copy(
                Path(get_file_path("textures", f"{name}_1", "png")), tex_dir / f"{name}.png"))]
        self.outfits = daily_outfits(len(people), days, seed)
        self._people_spec = []          # (name, portrait, texture name per day)
        for i, (name, portrait) in enumerate(people):
            tex_names = []
            for day, outfit in enumerate(self.outfits[i]):
                tex_names.append(f"em_building_person_{i}_{portrait.stem}_day{day}")
                body = person_texture(portrait, outfit, tex_dir, tag=f"_day{day}")
                Texture.tex_paths[tex_names[-1]] = [str(_rgba_copy(body, body))]
            self._people_spec.append((name, portrait, tex_names))
        self.people: list[SimPerson] = []
        self.objects: list[tuple[str, str, Entity]] = []
        super().__init__(obs_width=width, obs_height=height, max_episode_steps=10 ** 9)

    def _gen_world(self):
        rooms = {name: self.add_rect_room(min_x=x0, max_x=x1, min_z=z0, max_z=z1,
                                          wall_tex=self._textures[_TEXTURES[name][0]],
                                          floor_tex=self._textures[_TEXTURES[name][1]],
                                          ceil_tex=self._textures[CEILING_TEXTURE])
                 for name, (x0, x1, z0, z1) in ROOMS.items()}
        for door in DOORS:
            self.connect_rooms(rooms[door.rooms[0]], rooms[door.rooms[1]], min_x=door.lo, max_x=door.hi)
        for mesh, (x, z), direction in furniture():
            self.place_entity(MeshEnt(mesh_name=mesh, height=0.8 if mesh == "office_desk" else 0.9),
                              pos=[x, 0, z], dir=direction)
        self.objects = []
        for i, (kind, colour, _room) in enumerate(self._objects_spec):
            size = self._object_size
            ent = Box(color=colour, size=size) if kind == "box" else MeshEnt(mesh_name=kind, height=size, static=False)
            self.place_entity(ent, pos=[PARKED[0] - 3 * i, 0, PARKED[1] - 5], dir=0.0)   # placed per day
            self.objects.append((kind, colour, ent))
        self.people = []
        for i, (name, portrait, tex_names) in enumerate(self._people_spec):
            ent = PersonBillboard(tex_names[0])
            self.place_entity(ent, pos=[PARKED[0] + 3 * i, 0, PARKED[1]], dir=0.0)
            self.people.append(SimPerson(name, portrait, ent))
        x, z = WAYPOINTS["reception"]
        self.place_agent(pos=[x, 0, z], dir=math.pi / 2)

    def dress(self, day: int) -> None:
        """Everyone puts on the day's outfit (``daily_outfits``; the last one beyond its days)."""
        for person, (_, _, tex_names) in zip(self.people, self._people_spec):
            person.entity.tex = Texture.get(tex_names[min(day, len(tex_names) - 1)])
