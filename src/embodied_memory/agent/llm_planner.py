"""The ``llm`` planner: an OpenAI-compatible model iterates tool calls, then answers.

Reads native ``tool_calls`` and JSON tool calls written in the message content (small models
do that); malformed arguments go back to the model as a tool error; after ``limit`` calls it
must answer without tools.  If images were retrieved (LVMem), they are attached to the final
call (``llm.images``: longest side <= 768 px, JPEG quality 80; detail "low").
"""
from __future__ import annotations

import json
import logging
import uuid
from typing import Optional

from ..llm.chat_client import ChatClient, ContextLengthExceeded, ToolCall
from ..llm.images import image_data_url
from .answer import Answer, answer_from_model, extract_json_objects, no_answer
from .prompts import FINAL_IMAGES, FINAL_NOW, RULES_HEADER, SYSTEM
from .tools import ToolBox, ToolCallRecord, result_text

log = logging.getLogger(__name__)

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
            calls.append(ToolCall(f"content_{uuid.uuid4().hex[:8]}", name,
                                  args if isinstance(args, str) else json.dumps(args)))
    return calls


class LLMPlanner:
    name = "llm"

    def __init__(self, client: ChatClient, limit: int = 10):
        self.client = client
        self.limit = limit

    def answer(self, question: str, tools: ToolBox, rules: list[dict], now_iso: str, tz_name: str) -> Answer:
        rules_text = (RULES_HEADER + "\n".join(f"- [{r['key']}] if {r['condition']} then {r['action']}"
                                               for r in rules)) if rules else ""
        messages: list[dict] = [
            {"role": "system", "content": SYSTEM.format(now=now_iso, tz=tz_name, limit=self.limit, rules=rules_text)},
            {"role": "user", "content": question}]
        tokens_in = tokens_out = 0
        specs = tools.specs()
        images_shown = False
        try:
            while True:
                can_call = len(tools.calls) < self.limit
                if not can_call:
                    messages.append({"role": "user", "content": self._final_content(tools, FINAL_NOW)})
                    images_shown = True
                result = self.client.chat(messages, specs if can_call else None)
                tokens_in += result.tokens_in
                tokens_out += result.tokens_out
                calls = result.tool_calls or (content_tool_calls(result.content, tools.names) if can_call else [])
                if not calls or not can_call:
                    if tools.images and not images_shown:  # LVMem: answer again, looking at the images
                        messages.append({"role": "assistant", "content": result.content})
                        messages.append({"role": "user", "content": self._final_content(tools, FINAL_IMAGES)})
                        images_shown = True
                        result = self.client.chat(messages, None)
                        tokens_in += result.tokens_in
                        tokens_out += result.tokens_out
                    break
                calls = calls[: self.limit - len(tools.calls)]
                if result.tool_calls:  # native protocol: assistant message + one tool message per call
                    messages.append(result.message)
                    for call in calls:
                        messages.append({"role": "tool", "tool_call_id": call.id,
                                         "content": result_text(self._run(tools, call))})
                else:                   # calls written in the content: results in a user message
                    messages.append({"role": "assistant", "content": result.content})
                    messages.append({"role": "user", "content": "Tool results:\n" + "\n".join(
                        f"{c.name}: {result_text(self._run(tools, c))}" for c in calls)})
        except ContextLengthExceeded as exc:
            ans = no_answer(f"context length exceeded: {exc}", self.name)
            ans.tokens_in, ans.tokens_out = tokens_in, tokens_out
            return ans
        objects = [o for o in extract_json_objects(result.content) if isinstance(o, dict)]
        answers = [o for o in objects if not ({"name", "arguments"} <= set(o))]
        if answers:
            ans = answer_from_model(answers[-1], tools.now, tools.tz, self.name)
        elif result.content.strip():
            ans = Answer(text=result.content.strip()[:2000], planner=self.name,
                         error="the model answered in prose, not JSON")
        else:
            ans = no_answer("the model returned an empty answer", self.name)
        ans.tokens_in, ans.tokens_out = tokens_in, tokens_out
        return ans

    @staticmethod
    def _run(tools: ToolBox, call: ToolCall):
        try:
            arguments = json.loads(call.arguments) if call.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            error = f"arguments are not valid JSON ({exc.msg} at {exc.pos}); send a JSON object"
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
