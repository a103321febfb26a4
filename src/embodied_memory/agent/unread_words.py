"""The time-like words of a question that its parsed phrases do not cover (``unread_words``).

Reads loosely, to list rather than to window: clock times "3pm" / "12:30" / "noon" / "3 o'clock",
"half past ...", clock ranges ("between 3 and 4" only where a time word or part of day follows:
"between 3 and 4 people" is none), weekday and month names, dates ("march 3", "the 3rd of may",
"on the 3rd", "2026-03-28", "3/28"), "today" / "tomorrow", "N units ago", "last N units", "last
month".  Conservative: bare numbers ("3 people", "room 4", "stayed 2 days", "costs 2.50") are
never listed, and a name that is also a month ("may", "june") only where a date reading fits.
"""
from __future__ import annotations

import re
from typing import Callable, Optional

from .clock_phrases import in_clock_context
from .time_words import (COUNT, DATE_FOLLOW_OK, FOLLOW_OK, HOUR_WORDS, MONTH, NAME_MONTHS, PART_AFTER,
                         WEEKDAY_NAME)

_MER_ANY = r"(?:\s?[ap]\.?m\b\.?)"
_LOOSE_CLOCK = rf"(?:\d{{1,2}}(?:[:.]\d{{2}})?{_MER_ANY}?|noon|midday|midnight|" + "|".join(HOUR_WORDS) + ")"
_UNIT = r"(?:minute|hour|day|week|fortnight|month|year)s?"
_TIME_ENDING = re.compile(rf"(?:[:.]\d{{2}}|{_MER_ANY}|noon|midday|midnight)$")


def _followed(q: str, r: re.Match) -> bool:
    return bool(FOLLOW_OK.match(q, r.end()) or PART_AFTER.match(q, r.end()))


def _range_like(q: str, r: re.Match) -> bool:   # "between 3 and 4 people" is no time
    return bool(_TIME_ENDING.search(r.group(0))) or _followed(q, r)


def _dotted(q: str, r: re.Match) -> bool:       # "12.30pm", "at 12.30"; not "costs 2.50"
    return bool(re.search(r"m\.?$", r.group(0))) or in_clock_context(q, r.start(), r.end())


def _date_followed(q: str, r: re.Match) -> bool:
    return bool(DATE_FOLLOW_OK.match(q, r.end()))


def _month(q: str, r: re.Match) -> bool:         # "may 3 at noon"; not "did you see may 3 times"
    return not set(re.findall(r"[a-z]+", r.group(0))) & NAME_MONTHS or _date_followed(q, r)


# (pattern, check): a match with a check counts only where the check holds
_TIME_LIKE: list[tuple[re.Pattern, Optional[Callable[[str, re.Match], bool]]]] = [(re.compile(p), check) for p, check in (
    (rf"\b(?:between|from) {_LOOSE_CLOCK} ?(?:and|to|until|till|through|-) ?{_LOOSE_CLOCK}(?!\w)", _range_like),
    (rf"(?<![\w.:])\d{{1,2}}:\d{{2}}(?!\d){_MER_ANY}?", None),
    (rf"(?<![\w.:])\d{{1,2}}\.\d{{2}}(?![\d.]){_MER_ANY}?", _dotted),
    (rf"(?<![\w.:])\d{{1,2}}{_MER_ANY}", None),
    (r"\b(?:noon|midday|midnight)\b", None),
    (r"\b(?:\d{1,2}|" + "|".join(HOUR_WORDS) + r") ?o'?clock\b", None),
    (r"\b(?:half|quarter) (?:past|to|after) \w+", None),
    (rf"\b{WEEKDAY_NAME}\b", None),
    (r"\b(?:january|february|august|september|october|november|december)\b", None),
    (rf"\b{MONTH}\.? (?:the )?\d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{MONTH}\b", _month),
    (r"\b(?:on|since) the \d{1,2}(?:st|nd|rd|th)\b", _date_followed),
    (r"\b\d{4}-\d{1,2}-\d{1,2}\b|(?<![\w/])\d{1,2}/\d{1,2}(?:/\d{2,4})?(?![\w/])", None),
    (r"\b(?:today|yesterday|tonight|tomorrow)\b", None),
    (rf"\b{COUNT} {_UNIT} ago\b|\b(?:last|past) {COUNT} {_UNIT}\b|\b(?:last|this|past|previous) (?:month|year)\b",
     None),
)]


def unread_words(q: str, phrases: list[str]) -> list[str]:
    """The time-like words of question ``q`` that none of ``phrases`` (matched substrings of
    ``q``, in order) covers, in order; [] when the phrases cover them all."""
    q = q.lower()
    covered, cursor = [], 0
    for phrase in phrases:
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
