"""Reading values out of the free text of a benchmark v2 answer (used by ``sim.scoring``).

It holds the regular expressions (refusals, "not seen", numbers in digits or words, clock
times, ISO times and dates, ``person_NNNN`` ids, "N people", durations, polarity cues),
``ReadContext`` (what reading needs: the question's zone and days, the names and rooms to look
for) and one ``read_<kind>(text, ctx)`` per answer kind, returning the value read or None.
The readers are strict on purpose (a lucky reading must not pass):
  - times: an ISO time, else a clock time (HH:MM, 2 pm, noon) on the day named (ISO date,
    today / yesterday, a weekday) or the question's day;
  - durations: ONE duration with a unit word (hours / hrs / h attached to a number as "1h",
    minutes / min, seconds / sec; "half an hour"), the first one not followed by "ago", hours
    and minutes combined when adjacent ("1 hour 20 minutes"); never a bare number, and clock
    times, dates, ``person_NNNN`` ids and "N people" are removed first;
  - counts: "N people / persons / individuals ...", else the names (and person ids) listed, else
    "nobody" ("no one else" is a qualifier), else the only number in the text;
  - rooms: exactly one room label of ``all_rooms`` (more than one is no answer); a waypoint
    "north_corridor_3" is the room "north_corridor" (``ReadContext.room_id``);
  - who came first: only "X came / arrived first / earlier / before ...", "X ... after Y" (Y),
    "the first was X", or both arrival times given;
  - yes / no: a leading yes / no, else one polarity only (a text saying both "I saw" and "I did
    not see" is no answer); "not seen" answers "no";
  - absent days: the days of the negative clauses ("not seen / absent / missing / didn't see ...
    on X"), or, in a text with no polarity at all (a bare list "Monday and today."), every day
    named;
  - persons: the names of ``names_of``, the truth's and its ``all_people`` and ``person_NNNN``
    ids, so unknown extra names count against precision; "nobody" is the empty set;
  - objects: the text itself, unless it says "don't know".
``says_unknown`` / ``says_not_seen`` / ``says_explicit`` tell whether a text declines: "don't
know", "not seen", and the explicit refusal an unanswerable question wants ("could not answer"
is not explicit).
"""
from __future__ import annotations

import datetime as dt
import re
from typing import Any, Optional

from ..calendar_windows import WEEKDAYS, clock_time, local_date, weekday_date
from .questions_v2 import zone_from_name

_REFUSAL = (r"i (do not|don'?t|dont) know|not sure|no idea|unsure|no information|not enough information|"
            r"insufficient")
_UNKNOWN = re.compile(r"\b(" + _REFUSAL + r"|(can ?not|can'?t|could ?not|couldn'?t|unable to) "
                      r"(answer|tell|say|determine))\b")
_NOT_SEEN = re.compile(r"\b(not (been )?seen|never (saw|seen|observed|noticed|spotted|appeared)|"
                       r"(have|has|had)(n'?t| not) (ever )?(been )?(seen|observed|spotted|noticed)|(did|do)(n'?t| not) (see|observe|spot|notice)|"
                       r"no (such )?(record|records|sighting|sightings|observation|observations|memory|trace)|"
                       r"(have|has|had|do|does|did)(n'?t| not) (have |got )?any (record|sighting|observation)s?|"
                       r"(could|can)(n'?t| ?not) find|(do|did)(n'?t| not) recogni[sz]e|no ?one (called|named|by that "
                       r"name)|nobody (called|named|by that name)|unknown person)\b")
_EXPLICIT = re.compile(r"\b(" + _REFUSAL + r")\b|" + _NOT_SEEN.pattern)   # unanswerable: "could not answer" is not
_UNITS = {"zero": 0, "one": 1, "a": 1, "an": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
          "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
          "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
         "ninety": 90}
_SMALL = "|".join(sorted((w for w in _UNITS if w not in ("a", "an")), key=len, reverse=True))
_WORD_NUMBER = (r"(?:(?:" + "|".join(_TENS) + r")(?:[- ](?:one|two|three|four|five|six|seven|eight|nine))?|"
                + _SMALL + ")")
_NUMBER = r"(\d+(?:\.\d+)?|" + _WORD_NUMBER + r")"                 # "a" / "an" are numbers only before a unit
_CLOCK = re.compile(r"\b(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\s*([ap])\.?\s?m\b\.?)?|\b(\d{1,2})\s*([ap])\.?\s?m\b\.?"
                    r"|\b(noon|midday|midnight)\b", re.I)
