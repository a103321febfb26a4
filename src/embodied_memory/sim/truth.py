"""What the robot observed of people in a simulated episode: the answers of benchmark v2.

Computed from a ``GroundTruth`` (sim/episode.py, spec v2) only, never from the system under
test.  A *sighting* is a person named in a frame's ``visible`` list; its room and map position
come from the frame's ``seen`` entry (old small-world truth without positions: the person's
spot in that room, ``truth.positions``).  Calendar days are local dates in the time zone the
questions are asked in (``calendar_windows``), so a day here need not be a simulated day.

Observed presence: for each *stay* of a person in a room (``truth.stays``, where the person
really was), the time from the first to the last sighting of them in that room during the stay,
one interval per local day.  A sighting that no stay of the person in that room covers (a walk
labelled with another room), and every sighting of an old truth without stays, belongs to a
derived stay: a contiguous run of sightings of the person in one room on one day, broken when
they are seen elsewhere or not seen for ``RUN_GAP_S``.

What really happened (simulated stays, not what was seen) is there too, for judging whether a
question is fair: who was in a room while the robot was in it (``present_in``), whose stays
overlapped in a room while the robot was there (``true_companions``), who came in at all on a
day (``present_on``).  These return None for an old truth without stays.

Habits use the simulator's facts, not names: a usual workplace is never a room the truth marks
``shared`` (meeting rooms, kitchen, lounge, reception, corridors), and lunch rooms are the rooms
of the ``lunch`` stays.  Only an old truth without rooms or stays (small-world files with frames
only) falls back to the small world's constants ``FALLBACK_NOT_WORKPLACES`` / ``FALLBACK_LUNCH_ROOMS``.
"""
from __future__ import annotations

import bisect
import datetime as dt
import logging
import statistics
from dataclasses import dataclass, field
from typing import Any, Optional

from ..calendar_windows import LUNCH_MINUTES, TimeZone, as_zone, day_window, local_date

log = logging.getLogger(__name__)

LUNCH_WINDOW_MIN = LUNCH_MINUTES               # local clock, minutes after midnight, both ends included
# the small world's rooms (sim/world.py), used only for an old truth without rooms / stays
FALLBACK_LUNCH_ROOMS = ("kitchen",)
FALLBACK_NOT_WORKPLACES = frozenset(("kitchen", "lobby", "corridor"))
RUN_GAP_S = 30 * 60                            # derived stays: a longer gap between sightings ends the run


@dataclass(frozen=True)
class Sighting:
    """One frame in which ``person`` was in view."""
    person: str
    t: float
    day: dt.date                               # local date
    room: str                                  # the person's room
    position: Optional[tuple[float, float]]    # map frame; None when the truth has none
    frame: int                                 # index into truth.frames


@dataclass(frozen=True)
class Stay:
    """Where a person really was (simulated), or a run of sightings (``kind`` "run", derived)."""
    person: str
    room: str
    start: float
    end: float
    kind: str                                  # desk | meeting | lunch | visit | walk | wait | run
    position: Optional[tuple[float, float]] = None


@dataclass(frozen=True)
class Interval:
    """Observed presence: first..last sighting of ``person`` in ``room`` during one stay, on one local day."""
    person: str
    room: str
    day: dt.date
    start: float
    end: float
    kind: str                                  # the stay's kind
    sightings: int

    @property
    def minutes(self) -> float:
        return (self.end - self.start) / 60.0


@dataclass(frozen=True)
class CoSighting:
    """Two people in view in the same frame and in the same room."""
    t: float
    day: dt.date
    room: str
    pair: tuple[str, str]                      # sorted names


@dataclass(frozen=True)
class Habit:
    """A person's routine over all observed days.  ``place``: the room (not a shared one) they
    were seen in on most days, ties broken by sightings, then by room id ("" if none);
    ``lunch_minutes``: median over days of the first sighting in a lunch room within
    LUNCH_WINDOW_MIN, local minutes after midnight (None if never)."""
    person: str
    place: str
    place_days: int
    place_sightings: int
    lunch_minutes: Optional[float]
    lunch_days: int


