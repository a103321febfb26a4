"""Time phrases of a memory question as one window of UNIX time (``TimeExpression``).

Days and clock times are resolved by ``dateparser`` (``search_dates``, English, relative to the
asking time in the asking zone, past preferred); every window is then built by
``embodied_memory.calendar_windows`` from the local date and clock fields, so it is right on
daylight-saving change days (a day is 23 or 25 h, "yesterday at 3pm" is 15:00 local).

Which phrases count (the explicit filter): ``dateparser`` is only shown the time tokens of the
question (``_TOKEN``: today / yesterday / tonight / weekdays / "march 3" / clock times
"3pm", "15:00", "noon" / parts of day) and the prepositions right before them; every other
character is blanked.  So "floor 3 yesterday at 3pm" cannot become 03:00, "desk 4 at 3pm"
cannot become April, a person called May or June is no month, "now", "second", "a few
minutes", "how long" are never a window.  A ``dateparser`` match is accepted only when its
substring holds a day or clock token.

Own code, where ``dateparser`` is wrong or has nothing (all measured in bench/time_parsers.py):

- parts of day are windows (``PARTS_OF_DAY``: morning 06-12, afternoon 12-18, evening 18-24,
  night 18-06, lunchtime 12-14 for "at lunch(time)" / "over lunch"); dateparser gives one point
  (09:00 for "this morning").  A bare part ("in the evening") that has not begun today is
  yesterday's; "this evening" is today's (empty before 18:00).
- a bare weekday ("on Monday", "Monday,", "on Tue") is the most recent such day on or before
  today (``weekday_date``): asked on a Monday, "on Monday" is today, where dateparser says a week
  ago.  "last Friday" keeps dateparser's reading: the most recent Friday before today (asked on
  a Friday, a week ago).
- "the day before yesterday" (dateparser: yesterday) and "N days ago" (that calendar day).
- "in the last / past N minutes|hours|days|weeks" (dateparser: a point, and for hours a wall-
  clock difference, an hour off across a change); "N minutes / hours ago" (elapsed time, +-
  half a unit, as before); "N weeks ago" (that calendar week).
- "this week" (Monday 00:00 local .. now), "last week" (the previous Monday .. Sunday),
  "(over / at / this / last) weekend" (Saturday 00:00 .. Monday 00:00 of the most recent
  weekend on or before today; "last weekend" on a Saturday or Sunday is the one before).
- "since X" (X's start .. now), "after X" / "before X" (within X's day for a clock or part,
  after a day: its end .. now, before a day: 0 .. its start); "midday" is read as "noon".
- a clock time is ``clock_window`` (+-900 s); a bare clock time later than now today is
  yesterday's (dateparser's past preference); any window is clipped to [0, now] (a window
  wholly in the future is empty at now).

``dateparser`` is imported on first use (about 0.2 s, plus about 0.25 s for its first search);
``warm_up()`` pays that up front.
"""
from __future__ import annotations

import datetime as dt
import functools
import logging
import re
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..calendar_windows import (PARTS_OF_DAY, UNIT_SECONDS, WEEKDAYS, TimeZone, as_zone, clock_window, day_window,
                                days_window, local_date, part_of_day_window, recent_window, week_start, week_window,
                                weekday_date)

log = logging.getLogger(__name__)

GRANULARITIES = ("clock", "part", "day", "days", "week", "recent")


@dataclass
class TimeExpression:
    """The window a question's time phrases name.  ``start`` .. ``end`` in UNIX seconds, with
    0 <= start <= end <= the asking time; ``phrases``: the matched substrings of the question, in
    order; ``granularity``: "clock" (a clock time +- a margin, or "N minutes ago"), "part" (a
    part of a day, or within a day before / after a clock time), "day" (one calendar day),
    "days" (several whole days: a weekend, everything before a day), "week" (a calendar week)
    or "recent" (a span that ends now: "in the last 2 hours", "since Monday", "this week" is
    "week")."""
    start: float
    end: float
    phrases: list[str] = field(default_factory=list)
    granularity: str = "day"


# -- tokens ---------------------------------------------------------------------------------------
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
            "thirty": 30, "forty": 40, "forty-five": 45, "fifty": 50, "sixty": 60, "ninety": 90,
            "a few": 3, "few": 3, "a couple of": 2, "a couple": 2, "couple of": 2}
_COUNT = r"(\d+|" + "|".join(sorted((re.escape(w) for w in _NUMBERS), key=len, reverse=True)) + r")"
_WEEKDAY_ABBR = {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4, "sat": 5,
                 "sun": 6}
_MONTH = (r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
          r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)")
_ORD = r"\d{1,2}(?:st|nd|rd|th)?"
_PREP = r"(?:at|around|about|approximately|roughly|on|by|in the|during the|during|this|last|since|after|before|" \
        r"until|till|from|earlier)"
_MODIFIERS = {"since": "since", "after": "after", "before": "before", "until": "before", "till": "before"}

