"""The demo's questions (the first generator): answers from a simulated small-office episode's
ground truth (seeded). The benchmark (``embodied-memory eval``) no longer uses it: its questions
come from ``sim/questions_v2.py`` (every type, two disjoint phrasing sets, truth from
``sim/truth.py`` only) and are scored by ``sim/scoring.py``.

Types follow NaVQA (position, binary, time, duration) and PersonEQA (person sets); every
question carries the time it is asked.  Durations are what the robot could observe: the time
between the first and last sighting of a visit (``agent.visits``), summed.
"""
from __future__ import annotations

import datetime as dt
import random
from dataclasses import asdict, dataclass, field

from ..agent.visits import observed_minutes, split_visits
from ..calendar_windows import TimeZone, as_zone, day_window, local_date
from .episode import GroundTruth
from .scoring import keyword_match

PHRASES = {
    "position": ["Where did you last see {name}?", "Where was {name} last seen?"],
    "time": ["When did you last see {name} {day}?", "When was {name} last seen {day}?"],
    "binary": ["Did you see {name} in the {room} {day}?", "Was {name} in the {room} {day}?"],
    "persons": ["Who was in the {room} {day}?", "Who did you see in the {room} {day}?"],
    "duration": ["How long was {name} in the {room} {day}?", "For how long did you see {name} in the {room} {day}?"],
    "object_position": ["Where was the {obj} {day}?", "Where did you see the {obj} {day}?"],
    "object_binary": ["Was the {obj} in the {room} {day}?", "Did you see the {obj} in the {room} {day}?"],
    "text": ["What did you see in the {room} {day}?", "What objects were in the {room} {day}?"],
}
OBJECT_TYPES = ("object_position", "object_binary", "text")
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


@dataclass
class Question:
    question: str
    type: str
    asked_at: float
    answer: dict = field(default_factory=dict)   # position/waypoint | time | binary | persons | duration_minutes

    def to_dict(self) -> dict:
        return asdict(self)


def _room_label(room: str) -> str:
    return room.replace("_", " ")


def _day_phrase(day: dt.date, today: dt.date) -> str:
    days_back = (today - day).days
    if days_back == 0:
        return "today"
    if days_back == 1:
        return "yesterday"
    return "on " + WEEKDAYS[day.weekday()]


def generate_questions(truth: GroundTruth, seed: int = 0, per_type: int = 2,
                       objects: bool = False, tz: TimeZone = "UTC") -> list[Question]:
    """Questions about every simulated day (within the last week), asked after the last patrol.
    ``objects``: also about the small objects that move between days (NaVQA's text type among
    them); the embedded default cannot name objects offline (no VLM), so only evaluations with a
    describer that can (a VLM, or the labelled ground-truth ablation) ask them.  ``tz``: the
    time zone the questions are asked in (the agent's): "today", "yesterday" and "on Monday"
    are its calendar days."""
    rng = random.Random(seed)
    zone = as_zone(tz)
    frames = truth.frames
    asked_at = frames[-1]["t"] + 600.0
    names = sorted(truth.positions)
    rooms = ["kitchen", "office", "meeting_room"]
    today = local_date(asked_at, zone)
    days = sorted({d for d in (local_date(f["t"], zone) for f in frames) if (today - d).days <= 6})  # the last week
    first_day = local_date(frames[0]["t"], zone)
    questions: list[Question] = []

    def phrase(kind, **kw):
        return rng.choice(PHRASES[kind]).format(**kw)

    seen_all = {n: [f for f in frames if n in f["visible"]] for n in names}
    for name in rng.sample(names, len(names))[:per_type]:  # the last sighting overall
        if seen_all[name]:
            last = seen_all[name][-1]
            room = last["seen"][name]["room"]
            questions.append(Question(phrase("position", name=name.capitalize()), "position", asked_at,
                                      {"position": truth.positions[name][room] + [0.0], "waypoint": room}))
    for date in days:
        day = _day_phrase(date, today)
        start, end = day_window(date, zone)
        frames_of_day = [f for f in frames if start <= f["t"] < end]
        seen = {n: [f for f in frames_of_day if n in f["visible"]] for n in names}
        for name in rng.sample(names, len(names))[:per_type]:
            if seen[name]:
                questions.append(Question(phrase("time", name=name.capitalize(), day=day), "time", asked_at,
                                          {"time": seen[name][-1]["t"]}))
        for name in rng.sample(names, len(names))[:per_type]:
            yes_rooms = sorted({f["seen"][name]["room"] for f in seen[name]})
            no_rooms = [r for r in rooms if r not in yes_rooms]
            for rooms_pick, truth_value in ((yes_rooms, "yes"), (no_rooms, "no")):
                if rooms_pick:
                    room = rng.choice(rooms_pick)
                    questions.append(Question(phrase("binary", name=name.capitalize(), room=_room_label(room),
                                                     day=day), "binary", asked_at, {"binary": truth_value}))
        for room in rng.sample(rooms, len(rooms))[:per_type]:
            persons = sorted({n for f in frames_of_day for n, where in f["seen"].items() if where["room"] == room})
            questions.append(Question(phrase("persons", room=_room_label(room), day=day), "persons", asked_at,
                                      {"persons": persons}))
        for name in rng.sample(names, len(names))[:per_type]:
            rooms_seen = sorted({f["seen"][name]["room"] for f in seen[name]})
            if not rooms_seen:
                continue
            room = rng.choice(rooms_seen)
            times = [f["t"] for f in seen[name] if f["seen"][name]["room"] == room]
            total = observed_minutes(split_visits(times))
            questions.append(Question(phrase("duration", name=name.capitalize(), room=_room_label(room), day=day),
                                      "duration", asked_at, {"duration_minutes": round(total, 2)}))
        if objects:
            day_index = (date - first_day).days
            placed = truth.objects[day_index] if day_index < len(truth.objects) else {}
            questions += _object_questions(frames_of_day, placed, day, asked_at, rng, per_type, phrase)
    return questions


