"""Instruction decomposition (HIMM): what to look for, and what else points to it.

An instruction ("Where is the red box?", "find the first aid kit in the kitchen") becomes a
target, related objects and related areas, each with a priority (1 = most telling). The
deterministic decomposer reads the words: the question or command words and articles are
dropped, a trailing place clause ("in the kitchen", "near the lobby") becomes a related area,
and the rest is the target; it knows no world (related objects need a model). The LLM
decomposer asks an OpenAI-compatible endpoint for validated JSON and falls back to the
deterministic one on any error.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from ..agent.answer import extract_json_objects
from ..agent.slots import FRAME_WORDS, HAVE_WORDS, ROOM_WORDS
from ..llm.chat_client import LLMError

log = logging.getLogger(__name__)

MAX_RELATED = 8
MAX_PHRASE_CHARS = 80
_LEADING = re.compile(
    r"^(?:(?:can|could|would|will) you (?:please )?|please )?"
    r"(?:where (?:is|are|was|were|'s)|is there|are there|was there|were there|have you seen|did you see|"
    r"do you see|find|look for|search for|go to|navigate to|take me to|show me|locate|what colou?r is|"
    r"how many|which room (?:has|is)|bring me)\s+", re.I)
_PLACE = re.compile(r"\s+(?:in|inside|near|next to|by|at|on) (?:the |a |an )?([a-z][a-z _-]*)$", re.I)
_TRAILING = re.compile(r"(?:\s+(?:now|today|please|right now|again|here|there|around|nearby|anywhere))+$", re.I)
# "does the kitchen have a red box": the place comes first
_PLACE_HAS = re.compile(r"^(?:does|do|did|would|will) (?:the |a |an )?([a-z][a-z _-]*?) "
                        rf"(?:{'|'.join(sorted(HAVE_WORDS))}) (.+)$", re.I)
# words of a question around a thing's name ("is the red box located", "which room is it in"); a
# short list: a stop word such as "exit", "long" or "last" may be part of a name ("the fire exit")
_EDGE_WORDS = FRAME_WORDS | set("""a an the any some my our your is are was were be been do does did can could would will
have has had it its there that this i i'm me you we us tell please where where's which what room located find found
see seen saw spot spotted looking look for in to of now last ever still currently""".split())


@dataclass(frozen=True)
class Related:
    phrase: str
    priority: int = 1          # 1 = the most telling


@dataclass(frozen=True)
class Instruction:
    text: str
    target: str
    related_objects: tuple[Related, ...] = field(default_factory=tuple)
    related_areas: tuple[Related, ...] = field(default_factory=tuple)
    source: str = "words"      # words | llm

    def queries(self) -> list[tuple[str, float]]:
        """Phrases to look for with their weights: the target 1, the others by priority."""
        out = [(self.target, 1.0)] if self.target else []
        for r in self.related_objects + self.related_areas:
            out.append((r.phrase, 0.5 / max(1, r.priority)))
        return out


def decompose(text: str, target: str = "") -> Instruction:
    """Deterministic decomposition of ``text``; ``target`` (an explicit target description)
    wins over the one read from the words."""
    words = " ".join(str(text).split()).strip().rstrip("?.!")
    areas: list[Related] = []
    core = _TRAILING.sub("", words)
    core = _LEADING.sub("", core)
    has = _PLACE_HAS.match(core)
    place = _PLACE.search(core)
    if has and has.group(1).lower().split()[-1] in ROOM_WORDS:      # not "do we have", "does the box have"
        areas.append(Related(has.group(1).strip().lower()[:MAX_PHRASE_CHARS], 1))
        core = has.group(2)
    elif place:
        areas.append(Related(place.group(1).strip()[:MAX_PHRASE_CHARS], 1))
        core = core[:place.start()]
    found = _without_edge_words(_TRAILING.sub("", core)).lower()[:MAX_PHRASE_CHARS]   # articles, copulas too
    explicit = " ".join(str(target).split()).strip().lower()[:MAX_PHRASE_CHARS]
    return Instruction(words, explicit or found or words.lower()[:MAX_PHRASE_CHARS], (), tuple(areas), "words")


def _without_edge_words(phrase: str) -> str:
    """``phrase`` without the question's words before and after the thing's name ("is the red box
    located" -> "red box", "i'm looking for the duck; which room is it in" -> "duck")."""
    words = phrase.split()

    def frame(word: str) -> bool:
        w = re.sub(r"[^\w']", "", word.lower())
        return not w or w in _EDGE_WORDS or w.split("'")[0] in _EDGE_WORDS

    while words and frame(words[0]):
        words.pop(0)
    while words and frame(words[-1]):
        words.pop()
    return re.sub(r"^\W+|\W+$", "", " ".join(words))


DECOMPOSE_PROMPT = (
    "You are the planner of a mobile robot exploring a building. Decompose the instruction into the "
    "target object, related objects that are usually near it, and related areas (rooms) where it is "
    "usually found, each with a priority (1 = most likely).\n"
    "Instruction: {text}\n"
    'Reply with JSON only: {{"target": "...", "related_objects": [{{"name": "...", "priority": 1}}], '
    '"related_areas": [{{"name": "...", "priority": 1}}]}}')


def _related(value) -> tuple[Related, ...]:
    if not isinstance(value, list):
        raise ValueError("related items must be a list")
    out = []
    for item in value[:MAX_RELATED]:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
            raise ValueError(f"a related item needs a name: {item!r}")
        priority = item.get("priority", 1)
        if not isinstance(priority, int) or isinstance(priority, bool) or not 1 <= priority <= 10:
            raise ValueError(f"priority must be an integer 1-10: {priority!r}")
        out.append(Related(" ".join(item["name"].split())[:MAX_PHRASE_CHARS].lower(), priority))
    return tuple(out)


class LlmDecomposer:
    """HIMM's instruction decomposition by a model; any error falls back to the words."""

    def __init__(self, client):
        self.client = client

    def decompose(self, text: str, target: str = "") -> Instruction:
        fallback = decompose(text, target)
        try:
            reply = self.client.chat([{"role": "user", "content": DECOMPOSE_PROMPT.format(text=text)}]).content
        except LLMError as exc:
            log.warning("instruction decomposition: endpoint error (%s); using the words", exc)
            return fallback
        for value in extract_json_objects(reply):
            if not isinstance(value, dict) or not isinstance(value.get("target"), str) or not value["target"].strip():
                continue
            try:
                objects = _related(value.get("related_objects", []))
                areas = _related(value.get("related_areas", []))
            except ValueError as exc:
                log.warning("instruction decomposition: %s; using the words", exc)
                return fallback
            model_target = " ".join(value["target"].split())[:MAX_PHRASE_CHARS].lower()
            return Instruction(fallback.text, fallback.target if target else model_target, objects, areas, "llm")
        log.warning("instruction decomposition: malformed reply %r; using the words", str(reply)[:200])
        return fallback