_ISO_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?", re.I)
_ISO_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_PERSON_ID = re.compile(r"\bperson_\d+\b")
_PEOPLE = r"(?:different |distinct |other |separate )?(?:people|persons?|individuals?|visitors?|faces|folks|humans)\b"
_N_PEOPLE = re.compile(r"\b(\d+|" + _WORD_NUMBER + r")\s+" + _PEOPLE)
_DURATION = re.compile(r"\b(?P<halfhour>half an hour|half-an-hour)\b"
                       r"|\b(?P<quarter>(?:a )?quarter of an hour|quarter-hour)\b"
                       r"|\b(?P<num>\d+(?:\.\d+)?|" + _WORD_NUMBER + r"|an?)(?P<half>\s+and\s+a\s+half)?\s*"
                       r"(?P<unit>hours?|hrs?|minutes?|mins?|seconds?|secs?)\b"
                       r"|\b(?P<hnum>\d+(?:\.\d+)?)h\b")
_NOBODY = re.compile(r"\b(nobody|no ?-?one|none|no people|no persons|(did|do)(n'?t| not) see anyone|not anyone)\b"
                     r"(?! else)")
# polarity: yes / no, who came first (a negated clause), absent days
_YES_CUE = re.compile(r"\b(i (saw|spotted|noticed|observed|caught)|i have seen|i've seen|(was|were) (seen|spotted|"
                      r"there|in|together|with|around)|(met|shared|joined|visited|stopped by|came|went)\b)")
_NO_CUE = re.compile(_NOT_SEEN.pattern + r"|\b((was|were|is|are|did|do)(n'?t| not)|never|nowhere)\b")
_NEGATED = re.compile(r"(" + _NO_CUE.pattern + r")(\s+\w+)?")    # a negative cue and the word after it
_CLAUSE = r"[^.;,:!?]{0,40}?"            # within one clause
_NEGATION = re.compile(r"\b(not|never|n't)\b|n't\b")
_ABSENT_CUE = re.compile(_NOT_SEEN.pattern + r"|\b(absent|missing|away|off|skipped|nowhere|no sign|(was|were|did)"
                         r"(n'?t| not)|never|not)\b")
_PRESENT_CUE = re.compile(r"\b(here|present|seen|saw|around|came|in|at work|there|spotted|showed up|turned up)\b")


def says_unknown(text: str) -> bool:
    """``text`` says "don't know" / "not sure" / "cannot tell" (case ignored)."""
    return bool(_UNKNOWN.search(text.lower()))


def says_not_seen(text: str) -> bool:
    """``text`` says "not seen" / "never saw" / "no record" / "unknown person" (case ignored)."""
    return bool(_NOT_SEEN.search(text.lower()))


def says_explicit(text: str) -> bool:
    """``text`` explicitly declines: "don't know" or "not seen" ("could not answer" is not)."""
    return bool(_EXPLICIT.search(text.lower()))


class ReadContext:
    """What reading an answer needs: the question's zone and dates, the names and rooms to look for."""

    def __init__(self, question: Any, names_of: dict[str, str]):
        self.question, self.names_of = question, names_of
        truth = question.answer
        self.zone = zone_from_name(truth.get("tz", "UTC"))
        self.asked_day = local_date(question.asked_at, self.zone)
        self.names = {str(n).lower() for n in list(names_of.values()) + list(truth.get("persons", []))
                      + list(truth.get("options", [])) + list(truth.get("all_people", []))
                      + ([truth["person"]] if "person" in truth else [])}
        rooms = dict(truth.get("all_rooms") or {})
        if truth.get("room"):
            rooms.setdefault(truth["room"], _label(truth["room"]))
        self.rooms = rooms                                  # room id -> label

    def name(self, ident: Any) -> str:
        return str(self.names_of.get(ident, ident)).lower()

    def names_in(self, text: str) -> list[str]:
        """Known names and ``person_NNNN`` ids (as names where ``names_of`` has one) in ``text``,
        in order of first mention, each once."""
        low = text.lower()
        found = [(m.start(), n) for n in self.names if (m := re.search(r"\b" + re.escape(n) + r"\b", low))]
        found += [(m.start(), self.name(m.group(0))) for m in _PERSON_ID.finditer(low)]
        return list(dict.fromkeys(n for _, n in sorted(found)))

    def room_id(self, value: Any) -> str:
        """A room or waypoint name as a room id: "The Open Office" -> open_office, a waypoint
        "north_corridor_3" -> north_corridor (when that is a room)."""
        room = _room_id(value)
        base = re.sub(r"_\d+$", "", room)
        return room if room in self.rooms or base not in self.rooms else base

    def rooms_in(self, text: str) -> list[str]:
        """The rooms whose label (or id) ``text`` names, a label inside a longer one not counted."""
        low = re.sub(r"[_\-]", " ", text.lower())
        spans = []
        for room, label in self.rooms.items():
            for words in {label.lower(), _label(room)}:
                spans += [(m.start(), m.end(), room) for m in re.finditer(r"\b" + re.escape(words) + r"\b", low)]
        kept = [s for s in spans if not any(o[0] <= s[0] and s[1] <= o[1] and o[1] - o[0] > s[1] - s[0]
                                            for o in spans)]
        return list(dict.fromkeys(room for _, _, room in sorted(kept)))

    def day_in(self, text: str) -> Optional[dt.date]:
        """The first date named in ``text``: an ISO date, today / yesterday, or a weekday (the
        most recent one on or before the asking day)."""
        hits = self.days_named(text.lower())
        return min(hits)[1] if hits else None

    def days_named(self, low: str) -> list[tuple[int, dt.date]]:
        """(position, date) of every date named in lower-case ``low``."""
        hits = [(m.start(), dt.date.fromisoformat(m.group(1))) for m in _ISO_DATE.finditer(low)]
        for word, back in (("today", 0), ("yesterday", 1)):
            hits += [(m.start(), self.asked_day - dt.timedelta(days=back))
                     for m in re.finditer(r"\b" + word + r"\b", low)]
        for day in WEEKDAYS:
            hits += [(m.start(), weekday_date(day, self.asked_day)) for m in re.finditer(r"\b" + day + r"s?\b", low)]
        return hits