# day tokens: dateparser resolves them (a month only with a day number, a weekday abbreviation
# only after "on" / "last" / "since": "may", "june", "i sat", "the sun" are no days)
_DAY_TOKEN = re.compile(
    r"\b(?:today|yesterday|tonight|last night|(?:mon|tues|wednes|thurs|fri|satur|sun)day"
    r"|(?<=\bon )(?:" + "|".join(_WEEKDAY_ABBR) + r")|(?<=\blast )(?:" + "|".join(_WEEKDAY_ABBR) + r")"
    r"|(?<=\bsince )(?:" + "|".join(_WEEKDAY_ABBR) + r")"
    rf"|{_MONTH} (?:the )?{_ORD}(?![\d:])|(?:the )?{_ORD} (?:of )?{_MONTH})\b")
# clock tokens: dateparser resolves them (a bare "at 3" is none)
_CLOCK_TOKEN = re.compile(r"\b(?:\d{1,2}:\d{2}(?: ?[ap]\.?m\b\.?)?|\d{1,2} ?[ap]\.?m\b\.?|noon|midday|midnight"
                          r"|\d{1,2} (?:in the|this) (?:morning|afternoon|evening))(?!\w)")
# parts of day: own windows (PARTS_OF_DAY); lunch only after a preposition ("what did bob eat for
# lunch", "when is his lunch break" name no time)
_PART_TOKEN = re.compile(r"\b(?:" + "|".join(p for p in PARTS_OF_DAY if p != "lunchtime") + r"|tonight"
                         r"|(?:at|over|during|after|before|since|around|by) (?:the )?lunch(?:time| ?break)?)\b")
_PREP_BEFORE = re.compile(rf"\b{_PREP} $")
# never time phrases, blanked before anything else ("good morning, where is bob")
_NOISE = re.compile(r"\bgood (?:morning|afternoon|evening|night)\b")

# own ranges (the first that matches is the window)
# "in the last 2 hours", "the past hour", "within the last few days", "last 24 hours" (not "last week")
_RECENT = re.compile(rf"\b(?:(?:in|during|within|over|for) (?:the )?|the )(?:last|past) (?:{_COUNT} )?"
                     r"(minute|hour|day|week)s?\b"
                     rf"|\b(?:last|past) {_COUNT} (minute|hour|day|week)s?\b")
_ELAPSED_AGO = re.compile(rf"\b(?:(half an) hour|{_COUNT} (minute|hour)s?) ago\b")
_WEEKS_AGO = re.compile(rf"\b{_COUNT} weeks? ago\b")
_WEEK = re.compile(r"\b(?:(?:earlier|during|in) )?(this|last|past|previous) week\b")
_WEEKEND = re.compile(r"\b(?:(?:over|during|at|on|for|in) )?(this|last|past|previous|the) weekend\b")
_SINCE_BEFORE = re.compile(r"\bsince $")
# own day providers (combine with a part or a clock time)
_DAY_BEFORE_YESTERDAY = re.compile(r"\b(?:on )?the day before yesterday\b")
_DAYS_AGO = re.compile(rf"\b{_COUNT} days? ago\b")

_MAX_DAYS_BACK = 36_500  # a century: "10000000 days ago" is no date error


def _count(word: Optional[str]) -> int:
    if word is None:
        return 1
    if word.isdigit():
        return int(word) if len(word) <= 12 else 10 ** 12
    return _NUMBERS[word]


def _blank(text: str, pattern: re.Pattern) -> str:
    return pattern.sub(lambda x: " " * len(x.group(0)), text)


def _for_dateparser(text: str) -> str:
    """Same-length rewrite of what dateparser lacks: "p.m." -> "pm  ", "midday" -> "noon  "."""
    text = re.sub(r"\b([ap])\.m\b\.?", lambda x: f"{x.group(1)}m".ljust(len(x.group(0))), text)
    return re.sub(r"\bmidday\b", "noon  ", text)


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


def dateparser_matches(text: str, base: dt.datetime) -> list[tuple[str, dt.datetime]]:
    """``dateparser.search.search_dates`` of ``text`` (English, past preferred) relative to the
    naive local datetime ``base``; [] when it finds nothing."""
    found = _search_dates()(text, languages=["en"], settings={**_SETTINGS, "RELATIVE_BASE": base})
    return list(found or [])


def warm_up() -> None:
    """Import dateparser and run one search (about 0.5 s), so that the first question is fast."""
    dateparser_matches("yesterday at 3pm", dt.datetime(2026, 1, 1, 12))


# -- the parser -----------------------------------------------------------------------------------
@dataclass
class _Token:
    kind: str            # "day" | "clock" | "part"
    span: tuple[int, int]
    phrase_start: int    # with the prepositions before it
    text: str


def _tokens(m: str) -> list[_Token]:
    out = []
    for kind, pattern in (("day", _DAY_TOKEN), ("clock", _CLOCK_TOKEN), ("part", _PART_TOKEN)):
        for t in pattern.finditer(m):
            out.append(_Token(kind, t.span(), _extend_left(m, t.start()), t.group(0)))
    # "8 in the evening" is a clock time, not also a part; "last night" a day, and a part below
    out = [t for t in out if not (t.kind == "part" and any(
        o.kind == "clock" and o.span[0] <= t.span[0] and t.span[1] <= o.span[1] for o in out))]
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


