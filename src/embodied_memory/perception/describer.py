"""Describers: a keyframe (or a segment's keyframes) -> text for the memory.

``vlm``: a vision-language model behind any OpenAI-compatible endpoint.  Prompt
``object_centric`` is LVMem's structured description (scene type, objects with a colour from
a fixed palette and a count, people with activity and clothing, readable text verbatim;
positive statements only), flattened to prose for embedding (labels stripped, empty fields
dropped, <= 110 words).  Prompt ``caption`` is ReMEmbR's free-form caption.
``detector`` (embedded default, no VLM): what the detectors found: people, faces, identities.
"""
from __future__ import annotations

import json
import logging
from typing import Sequence

import numpy as np

from ..detector_sentences import detector_sentence
from ..llm.images import image_part

log = logging.getLogger(__name__)

PALETTE = ("black", "white", "grey", "red", "orange", "yellow", "green", "blue", "purple", "pink", "brown",
           "beige", "silver", "gold")
GENERIC_NOUNS = ("object", "item", "thing", "device", "stuff", "equipment", "structure")
MAX_WORDS = 110

OBJECT_CENTRIC_PROMPT = f"""Describe what these robot camera frames show, for a memory that will be searched later.
Return ONLY JSON with these fields (omit a field with nothing in it; never write what is absent):
{{"scene": "scene type (for outdoor scenes add the weather)",
  "objects": [{{"noun": "specific noun", "color": "one of {', '.join(PALETTE)} or null", "count": 1}}],
  "people": [{{"activity": "what they do", "clothing": "what they wear"}}],
  "text": ["readable text, verbatim"]}}
List distinct objects separately and merge repeated ones under a count. Use specific nouns, never
{', '.join(GENERIC_NOUNS)}."""

CAPTION_PROMPT = ("You are a robot. Describe in detail what you see in these frames: objects, people and what they "
                  "are doing, and any text. Keep it under 100 words.")


def _words_limit(text: str, limit: int = MAX_WORDS) -> str:
    words = text.split()
    return " ".join(words[:limit]) + ("" if len(words) <= limit else " ...")


def flatten_object_centric(data: dict) -> str:
    """LVMem: labels stripped, empty fields dropped, positive statements only, prose."""
    parts = []
    scene = str(data.get("scene") or "").strip()
    if scene:
        parts.append(scene.rstrip(".") + ".")
    objects = []
    for obj in data.get("objects") or []:
        if not isinstance(obj, dict) or not str(obj.get("noun") or "").strip():
            continue
        noun = str(obj["noun"]).strip().lower()
        if noun in GENERIC_NOUNS:
            continue
        color = str(obj.get("color") or "").lower()
        count = obj.get("count") if isinstance(obj.get("count"), int) and obj.get("count") > 0 else 1
        phrase = " ".join(x for x in (str(count) if count > 1 else "a", color if color in PALETTE else "", noun) if x)
        objects.append(phrase + ("s" if count > 1 and not noun.endswith("s") else ""))
    if objects:
        parts.append(", ".join(objects).capitalize() + ".")
    for person in data.get("people") or []:
        if isinstance(person, dict):
            desc = " ".join(x for x in (str(person.get("clothing") or "").strip(),
                                        str(person.get("activity") or "").strip()) if x)
            if desc:
                parts.append(f"A person {'in ' + person['clothing'].strip() + ' ' if person.get('clothing') else ''}"
                             f"{person.get('activity', '').strip()}".strip() + ".")
    texts = [str(t) for t in data.get("text") or [] if str(t).strip()]
    if texts:
        parts.append("Text: " + "; ".join(f'"{t}"' for t in texts) + ".")
    return _words_limit(" ".join(parts))


class VLMDescriber:
    name = "vlm"

    def __init__(self, base_url: str, model: str, prompt: str = "object_centric", api_key_env: str = "OPENAI_API_KEY",
                 timeout_s: float = 60.0):
        from ..llm.chat_client import ChatClient, LLMConfig
        if prompt not in ("object_centric", "caption"):
            raise ValueError(f"describer_prompt: unknown '{prompt}' (object_centric | caption)")
        self.prompt = prompt
        self._client = ChatClient(LLMConfig(base_url, model, api_key_env, timeout_s, max_tokens=400))

    def describe(self, images: Sequence[np.ndarray], detections: dict) -> tuple[str, str]:
        """(prose, structured JSON) for a segment's frames."""
        from ..agent.answer import extract_json_objects
        content = [{"type": "text", "text": OBJECT_CENTRIC_PROMPT if self.prompt == "object_centric" else CAPTION_PROMPT}]
        content += [image_part(im) for im in images]
        result = self._client.chat([{"role": "user", "content": content}])
        if self.prompt == "caption":
            return _words_limit(result.content.strip()), ""
        objects = [o for o in extract_json_objects(result.content) if isinstance(o, dict)]
        if not objects:
            log.warning("VLM answered without JSON; storing its text as a caption")
            return _words_limit(result.content.strip()), ""
        return flatten_object_centric(objects[-1]), json.dumps(objects[-1])


class DetectorDescriber:
    """No VLM: a factual sentence from the detectors (people, faces, identities, counts, place)."""

    name = "detector"

    def describe(self, images: Sequence[np.ndarray], detections: dict) -> tuple[str, str]:
        people = detections.get("people", 0)
        faces = detections.get("faces", 0)
        identities = [i for i in detections.get("identities", []) if i]
        place = detections.get("waypoint") or ""
        text = detector_sentence(people, faces, identities, place)
        return text, json.dumps({"people": people, "faces": faces, "identities": list(dict.fromkeys(identities))})