def _room_id(value: Any) -> str:
    text = re.sub(r"[\s\-]+", "_", str(value or "").strip().lower())
    return text[4:] if text.startswith("the_") else text


def _label(room: str) -> str:
    return room.replace("_", " ")


def _number(word: str) -> float:
    if word[0].isdigit():
        return float(word)
    parts = re.split(r"[- ]", word.lower())
    return float(sum(_TENS.get(p, _UNITS.get(p, 0)) for p in parts))


def _without_noise(text: str) -> str:
    """``text`` lower case without ISO times and dates, clock times, person ids and "N people"."""
    low = _ISO_TIME.sub(" ", text.lower())
    low = _ISO_DATE.sub(" ", low)
    low = _CLOCK.sub(" ", low)
    low = _PERSON_ID.sub(" ", low)
    return _N_PEOPLE.sub(" ", low)


def _clock(m: re.Match) -> Optional[tuple[int, int, int]]:
    if m.group(7):
        return (0 if m.group(7).lower() == "midnight" else 12), 0, 0
    hour = int(m.group(1) or m.group(5))
    minute, second = int(m.group(2) or 0), int(m.group(3) or 0)
    half = (m.group(4) or m.group(6) or "").lower()
    if half == "p" and hour < 12:
        hour += 12
    elif half == "a" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59 or second > 59:
        return None
    return hour, minute, second


def _clock_in(text: str) -> Optional[tuple[int, int, int]]:
    """The first clock time in ``text`` as (hour, minute, second)."""
    m = _CLOCK.search(text)
    return _clock(m) if m else None


def _duration_minutes(m: re.Match) -> tuple[float, float]:
    """(minutes, the unit's size in minutes) of one _DURATION match."""
    if m.group("halfhour"):
        return 30.0, 1.0
    if m.group("quarter"):
        return 15.0, 1.0
    if m.group("hnum"):
        return float(m.group("hnum")) * 60.0, 60.0
    unit = m.group("unit")
    scale = 60.0 if unit.startswith("h") else 1 / 60 if unit.startswith("s") else 1.0
    return (_number(m.group("num")) + (0.5 if m.group("half") else 0.0)) * scale, scale


# --- readers: the value in an answer's text, or None
def read_position(text: str, ctx: ReadContext):
    if m := re.search(r"[\[(]\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)", text):
        return ("xy", float(m.group(1)), float(m.group(2)))
    room = read_room(text, ctx)
    return None if room is None else ("room", room)


def read_room(text: str, ctx: ReadContext):
    rooms = ctx.rooms_in(text)
    return rooms[0] if len(rooms) == 1 else None          # none, or several: no answer


