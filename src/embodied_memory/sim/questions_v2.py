"""Benchmark v2 questions about people (and optionally objects), generated from a simulated
episode's ground truth (seeded, deterministic).

Every answer comes from ``sim.truth`` (what the robot observed), never from the system under
test.  Questions are asked ``ASK_DELAY_S`` after the last frame, about days within the last
week (local calendar days of ``tz``: "today", "yesterday", "on Monday").  Wordings come from
disjoint phrasing sets (``phrasings/dev.yaml`` to develop against, ``phrasings/evaluation.yaml``
held out); ``phrasings/probe.yaml`` is a second development set, written blind to the evaluation
set, to measure robustness to wording while developing.  About one people question in eight
is unanswerable (``UNANSWERABLE_SHARE``): it is worded like the type it imitates but asks about
a person not seen that day, an activity never observed, or a name never seen; only an explicit
"not seen / don't know" is right.

Where the truth has simulated stays, questions whose observed answer would contradict what
really happened are left out or asked last:
  - "no" to "was X in the R" only if X was not there at all; "no" to "were X and Y together"
    only if they never shared a room;
  - "where is X now" only while X is still in the room last seen in; "when did X leave today"
    only once X has left;
  - "who came first, X or Y" only when the first sightings and the real arrivals (stays) are in
    the same order and both gaps are at least WHO_FIRST_MARGIN_S;
  - "who was in the R", "how many people were in the R" only when the people seen there that
    day are exactly the people really there at a moment the robot was in R too; "how many people
    did you see" only when those seen are exactly those who came in that day; "who was X with"
    only when the people seen with X are exactly those whose stays overlapped X's in a room
    while the robot was there (``ObservedTruth.present_in / present_on / true_companions``);
  - "on which days was X absent" only when X really was absent (no stay) on every day X was
    not seen;
  - arrivals and departures are the first / last sighting (the issue's definition, from
    visibility); ``true_time`` holds the real one (stays; None if unknown) so a report can show
    the gap, and those seen more than FAIR_GAP_S after / before the real ones come last.

Answer dicts (``Question.answer``), by type:
  position, where_now, object_position  {"position": [x, y, 0.0], "room": room id}
  time, first_seen                      {"time": unix s, "local": ISO local time, "tz": zone}
  arrival, departure                    the same and "true_time": the real arrival / departure (or None)
  duration                              {"duration_minutes": float}
  binary, together, object_binary       {"binary": "yes" | "no"}
  persons, with_whom, first_time        {"persons": [names], "all_people": [names]}
  who_first                             {"person": name, "options": [name, name2]}
  count                                 {"count": int, "all_people": [names]}
  absent_days                           {"days": [ISO dates], "tz": zone}
  habit_place                           {"room": room id}
  habit_time                            {"minutes_of_day": float, "tz": zone}
  text                                  {"objects": [object names]}
  unanswerable                          {"unanswerable": True, "imitates": type,
                                         "reason": "absent_day" | "unobserved" | "never_seen"}
Room-scored types (position, where_now, habit_place, object_position) also carry "all_rooms"
{room id: label}, and person-set types "all_people" (every person of the truth and every name
seen): the scorer reads answer texts against them, so a wrong room or an extra name counts.
"""
from __future__ import annotations

import bisect
import datetime as dt
import functools
import logging
import random
import string
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any, Optional

import yaml

from ..calendar_windows import WEEKDAYS, TimeZone, as_zone, local_date
from .truth import ObservedTruth, observed_truth

log = logging.getLogger(__name__)

