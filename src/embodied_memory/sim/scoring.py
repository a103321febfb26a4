"""Scoring benchmark v2 answers against ``questions_v2`` questions.

``correct`` uses PersonEQA's thresholds (HUMEMBR): a position within 5 m, a time or duration
within 5 min, sets, yes/no, counts and days exact; a usual lunch time within 15 min; a room
(where now, usual workplace) right.  ``strict`` is tighter: 2 m, 1 min, a duration within 20 %
(at least 1 min), a lunch time within 5 min; the rest as ``correct``.  ``error`` is in metres
or minutes (LVMem reports mean errors).

An answer is read from its fields first (``agent.answer.Answer.to_dict()``: position,
waypoint, time, duration_minutes, binary, persons; also "count", "days", "room" where a
planner gives them), then from its text (numbers, HH:MM clock times, ISO dates, weekday names,
room labels, names via ``names_of``).  An answerable question answered with status
"no_answer", or with only a "don't know / not seen / no record" text, is wrong; an unanswerable
question is right only for such an explicit answer.  For yes/no and day questions a "did not
see" text is an answer ("no"; the days named), not a refusal.
"""
from __future__ import annotations

import datetime as dt
import math
import re
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..calendar_windows import WEEKDAYS, clock_time, local_date, weekday_date
from .questions_v2 import UNANSWERABLE, zone_from_name
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

_UNKNOWN = re.compile(r"\b(i (do not|don'?t|dont) know|not sure|no idea|unsure|(can ?not|can'?t|could ?not|"
                      r"couldn'?t|unable to) (answer|tell|say|determine)|no information|not enough information|"
                      r"insufficient)\b")
_NOT_SEEN = re.compile(r"\b(not (been )?seen|never (saw|seen|observed|noticed)|(have|has|had)(n'?t| not) (been )?"
                       r"(seen|observed|spotted|noticed)|(did|do)(n'?t| not) (see|observe|spot|notice)|no (record|"
                       r"records|sighting|sightings|observation|observations|memory|trace)|(could|can)(n'?t| ?not) "
                       r"find|(do|did)(n'?t| not) recogni[sz]e|no ?one (called|named|by that name)|nobody (called|"
                       r"named|by that name)|unknown person)\b")
_WORDS = {"zero": 0, "no": 0, "none": 0, "one": 1, "a": 1, "an": 1, "two": 2, "three": 3, "four": 4, "five": 5,
          "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
          "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
          "twenty": 20, "thirty": 30, "forty": 40, "forty-five": 45, "fifty": 50, "sixty": 60, "ninety": 90}
_NUMBER = r"(\d+(?:\.\d+)?|" + "|".join(sorted((w for w in _WORDS if w != "no"), key=len, reverse=True)) + r")"
_BARE_NUMBER = r"(\d+(?:\.\d+)?|" + "|".join(sorted((w for w in _WORDS if w not in ("no", "a", "an")), key=len,
                                                       reverse=True)) + r")"   # "a while" is no number
_CLOCK = re.compile(r"\b(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\s*([ap])\.?\s?m\b\.?)?|\b(\d{1,2})\s*([ap])\.?\s?m\b\.?"
                    r"|\b(noon|midday|midnight)\b", re.I)
_ISO_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?")
_ISO_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_DURATION = re.compile(r"\b" + _NUMBER + r"\s*(hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b")


@dataclass
class Score:
    """How one answer compares with the truth."""
    correct: bool                      # PersonEQA thresholds
    strict: bool                       # the tight thresholds
    error: Optional[float] = None      # metres or minutes; None where not measurable
    unit: str = ""                     # "m" | "min" | ""
    precision: Optional[float] = None  # set types
    recall: Optional[float] = None
    compared: str = ""                 # what was compared, for the report

    def __post_init__(self):
        self.strict = bool(self.strict and self.correct)   # strict implies correct


