"""What a question asks (its intent), from the nearest examples of a bank, without a large model.

The bank (``intents.yaml``) holds example questions per intent with slots.  A question and the
examples are compared in a *canonical* form: the people it names become "Alex" and "Sam", the
place "the lab", the object "the red mug", and its time phrases are cut ("today", "on Monday":
the time window is parsed separately), so "Where's the last place you spotted Bob?" is compared as
"where's the last place you spotted alex".  Both are embedded with the shipped MiniLM
(``text_embedding``) and each intent scores its best example's cosine similarity.

``classify`` returns the best intent with its score and the runner-up: the question is
*understood* when the score is at least ``MIN_SIMILARITY``, *ambiguous* when a runner-up of
another family (``FAMILY``: answered alike) is within ``MARGIN`` (the answer notes it).
Deterministic: the same question and bank give the same intent.
"""
from __future__ import annotations

import datetime as dt
import functools
import hashlib
import logging
import os
import re
import threading
from dataclasses import dataclass
from importlib import resources
from typing import Optional, Sequence

import numpy as np
import yaml

from ..cache import cache_dir
from .slots import OPENER_WORDS, Mention
from .time_expressions import parse_time_window

log = logging.getLogger(__name__)

MIN_SIMILARITY = 0.55        # below: the question is like no example
MARGIN = 0.015               # best intent ahead of a different runner-up by at least this
FILLERS = {"name": "Alex", "name2": "Sam", "room": "lab", "day": "", "obj": "red mug"}
GENERAL = ("objects", "go", "describe_person")  # answered by the general handlers (the question's coarse kind)
OUT_OF_SCOPE = "out_of_scope"                     # what a robot's memory cannot know: treated as not understood
# intents answered by one handler (a near tie between them is no ambiguity)
# which intents a question's slots allow: by the number of people it names
TWO_PEOPLE = ("who_first", "together")
NO_PERSON = ("who_in", "count", "first_time", "was_in", "who_first", OUT_OF_SCOPE) + GENERAL
ONE_PERSON = ("last_place", "where_now", "last_time", "first_seen", "arrival", "departure", "was_in", "duration",
              "with_whom", "absent_days", "habit_place", "habit_time", OUT_OF_SCOPE) + GENERAL


# a question's leading wh-word says what kind of answer it wants
WH_INTENTS = {
    "when": ("last_time", "first_seen", "arrival", "departure", "habit_time", "absent_days"),
    "where": ("last_place", "where_now", "habit_place"),
    "how long": ("duration",),
    "how many": ("count",),
    "who": ("who_in", "with_whom", "who_first", "first_time"),
}


def allowed_intents(people_named: int, people_words: bool = False, wh: str = "") -> tuple[str, ...]:
    """The intents a question naming ``people_named`` people can have; one that names nobody but
    speaks of people ("who", "anyone", "headcount") is not about objects; a leading wh-word
    (``WH_INTENTS``) keeps the intents that answer it (and the general ones)."""
    if people_named == 0:
        allowed = tuple(i for i in NO_PERSON if i != "objects") if people_words else NO_PERSON
    else:
        allowed = ONE_PERSON if people_named == 1 else TWO_PEOPLE + ONE_PERSON
    answering = [i for i in allowed if i in WH_INTENTS.get(wh, ())]
    if not answering:
        return allowed
    # "who ..." about someone asks for people, never what that someone did
    general = tuple(i for i in GENERAL if not (wh == "who" and i == "describe_person"))
    return tuple(answering) + tuple(i for i in allowed if i in general or i == OUT_OF_SCOPE)


FAMILY = {"last_place": "last", "where_now": "last", "last_time": "last", "departure": "last",
          "first_seen": "first", "arrival": "first"}


# the words "first" / "last" decide between the two one-sighting families
_LAST_WORDS = re.compile(r"\b(last|latest|most recent(ly)?|final)\b")
# a first aid kit is no first sighting
FIRST_WORDS = re.compile(r"\b(first(?! aid\b)|earliest|initial(ly)?|original(ly)?|how far back)\b")
# "than usual", "as usual" compare with the habit; they do not ask for it
_HABIT_WORDS = re.compile(r"(?<!than )(?<!as )\b(usual(ly)?|normal(ly)?|typical(ly)?|tends?|generally|most days|habit)\b")
# "now", or "is Bob in ...?" without "usually", asks for the present, not the habit ("what part of
# the office is Bob in now?", "is Bob in the office? where exactly?")
_NOW_WORDS = re.compile(r"\b(now|currently|at (the|this) (moment|point|time)|at present|presently|as we speak)\b|^(is|are) alex (in|at|around)\b")
_TO_LAST = {"first_seen": "last_time", "arrival": "last_time", "habit_place": "last_place", "habit_time": "last_time"}
_TO_FIRST = {"last_time": "first_seen", "last_place": "first_seen", "where_now": "first_seen"}
_TO_HABIT = {"where_now": "habit_place", "last_place": "habit_place", "last_time": "habit_time",
             "first_seen": "habit_time", "arrival": "habit_time", "departure": "habit_time"}


