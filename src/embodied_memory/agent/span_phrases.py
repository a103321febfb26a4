"""Spans of a question that are the whole window, read before any day or clock time
(``read_span``; the first rule that matches wins):

- "in the last / past N minutes|hours|days|weeks", "the past week", "past week", "last 24 hours"
  (the last N units, elapsed, weeks as 7 days; dateparser: a point; not "last week"): "recent".
- "N minutes / hours ago", "half an hour ago" (elapsed time, +- half a unit): "clock".
- "N weeks ago" (that calendar week): "week".
- "this week" (Monday 00:00 local .. now): "week"; "last week" (the previous Monday .. Sunday):
  "week", "since last week": "recent".
- "(over / at / this / last) weekend" (Saturday 00:00 .. Monday 00:00 of the most recent weekend
  on or before today; "last weekend" on a Saturday or Sunday is the one before): "days",
  "since the weekend": "recent".
"""
from __future__ import annotations

import datetime as dt
import re
from typing import Optional

from ..calendar_windows import (UNIT_SECONDS, day_window, days_window, recent_window, week_start, week_window,
                                weekday_date)
from .time_words import COUNT, Unreadable, count

# "in the last 2 hours", "the past hour", "past week", "within the last few days", "last 24 hours"
# (not "last week")
_RECENT = re.compile(rf"\b(?:(?:(?:in|during|within|over|for) (?:the )?|the )(?:last|past)|past) (?:{COUNT} )?"
                     r"(minute|hour|day|week)s?\b"
                     rf"|\blast {COUNT} (minute|hour|day|week)s?\b")
_ELAPSED_AGO = re.compile(rf"\b(?:(half an) hour|{COUNT} (minute|hour)s?) ago\b")
_WEEKS_AGO = re.compile(rf"\b{COUNT} weeks? ago\b")
_WEEK = re.compile(r"\b(?:(?:earlier|during|in) )?(this|last|previous) week\b")
_WEEKEND = re.compile(r"\b(?:(?:over|during|at|on|for|in) )?(this|last|past|previous|the) weekend\b")
_SINCE_BEFORE = re.compile(r"\bsince $")


def _since(m: str, match: re.Match) -> bool:
    return bool(_SINCE_BEFORE.search(m, 0, match.start()))


def read_span(m: str, now: float, zone, today: dt.date) -> Optional[tuple[float, float, tuple[int, int], str]]:
    """(start, end, span, granularity) of the first span rule that matches ``m``, or None.
    Raises ``Unreadable`` for a count too large for the calendar."""
    r = _RECENT.search(m)
    if r:
        n = count(r.group(1) if r.group(2) else r.group(3))
        unit = r.group(2) or r.group(4)
        if unit == "week":
            n, unit = n * 7, "day"
        return recent_window(now, n, unit, zone)[0], now, r.span(), "recent"
    r = _ELAPSED_AGO.search(m)
    if r:
        n, unit = (30, "minute") if r.group(1) else (count(r.group(2)), r.group(3))
        seconds = UNIT_SECONDS[unit]
        return now - n * seconds - seconds / 2, now - n * seconds + seconds / 2, r.span(), "clock"
    r = _WEEKS_AGO.search(m)
    if r:
        try:
            start, end = week_window(today, zone, weeks_back=count(r.group(1)))
        except OverflowError:
            raise Unreadable(r.group(0)) from None
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