PHRASING_SETS = ("dev", "probe", "probe2", "probe3", "probe4", "evaluation")
N, N2, R, D, O = "name", "name2", "room", "day", "obj"
# question type -> the slot sets its templates may use (count: with or without a room)
SLOTS: dict[str, tuple[frozenset, ...]] = {t: tuple(frozenset(s) for s in sets) for t, sets in {
    "position": [{N}], "where_now": [{N}], "time": [{N, D}], "first_seen": [{N}], "arrival": [{N, D}],
    "departure": [{N, D}], "binary": [{N, R, D}], "persons": [{R, D}], "duration": [{N, R, D}],
    "who_first": [{N, N2, D}], "with_whom": [{N, D}], "together": [{N, N2, D}], "count": [{D}, {R, D}],
    "absent_days": [{N}], "first_time": [{D}], "habit_place": [{N}], "habit_time": [{N}],
    "object_position": [{O, D}], "object_binary": [{O, R, D}], "text": [{R, D}],
}.items()}
OBJECT_TYPES = ("object_position", "object_binary", "text")
PEOPLE_TYPES = tuple(t for t in SLOTS if t not in OBJECT_TYPES)
UNANSWERABLE = "unanswerable"
TYPES = PEOPLE_TYPES + (UNANSWERABLE,) + OBJECT_TYPES

ASK_DELAY_S = 600.0
UNANSWERABLE_SHARE = 0.125           # of all people questions
WHO_FIRST_MARGIN_S = 600.0           # first sightings (and real arrivals) closer than this are not asked about
MIN_DURATION_MIN = 1.0               # shorter observed durations are asked only when nothing longer is left
FAIR_GAP_S = 30 * 60               # arrivals / departures seen within this of the real ones are asked first
MIN_HABIT_DAYS = 2                   # a habit is asked about when seen on at least this many days
MIN_OBJECT_FRAMES = 8                # about 2 s in view at 4 fps: an object glimpsed once is not asked about
NEVER_SEEN_NAMES = ("zoe", "quentin", "yusuf", "ingrid", "oskar", "priya", "mateo", "hana")
# what each kind of unanswerable question imitates
IMITATES_ABSENT_DAY = ("time", "arrival", "departure", "with_whom", "duration")
IMITATES_NEVER_SEEN = ("position", "where_now", "first_seen", "habit_place", "habit_time", "time", "arrival")
UNANSWERABLE_REASONS = ("absent_day", "unobserved", "never_seen")


@dataclass
class Question:
    question: str
    type: str
    asked_at: float
    answer: dict = field(default_factory=dict)       # see the module docstring
    phrasing_set: str = "evaluation"
    template: str = ""
    answerable: bool = True

    def to_dict(self) -> dict:
        return asdict(self)


def template_slots(template: str) -> frozenset:
    return frozenset(f for _, f, _, _ in string.Formatter().parse(template) if f)


def phrasing_file(name: str) -> dict:
    """A file of ``sim/phrasings`` (``name``.yaml): templates by question kind."""
    return yaml.safe_load((resources.files("embodied_memory.sim") / "phrasings" / f"{name}.yaml")
                          .read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=None)
def _load(phrasing_set: str) -> dict[str, tuple[str, ...]]:
    if phrasing_set not in PHRASING_SETS:
        raise ValueError(f"phrasing set: unknown {phrasing_set!r} ({', '.join(PHRASING_SETS)})")
    data = phrasing_file(phrasing_set)
    out = {}
    for kind, allowed in SLOTS.items():
        templates = data.get(kind) or []
        for tpl in templates:
            if template_slots(tpl) not in allowed:
                raise ValueError(f"{phrasing_set}.yaml {kind}: {tpl!r} uses slots {sorted(template_slots(tpl))}")
        if not templates:
            raise ValueError(f"{phrasing_set}.yaml has no templates for {kind}")
        out[kind] = tuple(templates)
    return out


def load_phrasings(phrasing_set: str = "evaluation") -> dict[str, list[str]]:
    """{question type: [templates]} of a phrasing set (one of PHRASING_SETS), checked against SLOTS."""
    return {kind: list(tpls) for kind, tpls in _load(phrasing_set).items()}


def day_phrase(day: dt.date, today: dt.date) -> str:
    """"today", "yesterday" or "on Monday" (a day within the last week)."""
    back = (today - day).days
    return "today" if back == 0 else "yesterday" if back == 1 else "on " + WEEKDAYS[day.weekday()].capitalize()


