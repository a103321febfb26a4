"""Seeded daily schedules of the building's people: where each one is at every moment.

Regular people have a home desk (several in the open office, the others in the lab, design
studio, manager's office and library).  Each day some arrive late (10:00-11:30), some are absent
(never everyone), meetings (2-5 people, 30-60 min) take the conference or huddle room (one of
them while the robot waits there), two lunch groups sit in the kitchen (~12:00) and the lounge
(~12:45), people drop by a colleague's desk (5-15 min), and everyone walks between places along
the corridors at WALK_SPEED (a walk is split into one stay per room it crosses).  Visitors come
on one day only: they wait in reception, then meet their host(s) in the conference room.

Pure Python/numpy; times are unix seconds, positions MiniWorld (x, z) (see ``sim.building``).
"""
from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .building import (DESK_ORDER, DESKS, ENTRANCE, LUNCH_ROOMS, MEETING_ROOMS, RECEPTION_SPOTS, SEATS, VISIT_SPOTS,
                       path_length, point_along, walk_path)

log = logging.getLogger(__name__)

WALK_SPEED = 1.2          # m/s
REGULAR_NAMES = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "kevin",
                 "laura")
VISITOR_NAMES = ("victor", "wendy", "xavier", "yvonne", "zack")
ABSENT_P, LATE_P, VISIT_P, SWITCH_LUNCH_P = 0.10, 0.15, 0.4, 0.2
LUNCH_START = {"kitchen": 12.0, "lounge": 12.75}     # hours of the day
DESK_MIN_H = 5 / 60       # a gap shorter than this is not worth going back to the desk
MARGIN_H = 0.2            # nothing planned this close to someone's arrival or departure
KINDS = ("desk", "meeting", "lunch", "visit", "walk", "wait")


@dataclass
class PersonInfo:
    name: str
    visitor: bool
    home: str = ""            # room id of the desk ("" for visitors)
    desk: int = -1            # index into building.DESKS[home]
    lunch_room: str = ""      # the lunch group they usually join

    @property
    def desk_xz(self) -> Optional[tuple[float, float]]:
        return DESKS[self.home][self.desk] if self.home else None


@dataclass
class Stay:
    """Where a person was from ``start`` to ``end`` (unix s): standing at ``xz`` (MiniWorld), or
    for a walk along ``path`` (MiniWorld polyline, at constant speed) within ``room``."""
    person: str
    day: int
    room: str
    start: float
    end: float
    kind: str
    xz: Optional[tuple[float, float]] = None
    path: list[tuple[float, float]] = field(default_factory=list)

    def xz_at(self, t: float) -> tuple[float, float]:
        if self.xz is not None:
            return self.xz
        return point_along(self.path, (t - self.start) / max(self.end - self.start, 1e-9))

    def to_dict(self) -> dict:
        """The ground truth's format (map frame: (x, -z)); walks also carry their ``path``."""
        out = {"person": self.person, "day": self.day, "room": self.room, "start": round(self.start, 3),
               "end": round(self.end, 3), "kind": self.kind,
               "position": None if self.xz is None else [round(self.xz[0], 3), round(-self.xz[1], 3)]}
        if self.path:
            out["path"] = [[round(x, 3), round(-z, 3)] for x, z in self.path]
        return out


@dataclass
class Schedule:
    people: dict[str, PersonInfo]
    stays: list[Stay]                      # per person in time order, people one after the other
    _index: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self):
        for stay in self.stays:
            self._index.setdefault(stay.person, []).append(stay)
        for name, stays in self._index.items():
            stays.sort(key=lambda s: s.start)
            self._index[name] = (stays, [s.start for s in stays])

    def stay_at(self, person: str, t: float) -> Optional[Stay]:
        stays, starts = self._index.get(person, ([], []))
        i = bisect.bisect_right(starts, t) - 1
        return stays[i] if i >= 0 and stays[i].start <= t < stays[i].end else None

    def position_at(self, person: str, t: float) -> Optional[tuple[float, float, str]]:
        """(x, z, room) of the person at time t, or None when they are not in the building."""
        stay = self.stay_at(person, t)
        if stay is None:
            return None
        x, z = stay.xz_at(t)
        return x, z, stay.room