def declined(answer: dict, kind: str = "") -> bool:
    """Status "no_answer", or a text that says "don't know" / "not seen" (for yes/no and day
    questions only "don't know": "I did not see her" answers them)."""
    if answer.get("status") == "no_answer":
        return True
    text = (answer.get("text") or "").lower()
    return bool(_UNKNOWN.search(text) or (kind not in NEGATIVE_ANSWER_TYPES and _NOT_SEEN.search(text)))


def score(question: Any, answer: dict, names_of: dict[str, str]) -> Score:
    """Score an Answer dict; identity ids in ``persons`` are mapped to names with ``names_of``."""
    kind, truth = question.type, question.answer
    if kind == UNANSWERABLE or not getattr(question, "answerable", True):
        return _score_unanswerable(question, answer, names_of)
    if answer.get("status") == "error":
        return Score(False, False, compared="error: " + (answer.get("error") or "")[:60])
    reader = _READERS.get(kind)
    if reader is None:
        return Score(False, False, compared=f"unknown type {kind}")
    if answer.get("status") == "no_answer":
        return Score(False, False, compared="no answer")
    ctx = _Context(question, names_of)
    value = reader[0](answer, ctx)
    if value is None:
        if declined(answer, kind):
            return Score(False, False, compared="declined: " + _short(answer.get("text", "")))
        value = reader[1](answer.get("text") or "", ctx)
        if value is None:
            return Score(False, False, compared="nothing readable: " + _short(answer.get("text", "")))
    return reader[2](value, truth, ctx)


def _score_unanswerable(question: Any, answer: dict, names_of: dict[str, str]) -> Score:
    imitated = question.answer.get("imitates", "")
    if answer.get("status") == "error":
        return Score(False, False, compared="error")
    reader = _READERS.get(imitated)
    answered = reader is not None and reader[0](answer, _Context(question, names_of)) is not None
    ok = answer.get("status") == "no_answer" or (declined(answer) and not answered)
    return Score(ok, ok, compared="declined" if ok else "answered: " + _short(answer.get("text", "")))


def summarize(scores: dict[str, list[Score]]) -> dict[str, dict]:
    """Per question type: n, accuracy, strict_accuracy, mean_error and median_error (over the
    answers with an error; None if none), unit, and for set types mean_precision, mean_recall."""
    out = {}
    for kind, items in scores.items():
        errors = [s.error for s in items if s.error is not None]
        row = {"n": len(items),
               "accuracy": sum(s.correct for s in items) / len(items) if items else 0.0,
               "strict_accuracy": sum(s.strict for s in items) / len(items) if items else 0.0,
               "mean_error": statistics.fmean(errors) if errors else None,
               "median_error": statistics.median(errors) if errors else None,
               "unit": next((s.unit for s in items if s.unit), "")}
        precisions = [s.precision for s in items if s.precision is not None]
        recalls = [s.recall for s in items if s.recall is not None]
        if precisions or recalls:
            row["mean_precision"] = statistics.fmean(precisions) if precisions else None
            row["mean_recall"] = statistics.fmean(recalls) if recalls else None
        out[kind] = row
    return out


