"""Answering an embodied question from what the episode saw (HIMM's step after "ready to answer").

Both answerers return the query agent's typed ``Answer`` with the observations they used as
evidence:

* ``MemoryAnswerer`` (offline default): the query agent over the memory, which holds this
  episode's views (the explorer stores each with its place and description) beside the
  earlier episodes the robot recalls. Among equally good matches the newest wins, so what this
  episode saw outranks a stale memory of a moved object.
* ``VlmAnswerer``: the episode's most relevant views as images to an OpenAI-compatible
  vision-language endpoint, with the question and the place each view was taken in; the reply
  is JSON, parsed (never evaluated) and validated: an unusable reply or a dead endpoint is an
  error answer saying why, never a guess.
"""
from __future__ import annotations

import logging
from typing import Callable, Optional, Protocol, Sequence

import cv2
import numpy as np

from ..agent.answer import STATUS_ERROR, STATUS_NO_ANSWER, Answer, extract_json_objects
from ..llm.chat_client import LLMError
from ..llm.images import image_part
from .explorer import EpisodeView

log = logging.getLogger(__name__)

MAX_ANSWER_VIEWS = 6          # images per question (the first ones the model reads are the best matches)
LAST_VIEWS = 2                # the episode's last views always go: the robot ended near what it looked for


class EpisodeAnswerer(Protocol):
    name: str

    def answer(self, question: str, views: Sequence[EpisodeView]) -> Answer: ...


class MemoryAnswerer:
    """The query agent (``ask(question) -> Answer``) over the memory the episode wrote into."""
    name = "memory"

    def __init__(self, ask: Callable[[str], Answer]):
        self.ask = ask

    def answer(self, question: str, views: Sequence[EpisodeView]) -> Answer:
        return self.ask(question)


VLM_PROMPT = """You are a robot answering a question about the building you just explored.
Question: {question}
Below are {n} of your camera views from this exploration, in this order:
{views}
Answer from what the images show. Reply with one JSON object only:
{{"answer": "<a short answer>", "yes_no": "yes" | "no" | "", "place": "<the named place the answer is in, or empty>",
  "views": [<the numbers of the views that show it>], "confident": true | false}}
If the views do not show the answer, set "answer" to "I don't know" and "confident" to false."""


def select_views(question: str, views: Sequence[EpisodeView], text_embedder=None,
                 k: int = MAX_ANSWER_VIEWS) -> list[EpisodeView]:
    """The views to show: those whose descriptions match the question best (MiniLM), then the
    episode's last views; only views with a stored image."""
    usable = [v for v in views if v.image_path]
    if not usable:
        return []
    chosen: list[EpisodeView] = []
    described = [v for v in usable if v.description]
    if text_embedder is not None and described:
        vecs = np.asarray(text_embedder.embed([question] + [v.description for v in described]), np.float32)
        scores = vecs[1:] @ vecs[0]
        chosen = [described[i] for i in np.argsort(-scores, kind="stable")[:max(0, k - LAST_VIEWS)]]
    for v in usable[-LAST_VIEWS:] + usable[::-1]:
        if len(chosen) >= k:
            break
        if v not in chosen:
            chosen.append(v)
    return chosen


class VlmAnswerer:
    name = "vlm"

    def __init__(self, client, text_embedder=None, max_views: int = MAX_ANSWER_VIEWS,
                 load: Callable[[str], Optional[np.ndarray]] = cv2.imread):
        if not 1 <= max_views <= 16:
            raise ValueError("VlmAnswerer: max_views must be 1-16")
        self.client, self.text_embedder, self.max_views, self._load = client, text_embedder, max_views, load

    def answer(self, question: str, views: Sequence[EpisodeView]) -> Answer:
        shown, images = [], []
        for v in select_views(question, views, self.text_embedder, self.max_views):
            image = self._load(v.image_path)
            if image is not None:
                shown.append(v)
                images.append(image)
        if not shown:
            return Answer(status=STATUS_ERROR, error="no stored view of this episode to answer from "
                                                     "(set an image directory)", planner=self.name)
        lines = "\n".join(f"{i + 1}. at ({v.pose.x:.1f}, {v.pose.y:.1f}) in {v.place or 'an unnamed place'}"
                          + (f": {v.description[:160]}" if v.description else "") for i, v in enumerate(shown))
        text = VLM_PROMPT.format(question=question, n=len(shown), views=lines)
        try:
            reply = self.client.chat([{"role": "user", "content": [{"type": "text", "text": text}]
                                       + [image_part(im) for im in images]}])
        except LLMError as exc:
            return Answer(status=STATUS_ERROR, error=f"the vision-language endpoint failed: {exc}", planner=self.name)
        ans = parse_vlm_reply(reply.content, shown)
        ans.tokens_in, ans.tokens_out, ans.planner = reply.tokens_in, reply.tokens_out, self.name
        return ans.sanitize()


def parse_vlm_reply(content: str, shown: Sequence[EpisodeView]) -> Answer:
    """The model's JSON as an Answer: wrong types are dropped, view numbers outside the list
    are ignored, a place is kept only when it is one of the shown views' (a place the robot
    knows, never a free-text destination); an unsure answer that points at no view is no
    answer; no usable object is an error answer that quotes the reply. No position: a view's
    camera pose is not where the thing is."""
    for value in extract_json_objects(content):
        if not isinstance(value, dict) or not isinstance(value.get("answer"), str) or not value["answer"].strip():
            continue
        used = [shown[i - 1] for i in value.get("views", []) if isinstance(i, int) and not isinstance(i, bool)
                and 1 <= i <= len(shown)] if isinstance(value.get("views"), list) else []
        yes_no = value.get("yes_no") if value.get("yes_no") in ("yes", "no") else ""
        place = value.get("place").strip() if isinstance(value.get("place"), str) else ""
        place = place if place in {v.place for v in shown if v.place} else ""
        confident = value.get("confident") is True
        text = value["answer"].strip()
        if not confident and not used:
            return Answer(status=STATUS_NO_ANSWER, text=text, error="the model was not sure and named no view")
        return Answer(type="binary" if yes_no else ("waypoint" if place else "text"), text=text, binary=yes_no,
                      waypoint=place, evidence=[v.observation_id for v in used], confidence=0.8 if confident else 0.3)
    return Answer(status=STATUS_ERROR, error=f"the vision-language model's reply has no answer: {content[:160]!r}")
