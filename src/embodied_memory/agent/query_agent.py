"""QueryAgent: one question in, one typed Answer out, whichever planner answers it.

``planner``: ``llm`` (OpenAI-compatible endpoint), ``rules`` (deterministic, embedded
default), ``full_context`` (baseline), or ``auto`` (llm when an endpoint is configured).  With
``planner: rules`` and an endpoint, a question the rules planner does not understand is asked
of the llm planner (planner "llm (rules did not understand)"); a question that names its
planner (``ask(planner="rules")``: benchmarks) gets that planner only.

``ask`` never raises and never takes much longer than ``question_timeout()``: an endpoint that
is down, hangs, answers garbage or runs out of the question's time makes ``llm`` fall back to
``rules`` (planner "rules (fallback)", the reason in ``error``); anything else that goes wrong
becomes an Answer with status "error" naming the exception.  Every answer is sanitised
(``Answer.sanitize``).  One agent serves concurrent questions (each gets its own planner and
tool box).

Per question, ``QuestionHooks`` say whether it may drive (the navigate tool), report progress
and can be cancelled (an answer with status "error" and error "cancelled: ...", no fallback).
A command ("go to where you saw Alice") asked without the navigate tool is answered with where
the place is, noted with ``no_navigate`` (why it did not drive).
"""
from __future__ import annotations

import datetime as dt
import logging
import time
import unicodedata
from dataclasses import dataclass
from typing import Optional
from zoneinfo import ZoneInfo

from ..calendar_windows import check_timezone
from ..llm.chat_client import BadResponse, ChatClient, EndpointUnavailable, LLMConfig, LLMError
from ..store.errors import StoreError
from .answer import STATUS_ERROR, Answer, clean_text, valid_time
from .full_context import FullContextPlanner
from .llm_planner import LLMPlanner
from .memory_reader import QUERY_CHARS
from .rules_planner import RulesPlanner
from .question_parser import parse_question
from .tools import (NAVIGATE, Cancelled, MemoryCapabilities, MemoryClient, MemoryUnavailable, NavigateFn, OutOfTime,
                    QuestionHooks, ToolBox)

log = logging.getLogger(__name__)
PLANNERS = ("auto", "llm", "rules", "full_context")
MAX_QUESTION_CHARS = 4000
FALLBACK = "rules (fallback)"
NOT_UNDERSTOOD = "llm (rules did not understand)"


@dataclass(frozen=True)
class AgentParams:
    planner: str = "auto"
    llm_base_url: str = ""                 # e.g. http://localhost:8000/v1 (vLLM, Ollama, llama.cpp, OpenAI)
    llm_model: str = ""
    llm_api_key_env: str = "OPENAI_API_KEY"
    llm_timeout_s: float = 60.0            # one model call
    llm_max_tokens: int = 512
    function_call_limit: int = 10          # HUMEMBR's best
    question_timeout_s: float = 0.0        # a whole question; 0 = llm_timeout_s * (function_call_limit + 1)
    timezone: str = "UTC"
    rules_top_k: int = 3                   # semantic-memory rules put in the system prompt
    match_threshold: float = 0.35          # rules planner: min text similarity of a match
    robot_id: str = ""                     # the robot it answers for on a fleet's memory: "where are you" from
                                           # its own records ("" = any robot's latest; a node's "auto" = its namespace)

    def validate(self) -> None:
        if self.planner not in PLANNERS:
            raise ValueError(f"planner: unknown '{self.planner}' ({' | '.join(PLANNERS)})")
        if self.planner in ("llm", "full_context") and not self.llm_base_url:
            raise ValueError(f"planner '{self.planner}' needs llm_base_url (an OpenAI-compatible endpoint)")
        if self.function_call_limit < 1:
            raise ValueError("function_call_limit: must be >= 1")
        if not self.llm_timeout_s > 0:
            raise ValueError("llm_timeout_s: must be > 0")
        if not self.question_timeout_s >= 0:
            raise ValueError("question_timeout_s: must be >= 0 (0 = llm_timeout_s * (function_call_limit + 1))")
        check_timezone(self.timezone)

    def question_timeout(self) -> float:
        """Seconds one question may take: every model call of the llm planner (one per tool
        round, plus the final answer) at its timeout, unless ``question_timeout_s`` says."""
        return self.question_timeout_s or self.llm_timeout_s * (self.function_call_limit + 1)