def read_time(text: str, ctx: ReadContext):
    if m := _ISO_TIME.search(text):
        try:
            parsed = dt.datetime.fromisoformat(m.group(0).replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None:
            return (parsed if parsed.tzinfo else parsed.replace(tzinfo=ctx.zone)).timestamp()
    clock = _clock_in(text)
    if clock is None:
        return None
    truth_day = local_date(ctx.question.answer["time"], ctx.zone) if "time" in ctx.question.answer else ctx.asked_day
    default = ctx.asked_day if ctx.question.type == "first_seen" else truth_day   # the day is the question there
    day = ctx.day_in(text) or default
    return clock_time(day, clock[0], clock[1], ctx.zone, clock[2])


def read_habit_time(text: str, ctx: ReadContext):
    clock = _clock_in(text)
    return None if clock is None else clock[0] * 60 + clock[1] + clock[2] / 60.0


def read_duration(text: str, ctx: ReadContext):
    low = _without_noise(text)
    total, scale, end = None, 0.0, 0
    for m in _DURATION.finditer(low):
        after = low[m.end():]
        if total is None:
            if re.match(r"\s*(ago|earlier|later)\b", after):
                continue                                    # a moment ("10 minutes ago"), not a duration
            total, scale = _duration_minutes(m)
        elif re.fullmatch(r"[\s,]*(and)?\s*", low[end:m.start()]) and _duration_minutes(m)[1] < scale:
            minutes, scale = _duration_minutes(m)           # "1 hour 20 minutes": one duration
            total += minutes
        else:
            break
        end = m.end()
        if scale == 60.0 and not m.group("half") and re.match(r"\s*and a half\b", low[end:]):
            total += 30.0                                   # "an hour and a half"
    return total


def read_count(text: str, ctx: ReadContext):
    low = _CLOCK.sub(" ", _ISO_DATE.sub(" ", _ISO_TIME.sub(" ", text.lower())))
    if m := _N_PEOPLE.search(low):
        return int(_number(m.group(1)))
    if names := ctx.names_in(text):
        return len(names)
    if _NOBODY.search(low):
        return 0
    numbers = {_number(m.group(1)) for m in re.finditer(r"\b" + _NUMBER + r"\b", _PERSON_ID.sub(" ", low))}
    return int(numbers.pop()) if len(numbers) == 1 else None


def read_binary(text: str, ctx: ReadContext):
    low = text.strip().lower()
    if re.match(r"^\W*(yes|yeah|yep|correct|indeed|affirmative)\b", low):
        return "yes"
    if re.match(r"^\W*(no|nope|never|not)\b", low):
        return "no"
    if _UNKNOWN.search(low):
        return None
    no = bool(_NO_CUE.search(low))
    yes = bool(_YES_CUE.search(_NEGATED.sub(" ", low)))       # "never shared": no "shared" cue
    return "no" if no and not yes else "yes" if yes and not no else None


def read_persons(text: str, ctx: ReadContext):
    if names := ctx.names_in(text):
        return set(names)
    return set() if _NOBODY.search(text.lower()) else None


def read_who_first(text: str, ctx: ReadContext):
    low = text.lower()
    options = [o.lower() for o in ctx.question.answer.get("options", [])] or ctx.names_in(text)
    firsts = set()

    def said(pattern: str) -> bool:                          # a match without "not" / "never" in it
        return any(not _NEGATION.search(m.group(0)) for m in re.finditer(pattern, low))

    for n in options:
        name = r"\b" + re.escape(n) + r"\b"
        if said(name + _CLAUSE + r"\b(first|earlier|before|sooner|ahead)\b") or \
                said(r"\bfirst\b" + _CLAUSE + r"\b(was|were|is|came|arrived)\s+" + name):
            firsts.add(n)
        for other in options:
            if other != n and said(name + _CLAUSE + r"\b(after|later than)\s+" + re.escape(other) + r"\b"):
                firsts.add(other)
    if len(firsts) == 1:
        return firsts.pop()
    if firsts:
        return None
    times = {}                                               # "Alice came at 09:10, Bob at 09:40"
    for n in options:
        m = re.search(r"\b" + re.escape(n) + r"\b" + _CLAUSE + r"(?=\b\d{1,2}:\d{2})", low)
        if m and (clock := _clock_in(low[m.end():])):
            times[n] = clock
    if len(times) == 2 and len(set(times.values())) == 2:
        return min(times, key=times.get)
    return None


def read_absent_days(text: str, ctx: ReadContext):
    """Days named in negative clauses; a clause naming only days keeps the one before's polarity;
    in a text without any polarity cue, every day named."""
    low = text.lower()
    clauses = re.split(r"[.;!?]|,|\b(?:but|while|whereas|though|although|except|however)\b", low)
    days, polarity, any_cue = set(), None, False
    for clause in clauses:
        if _ABSENT_CUE.search(clause):
            polarity, any_cue = "absent", True
        elif _PRESENT_CUE.search(_ABSENT_CUE.sub(" ", clause)):
            polarity, any_cue = "present", True
        if polarity in ("absent", None):
            days |= {d.isoformat() for _, d in ctx.days_named(clause)}
    if any_cue and not days:
        return None
    return days or None


def read_objects(text: str, ctx: ReadContext):
    return text if text.strip() and not _UNKNOWN.search(text.lower()) else None

