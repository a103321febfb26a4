"""Deterministic parsing of memory questions: kind, target, person, place, time window.

    "Where did you last see the red mug?"            -> where, target "red mug"
    "When did Alice arrive this morning?"            -> when (first), person alice, 06:00-12:00
    "How long was Bob in the kitchen yesterday?"     -> how_long, person bob, place kitchen, yesterday
    "Is there a bicycle in the corridor?"            -> yes_no, target "bicycle", place corridor
    "Who was in the meeting room today?"             -> who, place meeting_room, today
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Optional
from zoneinfo import ZoneInfo

KINDS = ("go", "where", "when", "how_long", "yes_no", "who", "how_many", "what")

# start-anchored patterns first (in order), then words anywhere in the question
_KIND_PATTERNS = [
    ("go", r"^((can|could|would|will) you (please )?)?(go|drive|navigate|move|head|take me|bring me|lead me|"
           r"guide me)\b(?!.*\?$)|^((can|could|would|will) you (please )?)?(go|drive|navigate|head) to\b"),
    ("how_long", r"^(for )?how (long|much time)\b(?! ago)"),
    ("when", r"^(when|what time|at what time|how long ago|how many (minutes|hours|days) ago)\b"),
    ("how_many", r"^how many\b"),
    ("who", r"^(who|whom|which (person|people|persons))\b"),
    ("where", r"^(where|which (room|place|waypoint|area)|in which (room|place)|what (room|place|area))\b"
              r"|^((can|could|would|will) you (please )?)?(take|bring|guide|lead|drive|navigate|find|show|get)"
              r"( me)? (to|somewhere|a place|the way|where)\b"),
    ("yes_no", r"^(is|are|was|were|did|do|does|have|has|had|can|could|will|would)\b"),
    ("what", r"^(what|which|describe|tell)\b"),
    ("how_long", r"\bhow long\b(?!.*\bago\b)"),
    ("when", r"\bwhen\b"),
    ("who", r"\bwho\b"),
    ("where", r"\bwhere\b"),
]

_STOP = set("""a an the is are was were be been being did do does have has had can could will would i you we he she
it they me my your our their this that these those there here of in on at to for from with by about into near
next last first ever any some what which who whom where when how long many much time times see seen saw look
looking find found notice noticed spot spotted robot please tell show remember recall kept keep go went come came
today yesterday morning afternoon evening night tonight ago minutes minute hours hour days day week ever
currently now just recently earlier before after around approximately roughly during most least usually
and or not no yes than then still again also only place room area located location
people person persons someone somebody anyone anybody everyone everybody visitors visitor
arrive arrived arrives arrival leave left leaves leaving enter entered exit exited stay stayed spend spent
get got here there take bring lead guide drive navigate move head go goes went""".split())

_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "ten": 10,
                 "fifteen": 15, "twenty": 20, "thirty": 30, "few": 3, "couple": 2}


@dataclass
class ParsedQuestion:
    text: str
    kind: str
    target: str = ""                         # what to look for (object / activity phrase)
    person: str = ""                         # identity id
    place: str = ""                          # waypoint id
    start: Optional[float] = None
    end: Optional[float] = None
    first: bool = False                      # first occurrence instead of last
    about_people: bool = False               # the question is about people in general
    time_words: list[str] = field(default_factory=list)


def _day_start(now: float, tz: ZoneInfo, days_back: int = 0) -> float:
    day = dt.datetime.fromtimestamp(now, tz=tz).date() - dt.timedelta(days=days_back)
    return dt.datetime.combine(day, dt.time(0), tzinfo=tz).timestamp()


def parse_time_window(q: str, now: float, tz: ZoneInfo) -> tuple[Optional[float], Optional[float], list[str]]:
    """(start, end, matched phrases) for the time phrases of a question; (None, None) if none."""
    words: list[str] = []
    start = end = None
    m = re.search(r"\b(in|during|within|over) the (last|past) (\w+) (minute|hour|day)s?\b", q)
    if m:
        n = _NUMBER_WORDS.get(m.group(3), None) or (int(m.group(3)) if m.group(3).isdigit() else 1)
        unit = {"minute": 60, "hour": 3600, "day": 86400}[m.group(4)]
        return now - n * unit, now, [m.group(0)]
    m = re.search(r"\b(\w+) (minute|hour|day)s? ago\b", q)
    if m and m.group(1) not in ("how", "many"):
        n = _NUMBER_WORDS.get(m.group(1), None) or (int(m.group(1)) if m.group(1).isdigit() else 1)
        unit = {"minute": 60, "hour": 3600, "day": 86400}[m.group(2)]
        centre = now - n * unit
        return centre - unit / 2, min(now, centre + unit / 2), [m.group(0)]
    days_back = None
    if "yesterday" in q:
        days_back, words = 1, words + ["yesterday"]
    elif re.search(r"\b(today|this morning|this afternoon|this evening|tonight)\b", q):
        days_back = 0
    elif "last night" in q:
        days_back, words = 1, words + ["last night"]
    else:
        m = re.search(r"\b(on )?(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", q)
        if m:
            names = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
            today = dt.datetime.fromtimestamp(now, tz=tz).weekday()
            days_back = (today - names.index(m.group(2))) % 7
            words.append(m.group(0))
    parts = {"morning": (6, 12), "afternoon": (12, 18), "evening": (18, 24), "night": (18, 30), "tonight": (18, 30)}
    part = None
    for name, hours in parts.items():
        if re.search(rf"\b(this |in the |last |yesterday )?{name}\b", q):
            part = hours
            words.append(name)
            break
    m = re.search(r"\b(at|around|about) (\d{1,2})(?::(\d{2}))? ?(am|pm)?\b", q)
    clock = None
    if m and (m.group(3) or m.group(4)):
        hour = int(m.group(2)) % 12 + (12 if m.group(4) == "pm" else 0) if m.group(4) else int(m.group(2))
        clock = hour + int(m.group(3) or 0) / 60.0
        words.append(m.group(0))
    if days_back is None and part is None and clock is None:
        return None, None, words
    base = _day_start(now, tz, days_back or 0)
    if clock is not None:
        start, end = base + clock * 3600 - 900, base + clock * 3600 + 900
    elif part is not None:
        start, end = base + part[0] * 3600, base + part[1] * 3600
    else:
        start, end = base, base + 86400
    if "today" in q:
        words.append("today")
    return start, min(end, now), words


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9_']+", text.lower())


def match_names(q: str, names: dict[str, str]) -> str:
    """The id whose name (or id, underscores as spaces) appears as words in q; longest first."""
    for key in sorted(names, key=lambda k: -len(k)):
        if re.search(rf"\b{re.escape(key)}\b", q):
            return names[key]
    return ""


def parse_question(question: str, now: float, tz: ZoneInfo, people: list[dict], waypoints: list[str]) -> ParsedQuestion:
    q = " ".join(question.lower().replace("?", " ").split())
    kind = "what"
    for name, pattern in _KIND_PATTERNS:
        if re.search(pattern, q):
            kind = name
            break
    if kind == "yes_no" and re.search(r"\b\w+ or \w+", q):  # "did you turn left or right?" is a choice
        kind = "what"
    person_names: dict[str, str] = {}
    for p in people:
        person_names[p["person"].lower()] = p["person"]
        person_names[p["person"].lower().replace("_", " ")] = p["person"]
        if p.get("name"):
            person_names[p["name"].lower()] = p["person"]
    place_names = {}
    for w in waypoints:
        place_names[w.lower()] = w
        place_names[w.lower().replace("_", " ")] = w
    person = match_names(q, person_names)
    place = match_names(q, place_names)
    start, end, time_words = parse_time_window(q, now, tz)
    first = bool(re.search(r"\b(first|earliest|arrive|arrived|arrival|come in|came in|start|started|begin)\b", q))
    about_people = bool(re.search(r"\b(who|people|persons?|someone|somebody|anyone|anybody|visitors?|man|woman)\b", q))
    removed = set(_STOP)
    for phrase in list(person_names) + list(place_names) + time_words:
        removed.update(_words(phrase))
    target_words = [w for w in _words(q) if w not in removed and not w.isdigit()]
    return ParsedQuestion(text=question, kind=kind, target=" ".join(target_words), person=person, place=place,
                          start=start, end=end, first=first, about_people=about_people, time_words=time_words)