@dataclass
class _Event:
    start: float              # hours of the day
    end: float
    room: str
    kind: str
    xz: tuple[float, float]


class _Day:
    """One day's plan: who is in, when, and their fixed events (hours of the day)."""

    def __init__(self, rng: np.random.Generator, present: list[PersonInfo]):
        self.rng = rng
        self.present = present
        self.arrive: dict[str, float] = {}
        self.leave: dict[str, float] = {}
        self.events: dict[str, list[_Event]] = {p.name: [] for p in present}
        self.busy: dict[str, list[tuple[float, float]]] = {p.name: [] for p in present}
        self.rooms_busy: dict[str, list[tuple[float, float]]] = {}
        self.meetings = 0

    def free(self, name: str, a: float, b: float, buffer: float = 0.05) -> bool:
        return (self.arrive[name] + MARGIN_H <= a and b <= self.leave[name] - MARGIN_H
                and all(b + buffer <= s or e + buffer <= a for s, e in self.busy[name]))

    def add(self, name: str, ev: _Event) -> None:
        self.events[name].append(ev)
        self.busy[name].append((ev.start, ev.end))

    def room_free(self, room: str, a: float, b: float) -> bool:
        return all(b + 0.05 <= s or e + 0.05 <= a for s, e in self.rooms_busy.get(room, []))

    def meeting(self, room: str, a: float, b: float, size: int, required: list[str] = ()) -> bool:
        """Book a meeting of ``size`` people (``required`` among them) if the room and enough people are free."""
        if not self.room_free(room, a, b):
            return False
        others = [p.name for p in self.present if p.name not in required and not p.visitor and self.free(p.name, a, b)]
        size = min(size, len(SEATS[room]), len(others) + len(required))
        if size < 2 or not all(self.free(n, a, b) for n in required):
            return False
        who = list(required) + [others[i] for i in self.rng.permutation(len(others))[:size - len(required)]]
        seats = self.rng.permutation(len(SEATS[room]))[:len(who)]
        for name, seat in zip(who, seats):
            jitter = float(self.rng.uniform(-2, 2)) / 60
            self.add(name, _Event(a + jitter, b + jitter, room, "meeting", SEATS[room][seat]))
        self.rooms_busy.setdefault(room, []).append((a, b))
        self.meetings += 1
        return True


def _lunches(day: _Day) -> None:
    rng = day.rng
    groups: dict[str, list[str]] = {room: [] for room in LUNCH_ROOMS}
    for p in day.present:
        if p.visitor:
            continue
        room = p.lunch_room if rng.random() >= SWITCH_LUNCH_P else [r for r in LUNCH_ROOMS if r != p.lunch_room][0]
        groups[room].append(p.name)
    for room, other in (LUNCH_ROOMS, LUNCH_ROOMS[::-1]):
        while len(groups[room]) > len(SEATS[room]):
            groups[other].append(groups[room].pop())
    if not groups[LUNCH_ROOMS[0]] and len(groups[LUNCH_ROOMS[1]]) > 1:   # the kitchen is never empty at noon
        groups[LUNCH_ROOMS[0]].append(groups[LUNCH_ROOMS[1]].pop())
    for room, names in groups.items():
        start = LUNCH_START[room] + float(rng.uniform(-3, 3)) / 60
        length = float(rng.uniform(30, 45)) / 60
        seats = rng.permutation(len(SEATS[room]))
        for name, seat in zip(names, seats):
            a, b = start + float(rng.uniform(-2, 3)) / 60, start + length + float(rng.uniform(-2, 2)) / 60
            if day.free(name, a, b, buffer=0.0):
                day.add(name, _Event(a, b, room, "lunch", SEATS[room][seat]))