def _clip(start: float, end: float, now: float) -> tuple[float, float]:
    end = max(0.0, min(end, now))
    return min(max(0.0, start), end), end


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
        start, end = week_window(today, zone, weeks_back=min(_count(r.group(1)), _MAX_DAYS_BACK // 7))
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


def _own_day(m: str, today: dt.date) -> Optional[tuple[dt.date, tuple[int, int]]]:
    r = _DAY_BEFORE_YESTERDAY.search(m)
    if r:
        return today - dt.timedelta(days=2), r.span()
    r = _DAYS_AGO.search(m)
    if r:
        return today - dt.timedelta(days=min(_count(r.group(1)), _MAX_DAYS_BACK)), r.span()
    return None


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
    UNIX time ``now`` in zone ``tz``; None when it has none."""
    zone = as_zone(tz)
    m = _blank(q, _NOISE)
    today = local_date(now, zone)
    ranged = _range(m, now, zone, today)
    if ranged:
        start, end, span, granularity = ranged
        start, end = _clip(start, end, now)
        return TimeExpression(start, end, _phrases(q, [(_extend_left(m, span[0]), span[1])]), granularity)

    spans: list[tuple[int, int]] = []
    day: Optional[dt.date] = None
    own = _own_day(m, today)
    if own:
        day, span = own
        spans.append(span)
        m = m[:span[0]] + " " * (span[1] - span[0]) + m[span[1]:]
    tokens = _tokens(m)
    if not tokens and day is None:
        return None

    clock: Optional[tuple[int, int]] = None
    clock_day: Optional[dt.date] = None
    resolved = [t for t in tokens if t.kind in ("day", "clock")]
    if resolved:
        # dateparser sees the tokens and the prepositions before them, nothing else
        shown = [" "] * len(m)
        for t in tokens:
            shown[t.phrase_start:t.span[1]] = m[t.phrase_start:t.span[1]]
        text = _for_dateparser("".join(shown))
        base = dt.datetime.fromtimestamp(now, zone).replace(tzinfo=None)
        cursor = 0
        for found, when in dateparser_matches(text, base):
            # dateparser collapses the blanks it was shown: find its words, any spaces between
            located = re.compile(r"\s+".join(map(re.escape, found.split()))).search(text, cursor)
            if not located:
                continue
            at, cursor = located.span()
            inside = [t for t in resolved if t.span[0] < cursor and at < t.span[1]]
            if not inside:       # the filter: a match without a day or clock token is no time phrase
                log.debug("time phrase %r: no day or clock token, ignored", found)
                continue
            days = [t for t in inside if t.kind == "day"]
            if days and day is None:
                day = when.date()
                weekday = _weekday_named(days[0].text)
                last = m[days[0].phrase_start:days[0].span[0]].strip().endswith("last")
                if weekday is not None and not last and weekday_date(weekday, today) == today:
                    day = today  # dateparser: a week ago
            if any(t.kind == "clock" for t in inside) and clock is None:
                clock, clock_day = (when.hour, when.minute), when.date()
            spans.extend((t.phrase_start, t.span[1]) for t in inside)
    parts = [t for t in tokens if t.kind == "part"]
    part = _part_name(parts[0].text) if parts else None
    spans.extend((t.phrase_start, t.span[1]) for t in parts)
    if day is None and clock is None and part is None:
        return None

    first_phrase = q[min(s for s, _ in spans):].split(maxsplit=1)[0] if spans else ""
    modifier = _MODIFIERS.get(first_phrase)
    if clock is not None:
        day = day or clock_day or today
        start, end = clock_window(day, clock[0], clock[1], zone)
        anchor, granularity = (start + (end - start) / 2,) * 2, "clock"
    elif part is not None:
        if day is None:
            this = any("this" in m[t.phrase_start:t.span[0]] for t in parts)
            day = today
            if not this and part_of_day_window(today, part, zone)[0] > now:
                day = today - dt.timedelta(days=1)
        start, end = part_of_day_window(day, part, zone)
        anchor, granularity = (start, end), "part"
    else:
        start, end = day_window(day, zone)
        anchor, granularity = (start, end), "day"
    if modifier:
        start, end, granularity = _modified(modifier, granularity, anchor, day, now, zone)
    start, end = _clip(start, end, now)
    return TimeExpression(start, end, _phrases(q, spans), granularity)


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


def strip_time_phrases(q: str, expr: Optional[TimeExpression]) -> str:
    """``q`` without the phrases of ``expr`` (longest first), spaces collapsed."""
    if expr is None:
        return q
    for phrase in sorted(expr.phrases, key=len, reverse=True):
        q = re.sub(rf"(?<!\w){re.escape(phrase)}(?!\w)", " ", q, count=1)
    return " ".join(q.split()).replace(" ,", ",").strip(" ,")