MIN_OBJECT_FRAMES = 8          # about 2 s in view at 4 fps: an object glimpsed once is not asked about


def _object_questions(frames_of_day, placed, day, asked_at, rng, per_type, phrase) -> list[Question]:
    """Objects the robot had in view for at least MIN_OBJECT_FRAMES that day; "what did you see
    in the R" counts what was in view while the robot was in R."""
    rooms = ["kitchen", "office", "meeting_room", "lobby"]
    frames_seen: dict[str, int] = {}
    in_room: dict[str, dict[str, int]] = {}
    for f in frames_of_day:
        for obj in f.get("objects", {}):
            frames_seen[obj] = frames_seen.get(obj, 0) + 1
            in_room.setdefault(f["room"], {}).setdefault(obj, 0)
            in_room[f["room"]][obj] += 1
    seen = sorted(obj for obj, n in frames_seen.items() if n >= MIN_OBJECT_FRAMES and obj in placed)
    out = []
    for obj in rng.sample(seen, len(seen))[:per_type]:
        where = placed[obj]
        out.append(Question(phrase("object_position", obj=obj, day=day), "object_position", asked_at,
                            {"position": where["position"] + [0.0], "waypoint": where["room"]}))
        other = rng.choice([r for r in rooms if r != where["room"]])
        room, value = rng.choice([(where["room"], "yes"), (other, "no")])
        out.append(Question(phrase("object_binary", obj=obj, room=_room_label(room), day=day), "object_binary",
                            asked_at, {"binary": value}))
    for room in rng.sample(rooms, len(rooms))[:per_type]:
        present = sorted(obj for obj, n in in_room.get(room, {}).items() if n >= MIN_OBJECT_FRAMES)
        if present:
            out.append(Question(phrase("text", room=_room_label(room), day=day), "text", asked_at,
                                {"objects": present}))
    return out


def score(question: Question, answer: dict, names_of: dict[str, str]) -> tuple[bool, str]:
    """(correct, what was compared) for an Answer dict; identity ids are mapped to names."""
    truth = question.answer
    if question.type in ("position", "object_position"):
        pos = answer.get("position")
        if pos:
            err = ((pos[0] - truth["position"][0]) ** 2 + (pos[1] - truth["position"][1]) ** 2) ** 0.5
            return err <= 5.0 or answer.get("waypoint") == truth["waypoint"], f"{err:.1f} m"
        return False, "no position"
    if question.type == "time":
        t = answer.get("time")
        if t is None:
            return False, "no time"
        err = abs(t - truth["time"]) / 60.0
        return err <= 5.0, f"{err:.1f} min"
    if question.type in ("binary", "object_binary"):
        return answer.get("binary") == truth["binary"], answer.get("binary") or "-"
    if question.type == "text":
        share = keyword_match(truth["objects"], answer.get("text", ""))
        return share >= 0.5, f"{share:.0%} of the objects named"
    if question.type == "persons":
        got = sorted({names_of.get(p, p).lower() for p in answer.get("persons", [])})
        return got == truth["persons"], ", ".join(got) or "nobody"
    if question.type == "duration":
        d = answer.get("duration_minutes")
        if d is None:
            return False, "no duration"
        return abs(d - truth["duration_minutes"]) <= 5.0, f"{d:.1f} min"
    return False, "unknown type"
