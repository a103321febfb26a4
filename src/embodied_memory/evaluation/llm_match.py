"""LLM-Match (OpenEQA): a judge model scores an answer 1-5 against the ground truth.

Used for text answers when the evaluation has an endpoint (``--llm-base-url``); offline the
documented keyword match (``sim.scoring.keyword_match``) stands in. A reply without a score
in 1-5 raises ``JudgeError`` (the question is then scored by keyword match and reported)."""
from __future__ import annotations

import re

PROMPT = (
    "You are an AI assistant who will help me to evaluate the response given the question and the correct "
    "answer. To mark a response, you should output a single integer between 1 and 5 (including 1, 5). 5 means "
    "that the response perfectly matches the answer. 1 means that the response is completely different from "
    "the answer.\n\nQuestion: {question}\nAnswer: {answer}\nResponse: {response}\nYour mark:")


JUDGE_CORRECT_MARK = 4           # a mark (1-5) at least this counts as correct


class JudgeError(ValueError):
    pass


def llm_match(client, question: str, answer: str, response: str) -> int:
    reply = client.chat([{"role": "user", "content": PROMPT.format(question=question, answer=answer,
                                                                   response=response)}]).content
    marks = re.findall(r"\b([1-5])\b", reply or "")
    if not marks:
        raise JudgeError(f"the judge gave no mark 1-5: {reply[:120]!r}")
    return int(marks[0])


def llm_match_accuracy(marks: list[int]) -> float:
    """OpenEQA's aggregate: mean of (mark - 1) / 4."""
    return sum((m - 1) / 4 for m in marks) / len(marks) if marks else 0.0