@dataclass
class ObservedTruth:
    """Everything the questions of benchmark v2 are answered from (all days local dates in ``zone``)."""
    zone: dt.tzinfo
    days: list[dt.date]                                    # days with frames (the robot was active)
    rooms: list[str]                                       # room ids (truth.rooms, else every room in frames)
    labels: dict[str, str]                                 # room id -> label
    stays: list[Stay]
    stays_simulated: bool                                  # False: old truth, stays derived from sightings
    sightings: dict[str, list[Sighting]]                   # person -> time-ordered sightings
    intervals: list[Interval]
    durations: dict[tuple[str, str, dt.date], float]       # (person, room, day) -> observed minutes
    arrivals: dict[tuple[str, dt.date], float]             # (person, day) -> first sighting of the day
    departures: dict[tuple[str, dt.date], float]           # (person, day) -> last sighting of the day
    co_sightings: list[CoSighting]
    together: dict[dt.date, set[tuple[str, str]]]          # day -> pairs seen together
    seen_on: dict[dt.date, set[str]]                       # day -> people seen
    seen_in: dict[tuple[str, dt.date], set[str]]           # (room, day) -> people seen there
    first_seen: dict[str, float]                           # person -> first-ever sighting time
    first_day: dict[str, dt.date]                          # person -> day of that sighting
    absent_days: dict[str, list[dt.date]]                  # person (seen at least once) -> days without a sighting
    habits: dict[str, Habit]                               # person (seen at least once) -> routine
    robot_times: dict[str, list[float]] = field(default_factory=dict)   # room -> sorted frame times the robot was there
    shared_rooms: frozenset = frozenset()                  # never a workplace (truth.rooms "shared", else fallback)
    lunch_rooms: tuple = ()                                # rooms of lunch stays (else fallback)

    def day_window(self, day: dt.date) -> tuple[float, float]:
        return day_window(day, self.zone)

    def last_sighting(self, person: str, day: Optional[dt.date] = None) -> Optional[Sighting]:
        """The latest sighting of ``person`` (on ``day`` if given)."""
        found = [s for s in self.sightings.get(person, []) if day is None or s.day == day]
        return found[-1] if found else None

    def rooms_seen(self, person: str, day: dt.date) -> set[str]:
        return {room for (room, d), people in self.seen_in.items() if d == day and person in people}

    def companions(self, person: str, day: dt.date) -> set[str]:
        """People seen together with ``person`` on ``day``."""
        return {b if a == person else a for a, b in self.together.get(day, set()) if person in (a, b)}

    def _stays_on(self, person: str, day: dt.date) -> list[Stay]:
        """The simulated stays of ``person`` that overlap ``day`` (none when stays are unknown)."""
        start, end = self.day_window(day)
        return [s for s in self.stays if s.person == person and s.kind != "run" and s.start < end and s.end >= start]

    def room_at(self, person: str, t: float) -> Optional[str]:
        """The room of ``person``'s simulated stay at ``t`` (None: not there, or stays unknown)."""
        return next((s.room for s in self.stays if s.person == person and s.kind != "run" and s.start <= t <= s.end),
                    None)

    def true_arrival(self, person: str, day: dt.date) -> Optional[float]:
        """Start of ``person``'s first simulated stay on ``day`` (None: none, or stays unknown)."""
        stays = self._stays_on(person, day)
        return max(min(s.start for s in stays), self.day_window(day)[0]) if stays else None

    def true_departure(self, person: str, day: dt.date) -> Optional[float]:
        """End of ``person``'s last simulated stay on ``day`` (None: none, or stays unknown)."""
        stays = self._stays_on(person, day)
        return min(max(s.end for s in stays), self.day_window(day)[1]) if stays else None

    def was_in(self, person: str, room: str, day: dt.date) -> bool:
        """``person`` was in ``room`` on ``day``: seen there, or (simulated stays) really there."""
        if person in self.seen_in.get((room, day), set()):
            return True
        return any(s.room == room for s in self._stays_on(person, day))

    def met(self, a: str, b: str, day: dt.date) -> bool:
        """Seen together on ``day``, or (simulated stays) in the same room at overlapping times."""
        if tuple(sorted((a, b))) in self.together.get(day, set()):
            return True
        others = self._stays_on(b, day)
        return any(s.room == o.room and s.start < o.end and o.start < s.end
                   for s in self._stays_on(a, day) for o in others)

    def robot_in(self, room: str, start: float, end: float) -> bool:
        """Whether the robot was in ``room`` (a frame there) at some time in [start, end]."""
        times = self.robot_times.get(room, [])
        i = bisect.bisect_left(times, start)
        return i < len(times) and times[i] <= end

    def present_on(self, day: dt.date, before: Optional[float] = None) -> Optional[set[str]]:
        """People with a simulated stay on ``day`` (begun before ``before`` if given; None: stays unknown)."""
        if not self.stays_simulated:
            return None
        start, end = self.day_window(day)
        end = end if before is None else min(end, before)
        return {s.person for s in self.stays if s.kind != "run" and s.start < end and s.end >= start}

    def present_in(self, room: str, day: dt.date) -> Optional[set[str]]:
        """People really in ``room`` on ``day`` at a moment the robot was in it too (a frame with
        the robot in ``room`` during one of their stays there); None: stays unknown."""
        if not self.stays_simulated:
            return None
        lo, hi = self.day_window(day)
        return {s.person for s in self.stays if s.kind != "run" and s.room == room
                and self.robot_in(room, max(s.start, lo), min(s.end, hi - 1e-6))}

    def true_companions(self, person: str, day: dt.date) -> Optional[set[str]]:
        """People whose simulated stay in a room overlapped one of ``person``'s on ``day`` at a
        moment the robot was in that room; None: stays unknown."""
        if not self.stays_simulated:
            return None
        lo, hi = self.day_window(day)
        mine = self._stays_on(person, day)
        out = set()
        for o in self.stays:
            if o.kind == "run" or o.person == person or o.person in out or not (o.start < hi and o.end >= lo):
                continue
            for s in mine:
                a, b = max(s.start, o.start, lo), min(s.end, o.end, hi - 1e-6)
                if s.room == o.room and a <= b and self.robot_in(s.room, a, b):
                    out.add(o.person)
                    break
        return out

    def had_stay(self, person: str, day: dt.date) -> Optional[bool]:
        """Whether ``person`` really came in on ``day`` (a simulated stay); None: stays unknown."""
        return bool(self._stays_on(person, day)) if self.stays_simulated else None

    def left_by(self, person: str, day: dt.date, t: float) -> Optional[bool]:
        """Whether ``person``'s last simulated stay on ``day`` ended by ``t`` (None: stays unknown)."""
        if not self.stays_simulated:
            return None
        left = self.true_departure(person, day)
        return left is not None and left <= t


