"""The words the time-phrase readers share (``time_expressions`` and its readers ``clock_phrases``,
``day_phrases``, ``span_phrases``, ``unread_words``).

Holds number words and counts ("a few" is 3, "a couple of" 2), hour words, month and weekday
names and abbreviations, the prepositions a phrase takes in ("at", "around", "on", "since" ...),
the words that may follow a clock time or a date (``FOLLOW_OK``, ``DATE_FOLLOW_OK``,
``PART_AFTER``), and ``Unreadable``: a phrase that names no possible window.  Reads no phrase
itself.
"""
from __future__ import annotations

import re
from typing import Optional

from ..calendar_windows import MONTHS


class Unreadable(Exception):
    """A time phrase that names no possible window (February 30, 10**13 days ago)."""


NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
           "thirty": 30, "forty": 40, "forty-five": 45, "fifty": 50, "sixty": 60, "ninety": 90,
           "a few": 3, "few": 3, "a couple of": 2, "a couple": 2, "couple of": 2}
COUNT = r"(\d+|" + "|".join(sorted((re.escape(w) for w in NUMBERS), key=len, reverse=True)) + r")"
HOUR_WORDS = {w: NUMBERS[w] for w in ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                                      "ten", "eleven", "twelve")}
MONTH_ABBR = {"sept": 9, **{name[:3]: i for i, name in enumerate(MONTHS, 1)}}
MONTH = "(" + "|".join(sorted(MONTHS + tuple(MONTH_ABBR), key=len, reverse=True)) + r")"
# month words that are also names or other words: a date only before a word that goes with a time
NAME_MONTHS = {"may", "june", *MONTH_ABBR}
WEEKDAY_NAME = r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?"
_APPROXIMATE = r"(?:around|about|approximately|roughly)"
_PREP = rf"(?:at|{_APPROXIMATE}|on|by|in the|during the|during|this|since|after|before|until|till|from|earlier)"
_PREP_BEFORE = re.compile(rf"\b{_PREP} $")
_APPROXIMATE_BEFORE = re.compile(rf"\b{_APPROXIMATE} $")

# what may follow a bare hour ("at 3") or a dotted clock ("12.30"): the end, a comma or a word that
# goes with a time ("at 3 people" is none; "about 3 in the kitchen" is a count, "at 3 in the
# afternoon" a time: PART_AFTER)
FOLLOW_OK = re.compile(rf"\s*(?:$|[,;!?)]|\.(?!\d)|(?:today|yesterday|tonight|last (?:night|week|{WEEKDAY_NAME})"
                       rf"|on (?:{WEEKDAY_NAME}|the \d|{MONTH} \d)|and|or|sharp|exactly|precisely|between|from"
                       rf"|around|before|after|until|till|the day before|{COUNT} (?:day|week)s? ago"
                       rf"|{WEEKDAY_NAME})\b)")
# after a date ("on may 3 in the lab"; not "may 3 times")
DATE_FOLLOW_OK = re.compile(rf"{FOLLOW_OK.pattern}|\s+(?:in|at|during|when)\b")
PART_AFTER = re.compile(r"\s*(?:(?:in the|this) (?:morning|afternoon|evening)|at night|tonight)\b")


def count(word: Optional[str]) -> int:
    """The number a count word or digits name (1 for None); digits longer than 12 are 10**12."""
    if word is None:
        return 1
    if word.isdigit():
        return int(word) if len(word) <= 12 else 10 ** 12
    return NUMBERS[word]


def blank(text: str, spans) -> str:
    """``text`` with the characters of each (start, end) span replaced by spaces."""
    for s, e in spans:
        text = text[:s] + " " * (e - s) + text[e:]
    return text


def extend_left(text: str, start: int, approximate: bool = True) -> int:
    """Start of the phrase that ends with the token at ``start``: prepositions before it included;
    ``approximate=False`` (a day: "still around yesterday", "stick around on friday") stops at
    "around" / "about", which then belong to the question."""
    while True:
        m = _PREP_BEFORE.search(text, 0, start)
        if not m or (not approximate and _APPROXIMATE_BEFORE.search(text, 0, start)):
            return start
        start = m.start()