class QueryAgent:
    def __init__(self, memory: MemoryClient, params: AgentParams = AgentParams(),
                 navigate: Optional[NavigateFn] = None, extra_planners: Optional[dict] = None):
        self.memory = memory
        self.capabilities = MemoryCapabilities(memory)      # which tools the memory can serve, cached
        self.params = params
        self.tz = ZoneInfo(params.timezone)
        self.navigate = navigate
        self.extra_planners = dict(extra_planners or {})  # e.g. evaluation baselines, by name
        self.client: Optional[ChatClient] = None
        if params.llm_base_url:
            self.client = ChatClient(LLMConfig(params.llm_base_url, params.llm_model, params.llm_api_key_env,
                                               params.llm_timeout_s, max_tokens=params.llm_max_tokens))

    def warm_up(self) -> None:
        """Load what the rules planner needs before the first question: the MiniLM intent bank
        (about a second, longer on a busy CPU) and the time-expression parser."""
        from .intents import shared_classifier
        from .time_expressions import warm_up as warm_up_time_parser
        started = time.perf_counter()
        shared_classifier()
        warm_up_time_parser()
        log.info("rules planner ready in %.1f s", time.perf_counter() - started)

    def _rules_planner(self) -> RulesPlanner:
        return RulesPlanner(self.params.match_threshold)  # per question: it keeps per-question state

    def _planner(self, name: str):
        if name == "auto":
            name = "llm" if self.client else "rules"
        if name in self.extra_planners:
            return self.extra_planners[name]
        if name == "rules":
            return self._rules_planner()
        if name == "full_context":
            return FullContextPlanner(self.client)
        if name == "llm":
            if self.client is None:
                raise EndpointUnavailable("planner 'llm' needs llm_base_url")
            return LLMPlanner(self.client, self.params.function_call_limit)
        raise ValueError(f"unknown planner {clean_text(name, 100)!r} ({' | '.join(PLANNERS)})")

    def ask(self, question: str, as_of: Optional[float | dt.datetime] = None, planner: str = "",
            timeout_s: Optional[float] = None, hooks: Optional[QuestionHooks] = None) -> Answer:
        """Answer ``question`` as if asked at ``as_of`` (default: now) within ``timeout_s``
        (default ``params.question_timeout()``; time spent driving excluded).  ``hooks``
        (default: the agent's ``navigate``, if any) say whether it may drive, where progress
        goes and when it is cancelled.  Never raises."""
        start = time.perf_counter()
        requested = planner or self.params.planner
        hooks = hooks if hooks is not None else QuestionHooks(navigate=self.navigate)
        tools: Optional[ToolBox] = None
        notices = getattr(self.memory, "take_notices", lambda: [])     # what the memory said beside its results
        notices()
        try:
            ans, tools = self._ask(question, as_of, requested, timeout_s, hooks, escalate=not planner)
            said = notices()
            if said and ans.text:          # e.g. a fleet robot without its server: the answer may be stale
                ans.text = f"{ans.text} (Note: {'; '.join(said)}.)"
            if (tools is not None and hooks.navigate is None and hooks.no_navigate and ans.status == "ok"
                    and self._commands(question, tools)):
                ans.note(f"not driven: {hooks.no_navigate}")
            ans.tool_calls = len(tools.calls) if tools is not None else 0
            ans.trace = tools.trace if tools is not None else []
            if not ans.evidence and tools is not None:
                ans.evidence = tools.evidence[:20]
        except (MemoryUnavailable, StoreError) as exc:   # the memory's own error: no traceback of ours
            log.warning("question %r: the memory failed: %s", str(question)[:200], exc)
            ans = Answer(status=STATUS_ERROR, planner=str(requested), error=f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - the last resort: an answer, never an exception
            log.exception("question %r failed", str(question)[:200])
            ans = Answer(status=STATUS_ERROR, planner=str(requested),
                         error=f"{type(exc).__name__}: {exc}")
        try:
            ans.latency_s = round(time.perf_counter() - start, 3)
            return ans.sanitize()
        except Exception as exc:  # noqa: BLE001 - an answer object a planner broke beyond repair
            return Answer(status=STATUS_ERROR, planner=clean_text(requested, 100),
                          error=clean_text(f"{type(exc).__name__}: {exc}", 2000),
                          latency_s=round(time.perf_counter() - start, 3))

    def _ask(self, question, as_of, requested: str, timeout_s, hooks: QuestionHooks,
             escalate: bool = True) -> tuple[Answer, Optional[ToolBox]]:
        if isinstance(as_of, dt.datetime) and as_of.tzinfo is not None:
            as_of = as_of.timestamp()          # an aware datetime is a moment too
        now = as_of if as_of else time.time()
        if not valid_time(now):
            return Answer(status=STATUS_ERROR, planner=requested, error=f"as_of {now!r} is not a possible time "
                          "(UNIX seconds, or a datetime with a time zone)"), None
        now_iso = dt.datetime.fromtimestamp(now, tz=self.tz).isoformat(timespec="seconds")
        question = question if isinstance(question, str) else ""
        if len(question) > MAX_QUESTION_CHARS:
            return Answer(status=STATUS_ERROR, planner=requested, error=(
                f"question is {len(question)} characters long (at most {MAX_QUESTION_CHARS})")), None
        question = clean_question(question)
        if not question:   # a malformed request, like one too long: an error, not "no answer"
            return Answer(status=STATUS_ERROR, planner=requested, error="empty question"), None
        budget = self.params.question_timeout() if timeout_s is None else timeout_s
        deadline = time.monotonic() + budget
        tools = ToolBox(self.memory, now, self.tz, hooks, deadline=deadline, capabilities=self.capabilities,
                        robot=self.params.robot_id)
        try:
            chosen = self._planner(requested)
            rules = self._rules(question) if isinstance(chosen, LLMPlanner) else []
            ans = chosen.answer(question, tools, rules, now_iso, self.params.timezone)
            if escalate and isinstance(chosen, RulesPlanner) and chosen.not_understood and self.client is not None:
                return self._ask_llm_instead(question, now, now_iso, ans, tools)
        except EndpointUnavailable as exc:
            return self._fallback(question, now, now_iso, f"llm endpoint unavailable: {exc}", tools)
        except BadResponse as exc:
            return self._fallback(question, now, now_iso, f"llm endpoint gave no usable answer: {exc}", tools)
        except OutOfTime as exc:
            return self._fallback(question, now, now_iso, f"llm planner out of time ({budget:.0f} s): {exc}", tools)
        except LLMError as exc:
            return self._fallback(question, now, now_iso, f"llm error: {exc}", tools)
        except Cancelled as exc:
            return Answer(status=STATUS_ERROR, planner=requested, error=f"cancelled: {exc}"), tools
        except ValueError as exc:
            return Answer(status=STATUS_ERROR, error=str(exc), planner=requested), tools
        return ans, tools

    def _ask_llm_instead(self, question: str, now: float, now_iso: str, not_understood: Answer,
                         failed: ToolBox) -> tuple[Answer, ToolBox]:
        """A question the rules planner did not understand, asked of the llm planner; if that
        fails too, the rules planner's "not sure what you mean" stands (the reason noted)."""
        tools = ToolBox(self.memory, now, self.tz, failed.hooks, deadline=failed.deadline,
                        capabilities=self.capabilities,
                        robot=self.params.robot_id)
        try:
            ans = LLMPlanner(self.client, self.params.function_call_limit).answer(
                question, tools, self._rules(question), now_iso, self.params.timezone)
        except (LLMError, OutOfTime) as exc:
            not_understood.note(f"llm planner failed too: {exc}")
            return not_understood, failed
        ans.planner = NOT_UNDERSTOOD
        return ans, tools

    def _commands(self, question: str, tools: ToolBox) -> bool:
        """The question asks the robot to move ("go to ...", "take me to ..."), or the planner tried to."""
        if any(c.name == NAVIGATE for c in tools.calls):
            return True
        return parse_question(clean_question(question), tools.now, self.tz, [], []).kind == "go"

    def _fallback(self, question: str, now: float, now_iso: str, reason: str,
                  failed: ToolBox) -> tuple[Answer, ToolBox]:
        """The rules planner's answer, noted; the tokens the model spent are kept in it."""
        log.warning("%s: answering with the rules planner", reason)
        tools = ToolBox(self.memory, now, self.tz, failed.hooks, capabilities=self.capabilities,
                        robot=self.params.robot_id)
        try:
            ans = self._rules_planner().answer(question, tools, [], now_iso, self.params.timezone)
        except Cancelled as exc:
            return Answer(status=STATUS_ERROR, planner=FALLBACK, error=f"cancelled: {exc}"), tools
        ans.planner = FALLBACK
        ans.note(reason)
        ans.tokens_in, ans.tokens_out = failed.tokens_in, failed.tokens_out
        return ans, tools

    def _rules(self, question: str) -> list[dict]:
        try:
            rules = self.memory.call("rules_for", {"query": question[:QUERY_CHARS], "k": self.params.rules_top_k})
            return rules if isinstance(rules, list) else []
        except Exception as exc:  # noqa: BLE001 - rules are an optional hint
            log.debug("no semantic rules: %s", exc)
            return []


def clean_question(question) -> str:
    """The question as text: control characters (and NUL) become spaces, invalid UTF-8 is replaced."""
    text = clean_text(question if isinstance(question, str) else "", MAX_QUESTION_CHARS)
    return "".join(" " if unicodedata.category(c) == "Cc" else c for c in text).strip()