def _visitor(day: _Day, visitor: PersonInfo, spot: tuple[float, float]) -> bool:
    """The visitor arrives, waits in reception, then meets 1-2 hosts in the conference room."""
    rng = day.rng
    for _ in range(40):
        arrive = float(rng.uniform(9.75, 10.75) if rng.random() < 0.6 else rng.uniform(14.75, 15.5))
        start = arrive + float(rng.uniform(5, 12)) / 60
        end = start + float(rng.uniform(30, 60)) / 60
        day.arrive[visitor.name], day.leave[visitor.name] = arrive - MARGIN_H, end + MARGIN_H
        if day.meeting("conference_room", start, end, 1 + int(rng.integers(1, 3)), required=[visitor.name]):
            day.arrive[visitor.name], day.leave[visitor.name] = arrive, end
            day.add(visitor.name, _Event(arrive, start, "reception", "wait", spot))
            return True
    day.present.remove(visitor)
    log.warning("no time found for visitor %s", visitor.name)
    return False


def _extra_meetings(day: _Day, count: int) -> None:
    rng = day.rng
    for _ in range(count):
        for _ in range(30):
            length = float(rng.choice([0.5, 0.75, 1.0]))
            slots = np.concatenate([np.arange(9.25, 11.76 - length, 0.25), np.arange(13.75, 17.01 - length, 0.25)])
            start = float(rng.choice(slots))
            if day.meeting(str(rng.choice(MEETING_ROOMS)), start, start + length, int(rng.integers(2, 6))):
                break


def _visits(day: _Day, people: dict[str, PersonInfo]) -> None:
    rng = day.rng
    regulars = [p.name for p in day.present if not p.visitor]
    for name in [regulars[i] for i in rng.permutation(len(regulars))]:
        hosts = [h for h in regulars if h != name]
        if not hosts or rng.random() >= VISIT_P:
            continue
        host = people[hosts[int(rng.integers(len(hosts)))]]
        length = float(rng.uniform(5, 15)) / 60
        lo = max(day.arrive[name], day.arrive[host.name]) + MARGIN_H
        hi = min(day.leave[name], day.leave[host.name]) - MARGIN_H - length
        for _ in range(20):
            if hi <= lo:
                break
            a = float(rng.uniform(lo, hi))
            if day.free(name, a, a + length) and day.free(host.name, a, a + length):
                day.add(name, _Event(a, a + length, host.home, "visit", VISIT_SPOTS[host.home][host.desk]))
                day.busy[host.name].append((a, a + length))        # the host stays at the desk meanwhile
                break


def _walk(person: str, day: int, a: tuple[float, float], b: tuple[float, float], start: float) -> list[Stay]:
    """The walk from a to b starting at ``start`` (unix s): one stay per room crossed."""
    out, t = [], start
    for room, points in walk_path(a, b):
        length = path_length(points)
        if length < 1e-6:
            continue
        out.append(Stay(person, day, room, t, t + length / WALK_SPEED, "walk", None, points))
        t += length / WALK_SPEED
    return out


def _walk_time(a: tuple[float, float], b: tuple[float, float]) -> float:
    return sum(path_length(points) for _, points in walk_path(a, b)) / WALK_SPEED


def _stays(info: PersonInfo, day: int, day_start: float, arrive: float, leave: float,
           events: list[_Event]) -> list[Stay]:
    """The person's day as contiguous stays: desk time fills the gaps between fixed events (unless
    too short: then they go straight on), walks between places (taken from desk time, or making
    them a little late after a fixed event)."""
    seq: list[_Event] = []
    t = arrive
    for ev in sorted(events, key=lambda e: e.start):
        if info.home and ev.start - t >= DESK_MIN_H:
            seq.append(_Event(t, ev.start, info.home, "desk", info.desk_xz))
        seq.append(_Event(t if ev.start - t < DESK_MIN_H else ev.start, ev.end, ev.room, ev.kind, ev.xz))
        t = ev.end
    if info.home and leave - t >= DESK_MIN_H:
        seq.append(_Event(t, leave, info.home, "desk", info.desk_xz))
    if not seq:
        return []
    places = [Stay(info.name, day, ev.room, day_start + ev.start * 3600, day_start + ev.end * 3600, ev.kind, ev.xz)
              for ev in seq]
    out: list[Stay] = []
    first = places[0]
    w = _walk_time(ENTRANCE, first.xz)
    out += _walk(info.name, day, ENTRANCE, first.xz, first.start)
    first.start += w
    for here, there in zip(places, places[1:]):
        if here.xz == there.xz:
            out.append(here)
            continue
        w = _walk_time(here.xz, there.xz)
        if here.kind == "desk":
            here.end -= w
            out += [here] + _walk(info.name, day, here.xz, there.xz, here.end)
        else:
            out += [here] + _walk(info.name, day, here.xz, there.xz, here.end)
            there.start = here.end + w
    last = places[-1]
    w = _walk_time(last.xz, ENTRANCE)
    if last.kind == "desk":
        last.end -= w
    out += [last] + _walk(info.name, day, last.xz, ENTRANCE, last.end)
    return out