def zone_name(zone: dt.tzinfo) -> str:
    """A name ``zone_from_name`` turns back into the zone: an IANA key, "UTC" or "UTC+HH:MM"."""
    key = getattr(zone, "key", None)
    if key:
        return key
    offset = zone.utcoffset(None) if isinstance(zone, dt.timezone) else None
    if offset is None:
        raise ValueError(f"time zone {zone!r}: give an IANA name or a fixed offset")
    if not offset:
        return "UTC"
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def zone_from_name(name: str) -> dt.tzinfo:
    if name.startswith("UTC") and len(name) == 9:
        sign = 1 if name[3] == "+" else -1
        return dt.timezone(sign * dt.timedelta(hours=int(name[4:6]), minutes=int(name[7:9])))
    return dt.timezone.utc if name == "UTC" else as_zone(name)


@dataclass
class _Cand:
    """A question to be worded: its slots (names lower case, rooms as ids), answer and day."""
    slots: dict
    answer: dict
    day: Optional[dt.date] = None
    label: str = ""          # picks alternate between labels (yes / no, day / room)
    priority: int = 0        # lower first


def _pick(cands: list[_Cand], k: int, rng: random.Random) -> list[_Cand]:
    """Up to ``k`` candidates: lower priority first, alternating labels, spread over days."""
    out: list[_Cand] = []
    for prio in sorted({c.priority for c in cands}):
        streams = []
        for label in sorted({c.label for c in cands if c.priority == prio}):
            by_day: dict = {}
            for c in cands:
                if c.priority == prio and c.label == label:
                    by_day.setdefault(c.day, []).append(c)
            days = sorted(by_day, key=str)
            rng.shuffle(days)
            for d in days:
                rng.shuffle(by_day[d])
            order = []
            while any(by_day[d] for d in days):
                order += [by_day[d].pop(0) for d in days if by_day[d]]
            streams.append(order)
        while len(out) < k and any(streams):
            for s in streams:
                if s and len(out) < k:
                    out.append(s.pop(0))
    return out


class _Wording:
    """Fills templates, cycling through each type's templates in a seeded order."""

    def __init__(self, phrasing_set: str, rng: random.Random, today: dt.date, labels: dict[str, str]):
        self.set, self.rng, self.today, self.labels = phrasing_set, rng, today, labels
        self.templates = _load(phrasing_set)
        self.cycles: dict[tuple, list[str]] = {}

    def word(self, kind: str, slots: dict) -> tuple[str, str]:
        key = (kind, frozenset(slots))
        if not self.cycles.get(key):
            fitting = [t for t in self.templates[kind] if template_slots(t) == key[1]]
            self.rng.shuffle(fitting)
            self.cycles[key] = fitting
        template = self.cycles[key].pop()
        values = {}
        for slot, value in slots.items():
            if slot in (N, N2):
                values[slot] = value.capitalize()
            elif slot == R:
                values[slot] = self.labels.get(value, value.replace("_", " "))
            elif slot == D:
                values[slot] = day_phrase(value, self.today)
            else:
                values[slot] = value
        text = template.format(**values)
        return text[:1].upper() + text[1:], template


def generate_questions(truth: Any, seed: int = 0, per_type: int = 4, phrasing_set: str = "evaluation",
                       objects: bool = False, tz: TimeZone = "UTC") -> list[Question]:
    """About ``per_type`` questions of each type (fewer where the episode offers fewer), spread
    over the days of the last week, plus the unanswerable ones; ``objects``: also the object
    types (a describer that names objects is needed to answer them).  ``tz``: the zone the
    questions are asked in (the agent's)."""
    rng = random.Random(seed)
    zone = as_zone(tz)
    obs = observed_truth(truth, zone)
    asked_at = float(truth.frames[-1]["t"]) + ASK_DELAY_S
    today = local_date(asked_at, zone)
    week = [d for d in obs.days if 0 <= (today - d).days <= 6]
    # the wording has its own stream: every phrasing set asks the same questions (content, order)
    wording = _Wording(phrasing_set, random.Random(f"{seed}:{phrasing_set}"), today, obs.labels)
    questions: list[Question] = []
    all_people = sorted(set(getattr(truth, "people", None) or {}) | set(obs.sightings))
    for kind, cands in _people_candidates(obs, week, today, asked_at, rng, all_people).items():
        for c in _pick(cands, per_type, rng):
            text, template = wording.word(kind, c.slots)
            questions.append(Question(text, kind, asked_at, c.answer, phrasing_set, template))
    answerable = len(questions)
    wanted = max(1, round(answerable * UNANSWERABLE_SHARE / (1 - UNANSWERABLE_SHARE))) if answerable else 0
    for kind, c in _unanswerable(obs, truth, week, rng, wanted):
        text, template = wording.word(kind, c.slots)
        questions.append(Question(text, UNANSWERABLE, asked_at, {"unanswerable": True, "imitates": kind,
                                                                 "reason": c.label}, phrasing_set, template,
                                  answerable=False))
    if objects:
        for kind, cands in _object_candidates(obs, truth, week).items():
            for c in _pick(cands, per_type, rng):
                text, template = wording.word(kind, c.slots)
                questions.append(Question(text, kind, asked_at, c.answer, phrasing_set, template))
    log.info("%d questions (%d unanswerable) over %d day(s), phrasing set %s", len(questions),
             sum(not q.answerable for q in questions), len(week), phrasing_set)
    return questions


