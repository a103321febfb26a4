"""HUMEMBR's baseline: every description up to the question time in one prompt, one call."""
from __future__ import annotations

import datetime as dt
from typing import Optional

from ..llm.chat_client import ChatClient, ContextLengthExceeded, estimate_tokens
from .answer import Answer, answer_from_model, extract_json_objects, no_answer
from .prompts import FULL_CONTEXT
from .tools import OutOfTime, ToolBox


PAGE_ROWS = 1000            # the memory's largest page
MAX_ROWS = 200_000          # beyond this the prompt fits no model anyway


def all_observations(tools: ToolBox) -> list[dict]:
    """Every observation up to the question time, oldest first, read page by page."""
    rows: list[dict] = []
    seen: set[str] = set()
    t_start = 0.0
    while len(rows) < MAX_ROWS:
        page = tools.memory.call("observations_between", {"t_start": t_start, "t_end": tools.now,
                                                          "limit": PAGE_ROWS})
        new = [r for r in page if r["id"] not in seen]
        rows.extend(new)
        seen.update(r["id"] for r in new)
        if len(page) < PAGE_ROWS or not new:
            return rows
        t_start = page[-1]["t"]
    return rows


def full_context_prompt(tools: ToolBox, now_iso: str, tz_name: str) -> tuple[str, list[str]]:
    rows = all_observations(tools)
    lines = []
    for r in rows:
        hhmm = dt.datetime.fromtimestamp(r["t"], tz=tools.tz).strftime("%Y-%m-%d %H:%M")
        position = r["position"][:2] if r.get("position") is not None else "-"   # "-": stored without a pose
        lines.append(f"{r['id']} | {hhmm} | {position} | {r.get('waypoint', '')} | "
                     f"{','.join(r.get('persons', []))} | {r['description']}")
    return FULL_CONTEXT.format(now=now_iso, tz=tz_name, observations="\n".join(lines)), [r["id"] for r in rows]


class FullContextPlanner:
    name = "full_context"

    def __init__(self, client: Optional[ChatClient]):
        self.client = client

    def answer(self, question: str, tools: ToolBox, rules: list[dict], now_iso: str, tz_name: str) -> Answer:
        system, _ids = full_context_prompt(tools, now_iso, tz_name)
        if self.client is None:  # no endpoint: report what the prompt would cost
            ans = no_answer("full_context needs an LLM endpoint (llm_base_url); tokens are estimated", self.name)
            ans.tokens_in = estimate_tokens(system) + estimate_tokens(question)
            return ans
        if tools.remaining() <= 0.05:
            raise OutOfTime("no time left for the model call")
        try:
            result = self.client.chat([{"role": "system", "content": system}, {"role": "user", "content": question}],
                                      timeout_s=tools.remaining())
        except ContextLengthExceeded as exc:
            ans = no_answer(f"context length exceeded: {exc}", self.name)
            ans.tokens_in = estimate_tokens(system)
            return ans
        tools.tokens_in, tools.tokens_out = tools.tokens_in + result.tokens_in, tools.tokens_out + result.tokens_out
        objects = [o for o in extract_json_objects(result.content) if isinstance(o, dict)]
        ans = (answer_from_model(objects[-1], tools.now, tools.tz, self.name) if objects
               else Answer(text=result.content.strip(), planner=self.name, error="the model answered in prose"))
        ans.tokens_in, ans.tokens_out = result.tokens_in, result.tokens_out
        return ans