def minutes_of_day(t: float, zone: dt.tzinfo) -> float:
    """Local clock time of ``t`` in minutes after midnight."""
    local = dt.datetime.fromtimestamp(t, tz=zone)
    return local.hour * 60 + local.minute + (local.second + local.microsecond / 1e6) / 60.0


def room_label(room: str, rooms: Optional[dict] = None) -> str:
    """A room's label: the truth's, else the id with '_' -> ' '."""
    info = (rooms or {}).get(room)
    return info.get("label", room.replace("_", " ")) if isinstance(info, dict) else room.replace("_", " ")


def observed_truth(truth: Any, tz: TimeZone = "UTC") -> ObservedTruth:
    """The observed truth of ``truth`` (a GroundTruth; old truth without stays or rooms works too)."""
    zone = as_zone(tz)
    frames = truth.frames
    positions = getattr(truth, "positions", None) or {}
    sightings: dict[str, list[Sighting]] = {}
    frame_sightings: list[list[Sighting]] = []
    days: list[dt.date] = []
    window = (0.0, -1.0)
    day = None
    room_ids: set[str] = set()
    robot_times: dict[str, list[float]] = {}
    for i, f in enumerate(frames):
        t = float(f["t"])
        if not window[0] <= t < window[1]:
            day = local_date(t, zone)
            window = day_window(day, zone)
            if not days or days[-1] != day:
                days.append(day)
        if f.get("room"):
            room_ids.add(f["room"])
            robot_times.setdefault(f["room"], []).append(t)
        here = []
        for name in f.get("visible", []):
            info = f.get("seen", {}).get(name, {})
            room = info.get("room") or f.get("room", "")
            pos = info.get("position") or positions.get(name, {}).get(room)
            s = Sighting(name, t, day, room, (float(pos[0]), float(pos[1])) if pos else None, i)
            sightings.setdefault(name, []).append(s)
            here.append(s)
            room_ids.add(room)
        frame_sightings.append(here)
    days = sorted(set(days))

    raw_stays = getattr(truth, "stays", None) or []
    stays_simulated = bool(raw_stays)
    stays = [Stay(s["person"], s["room"], float(s["start"]), float(s["end"]), s.get("kind", ""),
                  tuple(s["position"]) if s.get("position") else None) for s in raw_stays]
    groups, derived = _group_sightings(sightings, stays)
    stays = sorted(stays + derived, key=lambda s: (s.start, s.person))

    intervals = []
    for key in sorted(groups, key=lambda k: (groups[k][0].t, groups[k][0].person)):
        group, stay_kind = groups[key], key[0]
        intervals.append(Interval(group[0].person, group[0].room, group[0].day, group[0].t, group[-1].t,
                                  stay_kind, len(group)))
    durations: dict[tuple[str, str, dt.date], float] = {}
    for iv in intervals:
        durations[(iv.person, iv.room, iv.day)] = durations.get((iv.person, iv.room, iv.day), 0.0) + iv.minutes

    arrivals, departures = {}, {}
    seen_on: dict[dt.date, set[str]] = {d: set() for d in days}
    seen_in: dict[tuple[str, dt.date], set[str]] = {}
    for name, seq in sightings.items():
        for s in seq:
            arrivals.setdefault((name, s.day), s.t)
            departures[(name, s.day)] = s.t
            seen_on[s.day].add(name)
            seen_in.setdefault((s.room, s.day), set()).add(name)

    co_sightings, together = [], {}
    for here in frame_sightings:
        for a in range(len(here)):
            for b in range(a + 1, len(here)):
                if here[a].room == here[b].room:
                    pair = tuple(sorted((here[a].person, here[b].person)))
                    co_sightings.append(CoSighting(here[a].t, here[a].day, here[a].room, pair))
                    together.setdefault(here[a].day, set()).add(pair)

    first_seen = {name: seq[0].t for name, seq in sightings.items()}
    first_day = {name: seq[0].day for name, seq in sightings.items()}
    absent = {name: [d for d in days if name not in seen_on[d]] for name in sightings}
    truth_rooms = getattr(truth, "rooms", None) or {}
    shared = frozenset(r for r, info in truth_rooms.items() if isinstance(info, dict) and info.get("shared")) \
        if truth_rooms else FALLBACK_NOT_WORKPLACES
    lunch_rooms = tuple(sorted({s.room for s in stays if s.kind == "lunch"})) or FALLBACK_LUNCH_ROOMS
    habits = {name: _habit(name, seq, zone, shared, lunch_rooms) for name, seq in sightings.items()}
    rooms = sorted(truth_rooms) if truth_rooms else sorted(r for r in room_ids if r)
    for times in robot_times.values():
        times.sort()
    log.debug("observed truth: %d days, %d people seen, %d intervals", len(days), len(sightings), len(intervals))
    return ObservedTruth(zone, days, rooms, {r: room_label(r, truth_rooms) for r in rooms}, stays, stays_simulated,
                         sightings, intervals, durations, arrivals, departures, co_sightings, together, seen_on,
                         seen_in, first_seen, first_day, absent, habits, robot_times, shared, lunch_rooms)


