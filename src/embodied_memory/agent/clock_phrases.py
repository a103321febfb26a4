"""Clock times and clock ranges of a question, and their windows on a day.

Reads (``read_clock`` for one clock time as written, ``read_clock_phrases`` for those of a
question):

- clock times: "15:00", "12.30", "3pm", "3 p.m.", "noon" / "midday" / "midnight", "half past
  two", "quarter to three", "ten past 4", "3 o'clock", and a bare hour after "at" / "around" /
  "since" ... ("at 3", not "at 3 people").  An hour without am/pm (1-12, no leading zero) is h
  or h + 12, whichever is the latest at or before now on the day named (no day: today or
  yesterday); a part of day named with it decides first ("at 9 this morning").  So asked at
  17:00 "at 2:30" is 14:30 today; asked at 09:00 "at 8" is 08:00 today and "at 10" is 22:00
  yesterday.  A clock time is ``calendar_windows.clock_window`` (+-900 s).
- clock ranges: "between 2pm and 4pm", "from 9 to 11", "from 10:00 until noon", "between 9 and
  10 this morning", "yesterday between 14:00 and 15:30" are the range itself; readings without
  am/pm are paired to a span of at most 12 h when one exists, and the day is chosen as for one
  clock time by the range's start.

``clock_phrase_window`` is the window of one such phrase on the latest of the candidate days.
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Optional

from ..calendar_windows import PARTS_OF_DAY, clock_time, clock_window, latest_clock_time
from .time_words import FOLLOW_OK, HOUR_WORDS, PART_AFTER, blank, extend_left

_MINUTE_WORDS = {"half": 30, "quarter": 15, "a quarter": 15, "five": 5, "ten": 10, "twenty": 20,
                 "twenty-five": 25, "twenty five": 25}

# -- clock times (forms tried in this order; unnamed groups, read by read_clock) ------------------
_HOUR = "(" + "|".join(HOUR_WORDS) + r"|\d{1,2})"
_MER = r"(?:\s?([ap])\.?m\b\.?)"
_END = rf"(?:{_MER}|(?!\w))"
_MINUTES = "|".join(sorted(_MINUTE_WORDS, key=len, reverse=True))
_CLOCK_FORMS = {
    "past": rf"({_MINUTES}|\d{{1,2}})(?: minutes?)? (past|after) (?:{_HOUR}|(noon|midnight)){_END}",
    "to": rf"({_MINUTES}|\d{{1,2}} minutes?) (to) (?:{_HOUR}|(noon|midnight)){_END}",   # not "from 5 to 6"
    "hm": rf"(\d{{1,2}})([:.])(\d{{2}}){_END}",
    "oclock": rf"{_HOUR} ?o'?clock{_END}",
    "named": r"(noon|midday|midnight)(?!\w)",
    "hour": rf"{_HOUR}{_END}",
}
_CLOCK_FORM_RES = {name: re.compile(form) for name, form in _CLOCK_FORMS.items()}
_ANY_CLOCK = "(?:" + "|".join(_CLOCK_FORMS.values()) + ")"
_CLOCK = re.compile(rf"(?<![\w:./-]){_ANY_CLOCK}")
_RANGE = re.compile(rf"\b(?:between|from) (?P<a>{_ANY_CLOCK}) ?(?:and|to|until|till|through|-) ?(?P<b>{_ANY_CLOCK})")
# a bare hour ("at 3") or a dotted clock ("12.30") is a clock time only after one of these
# (and before time_words.FOLLOW_OK)
_CLOCK_PREP_BEFORE = re.compile(r"\b(?:at|around|about|approximately|roughly|by|since|after|before|until|till)"
                                r" $")


@dataclass(frozen=True)
class Clock:
    """A clock time as written: ``minutes`` after midnight; ``twelve_hour``: no am/pm on an hour of
    1-12, so it is ``minutes`` (< 720) or ``minutes + 720``; ``needs_context``: a bare hour ("3")
    or a dotted one ("12.30"), a clock time only where the words around it say so."""
    minutes: int
    twelve_hour: bool = False
    needs_context: bool = False


def _clock(hour: int, minute: int, meridiem: Optional[str], leading_zero: bool = False) -> Optional[Clock]:
    if not 0 <= minute < 60:
        return None
    if meridiem:
        return Clock((hour % 12) * 60 + minute + (720 if meridiem == "p" else 0)) if 1 <= hour <= 12 else None
    if not 0 <= hour <= 23:
        return None
    if 1 <= hour <= 12 and not leading_zero:
        return Clock((hour % 12) * 60 + minute, twelve_hour=True)
    return Clock(hour * 60 + minute)


def _number(word: str, words: dict[str, int]) -> int:
    return int(word) if word.isdigit() else words[word]


def read_clock(text: str) -> Optional[Clock]:
    """The clock time ``text`` (one of ``_CLOCK_FORMS``) names; None when it is impossible ("25:99")."""
    for name, form in _CLOCK_FORM_RES.items():
        f = form.fullmatch(text)
        if f:
            break
    else:
        return None
    g = f.groups()
    if name == "named":
        return Clock(0 if g[0] == "midnight" else 720)
    if name == "hm":
        c = _clock(int(g[0]), int(g[2]), g[3], leading_zero=len(g[0]) == 2 and g[0][0] == "0")
        return Clock(c.minutes, c.twelve_hour, g[1] == "." and not g[3]) if c else None
    if name in ("oclock", "hour"):
        c = _clock(_number(g[0], HOUR_WORDS), 0, g[1])
        return Clock(c.minutes, c.twelve_hour, name == "hour" and not g[1]) if c else None
    # "half past two", "ten to five", "quarter to noon", "20 minutes to 3"
    words, direction, hour, named, meridiem = g
    offset = _number(re.sub(r" minutes?$", "", words), _MINUTE_WORDS) * (-1 if direction == "to" else 1)
    if abs(offset) >= 60:
        return None
    c = Clock(0 if named == "midnight" else 720) if named else _clock(_number(hour, HOUR_WORDS), 0, meridiem)
    if c is None:
        return None
    return Clock((c.minutes + offset) % (720 if c.twelve_hour else 1440), c.twelve_hour)


def in_clock_context(m: str, start: int, end: int) -> bool:
    """A bare hour or dotted clock is one after "at" / "since" ... and before a word that goes with
    a time, or before a part of day ("8 in the evening")."""
    return bool(PART_AFTER.match(m, end) or (_CLOCK_PREP_BEFORE.search(m, 0, start) and FOLLOW_OK.match(m, end)))


def _readings(c: Clock, part: Optional[str], next_morning: bool) -> list[int]:
    """The minutes after midnight ``c`` may be: both readings of a twelve-hour clock, those inside
    ``part`` first (when any are); ``next_morning``: a morning hour of a night is on the next day."""
    readings = [c.minutes, c.minutes + 720] if c.twelve_hour else [c.minutes]
    if part:
        lo, hi = (h * 60 for h in PARTS_OF_DAY[part])
        readings = [r for r in readings if lo <= r < hi or lo <= r + 1440 < hi] or readings
    if next_morning and part == "night":
        readings = [r + 1440 if r < 720 else r for r in readings]
    return readings


@dataclass
class ClockPhrase:
    """A clock time (``until`` None) or a clock range read from the question: ``span`` of the
    clock words, ``phrase_start`` with the prepositions before them."""
    span: tuple[int, int]
    phrase_start: int
    at: Clock
    until: Optional[Clock] = None


def read_clock_phrases(m: str) -> list[ClockPhrase]:
    """Clock ranges, then single clock times outside them, in order."""
    out = []
    for r in _RANGE.finditer(m):
        a, b = read_clock(r.group("a")), read_clock(r.group("b"))
        if a and b and (not b.needs_context or FOLLOW_OK.match(m, r.end()) or PART_AFTER.match(m, r.end())):
            out.append(ClockPhrase(r.span(), extend_left(m, r.start()), a, b))
    taken = blank(m, [c.span for c in out])
    for t in _CLOCK.finditer(taken):
        c = read_clock(t.group(0))
        if c and (not c.needs_context or in_clock_context(taken, t.start(), t.end())):
            out.append(ClockPhrase(t.span(), extend_left(m, t.start()), c))
    return sorted(out, key=lambda c: c.span)


def clock_phrase_window(c: ClockPhrase, days: list[dt.date], part: Optional[str], next_morning: bool, now: float,
                        zone) -> tuple[float, float]:
    """The window of a clock time or range on the latest of ``days`` (and reading) not after now."""
    starts = _readings(c.at, part, next_morning)
    if c.until is None:
        day, minute = latest_clock_time(days, starts, now, zone)
        return clock_window(day, minute // 60, minute % 60, zone)
    ends: dict[int, int] = {}
    pairs = [(s, e if e > s else e + 1440) for s in starts for e in _readings(c.until, part, next_morning)]
    for s, e in [p for p in pairs if p[1] - p[0] <= 720] or pairs:   # ambiguous readings: 12 h at most
        ends[s] = min(ends.get(s, e), e)
    day, minute = latest_clock_time(days, ends, now, zone)
    return clock_time(day, minute // 60, minute % 60, zone), clock_time(day, ends[minute] // 60, ends[minute] % 60, zone)
