"""QueryAgent: one question in, one typed Answer out, whichever planner answers it.

``planner``: ``llm`` (OpenAI-compatible endpoint), ``rules`` (deterministic, embedded
default), ``full_context`` (baseline), or ``auto`` (llm when an endpoint is configured).
An endpoint that is down makes ``llm`` fall back to ``rules`` (noted in the answer).
"""
from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass
from typing import Optional
from zoneinfo import ZoneInfo

from ..llm.chat_client import ChatClient, EndpointUnavailable, LLMConfig, LLMError
from .answer import STATUS_ERROR, Answer, no_answer
from .full_context import FullContextPlanner
from .llm_planner import LLMPlanner
from .rules_planner import RulesPlanner
from .tools import MemoryClient, NavigateFn, ToolBox

log = logging.getLogger(__name__)
PLANNERS = ("auto", "llm", "rules", "full_context")


@dataclass(frozen=True)
class AgentParams:
    planner: str = "auto"
    llm_base_url: str = ""                 # e.g. http://localhost:8000/v1 (vLLM, Ollama, llama.cpp, OpenAI)
    llm_model: str = ""
    llm_api_key_env: str = "OPENAI_API_KEY"
    llm_timeout_s: float = 60.0
    llm_max_tokens: int = 512
    function_call_limit: int = 10          # HUMEMBR's best
    timezone: str = "UTC"
    rules_top_k: int = 3                   # semantic-memory rules put in the system prompt
    match_threshold: float = 0.35          # rules planner: min text similarity of a match

    def validate(self) -> None:
        if self.planner not in PLANNERS:
            raise ValueError(f"planner: unknown '{self.planner}' ({' | '.join(PLANNERS)})")
        if self.planner in ("llm", "full_context") and not self.llm_base_url:
            raise ValueError(f"planner '{self.planner}' needs llm_base_url (an OpenAI-compatible endpoint)")
        if self.function_call_limit < 1:
            raise ValueError("function_call_limit: must be >= 1")
        check_timezone(self.timezone)


def check_timezone(name: str) -> None:
    try:
        ZoneInfo(name)
    except Exception as exc:  # noqa: BLE001 - ZoneInfoNotFoundError, ValueError
        raise ValueError(f"timezone: unknown time zone '{name}' (IANA name, e.g. Europe/Zurich)") from exc


class QueryAgent:
    def __init__(self, memory: MemoryClient, params: AgentParams = AgentParams(),
                 navigate: Optional[NavigateFn] = None, extra_planners: Optional[dict] = None):
        self.memory = memory
        self.params = params
        self.tz = ZoneInfo(params.timezone)
        self.navigate = navigate
        self.rules_planner = RulesPlanner(params.match_threshold)
        self.extra_planners = dict(extra_planners or {})  # e.g. evaluation baselines, by name
        self.client: Optional[ChatClient] = None
        if params.llm_base_url:
            self.client = ChatClient(LLMConfig(params.llm_base_url, params.llm_model, params.llm_api_key_env,
                                               params.llm_timeout_s, max_tokens=params.llm_max_tokens))

    def _planner(self, name: str):
        if name == "auto":
            name = "llm" if self.client else "rules"
        if name in self.extra_planners:
            return self.extra_planners[name]
        if name == "rules":
            return self.rules_planner
        if name == "full_context":
            return FullContextPlanner(self.client)
        if name == "llm":
            if self.client is None:
                raise EndpointUnavailable("planner 'llm' needs llm_base_url")
            return LLMPlanner(self.client, self.params.function_call_limit)
        raise ValueError(f"unknown planner {name!r} ({' | '.join(PLANNERS)})")

    def ask(self, question: str, as_of: Optional[float] = None, planner: str = "") -> Answer:
        """Answer ``question`` as if asked at ``as_of`` (default: now)."""
        start = time.perf_counter()
        now = as_of if as_of else time.time()
        now_iso = dt.datetime.fromtimestamp(now, tz=self.tz).isoformat(timespec="seconds")
        tools = ToolBox(self.memory, now, self.tz, self.navigate)
        question = (question or "").strip()
        if not question:
            ans = no_answer("empty question")
        else:
            try:
                chosen = self._planner(planner or self.params.planner)
                rules = self._rules(question) if isinstance(chosen, LLMPlanner) else []
                ans = chosen.answer(question, tools, rules, now_iso, self.params.timezone)
            except EndpointUnavailable as exc:
                log.warning("LLM endpoint unavailable (%s): answering with the rules planner", exc)
                tools = ToolBox(self.memory, now, self.tz, self.navigate)
                ans = self.rules_planner.answer(question, tools, [], now_iso, self.params.timezone)
                ans.planner = "rules (fallback)"
                ans.error = "; ".join(x for x in (ans.error, f"llm endpoint unavailable: {exc}") if x)
            except (LLMError, ValueError) as exc:
                ans = Answer(status=STATUS_ERROR, error=str(exc), planner=planner or self.params.planner)
        ans.tool_calls = len(tools.calls)
        if not ans.evidence:
            ans.evidence = tools.evidence[:20]
        ans.latency_s = round(time.perf_counter() - start, 3)
        return ans

    def _rules(self, question: str) -> list[dict]:
        try:
            return self.memory.call("rules_for", {"query": question, "k": self.params.rules_top_k})
        except Exception as exc:  # noqa: BLE001 - rules are an optional hint
            log.debug("no semantic rules: %s", exc)
            return []
