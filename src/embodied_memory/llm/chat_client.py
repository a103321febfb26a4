"""An OpenAI-compatible chat client (OpenAI, vLLM, SGLang, Ollama, llama.cpp server) with the
failures the agent must tell apart: endpoint down, context too long, anything else."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any, Optional

log = logging.getLogger(__name__)


class LLMError(RuntimeError):
    """The model call failed (bad request, bad response)."""


class EndpointUnavailable(LLMError):
    """Nothing answers at the configured base URL (or it answered 5xx / timed out)."""


class ContextLengthExceeded(LLMError):
    """The prompt does not fit the model's context window."""


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


class ChatClient:
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

    def chat(self, messages: list[dict], tools: Optional[list[dict]] = None) -> ChatResult:
        openai = self._openai
        kwargs: dict[str, Any] = {"model": self.config.model or "default", "messages": messages,
                                  "temperature": self.config.temperature, "max_tokens": self.config.max_tokens}
        if tools:
            kwargs["tools"] = tools
        try:
            response = self._client.chat.completions.create(**kwargs)
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise EndpointUnavailable(f"{self.config.base_url}: {exc}") from exc
        except openai.APIStatusError as exc:
            text = f"{exc.status_code}: {getattr(exc, 'message', '')} {exc.body if exc.body else ''}"
            if any(marker in text.lower() for marker in _CONTEXT_MARKERS):
                raise ContextLengthExceeded(text) from exc
            if exc.status_code >= 500:
                raise EndpointUnavailable(f"{self.config.base_url}: {text}") from exc
            raise LLMError(text) from exc
        if not response.choices:
            raise LLMError("the endpoint returned no choices")
        msg = response.choices[0].message
        calls = [ToolCall(c.id or f"call_{i}", c.function.name, c.function.arguments or "{}")
                 for i, c in enumerate(msg.tool_calls or []) if getattr(c, "function", None)]
        usage = response.usage
        message: dict[str, Any] = {"role": "assistant", "content": msg.content or ""}
        if calls:
            message["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}} for c in calls]
        return ChatResult(content=msg.content or "", tool_calls=calls,
                          tokens_in=getattr(usage, "prompt_tokens", 0) or 0,
                          tokens_out=getattr(usage, "completion_tokens", 0) or 0, message=message)


def estimate_tokens(text: str) -> int:
    """~4 characters per token (English, BPE tokenizers); used only where no endpoint counts."""
    return max(1, len(text) // 4) if text else 0
