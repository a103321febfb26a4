"""Slots of a question matched against what the memory knows: people and places.

People are matched against identity ids and the operator's display names (a display name's
first word names its person when nobody else shares it); places against waypoint ids, their
words ("manager_office" is "manager office"), a few common synonyms ("meeting room" for a
conference room, "break room" for a kitchen) and a waypoint's distinctive word ("the studio"
for "design_studio").  Spelling slips are forgiven with ``rapidfuzz`` on phrases of at least
``FUZZY_MIN_CHARS`` characters, never on stop words: a ratio of at least ``FUZZY_MIN`` (of 100)
or one edit, a swap of two letters included ("Carrol", "Alcie" and "Alicee" are Carol and Alice).

``room_kind`` tells what a place is for from its words (lunch, meeting, passage): a usual
workplace is never a shared room, lunch happens in lunch rooms.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Optional

from rapidfuzz import fuzz, process
from rapidfuzz.distance import OSA

FUZZY_MIN = 86.0           # rapidfuzz ratio (0..100) for a slip of the pen
FUZZY_MIN_CHARS = 5        # shorter names must be spelled right ("Ann" is not "and")
MAX_WORDS = 3              # longest name / place phrase, in words

STOP_WORDS = frozenset("""a an the is are was were be been being did do does have has had can could will would i you we
he she it they me him her them us his its my your our their this that these those there here of in on at to for from with by about into near
next last first ever any some what which who whom where when how long many much time times see seen saw look
looking find found notice noticed spot spotted robot please tell show remember recall kept keep go went come came
today yesterday morning afternoon evening night tonight ago minutes minute hours hour days day week ever
currently now just recently earlier before after around approximately roughly during most least usually
and or not no yes than then still again also only place room area located location
people person persons someone somebody anyone anybody everyone everybody visitors visitor
arrive arrived arrives arrival leave left leaves leaving enter entered exit exited stay stayed spend spent
get got here there take bring lead guide drive navigate move head go goes went""".split())

# words that frame a question about a thing without naming it ("does the kitchen contain ...",
# "tell me whether ...", "is it true that ...", "somewhere in the lab", "where is it kept")
FRAME_WORDS = frozenset({"whether", "if", "check", "true", "somewhere", "contain", "contains", "containing",
                         "kept", "stored"})

# verbs after which a question names the place before the thing ("does the lobby have ...")
HAVE_WORDS = frozenset({"have", "has", "contain", "contains"})

# words that make a phrase after "in/at the" a place, whoever the question is about
ROOM_WORDS = frozenset("""room ballroom hall hallway corridor kitchen office lobby foyer atrium lab laboratory garage garden
yard courtyard entrance reception bathroom toilet restroom washroom cafeteria canteen library basement attic cellar
warehouse storeroom pantry closet bedroom lounge stairwell staircase elevator lift workshop studio auditorium gym
terrace balcony patio parking wing building floor dock shed""".split())

# words that open a question without being part of it ("Hey, ...", "OK so ...")
OPENER_WORDS = ("so", "and", "ok", "okay", "hey", "hi", "hello", "please", "robot", "excuse me", "sorry", "quick",
                "well", "right", "alright", "listen", "oh", "thanks", "also", "now", "for the record")

# phrase -> the words of the waypoint it stands for (used only when such a waypoint exists)
ROOM_SYNONYMS: dict[str, str] = {
    "meeting room": "conference room", "boardroom": "conference room", "board room": "conference room",
    "break room": "kitchen", "breakroom": "kitchen", "cafeteria": "kitchen", "canteen": "kitchen",
    "pantry": "kitchen", "kitchenette": "kitchen", "laboratory": "lab", "common room": "lounge",
    "boss office": "manager office", "managers office": "manager office", "front desk": "reception",
    "lobby": "reception", "entrance hall": "reception", "hallway": "corridor", "hall": "corridor",
    "open plan office": "open office", "open space": "open office", "studio": "design studio",
}
# words that say what a room is for
_ROOM_KINDS = {
    "lunch": {"kitchen", "cafeteria", "canteen", "lounge", "pantry", "dining", "kitchenette", "break"},
    "meeting": {"conference", "meeting", "huddle", "board", "boardroom"},
    "passage": {"corridor", "hallway", "hall", "reception", "lobby", "entrance", "stairs", "elevator", "door"},
}
_MONTHS = {"january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december"}
# a name that is also one of these words ("May", "Will") names a person only when written
# capitalised inside the sentence ("May I ask..." is no question about May), and a month
# followed by a number is a date ("on May 3rd")
_COMMON_WORDS = STOP_WORDS | _MONTHS | {"will", "may", "might", "must", "shall", "should", "could", "would",
                                        "do", "did", "can", "mark", "bill", "sue", "pat", "rose", "hope"}
_GENERIC_WORDS = {"room", "office", "corridor", "area", "north", "south", "east", "west", "open", "main", "hall"}


@dataclass(frozen=True)
class Mention:
    """A slot found in the question: ``value`` is the identity or waypoint id."""
    value: str
    text: str              # as written in the question
    start: int             # character span in the question
    end: int
    score: float           # 100: exact


def fold(text: str) -> str:
    """Case-folded, accents stripped ("José" -> "jose"), so spellings of a name compare equal."""
    decomposed = unicodedata.normalize("NFKD", text.replace("’", "'"))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


_WORD = re.compile(r"[^\W_][\w'-]*")


def words_of(text: str) -> str:
    """Folded words joined by spaces, possessives and underscores undone ("Bob's" -> "bob")."""
    return " ".join(w[:-2] if w.endswith("'s") else w for w in _WORD.findall(fold(text).replace("_", " ")))


def _tokens(question: str) -> list[tuple[str, int, int]]:
    out = []
    for m in _WORD.finditer(question.replace("’", "'")):
        word, end = m.group(0), m.end()
        if word.lower().endswith("'s"):
            word, end = word[:-2], end - 2
        out.append((fold(word).strip("'-"), m.start(), end))
    return out


_PRONOUNS = {"i", "you", "we", "they", "he", "she", "it", "me", "us"}


def _names_a_person(question: str, m: "Mention") -> bool:
    """False for a common word that only looks like a name here: a modal before a pronoun
    ("May I ask", "will you"), a month before a number ("May 3rd"), a word that starts the
    question ("Will Bob come?"); "where is may?" and "Did you see May?" name May."""
    word = fold(m.text)
    if word not in _COMMON_WORDS:
        return True
    after = question[m.end:].lstrip().lower()
    if after.split(" ", 1)[0].strip("?,.!") in _PRONOUNS or (word in _MONTHS and re.match(r"\d", after)):
        return False
    before = question[:m.start].rstrip()
    if not before or before[-1] in ".?!:;":
        return False
    return m.text[:1].isupper() or word not in STOP_WORDS     # "where is will": "will" is a verb

def _similar(a: str, b: str, score_cutoff: float = 0.0, **_) -> float:
    """rapidfuzz's ratio; 99 for one edit (a swap of two neighbours counts as one) when the
    first letters agree ("Alcie" is Alice, "Robby" is not Bobby)."""
    if a[:1] == b[:1] and OSA.distance(a, b, score_cutoff=1) <= 1:
        return 99.0
    return fuzz.ratio(a, b, score_cutoff=score_cutoff)


def _find(question: str, names: dict[str, str], fuzzy: bool = True,
          blocked: tuple[tuple[int, int], ...] = ()) -> list[Mention]:
    """Non-overlapping mentions of ``names`` (lower-case phrase -> id), longest and best first,
    returned in question order; no fuzzy match over a ``blocked`` span (a place named exactly)."""
    tokens = _tokens(question)
    keys = list(names)
    found: list[Mention] = []
    taken: set[int] = set()
    for n in range(MAX_WORDS, 0, -1):
        candidates = []
        for i in range(len(tokens) - n + 1):
            span = tokens[i:i + n]
            phrase = " ".join(t[0] for t in span)
            if phrase in names:
                candidates.append((100.0, i, phrase, names[phrase]))
            elif (fuzzy and keys and len(phrase) >= FUZZY_MIN_CHARS
                  and not any(t[0] in STOP_WORDS or t[0].isdigit() for t in span)
                  and not any(a < span[-1][2] and span[0][1] < b for a, b in blocked)):
                near = process.extract(phrase, keys, scorer=_similar, score_cutoff=FUZZY_MIN, limit=2)
                # two different names as near ("Marie": Maria or Mario?): no guess
                if near and not (len(near) > 1 and near[1][1] == near[0][1] and names[near[1][0]] != names[near[0][0]]):
                    candidates.append((float(near[0][1]), i, phrase, names[near[0][0]]))
        for score, i, phrase, value in sorted(candidates, key=lambda c: (-c[0], c[1])):
            if any(j in taken for j in range(i, i + n)):
                continue
            taken.update(range(i, i + n))
            found.append(Mention(value, question[tokens[i][1]:tokens[i + n - 1][2]], tokens[i][1],
                                 tokens[i + n - 1][2], score))
    return sorted(found, key=lambda m: m.start)


def person_names(people: Iterable[dict]) -> dict[str, str]:
    """Lower-case phrase -> identity id: ids, display names, and a display name's words that
    name only one person and are no stop words."""
    people = list(people)
    names: dict[str, str] = {}
    for p in people:
        names[words_of(p["person"])] = p["person"]
        names[p["person"].lower()] = p["person"]
        if p.get("name"):
            names[words_of(p["name"])] = p["person"]
    owners: dict[str, set[str]] = {}
    for p in people:
        for word in words_of(p.get("name") or "").split():
            owners.setdefault(word, set()).add(p["person"])
    for word, ids in owners.items():
        if len(ids) == 1 and word not in STOP_WORDS and word not in names:
            names[word] = next(iter(ids))
    return {k: v for k, v in names.items() if k}


def place_names(waypoints: Iterable[str]) -> dict[str, str]:
    """Lower-case phrase -> waypoint id: ids, their words, synonyms of those words, and a word
    only one waypoint has that says what it is ("studio", "workshop")."""
    waypoints = list(waypoints)
    names: dict[str, str] = {}
    for w in waypoints:
        names[w.lower()] = w
        names[words_of(w)] = w
    for phrase, target in ROOM_SYNONYMS.items():
        if target in names and phrase not in names:
            names[phrase] = names[target]
    owners: dict[str, set[str]] = {}
    for w in waypoints:
        for word in words_of(w).split():
            owners.setdefault(word, set()).add(w)
    for word, ids in owners.items():
        if len(ids) == 1 and word not in _GENERIC_WORDS and word not in STOP_WORDS and not word.isdigit():
            names.setdefault(word, next(iter(ids)))
    return names


def find_people(question: str, people: dict[str, str], places: dict[str, str]) -> list[Mention]:
    """People named in the question (``people``: ``person_names``); a place named exactly there
    (``places``: ``place_names``; "the lobby") is no slip of a person's name ("Bobby")."""
    exact_places = tuple((m.start, m.end) for m in _find(question, places, fuzzy=False))
    return [m for m in _find(question, people, blocked=exact_places) if _names_a_person(question, m)]


