"""What a question asks (its intent), from the nearest examples of a bank, without a large model.

The bank (``intents.yaml``) holds example questions per intent with slots.  A question and the
examples are compared in a *canonical* form: the people it names become "Alex" and "Sam", the
place "the lab", the object "the red mug", and its time phrases are cut ("today", "on Monday":
the time window is parsed separately), so "Where's the last place you spotted Bob?" is compared as
"where's the last place you spotted alex".  Both are embedded with the shipped MiniLM
(``perception.text_embedding``) and each intent scores its best example's cosine similarity.

``classify`` returns the best intent with its score and the runner-up: the question is
*understood* when the score is at least ``MIN_SIMILARITY``, *ambiguous* when a runner-up of
another family (``FAMILY``: answered alike) is within ``MARGIN`` (the answer notes it).
Deterministic: the same question and bank give the same intent.
"""
from __future__ import annotations

import functools
import logging
import re
import threading
from dataclasses import dataclass
from importlib import resources
from typing import Optional, Sequence

import yaml

log = logging.getLogger(__name__)

MIN_SIMILARITY = 0.55        # below: the question is like no example
MARGIN = 0.015               # best intent ahead of a different runner-up by at least this
FILLERS = {"name": "Alex", "name2": "Sam", "room": "lab", "day": "", "obj": "red mug"}
PERSON_FILLERS = (FILLERS["name"], FILLERS["name2"])
GENERAL = ("objects", "go", "describe_person")  # answered by the general handlers (the question's coarse kind)
OUT_OF_SCOPE = "out_of_scope"                     # what a robot's memory cannot know: treated as not understood
# intents answered by one handler (a near tie between them is no ambiguity)
# which intents a question's slots allow: by the number of people it names
TWO_PEOPLE = ("who_first", "together")
NO_PERSON = ("who_in", "count", "first_time", "was_in", OUT_OF_SCOPE) + GENERAL
ONE_PERSON = ("last_place", "where_now", "last_time", "first_seen", "arrival", "departure", "was_in", "duration",
              "with_whom", "absent_days", "habit_place", "habit_time", OUT_OF_SCOPE) + GENERAL


def allowed_intents(people_named: int, people_words: bool = False) -> tuple[str, ...]:
    """The intents a question naming ``people_named`` people can have; one that names nobody but
    speaks of people ("who", "anyone", "headcount") is not about objects."""
    if people_named == 0:
        return tuple(i for i in NO_PERSON if i != "objects") if people_words else NO_PERSON
    return ONE_PERSON if people_named == 1 else TWO_PEOPLE + ONE_PERSON


FAMILY = {"last_place": "last", "where_now": "last", "last_time": "last", "departure": "last",
          "first_seen": "first", "arrival": "first"}


# the words "first" / "last" decide between the two one-sighting families
_LAST_WORDS = re.compile(r"\b(last|latest|most recent(ly)?|final)\b")
_FIRST_WORDS = re.compile(r"\b(first|earliest)\b")
_TO_LAST = {"first_seen": "last_time", "arrival": "last_time"}
_TO_FIRST = {"last_time": "first_seen", "last_place": "first_seen", "where_now": "first_seen"}


def by_first_or_last(intent: str, canonical_question: str) -> str:
    """A one-sighting intent turned to the other end when the question says so ("most recently")."""
    last, first = _LAST_WORDS.search(canonical_question), _FIRST_WORDS.search(canonical_question)
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


def canonical(text: str) -> str:
    """Lower case, contractions spelled out ("where's" -> "where is"), one space between words,
    no trailing punctuation."""
    text = re.sub(r"\s+([,.:;?!])", r"\1", " ".join(text.replace("’", "'").split())).strip(" ?!.").lower()
    for pattern, replacement in _CONTRACTIONS:
        text = pattern.sub(replacement, text)
    return text


@functools.lru_cache(maxsize=1)
def load_bank() -> dict[str, tuple[str, ...]]:
    """{intent: canonical example questions}, slots filled with FILLERS."""
    from .question_parser import strip_time_phrases   # the questions' own canonical form
    data = yaml.safe_load((resources.files("embodied_memory.agent") / "intents.yaml").read_text(encoding="utf-8"))
    bank = {}
    for intent, examples in data.items():
        filled = [strip_time_phrases(e.format(**FILLERS)) for e in examples]
        bank[intent] = tuple(dict.fromkeys(filled))
    return bank


class IntentClassifier:
    """Nearest bank examples by MiniLM cosine similarity (``embedder``: any TextEmbedder)."""

    def __init__(self, embedder=None, bank: Optional[dict[str, Sequence[str]]] = None):
        if embedder is None:
            from ..perception.text_embedding import MiniLMTextEmbedder
            embedder = MiniLMTextEmbedder()
        self.embedder = embedder
        self.bank = dict(bank or load_bank())
        self._labels = [intent for intent, examples in self.bank.items() for _ in examples]
        self._examples = [e for examples in self.bank.values() for e in examples]
        self._vectors = embedder.embed(self._examples)

    def classify(self, canonical_question: str, allowed: Optional[Sequence[str]] = None) -> IntentMatch:
        """The nearest intent among ``allowed`` (default: all; at least two)."""
        sims = self._vectors @ self.embedder.embed([canonical_question])[0]
        best: dict[str, tuple[float, int]] = {}
        for i, (label, sim) in enumerate(zip(self._labels, sims)):
            if allowed is not None and label not in allowed:
                continue
            if label not in best or sim > best[label][0]:
                best[label] = (float(sim), i)
        ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))
        (intent, (score, i)), (runner_up, (second, _)) = ranked[0], ranked[1]
        return IntentMatch(by_first_or_last(intent, canonical_question), round(score, 4), runner_up, round(second, 4),
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
