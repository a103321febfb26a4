"""The rules planner's answers to questions about people, one function per intent (intents.yaml).

Definitions (what a patrolling robot can know): arrival / leaving is the first / last sighting
of the day; a stay lasts from its first to its last sighting (``visits``); two people were
together when the robot saw both at one place within COPRESENCE_S; a person was absent on a day the robot was active
and did not see them; new people are those whose first sighting ever falls in the window; a
usual workplace is the room (never a lunch room, meeting room or passage: ``slots.room_kind``)
seen on most days, a usual lunch time the median over days of the first sighting in a lunch
room between 11:00 and 14:30.

Without evidence the answer says so ("I have not seen Bob today."), with status no_answer,
never a guess; every answer carries the ids of the observations it rests on.
"""
from __future__ import annotations

import datetime as dt
import re
import statistics
from typing import Callable, Optional

from ..calendar_windows import (LUNCH_MINUTES, MONTHS, WEEKDAYS, clock_time, day_window, day_window_at, local_date,
                                week_window)
from .answer import STATUS_NO_ANSWER, Answer
from .memory_reader import MemoryReader
from .question_parser import ParsedQuestion
from .slots import OPENER_WORDS, place_phrase, room_kind
from .visits import observed_minutes, split_visits, spoken_duration

NOT_WORKPLACES = ("lunch", "meeting", "passage")
LUNCH_KINDS = ("lunch",)
MAX_EVIDENCE = 10
_EVER = re.compile(r"\b(ever|at any time|at all)\b", re.IGNORECASE)
# a yes/no question, after openers and a leading phrase ("On Monday, did ...")
_CHOICE = re.compile(r"\b(or|who|whom|which)\b", re.IGNORECASE)   # "Did Bob or Alice come first?": a choice
_AFTER = re.compile(r"\b(after|later than)\b(?!\s+(lunch|noon|midday|work|breakfast|dinner|the|that|this|\d))",
                    re.IGNORECASE)
_YES_NO = re.compile(r"^\W*([^,?]{0,40},\s*)?((" + "|".join(OPENER_WORDS) + r")\W+)*(did|was|were|is|has|had)\b",
                     re.IGNORECASE)
RECENT_S = 2 * 3600        # "where is X now": a sighting older than this says where X was, not is
STILL_HERE_S = 30 * 60     # "when did X leave": a last sighting this recent may not be a departure
NOW_S = 10 * 60            # "who is in the kitchen now": what the robot saw there this recently
COPRESENCE_S = 3 * 60      # seen in one place this close in time: together


def _seen_by(ans: Answer, row: dict) -> Answer:
    """On a fleet's memory: which robot saw it (the sighting's ``robot``)."""
    if ans.status == "ok" and row.get("robot"):
        ans.text += f" Seen by {row['robot']}."
    return ans