# an absence is asked with a negation ("not", "without", "missing"); "which days was Alex in?" is none
_ABSENCE_WORDS = re.compile(r"\b(not|no|never|without|absent|absence|away|missing|miss|missed|skip|skipped|out|off|"
                            r"gone|nowhere)\b")


# someone seen for the first time is new ("who came for the first time"); "who came in first" is
# the earliest arrival
_YES_NO_START = re.compile(r"^(did|was|were|is|are|has|have|had)\b")
_AMOUNT = re.compile(r"\b(more|less|longer|shorter|over|under|at least|hours?|minutes?|long|\d+)\b")
_NEW_WORDS = re.compile(r"\b(first[- ]tim(e|ers?)|new|newcomers?|never|before|previously|until then|unfamiliar|"
                        r"unknown|strangers?|(not|hadn't|had not|haven't) (seen|met))\b")


_PAST = re.compile(r"\b(was|were|did|had)\b")


def refined(intent: str, canonical_question: str, timed: bool = False) -> str:
    """The classifier's intent checked against words it cannot weigh: "first" / "last"
    (``by_first_or_last``), an absence without a negation (the opposite question: not
    understood), "first" without "for the first time" / "new" (the earliest arrival), a stay
    asked yes or no (presence), a habit where the question names a past time (``timed``: its
    time phrase was cut) without "usually" ("which room was Bob in at 10:06?": that time)."""
    if intent in ("habit_place", "habit_time") and timed and _PAST.search(canonical_question) \
            and not _HABIT_WORDS.search(canonical_question):
        return _TO_LAST[intent]
    if intent == "absent_days" and not _ABSENCE_WORDS.search(canonical_question):
        return OUT_OF_SCOPE
    if intent == "first_time" and FIRST_WORDS.search(canonical_question) and not _NEW_WORDS.search(canonical_question):
        return "who_first"
    if intent == "duration" and _YES_NO_START.match(canonical_question) and not _AMOUNT.search(canonical_question):
        return "was_in"          # a stay asked yes or no: whether, not how long
    return by_first_or_last(intent, canonical_question)


def by_first_or_last(intent: str, canonical_question: str) -> str:
    """A one-sighting intent turned to the other end when the question says so ("most recently"),
    to the habit when it says "usually", a usual place to the present when it says "now"."""
    last, first = _LAST_WORDS.search(canonical_question), FIRST_WORDS.search(canonical_question)
    if _HABIT_WORDS.search(canonical_question):   # "usually", even with "last" in it: a habit
        return _TO_HABIT.get(intent, intent)
    if intent == "habit_place" and _NOW_WORDS.search(canonical_question):
        return "where_now"
    if last and not first:
        return _TO_LAST.get(intent, intent)
    if first and not last:
        return _TO_FIRST.get(intent, intent)
    return intent


@dataclass(frozen=True)
class IntentMatch:
    intent: str
    score: float
    runner_up: str
    runner_up_score: float
    example: str              # the nearest example (canonical form)

    @property
    def understood(self) -> bool:
        """Like at least one example of a question the memory can answer (else: "I am not sure
        what you mean")."""
        return self.score >= MIN_SIMILARITY and self.intent != OUT_OF_SCOPE

    @property
    def ambiguous(self) -> bool:
        """The runner-up is a different question, nearly as near (the answer says so)."""
        same_family = FAMILY.get(self.intent, self.intent) == FAMILY.get(self.runner_up, self.runner_up)
        return not same_family and self.score - self.runner_up_score < MARGIN


_CONTRACTIONS = [(re.compile(p), r) for p, r in (
    (r"\b(who|what|where|when|how)'d\b", r"\1 did"), (r"\b(who|what|where|when|how|that)'s\b", r"\1 is"),
    (r"\b(who|what|where|when|how)'re\b", r"\1 are"), (r"\bwon't\b", "will not"), (r"\bcan't\b", "cannot"),
    (r"\b(\w+)n't\b", r"\1 not"), (r"\b(i|you|we|they)'ve\b", r"\1 have"), (r"\b(i|you|we|they)'re\b", r"\1 are"),
    (r"\bi'm\b", "i am"))]


_OPENERS = re.compile(r"^[ ,:;!.]*((" + "|".join(OPENER_WORDS) + r")\b[ ,:;!.]*)+")
_REPEATED_MARKS = re.compile(r"([,:;])(\s*[,:;])+")


def canonical(text: str) -> str:
    """Lower case, contractions spelled out ("where's" -> "where is"), one space between words,
    no trailing punctuation, no opening words ("hey, so ...") nor marks a cut time phrase leaves
    ("Today, at what point ...", "for the record, today, at ...")."""
    text = re.sub(r"\s+([,.:;?!])", r"\1", " ".join(text.replace("’", "'").split())).strip(" ?!.").lower()
    text = _OPENERS.sub("", _REPEATED_MARKS.sub(r"\1", text)).lstrip(" ,:;")   # what a cut time phrase leaves
    for pattern, replacement in _CONTRACTIONS:
        text = pattern.sub(replacement, text)
    return text


