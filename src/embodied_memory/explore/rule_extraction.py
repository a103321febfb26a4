"""Semantic memory (HIMM eq. 5): program-style rule extraction from a finished episode.

1. An LLM turns the execution log into pseudocode: the variables and functions that govern the
   workflow, with explicit control flow (``pseudocode``).
2. Decision deviations against a reference trajectory (``deviations.detect_deviations``) point
   at the steps that went wrong.
3. The LLM gets the ground-truth answer, the log, the pseudocode and each deviation step with
   its image, and returns rules as if-then / situation-suggestion / problem-solution pairs, each
   keyed to one variable or function of the pseudocode (``rules``). Rules are validated (kind,
   key present in the pseudocode, non-empty text) and stored; malformed output stores nothing.
"""
from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from typing import Optional, Sequence

import cv2

from ..agent.answer import extract_json_objects
from ..llm.images import image_part
from ..types import SemanticRule
from .deviations import DeviationResult, detect_deviations

log = logging.getLogger(__name__)
KINDS = ("if_then", "situation_suggestion", "problem_solution")


class RuleExtractionError(ValueError):
    pass


@dataclass(frozen=True)
class ExecutionStep:
    step: int
    state: str
    x: float
    y: float
    yaw: float
    action: str
    detail: str = ""
    image_path: str = ""

    def line(self) -> str:
        return (f"step {self.step} [{self.state}] at ({self.x:.1f}, {self.y:.1f}) yaw {self.yaw:.2f}: "
                f"{self.action}{' - ' + self.detail if self.detail else ''}")


PSEUDOCODE_PROMPT = (
    "You analyse the execution log of an embodied agent that explored a building for a task.\n"
    "Task: {task}\nExecution log:\n{log}\n\n"
    "Identify the variables and the functions that govern this workflow, then write it as compact pseudocode "
    "with explicit control flow (loops, if/else) and decision points. Reply with the pseudocode only.")

RULES_PROMPT = (
    "You extract reusable rules (semantic memory) for an embodied agent from one finished episode.\n"
    "Task: {task}\nGround-truth answer: {gt}\nExecution log:\n{log}\n\nPseudocode of the episode:\n{pseudocode}\n\n"
    "Decision deviations (steps where the robot left the reference trajectory; their images follow in order):\n"
    "{deviations}\n\n"
    "Debug the program: for each deviation decide which variable or function of the pseudocode caused it. "
    "Write general rules that transfer to other buildings (no coordinates, no episode-specific names). Reply with "
    'JSON only: {{"rules": [{{"key": "<variable or function from the pseudocode>", "kind": "if_then" | '
    '"situation_suggestion" | "problem_solution", "condition": "<if / situation / problem>", '
    '"action": "<then / suggestion / solution>"}}]}}')


@dataclass
class ExtractionResult:
    pseudocode: str
    deviations: DeviationResult
    rules: list[SemanticRule] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)


class RuleExtractor:
    def __init__(self, client, max_log_lines: int = 150, max_images: int = 5):
        self.client, self.max_log_lines, self.max_images = client, max_log_lines, max_images

    def _log_text(self, steps: Sequence[ExecutionStep]) -> str:
        lines = [s.line() for s in steps]
        if len(lines) > self.max_log_lines:
            half = self.max_log_lines // 2
            lines = lines[:half] + [f"... {len(lines) - 2 * half} steps omitted ..."] + lines[-half:]
        return "\n".join(lines)

    def pseudocode(self, task: str, steps: Sequence[ExecutionStep]) -> str:
        reply = self.client.chat([{"role": "user", "content": PSEUDOCODE_PROMPT.format(
            task=task, log=self._log_text(steps))}]).content.strip()
        if not reply:
            raise RuleExtractionError("the LLM returned no pseudocode")
        return reply

    def rules(self, task: str, gt_answer: str, steps: Sequence[ExecutionStep], pseudocode: str,
              deviations: Sequence[int], episode_id: str = "") -> tuple[list[SemanticRule], list[str]]:
        dev_steps = [steps[i] for i in deviations if 0 <= i < len(steps)]
        content: list[dict] = [{"type": "text", "text": RULES_PROMPT.format(
            task=task, gt=gt_answer, log=self._log_text(steps), pseudocode=pseudocode,
            deviations="\n".join(s.line() for s in dev_steps) or "(none)")}]
        for s in dev_steps[:self.max_images]:
            image = cv2.imread(s.image_path) if s.image_path else None
            if image is not None:
                content.append(image_part(image))
        reply = self.client.chat([{"role": "user", "content": content}]).content
        raw = next((v["rules"] for v in extract_json_objects(reply)
                    if isinstance(v, dict) and isinstance(v.get("rules"), list)), None)
        if raw is None:
            raise RuleExtractionError(f"the LLM reply holds no JSON rules list: {reply[:200]!r}")
        rules, rejected = [], []
        now = time.time()
        for item in raw:
            problem = _problem(item, pseudocode)
            if problem:
                rejected.append(problem)
                log.warning("rule rejected: %s", problem)
                continue
            key, kind = item["key"].strip(), item["kind"]
            cond, act = item["condition"].strip(), item["action"].strip()
            rule_id = "rule-" + hashlib.sha1(f"{key}|{kind}|{cond}|{act}".encode()).hexdigest()[:12]
            rules.append(SemanticRule(rule_id, kind, key, cond, act, episode_id, now))
        return rules, rejected

    def extract(self, task: str, gt_answer: str, steps: Sequence[ExecutionStep],
                reference: Sequence[Sequence[float]], episode_id: str = "", store=None,
                seed: int = 0) -> ExtractionResult:
        """The whole pipeline; rules are stored only when the extraction succeeded."""
        if not steps:
            raise RuleExtractionError("empty execution log")
        code = self.pseudocode(task, steps)
        dev = detect_deviations([(s.x, s.y) for s in steps], reference, seed=seed)
        rules, rejected = self.rules(task, gt_answer, steps, code, dev.steps, episode_id)
        if store is not None:
            for rule in rules:
                store.add_rule(rule)
        return ExtractionResult(code, dev, rules, rejected)


def _problem(item, pseudocode: str) -> Optional[str]:
    if not isinstance(item, dict):
        return f"not an object: {item!r}"[:200]
    for name in ("key", "kind", "condition", "action"):
        if not isinstance(item.get(name), str) or not item[name].strip():
            return f"missing or empty {name!r}: {item!r}"[:200]
    if item["kind"] not in KINDS:
        return f"kind {item['kind']!r} is not one of {', '.join(KINDS)}"
    if item["key"].strip() not in pseudocode:
        return f"key {item['key']!r} is not a variable or function of the pseudocode"
    return None
