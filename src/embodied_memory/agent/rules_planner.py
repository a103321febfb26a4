"""The ``rules`` planner: deterministic routing of parsed questions to memory tools.

No model beyond the text embedder: it is the embedded default when no LLM endpoint is
configured and the fallback when the endpoint is down.  A question about people goes by its
intent (the nearest examples of ``intents.yaml``, MiniLM) to ``people_answers``; a question
like no example gets "I am not sure what you mean" (``not_understood`` is set: the query agent
asks the llm planner instead when an endpoint is configured).  Other questions (objects,
places, commands) go by their coarse kind (question words): object phrases are matched by
embedding similarity (``match_threshold``); among near-equal matches the most recent (or the
first, for "first"/"arrive" questions) wins.
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import replace
from typing import Optional

from ..detector_sentences import names_no_things
from .answer import STATUS_NO_ANSWER, Answer, no_answer
from .intents import MIN_SIMILARITY as MIN_UNDERSTOOD, OUT_OF_SCOPE, IntentClassifier, shared_classifier
from .memory_reader import QUERY_CHARS, MemoryReader
from .people_answers import PEOPLE_INTENTS, PeopleAnswers, spoken_list
from .question_parser import ParsedQuestion, parse_question
from .slots import place_phrase
from .tools import NAVIGATE, ToolBox
from .visits import observed_minutes, split_visits, spoken_duration

DOUBTED_CONFIDENCE = 0.3   # at most, for an answer resting on an identity with conflicting evidence

NEAR_EQUAL = 0.05  # similarity margin within which matches count as the same thing
SAME_THING = 0.12  # below the match in the room, still the same thing seen again (MiniLM, "red box": the same box
                   # described from elsewhere 0.51-0.57, a blue box 0.34)
NOT_SEEN_EVIDENCE = 5  # views of a place that ground a "not there" (the latest)
MIN_VIEWS_FOR_NO = 3   # a "no a ... there" from the views of a place alone needs at least this many of them
PLACE_VIEWS_READ = 200  # the latest views of a place read to ground a "not there" (one bounded call)
_PAST = re.compile(r"^\W*(have|has|had)\b|\b(was|were|did|had|used to)\b", re.IGNORECASE)
_NEGATED = re.compile(r"\b(no|not|without|nor)\s+(?:\w+\s+){0,2}$")


def _one_thing_now(p: ParsedQuestion) -> bool:
    """The question asks where one thing is now: "is the box in ...", "can the box be found in
    ...", "does the kitchen have my mug"; not "is there a box ..." (one of several may be
    anywhere) nor the past ("was the box ...", "tell me if the box was ...", "did you see the box")."""
    first = p.target.split()[0] if p.target.split() else ""
    return bool(first) and not p.start and not _PAST.search(p.text) and re.search(
        rf"\b(the|my|our|your)\s+{re.escape(first)}\b", p.text, re.IGNORECASE) is not None


_GENERIC = {"", "objects", "object", "things", "anything", "everything", "something", "stuff", "items", "what"}


def singular(word: str) -> str:
    """An English noun's singular, by rule ("boxes" -> box, "bottles" -> bottle, "knives" -> knife,
    "batteries" -> battery, "glass" -> glass)."""
    if len(word) <= 3 or not word.endswith("s") or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("ves"):
        return word[:-3] + ("fe" if word[-4:-3] == "i" else "f")
    if word.endswith(("ses", "xes", "zes", "ches", "shes")):
        return word[:-2]
    return word[:-1]


def _names(row: dict, phrase: str) -> bool:
    """The row's description names ``phrase``: its words in order, singular or plural ("blue box"
    in "two blue boxes on a shelf"; not in "a blue mug and a box"), not negated ("no mug on the
    counter")."""
    wanted = [singular(w) for w in re.findall(r"[a-z0-9]+", phrase.lower())]
    if not wanted:
        return False
    text = (row.get("description") or "").lower()
    spans = list(re.finditer(r"[a-z0-9]+", text))
    words = [singular(m.group(0)) for m in spans]
    return any(words[i:i + len(wanted)] == wanted and not _NEGATED.search(text[:spans[i].start()])
               for i in range(len(words) - len(wanted) + 1))


def _position(row: dict):
    """An observation's [x, y, z]; None when it was stored without a pose (waypoint only)."""
    return list(row["position"]) if row.get("position") is not None else None


def _place(row: dict) -> str:
    """Where an observation was, as an answer says it ("in the kitchen", "at (1.0, 2.0)")."""
    if row.get("waypoint"):
        return place_phrase(row["waypoint"])
    return f"at {tuple(row['position'][:2])}" if row.get("position") is not None else "at an unknown position"


class RulesPlanner:
    name = "rules"

    def __init__(self, match_threshold: float = 0.35, classifier: Optional[IntentClassifier] = None):
        self.match_threshold = match_threshold
        self.classifier = classifier
        self.not_understood = False          # the last question was like no example of the bank
        self._names: dict[str, str] = {}
        self._doubts: dict[str, str] = {}     # identity id -> why its sightings may be two people
        self._reader: Optional[MemoryReader] = None

    def _call(self, tools: ToolBox, tool: str, args: dict):
        return self._reader_for(tools).call(tool, args)

    def _reader_for(self, tools: ToolBox) -> MemoryReader:
        if self._reader is None or self._reader.tools is not tools:
            self._reader = MemoryReader(tools)
        return self._reader

    def _matches(self, tools: ToolBox, p: ParsedQuestion, margin: float = NEAR_EQUAL) -> list[dict]:
        """Observations matching the target phrase inside the window, best similarity first
        (within ``margin`` of the best)."""
        end = min(p.end or tools.now, tools.now)
        # a time window (yesterday, on Monday) needs a deeper candidate list: the best matches
        # overall may all lie on other days
        k = 300 if p.start else 30
        hits = self._call(tools, "text_observations", {"query": (p.target or p.text)[:QUERY_CHARS], "k": k,
                                                              "before": end})
        # a sentence of the detectors says who and where, never what: no sighting of a thing
        hits = [h for h in hits if h["t"] >= (p.start or 0.0) and not names_no_things(h.get("description", ""))]
        if p.place:
            hits = [h for h in hits if h.get("waypoint") == p.place]
        if p.person:
            hits = [h for h in hits if p.person in h.get("persons", [])]
        if not hits or hits[0]["similarity"] < self.match_threshold:
            return []
        best = hits[0]["similarity"]
        return [h for h in hits if h["similarity"] >= best - margin]

    def _window(self, tools: ToolBox, p: ParsedQuestion) -> tuple[float, float]:
        """The question's window, never beyond the question time."""
        return p.start or 0.0, min(p.end or tools.now, tools.now)

    def _place_history(self, tools: ToolBox, p: ParsedQuestion) -> list[dict]:
        start, end = self._window(tools, p)
        return self._reader_for(tools).place_history(p.place, start, end)

    def _pick(self, rows: list[dict], first: bool) -> dict:
        return min(rows, key=lambda r: r["t"]) if first else max(rows, key=lambda r: r["t"])

    # -- answering ---------------------------------------------------------------------------
    def answer(self, question: str, tools: ToolBox, rules: list[dict], now_iso: str, tz_name: str) -> Answer:
        # who and where the memory knows as of the question time
        people = self._call(tools, "people", {"before": tools.now})
        self._names = {p["person"]: p.get("name") or p["person"] for p in people}
        self._doubts = {p["person"]: p["doubt"] for p in people if p.get("doubt")}
        waypoints = [w["waypoint"] for w in self._call(tools, "waypoints", {"before": tools.now})]
        classifier = self.classifier or shared_classifier()
        p = parse_question(question, tools.now, tools.tz, people, waypoints, classifier)
        if p.unknown_by_reading and self._described(tools, p.unknown_person):
            p.unknown_person, p.unknown_by_reading = "", False     # "Printer today?": a thing the robot saw
        if p.unknown_person or p.unknown_place:  # never answer about someone or somewhere never seen
            ans = self._seen_elsewhere_only(p, tools) or self._unknown(p)
        elif self._about_people(p):
            ans = self._people(p, tools)
        else:
            ans = getattr(self, f"_{p.kind}")(p, tools)
        ans.planner = self.name
        return ans

    @staticmethod
    def _about_people(p: ParsedQuestion) -> bool:
        """A question about someone named or about people in general, whose intent is a people one
        (a command, "go to where you saw Alice", is driven by ``_go``)."""
        return (p.intent is not None and p.kind != "go" and (bool(p.person) or p.about_people)
                and (p.intent.intent in PEOPLE_INTENTS or not p.intent.understood))

    def _people(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        match = p.intent
        if p.unread_time:   # never a wider window than the one asked for
            self.not_understood = True
            words = ", ".join(repr(w) for w in p.unread_time)
            return Answer(status=STATUS_NO_ANSWER, error=f"time not understood: {words}",
                          text=f"I could not read the time in your question ({words}); could you say it another "
                               "way, e.g. 'yesterday at 3pm' or 'between 2pm and 4pm'?")
        if not match.understood:
            self.not_understood = True
            why = ("not something the robot can see" if match.intent == OUT_OF_SCOPE else
                   f"similarity {match.score:.2f} < {MIN_UNDERSTOOD:.2f}")
            return Answer(status=STATUS_NO_ANSWER, text="I am not sure what you mean. Could you ask it another way?",
                          error=f"question not understood: nearest example {match.example!r} ({match.intent}, {why})")
        ans = self._doubted(self._people_answers(tools).handler(match.intent)(p), p)
        if match.ambiguous:
            ans.note(f"understood as {match.intent} ({match.score:.2f}); could be {match.runner_up} "
                     f"({match.runner_up_score:.2f})")
        return ans

    def _doubted(self, ans: Answer, p: ParsedQuestion) -> Answer:
        """An answer resting on an identity whose sightings may be two people (the store's
        ``identity_doubts``: a broken cannot-link, an unreviewed merge or split) says so and is
        not stated with confidence."""
        doubted = [i for i in dict.fromkeys([p.person, *ans.persons]) if i in self._doubts]
        if not doubted or ans.status == STATUS_NO_ANSWER:
            return ans
        ans.confidence = min(ans.confidence, DOUBTED_CONFIDENCE)
        records = "; ".join(f"{self._names.get(i, i)} ({self._doubts[i]})" for i in doubted)
        ans.text = (f"{ans.text} I am not sure of this: my record of {records} may hold more than one "
                    "person.").strip()
        return ans

    def _described(self, tools: ToolBox, word: str) -> bool:
        """Some stored description has ``word`` (a thing the robot has seen, not a person)."""
        hits = self._call(tools, "text_observations", {"query": word, "k": 10, "before": tools.now})
        return any(re.search(rf"\b{re.escape(word.lower())}\b", (h.get("description") or "").lower()) for h in hits)

    def _unknown(self, p: ParsedQuestion) -> Answer:
        if p.unknown_person:
            ans = no_answer(f"no identity in memory is called {p.unknown_person!r}", self.name)
            ans.text = (f"I don't know who or what {p.unknown_person} is." if p.unknown_by_reading
                        else f"I don't know who {p.unknown_person} is.")
        else:
            ans = no_answer(f"no waypoint in memory is called {p.unknown_place!r}", self.name)
            ans.text = f"I don't know where {p.unknown_place} is."
        return ans

    def _evidence(self, ans: Answer, rows: list[dict]) -> Answer:
        ans.evidence = [r["id"] for r in rows[:10]]
        return ans

    def _located(self, kind: str, row: dict, tools: ToolBox, what: str) -> Answer:
        ans = Answer(type=kind, position=_position(row), waypoint=row.get("waypoint", ""),
                     confidence=float(row.get("similarity", 1.0)))
        ans.set_time(row["t"], tools.now, tools.tz)
        place = _place(row)
        ans.text = f"{what} {place} at {ans.time_iso[11:16]} ({ans.minutes_ago:.0f} min ago)."
        return ans

    def _people_answers(self, tools: ToolBox) -> PeopleAnswers:
        return PeopleAnswers(self._reader_for(tools), self._names)

    def _where(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        if p.person and (not p.target or p.about_people):
            people = self._people_answers(tools)
            return people.first_seen(p) if p.first else people.last_place(p)
        rows = self._matches(tools, p)
        if not rows:
            return no_answer(f"nothing matching '{p.target}' in memory", self.name)
        row = self._pick(rows, p.first)
        return self._evidence(self._located("position", row, tools, f"I saw {p.target or 'it'}"),
                              list({r["id"]: r for r in [row] + rows}.values()))

    def _go(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        """A command ("go to where you last saw Alice"): find the place, then drive there.
        Without the navigate tool (the Ask service) it says where; the query agent notes why."""
        ans = self._where(p, tools)
        if ans.status != "ok" or tools.navigate is None:
            return ans
        target = ans.waypoint or (p.place if p.place else "")
        if not target:
            return no_answer("the place has no waypoint to drive to", self.name)
        result = tools.run(NAVIGATE, {"waypoint": target, "person": p.person if p.about_people else ""})
        ans.type = "waypoint"
        if isinstance(result, dict) and result.get("success"):
            ans.text = f"Arrived at {target} ({ans.text.rstrip('.')})."
            ans.position = result.get("final_position", ans.position)
        elif isinstance(result, dict) and result.get("cancelled"):
            ans.status = "error"
            ans.error = f"cancelled: the drive to {target} was cancelled (bridge: {result.get('message', '')})"
        else:
            ans.status = "error"
            ans.error = f"navigation to {target} failed: {(result or {}).get('message') or (result or {}).get('error')}"
        return ans

    def _when(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        ans = self._where(p, tools)
        if ans.status == "ok":
            ans.type = "time"
        return ans

    def _how_long(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        if p.person and not p.target:
            return self._people_answers(tools).duration(p)
        rows = sorted(self._matches(tools, p), key=lambda r: r["t"])
        if not rows:
            return no_answer("no sightings to measure a duration from", self.name)
        visits = split_visits(rows, lambda r: r["t"])
        minutes = observed_minutes(visits, lambda r: r["t"])
        where = f" at {p.place}" if p.place else ""
        spans = ", ".join(f"{self._hhmm(v[0]['t'], tools)}-{self._hhmm(v[-1]['t'], tools)}" for v in visits)
        ans = Answer(type="duration", duration_minutes=round(minutes, 1), waypoint=p.place, confidence=0.6,
                     text=f"{p.target or 'it'}{where}: {spoken_duration(minutes)} in {len(visits)} visit(s) ({spans}).")
        return self._evidence(ans, rows)

    def _yes_no(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        if (p.person and (not p.target or p.about_people)) or (p.about_people and p.place and not p.target.strip()):
            return self._people_answers(tools).was_in(p)
        rows = self._matches(tools, p)
        about_a_thing_in_a_place = bool(p.place and p.target.strip() not in _GENERIC)
        everywhere = self._matches(tools, replace(p, place=""), margin=1.0) if about_a_thing_in_a_place else []
        if rows and self._only_like_it(p, rows, everywhere):
            rows = []          # the place holds something only like it: "a red box" for "a blue box"
        if rows:
            moved = self._seen_since_elsewhere(p, tools, rows, everywhere)
            if moved is not None:
                return moved
            return self._yes(rows, tools)
        if about_a_thing_in_a_place:
            same = [r for r in everywhere if r.get("waypoint") != p.place
                    and r["similarity"] >= everywhere[0]["similarity"] - SAME_THING]
            looked = self._not_seen_in(p, tools, same)
            if looked is not None:
                return looked
        return Answer(type="binary", binary="no", confidence=0.5, text="No, I have no such observation.")

    @staticmethod
    def _only_like_it(p: ParsedQuestion, here: list[dict], everywhere: list[dict]) -> bool:
        """What matched in the place is another thing: a view elsewhere names the thing word for
        word and matches clearly better (by SAME_THING), and no view in the place names it ("a red
        box" in the kitchen for "a blue box", the blue box seen in the office). A long description
        in the place matching less closely is no grounds: only a view that names the thing is."""
        if any(_names(r, p.target) for r in here):
            return False
        named = [r for r in everywhere if r.get("waypoint") != p.place and _names(r, p.target)]
        return bool(named) and max(r["similarity"] for r in here) < named[0]["similarity"] - SAME_THING

    def _yes(self, rows: list[dict], tools: ToolBox, confidence: float = 0.7) -> Answer:
        row = max(rows, key=lambda r: r["t"])
        ans = Answer(type="binary", binary="yes", confidence=confidence, position=_position(row),
                     waypoint=row.get("waypoint", ""),
                     text=f"Yes, last {_place(row)} at {self._stamp(row['t'], tools)}.")
        return self._evidence(ans, sorted(rows, key=lambda r: -r["t"]))

    def _not_seen_in(self, p: ParsedQuestion, tools: ToolBox, elsewhere: list[dict]) -> Optional[Answer]:
        """"Is there a blue box in the kitchen?" where the robot looked in the kitchen and no view
        there matched: no, grounded on where the thing was seen instead (the one thing of a "the"
        question) or on at least MIN_VIEWS_FOR_NO of the robot's own views there. A view there that
        names the thing word for word (a long description matches a short phrase less closely) is a
        yes, unless the one thing was seen elsewhere since. None: no grounds either way."""
        views = self._reader_for(tools).own_views(p.place, *self._window(tools, p), PLACE_VIEWS_READ)
        if not views:
            return None
        described = [r for r in views if not names_no_things(r.get("description", ""))]
        if not described:
            ans = no_answer(f"no view of {p.place} names things (no vision-language describer)", self.name)
            ans.text = (f"I cannot tell: my {len(views)} view(s) {place_phrase(p.place)} are not described "
                        "(no vision-language model), so they do not say what is there.")
            return ans
        views = described
        one_thing = _one_thing_now(p)
        # only a view elsewhere that names the one thing overrides a view here that names it
        since = max((r["t"] for r in elsewhere if _names(r, p.target)), default=0.0) if one_thing else 0.0
        named = [r for r in views if _names(r, p.target) and r["t"] > since]
        if named:
            return self._yes(named, tools, 0.6)
        one_thing = one_thing and bool(elsewhere)
        if len(views) < MIN_VIEWS_FOR_NO and not one_thing:
            ans = no_answer(f"{len(views)} view(s) of {p.place}: too few to say it is not there", self.name)
            ans.text = (f"I cannot tell: I have only {len(views)} view(s) {place_phrase(p.place)} and none shows "
                        f"{p.target}.")
            return self._evidence(ans, views)
        count = f"{len(views)}+" if len(views) == PLACE_VIEWS_READ else str(len(views))
        looked = f"{count} view(s) {place_phrase(p.place)}, the last at {self._stamp(views[0]['t'], tools)}"
        evidence = views[:NOT_SEEN_EVIDENCE]
        if elsewhere:
            return self._last_seen_no(p, elsewhere, evidence, tools, 0.6 if one_thing else 0.5, looked)
        ans = Answer(type="binary", binary="no", confidence=0.4, waypoint=p.place,
                     text=f"No, I saw no {p.target} {place_phrase(p.place)} ({looked}).")
        return self._evidence(ans, evidence)

    def _seen_since_elsewhere(self, p: ParsedQuestion, tools: ToolBox, here: list[dict],
                              everywhere: list[dict]) -> Optional[Answer]:
        """"Is the red box in the kitchen?" asks where that one thing is: seen there, but later
        somewhere else, as closely matching (it was moved), the answer is no, with where it was
        seen last. None otherwise: the past tense or a time, "is there a ..." (one of several
        may be anywhere), or nothing as close seen later elsewhere (``everywhere``: the
        matches in any place)."""
        if not p.place or not _one_thing_now(p):
            return None
        newest_here = max(r["t"] for r in here)
        match_here = max(r["similarity"] for r in here)
        later = [r for r in everywhere if r["t"] > newest_here and r.get("waypoint") not in ("", p.place)
                 and r["similarity"] >= match_here - SAME_THING]
        if any(_names(r, p.target) for r in here):        # named here: only a view naming it elsewhere moved it
            later = [r for r in later if _names(r, p.target)]
        if not later:
            return None
        return self._last_seen_no(p, later, here, tools, 0.6,
                                  f"earlier {place_phrase(p.place)}, at {self._stamp(newest_here, tools)}")

    def _seen_elsewhere_only(self, p: ParsedQuestion, tools: ToolBox) -> Optional[Answer]:
        """"Is the red box in the meeting room?" where the robot never was, but saw that one red
        box elsewhere: no, it was there (a thing is in one place); "I have not been in" is said
        too. "Is there a red box in the meeting room?" cannot be answered (one may be there), but
        the answer says where one was seen. None for anything else (people, a time, nothing seen)."""
        if (p.unknown_person or p.kind != "yes_no" or p.person or p.about_people or p.start
                or not p.target or p.target in _GENERIC):
            return None
        rows = self._matches(tools, p, margin=SAME_THING)     # the thing, wherever it was seen
        if not rows:
            return None
        if _one_thing_now(p):
            return self._last_seen_no(p, rows, rows, tools, 0.5, f"I have not been in {p.unknown_place}")
        row = max(rows, key=lambda r: r["t"])
        ans = no_answer(f"no waypoint in memory is called {p.unknown_place!r}", self.name)
        ans.text = (f"I cannot tell: I have not been in {p.unknown_place}. I last saw {p.target} {_place(row)} "
                    f"at {self._stamp(row['t'], tools)}.")
        return self._evidence(ans, [row])

    def _last_seen_no(self, p: ParsedQuestion, candidates: list[dict], evidence: list[dict], tools: ToolBox,
                      confidence: float, aside: str) -> Answer:
        """No, with where the thing was seen last among ``candidates`` (and ``aside`` in brackets)."""
        row = max(candidates, key=lambda r: r["t"])
        ans = Answer(type="binary", binary="no", confidence=confidence, position=_position(row),
                     waypoint=row.get("waypoint", ""),
                     text=f"No, I last saw {p.target or 'it'} {_place(row)} at {self._stamp(row['t'], tools)} ({aside}).")
        return self._evidence(ans, [row] + evidence)

    def _people_near(self, p: ParsedQuestion, tools: ToolBox) -> tuple[list[str], list[dict]]:
        """People in the observations matching the question's object phrase ("who was near the red car")."""
        rows = [r for r in self._matches(tools, p) if r.get("persons")]
        return list(dict.fromkeys(x for r in rows for x in r["persons"])), rows

    def _who(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        if p.place or not p.target:
            return self._people_answers(tools).who_in(p)
        persons, rows = self._people_near(p, tools)
        ans = Answer(type="persons", persons=persons, confidence=0.5,
                     text=("I saw " + spoken_list(self._name(x) for x in persons) + ".") if persons else "I saw nobody.")
        return self._evidence(ans, rows)

    def _how_many(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        if p.about_people or not p.target:
            return self._people_answers(tools).count(p)
        rows = self._matches(tools, p)
        return self._evidence(Answer(type="text", text=f"{len(rows)} matching observations.", confidence=0.3), rows)

    def _what(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        if p.place and p.target.strip().lower() in _GENERIC:
            return self._seen_at(p, tools)
        rows = self._matches(tools, p) if p.target else []
        if not rows:
            rows = self._call(tools, "semantic_observations", {"query": p.text[:QUERY_CHARS], "n": 3, "now": tools.now,
                                                               "before": min(p.end or tools.now, tools.now)})
        if not rows:
            return no_answer("memory is empty for that time", self.name)
        row = rows[0]
        ans = Answer(type="text", text=row["description"], position=_position(row),
                     waypoint=row.get("waypoint", ""), confidence=0.4)
        ans.set_time(row["t"], tools.now, tools.tz)
        return self._evidence(ans, rows)

    def _seen_at(self, p: ParsedQuestion, tools: ToolBox) -> Answer:
        """What was seen at a place in the window: the distinct statements of its observations."""
        rows = self._place_history(tools, p)
        if not rows:
            return no_answer(f"no observation at {p.place} in that time", self.name)
        statements: dict[str, None] = {}
        for row in rows:
            for sentence in re.split(r"(?<=[.!?])\s+", row["description"]):
                if sentence.strip():
                    statements.setdefault(sentence.strip())
        text = " ".join(statements)
        ans = Answer(type="text", text=text[:1200], waypoint=p.place, confidence=0.4)
        ans.set_time(rows[-1]["t"], tools.now, tools.tz)
        return self._evidence(ans, rows)

    def _name(self, identity: str) -> str:
        """The operator-given display name when there is one."""
        return self._names.get(identity, identity)

    @staticmethod
    def _hhmm(t: float, tools: ToolBox) -> str:
        return dt.datetime.fromtimestamp(t, tz=tools.tz).strftime("%H:%M")

    @staticmethod
    def _stamp(t: float, tools: ToolBox) -> str:
        """"08:00" on the question's day, "Mar 10 08:00" before it."""
        local = dt.datetime.fromtimestamp(t, tz=tools.tz)
        today = dt.datetime.fromtimestamp(tools.now, tz=tools.tz).date()
        return local.strftime("%H:%M" if local.date() == today else "%b %d %H:%M")

