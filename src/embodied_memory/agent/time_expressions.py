"""Time phrases of a memory question as one window of UNIX time (``TimeExpression``).

Relative days ("today", "yesterday", "last night", weekdays) are resolved by ``dateparser``
(``search_dates``, English, relative to the asking time in the asking zone, past preferred;
called under a module lock, it has had thread-safety bugs).  Everything else is own code, and
every window is built by ``embodied_memory.calendar_windows`` from local dates and clock fields,
so it is right on daylight-saving change days (a day is 23 or 25 h, "yesterday at 3pm" is 15:00
local).

Which phrases count (the explicit filter): ``dateparser`` is only shown the day tokens of the
question (``_DAY_TOKEN``) and the prepositions right before them; every other character is
blanked, and a match is accepted only when it holds a day token.  So "floor 3 yesterday" cannot
become 03:00, a person called May or June is no month, "now", "second", "a few minutes", "how
long" are never a window.  "last" belongs to a phrase only before a unit or a day name ("last
week", "last friday", "last 3 hours"): "who arrived last today" reads "today".

Own code (measured against dateparser and ctparse in bench/time_parsers.py):

- clock times (``_read_clock``): "15:00", "12.30", "3pm", "3 p.m.", "noon" / "midday" /
  "midnight", "half past two", "quarter to three", "ten past 4", "3 o'clock", and a bare hour
  after "at" / "around" / "since" ... ("at 3", not "at 3 people").  An hour without am/pm
  (1-12, no leading zero) is h or h + 12, whichever is the latest at or before now on the
  day named (no day: today or yesterday); a part of day named with it decides first ("at 9
  this morning").  So asked at 17:00 "at 2:30" is 14:30 today; asked at 09:00 "at 8" is 08:00
  today and "at 10" is 22:00 yesterday.  A clock time is ``clock_window`` (+-900 s).
- clock ranges: "between 2pm and 4pm", "from 9 to 11", "from 10:00 until noon", "between 9 and
  10 this morning", "yesterday between 14:00 and 15:30" are the range itself (granularity
  "clock"); readings without am/pm are paired to a span of at most 12 h when one exists, and
  the day is chosen as for one clock time by the range's start.
- dates: "march 29", "the 3rd of may", "29 march 2025", "2026-03-28", "on the 31st" (this
  month's, or last month's when it is still to come).  The most recent such date on or before
  today; an impossible one ("february 30th", "the 31st" of a 30-day month) is no window.
- parts of day are windows (``PARTS_OF_DAY``: morning 06-12, afternoon 12-18, evening 18-24,
  night 18-06, lunchtime 12-14 for "at lunch(time)" / "over lunch").  A bare part ("in the
  evening") that has not begun today is yesterday's; "this evening" is today's (empty before
  18:00); "tonight" asked before 06:00 is the night that began yesterday evening.
- a bare weekday ("on Monday", "Monday,", "on Tue") is the most recent such day on or before
  today (``weekday_date``): asked on a Monday, "on Monday" is today, where dateparser says a week
  ago.  "last Friday" keeps dateparser's reading: the most recent Friday before today.
- "the day before yesterday" (dateparser: yesterday) and "N days ago" (that calendar day).
- "in the last / past N minutes|hours|days|weeks", "the past week", "past week" (the last 7
  days, elapsed; dateparser: a point); "N minutes / hours ago" (elapsed time, +- half a unit);
  "N weeks ago" (that calendar week).
- "this week" (Monday 00:00 local .. now), "last week" (the previous Monday .. Sunday),
  "(over / at / this / last) weekend" (Saturday 00:00 .. Monday 00:00 of the most recent
  weekend on or before today; "last weekend" on a Saturday or Sunday is the one before).
- "since X" (X's start .. now), "after X" / "before X" (within X's day for a clock or part,
  after a day: its end .. now, before a day: 0 .. its start).
- any window is clipped to [0, now] (a window wholly in the future is empty at now); one that
  ends at or before the UNIX epoch, or a count too large for the calendar ("10000000000000
  days ago"), is no window (None): callers read end = 0 as "no end".

``unread_time_words`` lists the time-like words a question holds that its expression does not
cover, so that a caller can say it could not read them instead of searching a wider window.

``dateparser`` is imported on first use (about 0.2 s, plus about 0.25 s for its first search);
``warm_up()`` pays that up front.
"""
from __future__ import annotations

