"""Days and parts of day of a question: the day tokens ``dateparser`` resolves, the days read here,
and the one place ``dateparser`` is called.

Reads:

- day and part tokens (``read_tokens``): "today", "yesterday", "last night", weekday names (an
  abbreviation only after "on" / "last" / "since": "i sat", "the sun" are no days), "last
  friday"; parts of day ("morning", "this evening", "tonight", "at lunch" / "over lunch", not
  "for lunch"), each with the prepositions before it.  ``time_expressions`` shows the day
  tokens to ``dateparser`` (``dateparser_matches``) and windows the parts itself.
- own days (``read_own_day``): "the day before yesterday" (dateparser: yesterday), "N days ago"
  (that calendar day), and dates: "march 29", "the 3rd of may", "29 march 2025", "2026-03-28",
  "on the 31st" (this month's, or last month's when it is still to come).  The most recent such
  date on or before today; an impossible one ("february 30th", "the 31st" of a 30-day month)
  is ``Unreadable``.  A month that is also a name ("may", "june") is a date only before a word
  that goes with a time ("on may 3 in the lab"; not "did you see may 3 times").

``dateparser`` (``search_dates``, English, past preferred, relative to a naive local datetime)
is imported on first use (about 0.2 s, plus about 0.25 s for its first search; ``warm_up()``
pays that up front) and called under a module lock: it has had thread-safety bugs.
"""
from __future__ import annotations

import datetime as dt
import functools
import re
import threading
from dataclasses import dataclass
from typing import Callable, Optional

from ..calendar_windows import MONTHS, PARTS_OF_DAY, WEEKDAYS, day_of_month_date, month_day_date
from .time_words import (COUNT, DATE_FOLLOW_OK, MONTH, MONTH_ABBR, NAME_MONTHS, WEEKDAY_NAME, Unreadable, count,
                         extend_left)

_WEEKDAY_ABBR = {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4, "sat": 5,
                 "sun": 6}

# day tokens: dateparser resolves them (a weekday abbreviation only after "on" / "last" /
# "since": "i sat", "the sun" are no days)
_DAY_TOKEN = re.compile(
    rf"\b(?:today|yesterday|last night|{WEEKDAY_NAME}"
    r"|(?<=\bon )(?:" + "|".join(_WEEKDAY_ABBR) + r")|(?<=\blast )(?:" + "|".join(_WEEKDAY_ABBR) + r")"
    r"|(?<=\bsince )(?:" + "|".join(_WEEKDAY_ABBR) + r"))\b")
# parts of day: own windows (PARTS_OF_DAY); lunch only after a preposition ("what did bob eat for
# lunch", "when is his lunch break" name no time)
_PART_TOKEN = re.compile(r"\b(?:" + "|".join(p for p in PARTS_OF_DAY if p != "lunchtime") + r"|tonight"
                         r"|(?:at|over|during|after|before|since|around|by) (?:the )?lunch(?:time| ?break)?)\b")
_LAST_BEFORE = re.compile(r"\blast $")

# -- own days -------------------------------------------------------------------------------------
_DAY_BEFORE_YESTERDAY = re.compile(r"\b(?:on )?the day before yesterday\b")
_DAYS_AGO = re.compile(rf"\b{COUNT} days? ago\b")
_ORDINAL = r"(\d{1,2})(?:st|nd|rd|th)?"
_DATES = {
    "month day": re.compile(rf"\b{MONTH}\.? (?:the )?{_ORDINAL}(?![\w:.])(?:,? (\d{{4}})\b)?"),
    "day month": re.compile(rf"\b(?:the )?{_ORDINAL} (?:of )?{MONTH}\b(?:,? (\d{{4}})\b)?"),
    "iso": re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"),
    "the nth": re.compile(r"(?<=\bon )the (\d{1,2})(?:st|nd|rd|th)\b|(?<=\bsince )the (\d{1,2})(?:st|nd|rd|th)\b"),
}


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


# -- day and part tokens --------------------------------------------------------------------------
@dataclass
class Token:
    """A day or part-of-day word of the question."""
    kind: str            # "day" | "part"
    span: tuple[int, int]
    phrase_start: int    # with the prepositions before it
    text: str


def read_tokens(m: str) -> list[Token]:
    """The day and part tokens of ``m``, in order."""
    out = []
    for kind, pattern in (("day", _DAY_TOKEN), ("part", _PART_TOKEN)):
        for t in pattern.finditer(m):
            start = t.start()
            if kind == "day" and weekday_named(t.group(0)) is not None and _LAST_BEFORE.search(m, 0, start):
                start -= len("last ")   # "last friday"; "last" alone is no time
            out.append(Token(kind, t.span(), extend_left(m, start, approximate=kind != "day"), t.group(0)))
    return sorted(out, key=lambda t: t.span)


def weekday_named(text: str) -> Optional[int]:
    """The weekday (0 = Monday) the first weekday name or abbreviation of ``text`` names, or None."""
    for word in re.findall(r"[a-z]+", text):
        if word in WEEKDAYS:
            return WEEKDAYS.index(word)
        if word in _WEEKDAY_ABBR:
            return _WEEKDAY_ABBR[word]
    return None


def part_name(text: str) -> str:
    """The ``PARTS_OF_DAY`` key of a part token ("tonight" is "night", any lunch "lunchtime")."""
    if "lunch" in text:
        return "lunchtime"
    return "night" if text == "tonight" else text


# -- own days -------------------------------------------------------------------------------------
def _date(kind: str, r: re.Match, today: dt.date) -> Optional[dt.date]:
    g = r.groups()
    if kind == "iso":
        return month_day_date(int(g[1]), int(g[2]), today, int(g[0]))
    if kind == "the nth":
        return day_of_month_date(int(g[0] or g[1]), today)
    month, day, year = (g[0], g[1], g[2]) if kind == "month day" else (g[1], g[0], g[2])
    index = MONTHS.index(month) + 1 if month in MONTHS else MONTH_ABBR[month]
    return month_day_date(index, int(day), today, int(year) if year else None)


def read_own_day(m: str, today: dt.date) -> Optional[tuple[dt.date, tuple[int, int]]]:
    """The first own day phrase (the day before yesterday, N days ago, a date) and its span.
    Raises ``Unreadable`` for an impossible date or count anywhere in ``m``."""
    found = []
    r = _DAY_BEFORE_YESTERDAY.search(m)
    if r:
        found.append((r.span(), today - dt.timedelta(days=2)))
    r = _DAYS_AGO.search(m)
    if r:
        try:
            found.append((r.span(), today - dt.timedelta(days=count(r.group(1)))))
        except OverflowError:
            raise Unreadable(r.group(0)) from None
    for kind, pattern in _DATES.items():
        for r in pattern.finditer(m):
            guarded = kind == "the nth" or (kind != "iso" and not r.group(3) and r.group(1 if kind == "month day"
                                                                                         else 2) in NAME_MONTHS)
            if guarded and not DATE_FOLLOW_OK.match(m, r.end()):
                continue   # "on the 3rd floor", "did you see may 3 times"
            day = _date(kind, r, today)
            if day is None:
                raise Unreadable(r.group(0))
            found.append((r.span(), day))
    if not found:
        return None
    (start, end), day = min(found, key=lambda f: f[0])
    return day, (extend_left(m, start), end)
