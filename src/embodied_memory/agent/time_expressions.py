"""Time phrases of a memory question as one window of UNIX time (``TimeExpression``): the public
entry of the time-phrase readers.

Relative days ("today", "yesterday", "last night", weekdays) are resolved by ``dateparser``
(``day_phrases.dateparser_matches``: relative to the asking time in the asking zone, past
preferred).  Everything else is own code, and every window is built by
``embodied_memory.calendar_windows`` from local dates and clock fields, so it is right on
daylight-saving change days (a day is 23 or 25 h, "yesterday at 3pm" is 15:00 local).

Which phrases count (the explicit filter): ``dateparser`` is only shown the day tokens of the
question (``day_phrases.read_tokens``) and the prepositions right before them; every other
character is blanked, and a match is accepted only when it holds a day token.  So "floor 3
yesterday" cannot become 03:00, a person called May or June is no month, "now", "second", "a few
minutes", "how long" are never a window.  "last" belongs to a phrase only before a unit or a day
name ("last week", "last friday", "last 3 hours"): "who arrived last today" reads "today".

Own code (measured against dateparser and ctparse in bench/time_parsers.py), each reader in its
module:

- ``span_phrases``: spans that are the whole window ("in the last 2 hours", "N minutes ago",
  "N weeks ago", "this week", "last week", "over the weekend").
- ``day_phrases``: "the day before yesterday", "N days ago" and dates ("march 29", "2026-03-28",
  "on the 31st"), day and part-of-day tokens.
- ``clock_phrases``: clock times ("3pm", "half past two", "at 3") and clock ranges ("between 2pm
  and 4pm"), am/pm chosen by the day and the part of day named.

Combined here:

- parts of day are windows (``PARTS_OF_DAY``: morning 06-12, afternoon 12-18, evening 18-24,
  night 18-06, lunchtime 12-14 for "at lunch(time)" / "over lunch").  A bare part ("in the
  evening") that has not begun today is yesterday's; "this evening" is today's (empty before
  18:00); "tonight" asked before 06:00 is the night that began yesterday evening.
- a bare weekday ("on Monday", "Monday,", "on Tue") is the most recent such day on or before
  today (``weekday_date``): asked on a Monday, "on Monday" is today, where dateparser says a week
  ago.  "last Friday" keeps dateparser's reading: the most recent Friday before today.
- "since X" (X's start .. now), "after X" / "before X" (within X's day for a clock or part,
  after a day: its end .. now, before a day: 0 .. its start).
- any window is clipped to [0, now] (a window wholly in the future is empty at now); one that
  ends at or before the UNIX epoch, or a count too large for the calendar ("10000000000000
  days ago"), is no window (None): callers read end = 0 as "no end".

``unread_time_words`` lists the time-like words a question holds that its expression does not
cover (``unread_words``), so that a caller can say it could not read them instead of searching
a wider window.

``dateparser`` is imported on first use; ``warm_up()`` (from ``day_phrases``) pays that up front.
"""
from __future__ import annotations

import datetime as dt
import logging
import re
from dataclasses import dataclass, field
from typing import Optional

from ..calendar_windows import TimeZone, as_zone, day_window, local_date, part_of_day_window, weekday_date
from .clock_phrases import clock_phrase_window, read_clock_phrases
from .day_phrases import dateparser_matches, part_name, read_own_day, read_tokens, warm_up, weekday_named
from .span_phrases import read_span
from .time_words import Unreadable, blank, extend_left
from .unread_words import unread_words

__all__ = ["GRANULARITIES", "TimeExpression", "dateparser_matches", "parse_time_expression", "parse_time_window",
           "unread_time_words", "warm_up"]

log = logging.getLogger(__name__)

GRANULARITIES = ("clock", "part", "day", "days", "week", "recent")

# never time phrases, blanked before anything else ("good morning, where is bob")
_NOISE = re.compile(r"\bgood (?:morning|afternoon|evening|night)\b")
_MODIFIERS = {"since": "since", "after": "after", "before": "before", "until": "before", "till": "before"}


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


def parse_time_expression(q: str, now: float, tz: TimeZone) -> Optional[TimeExpression]:
    """The window of the time phrases of ``q`` (the lower-cased question, "?" removed) asked at
    UNIX time ``now`` in zone ``tz``; None when it has none, or none that is possible."""
    try:
        return _parse(q, now, as_zone(tz))
    except Unreadable as e:
        log.debug("time phrase %r names no possible window", str(e))
        return None


def _parse(q: str, now: float, zone) -> Optional[TimeExpression]:
    m = blank(q, [x.span() for x in _NOISE.finditer(q)])
    today = local_date(now, zone)
    ranged = read_span(m, now, zone, today)
    if ranged:
        start, end, span, granularity = ranged
        return _expression(start, end, now, _phrases(q, [(extend_left(m, span[0]), span[1])]), granularity)

    spans: list[tuple[int, int]] = []
    day: Optional[dt.date] = None
    own = read_own_day(m, today)
    if own:
        day, span = own
        spans.append(span)
        m = blank(m, [span])
    clocks = read_clock_phrases(m)
    tokens = read_tokens(blank(m, [c.span for c in clocks]))
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
                weekday = weekday_named(inside[0].text)
                last = m[inside[0].phrase_start:inside[0].span[0]].strip().endswith("last")
                if weekday is not None and not last and weekday_date(weekday, today) == today:
                    day = today  # dateparser: a week ago
            spans.extend((t.phrase_start, t.span[1]) for t in inside)
    parts = [t for t in tokens if t.kind == "part"]
    part = part_name(parts[0].text) if parts else None
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
        start, end = clock_phrase_window(c, candidates, part, day is not None, now, zone)
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
    """The window clipped to [0, now]; ``Unreadable`` when it ends at or before the UNIX epoch."""
    if end <= 0:
        raise Unreadable(" ".join(phrases))
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


def _phrases(q: str, spans: list[tuple[int, int]]) -> list[str]:
    """Substrings of ``q`` for the spans, overlapping ones merged, in order."""
    merged: list[list[int]] = []
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [q[s:e].strip(" ,") for s, e in merged]


def unread_time_words(q: str, expr: Optional[TimeExpression]) -> list[str]:
    """The time-like words of question ``q`` (clock times "3pm" / "12:30" / "noon" / "3 o'clock",
    clock ranges, weekday and month names, dates "2026-03-28" / "3/28", "today", "N days ago",
    "last month") that no phrase of ``expr`` (its parse, or None) covers, in order; [] when the
    parse read them all.  Conservative: bare numbers ("3 people", "room 4", "stayed 2 days")
    are never listed."""
    return unread_words(q, expr.phrases if expr else [])