import datetime as dt
import functools
import logging
import re
import threading
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..calendar_windows import (MONTHS, PARTS_OF_DAY, UNIT_SECONDS, WEEKDAYS, TimeZone, as_zone, clock_time,
                                clock_window, day_of_month_date, day_window, days_window, latest_clock_time,
                                local_date, month_day_date, part_of_day_window, recent_window, week_start,
                                week_window, weekday_date)

log = logging.getLogger(__name__)

GRANULARITIES = ("clock", "part", "day", "days", "week", "recent")


@dataclass
class TimeExpression:
    """The window a question's time phrases name.  ``start`` .. ``end`` in UNIX seconds, with
    0 <= start <= end <= the asking time and end > 0; ``phrases``: the matched substrings of the
    question, in order; ``granularity``: "clock" (a clock time +- a margin, a clock range, or
    "N minutes ago"), "part" (a part of a day, or within a day before / after a clock time),
    "day" (one calendar day), "days" (several whole days: a weekend, everything before a day),
    "week" (a calendar week) or "recent" (a span that ends now: "in the last 2 hours", "since
    Monday"; "this week" is "week")."""
    start: float
    end: float
    phrases: list[str] = field(default_factory=list)
    granularity: str = "day"


class _Unreadable(Exception):
    """A time phrase that names no possible window (February 30, 10**13 days ago)."""


# -- words ----------------------------------------------------------------------------------------
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
            "thirty": 30, "forty": 40, "forty-five": 45, "fifty": 50, "sixty": 60, "ninety": 90,
            "a few": 3, "few": 3, "a couple of": 2, "a couple": 2, "couple of": 2}
_COUNT = r"(\d+|" + "|".join(sorted((re.escape(w) for w in _NUMBERS), key=len, reverse=True)) + r")"
_HOUR_WORDS = {w: _NUMBERS[w] for w in ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                                        "ten", "eleven", "twelve")}
_MINUTE_WORDS = {"half": 30, "quarter": 15, "a quarter": 15, "five": 5, "ten": 10, "twenty": 20,
                 "twenty-five": 25, "twenty five": 25}
_WEEKDAY_ABBR = {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4, "sat": 5,
                 "sun": 6}
_MONTH_ABBR = {"sept": 9, **{name[:3]: i for i, name in enumerate(MONTHS, 1)}}
_MONTH = "(" + "|".join(sorted(MONTHS + tuple(_MONTH_ABBR), key=len, reverse=True)) + r")"
_WEEKDAY_NAME = r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?"
_PREP = r"(?:at|around|about|approximately|roughly|on|by|in the|during the|during|this|since|after|before|" \
        r"until|till|from|earlier)"
_MODIFIERS = {"since": "since", "after": "after", "before": "before", "until": "before", "till": "before"}

# day tokens: dateparser resolves them (a weekday abbreviation only after "on" / "last" /
# "since": "i sat", "the sun" are no days)
_DAY_TOKEN = re.compile(
    rf"\b(?:today|yesterday|last night|{_WEEKDAY_NAME}"
    r"|(?<=\bon )(?:" + "|".join(_WEEKDAY_ABBR) + r")|(?<=\blast )(?:" + "|".join(_WEEKDAY_ABBR) + r")"
    r"|(?<=\bsince )(?:" + "|".join(_WEEKDAY_ABBR) + r"))\b")
# parts of day: own windows (PARTS_OF_DAY); lunch only after a preposition ("what did bob eat for
# lunch", "when is his lunch break" name no time)
_PART_TOKEN = re.compile(r"\b(?:" + "|".join(p for p in PARTS_OF_DAY if p != "lunchtime") + r"|tonight"
                         r"|(?:at|over|during|after|before|since|around|by) (?:the )?lunch(?:time| ?break)?)\b")
_PREP_BEFORE = re.compile(rf"\b{_PREP} $")
_LAST_BEFORE = re.compile(r"\blast $")
# never time phrases, blanked before anything else ("good morning, where is bob")
_NOISE = re.compile(r"\bgood (?:morning|afternoon|evening|night)\b")

