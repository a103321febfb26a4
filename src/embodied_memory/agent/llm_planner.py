"""The ``llm`` planner: an OpenAI-compatible model iterates tool calls, then answers.

Reads native ``tool_calls`` and JSON tool calls written in the message content (small models
do that); malformed arguments (not JSON, not an object, longer than ``MAX_ARGUMENT_CHARS``,
an unknown tool) go back to the model as a tool error and count against the limit; after
``limit`` calls it must answer without tools.  If images were retrieved (LVMem), they are
attached to the final call (``llm.images``: longest side <= 768 px, JPEG quality 80; detail "low").

Every model call is bounded by the question's deadline (``ToolBox.deadline``): past it the
planner raises ``OutOfTime``; a model that never gives a usable answer (nothing, only tool
calls past the limit, an answer object whose every field is impossible) raises ``BadResponse``.
An answer of type "none" (``prompts.DECLINE_TYPE``: "I have not seen X that day") is a
no-answer with the model's text and no value, not a failure.
The query agent answers both with the rules planner.  A cancelled question (an AskAndAct goal)
raises ``Cancelled`` before the next model or tool call; it gets no fallback.
"""
from __future__ import annotations

import json
import logging
import uuid
from typing import Optional

from ..llm.chat_client import (BadResponse, ChatClient, ChatResult, ContextLengthExceeded, EndpointUnavailable,
                               ToolCall)
from ..llm.images import image_data_url
from .answer import (MAX_TEXT_CHARS, STATUS_NO_ANSWER, Answer, answer_from_model, clean_text, extract_json_objects,
                     no_answer)
from .prompts import DECLINE_TYPE, FINAL_IMAGES, FINAL_NOW, RULES_HEADER, SYSTEM, recent_days
from .tools import OutOfTime, ToolBox, ToolCallRecord, result_text

log = logging.getLogger(__name__)

MAX_ARGUMENT_CHARS = 16_000     # a tool call's arguments (JSON text); longer is a tool error
MAX_HISTORY_CONTENT_CHARS = 8_000   # assistant text echoed back to the model per turn


def encode_image(path: str) -> Optional[str]:
    """A retrieved image file as a data URL for the model (None if unreadable)."""
    import cv2
    image = cv2.imread(path, cv2.IMREAD_COLOR)
    return image_data_url(image) if image is not None else None


def content_tool_calls(content: str, tool_names: list[str]) -> list[ToolCall]:
    """JSON tool calls written in text: {"name"|"tool"|"function": ..., "arguments"|"args"|"parameters": {...}}."""
    calls = []
    for value in extract_json_objects(content):
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, dict):
                continue
            fn = item.get("function") if isinstance(item.get("function"), dict) else item
            name = fn.get("name") or fn.get("tool") or (item.get("function") if isinstance(item.get("function"), str) else None)
            if not isinstance(name, str) or name not in tool_names:
                continue
            args = fn.get("arguments", fn.get("args", fn.get("parameters", {})))
            try:
                text = args if isinstance(args, str) else json.dumps(args)
            except (TypeError, ValueError, RecursionError):
                text = str(args)
            calls.append(ToolCall(f"content_{uuid.uuid4().hex[:8]}", name, text))
    return calls


def declined(obj: dict, planner: str) -> Answer:
    """The model's "the memory has no answer" (type "none"): a no-answer with its text and no
    value, whatever other keys it wrote."""
    text = clean_text(obj.get("text") or "", MAX_TEXT_CHARS).strip() or "I don't know."
    return Answer(status=STATUS_NO_ANSWER, text=text, planner=planner, error="the memory has no answer (the model)")