def _time_answer(t: float, zone: dt.tzinfo, **extra) -> dict:
    return {"time": t, "local": dt.datetime.fromtimestamp(t, tz=zone).isoformat(timespec="seconds"),
            "tz": zone_name(zone), **extra}


def _fair_set(seen: set[str], really: Optional[set[str]]) -> bool:
    """The observed set is the real one (or the truth has no stays to tell)."""
    return really is None or set(seen) == really


def _first_is_fair(obs: ObservedTruth, a: str, b: str, d: dt.date) -> bool:
    """First sightings at least WHO_FIRST_MARGIN_S apart and, with stays, the real arrivals too,
    in the same order."""
    seen_gap = obs.arrivals[(a, d)] - obs.arrivals[(b, d)]
    if abs(seen_gap) < WHO_FIRST_MARGIN_S:
        return False
    ta, tb = obs.true_arrival(a, d), obs.true_arrival(b, d)
    if not obs.stays_simulated:
        return True
    return ta is not None and tb is not None and abs(ta - tb) >= WHO_FIRST_MARGIN_S and (ta < tb) == (seen_gap < 0)


def _asked_rooms(obs: ObservedTruth) -> list[str]:
    """Rooms questions name (corridors are passed through, not asked about)."""
    return [r for r in obs.rooms if "corridor" not in r]


def _position_answer(obs: ObservedTruth, person: str, day: Optional[dt.date] = None) -> Optional[dict]:
    s = obs.last_sighting(person, day)
    if s is None or s.position is None:
        return None
    return {"position": [s.position[0], s.position[1], 0.0], "room": s.room, "all_rooms": dict(obs.labels)}