class PeopleAnswers:
    """Answers about people from the memory read through ``reader``; ``names``: id -> display name."""

    def __init__(self, reader: MemoryReader, names: dict[str, str]):
        self.reader = reader
        self.tools = reader.tools
        self.names = names

    # -- helpers -------------------------------------------------------------------------------
    def name(self, identity: str) -> str:
        return self.names.get(identity, identity)

    def _hhmm(self, t: float) -> str:
        return dt.datetime.fromtimestamp(t, tz=self.tools.tz).strftime("%H:%M")

    def at(self, t: float) -> str:
        """"at 10:02" today, "yesterday at 10:02", "on Monday at 10:02" this week, else the date."""
        local = dt.datetime.fromtimestamp(t, tz=self.tools.tz)
        days = (local_date(self.tools.now, self.tools.tz) - local.date()).days
        day = "" if days == 0 else "yesterday " if days == 1 else \
            f"on {local:%A} " if 1 < days < 7 else f"on {local:%Y-%m-%d} "
        return f"{day}at {local:%H:%M}"

    def _when(self, p: ParsedQuestion) -> str:
        """The question's time phrase for the answer's text ("on Monday"), or the default window
        the last ``window`` call used ("today"): a "no" must say for when; "" for all time."""
        if not p.time_words:
            return getattr(self, "_default", "")
        phrase = _CALENDAR_NAME.sub(lambda m: m.group(0).capitalize(), " ".join(p.time_words))
        return f"on {phrase}" if phrase.lower() in WEEKDAYS else phrase     # "Bob, lab, Monday?"

    def window(self, p: ParsedQuestion, default: str) -> tuple[float, float]:
        """The question's window; without one ``default``: "ever", "today" or "week" (since Monday);
        "now" about a place: the last NOW_S."""
        now = self.tools.now
        self._default = ""
        if p.asks_now and p.place:
            self._default = f"in the last {NOW_S // 60} minutes"
            return max(0.0, now - NOW_S), now
        if p.start is not None or p.end is not None:
            return p.start or 0.0, min(p.end or now, now)
        if _EVER.search(p.text):
            return 0.0, now
        if default == "today":
            self._default = "today"
            return day_window_at(now, self.tools.tz)[0], now
        if default == "week":
            self._default = "this week"
            return week_window(local_date(now, self.tools.tz), self.tools.tz)[0], now
        return 0.0, now

    def unobserved(self, p: ParsedQuestion, start: float, end: float) -> Optional[Answer]:
        """"I don't know" when the robot did not look at the question's place in the window, or
        recorded nothing at all then (a "no" or "nobody" would be a guess); None when it did."""
        if not p.place:
            if self.reader.recorded(start, end):
                return None
            text = f"I don't know: I recorded nothing {self._when(p) or 'in that time'}."
            return Answer(status=STATUS_NO_ANSWER, text=text, error=text)
        if self.reader.looked_at(p.place, start, end):
            return None
        place = p.place.replace("_", " ")
        last = self.reader.looked_at(p.place, 0.0, self.tools.now)
        since = f" (I last looked there {self.at(last['t'])})" if last else ""
        when = "now" if p.asks_now else self._when(p) or "in that time"
        text = f"I don't know: I did not look in the {place} {when}{since}."
        return Answer(status=STATUS_NO_ANSWER, text=text, error=text)

    def not_seen(self, who: str, p: ParsedQuestion, where: str = "") -> Answer:
        when = self._when(p)
        text = f"I have not seen {who}" + (f" in the {where.replace('_', ' ')}" if where else "") + \
               (f" {when}" if when else "") + "."
        return Answer(status=STATUS_NO_ANSWER, text=text, error=text)

    def _evidence(self, ans: Answer, rows: list[dict]) -> Answer:
        ans.evidence = list(dict.fromkeys(r["id"] for r in rows))[:MAX_EVIDENCE]
        return ans

    def _located(self, kind: str, row: dict, text: str) -> Answer:
        # where the person stood (from depth) when known, else where the robot was when it saw them
        where = row.get("person_position") or row.get("position")
        ans = Answer(type=kind, position=list(where) if where is not None else None,
                     waypoint=row.get("waypoint", ""), confidence=0.7)
        ans.set_time(row["t"], self.tools.now, self.tools.tz)
        place = place_phrase(row.get("waypoint", ""))
        ans.text = text.format(name=self.name(row.get("_person", "")), place=place, at=self.at(row["t"]))
        return self._evidence(ans, [row])

    def _persons_in(self, p: ParsedQuestion, start: float, end: float) -> tuple[list[str], list[dict]]:
        """Who was seen in [start, end] (at the question's place): ids in order of first sighting, and
        the rows showing anyone there (people without an identity too)."""
        if p.place:
            rows = [r for r in self.reader.place_history(p.place, start, end) if r.get("persons") or r.get("unidentified")]
            return list(dict.fromkeys(x for r in rows for x in r["persons"])), rows
        seen = self._first_sightings(start, end)
        return [r["person"] for r in seen], seen

    def _first_sightings(self, start: float, end: float) -> list[dict]:
        """Each person's first sighting in [start, end] as a row (id, t, person), by time."""
        return [{"id": x["first_id"], "t": x["first_t"], "person": x["person"]}
                for x in self.reader.persons_between(start, end)]

    # -- one sighting: last / first -----------------------------------------------------------
    def last_sighting(self, p: ParsedQuestion, default_window: str, kind: str, text: str) -> Answer:
        start, end = self.window(p, default_window)
        rows = self.reader.person_sightings(p.person, start, end, p.place, last_only=True)
        if not rows:
            return self.not_seen(self.name(p.person), p, p.place)
        return _seen_by(self._located(kind, {**rows[-1], "_person": p.person}, text), rows[-1])

    def first_sighting(self, p: ParsedQuestion, default_window: str, text: str) -> Answer:
        start, end = self.window(p, default_window)
        rows = self.reader.person_sightings(p.person, start, end, p.place, first_only=True)
        if not rows:
            return self.not_seen(self.name(p.person), p, p.place)
        return _seen_by(self._located("time", {**rows[0], "_person": p.person}, text), rows[0])

    def _age(self, ans: Answer) -> float:
        return self.tools.now - ans.time if ans.time is not None else float("inf")

    def last_place(self, p: ParsedQuestion) -> Answer:
        return self.last_sighting(p, "ever", "position", "I last saw {name} {place} {at}.")

    def where_now(self, p: ParsedQuestion) -> Answer:
        ans = self.last_sighting(p, "ever", "position", "{name} was last seen {place} {at}; probably still there.")
        if ans.status == "ok" and self._age(ans) > RECENT_S:     # the last known place, said as such
            said, by = ans.text.split(" Seen by ", 1) if " Seen by " in ans.text else (ans.text, "")
            ans.text = f"I don't know where {self.name(p.person)} is now: I last saw them " + \
                       said.split(" was last seen ", 1)[1].replace("; probably still there.", ".") + \
                       (f" Seen by {by}" if by else "")
            ans.confidence = 0.3
        return ans

    def last_time(self, p: ParsedQuestion) -> Answer:
        return self.last_sighting(p, "ever", "time", "I last saw {name} {at}, {place}.")

    def departure(self, p: ParsedQuestion) -> Answer:
        ans = self.last_sighting(p, "today", "time", "{name} was last seen {at} {place} (they may have stayed "
                                                     "on after I looked).")
        if ans.status == "ok" and self._age(ans) < STILL_HERE_S:
            ans.text = f"I last saw {self.name(p.person)} {self.at(ans.time)} {place_phrase(ans.waypoint)}; " \
                       "they may not have left yet."
            ans.confidence = 0.3
        return ans

    def first_seen(self, p: ParsedQuestion) -> Answer:
        return self.first_sighting(p, "ever", "I first saw {name} {at}, {place}.")

    def arrival(self, p: ParsedQuestion) -> Answer:
        return self.first_sighting(p, "today", "{name} was first seen {at} {place} (the earliest I saw them: "
                                               "they may have come in before I looked).")

    # -- presence -------------------------------------------------------------------------------
    def was_in(self, p: ParsedQuestion) -> Answer:
        start, end = self.window(p, "ever")
        where = f" in the {p.place.replace('_', ' ')}" if p.place else ""
        when = f" {self._when(p)}" if p.time_words else ""
        if p.person:
            rows = self.reader.person_sightings(p.person, start, end, p.place)
            who = self.name(p.person)
        elif p.place:   # people seen there without an identity are somebody too
            rows = [r for r in self.reader.place_history(p.place, start, end) if r.get("persons") or r.get("unidentified")]
            who = "anyone"
        else:   # "did you see anyone today?"
            rows = self._first_sightings(start, end)
            who = "anyone"
        if not rows:
            elsewhere = self.reader.person_sightings(p.person, start, end, last_only=True) if p.person and p.place \
                else []
            if elsewhere:   # seen, but somewhere else: a real "no", with where they were
                row = elsewhere[-1]
                ans = Answer(type="binary", binary="no", confidence=0.7, text=(
                    f"No, I did not see {who}{where}{when}; I saw them {place_phrase(row.get('waypoint', ''))} "
                    f"{self.at(row['t'])}."))
                return self._evidence(ans, elsewhere)
            return self.unobserved(p, start, end) or Answer(
                type="binary", binary="no", confidence=0.6, text=f"No, I did not see {who}{where}{when}.")
        last = rows[-1]
        if who == "anyone":
            seen = list(dict.fromkeys(x for r in rows for x in (r.get("persons") or [r.get("person")]) if x))
            who = spoken_list(self.name(x) for x in seen) or ("someone I could not identify"
                                                              if any(r.get("unidentified") for r in rows) else who)
        ans = Answer(type="binary", binary="yes", confidence=0.8, waypoint=last.get("waypoint", ""),
                     text=f"Yes, I saw {who}{where}{when} (last {self.at(last['t'])}).")
        return self._evidence(ans, rows)

    def duration(self, p: ParsedQuestion) -> Answer:
        if p.start is None:   # without a day: the day of the last sighting
            last = self.reader.person_sightings(p.person, 0.0, self.tools.now, p.place, last_only=True)
            start, end = day_window_at(last[-1]["t"], self.tools.tz) if last else (0.0, self.tools.now)
            end = min(end, self.tools.now)
        else:
            start, end = self.window(p, "today")
        rows = self.reader.person_sightings(p.person, start, end, p.place)
        if not rows:
            return self.not_seen(self.name(p.person), p, p.place)
        visits = split_visits(rows, lambda r: r["t"])
        minutes = observed_minutes(visits, lambda r: r["t"])
        spans = ", ".join(f"{self._hhmm(v[0]['t'])}-{self._hhmm(v[-1]['t'])}" for v in visits)
        where = f" in the {p.place.replace('_', ' ')}" if p.place else ""
        text = f"I saw {self.name(p.person)}{where} for {spoken_duration(minutes)} ({len(visits)} visit(s): {spans})"
        if len(visits) > 1:   # between visits the robot was elsewhere: the stay may have gone on
            text += "; I was not there in between, so the stay may have been longer"
        ans = Answer(type="duration", duration_minutes=round(minutes, 1), waypoint=p.place, confidence=0.6,
                     text=text + ".")
        return self._evidence(ans, rows)

    def who_in(self, p: ParsedQuestion) -> Answer:
        start, end = self.window(p, "ever" if p.place else "today")   # "who was in the kitchen?": ever
        persons, rows = self._persons_in(p, start, end)
        if not persons and (unknown := self.unobserved(p, start, end)):
            return unknown
        where = f" in the {p.place.replace('_', ' ')}" if p.place else ""
        text = (f"I saw {spoken_list(self.name(x) for x in persons)}{where}." if persons
                else f"I saw nobody{where}." if not rows else f"I saw someone{where} but could not tell who.")
        return self._evidence(Answer(type="persons", persons=persons, waypoint=p.place, confidence=0.6, text=text),
                              [r for r in rows if r.get("persons")] or rows)

    def count(self, p: ParsedQuestion) -> Answer:
        start, end = self.window(p, "ever" if p.place else "today")
        persons, rows = self._persons_in(p, start, end)
        if not persons and (unknown := self.unobserved(p, start, end)):
            return unknown
        where = f" in the {p.place.replace('_', ' ')}" if p.place else ""
        # people seen there without an identity count too, as many as were ever in one view at once
        # (each of them may be one of those identified at another time: no more can be told apart)
        together = max((len(r.get("persons", [])) + r.get("unidentified", 0) for r in rows), default=0)
        count = max(len(persons), together)
        names = [self.name(x) for x in persons] + ([f"{count - len(persons)} I could not identify"]
                                                   if count > len(persons) else [])
        ans = Answer(type="count", count=count, persons=persons, confidence=0.5 if count == len(persons) else 0.4,
                     text=f"{count} {'person' if count == 1 else 'people'}{where}"
                     + (f": {spoken_list(names)}." if names else "."))
        return self._evidence(ans, rows)

    # -- two people --------------------------------------------------------------------------------
    def who_first(self, p: ParsedQuestion) -> Answer:
        start, end = self.window(p, "today")
        if not p.person2:   # "who arrived first today?" (or "did Bob come in first?"): of everyone seen
            seen = self._first_sightings(start, end)
            if not seen:
                return self.unobserved(p, start, end) or self.not_seen("anyone", p)
            first = seen[0]
            ans = Answer(type="persons", persons=[r["person"] for r in seen], confidence=0.5,
                         text=f"{self.name(first['person'])} came first (first seen {self.at(first['t'])}).")
            return self._evidence(ans, seen[:1])
        firsts = {}
        for person in (p.person, p.person2):
            rows = self.reader.person_sightings(person, start, end, first_only=True)
            if rows:
                firsts[person] = rows[0]
        if not firsts:
            return self.not_seen(f"{self.name(p.person)} or {self.name(p.person2)}", p)
        order = sorted(firsts, key=lambda x: firsts[x]["t"])
        others = [x for x in (p.person, p.person2) if x not in order]
        seen = "; ".join(f"{self.name(x)} first seen at {self._hhmm(firsts[x]['t'])}" for x in order)
        unseen = "".join(f"; I did not see {self.name(x)}" for x in others)
        text = f"{self.name(order[0])} came first ({seen}{unseen})."
        ans = Answer(type="persons", persons=order + others, confidence=0.6, text=text)
        if _YES_NO.match(p.text) and not _CHOICE.search(p.text):   # "Did Bob arrive before Alice?": yes or no
            yes = (order[0] == p.person) != bool(_AFTER.search(p.text))
            ans.binary, ans.text = ("yes", f"Yes: {text}") if yes else ("no", f"No: {text}")
        return self._evidence(ans, [firsts[x] for x in order])

    def _companions(self, person: str, rows: list[dict]) -> list[dict]:
        """Observations at the places ``person`` was seen, within COPRESENCE_S of a sighting
        there, that show someone else: one view need not show both people in one room."""
        out: dict[str, dict] = {}
        for visit in split_visits(rows, lambda r: r["t"], gap_s=COPRESENCE_S):
            for place in {r.get("waypoint") for r in visit if r.get("waypoint")}:
                times = [r["t"] for r in visit if r.get("waypoint") == place]
                for r in self.reader.place_history(place, times[0] - COPRESENCE_S, times[-1] + COPRESENCE_S):
                    if any(x != person for x in r.get("persons", [])) and \
                            min(abs(r["t"] - t) for t in times) <= COPRESENCE_S:
                        out[r["id"]] = r
        return sorted(out.values(), key=lambda r: r["t"])

    def with_whom(self, p: ParsedQuestion) -> Answer:
        start, end = self.window(p, "today")
        rows = self.reader.person_sightings(p.person, start, end, p.place)
        if not rows:
            return self.not_seen(self.name(p.person), p)
        together = self._companions(p.person, rows)
        persons = list(dict.fromkeys(x for r in together for x in r["persons"] if x != p.person))
        text = (f"I saw {self.name(p.person)} with {spoken_list(self.name(x) for x in persons)}." if persons
                else f"I saw {self.name(p.person)} with nobody else.")
        return self._evidence(Answer(type="persons", persons=persons, confidence=0.6, text=text), together or rows)

    def together(self, p: ParsedQuestion) -> Answer:
        start, end = self.window(p, "today")
        rows = self.reader.person_sightings(p.person, start, end, p.place)
        both = [r for r in self._companions(p.person, rows) if p.person2 in r.get("persons", [])] if rows else []
        a, b = self.name(p.person), self.name(p.person2)
        if both:
            last = both[-1]
            ans = Answer(type="binary", binary="yes", confidence=0.8, waypoint=last.get("waypoint", ""),
                         text=f"Yes, I saw {a} and {b} together (last {self.at(last['t'])}, "
                              f"{(last.get('waypoint') or 'somewhere').replace('_', ' ')}).")
            return self._evidence(ans, both)
        ans = Answer(type="binary", binary="no", confidence=0.5,
                     text=(f"No, I did not see {a} and {b} together" if rows else f"No, I did not see {a}")
                     + (f" {self._when(p)}." if self._when(p) else "."))
        return self._evidence(ans, rows)

    # -- over days ----------------------------------------------------------------------------------
    def absent_days(self, p: ParsedQuestion) -> Answer:
        """Evidence: for each absent day, the robot's first observation that day (it was there)."""
        start, end = self.window(p, "week")
        active = self.reader.active_days(start, end)
        if not active:
            return Answer(status=STATUS_NO_ANSWER, text="I don't know: I recorded nothing in that time.",
                          error="no observations in the window")
        absent = [d for d in active
                  if p.person not in {x["person"] for x in self.reader.persons_between(*self._day_in(d, start, end))}]
        names = spoken_list(d.strftime("%A") for d in absent)
        ans = Answer(type="days", days=[d.isoformat() for d in absent], confidence=0.6,
                     text=f"I did not see {self.name(p.person)} on {names}." if absent
                     else f"I saw {self.name(p.person)} on every day I was active.")
        ans.evidence = [active[d] for d in absent][:MAX_EVIDENCE]
        return ans

    def _day_in(self, day: dt.date, start: float, end: float) -> tuple[float, float]:
        day_start, day_end = day_window(day, self.tools.tz)
        return max(start, day_start), min(end, day_end)

    def first_time(self, p: ParsedQuestion) -> Answer:
        start, end = self.window(p, "today")
        persons, rows = self._persons_in(p, start, end)
        new = [x for x in persons if not self.reader.person_sightings(x, 0.0, max(0.0, start - 1e-3), first_only=True)]
        if not new and (unknown := self.unobserved(p, start, end)):
            return unknown
        text = f"New: {spoken_list(self.name(x) for x in new)}." if new else "I saw nobody for the first time."
        evidence = [r for r in rows if set(r.get("persons") or [r.get("person")]) & set(new)]
        return self._evidence(Answer(type="persons", persons=new, confidence=0.5, text=text), evidence)

    def _all_sightings(self, p: ParsedQuestion) -> list[dict]:
        """A habit's sightings: in the question's window when its time words name days ("last
        week"); a time of day alone ("at midday") says which habit, not when to look: every day."""
        start, end = self.window(p, "ever")
        if p.time_words and not any(_DATED.search(w) for w in p.time_words):
            start, end = 0.0, self.tools.now
        return self.reader.person_sightings(p.person, start, end)

    def habit_place(self, p: ParsedQuestion) -> Answer:
        """The workplace seen on most days; seen only in shared rooms: the most seen of those, said so."""
        seen = [r for r in self._all_sightings(p) if r.get("waypoint")]
        if not seen:
            return self.not_seen(self.name(p.person), p)
        rows = [r for r in seen if room_kind(r["waypoint"]) not in NOT_WORKPLACES] or seen
        days: dict[str, set] = {}
        count: dict[str, int] = {}
        for r in rows:
            days.setdefault(r["waypoint"], set()).add(local_date(r["t"], self.tools.tz))
            count[r["waypoint"]] = count.get(r["waypoint"], 0) + 1
        place = min(days, key=lambda w: (-len(days[w]), -count[w], w))
        room, n = place.replace("_", " "), len(days[place])
        evidence = [r for r in rows if r["waypoint"] == place]
        if room_kind(place) in NOT_WORKPLACES:   # no workplace seen: say so, with what was seen
            text = (f"I don't know where {self.name(p.person)} usually works: I only saw them in shared rooms, "
                    f"most often the {room} (on {n} day{'s' if n != 1 else ''}).")
            return self._evidence(Answer(status=STATUS_NO_ANSWER, text=text, error=text), evidence)
        if n < 2:     # one day is no habit: said, not answered
            text = f"I don't know where {self.name(p.person)} usually works: I saw them on one day only, " \
                   f"most in the {room}; one day is no habit."
            return self._evidence(Answer(status=STATUS_NO_ANSWER, text=text, error=text), evidence)
        ans = Answer(type="waypoint", waypoint=place, confidence=0.6,
                     text=f"{self.name(p.person)} usually works in the {room} (seen there on {n} days).")
        return self._evidence(ans, evidence)

    def habit_time(self, p: ParsedQuestion) -> Answer:
        """The usual time of lunch, or of getting in / leaving when the question says so."""
        usual = _USUAL_ARRIVAL.search(p.text.lower()) and "arrival" or _USUAL_LEAVING.search(p.text.lower()) and "leaving"
        if usual:
            return self._usual_day_edge(p, usual == "arrival")
        lunch: dict[dt.date, dict] = {}
        lo, hi = LUNCH_MINUTES
        for r in self._all_sightings(p):
            local = dt.datetime.fromtimestamp(r["t"], tz=self.tools.tz)
            if (room_kind(r.get("waypoint", "")) in LUNCH_KINDS and lo <= local.hour * 60 + local.minute <= hi
                    and local.date() not in lunch):
                lunch[local.date()] = r
        if not lunch:
            return Answer(status=STATUS_NO_ANSWER, text=f"I don't know: I never saw {self.name(p.person)} at lunch.",
                          error="no sighting in a lunch room at lunch time")
        minutes = statistics.median(_minute_of_day(r["t"], self.tools.tz) for r in lunch.values())
        last_day = max(lunch)
        days = f"{len(lunch)} day{'s' if len(lunch) != 1 else ''}"
        ans = Answer(type="time", confidence=0.5,
                     text=f"{self.name(p.person)} usually has lunch around {int(minutes // 60):02d}:"
                          f"{int(minutes % 60):02d} (seen at lunch on {days}).")
        ans.set_time(clock_time(last_day, int(minutes // 60), int(minutes % 60), self.tools.tz, second=(minutes * 60) % 60),
                     self.tools.now, self.tools.tz)
        return self._evidence(ans, list(lunch.values()))

    def _usual_day_edge(self, p: ParsedQuestion, arrival: bool) -> Answer:
        """The median time of a person's first (``arrival``) or last sighting of each day seen;
        one day is no habit (said, not answered)."""
        edge: dict[dt.date, dict] = {}
        for r in self._all_sightings(p):
            day = local_date(r["t"], self.tools.tz)
            if day not in edge or (r["t"] < edge[day]["t"]) == arrival:
                edge[day] = r
        name, verb = self.name(p.person), "gets in" if arrival else "leaves"
        if len(edge) < 2:
            seen = f"I saw them on one day only ({self.at(next(iter(edge.values()))['t'])})" if edge else "I never saw them"
            text = f"I don't know when {name} usually {verb}: {seen}; one day is no habit."
            return self._evidence(Answer(status=STATUS_NO_ANSWER, text=text, error=text), list(edge.values()))
        minutes = statistics.median(_minute_of_day(r["t"], self.tools.tz) for r in edge.values())
        ans = Answer(type="time", confidence=0.5,
                     text=f"{name} usually {verb} around {int(minutes // 60):02d}:{int(minutes % 60):02d} "
                          f"({'first' if arrival else 'last'} seen at about that time on {len(edge)} days).")
        ans.set_time(clock_time(max(edge), int(minutes // 60), int(minutes % 60), self.tools.tz,
                                second=(minutes * 60) % 60), self.tools.now, self.tools.tz)
        return self._evidence(ans, list(edge.values()))

    def handler(self, intent: str) -> Optional[Callable[[ParsedQuestion], Answer]]:
        return getattr(self, intent, None) if intent in PEOPLE_INTENTS else None


_USUAL_ARRIVAL = re.compile(r"\b(arrive|arrives|get in|gets in|come in|comes in|start|starts|turn up|turns up|"
                            r"show up|shows up|clock in|clocks in|get here|gets here|get to work|gets to work)\b")
_USUAL_LEAVING = re.compile(r"\b(leave|leaves|go home|goes home|head home|heads home|finish|finishes|head out|"
                            r"heads out|knock off|knocks off|clock out|clocks out|call it a day|calls it a day)\b")
def spoken_list(items) -> str:
    """ "Alice", "Alice and Bob", "Alice, Bob and Carol"."""
    items = list(items)
    return " and ".join(items) if len(items) < 3 else ", ".join(items[:-1]) + " and " + items[-1]


_CALENDAR_NAME = re.compile(r"\b(" + "|".join(WEEKDAYS + tuple(MONTHS)) + r")\b")   # capitalised in answers
# time words that name days (a habit "this week", "since Monday"); without them a time of day
# ("at midday", "in the mornings") says which habit, not when to look
_DATED = re.compile(r"\b(today|yesterday|tonight|last night|week|weekend|month|year|days?|ago|since|\d{4}|"
                    + "|".join(f"{d}s?" for d in WEEKDAYS) + "|" + "|".join(MONTHS) + r")\b")


def _minute_of_day(t: float, tz) -> float:
    local = dt.datetime.fromtimestamp(t, tz=tz)
    return local.hour * 60 + local.minute + local.second / 60.0


PEOPLE_INTENTS = ("last_place", "where_now", "last_time", "departure", "first_seen", "arrival", "was_in",
                  "duration", "who_in", "count", "who_first", "with_whom", "together", "absent_days",
                  "first_time", "habit_place", "habit_time")