def find_place(question: str, places: dict[str, str], exclude: Iterable[Mention] = ()) -> Optional[Mention]:
    """The first place (``places``: ``place_names``) named in the question outside the
    ``exclude`` spans (people found first)."""
    blocked = [(m.start, m.end) for m in exclude]
    for m in _find(question, places):
        if not any(a < m.end and m.start < b for a, b in blocked) and _names_a_place(question, m):
            return m
    return None


_OWNERS = {"his", "her", "their", "my", "your", "our"}


def _names_a_place(question: str, m: Mention) -> bool:
    """A waypoint's distinctive word alone ("studio" for design_studio, "manager" for
    manager_office) is no place where someone owns it ("Bob's manager", "his manager"); a
    waypoint's whole name, a synonym or a misspelling of one is a place anywhere."""
    words = words_of(m.text)
    if m.score < 100 or " " in words or words in (words_of(m.value), m.value.lower()) or words in ROOM_SYNONYMS:
        return True
    before = re.findall(r"[\w']+", question[:m.start].replace("\u2019", "'").lower())
    return not before or not (before[-1].endswith("'s") or before[-1].endswith("s'") or before[-1] in _OWNERS)


_POINT_WORDS = {"door", "desk", "station", "dock", "entrance", "exit", "gate", "elevator", "lift", "stairs",
                "staircase", "counter", "window", "charger", "printer"}     # one is at them, not in them


def place_phrase(waypoint: str) -> str:
    """How an answer says where: "in the conference room", "at north corridor 1" (a numbered
    waypoint is a point, not a room), "at an unknown place"."""
    if not waypoint:
        return "at an unknown place"
    words = words_of(waypoint)
    if re.search(r"\d$", words) or words.split()[0] in ("wp", "waypoint"):
        return f"at {words}"
    return f"at the {words}" if words.split()[-1] in _POINT_WORDS else f"in the {words}"


def room_kind(waypoint: str) -> str:
    """"lunch", "meeting", "passage" or "" (a workplace or unknown), from the waypoint's words."""
    words = set(words_of(waypoint).split())
    for kind, markers in _ROOM_KINDS.items():
        if words & markers:
            return kind
    return ""