# -- clock times (forms tried in this order; unnamed groups, read by _read_clock) -----------------
_HOUR = "(" + "|".join(_HOUR_WORDS) + r"|\d{1,2})"
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
# a bare hour ("at 3") or a dotted clock ("12.30") is a clock time only after one of these ...
_CLOCK_PREP_BEFORE = re.compile(r"\b(?:at|around|about|approximately|roughly|by|since|after|before|until|till)"
                                r" $")
# ... and before the end, a comma or a word that goes with a time ("at 3 people" is none)
# ("about 3 in the kitchen" is a count, "at 3 in the afternoon" a time: _PART_AFTER)
_FOLLOW_OK = re.compile(rf"\s*(?:$|[,;!?)]|\.(?!\d)|(?:today|yesterday|tonight|last (?:night|week|{_WEEKDAY_NAME})"
                        rf"|on (?:{_WEEKDAY_NAME}|the \d|{_MONTH} \d)|and|or|sharp|exactly|precisely|between|from"
                        rf"|around|before|after|until|till|the day before|{_COUNT} (?:day|week)s? ago"
                        rf"|{_WEEKDAY_NAME})\b)")
# after a date ("on may 3 in the lab"; not "may 3 times")
_DATE_FOLLOW_OK = re.compile(rf"{_FOLLOW_OK.pattern}|\s+(?:in|at|during|when)\b")
_PART_AFTER = re.compile(r"\s*(?:(?:in the|this) (?:morning|afternoon|evening)|at night|tonight)\b")

# -- own ranges (the first that matches is the window) --------------------------------------------
# "in the last 2 hours", "the past hour", "past week", "within the last few days", "last 24 hours"
# (not "last week")
_RECENT = re.compile(rf"\b(?:(?:(?:in|during|within|over|for) (?:the )?|the )(?:last|past)|past) (?:{_COUNT} )?"
                     r"(minute|hour|day|week)s?\b"
                     rf"|\blast {_COUNT} (minute|hour|day|week)s?\b")
_ELAPSED_AGO = re.compile(rf"\b(?:(half an) hour|{_COUNT} (minute|hour)s?) ago\b")
_WEEKS_AGO = re.compile(rf"\b{_COUNT} weeks? ago\b")
_WEEK = re.compile(r"\b(?:(?:earlier|during|in) )?(this|last|previous) week\b")
_WEEKEND = re.compile(r"\b(?:(?:over|during|at|on|for|in) )?(this|last|past|previous|the) weekend\b")
_SINCE_BEFORE = re.compile(r"\bsince $")
# -- own days (combine with a part or a clock time) -----------------------------------------------
_DAY_BEFORE_YESTERDAY = re.compile(r"\b(?:on )?the day before yesterday\b")
_DAYS_AGO = re.compile(rf"\b{_COUNT} days? ago\b")
_ORDINAL = r"(\d{1,2})(?:st|nd|rd|th)?"
# month words that are also names or other words: a date only before a word that goes with a time
_NAME_MONTHS = {"may", "june", *_MONTH_ABBR}
_DATES = {
    "month day": re.compile(rf"\b{_MONTH}\.? (?:the )?{_ORDINAL}(?![\w:.])(?:,? (\d{{4}})\b)?"),
    "day month": re.compile(rf"\b(?:the )?{_ORDINAL} (?:of )?{_MONTH}\b(?:,? (\d{{4}})\b)?"),
    "iso": re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"),
    "the nth": re.compile(r"(?<=\bon )the (\d{1,2})(?:st|nd|rd|th)\b|(?<=\bsince )the (\d{1,2})(?:st|nd|rd|th)\b"),
}


def _count(word: Optional[str]) -> int:
    if word is None:
        return 1
    if word.isdigit():
        return int(word) if len(word) <= 12 else 10 ** 12
    return _NUMBERS[word]


def _blank(text: str, spans) -> str:
    for s, e in spans:
        text = text[:s] + " " * (e - s) + text[e:]
    return text


def _extend_left(text: str, start: int) -> int:
    """Start of the phrase that ends with the token at ``start``: prepositions before it included."""
    while True:
        m = _PREP_BEFORE.search(text, 0, start)
        if not m:
            return start
        start = m.start()


