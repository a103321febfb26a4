"""Deterministic parsing of memory questions: kind, target, person, place, time window.

    "Where did you last see the red mug?"            -> where, target "red mug"
    "When did Alice arrive this morning?"            -> when (first), person alice, 06:00-12:00
    "How long was Bob in the kitchen yesterday?"     -> how_long, person bob, place kitchen, yesterday
    "Is there a bicycle in the corridor?"            -> yes_no, target "bicycle", place corridor
    "Who was in the meeting room today?"             -> who, place meeting_room, today
    "Where is person_9999?" / "Is Zoe here?"          -> unknown_person (no such identity / display name)
    "Was Alice in the ballroom?"                      -> unknown_place "the ballroom" (no such waypoint)

Time windows come from ``time_expressions`` (dateparser for days and clock times, our own
code for windows): calendar days and local clock times of the asking time zone, right on
daylight-saving change days.  People and places are matched against the memory's names
(``slots``); the intent comes from the nearest bank examples (``intents``).
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Optional
from zoneinfo import ZoneInfo

from ..calendar_windows import WEEKDAYS
from .intents import (FILLERS, FIRST_WORDS, GENERAL, OUT_OF_SCOPE, IntentMatch, allowed_intents, canonical,
                      canonical_form)
from .slots import (FRAME_WORDS, HAVE_WORDS, OPENER_WORDS, ROOM_WORDS, STOP_WORDS, Mention, find_people, find_place,
                    person_names, place_names)
from .time_expressions import parse_time_expression, unread_time_words

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
    ("yes_no", r"^(is|are|was|were|did|do|does|have|has|had|can|could|will|would)\b"
               r"|^any\b(?!\s+(idea|ideas|chance|clue|news|word|update|updates)\b)"
               r"|^((can|could) you |please )*(tell me|let me know|check|find out|see) (whether|if)\b"),
    ("what", r"^(what|which|describe|tell)\b"),
    ("how_long", r"\bhow long\b(?!.*\bago\b)"),
    ("when", r"\bwhen\b"),
    ("who", r"\bwho\b"),
    ("where", r"\bwhere\b|\b(which|what) (room|place|area)\b"),
]

_STOP = STOP_WORDS

@dataclass
class ParsedQuestion:
    text: str
    kind: str
    target: str = ""                         # what to look for (object / activity phrase)
    person: str = ""                         # identity id (the first person named)
    person2: str = ""                        # the second person named ("Alice or Bob")
    place: str = ""                          # waypoint id
    start: Optional[float] = None
    end: Optional[float] = None
    first: bool = False                      # first occurrence instead of last
    about_people: bool = False               # the question is about people in general
    time_words: list[str] = field(default_factory=list)
    unknown_person: str = ""                 # a person named in the question that no identity is
    unknown_by_reading: bool = False         # ... read as a name only for where it stands (could be a thing)
    unknown_place: str = ""                  # a place named in the question that is no known waypoint
    asks_now: bool = False                   # "now" / "at the moment" and no other time phrase
    unread_time: list[str] = field(default_factory=list)   # time-like words the time parser could not read
    canonical: str = ""                      # the question with its slots replaced (intents.py)
    intent: Optional[IntentMatch] = None     # set when parsed with a classifier


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9_']+", text.lower())


def parse_question(question: str, now: float, tz: ZoneInfo, people: list[dict], waypoints: list[str],
                   classifier=None) -> ParsedQuestion:
    """Kind (coarse, by its words), slots (people and place matched against the memory's
    names, time window) and, with an ``intents.IntentClassifier``, the intent."""
    q = " ".join(question.lower().replace("?", " ").split())
    people_names, places = person_names(people), place_names(waypoints)
    persons = find_people(question, people_names, places)
    persons = [m for i, m in enumerate(persons) if m.value not in {x.value for x in persons[:i]}]
    focus = asking_clause(question, persons)
    clause = question[focus:]
    fq = " ".join(clause.lower().replace("?", " ").split())
    kind = "what"
    for name, pattern in _KIND_PATTERNS:
        if re.search(pattern, fq):
            kind = name
            break
    if kind == "yes_no" and re.search(r"\b\w+ or \w+", fq):  # "did you turn left or right?" is a choice
        kind = "what"
    in_clause = [_shifted(m, -focus) for m in persons if m.start >= focus]
    place = find_place(clause, places, exclude=in_clause)
    expression = parse_time_expression(q, now, tz)
    start, end, time_words = (expression.start, expression.end, expression.phrases) if expression else (None, None, [])
    first = bool(FIRST_WORDS.search(fq)
                 or re.search(r"\b(arrive|arrived|arrival|come in|came in|start|started|begin)\b", fq))
    target_words = _object_words(fq, in_clause, place, time_words)
    # "how many were there?": a count with nothing to count is a count of people
    about_people = bool(_PEOPLE_WORDS.search(fq)) or bool(re.search(r"\bhow many\b", fq) and not target_words)
    unknown_person, unknown_place = _unknown_names(question, q, people_names, places, persons)
    if not unknown_place:
        unknown_place = _unknown_place(fq, kind, places, bool(persons or unknown_person or about_people),
                                       frozenset(w for name in people_names for w in name.split()))
    if unknown_place:                 # "is the red box in the lobby?": the lobby is where, not what
        place_words = set(_words(unknown_place))
        target_words = [w for w in target_words if w not in place_words]
    parsed = ParsedQuestion(text=question, kind=kind, target=" ".join(target_words),
                            person=persons[0].value if persons else "",
                            person2=persons[1].value if len(persons) > 1 else "",
                            place=place.value if place else "", start=start, end=end, first=first,
                            about_people=about_people, time_words=time_words,
                            unknown_person=unknown_person, unknown_place=unknown_place,
                            unknown_by_reading=_read_as_name(question, unknown_person),
                            asks_now=start is None and _asks_now(q, fq),
                            unread_time=unread_time_words(q, expression))
    parsed.canonical = canonical_form(clause, in_clause, place, unknown_person, time_words)
    if focus and not in_clause:       # "... Bob ...; where did you see him last?"
        parsed.canonical = _PERSON_PRONOUN.sub(FILLERS["name"].lower(), parsed.canonical, count=1)
    if classifier is not None:
        named = len(persons) + bool(unknown_person and not persons)
        wh = leading_wh(fq)
        parsed.intent = classifier.classify(parsed.canonical, allowed_intents(named, about_people, wh),
                                            timed=start is not None)
        if not (persons or unknown_person or unknown_place or about_people):
            name = _name_by_substitution(question, parsed, place, places, classifier, wh)
            if name:
                parsed.unknown_person, parsed.unknown_by_reading = name, _read_as_name(question, name)
    return parsed


# a capitalised word at a sentence's start is a name when the question reads as one about
# someone with a name in its place ("Zoe around today?" is "Alex around today?")
NAME_LIKE_SIMILARITY = 0.75        # the question with the word as a name is this like a person example
NAME_LIKE_GAIN = 0.25              # and this much more like one than the question as it is
_PERSON_ONLY = frozenset(i for i in allowed_intents(1) if i not in GENERAL and i != OUT_OF_SCOPE)


def _name_by_substitution(question: str, parsed: ParsedQuestion, place: Optional[Mention],
                          place_names: dict[str, str], classifier, wh: str) -> str:
    """A word opening a sentence (where capitals say nothing) that must be someone's name: the
    question is understood as one about a person when the word is read as a name, and much
    better than without one.  Not a word after a determiner ("The printer ..."), a stop,
    calendar or place word, nor one the question calls "it", nor a plural ("Keys: where did
    you see them?") unless the question says "she" / "he"."""
    q = parsed.text.lower()
    place_words = {w for name in place_names for w in name.split()}
    previous = ""
    for m in re.finditer(r"[A-Za-z][A-Za-z'-]*|[.!?;:\u2014-]", question):
        token = m.group(0)
        starts = previous in ("", ".", "!", "?", ";", ":", "\u2014", "-")
        previous = token.lower() if token[0].isalpha() else token
        word = token.lower()
        if not (starts and token[0].isupper()) or word in _STOP or word in OPENER_WORDS or \
                word in _CALENDAR_WORDS or word in place_words or len(word) < 3 or _may_be_thing(q, word):
            continue
        match = classifier.classify(canonical_form(question, [], place, token, parsed.time_words),
                                    allowed_intents(1, False, wh))
        if (match.intent in _PERSON_ONLY and match.score >= NAME_LIKE_SIMILARITY
                and match.score - parsed.intent.score >= NAME_LIKE_GAIN):
            return token
    return ""


_POLITE = re.compile(r"^((" + "|".join(OPENER_WORDS) + r")[ ,]+)*((do|did) you (know|remember|recall)|"
                     r"(can|could|would) you (tell|remind) me|tell me|any idea|i wonder|i'd like to know|"
                     r"i want to know|remind me)[ ,]+")
_WH = [(re.compile(p), wh) for p, wh in (
    (r"^(when|what time|at what time|around what time|at what point|how early|how late)\b", "when"),
    (r"^(where|whereabouts|(in |at )?(which|what) (room|place|location|spot|part of))\b", "where"),
    (r"^what('s| is| was) [a-z]+'s( (last|last known|latest|most recent|current|known))* "
     r"(position|location|whereabouts)\b", "where"),
    (r"^(for )?how (long|much time)\b(?! ago| since)", "how long"), (r"^how long (ago|since)\b", "when"),
    (r"^how many\b", "how many"),
    (r"^(who|whom|with whom|which people|which of(?! ((the|this|last|these) )?(week's )?(days|dates)\b))\b", "who"))]


# clauses end at ";", a spaced dash or an em dash, or a sentence's end ("Mr. ", "Sun. who" and
# "12\u201313" are none)
_CLAUSE_END = re.compile(r";\s+|[!?]+\s+|\s+[-\u2013\u2014]+\s+|\u2014|"
                         r"(?<![A-Z])(?<!\b[A-Za-z])(?<!\bMrs)(?<!\b(Mr|Ms|Dr|St))(?<!\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun))"
                         r"\.\s+(?=[A-Z])")
_ASKS = re.compile(r"^(who|whom|whose|what|where|whereabouts|when|which|how|why|is|are|was|were|did|do|does|have|"
                   r"has|had|can|could|would|will|any|anyone|anybody)\b")
# the asking clause points back to a place the scene named
_BACK_TO_A_PLACE = re.compile(r"\b(there|that (room|place|area|spot)|the same (room|place))\b")


def asking_clause(question: str, persons: list[Mention]) -> int:
    """Where the clause that asks starts when statements set the scene before it ("Bob left his
    laptop in a meeting room; where did you last see him?", "The printer is jammed -- where is
    Bob?"): its place, kind and object words are then the clause's, not the scene's.  Only for
    a where-question about the one person the question names (``persons``), by name or
    pronoun, after clauses that ask nothing and with no "there" pointing back at the scene's
    place; 0 (the whole question) otherwise ("Bob was in the kitchen; how long did he stay
    there?", "Today in the lab - who was there?", "Alice was looking for Bob; where is he?")."""
    if len(persons) != 1:
        return 0
    starts = [0] + [m.end() for m in _CLAUSE_END.finditer(question) if m.end() < len(question.rstrip())]
    clauses = [canonical(question[a:b]) for a, b in zip(starts, starts[1:] + [len(question)])]
    for k in range(len(clauses) - 1, 0, -1):
        if leading_wh(clauses[k]) == "where" and not _BACK_TO_A_PLACE.search(clauses[k]) and \
                not any(_ASKS.match(_POLITE.sub("", c)) for c in clauses[:k]):
            named_in_it = persons[0].start >= starts[k]
            return starts[k] if named_in_it or _PERSON_PRONOUN.search(clauses[k]) else 0
    return 0


def _shifted(m: Mention, by: int) -> Mention:
    return dataclasses.replace(m, start=m.start + by, end=m.end + by)


# a clause that sets the scene before the question ("When you last saw Bob, where was he?")
_TOPIC = re.compile(r"^[^,:;]{1,40}?[,:;]\s+")
_SCENE = re.compile(r"^(when|while|after|before|the last time|last time) (you|i|we|he|she|they|the robot)\b[^,?]*,\s*")


def leading_wh(q: str) -> str:
    """The question's leading wh-word ("when", "where", "how long", "how many", "who") after a
    polite opening ("do you know", "could you tell me") and a scene-setting clause ("when you
    last saw Bob, ..."); "" if none."""
    q = _POLITE.sub("", q.strip())
    q = _SCENE.sub("", q) or q
    for _ in range(3):
        wh = next((wh for pattern, wh in _WH if pattern.match(q)), "")
        topic = _TOPIC.match(q)
        if wh or not topic:
            return wh
        q = q[topic.end():]   # a fronted topic: "Alice: when did ...", "open office, on friday: how many ..."
    return ""


_NOW = re.compile(r"\b(now|right now|at the moment|currently|at present|at this moment)\b")
# "still" in a present-tense question ("is Bob still in the lab?", "isn't she still there?",
# "Bob's still in the lab?") asks about now too: an old sighting there is no "yes"; not with a
# past or habit word ("was Bob's colleague still ...", "is Bob still coming in every day?")
_STILL_NOW = re.compile(r"^(is|are)(n't| not)?\b[^.;]*\bstill\b|\b\w+'(s|re) still\b")
_NOT_PRESENT = re.compile(r"\b(was|were|had|did|usually|always|every|often|ever)\b")


def _asks_now(q: str, asking_clause: str) -> bool:
    clause = asking_clause.replace("\u2019", "'")
    return bool(_NOW.search(q)) or (bool(_STILL_NOW.search(clause)) and not _NOT_PRESENT.search(clause))


_PEOPLE_WORDS = re.compile(r"\b(who|whom|people|persons?|someone|somebody|anyone|anybody|everyone|everybody|"
                           r"visitors?|man|woman|men|women|folks?|individuals?|colleagues?|staff|headcount|"
                           r"guests?|employees?|coworkers?|co-workers?|faces|crowds?|heads)\b")


def _object_words(q: str, persons: list[Mention], place: Optional[Mention], time_words: list[str]) -> list[str]:
    """The words left when stop words, names, the place and time phrases are taken out."""
    removed = set(_STOP) | FRAME_WORDS
    for phrase in [m.text for m in persons] + ([place.text] if place else []) + time_words:
        removed.update(_words(phrase))
    words = _words(q)
    # "where's", "i'm": a contraction of a stop word is one too
    return [w for i, w in enumerate(words) if (w not in removed and w.split("'")[0] not in removed
                                               and not w.isdigit()) or words[i:i + 2] in _STOP_WORD_COMPOUNDS]


# things whose name starts with a stop word ("the first aid kit" is no first sighting of an "aid kit")
_STOP_WORD_COMPOUNDS = [["first", "aid"]]


# -- names the memory does not know -------------------------------------------------------------
_DETERMINERS = {"the", "a", "an", "my", "your", "our", "their", "his", "her", "its", "this", "that", "these",
                "those", "some", "any", "every", "each", "no"}
_CALENDAR_WORDS = set(WEEKDAYS) | {"january", "february", "march", "april", "may", "june", "july", "august",
                                   "september", "october", "november", "december"} | {
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    "mon", "tue", "tues", "wed", "thu", "thur", "thurs", "fri", "sat", "sun", "noon", "midnight"}
# "in the room", "in the building": no name to check (the building is the whole site)
_GENERIC_PLACES = {"room", "area", "place", "location", "building", "premises", "site", "workplace", "work"}
_BESIDE = {"front", "middle", "back", "side", "corner", "end"}   # "in front of the X": a place is the X
_SAME_WORDS = {"same", "other", "another", "next", "one", "different"}
_PLACE_NOUNS = ROOM_WORDS | _GENERIC_PLACES             # part of a place phrase though stop words
# phrases after "in the" that are not places ("who is in the picture")
_NOT_PLACES = {"picture", "image", "photo", "frame", "camera", "view", "memory", "world", "meantime", "end",
               "middle", "beginning", "dark", "rain", "sun", "background", "foreground", "way", "right", "total",
               "general", "order", "person", "detail", "short", "records", "record", "logs", "log", "notes",
               "files", "data", "database", "history", "company", "presence", "vicinity", "sight", "path",
               "meeting", "meetings", "mind", "touch", "ahead", "advance", "front", "early", "late", "earlier",
               "later", "first", "time", "earliest", "latest", "soonest", "final", "previous", "prior"}


_AFTER_PLACE = {"together", "alone", "again", "too", "also", "either", "as", "well", "both"}   # adverbs after a place


_PRONOUN = re.compile(r"\b(she|he|her|him|his|hers|they|them|their)\b", re.IGNORECASE)
_PERSONAL_PRONOUN = re.compile(r"\b(she|he|her|him|his|hers)\b")     # never a thing
_PERSON_PRONOUN = re.compile(r"\b(she|he|her|him|they|them)\b", re.IGNORECASE)   # a person referred back to
# never a person; not the "it" of a cleft ("when was it you first saw them?")
_THING_PRONOUN = re.compile(r"\b(its|itself|it(?! (that|you|i|we|they|he|she)\b))\b")


def _unknown_names(question: str, q: str, person_names: dict[str, str],
                   place_names: dict[str, str], matched: list[Mention] = ()) -> tuple[str, str]:
    """(person, place) named in the question that the memory has no identity / waypoint for: an
    identity-shaped id ("person_9999") or a capitalised name that is nobody's display name (a
    word already matched to a person, "Alicee" for Alice, is no unknown name)."""
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
        # a name opening a terse question counts too: "Hana's lunch: ...", or "Hana, where is
        # she?" (no one else named, a pronoun for her); not "Actually, where is Bob?"
        opens = i == 0 and word.lower() not in OPENER_WORDS and (tok.group(0).endswith("'s") or (
            question[tok.end():tok.end() + 1] in (",", ":") and not matched and _fronted_name(q, word)))
        capitalised = (i > 0 or opens) and not re.search(r"[.!?;]", gap) and \
            re.fullmatch(r"[A-Z][a-z]+", word) is not None
        if not capitalised or any(m.start <= tok.start() < m.end for m in matched):
            continue
        if run_end == i - 1 and gap.strip() == "" and not tokens[i - 1].group(0).endswith("'s"):
            runs[-1][0].append(word)
        else:
            runs.append(([word], i > 0 and tokens[i - 1].group(0).lower() in _DETERMINERS))
        run_end = i
    for words, after_determiner in runs:
        name = " ".join(words)
        if not after_determiner and _is_unknown_name(name, list(person_names) + list(place_names)):
            return name, ""
    return "", ""


def _may_be_thing(q: str, word: str) -> bool:
    """An opening ``word`` the question calls "it" ("Printer: when was it last used?"), a room
    word, or a plural with no "she" / "he" for it ("Keys: where did you see them?")."""
    return bool(_THING_PRONOUN.search(q)) or word in ROOM_WORDS or (
        word.endswith("s") and not _PERSONAL_PRONOUN.search(q))


def _read_as_name(question: str, name: str) -> bool:
    """``name`` opens the question and nothing but its place says it is someone's (no pronoun
    for a person, no possessive): "Laptop seen today?" may be a thing."""
    return bool(name) and question.lstrip().startswith(name) and not (
        _PRONOUN.search(question) or question.lstrip().startswith(f"{name}'s"))


def _fronted_name(q: str, word: str) -> bool:
    """A word opening the question before a comma or colon names the person it is about ("Hana,
    where is she?", "Priya, today: when was the last sighting?"), not a sentence adverb
    ("Actually, ..."): the question refers back to someone, or asks about no one else."""
    if _may_be_thing(q, word.lower()):
        return False
    return bool(_PRONOUN.search(q)) or not (_PEOPLE_WORDS.search(q) or word.lower().endswith("ly"))


def _is_unknown_name(name: str, known_names: list[str]) -> bool:
    """No person or place is called ``name`` or has it as whole words of its name."""
    lower = name.lower()
    if any(re.search(rf"\b{re.escape(lower)}\b", known) for known in known_names):
        return False
    return not any(w in _STOP or w in _CALENDAR_WORDS for w in lower.split())


def _unknown_place(q: str, kind: str, place_names: dict[str, str], about_someone: bool,
                   person_words: frozenset = frozenset()) -> str:
    """A place phrase ("in the ballroom") that names no known waypoint: one whose last word is a
    room word, or any "in the X" when the question is about someone, or "to X" for a command.
    Not a phrase with a person's name in it, nor one whose words are all words of one known place
    ("the office" where there is an "open office": ambiguous, not unknown; but "the meeting room"
    is unknown where "break room" is the only room)."""
    words = _words(q)
    for i, word in enumerate(words):
        has = i == 0 and word in ("does", "did")         # "does the lobby have ...": a place asked about too
        if word not in ("in", "inside", "into", "within", "at", "to") and not (
                word == "of" and i and words[i - 1] in _BESIDE) and not has:
            continue
        j = i + 1
        det = words[j] if j < len(words) and words[j] in _DETERMINERS else ""
        j += bool(det)
        phrase: list[str] = []
        while (j < len(words) and (words[j] not in _STOP or words[j] in _PLACE_NOUNS) and not words[j].isdigit()
               and words[j] not in FRAME_WORDS):
            phrase.append(words[j])
            j += 1
        while phrase and phrase[-1] in _AFTER_PLACE:   # "in a room together"
            phrase.pop()
        if phrase and phrase[-1] in _BESIDE and j < len(words) and words[j] == "of":
            continue                               # "in front of the X": the X follows "of"
        if has and not (j < len(words) and words[j] in HAVE_WORDS):
            continue                               # "did the elevator come": a thing, not a place asked about
        if (not phrase or phrase[-1] in _NOT_PLACES or all(w in _GENERIC_PLACES for w in phrase)
                or phrase[0] in _SAME_WORDS):          # "in the same room", "in another room"
            continue
        phrase = [w[:-2] if w.endswith("'s") else w for w in phrase]   # "in Alice's company": Alice's
        if phrase[-1] in _NOT_PLACES:
            continue
        text = " ".join(phrase)
        if (any(re.search(rf"\b{re.escape(name)}\b", text) or set(phrase) <= set(name.split())
                for name in place_names) or person_words & set(phrase)):
            continue
        if (phrase[-1] in ROOM_WORDS or (word in ("in", "inside", "into", "within") and about_someone)
                or (word == "to" and kind == "go")):
            return f"{det} {text}".strip()
    return ""
