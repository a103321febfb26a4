"""Scoring benchmark v2 answers against ``questions_v2`` questions.

``correct`` uses PersonEQA's thresholds (HUMEMBR): a position within 5 m, a time or duration
within 5 min, sets, yes/no, counts and days exact; a usual lunch time within 15 min; a room
(where now, usual workplace) right.  ``strict`` is tighter: 2 m, 1 min, a duration within 20 %
(at least 1 min), a lunch time within 5 min; the rest as ``correct``.  ``error`` is in metres
or minutes (LVMem reports mean errors).

Reading an answer: its fields first (``agent.answer.Answer.to_dict()``: position, waypoint,
time, duration_minutes, binary, persons; also "count", "days", "room" where a planner gives
them), then its text; only when neither gives a value is it "declined" ("don't know / not
seen") or "nothing readable", and then it is wrong and not ``answered``.  The text readers
(``sim.answer_text``) are strict on purpose; from the fields, who came first is the first
``persons`` entry, yes / no the ``binary`` field, absent days the ``days`` field.
An unanswerable question is right only for an explicit "don't know / not seen / never seen /
no record / no such observation" text (status "no_answer" with "I could not answer that." is
not explicit) and no value for the type it imitates.

``summarize``: per type n, ``answered`` (a value was read), accuracy and strict accuracy over
all; mean / median error over the answered ones that have an error; for set types mean_recall
over ALL questions of the type (an unanswered one has recall 0) and mean_precision over the
answered ones (precision is undefined without an answer).  ``category`` names the report
category of a question: its type, or "unanswerable/<reason>".
"""
from __future__ import annotations

import datetime as dt
import math
import re
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .answer_text import (ReadContext, read_absent_days, read_binary, read_count, read_duration, read_habit_time,
                          read_objects, read_persons, read_position, read_room, read_time, read_who_first,
                          says_explicit, says_not_seen, says_unknown)
from .questions_v2 import UNANSWERABLE
from .truth import minutes_of_day

POSITION_M, POSITION_STRICT_M = 5.0, 2.0
TIME_MIN, TIME_STRICT_MIN = 5.0, 1.0
DURATION_MIN, DURATION_STRICT_SHARE, DURATION_STRICT_MIN = 5.0, 0.2, 1.0
HABIT_TIME_MIN, HABIT_TIME_STRICT_MIN = 15.0, 5.0
TEXT_SHARE = 0.5                 # keyword match: share of the objects named (as sim.questions)

TIME_TYPES = ("time", "arrival", "departure", "first_seen")
SET_TYPES = ("persons", "with_whom", "first_time", "absent_days")
BINARY_TYPES = ("binary", "together", "object_binary")
ROOM_TYPES = ("where_now", "habit_place")
POSITION_TYPES = ("position", "object_position")
NEGATIVE_ANSWER_TYPES = BINARY_TYPES + ("absent_days",)   # "not seen" is a real answer there
RECALL_TYPES = SET_TYPES + ("text",)                      # an unanswered one has recall 0
_TEXT_VALUE_TYPES = TIME_TYPES + ("duration", "habit_time")  # unanswerable: a value in the text answers them


@dataclass
class Score:
    """How one answer compares with the truth."""
    correct: bool                      # PersonEQA thresholds
    strict: bool                       # the tight thresholds
    error: Optional[float] = None      # metres or minutes; None where not measurable
    unit: str = ""                     # "m" | "min" | ""
    precision: Optional[float] = None  # set types; None when nothing was answered
    recall: Optional[float] = None     # set types (0 when nothing was answered); text: share of objects named
    compared: str = ""                 # what was compared, for the report
    answered: bool = True              # a value was read (False: declined, unreadable, error, no answer)

    def __post_init__(self):
        self.strict = bool(self.strict and self.correct)   # strict implies correct


def declined(answer: dict, kind: str = "") -> bool:
    """Status "no_answer", or a text that says "don't know" / "not seen" (for yes/no and day
    questions only "don't know": "I did not see her" answers them)."""
    if answer.get("status") == "no_answer":
        return True
    text = answer.get("text") or ""
    return says_unknown(text) or (kind not in NEGATIVE_ANSWER_TYPES and says_not_seen(text))


def category(question: Any) -> str:
    """The report category of a question: its type, or "unanswerable/<reason>" (questions_v2)."""
    reason = question.answer.get("reason") if question.type == UNANSWERABLE else None
    return f"{UNANSWERABLE}/{reason}" if reason else question.type


def score(question: Any, answer: dict, names_of: dict[str, str]) -> Score:
    """Score an Answer dict; identity ids in ``persons`` are mapped to names with ``names_of``."""
    kind, truth = question.type, question.answer
    if kind == UNANSWERABLE or not getattr(question, "answerable", True):
        return _score_unanswerable(question, answer, names_of)
    if answer.get("status") == "error":
        return _unanswered(kind, "error: " + (answer.get("error") or "")[:60])
    reader = _READERS.get(kind)
    if reader is None:
        return _unanswered(kind, f"unknown type {kind}")
    if answer.get("status") == "no_answer":
        return _unanswered(kind, "no answer")
    ctx = ReadContext(question, names_of)
    text = answer.get("text") or ""
    value = reader[0](answer, ctx)
    if value is None:
        value = reader[1](text, ctx)
    if value is None:
        return _unanswered(kind, ("declined: " if declined(answer, kind) else "nothing readable: ") + _short(text))
    return reader[2](value, truth, ctx)