# -- dateparser -----------------------------------------------------------------------------------
@functools.cache
def _search_dates() -> Callable:
    from dateparser.search import search_dates
    return search_dates


_SETTINGS = {"PREFER_DATES_FROM": "past", "RETURN_AS_TIMEZONE_AWARE": False,
             "PARSERS": ["relative-time", "absolute-time"]}
_DATEPARSER_LOCK = threading.Lock()   # dateparser's caches have had thread-safety bugs upstream


def dateparser_matches(text: str, base: dt.datetime) -> list[tuple[str, dt.datetime]]:
    """``dateparser.search.search_dates`` of ``text`` (English, past preferred) relative to the
    naive local datetime ``base``, one call at a time; [] when it finds nothing."""
    search = _search_dates()
    with _DATEPARSER_LOCK:
        found = search(text, languages=["en"], settings={**_SETTINGS, "RELATIVE_BASE": base})
    return list(found or [])


def warm_up() -> None:
    """Import dateparser and run one search (about 0.5 s), so that the first question is fast."""
    dateparser_matches("yesterday", dt.datetime(2026, 1, 1, 12))


# -- clock times ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Clock:
    """A clock time as written: ``minutes`` after midnight; ``twelve_hour``: no am/pm on an hour of
    1-12, so it is ``minutes`` (< 720) or ``minutes + 720``; ``needs_context``: a bare hour ("3")
    or a dotted one ("12.30"), a clock time only where the words around it say so."""
    minutes: int
    twelve_hour: bool = False
    needs_context: bool = False


def _clock(hour: int, minute: int, meridiem: Optional[str], leading_zero: bool = False) -> Optional[_Clock]:
    if not 0 <= minute < 60:
        return None
    if meridiem:
        return _Clock((hour % 12) * 60 + minute + (720 if meridiem == "p" else 0)) if 1 <= hour <= 12 else None
    if not 0 <= hour <= 23:
        return None
    if 1 <= hour <= 12 and not leading_zero:
        return _Clock((hour % 12) * 60 + minute, twelve_hour=True)
    return _Clock(hour * 60 + minute)


def _number(word: str, words: dict[str, int]) -> int:
    return int(word) if word.isdigit() else words[word]


def _read_clock(text: str) -> Optional[_Clock]:
    """The clock time ``text`` (one of ``_CLOCK_FORMS``) names; None when it is impossible ("25:99")."""
    for name, form in _CLOCK_FORM_RES.items():
        f = form.fullmatch(text)
        if f:
            break
    else:
        return None
    g = f.groups()
    if name == "named":
        return _Clock(0 if g[0] == "midnight" else 720)
    if name == "hm":
        c = _clock(int(g[0]), int(g[2]), g[3], leading_zero=len(g[0]) == 2 and g[0][0] == "0")
        return _Clock(c.minutes, c.twelve_hour, g[1] == "." and not g[3]) if c else None
    if name in ("oclock", "hour"):
        c = _clock(_number(g[0], _HOUR_WORDS), 0, g[1])
        return _Clock(c.minutes, c.twelve_hour, name == "hour" and not g[1]) if c else None
    # "half past two", "ten to five", "quarter to noon", "20 minutes to 3"
    words, direction, hour, named, meridiem = g
    offset = _number(re.sub(r" minutes?$", "", words), _MINUTE_WORDS) * (-1 if direction == "to" else 1)
    if abs(offset) >= 60:
        return None
    c = _Clock(0 if named == "midnight" else 720) if named else _clock(_number(hour, _HOUR_WORDS), 0, meridiem)
    if c is None:
        return None
    return _Clock((c.minutes + offset) % (720 if c.twelve_hour else 1440), c.twelve_hour)


def _in_context(m: str, start: int, end: int) -> bool:
    """A bare hour or dotted clock is one after "at" / "since" ... and before a word that goes with
    a time, or before a part of day ("8 in the evening")."""
    return bool(_PART_AFTER.match(m, end) or (_CLOCK_PREP_BEFORE.search(m, 0, start) and _FOLLOW_OK.match(m, end)))