def make_people(people: int = 8, visitors: int = 1) -> dict[str, PersonInfo]:
    if not 1 <= people <= len(REGULAR_NAMES) or not 0 <= visitors <= len(VISITOR_NAMES):
        raise ValueError(f"people: 1..{len(REGULAR_NAMES)}, visitors: 0..{len(VISITOR_NAMES)}")
    out = {}
    for i in range(people):
        home, desk = DESK_ORDER[i]
        out[REGULAR_NAMES[i]] = PersonInfo(REGULAR_NAMES[i], False, home, desk, LUNCH_ROOMS[i % 2])
    for name in VISITOR_NAMES[:visitors]:
        out[name] = PersonInfo(name, True)
    return out


def make_schedule(day_starts: list[float], people: int = 8, visitors: int = 1, seed: int = 0,
                  waits: tuple[tuple[str, float, float], ...] = ()) -> Schedule:
    """Everyone's stays over the days beginning at ``day_starts`` (unix s of 00:00).  ``waits``:
    (room, start hour, minutes) when the robot waits in a room; a meeting is held in each waited-in
    meeting room then."""
    rng = np.random.default_rng([seed, 101])
    infos = make_people(people, visitors)
    regulars = [p for p in infos.values() if not p.visitor]
    guests = [p for p in infos.values() if p.visitor]
    days = len(day_starts)
    visitor_day = {g.name: int(d) for g, d in zip(guests, np.resize(rng.permutation(days), len(guests)))} \
        if days else {}
    stays: list[Stay] = []
    for day, day_start in enumerate(day_starts):
        present = [p for p in regulars if day == 0 or rng.random() >= ABSENT_P]
        if not present:
            present = [regulars[int(rng.integers(len(regulars)))]]
        plan = _Day(rng, present + [g for g in guests if visitor_day[g.name] == day])
        for p in present:
            late = rng.random() < LATE_P
            plan.arrive[p.name] = float(rng.uniform(10.0, 11.5) if late else np.clip(rng.normal(8.6, 0.25), 8.0, 9.3))
            plan.leave[p.name] = float(rng.uniform(17.0, 18.0))
        _lunches(plan)
        for room, hour, minutes in waits:
            if room in MEETING_ROOMS:
                for _ in range(20):
                    start = hour - float(rng.uniform(0, 5)) / 60
                    end = max(start + float(rng.uniform(0.5, 1.0)), hour + (minutes + 3) / 60)
                    if plan.meeting(room, start, end, int(rng.integers(2, 6))):
                        break
                else:
                    log.warning("day %d: nobody free for a meeting in the %s at %.2f h", day, room, hour)
        for k, guest in enumerate(g for g in guests if visitor_day[g.name] == day):
            _visitor(plan, guest, RECEPTION_SPOTS[k % len(RECEPTION_SPOTS)])
        _extra_meetings(plan, max(0, int(rng.integers(1, 4)) - plan.meetings))
        _visits(plan, infos)
        for p in plan.present:
            stays += _stays(p, day, day_start, plan.arrive[p.name], plan.leave[p.name], plan.events[p.name])
    return Schedule(infos, stays)