class LLMPlanner:
    name = "llm"

    def __init__(self, client: ChatClient, limit: int = 10, tool_names: Optional[tuple[str, ...]] = None):
        """``tool_names``: offer only these tools (ablations, e.g. ReMEmbR's three); default all."""
        self.client = client
        self.limit = limit
        self.tool_names = tool_names

    def answer(self, question: str, tools: ToolBox, rules: list[dict], now_iso: str, tz_name: str) -> Answer:
        rules_text = (RULES_HEADER + "\n".join(f"- [{r.get('key', '')}] if {r.get('condition', '')} then "
                                               f"{r.get('action', '')}" for r in rules if isinstance(r, dict))
                      ) if rules else ""
        messages: list[dict] = [
            {"role": "system", "content": SYSTEM.format(now=now_iso, tz=tz_name, week=recent_days(tools.now, tools.tz),
                                                        limit=self.limit, rules=rules_text)},
            {"role": "user", "content": question}]
        specs = [s for s in tools.specs() if self.tool_names is None or s["function"]["name"] in self.tool_names]
        offered = [s["function"]["name"] for s in specs]
        images_shown = False

        def chat(tool_specs) -> ChatResult:
            tools.check_cancelled()
            tools.report("planning", f"model call after {len(tools.calls)} tool calls")
            remaining = tools.remaining()
            if remaining <= 0.05:
                raise OutOfTime(f"no time left for another model call after {len(tools.calls)} tool calls")
            try:
                result = self.client.chat(messages, tool_specs, timeout_s=remaining)
            except EndpointUnavailable as exc:
                if tools.remaining() <= 0.05:  # the call was cut at the question's deadline
                    raise OutOfTime(f"the model call was cut at the deadline after {len(tools.calls)} tool calls "
                                    f"({exc})") from exc
                raise
            tools.tokens_in += result.tokens_in
            tools.tokens_out += result.tokens_out
            return result

        try:
            while True:
                can_call = len(tools.calls) < self.limit
                if not can_call:
                    messages.append({"role": "user", "content": self._final_content(tools, FINAL_NOW)})
                    images_shown = True
                result = chat(specs if can_call else None)
                calls = result.tool_calls or (content_tool_calls(result.content, offered) if can_call else [])
                if not calls or not can_call:
                    if tools.images and not images_shown:  # LVMem: answer again, looking at the images
                        messages.append({"role": "assistant", "content": result.content[:MAX_HISTORY_CONTENT_CHARS]})
                        messages.append({"role": "user", "content": self._final_content(tools, FINAL_IMAGES)})
                        images_shown = True
                        result = chat(None)
                    break
                calls = calls[: self.limit - len(tools.calls)]
                if result.tool_calls:  # native protocol: assistant message + one tool message per call
                    messages.append(self._assistant_message(result.content, calls))
                    for call in calls:
                        messages.append({"role": "tool", "tool_call_id": call.id,
                                         "content": result_text(self._run(tools, call, offered))})
                else:                   # calls written in the content: results in a user message
                    messages.append({"role": "assistant", "content": result.content[:MAX_HISTORY_CONTENT_CHARS]})
                    messages.append({"role": "user", "content": "Tool results:\n" + "\n".join(
                        f"{c.name}: {result_text(self._run(tools, c, offered))}" for c in calls)})
        except ContextLengthExceeded as exc:
            ans = no_answer(f"context length exceeded: {exc}", self.name)
            ans.tokens_in, ans.tokens_out = tools.tokens_in, tools.tokens_out
            return ans
        objects = [o for o in extract_json_objects(result.content) if isinstance(o, dict)]
        answers = [o for o in objects if not ({"name", "arguments"} <= set(o))]
        if answers and str(answers[-1].get("type", "")).strip().lower() == DECLINE_TYPE:
            ans = declined(answers[-1], self.name)
        elif answers:
            ans = answer_from_model(answers[-1], tools.now, tools.tz, self.name)
            if ans.status == STATUS_NO_ANSWER:  # nothing usable in it (every field impossible or absent)
                raise BadResponse("the model's answer has no usable field" + (f" ({ans.error})" if ans.error else ""))
        elif objects:  # only tool calls, after the limit
            raise BadResponse(f"the model kept calling tools after the limit of {self.limit}")
        elif result.content.strip():
            ans = Answer(text=result.content.strip()[:2000], planner=self.name,
                         error="the model answered in prose, not JSON")
        else:
            raise BadResponse(f"the model gave no answer after {len(tools.calls)} tool calls")
        ans.tokens_in, ans.tokens_out = tools.tokens_in, tools.tokens_out
        return ans

    @staticmethod
    def _assistant_message(content: str, calls: list[ToolCall]) -> dict:
        """The assistant turn as sent back: only the calls that were run (each gets its tool
        message), arguments too long to run replaced by a stub (the history stays small)."""
        return {"role": "assistant", "content": content[:MAX_HISTORY_CONTENT_CHARS], "tool_calls": [
            {"id": c.id, "type": "function", "function": {
                "name": c.name, "arguments": c.arguments if len(c.arguments) <= MAX_ARGUMENT_CHARS else "{}"}}
            for c in calls]}

    def _run(self, tools: ToolBox, call: ToolCall, offered: list[str]):
        error = ""
        if self.tool_names is not None and call.name not in offered:   # an ablation's tool set
            error = f"unknown tool {call.name[:100]!r}; the tools are {', '.join(offered)}"
        elif len(call.arguments) > MAX_ARGUMENT_CHARS:
            error = f"arguments are {len(call.arguments)} characters long (at most {MAX_ARGUMENT_CHARS}); send less"
        else:
            try:
                arguments = json.loads(call.arguments) if call.arguments.strip() else {}
            except json.JSONDecodeError as exc:
                error = f"arguments are not valid JSON ({exc.msg} at {exc.pos}); send a JSON object"
            except (ValueError, RecursionError) as exc:  # 5000-digit numbers, deep nesting
                error = f"arguments are not usable JSON ({type(exc).__name__}); send a small JSON object"
        if error:
            tools.calls.append(ToolCallRecord(call.name, {}, error=error))  # counts against the limit
            return {"error": error}
        return tools.run(call.name, arguments)

    @staticmethod
    def _final_content(tools: ToolBox, text: str):
        images = [url for url in (encode_image(p) for p in tools.images[:4]) if url]
        if not images:
            return text
        return [{"type": "text", "text": text + " The retrieved images follow, in the order retrieved."}] + [
            {"type": "image_url", "image_url": {"url": url, "detail": "low"}} for url in images]