def _unanswered(kind: str, compared: str) -> Score:
    return Score(False, False, recall=0.0 if kind in RECALL_TYPES else None, compared=compared, answered=False)


def _score_unanswerable(question: Any, answer: dict, names_of: dict[str, str]) -> Score:
    if answer.get("status") == "error":
        return Score(False, False, compared="error", answered=False)
    imitated, text = question.answer.get("imitates", ""), answer.get("text") or ""
    reader, ctx = _READERS.get(imitated), ReadContext(question, names_of)
    value = reader[0](answer, ctx) if reader else None
    if value is None and reader and imitated in _TEXT_VALUE_TYPES:
        value = reader[1](text, ctx)
    # explicit: the text says it, or a no-answer's reason does ("I could not answer that." alone is not)
    reason = (answer.get("error") or "") if answer.get("status") == "no_answer" else ""
    explicit = says_explicit(text) or says_explicit(reason)
    ok = explicit and value is None
    compared = "declined" if ok else "answered: " + _short(text) if value is not None else \
        "no explicit 'not seen': " + _short(text)
    return Score(ok, ok, compared=compared, answered=explicit or value is not None)


def summarize(scores: dict[str, list[Score]]) -> dict[str, dict]:
    """Per category: n, answered (a value was read), accuracy and strict_accuracy (over all),
    mean_error and median_error (over the answered ones with an error; None if none), unit; for
    set types mean_recall over all (unanswered: 0) and mean_precision over the answered ones."""
    out = {}
    for kind, items in scores.items():
        answered = [s for s in items if s.answered]
        errors = [s.error for s in answered if s.error is not None]
        row = {"n": len(items), "answered": len(answered),
               "accuracy": sum(s.correct for s in items) / len(items) if items else 0.0,
               "strict_accuracy": sum(s.strict for s in items) / len(items) if items else 0.0,
               "mean_error": statistics.fmean(errors) if errors else None,
               "median_error": statistics.median(errors) if errors else None,
               "unit": next((s.unit for s in items if s.unit), "")}
        if any(s.precision is not None or s.recall is not None for s in items):
            precisions = [s.precision for s in answered if s.precision is not None]
            row["mean_precision"] = statistics.fmean(precisions) if precisions else None
            row["mean_recall"] = statistics.fmean((s.recall or 0.0) if s.answered else 0.0 for s in items)
        out[kind] = row
    return out


def _short(text: str, n: int = 60) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[:n] + "..."


# --- positions and rooms
def _position_field(answer: dict, ctx: ReadContext):
    pos = answer.get("position")
    if isinstance(pos, (list, tuple)) and len(pos) >= 2 and all(isinstance(v, (int, float)) for v in pos[:2]):
        return ("xy", float(pos[0]), float(pos[1]))
    room = answer.get("waypoint") or answer.get("room")
    return ("room", ctx.room_id(room)) if room else None


def _position_compare(value, truth: dict, ctx: ReadContext) -> Score:
    if value[0] == "room":
        ok = value[1] == truth.get("room")
        return Score(ok, False, compared=f"room {value[1] or '?'} (no position)")
    x, y = truth["position"][:2]
    err = math.hypot(value[1] - x, value[2] - y)
    return Score(err <= POSITION_M, err <= POSITION_STRICT_M, err, "m", compared=f"{err:.1f} m")


def _room_field(answer: dict, ctx: ReadContext):
    room = answer.get("room") or answer.get("waypoint")
    return ctx.room_id(room) if room else None


def _room_compare(value, truth: dict, ctx: ReadContext) -> Score:
    ok = value == truth["room"]
    return Score(ok, ok, compared=f"room {value or '?'} vs {truth['room']}")


# --- times
def _time_field(answer: dict, ctx: ReadContext):
    t = answer.get("time")
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None


def _time_compare(value: float, truth: dict, ctx: ReadContext) -> Score:
    err = abs(value - truth["time"]) / 60.0
    got = dt.datetime.fromtimestamp(value, tz=ctx.zone).strftime("%a %H:%M")
    return Score(err <= TIME_MIN, err <= TIME_STRICT_MIN, err, "min", compared=f"{got} ({err:.1f} min)")


def _habit_time_field(answer: dict, ctx: ReadContext):
    if isinstance(answer.get("minutes_of_day"), (int, float)):
        return float(answer["minutes_of_day"])
    t = _time_field(answer, ctx)
    return None if t is None else minutes_of_day(t, ctx.zone)


