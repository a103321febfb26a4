"""Floor plans of the simulated offices: rooms, the doors between them, where targets are hidden
and where episodes start. Plain Python (no rendering): ``sim.world`` builds the MiniWorld scene
of a plan, ``sim.exploration`` its true occupancy map.

Coordinates are MiniWorld's floor (x, z); the map frame is (x, -z). Rooms are axis-aligned
rectangles with a 1 m wall gap between neighbours, crossed only through a door.

Three layouts, so an exploration figure is not one building's:
* ``office``: three rooms north of an east-west corridor, the lobby south of it (the world of
  the people episodes too);
* ``wing``: four rooms off a north-south corridor, two on each side, the lobby at its south end;
* ``hall``: no corridor: an open lobby hall with the rooms opening straight onto it, and a
  storage room south of it where second visits start.

Compass words follow MiniWorld's floor (north = +z, i.e. map -y): ``corridor_north`` is at the
corridor's +z end.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

Rect = tuple[float, float, float, float]       # (min_x, max_x, min_z, max_z)


@dataclass(frozen=True)
class Door:
    """A passage through the wall gap between two rooms, ``lo..hi`` along the shared wall."""
    rooms: tuple[str, str]
    lo: float
    hi: float


@dataclass(frozen=True)
class FloorPlan:
    name: str
    rooms: dict[str, Rect]
    doors: tuple[Door, ...]
    hub: str                                  # the corridor or hall every room opens onto
    entrance: str                             # where first visits start (and a distractor's room)
    target_rooms: tuple[str, ...]             # where a task's target is hidden
    starts: dict[str, tuple[float, float, float]]   # name -> map-frame (x, y, yaw)
    first_start: str                          # the benchmark's first visits start here
    second_start: str                         # ... and its second visits here
    training_start: str                       # learn-rules' training episodes: a start no scored episode uses
    furnished: tuple[str, ...] = ()           # rooms with a desk and a chair
    marble: tuple[str, ...] = ("kitchen",)    # rooms with a marble floor (the others tiles)

    def __post_init__(self):
        for name in (self.hub, self.entrance, *self.target_rooms, *self.furnished):
            if name not in self.rooms:
                raise ValueError(f"floor plan {self.name}: unknown room {name!r}")
        for door in self.doors:
            self.door_rect(door)                  # raises for rooms that do not face each other
        if self.training_start in (self.first_start, self.second_start):
            raise ValueError(f"floor plan {self.name}: training episodes start where scored ones do")
        for start in (self.first_start, self.second_start, self.training_start):
            if start not in self.starts:
                raise ValueError(f"floor plan {self.name}: unknown start {start!r}")

    def centre(self, room: str) -> tuple[float, float]:
        x0, x1, z0, z1 = self.rooms[room]
        return (x0 + x1) / 2, (z0 + z1) / 2

    def room_of(self, x: float, z: float) -> str:
        """The room at a MiniWorld floor point (the hub between rooms: door passages, walls)."""
        for name, (x0, x1, z0, z1) in self.rooms.items():
            if x0 <= x <= x1 and z0 <= z <= z1:
                return name
        return self.hub

    def place_at(self, x: float, y: float) -> str:
        """The room at a map position: the names an operator writes on a map."""
        return self.room_of(x, -y)

    def door_rect(self, door: Door) -> Rect:
        """The passage's free rectangle, between the two rooms' facing walls."""
        a, b = (self.rooms[r] for r in door.rooms)
        if self.door_along_x(door):                          # one above the other
            lo_z, hi_z = (a[3], b[2]) if a[3] <= b[2] else (b[3], a[2])
            return door.lo, door.hi, lo_z, hi_z
        if a[1] <= b[0] or b[1] <= a[0]:                     # side by side: the door runs along z
            lo_x, hi_x = (a[1], b[0]) if a[1] <= b[0] else (b[1], a[0])
            return lo_x, hi_x, door.lo, door.hi
        raise ValueError(f"floor plan {self.name}: rooms {door.rooms} overlap")

    def door_along_x(self, door: Door) -> bool:
        """The door's rooms lie one above the other (in z), so it runs along x."""
        a, b = (self.rooms[r] for r in door.rooms)
        return a[3] <= b[2] or b[3] <= a[2]

    def near_door(self, x: float, z: float, margin: float) -> bool:
        """A floor point within ``margin`` of a door passage (an object there could close it)."""
        for x0, x1, z0, z1 in (self.door_rect(d) for d in self.doors):
            if math.hypot(max(x0 - x, 0.0, x - x1), max(z0 - z, 0.0, z - z1)) < margin:
                return True
        return False

    def free_rects(self) -> list[Rect]:
        """Where one can walk and see: the rooms and the door passages."""
        return list(self.rooms.values()) + [self.door_rect(d) for d in self.doors]