def _group_sightings(sightings: dict[str, list[Sighting]], stays: list[Stay]):
    """Sightings grouped per (stay, local day): {(kind, stay or run id, day): [sightings]}, and
    the stays derived for sightings no simulated stay covers."""
    by_person: dict[str, list[Stay]] = {}
    for s in sorted(stays, key=lambda s: s.start):
        by_person.setdefault(s.person, []).append(s)
    groups: dict[tuple, list[Sighting]] = {}
    derived: list[Stay] = []
    run: list[Sighting] = []

    def close_run():
        if run:
            derived.append(Stay(run[0].person, run[0].room, run[0].t, run[-1].t, "run"))
            groups[("run", len(derived), run[0].day)] = list(run)
            run.clear()

    for name, seq in sorted(sightings.items()):
        own = by_person.get(name, [])
        starts = [s.start for s in own]
        for s in seq:
            stay = _covering(own, starts, s)
            if stay is not None:
                close_run()
                groups.setdefault((stay.kind, id(stay), s.day), []).append(s)
                continue
            if run and (run[-1].room != s.room or run[-1].day != s.day or s.t - run[-1].t > RUN_GAP_S):
                close_run()
            run.append(s)
        close_run()
    return groups, derived


def _covering(own: list[Stay], starts: list[float], s: Sighting) -> Optional[Stay]:
    """The stay of the person in the sighting's room that covers its time, if any."""
    i = bisect.bisect_right(starts, s.t) - 1
    for stay in own[max(i - 1, 0):i + 1]:
        if stay.room == s.room and stay.start <= s.t <= stay.end:
            return stay
    return None


def _habit(name: str, seq: list[Sighting], zone: dt.tzinfo, not_workplaces: frozenset, lunch_rooms: tuple) -> Habit:
    days_in: dict[str, set[dt.date]] = {}
    count_in: dict[str, int] = {}
    lunch: dict[dt.date, float] = {}
    lo, hi = LUNCH_WINDOW_MIN
    for s in seq:
        if s.room not in not_workplaces:
            days_in.setdefault(s.room, set()).add(s.day)
            count_in[s.room] = count_in.get(s.room, 0) + 1
        if s.room in lunch_rooms and s.day not in lunch:
            minute = minutes_of_day(s.t, zone)
            if lo <= minute <= hi:
                lunch[s.day] = minute
    place = min(days_in, key=lambda r: (-len(days_in[r]), -count_in[r], r)) if days_in else ""
    return Habit(name, place, len(days_in.get(place, ())), count_in.get(place, 0),
                 statistics.median(lunch.values()) if lunch else None, len(lunch))