def _people_candidates(obs: ObservedTruth, week: list[dt.date], today: dt.date, asked_at: float,
                       rng: random.Random, all_people: list[str]) -> dict[str, list[_Cand]]:
    zone, rooms = obs.zone, _asked_rooms(obs)
    known = sorted(obs.sightings)
    c: dict[str, list[_Cand]] = {kind: [] for kind in PEOPLE_TYPES}
    for p in known:
        if (ans := _position_answer(obs, p)) is not None:
            c["position"].append(_Cand({N: p}, ans))
        if today in week and (ans := _position_answer(obs, p, today)) is not None and (
                not obs.stays_simulated or obs.room_at(p, asked_at) == ans["room"]):
            c["where_now"].append(_Cand({N: p}, ans))   # seen today, and (if known) still in that room
        if obs.first_day[p] in week:
            c["first_seen"].append(_Cand({N: p}, _time_answer(obs.first_seen[p], zone)))
        absent = [d for d in week if p not in obs.seen_on[d]]
        if absent and not any(obs.had_stay(p, d) for d in absent):      # really absent on each (if known)
            c["absent_days"].append(_Cand({N: p}, {"days": [d.isoformat() for d in absent], "tz": zone_name(zone)}))
        habit = obs.habits[p]
        if habit.place and habit.place_days >= MIN_HABIT_DAYS:
            c["habit_place"].append(_Cand({N: p}, {"room": habit.place, "all_rooms": dict(obs.labels)}))
        if habit.lunch_minutes is not None and habit.lunch_days >= MIN_HABIT_DAYS:
            c["habit_time"].append(_Cand({N: p}, {"minutes_of_day": round(habit.lunch_minutes, 2),
                                                  "tz": zone_name(zone)}))
    for d in week:
        seen = sorted(obs.seen_on[d])
        for p in seen:
            c["time"].append(_Cand({N: p, D: d}, _time_answer(obs.departures[(p, d)], zone), d))
            first_t, last_t = obs.arrivals[(p, d)], obs.departures[(p, d)]
            arrived, left = obs.true_arrival(p, d), obs.true_departure(p, d)
            c["arrival"].append(_Cand({N: p, D: d}, _time_answer(first_t, zone, true_time=arrived), d,
                                      priority=int(arrived is not None and first_t - arrived > FAIR_GAP_S)))
            if d != today or obs.left_by(p, d, asked_at):
                c["departure"].append(_Cand({N: p, D: d}, _time_answer(last_t, zone, true_time=left), d,
                                            priority=int(left is not None and left - last_t > FAIR_GAP_S)))
            for r in rooms:
                if p in obs.seen_in.get((r, d), ()):
                    c["binary"].append(_Cand({N: p, R: r, D: d}, {"binary": "yes"}, d, "yes"))
                elif not obs.was_in(p, r, d):
                    c["binary"].append(_Cand({N: p, R: r, D: d}, {"binary": "no"}, d, "no"))
                minutes = obs.durations.get((p, r, d), 0.0)
                if minutes > 0:
                    c["duration"].append(_Cand({N: p, R: r, D: d}, {"duration_minutes": round(minutes, 2)}, d,
                                               priority=0 if minutes >= MIN_DURATION_MIN else 1))
            companions = obs.companions(p, d)
            if companions and _fair_set(companions, obs.true_companions(p, d)):
                c["with_whom"].append(_Cand({N: p, D: d}, {"persons": sorted(companions),
                                                           "all_people": list(all_people)}, d))
        for i, a in enumerate(seen):
            for b in seen[i + 1:]:
                x, y = (a, b) if rng.random() < 0.5 else (b, a)
                if _first_is_fair(obs, a, b, d):
                    first = min((a, b), key=lambda n: obs.arrivals[(n, d)])
                    c["who_first"].append(_Cand({N: x, N2: y, D: d}, {"person": first, "options": [x, y]}, d))
                if (a, b) in obs.together.get(d, set()):
                    c["together"].append(_Cand({N: x, N2: y, D: d}, {"binary": "yes"}, d, "yes"))
                elif not obs.met(a, b, d):
                    c["together"].append(_Cand({N: x, N2: y, D: d}, {"binary": "no"}, d, "no"))
        for r in rooms:
            people = sorted(obs.seen_in.get((r, d), ()))
            if people and _fair_set(people, obs.present_in(r, d)):
                c["persons"].append(_Cand({R: r, D: d}, {"persons": people, "all_people": list(all_people)}, d))
                c["count"].append(_Cand({R: r, D: d}, {"count": len(people), "all_people": list(all_people)}, d,
                                        "room"))
        if seen and _fair_set(seen, obs.present_on(d, before=asked_at)):
            c["count"].append(_Cand({D: d}, {"count": len(seen), "all_people": list(all_people)}, d, "day"))
        if new := sorted(p for p in seen if obs.first_day[p] == d):
            c["first_time"].append(_Cand({D: d}, {"persons": new, "all_people": list(all_people)}, d,
                                         priority=int(d == obs.days[0])))
    return c


