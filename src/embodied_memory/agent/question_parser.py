"""Deterministic parsing of memory questions: kind, target, person, place, time window.

    "Where did you last see the red mug?"            -> where, target "red mug"
    "When did Alice arrive this morning?"            -> when (first), person alice, 06:00-12:00
    "How long was Bob in the kitchen yesterday?"     -> how_long, person bob, place kitchen, yesterday
    "Is there a bicycle in the corridor?"            -> yes_no, target "bicycle", place corridor
    "Who was in the meeting room today?"             -> who, place meeting_room, today
    "Where is person_9999?" / "Is Zoe here?"          -> unknown_person (no such identity / display name)
    "Was Alice in the ballroom?"                      -> unknown_place "the ballroom" (no such waypoint)

Time windows are calendar days and local clock times of the asking time zone
(``embodied_memory.calendar_windows``), right on daylight-saving change days.
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Optional
from zoneinfo import ZoneInfo

from ..calendar_windows import (UNIT_SECONDS, WEEKDAYS, clock_window, day_window, day_window_at, local_date,
                                part_of_day_window, recent_window, weekday_date)

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
    unknown_person: str = ""                 # a person named in the question that no identity is
    unknown_place: str = ""                  # a place named in the question that is no known waypoint


def _count(word: str) -> int:
    """A count written as a word or digits ("two", "3"); 1 when unreadable (absurd digit strings
    are read as a trillion, which no window survives)."""
    if word.isdigit():
        return int(word) if len(word) <= 12 else 10 ** 12
    return _NUMBER_WORDS.get(word, 1)


_PARTS = {"morning": "morning", "afternoon": "afternoon", "evening": "evening", "night": "night", "tonight": "night"}


def parse_time_window(q: str, now: float, tz: ZoneInfo) -> tuple[Optional[float], Optional[float], list[str]]:
    """(start, end, matched phrases) for the time phrases of a question; (None, None) if none.
    Days are calendar days of ``tz`` and clock times are local (``calendar_windows``)."""
    words: list[str] = []
    m = re.search(r"\b(in|during|within|over) the (last|past) (\w+) (minute|hour|day)s?\b", q)
    if m:
        return recent_window(now, _count(m.group(3)), m.group(4), tz)[0], now, [m.group(0)]
    m = re.search(r"\b(\w+) (minute|hour|day)s? ago\b", q)
    if m and m.group(1) not in ("how", "many"):
        n = _count(m.group(1))
        if m.group(2) == "day":  # "two days ago": that calendar day (at most a century back)
            start, end = day_window_at(now, tz, min(n, 36_500))
        else:
            unit = UNIT_SECONDS[m.group(2)]
            start, end = now - n * unit - unit / 2, now - n * unit + unit / 2
        return max(0.0, start), max(0.0, min(now, end)), [m.group(0)]
    today = local_date(now, tz)
    day: Optional[dt.date] = None
    if "yesterday" in q:
        day, words = today - dt.timedelta(days=1), words + ["yesterday"]
    elif re.search(r"\b(today|this morning|this afternoon|this evening|tonight)\b", q):
        day = today
    elif "last night" in q:
        day, words = today - dt.timedelta(days=1), words + ["last night"]
    else:
        m = re.search(r"\b(on )?(" + "|".join(WEEKDAYS) + r")\b", q)
        if m:
            day = weekday_date(m.group(2), today)
            words.append(m.group(0))
    part = None
    for name, part_name in _PARTS.items():
        if re.search(rf"\b(this |in the |last |yesterday )?{name}\b", q):
            part = part_name
            words.append(name)
            break
    m = re.search(r"\b(at|around|about) (\d{1,2})(?::(\d{2}))? ?(am|pm)?\b", q)
    clock = None
    if m and (m.group(3) or m.group(4)):
        hour = int(m.group(2)) % 12 + (12 if m.group(4) == "pm" else 0) if m.group(4) else int(m.group(2))
        minute = int(m.group(3) or 0)
        if hour < 24 and minute < 60:
            clock = (hour, minute)
            words.append(m.group(0))
    if day is None and part is None and clock is None:
        return None, None, words
    day = day or today
    if clock is not None:
        start, end = clock_window(day, clock[0], clock[1], tz, margin_s=900.0)
    elif part is not None:
        start, end = part_of_day_window(day, part, tz)
    else:
        start, end = day_window(day, tz)
    if "today" in q:
        words.append("today")
    return max(0.0, start), max(0.0, min(end, now)), words


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
    # a word of a display name ("Carol" of "Carol Smith") names its person when no one else shares it
    owners: dict[str, set[str]] = {}
    for p in people:
        for word in _words(p.get("name") or ""):
            owners.setdefault(word, set()).add(p["person"])
    for word, ids in owners.items():
        if len(ids) == 1 and word not in _STOP and word not in person_names:
            person_names[word] = next(iter(ids))
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
    unknown_person, unknown_place = _unknown_names(question, q, person_names, place_names)
    if not unknown_place:
        unknown_place = _unknown_place(q, kind, place_names, bool(person or unknown_person or about_people))
    return ParsedQuestion(text=question, kind=kind, target=" ".join(target_words), person=person, place=place,
                          start=start, end=end, first=first, about_people=about_people, time_words=time_words,
                          unknown_person=unknown_person, unknown_place=unknown_place)


# -- names the memory does not know -------------------------------------------------------------
_DETERMINERS = {"the", "a", "an", "my", "your", "our", "their", "his", "her", "its", "this", "that", "these",
                "those", "some", "any", "every", "each", "no"}
_CALENDAR_WORDS = set(WEEKDAYS) | {"january", "february", "march", "april", "may", "june", "july", "august",
                                   "september", "october", "november", "december"}
# words that make a phrase after "in/at the" a place, whoever the question is about
_ROOM_WORDS = set("""room ballroom hall hallway corridor kitchen office lobby foyer atrium lab laboratory garage garden
yard courtyard entrance reception bathroom toilet restroom washroom cafeteria canteen library basement attic cellar
warehouse storeroom pantry closet bedroom lounge stairwell staircase elevator lift workshop studio auditorium gym
terrace balcony patio parking wing building floor dock shed""".split())
_GENERIC_PLACES = {"room", "area", "place", "location"}  # "in the room": no name to check
_PLACE_NOUNS = _ROOM_WORDS | _GENERIC_PLACES             # part of a place phrase though stop words
# phrases after "in the" that are not places ("who is in the picture")
_NOT_PLACES = {"picture", "image", "photo", "frame", "camera", "view", "memory", "world", "meantime", "end",
               "middle", "beginning", "dark", "rain", "sun", "background", "foreground", "way"}


def _unknown_names(question: str, q: str, person_names: dict[str, str],
                   place_names: dict[str, str]) -> tuple[str, str]:
    """(person, place) named in the question that the memory has no identity / waypoint for: an
    identity-shaped id ("person_9999") or a capitalised name that is nobody's display name."""
    person_prefixes = {"person"} | {k.split("_")[0] for k in person_names if re.fullmatch(r"[a-z]+_\d+", k)}
    place_prefixes = {"waypoint", "wp"} | {k.split("_")[0] for k in place_names if re.fullmatch(r"[a-z]+_\d+", k)}
    for m in re.finditer(r"\b([a-z]+)[_ ](\d+)\b", q):
        token = m.group(0)
        if token in person_names or token in place_names:
            continue
        if m.group(1) in person_prefixes and (m.group(1) == "person" or "_" in token):
            return token, ""
        if m.group(1) in place_prefixes and "_" in token:
            return "", token
    # runs of capitalised words ("Zoe", "Zoe Smith") that do not start a sentence; a run after a
    # determiner ("the Red Mug") names a thing, not a person
    tokens = list(re.finditer(r"[A-Za-z][A-Za-z'-]*", question))
    runs: list[tuple[list[str], bool]] = []       # (words, after a determiner)
    run_end = -2                                  # index of the last token of the current run
    for i, tok in enumerate(tokens):
        word = re.sub(r"'s$", "", tok.group(0))
        gap = question[tokens[i - 1].end():tok.start()] if i else ""
        capitalised = i > 0 and not re.search(r"[.!?:;]", gap) and re.fullmatch(r"[A-Z][a-z]+", word) is not None
        if not capitalised:
            continue
        if run_end == i - 1 and gap.strip() == "" and not tokens[i - 1].group(0).endswith("'s"):
            runs[-1][0].append(word)
        else:
            runs.append(([word], tokens[i - 1].group(0).lower() in _DETERMINERS))
        run_end = i
    for words, after_determiner in runs:
        name = " ".join(words)
        if not after_determiner and _is_unknown_name(name, list(person_names) + list(place_names)):
            return name, ""
    return "", ""