def _start(plan_rooms: dict[str, Rect], room: str, yaw: float) -> tuple[float, float, float]:
    x0, x1, z0, z1 = plan_rooms[room]
    return (x0 + x1) / 2, -(z0 + z1) / 2, yaw


_OFFICE_ROOMS = {
    "kitchen": (-9.0, -3.5, 1.5, 7.0),
    "office": (-2.5, 3.0, 1.5, 7.0),
    "meeting_room": (4.0, 9.5, 1.5, 7.0),
    "corridor": (-9.0, 9.5, -1.5, 0.5),
    "lobby": (-2.5, 3.0, -7.0, -2.5),
}
OFFICE = FloorPlan(
    "office", _OFFICE_ROOMS,
    (Door(("corridor", "kitchen"), -7.0, -5.5), Door(("corridor", "office"), -0.5, 1.0),
     Door(("corridor", "meeting_room"), 6.0, 7.5), Door(("corridor", "lobby"), -0.5, 1.0)),
    hub="corridor", entrance="lobby", target_rooms=("kitchen", "office", "meeting_room"),
    starts={"lobby": _start(_OFFICE_ROOMS, "lobby", math.pi / 2), "corridor_west": (-8.0, 0.5, 0.0),
            "corridor_east": (8.5, 0.5, math.pi), "corridor_centre": (0.25, 0.5, 0.0)},
    first_start="lobby", second_start="corridor_west", training_start="corridor_east",
    furnished=("office", "meeting_room"))

_WING_ROOMS = {
    "kitchen": (-7.0, -2.0, 4.0, 10.0),
    "office": (2.0, 8.0, 4.0, 10.0),
    "meeting_room": (-7.0, -2.0, -4.0, 2.0),
    "lab": (2.0, 8.0, -4.0, 2.0),
    "corridor": (-1.0, 1.0, -6.0, 10.0),
    "lobby": (-3.0, 3.0, -12.0, -7.0),
}
WING = FloorPlan(
    "wing", _WING_ROOMS,
    (Door(("kitchen", "corridor"), 6.0, 7.5), Door(("corridor", "office"), 5.0, 6.5),
     Door(("meeting_room", "corridor"), -2.0, -0.5), Door(("corridor", "lab"), 0.0, 1.5),
     Door(("lobby", "corridor"), -0.75, 0.75)),
    hub="corridor", entrance="lobby", target_rooms=("kitchen", "office", "meeting_room", "lab"),
    starts={"lobby": _start(_WING_ROOMS, "lobby", -math.pi / 2), "corridor_north": (0.0, -9.0, math.pi / 2),
            "corridor_centre": (0.0, -2.0, -math.pi / 2)},
    first_start="lobby", second_start="corridor_north", training_start="corridor_centre",
    furnished=("office", "meeting_room", "lab"))

_HALL_ROOMS = {
    "lobby": (-4.0, 4.0, -3.0, 3.0),
    "kitchen": (-9.0, -1.0, 4.0, 10.0),
    "office": (0.0, 8.0, 4.0, 10.0),
    "meeting_room": (-10.0, -5.0, -3.0, 3.0),
    "storage_room": (-4.0, 4.0, -9.0, -4.0),
}
HALL = FloorPlan(
    "hall", _HALL_ROOMS,
    (Door(("lobby", "kitchen"), -3.5, -2.0), Door(("lobby", "office"), 1.5, 3.0),
     Door(("meeting_room", "lobby"), -0.75, 0.75), Door(("storage_room", "lobby"), -0.75, 0.75)),
    hub="lobby", entrance="lobby", target_rooms=("kitchen", "office", "meeting_room"),
    starts={"lobby": _start(_HALL_ROOMS, "lobby", 0.0), "storage_room": _start(_HALL_ROOMS, "storage_room", -math.pi / 2),
            "meeting_room": _start(_HALL_ROOMS, "meeting_room", 0.0)},
    first_start="lobby", second_start="storage_room", training_start="meeting_room", furnished=("office", "meeting_room"))

FLOOR_PLANS: dict[str, FloorPlan] = {p.name: p for p in (OFFICE, WING, HALL)}
ALL_ROOMS: tuple[str, ...] = tuple(dict.fromkeys(r for p in FLOOR_PLANS.values() for r in p.rooms))


def floor_plan(name: str) -> FloorPlan:
    try:
        return FLOOR_PLANS[name]
    except KeyError:
        raise ValueError(f"unknown floor plan {name!r} ({' | '.join(FLOOR_PLANS)})") from None