def _readings(c: _Clock, part: Optional[str], next_morning: bool) -> list[int]:
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
class _ClockPhrase:
    """A clock time (``until`` None) or a clock range read from the question."""
    span: tuple[int, int]
    phrase_start: int
    at: _Clock
    until: Optional[_Clock] = None


def _clock_phrases(m: str) -> list[_ClockPhrase]:
    """Clock ranges, then single clock times outside them, in order."""
    out = []
    for r in _RANGE.finditer(m):
        a, b = _read_clock(r.group("a")), _read_clock(r.group("b"))
        if a and b and (not b.needs_context or _FOLLOW_OK.match(m, r.end()) or _PART_AFTER.match(m, r.end())):
            out.append(_ClockPhrase(r.span(), _extend_left(m, r.start()), a, b))
    taken = _blank(m, [c.span for c in out])
    for t in _CLOCK.finditer(taken):
        c = _read_clock(t.group(0))
        if c and (not c.needs_context or _in_context(taken, t.start(), t.end())):
            out.append(_ClockPhrase(t.span(), _extend_left(m, t.start()), c))
    return sorted(out, key=lambda c: c.span)


def _clock_window(c: _ClockPhrase, days: list[dt.date], part: Optional[str], next_morning: bool, now: float,
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


# -- the parser -----------------------------------------------------------------------------------
@dataclass
class _Token:
    kind: str            # "day" | "part"
    span: tuple[int, int]
    phrase_start: int    # with the prepositions before it
    text: str


def _tokens(m: str) -> list[_Token]:
    out = []
    for kind, pattern in (("day", _DAY_TOKEN), ("part", _PART_TOKEN)):
        for t in pattern.finditer(m):
            start = t.start()
            if kind == "day" and _weekday_named(t.group(0)) is not None and _LAST_BEFORE.search(m, 0, start):
                start -= len("last ")   # "last friday"; "last" alone is no time
            out.append(_Token(kind, t.span(), _extend_left(m, start), t.group(0)))
    return sorted(out, key=lambda t: t.span)


def _phrases(q: str, spans: list[tuple[int, int]]) -> list[str]:
    """Substrings of ``q`` for the spans, overlapping ones merged, in order."""
    merged: list[list[int]] = []
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [q[s:e].strip(" ,") for s, e in merged]


def _since(m: str, match: re.Match) -> bool:
    return bool(_SINCE_BEFORE.search(m, 0, match.start()))


def _range(m: str, now: float, zone, today: dt.date) -> Optional[tuple[float, float, tuple[int, int], str]]:
    """The own range rules: (start, end, span, granularity) of the first that matches, or None."""
    r = _RECENT.search(m)
    if r:
        n = _count(r.group(1) if r.group(2) else r.group(3))
        unit = r.group(2) or r.group(4)
        if unit == "week":
            n, unit = n * 7, "day"
        return recent_window(now, n, unit, zone)[0], now, r.span(), "recent"
    r = _ELAPSED_AGO.search(m)
    if r:
        n, unit = (30, "minute") if r.group(1) else (_count(r.group(2)), r.group(3))
        seconds = UNIT_SECONDS[unit]
        return now - n * seconds - seconds / 2, now - n * seconds + seconds / 2, r.span(), "clock"
    r = _WEEKS_AGO.search(m)
    if r:
        try:
            start, end = week_window(today, zone, weeks_back=_count(r.group(1)))
        except OverflowError:
            raise _Unreadable(r.group(0)) from None
        return start, end, r.span(), "week"
    r = _WEEK.search(m)
    if r:
        if r.group(1) == "this":
            return day_window(week_start(today), zone)[0], now, r.span(), "week"
        start, end = week_window(today, zone, weeks_back=1)
        return (start, now, r.span(), "recent") if _since(m, r) else (start, end, r.span(), "week")
    r = _WEEKEND.search(m)
    if r:
        saturday = weekday_date("saturday", today)
        if r.group(1) in ("last", "past", "previous") and today.weekday() >= 5:
            saturday -= dt.timedelta(days=7)
        start, end = days_window(saturday, saturday + dt.timedelta(days=1), zone)
        return (start, now, r.span(), "recent") if _since(m, r) else (start, end, r.span(), "days")
    return None


def _date(kind: str, r: re.Match, today: dt.date) -> Optional[dt.date]:
    g = r.groups()
    if kind == "iso":
        return month_day_date(int(g[1]), int(g[2]), today, int(g[0]))
    if kind == "the nth":
        return day_of_month_date(int(g[0] or g[1]), today)
    month, day, year = (g[0], g[1], g[2]) if kind == "month day" else (g[1], g[0], g[2])
    index = MONTHS.index(month) + 1 if month in MONTHS else _MONTH_ABBR[month]
    return month_day_date(index, int(day), today, int(year) if year else None)


def _own_day(m: str, today: dt.date) -> Optional[tuple[dt.date, tuple[int, int]]]:
    """The first own day phrase (the day before yesterday, N days ago, a date) and its span.
    Raises ``_Unreadable`` for an impossible date or count anywhere in ``m``."""
    found = []
    r = _DAY_BEFORE_YESTERDAY.search(m)
    if r:
        found.append((r.span(), today - dt.timedelta(days=2)))
    r = _DAYS_AGO.search(m)
    if r:
        try:
            found.append((r.span(), today - dt.timedelta(days=_count(r.group(1)))))
        except OverflowError:
            raise _Unreadable(r.group(0)) from None
    for kind, pattern in _DATES.items():
        for r in pattern.finditer(m):
            guarded = kind == "the nth" or (kind != "iso" and not r.group(3) and r.group(1 if kind == "month day"
                                                                                         else 2) in _NAME_MONTHS)
            if guarded and not _DATE_FOLLOW_OK.match(m, r.end()):
                continue   # "on the 3rd floor", "did you see may 3 times"
            day = _date(kind, r, today)
            if day is None:
                raise _Unreadable(r.group(0))
            found.append((r.span(), day))
    if not found:
        return None
    (start, end), day = min(found, key=lambda f: f[0])
    return day, (_extend_left(m, start), end)


def _weekday_named(text: str) -> Optional[int]:
    for word in re.findall(r"[a-z]+", text):
        if word in WEEKDAYS:
            return WEEKDAYS.index(word)
        if word in _WEEKDAY_ABBR:
            return _WEEKDAY_ABBR[word]
    return None


def _part_name(text: str) -> str:
    if "lunch" in text:
        return "lunchtime"
    return "night" if text == "tonight" else text


def parse_time_expression(q: str, now: float, tz: TimeZone) -> Optional[TimeExpression]:
    """The window of the time phrases of ``q`` (the lower-cased question, "?" removed) asked at
    UNIX time ``now`` in zone ``tz``; None when it has none, or none that is possible."""
    try:
        return _parse(q, now, as_zone(tz))
    except _Unreadable as e:
        log.debug("time phrase %r names no possible window", str(e))
        return None


def _parse(q: str, now: float, zone) -> Optional[TimeExpression]:
    m = _blank(q, [x.span() for x in _NOISE.finditer(q)])
    today = local_date(now, zone)
    ranged = _range(m, now, zone, today)
    if ranged:
        start, end, span, granularity = ranged
        return _expression(start, end, now, _phrases(q, [(_extend_left(m, span[0]), span[1])]), granularity)

    spans: list[tuple[int, int]] = []
    day: Optional[dt.date] = None
    own = _own_day(m, today)
    if own:
        day, span = own
        spans.append(span)
        m = _blank(m, [span])
    clocks = _clock_phrases(m)
    tokens = _tokens(_blank(m, [c.span for c in clocks]))
    if not tokens and not clocks and day is None:
        return None

    days = [t for t in tokens if t.kind == "day"]
    if days and day is None:
        # dateparser sees the day tokens and the prepositions before them, nothing else
        shown = [" "] * len(m)
        for t in days:
            shown[t.phrase_start:t.span[1]] = m[t.phrase_start:t.span[1]]
        text = "".join(shown)
        base = dt.datetime.fromtimestamp(now, zone).replace(tzinfo=None)
        cursor = 0
        for found, when in dateparser_matches(text, base):
            # dateparser collapses the blanks it was shown: find its words, any spaces between
            located = re.compile(r"\s+".join(map(re.escape, found.split()))).search(text, cursor)
            if not located:
                continue
            at, cursor = located.span()
            inside = [t for t in days if t.span[0] < cursor and at < t.span[1]]
            if not inside:       # the filter: a match without a day token is no time phrase
                log.debug("time phrase %r: no day token, ignored", found)
                continue
            if day is None:
                day = when.date()
                weekday = _weekday_named(inside[0].text)
                last = m[inside[0].phrase_start:inside[0].span[0]].strip().endswith("last")
                if weekday is not None and not last and weekday_date(weekday, today) == today:
                    day = today  # dateparser: a week ago
            spans.extend((t.phrase_start, t.span[1]) for t in inside)
    parts = [t for t in tokens if t.kind == "part"]
    part = _part_name(parts[0].text) if parts else None
    spans.extend((t.phrase_start, t.span[1]) for t in parts)
    if day is None and part is not None and (parts[0].text == "tonight" or "this" in m[parts[0].phrase_start:
                                                                                         parts[0].span[0]]):
        day = today   # "this evening", "tonight"
        if part == "night" and now < part_of_day_window(today - dt.timedelta(days=1), "night", zone)[1]:
            day = today - dt.timedelta(days=1)   # asked before 06:00: the night that began yesterday
    if day is None and not clocks and part is None:
        return None

    if clocks:
        c = clocks[0]
        spans.append((c.phrase_start, c.span[1]))
        candidates = [day] if day is not None else [today - dt.timedelta(days=1), today]
        start, end = _clock_window(c, candidates, part, day is not None, now, zone)
        if c.until is not None:
            return _expression(start, end, now, _phrases(q, spans), "clock")
        day = day or local_date(start + (end - start) / 2, zone)
        anchor, granularity = (start + (end - start) / 2,) * 2, "clock"
    elif part is not None:
        if day is None:
            day = today
            if part_of_day_window(today, part, zone)[0] > now:
                day = today - dt.timedelta(days=1)
        start, end = part_of_day_window(day, part, zone)
        anchor, granularity = (start, end), "part"
    else:
        start, end = day_window(day, zone)
        anchor, granularity = (start, end), "day"
    first_phrase = q[min(s for s, _ in spans):].split(maxsplit=1)[0] if spans else ""
    modifier = _MODIFIERS.get(first_phrase)
    if modifier:
        start, end, granularity = _modified(modifier, granularity, anchor, day, now, zone)
    return _expression(start, end, now, _phrases(q, spans), granularity)


def _expression(start: float, end: float, now: float, phrases: list[str], granularity: str) -> TimeExpression:
    """The window clipped to [0, now]; ``_Unreadable`` when it ends at or before the UNIX epoch."""
    if end <= 0:
        raise _Unreadable(" ".join(phrases))
    end = min(end, now)
    return TimeExpression(min(max(0.0, start), end), end, phrases, granularity)


def _modified(modifier: str, granularity: str, anchor: tuple[float, float], day: dt.date, now: float,
              zone) -> tuple[float, float, str]:
    """"since / after / before X" around X's anchor (a clock instant, or a part's or day's bounds)."""
    day_start, day_end = day_window(day, zone)
    if modifier == "since":
        return anchor[0], now, "recent"
    if granularity == "day":
        return (day_end, now, "recent") if modifier == "after" else (0.0, day_start, "days")
    if modifier == "after":
        return anchor[1], max(day_end, anchor[1]), "part"
    return day_start, anchor[0], "part"


def parse_time_window(q: str, now: float, tz: TimeZone) -> tuple[Optional[float], Optional[float], list[str]]:
    """(start, end, matched phrases) of the time phrases of ``q``; (None, None, []) when none."""
    expr = parse_time_expression(q, now, tz)
    if expr is None:
        return None, None, []
    return expr.start, expr.end, expr.phrases


# -- time words left unread -----------------------------------------------------------------------
_MER_ANY = r"(?:\s?[ap]\.?m\b\.?)"
_LOOSE_CLOCK = rf"(?:\d{{1,2}}(?:[:.]\d{{2}})?{_MER_ANY}?|noon|midday|midnight|" + "|".join(_HOUR_WORDS) + ")"
_UNIT = r"(?:minute|hour|day|week|fortnight|month|year)s?"
_TIME_ENDING = re.compile(rf"(?:[:.]\d{{2}}|{_MER_ANY}|noon|midday|midnight)$")


def _followed(q: str, r: re.Match) -> bool:
    return bool(_FOLLOW_OK.match(q, r.end()) or _PART_AFTER.match(q, r.end()))


def _range_like(q: str, r: re.Match) -> bool:   # "between 3 and 4 people" is no time
    return bool(_TIME_ENDING.search(r.group(0))) or _followed(q, r)


def _dotted(q: str, r: re.Match) -> bool:       # "12.30pm", "at 12.30"; not "costs 2.50"
    return bool(re.search(r"m\.?$", r.group(0))) or _in_context(q, r.start(), r.end())


def _date_followed(q: str, r: re.Match) -> bool:
    return bool(_DATE_FOLLOW_OK.match(q, r.end()))


def _month(q: str, r: re.Match) -> bool:         # "may 3 at noon"; not "did you see may 3 times"
    return not set(re.findall(r"[a-z]+", r.group(0))) & _NAME_MONTHS or _date_followed(q, r)


# (pattern, check): a match with a check counts only where the check holds
_TIME_LIKE: list[tuple[re.Pattern, Optional[Callable[[str, re.Match], bool]]]] = [(re.compile(p), check) for p, check in (
    (rf"\b(?:between|from) {_LOOSE_CLOCK} ?(?:and|to|until|till|through|-) ?{_LOOSE_CLOCK}(?!\w)", _range_like),
    (rf"(?<![\w.:])\d{{1,2}}:\d{{2}}(?!\d){_MER_ANY}?", None),
    (rf"(?<![\w.:])\d{{1,2}}\.\d{{2}}(?![\d.]){_MER_ANY}?", _dotted),
    (rf"(?<![\w.:])\d{{1,2}}{_MER_ANY}", None),
    (r"\b(?:noon|midday|midnight)\b", None),
    (r"\b(?:\d{1,2}|" + "|".join(_HOUR_WORDS) + r") ?o'?clock\b", None),
    (r"\b(?:half|quarter) (?:past|to|after) \w+", None),
    (rf"\b{_WEEKDAY_NAME}\b", None),
    (r"\b(?:january|february|august|september|october|november|december)\b", None),
    (rf"\b{_MONTH}\.? (?:the )?\d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{_MONTH}\b", _month),
    (r"\b(?:on|since) the \d{1,2}(?:st|nd|rd|th)\b", _date_followed),
    (r"\b\d{4}-\d{1,2}-\d{1,2}\b|(?<![\w/])\d{1,2}/\d{1,2}(?:/\d{2,4})?(?![\w/])", None),
    (r"\b(?:today|yesterday|tonight|tomorrow)\b", None),
    (rf"\b{_COUNT} {_UNIT} ago\b|\b(?:last|past) {_COUNT} {_UNIT}\b|\b(?:last|this|past|previous) (?:month|year)\b",
     None),
)]


def unread_time_words(q: str, expr: Optional[TimeExpression]) -> list[str]:
    """The time-like words of question ``q`` (clock times "3pm" / "12:30" / "noon" / "3 o'clock",
    clock ranges, weekday and month names, dates "2026-03-28" / "3/28", "today", "N days ago",
    "last month") that no phrase of ``expr`` (its parse, or None) covers, in order; [] when the
    parse read them all.  Conservative: bare numbers ("3 people", "room 4", "stayed 2 days")
    are never listed."""
    q = q.lower()
    covered, cursor = [], 0
    for phrase in expr.phrases if expr else []:
        at = q.find(phrase, cursor)
        at = at if at >= 0 else q.find(phrase)
        if at >= 0:
            covered.append((at, at + len(phrase)))
            cursor = at + len(phrase)
    found = []
    for pattern, check in _TIME_LIKE:
        found.extend(r.span() for r in pattern.finditer(q) if check is None or check(q, r))
    out: list[tuple[int, int]] = []
    for s, e in sorted(found, key=lambda x: (x[0], -x[1])):
        if any(a <= s and e <= b for a, b in covered) or (out and s < out[-1][1]):
            continue
        out.append((s, e))
    return [q[s:e] for s, e in out]