def _habit_time_compare(value: float, truth: dict, ctx: ReadContext) -> Score:
    diff = abs(value - truth["minutes_of_day"]) % 1440
    err = min(diff, 1440 - diff)
    got = f"{int(value // 60) % 24:02d}:{int(value % 60):02d}"
    return Score(err <= HABIT_TIME_MIN, err <= HABIT_TIME_STRICT_MIN, err, "min", compared=f"{got} ({err:.1f} min)")


# --- durations and counts
def _duration_field(answer: dict, ctx: ReadContext):
    d = answer.get("duration_minutes")
    return float(d) if isinstance(d, (int, float)) and not isinstance(d, bool) else None


def _duration_compare(value: float, truth: dict, ctx: ReadContext) -> Score:
    expected = truth["duration_minutes"]
    err = abs(value - expected)
    strict = err <= max(DURATION_STRICT_SHARE * expected, DURATION_STRICT_MIN)
    return Score(err <= DURATION_MIN, strict, err, "min", compared=f"{value:.1f} vs {expected:.1f} min")


def _count_field(answer: dict, ctx: ReadContext):
    count = answer.get("count")
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    persons = answer.get("persons") or []
    return len({ctx.name(p) for p in persons}) if persons else None


def _count_compare(value: int, truth: dict, ctx: ReadContext) -> Score:
    ok = value == truth["count"]
    return Score(ok, ok, compared=f"{value} vs {truth['count']}")


# --- yes / no
def _binary_field(answer: dict, ctx: ReadContext):
    value = str(answer.get("binary") or "").lower()
    return value if value in ("yes", "no") else None


def _binary_compare(value: str, truth: dict, ctx: ReadContext) -> Score:
    ok = value == truth["binary"]
    return Score(ok, ok, compared=f"{value} vs {truth['binary']}")


# --- sets
def _set_score(got: set[str], expected: set[str]) -> Score:
    hit = len(got & expected)
    precision = hit / len(got) if got else float(not expected)
    recall = hit / len(expected) if expected else float(not got)
    ok = got == expected
    return Score(ok, ok, precision=precision, recall=recall,
                 compared=", ".join(sorted(got)) or "nobody")


def _persons_field(answer: dict, ctx: ReadContext):
    persons = answer.get("persons") or []
    return {ctx.name(p) for p in persons} if persons else None


def _persons_compare(value: set[str], truth: dict, ctx: ReadContext) -> Score:
    return _set_score(value, {n.lower() for n in truth["persons"]})


def _who_first_field(answer: dict, ctx: ReadContext):
    persons = answer.get("persons") or []
    return ctx.name(persons[0]) if persons else None


def _who_first_compare(value: str, truth: dict, ctx: ReadContext) -> Score:
    ok = value == truth["person"].lower()
    return Score(ok, ok, compared=f"{value} vs {truth['person']}")


def _days_field(answer: dict, ctx: ReadContext):
    days = answer.get("days")
    return {str(d)[:10] for d in days} if isinstance(days, list) and days else None


def _days_compare(value: set[str], truth: dict, ctx: ReadContext) -> Score:
    return _set_score(value, set(truth["days"]))


# --- objects named in text
def _objects_compare(value: str, truth: dict, ctx: ReadContext) -> Score:
    share = keyword_match(truth["objects"], value)
    return Score(share >= TEXT_SHARE, share >= TEXT_SHARE, recall=share, compared=f"{share:.0%} of the objects named")


_Reader = tuple[Callable[[dict, ReadContext], Any], Callable[[str, ReadContext], Any],   # field, text, compare
                Callable[[Any, dict, ReadContext], Score]]
_READERS: dict[str, _Reader] = {
    **{k: (_position_field, read_position, _position_compare) for k in POSITION_TYPES},
    **{k: (_room_field, read_room, _room_compare) for k in ROOM_TYPES},
    **{k: (_time_field, read_time, _time_compare) for k in TIME_TYPES},
    "habit_time": (_habit_time_field, read_habit_time, _habit_time_compare),
    "duration": (_duration_field, read_duration, _duration_compare),
    "count": (_count_field, read_count, _count_compare),
    **{k: (_binary_field, read_binary, _binary_compare) for k in BINARY_TYPES},
    **{k: (_persons_field, read_persons, _persons_compare) for k in ("persons", "with_whom", "first_time")},
    "who_first": (_who_first_field, read_who_first, _who_first_compare),
    "absent_days": (_days_field, read_absent_days, _days_compare),
    "text": (lambda answer, ctx: None, read_objects, _objects_compare),
}


STOP_WORDS = frozenset({"a", "an", "the", "of", "and", "in", "on", "at", "i", "saw", "was", "were", "there", "is", "it"})


def keyword_match(expected: list[str], text: str) -> float:
    """Share of the expected names whose every word occurs in the answer text (lower case,
    punctuation removed, stop words ignored): the documented offline stand-in for LLM-Match."""
    words = set(re.findall(r"[a-z0-9]+", text.lower()))
    if not expected:
        return 0.0
    hits = [all(w in words for w in re.findall(r"[a-z0-9]+", name.lower()) if w not in STOP_WORDS)
            for name in expected]
    return sum(hits) / len(expected)
