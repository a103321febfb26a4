"""ReMEmbR-style baseline without a model: every answer comes from a plain text top-k search
of the question (no person, waypoint or time tools, no recency)."""
from __future__ import annotations

from ..agent.answer import Answer, no_answer
from ..agent.question_parser import parse_question
from ..agent.tools import ToolBox, ToolCallRecord


class TextOnlyPlanner:
    name = "text_top_k"

    def __init__(self, k: int = 5, match_threshold: float = 0.35):
        self.k, self.match_threshold = k, match_threshold

    def answer(self, question: str, tools: ToolBox, rules, now_iso: str, tz_name: str) -> Answer:
        hits = tools.memory.call("text_observations", {"query": question, "k": self.k, "before": tools.now})
        tools.calls.append(ToolCallRecord("text_observations", {"query": question}))
        kind = parse_question(question, tools.now, tools.tz, [], []).kind
        if not hits:
            return no_answer("nothing in memory", self.name)
        top = hits[0]
        ans = Answer(planner=self.name, evidence=[h["id"] for h in hits], text=top["description"])
        if kind in ("where", "when", "what"):
            ans.type = "position" if kind == "where" else "time"
            ans.position = list(top["position"]) if top.get("position") is not None else None
            ans.waypoint = top.get("waypoint", "")
            ans.set_time(top["t"], tools.now, tools.tz)
        elif kind == "yes_no":
            ans.type, ans.binary = "binary", "yes" if top["similarity"] >= self.match_threshold else "no"
        elif kind in ("who", "how_many"):
            ans.type, ans.persons = "persons", list(dict.fromkeys(p for h in hits for p in h.get("persons", [])))
        elif kind == "how_long":
            times = sorted(h["t"] for h in hits)
            ans.type, ans.duration_minutes = "duration", round((times[-1] - times[0]) / 60.0, 1)
        return ans
