"""Embodied questions about the simulated office (A-EQA style) and how their answers are scored.

Each exploration task gets one question that needs exploring to answer: where its target
object is (a room), or whether it is in a named room (yes/no: as many yes as no over the
held-out seeds on every floor plan). The wording comes from a phrasing set: ``eqa_dev.yaml``
(what the planner and its tests may use) or ``eqa_evaluation.yaml`` (held out: what the
benchmark asks by default); the template varies with the seed and the floor plan.
The question is the explorer's instruction, the episode's answerer answers it when the episode
ends.

Scoring (never seen by the system under test):
* offline, on the simulator's truth: 1 when the answer names the true room (its place field, or
  exactly one room in its text) or says the right yes/no (a "no" only with evidence: where the
  thing was seen instead; "I have no such observation" is no answer), else 0; "I don't know" is 0;
* with an endpoint, LLM-Match as OpenEQA defines it: a judge model rates the answer against
  the true one from 1 to 5, and the score is (rating - 1) / 4;
* LLM-Match x SPL (HIMM's efficiency-weighted score): per episode, score x SPL, averaged.
"""
from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from typing import Optional

from ..agent.answer import Answer, extract_json_objects
from ..llm.chat_client import LLMError
from .exploration import SimTask
from .floor_plans import ALL_ROOMS, FLOOR_PLANS
from .questions_v2 import phrasing_file, template_slots

log = logging.getLogger(__name__)

EQA_KINDS = ("location", "yes_no")
EQA_PHRASING_SETS = ("dev", "evaluation")
_SLOTS = {"location": frozenset({"target"}), "yes_no": frozenset({"target", "room"})}


@dataclass(frozen=True)
class EqaQuestion:
    kind: str                   # location | yes_no
    text: str
    answer: str                 # the true answer: a room id, or "yes" / "no"
    room: str = ""              # the room a yes/no question names


def label(room: str) -> str:
    return room.replace("_", " ")


@functools.lru_cache(maxsize=None)
def eqa_phrasings(phrasing_set: str = "evaluation") -> dict[str, tuple[str, ...]]:
    """{kind: templates} of an EQA phrasing set (``sim/phrasings/eqa_<set>.yaml``), slots checked."""
    if phrasing_set not in EQA_PHRASING_SETS:
        raise ValueError(f"EQA phrasing set: unknown {phrasing_set!r} ({' | '.join(EQA_PHRASING_SETS)})")
    name = f"eqa_{phrasing_set}"
    data = phrasing_file(name)
    out = {}
    for kind in EQA_KINDS:
        templates = tuple(data.get(kind) or ())
        bad = [t for t in templates if template_slots(t) != _SLOTS[kind]]
        if not templates or bad:
            raise ValueError(f"{name}.yaml {kind}: templates with the slots {sorted(_SLOTS[kind])} expected ({bad})")
        out[kind] = templates
    return out


def make_question(task: SimTask, kind: str, phrasing_set: str) -> EqaQuestion:
    """The task's question of ``kind``. The template is the set's ((seed // 4 + the plan's index)
    % its count): seeds 4k..4k+3 share one. For yes/no, whether the room named is the true one
    ((seed // 4 + seed) % 2 == 0) splits each such pair of yes/no seeds (10-11, 14-15, 18-19) into
    a yes and a no, so on every plan each template is asked both ways as often."""
    templates = eqa_phrasings(phrasing_set)[kind]
    phrasing = templates[(task.seed // 4 + list(FLOOR_PLANS).index(task.layout)) % len(templates)]
    if kind == "location":
        return EqaQuestion(kind, phrasing.format(target=task.target), task.target_room)
    others = [r for r in task.plan.target_rooms if r != task.target_room]
    room = task.target_room if (task.seed // 4 + task.seed) % 2 == 0 else others[task.seed % len(others)]
    return EqaQuestion(kind, phrasing.format(target=task.target, room=label(room)),
                       "yes" if room == task.target_room else "no", room)


def question_for(task: SimTask, phrasing_set: str) -> EqaQuestion:
    """One question per task: location and yes/no alternate by pairs of seeds."""
    return make_question(task, EQA_KINDS[(task.seed // 2) % 2], phrasing_set)


_ROOM_WORDS = {room: re.compile(r"\b" + label(room).replace(" ", r"[\s_]+") + r"\b", re.I) for room in ALL_ROOMS}
_YES = re.compile(r"^\s*(yes|yeah|yep|correct|it is|there is)\b", re.I)
_NO = re.compile(r"^\s*(no|nope|it is not|it isn't|there is no)\b", re.I)


def always_baselines(rows: list[dict]) -> dict:
    """What answering every yes/no question "yes" (or "no") would score: the floor a yes/no
    accuracy must beat (from the rows' ``question_kind`` and ``true_answer``)."""
    answers = [r["true_answer"] for r in rows if r.get("question_kind") == "yes_no"]
    return {f"always_{a}": round(answers.count(a) / len(answers), 3) for a in ("yes", "no")} if answers else {}


def rooms_named(text: str) -> list[str]:
    return [room for room, pattern in _ROOM_WORDS.items() if pattern.search(text or "")]


def truth_score(question: EqaQuestion, answer: Answer) -> float:
    """1.0 when the answer is right on the simulator's truth, else 0.0 (offline scoring)."""
    if answer.status != "ok":
        return 0.0
    if question.kind == "yes_no":
        said = answer.binary or ("yes" if _YES.search(answer.text) else "no" if _NO.search(answer.text) else "")
        # a "no" from having no observation at all is no answer: an always-no robot would score
        return float(said == question.answer and (said == "yes" or bool(answer.evidence)))
    place = re.sub(r"_\d+$", "", answer.waypoint.strip().lower().replace(" ", "_"))
    named = [place] if place in ALL_ROOMS else rooms_named(answer.text)
    return float(len(named) == 1 and named[0] == question.answer)


JUDGE_PROMPT = """You are an AI assistant who will help me to evaluate the response given the question and the
correct answer. To mark a response, you should output a single integer between 1 and 5 (including 1, 5).
5 means that the response perfectly matches the answer. 1 means that the response is completely different from
the answer.
Question: {question}
Answer: {truth}
Response: {response}
Reply with JSON only: {{"mark": <1-5>}}"""


def llm_match(client, question: EqaQuestion, answer: Answer) -> Optional[float]:
    """OpenEQA's LLM-Match for one answer, (mark - 1) / 4; None when the judge gave no usable mark."""
    truth = label(question.answer) if question.kind == "location" else question.answer
    response = answer.text if answer.status == "ok" else "I don't know."
    try:
        reply = client.chat([{"role": "user", "content": JUDGE_PROMPT.format(
            question=question.text, truth=truth, response=response)}])
    except LLMError as exc:
        log.warning("LLM-Match judge failed: %s", exc)
        return None
    for value in extract_json_objects(reply.content):
        mark = value.get("mark") if isinstance(value, dict) else None
        if isinstance(mark, int) and not isinstance(mark, bool) and 1 <= mark <= 5:
            return (mark - 1) / 4
    log.warning("LLM-Match judge gave no mark: %r", reply.content[:120])
    return None
