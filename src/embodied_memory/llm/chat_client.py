"""An OpenAI-compatible chat client (OpenAI, vLLM, SGLang, Ollama, llama.cpp server) with the
failures the agent must tell apart: endpoint down, context too long, a response that is not a
chat completion, anything else.

The response body is parsed and validated here (``parse_completion``), never trusted: a server
that answers HTTP 200 with HTML, with JSON that is not a chat completion, with no choices, with
tool calls of the wrong shape or with absurd token counts raises ``BadResponse`` (or is
coerced to a well-formed ``ChatResult``); it never surfaces as an ``AttributeError``.
"""
from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass, field
from typing import Any, Optional

log = logging.getLogger(__name__)

MAX_CONTENT_CHARS = 100_000      # longer message content is cut (a model never needs to say more)
MAX_TOOL_CALLS = 64              # tool calls read from one response
MAX_TOOL_NAME_CHARS = 200
MAX_TOKENS_COUNT = 2**32 - 1     # usage counts beyond this are absurd (Answer.tokens_* are uint32)


class LLMError(RuntimeError):
    """The model call failed (bad request, bad response)."""


class EndpointUnavailable(LLMError):
    """Nothing answers at the configured base URL (or it answered 5xx / timed out)."""


class ContextLengthExceeded(LLMError):
    """The prompt does not fit the model's context window."""


class BadResponse(LLMError):
    """The endpoint answered, but not with a usable chat completion."""


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str           # raw JSON text, parsed (and validated) by the planner


@dataclass
class ChatResult:
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    message: dict = field(default_factory=dict)  # the assistant message, to append to the history


@dataclass(frozen=True)
class LLMConfig:
    base_url: str = ""                 # e.g. http://localhost:8000/v1 ; "" = no endpoint
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 60.0
    temperature: float = 0.0
    max_tokens: int = 512


_CONTEXT_MARKERS = ("context_length_exceeded", "context length", "maximum context", "too many tokens",
                    "exceeds the context", "n_ctx", "prompt is too long")


def _snippet(text: str, n: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n] + "..."


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return int(min(max(value, 0), MAX_TOKENS_COUNT))


def _text(value: Any) -> str:
    """Message content as text: a string, content parts ([{"type": "text", "text": ...}]) or None."""
    if value is None:
        return ""
    if isinstance(value, str):
        text = value
    elif isinstance(value, list):
        text = "".join(p.get("text", "") if isinstance(p, dict) and isinstance(p.get("text"), str) else ""
                       for p in value)
    else:
        text = json.dumps(value) if isinstance(value, (dict, int, float)) else str(value)
    return text[:MAX_CONTENT_CHARS]


def _tool_calls(value: Any) -> list[ToolCall]:
    if not isinstance(value, list):
        return []
    calls = []
    for i, c in enumerate(value[:MAX_TOOL_CALLS]):
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            continue
        args = fn.get("arguments")
        if args is None:
            args = "{}"
        elif not isinstance(args, str):  # some servers send the object itself
            try:
                args = json.dumps(args)
            except (TypeError, ValueError):
                args = str(args)
        call_id = c.get("id") if isinstance(c.get("id"), str) and c.get("id") else f"call_{i}"
        calls.append(ToolCall(call_id[:100], fn["name"][:MAX_TOOL_NAME_CHARS], args))
    return calls


def parse_completion(body: str) -> ChatResult:
    """A chat-completion response body -> ChatResult (raises BadResponse / ContextLengthExceeded)."""
    try:
        data = json.loads(body)
    except (TypeError, ValueError, RecursionError) as exc:
        raise BadResponse(f"the endpoint did not answer with JSON: {_snippet(body)!r}") from exc
    if not isinstance(data, dict):
        raise BadResponse(f"the endpoint answered {type(data).__name__} JSON, not a chat completion")
    if data.get("error") and not data.get("choices"):  # some servers send errors with HTTP 200
        text = _snippet(json.dumps(data["error"]) if not isinstance(data["error"], str) else data["error"], 500)
        if any(marker in text.lower() for marker in _CONTEXT_MARKERS):
            raise ContextLengthExceeded(text)
        raise BadResponse(f"the endpoint answered with an error: {text}")
    choices = data.get("choices")
    if not isinstance(choices, list):
        raise BadResponse(f"the response is not a chat completion (no 'choices'): {_snippet(body)!r}")
    if not choices:
        raise BadResponse("the endpoint returned no choices")
    choice = choices[0]
    msg = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(msg, dict):
        raise BadResponse("the first choice has no message object")
    content = _text(msg.get("content"))
    calls = _tool_calls(msg.get("tool_calls"))
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}} for c in calls]
    return ChatResult(content=content, tool_calls=calls, tokens_in=_count(usage.get("prompt_tokens")),
                      tokens_out=_count(usage.get("completion_tokens")), message=message)


class ChatClient:
    """Thread-safe: one client serves concurrent questions (httpx pools the connections)."""

    def __init__(self, config: LLMConfig):
        if not config.base_url:
            raise EndpointUnavailable("no LLM endpoint configured (parameter llm_base_url)")
        try:
            import openai
        except ImportError as exc:
            raise LLMError("the llm planner needs the 'openai' package") from exc
        self._openai = openai
        self.config = config
        self._client = openai.OpenAI(base_url=config.base_url, api_key=os.environ.get(config.api_key_env) or "none",
                                     timeout=config.timeout_s, max_retries=0)

    def chat(self, messages: list[dict], tools: Optional[list[dict]] = None,
             timeout_s: Optional[float] = None) -> ChatResult:
        """One completion; ``timeout_s`` (at most the configured timeout) bounds this call."""
        openai = self._openai
        timeout = self.config.timeout_s if timeout_s is None else max(0.05, min(timeout_s, self.config.timeout_s))
        kwargs: dict[str, Any] = {"model": self.config.model or "default", "messages": messages,
                                  "temperature": self.config.temperature, "max_tokens": self.config.max_tokens,
                                  "timeout": timeout}
        if tools:
            kwargs["tools"] = tools
        try:
            raw = self._client.chat.completions.with_raw_response.create(**kwargs)
            body = raw.text
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise EndpointUnavailable(f"{self.config.base_url}: {exc}") from exc
        except openai.APIStatusError as exc:
            text = f"{exc.status_code}: {getattr(exc, 'message', '')} {exc.body if exc.body else ''}"
            if any(marker in text.lower() for marker in _CONTEXT_MARKERS):
                raise ContextLengthExceeded(text) from exc
            if exc.status_code >= 500 or exc.status_code in (408, 429):
                raise EndpointUnavailable(f"{self.config.base_url}: {_snippet(text, 500)}") from exc
            raise LLMError(_snippet(text, 500)) from exc
        except openai.OpenAIError as exc:
            raise BadResponse(f"{self.config.base_url}: {type(exc).__name__}: {_snippet(str(exc))}") from exc
        except Exception as exc:  # noqa: BLE001 - transport errors the SDK does not wrap (decoding...)
            raise EndpointUnavailable(f"{self.config.base_url}: {type(exc).__name__}: {_snippet(str(exc))}") from exc
        return parse_completion(body)


def estimate_tokens(text: str) -> int:
    """~4 characters per token (English, BPE tokenizers); used only where no endpoint counts."""
    return max(1, len(text) // 4) if text else 0