def _is_unknown_name(name: str, known_names: list[str]) -> bool:
    """No person or place is called ``name`` or has it as whole words of its name."""
    lower = name.lower()
    if any(re.search(rf"\b{re.escape(lower)}\b", known) for known in known_names):
        return False
    return not any(w in _STOP or w in _CALENDAR_WORDS for w in lower.split())


def _unknown_place(q: str, kind: str, place_names: dict[str, str], about_someone: bool) -> str:
    """A place phrase ("in the ballroom") that names no known waypoint: one whose last word is a
    room word, or any "in the X" when the question is about someone, or "to X" for a command."""
    words = _words(q)
    for i, word in enumerate(words):
        if word not in ("in", "inside", "into", "within", "at", "to"):
            continue
        j = i + 1
        det = words[j] if j < len(words) and words[j] in _DETERMINERS else ""
        j += bool(det)
        phrase: list[str] = []
        while j < len(words) and (words[j] not in _STOP or words[j] in _PLACE_NOUNS) and not words[j].isdigit():
            phrase.append(words[j])
            j += 1
        if not phrase or phrase[-1] in _NOT_PLACES or all(w in _GENERIC_PLACES for w in phrase):
            continue
        text = " ".join(phrase)
        if any(re.search(rf"\b{re.escape(name)}\b", text) for name in place_names):
            continue
        if (phrase[-1] in _ROOM_WORDS or (word in ("in", "inside", "into", "within") and about_someone)
                or (word == "to" and kind == "go")):
            return f"{det} {text}".strip()
    return ""