_AT_LUNCH = re.compile(r"(at|over|during) (the )?lunch(time| ?break)?")


def canonical_form(question: str, persons: list[Mention], place: Optional[Mention], unknown_person: str,
                   time_words: list[str]) -> str:
    """The question as the intent bank is written: people "Alex" / "Sam", the place "lab",
    time phrases cut, lower case (``intents.canonical``)."""
    spans = [(m.start, m.end, filler) for m, filler in zip(persons, (FILLERS["name"], FILLERS["name2"]))]
    if place is not None:
        spans.append((place.start, place.end, FILLERS["room"]))
    if unknown_person and not persons:
        m = re.search(rf"\b{re.escape(unknown_person)}\b", question)
        if m:
            spans.append((m.start(), m.end(), FILLERS["name"]))
    text = question
    for a, b, filler in sorted(spans, reverse=True):
        text = text[:a] + filler + text[b:]
    text = text.lower()
    # a lone "at lunch" is what a habit question asks about ("what time is Bob usually at lunch?");
    # with a day ("at lunch on Monday") or "before / after lunch" it is a window, cut like the others
    keep = time_words[0] if len(time_words) == 1 and _AT_LUNCH.fullmatch(time_words[0]) else None
    for phrase in sorted(time_words, key=len, reverse=True):   # "this week's days" -> "days"
        text = re.sub(rf"\b{re.escape(phrase)}\b('s)?", " at lunch " if phrase == keep else " ", text)
    return canonical(text)


def strip_time_phrases(text: str, now: float = 1.7e9, tz: dt.tzinfo = dt.timezone.utc) -> str:
    """``text`` without the time phrases the parser reads (the bank's examples, canonical form)."""
    words = parse_time_window(" ".join(text.lower().replace("?", " ").split()), now, tz)[2]
    return canonical_form(text, [], None, "", words) if words else canonical(text)


@functools.lru_cache(maxsize=1)
def load_bank() -> dict[str, tuple[str, ...]]:
    """{intent: canonical example questions}, slots filled with FILLERS."""
    data = yaml.safe_load((resources.files("embodied_memory.agent") / "intents.yaml").read_text(encoding="utf-8"))
    bank = {}
    for intent, examples in data.items():
        filled = [strip_time_phrases(e.format(**FILLERS)) for e in examples]
        bank[intent] = tuple(dict.fromkeys(filled))
    return bank


class IntentClassifier:
    """Nearest bank examples by MiniLM cosine similarity (``embedder``: any TextEmbedder)."""

    def __init__(self, embedder=None, bank: Optional[dict[str, Sequence[str]]] = None):
        if embedder is None:   # the process's MiniLM (the store's, when it runs in this process)
            from ..text_embedding import make_text_embedder
            embedder = make_text_embedder("minilm")
        self.embedder = embedder
        self.bank = dict(bank or load_bank())
        self._labels = [intent for intent, examples in self.bank.items() for _ in examples]
        self._examples = [e for examples in self.bank.values() for e in examples]
        self._vectors = self._embedded_bank()

    def _embedded_bank(self) -> np.ndarray:
        """The bank's vectors, cached on disk by the examples and the model (a CPU embeds the
        ~400 examples in seconds, longer when busy)."""
        key = hashlib.sha256("\n".join([getattr(self.embedder, "name", "?"), *self._labels, *self._examples])
                             .encode()).hexdigest()[:16]
        path = cache_dir() / f"intent_bank_{key}.npy"
        try:
            vectors = np.load(path)
            if vectors.shape == (len(self._examples), self.embedder.dim):
                return vectors
        except (OSError, ValueError):
            pass
        vectors = self.embedder.embed(self._examples)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp.npy")
            np.save(tmp, vectors)
            os.replace(tmp, path)
        except OSError as exc:      # a read-only home: embed again next time
            log.debug("intent bank not cached: %s", exc)
        return vectors

    def classify(self, canonical_question: str, allowed: Optional[Sequence[str]] = None,
                 timed: bool = False) -> IntentMatch:
        """The nearest intent among ``allowed`` (default: all; at least two); ``timed``: the
        question named a time (``refined``)."""
        sims = self._vectors @ self.embedder.embed([canonical_question])[0]
        best: dict[str, tuple[float, int]] = {}
        for i, (label, sim) in enumerate(zip(self._labels, sims)):
            if allowed is not None and label not in allowed:
                continue
            if label not in best or sim > best[label][0]:
                best[label] = (float(sim), i)
        ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))
        (intent, (score, i)), (runner_up, (second, _)) = ranked[0], ranked[1]
        return IntentMatch(refined(intent, canonical_question, timed), round(score, 4), runner_up, round(second, 4),
                           self._examples[i])


_shared: Optional[IntentClassifier] = None
_lock = threading.Lock()


def shared_classifier() -> IntentClassifier:
    """One classifier per process (the bank is embedded once, about a second on a CPU)."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = IntentClassifier()
            log.info("intent bank: %d examples of %d intents", len(_shared._examples), len(_shared.bank))
        return _shared