def _unanswerable(obs: ObservedTruth, truth: Any, week: list[dt.date], rng: random.Random,
                  wanted: int) -> list[tuple[str, _Cand]]:
    """``wanted`` unanswerable questions, alternating: a known person on a day they were not
    seen; an activity never observed (lunch, a workplace); a name never seen.  Each candidate's
    ``label`` is its reason (UNANSWERABLE_REASONS)."""
    known = sorted(obs.sightings)
    rooms = _asked_rooms(obs)
    absent_day, unobserved, never = [], [], []
    for d in week:
        for p in known:
            if p not in obs.seen_on[d]:
                kind = rng.choice(IMITATES_ABSENT_DAY)
                slots = {N: p, D: d}
                if kind == "duration":
                    slots[R] = obs.habits[p].place or rng.choice(rooms)
                absent_day.append((kind, _Cand(slots, {}, d, "absent_day")))
    for p in known:
        if obs.habits[p].lunch_minutes is None:
            unobserved.append(("habit_time", _Cand({N: p}, {}, label="unobserved")))
        if not obs.habits[p].place:
            unobserved.append(("habit_place", _Cand({N: p}, {}, label="unobserved")))
    people = set(getattr(truth, "people", None) or {})
    strangers = sorted(people - set(known)) + [n for n in NEVER_SEEN_NAMES if n not in people and n not in known]
    for name in strangers:
        kind = rng.choice(IMITATES_NEVER_SEEN)
        slots = {N: name}
        if D in SLOTS[kind][0]:
            if not week:
                continue
            slots[D] = rng.choice(week)
        never.append((kind, _Cand(slots, {}, slots.get(D), "never_seen")))
    streams = []
    for group in (absent_day, unobserved, never):
        group = list(group)
        rng.shuffle(group)
        streams.append(group)
    out = []
    while len(out) < wanted and any(streams):
        for s in streams:
            if s and len(out) < wanted:
                out.append(s.pop())
    return out


def _sim_day(truth: Any, t: float, zone: dt.tzinfo, first: dt.date) -> int:
    """The simulated day (index into truth.objects) of time ``t``."""
    starts = getattr(truth, "day_starts", None) or []
    if starts:
        return max(0, bisect.bisect_right(starts, t) - 1)
    return (local_date(t, zone) - first).days


def _object_candidates(obs: ObservedTruth, truth: Any, week: list[dt.date]) -> dict[str, list[_Cand]]:
    """Objects in view for at least MIN_OBJECT_FRAMES on a day, where they lay that day (the
    same on every simulated day the local day overlaps); "what did you see in the R" lists what
    was in view while the robot was in R."""
    zone, rooms = obs.zone, _asked_rooms(obs)
    first = local_date(truth.frames[0]["t"], zone)
    c: dict[str, list[_Cand]] = {kind: [] for kind in OBJECT_TYPES}
    for d in week:
        start, end = obs.day_window(d)
        frames = [f for f in truth.frames if start <= f["t"] < end]
        sim_days = sorted({_sim_day(truth, f["t"], zone, first) for f in frames})
        placements = [truth.objects[i] if 0 <= i < len(truth.objects) else {} for i in sim_days]
        frames_seen: dict[str, int] = {}
        in_room: dict[str, dict[str, int]] = {}
        for f in frames:
            for obj in f.get("objects", {}):
                frames_seen[obj] = frames_seen.get(obj, 0) + 1
                in_room.setdefault(f.get("room", ""), {}).setdefault(obj, 0)
                in_room[f.get("room", "")][obj] += 1
        for obj in sorted(o for o, n in frames_seen.items() if n >= MIN_OBJECT_FRAMES):
            where = [p.get(obj) for p in placements]
            if not where or any(w is None or (w["room"], w["position"]) != (where[0]["room"], where[0]["position"])
                                for w in where):
                continue
            room = where[0]["room"]
            c["object_position"].append(_Cand({O: obj, D: d}, {"position": list(where[0]["position"][:2]) + [0.0],
                                                                "room": room, "all_rooms": dict(obs.labels)}, d))
            c["object_binary"].append(_Cand({O: obj, R: room, D: d}, {"binary": "yes"}, d, "yes"))
            for other in rooms:
                if other != room:
                    c["object_binary"].append(_Cand({O: obj, R: other, D: d}, {"binary": "no"}, d, "no"))
        for room in rooms:
            present = sorted(o for o, n in in_room.get(room, {}).items() if n >= MIN_OBJECT_FRAMES)
            if present:
                c["text"].append(_Cand({R: room, D: d}, {"objects": present}, d))
    return c