class _Context:
    """What reading an answer needs: the question's zone and dates, the names to look for."""

    def __init__(self, question: Any, names_of: dict[str, str]):
        self.question, self.names_of = question, names_of
        self.zone = zone_from_name(question.answer.get("tz", "UTC"))
        self.asked_day = local_date(question.asked_at, self.zone)
        truth = question.answer
        self.names = {n.lower() for n in names_of.values()} | {n.lower() for n in truth.get("persons", [])} \
            | {n.lower() for n in truth.get("options", [])} | ({truth["person"].lower()} if "person" in truth else set())

    def name(self, ident: Any) -> str:
        return str(self.names_of.get(ident, ident)).lower()

    def names_in(self, text: str) -> list[str]:
        """Known names in ``text``, in order of first mention."""
        low = text.lower()
        found = [(m.start(), n) for n in self.names if (m := re.search(r"\b" + re.escape(n) + r"\b", low))]
        return [n for _, n in sorted(found)]

    def day_in(self, text: str) -> Optional[dt.date]:
        """The first date named in ``text``: an ISO date, today / yesterday, or a weekday (the
        most recent one on or before the asking day)."""
        low = text.lower()
        hits = []
        if m := _ISO_DATE.search(low):
            hits.append((m.start(), dt.date.fromisoformat(m.group(1))))
        for word, back in (("today", 0), ("yesterday", 1)):
            if (i := low.find(word)) >= 0:
                hits.append((i, self.asked_day - dt.timedelta(days=back)))
        for day in WEEKDAYS:
            if m := re.search(r"\b" + day + r"\b", low):
                hits.append((m.start(), weekday_date(day, self.asked_day)))
        return min(hits)[1] if hits else None

    def days_in(self, text: str) -> list[str]:
        low = text.lower()
        days = {m.group(1) for m in _ISO_DATE.finditer(low)}
        days |= {(self.asked_day - dt.timedelta(days=back)).isoformat()
                 for word, back in (("today", 0), ("yesterday", 1)) if re.search(r"\b" + word + r"\b", low)}
        days |= {weekday_date(d, self.asked_day).isoformat() for d in WEEKDAYS if re.search(r"\b" + d + r"s?\b", low)}
        return sorted(days)


def _short(text: str, n: int = 60) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[:n] + "..."


def _room_id(value: Any) -> str:
    text = re.sub(r"[\s\-]+", "_", str(value or "").strip().lower())
    return text[4:] if text.startswith("the_") else text


def _label(room: str) -> str:
    return room.replace("_", " ")


def _room_in_text(text: str, room: str) -> Optional[str]:
    """The truth room if its label is named in ``text``; "" for a text naming no such room."""
    if not text.strip():
        return None
    return room if room and re.search(r"\b" + re.escape(_label(room)) + r"\b", text.lower()) else ""


# --- positions and rooms
def _position_field(answer: dict, ctx: _Context):
    pos = answer.get("position")
    if isinstance(pos, (list, tuple)) and len(pos) >= 2 and all(isinstance(v, (int, float)) for v in pos[:2]):
        return ("xy", float(pos[0]), float(pos[1]))
    room = answer.get("waypoint") or answer.get("room")
    return ("room", _room_id(room)) if room else None


def _position_text(text: str, ctx: _Context):
    if m := re.search(r"[\[(]\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)", text):
        return ("xy", float(m.group(1)), float(m.group(2)))
    room = _room_in_text(text, ctx.question.answer.get("room", ""))
    return None if room is None else ("room", room)


def _position_compare(value, truth: dict, ctx: _Context) -> Score:
    if value[0] == "room":
        ok = value[1] == truth.get("room")
        return Score(ok, False, compared=f"room {value[1] or '?'} (no position)")
    x, y = truth["position"][:2]
    err = math.hypot(value[1] - x, value[2] - y)
    return Score(err <= POSITION_M, err <= POSITION_STRICT_M, err, "m", compared=f"{err:.1f} m")


def _room_field(answer: dict, ctx: _Context):
    room = answer.get("room") or answer.get("waypoint")
    return _room_id(room) if room else None


def _room_text(text: str, ctx: _Context):
    return _room_in_text(text, ctx.question.answer["room"])


def _room_compare(value, truth: dict, ctx: _Context) -> Score:
    ok = value == truth["room"]
    return Score(ok, ok, compared=f"room {value or '?'} vs {truth['room']}")


# --- times
def _time_field(answer: dict, ctx: _Context):
    t = answer.get("time")
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None


def _clock_in(text: str) -> Optional[tuple[int, int, int]]:
    """The first clock time in ``text`` as (hour, minute, second)."""
    m = _CLOCK.search(text)
    if not m:
        return None
    if m.group(7):
        return (0 if m.group(7).lower() == "midnight" else 12), 0, 0
    hour = int(m.group(1) or m.group(5))
    minute, second = int(m.group(2) or 0), int(m.group(3) or 0)
    half = (m.group(4) or m.group(6) or "").lower()
    if half == "p" and hour < 12:
        hour += 12
    elif half == "a" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59 or second > 59:
        return None
    return hour, minute, second


