"""Questions with answers, generated from a simulated episode's ground truth (seeded).

Types follow NaVQA (position, binary, time, duration) and PersonEQA (person sets); every
question carries the time it is asked.  Durations are what the robot could observe: the time
between the first and last sighting of a visit (visits split by 30-minute gaps), summed.
"""
from __future__ import annotations

import datetime as dt
import random
from dataclasses import asdict, dataclass, field
from typing import Optional

from .episode import GroundTruth

VISIT_GAP_S = 30 * 60
PHRASES = {
    "position": ["Where did you last see {name}?", "Where was {name} last seen?"],
    "time": ["When did you last see {name}?", "When was {name} last seen today?"],
    "binary": ["Did you see {name} in the {room} today?", "Was {name} in the {room} today?"],
    "persons": ["Who was in the {room} today?", "Who did you see in the {room} today?"],
    "duration": ["How long was {name} in the {room} today?", "For how long did you see {name} in the {room} today?"],
}


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


def generate_questions(truth: GroundTruth, seed: int = 0, per_type: int = 2,
                       day: Optional[int] = None) -> list[Question]:
    rng = random.Random(seed)
    frames = truth.frames
    asked_at = frames[-1]["t"] + 600.0
    names = sorted(truth.positions)
    day_start = dt.datetime.fromtimestamp(asked_at, dt.timezone.utc).replace(hour=0, minute=0, second=0).timestamp()
    today = [f for f in frames if f["t"] >= day_start]
    seen = {n: [f for f in today if n in f["visible"]] for n in names}
    rooms = ["kitchen", "office", "meeting_room"]
    questions: list[Question] = []

    def phrase(kind, **kw):
        return rng.choice(PHRASES[kind]).format(**kw)

    for name in rng.sample(names, len(names))[:per_type]:
        if not seen[name]:
            continue
        last = seen[name][-1]
        room = last["seen"][name]["room"]
        questions.append(Question(phrase("position", name=name.capitalize()), "position", asked_at,
                                  {"position": truth.positions[name][room] + [0.0], "waypoint": room}))
        questions.append(Question(phrase("time", name=name.capitalize()), "time", asked_at, {"time": last["t"]}))
    for name in rng.sample(names, len(names))[:per_type]:
        yes_rooms = sorted({f["seen"][name]["room"] for f in seen[name]})
        no_rooms = [r for r in rooms if r not in yes_rooms]
        if yes_rooms:
            room = rng.choice(yes_rooms)
            questions.append(Question(phrase("binary", name=name.capitalize(), room=_room_label(room)), "binary",
                                      asked_at, {"binary": "yes"}))
        if no_rooms:
            room = rng.choice(no_rooms)
            questions.append(Question(phrase("binary", name=name.capitalize(), room=_room_label(room)), "binary",
                                      asked_at, {"binary": "no"}))
    for room in rng.sample(rooms, len(rooms))[:per_type]:
        persons = sorted({n for f in today for n, where in f["seen"].items() if where["room"] == room})
        questions.append(Question(phrase("persons", room=_room_label(room)), "persons", asked_at, {"persons": persons}))
    for name in rng.sample(names, len(names))[:per_type]:
        rooms_seen = sorted({f["seen"][name]["room"] for f in seen[name]})
        if not rooms_seen:
            continue
        room = rng.choice(rooms_seen)
        times = [f["t"] for f in seen[name] if f["seen"][name]["room"] == room]
        visits, total = [[times[0]]], 0.0
        for t in times[1:]:
            if t - visits[-1][-1] > VISIT_GAP_S:
                visits.append([])
            visits[-1].append(t)
        total = sum(v[-1] - v[0] for v in visits) / 60.0
        questions.append(Question(phrase("duration", name=name.capitalize(), room=_room_label(room)), "duration",
                                  asked_at, {"duration_minutes": round(total, 2)}))
    return questions


def score(question: Question, answer: dict, names_of: dict[str, str]) -> tuple[bool, str]:
    """(correct, what was compared) for an Answer dict; identity ids are mapped to names."""
    truth = question.answer
    if question.type == "position":
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
    if question.type == "binary":
        return answer.get("binary") == truth["binary"], answer.get("binary") or "-"
    if question.type == "persons":
        got = sorted({names_of.get(p, p).lower() for p in answer.get("persons", [])})
        return got == truth["persons"], ", ".join(got) or "nobody"
    if question.type == "duration":
        d = answer.get("duration_minutes")
        if d is None:
            return False, "no duration"
        return abs(d - truth["duration_minutes"]) <= 5.0, f"{d:.1f} min"
    return False, "unknown type"