def _time_text(text: str, ctx: _Context):
    if m := _ISO_TIME.search(text):
        try:
            parsed = dt.datetime.fromisoformat(m.group(0).replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None:
            return (parsed if parsed.tzinfo else parsed.replace(tzinfo=ctx.zone)).timestamp()
    clock = _clock_in(text)
    if clock is None:
        return None
    truth_day = local_date(ctx.question.answer["time"], ctx.zone)
    default = ctx.asked_day if ctx.question.type == "first_seen" else truth_day   # the day is the question there
    day = ctx.day_in(text) or default
    return clock_time(day, clock[0], clock[1], ctx.zone, clock[2])


def _time_compare(value: float, truth: dict, ctx: _Context) -> Score:
    err = abs(value - truth["time"]) / 60.0
    got = dt.datetime.fromtimestamp(value, tz=ctx.zone).strftime("%a %H:%M")
    return Score(err <= TIME_MIN, err <= TIME_STRICT_MIN, err, "min", compared=f"{got} ({err:.1f} min)")


def _habit_time_field(answer: dict, ctx: _Context):
    if isinstance(answer.get("minutes_of_day"), (int, float)):
        return float(answer["minutes_of_day"])
    t = _time_field(answer, ctx)
    return None if t is None else minutes_of_day(t, ctx.zone)


def _habit_time_text(text: str, ctx: _Context):
    clock = _clock_in(text)
    return None if clock is None else clock[0] * 60 + clock[1] + clock[2] / 60.0


def _habit_time_compare(value: float, truth: dict, ctx: _Context) -> Score:
    diff = abs(value - truth["minutes_of_day"]) % 1440
    err = min(diff, 1440 - diff)
    got = f"{int(value // 60) % 24:02d}:{int(value % 60):02d}"
    return Score(err <= HABIT_TIME_MIN, err <= HABIT_TIME_STRICT_MIN, err, "min", compared=f"{got} ({err:.1f} min)")


# --- durations and counts
def _duration_field(answer: dict, ctx: _Context):
    d = answer.get("duration_minutes")
    return float(d) if isinstance(d, (int, float)) and not isinstance(d, bool) else None


def _number(word: str) -> float:
    return float(word) if word[0].isdigit() else float(_WORDS[word])


def _duration_text(text: str, ctx: _Context):
    low = _CLOCK.sub(" ", text.lower())
    total, found = 0.0, False
    if re.search(r"\bhalf an hour\b", low):
        total, found = 30.0, True
        low = re.sub(r"\bhalf an hour\b", " ", low)
    for m in _DURATION.finditer(low):
        unit = m.group(2)
        scale = 60.0 if unit.startswith("h") else 1 / 60 if unit.startswith("s") else 1.0
        total += _number(m.group(1)) * scale
        if scale == 60.0 and low[m.end():m.end() + 13].strip().startswith("and a half"):
            total += 30.0
        found = True
    if not found and (m := re.search(r"\b" + _BARE_NUMBER + r"\b", low)):
        return _number(m.group(1))          # a bare number: minutes
    return total if found else None


def _duration_compare(value: float, truth: dict, ctx: _Context) -> Score:
    expected = truth["duration_minutes"]
    err = abs(value - expected)
    strict = err <= max(DURATION_STRICT_SHARE * expected, DURATION_STRICT_MIN)
    return Score(err <= DURATION_MIN, strict, err, "min", compared=f"{value:.1f} vs {expected:.1f} min")


def _count_field(answer: dict, ctx: _Context):
    count = answer.get("count")
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    persons = answer.get("persons") or []
    return len({ctx.name(p) for p in persons}) if persons else None


def _count_text(text: str, ctx: _Context):
    low = _ISO_DATE.sub(" ", _CLOCK.sub(" ", text.lower()))
    if re.search(r"\b(nobody|no one|no-one)\b", low):
        return 0
    m = re.search(r"\b" + _BARE_NUMBER + r"\b", low)
    return int(_number(m.group(1))) if m else None


def _count_compare(value: int, truth: dict, ctx: _Context) -> Score:
    ok = value == truth["count"]
    return Score(ok, ok, compared=f"{value} vs {truth['count']}")


# --- yes / no
def _binary_field(answer: dict, ctx: _Context):
    value = str(answer.get("binary") or "").lower()
    return value if value in ("yes", "no") else None


def _binary_text(text: str, ctx: _Context):
    low = text.strip().lower()
    if re.match(r"^\W*(yes|yeah|yep|correct|indeed|affirmative)\b", low):
        return "yes"
    if re.match(r"^\W*(no|nope|not|never)\b", low) or _NOT_SEEN.search(low):
        return "no"
    return None


def _binary_compare(value: str, truth: dict, ctx: _Context) -> Score:
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


def _persons_field(answer: dict, ctx: _Context):
    persons = answer.get("persons") or []
    return {ctx.name(p) for p in persons} if persons else None


def _persons_text(text: str, ctx: _Context):
    names = ctx.names_in(text)
    return set(names) if names else None


def _persons_compare(value: set[str], truth: dict, ctx: _Context) -> Score:
    return _set_score(value, {n.lower() for n in truth["persons"]})


def _who_first_field(answer: dict, ctx: _Context):
    persons = answer.get("persons") or []
    return ctx.name(persons[0]) if persons else None


def _who_first_text(text: str, ctx: _Context):
    options = [o.lower() for o in ctx.question.answer.get("options", [])]
    named = [n for n in ctx.names_in(text) if not options or n in options]
    return named[0] if named else None


def _who_first_compare(value: str, truth: dict, ctx: _Context) -> Score:
    ok = value == truth["person"].lower()
    return Score(ok, ok, compared=f"{value} vs {truth['person']}")


def _days_field(answer: dict, ctx: _Context):
    days = answer.get("days")
    return {str(d)[:10] for d in days} if isinstance(days, list) and days else None


def _days_text(text: str, ctx: _Context):
    days = ctx.days_in(text)
    return set(days) if days else None


def _days_compare(value: set[str], truth: dict, ctx: _Context) -> Score:
    return _set_score(value, set(truth["days"]))


# --- objects named in text
def _objects_text(text: str, ctx: _Context):
    return text if text.strip() else None


def _objects_compare(value: str, truth: dict, ctx: _Context) -> Score:
    share = keyword_match(truth["objects"], value)
    return Score(share >= TEXT_SHARE, share >= TEXT_SHARE, recall=share, compared=f"{share:.0%} of the objects named")


_Reader = tuple[Callable[[dict, _Context], Any], Callable[[str, _Context], Any], Callable[[Any, dict, _Context], Score]]
_READERS: dict[str, _Reader] = {
    **{k: (_position_field, _position_text, _position_compare) for k in POSITION_TYPES},
    **{k: (_room_field, _room_text, _room_compare) for k in ROOM_TYPES},
    **{k: (_time_field, _time_text, _time_compare) for k in TIME_TYPES},
    "habit_time": (_habit_time_field, _habit_time_text, _habit_time_compare),
    "duration": (_duration_field, _duration_text, _duration_compare),
    "count": (_count_field, _count_text, _count_compare),
    **{k: (_binary_field, _binary_text, _binary_compare) for k in BINARY_TYPES},
    **{k: (_persons_field, _persons_text, _persons_compare) for k in ("persons", "with_whom", "first_time")},
    "who_first": (_who_first_field, _who_first_text, _who_first_compare),
    "absent_days": (_days_field, _days_text, _days_compare),
    "text": (lambda answer, ctx: None, _objects_text, _objects_compare),
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
