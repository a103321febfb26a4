"""Exploration policies: which frontier next, or "ready to answer" (``explore_policy``).

- ``nearest``: the frontier with the shortest path (plus, with a recalled episode that saw the
  target, the distance to the remembered camera poses).
- ``semantic``: the offline default for finding things. Every view's description is embedded
  (MiniLM) and compared with the decomposed instruction (target, related objects and areas)
  and, weakly, with the learned rules for it (a rule that names a place or an object);
  the similarity is painted on the cells the view saw (``value_map``) and a frontier is worth
  its value: cost = path + landmark term - ``value_gain_m`` * value. What was seen near a
  frontier pulls the robot there before it is close enough to recognise the target.
- ``mllm``: HIMM's planner. Each decision the model gets the rendered map (frontiers numbered,
  the robot, recalled camera poses), the latest views, the decomposed instruction and the rules
  learned for similar instructions, and returns JSON: a frontier number or "ready to answer",
  with a reason. A reply that is not valid JSON of that shape, names a frontier that is not on
  the map, or an endpoint error falls back to the semantic policy (logged, counted).

A policy sees one episode at a time: ``start`` resets it, ``observe`` gets every view, ``choose``
decides. Policies never touch the environment or the memory.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Optional, Protocol, Sequence

import numpy as np

from ..agent.answer import extract_json_objects
from ..llm.chat_client import LLMError
from ..llm.images import image_part
from ..types import Pose
from .frontiers import Frontier
from .instruction import Instruction
from .map_render import render_map
from .occupancy import OccupancyGrid
from .planning import GridPaths
from .value_map import SemanticValueMap

log = logging.getLogger(__name__)

POLICIES = ("nearest", "semantic", "mllm")
RULE_WEIGHT = 0.25        # semantic: a learned rule is a weak query beside the target (weight 1)
VALUE_GAIN_M = 60.0       # semantic: metres of path one unit of value is worth (tuned on seeds 0-9)
LOOK_CLOSER_MARGIN = 0.25  # semantic: value above the episode's median view that makes a place a goal (seeds 0-9)
MAX_VIEWS = 4             # mllm: the latest views sent with each decision


@dataclass
class View:
    pose: Pose
    description: str
    image: Optional[np.ndarray]           # BGR, for a model that looks
    step: int


@dataclass
class PolicyContext:
    grid: OccupancyGrid
    paths: GridPaths
    frontiers: Sequence[Frontier]         # after pruning
    robot: Pose
    instruction: Instruction
    landmarks: Sequence[tuple[float, float, float]] = ()   # recalled camera poses that saw the target
    rules: Sequence[str] = ()             # learned rules for similar instructions (semantic memory)
    step: int = 0
    question: bool = False                # the goal is a question: "ready to answer" may end it


@dataclass(frozen=True)
class Decision:
    frontier: Optional[Frontier] = None   # the frontier to visit
    ready: bool = False                   # the policy can answer from what was seen
    reason: str = ""
    cell: Optional[tuple[int, int]] = None   # a place to look at closer (not a frontier)

    @property
    def goal(self) -> Optional[tuple[int, int]]:
        """The grid cell to drive to; None (and not ready): nothing left to choose."""
        return self.frontier.cell if self.frontier is not None else self.cell


@dataclass
class PolicyStats:
    decisions: int = 0
    model_calls: int = 0
    fallbacks: int = 0
    tokens_in: int = 0
    tokens_out: int = 0


class ExplorationPolicy(Protocol):
    name: str
    stats: PolicyStats

    def start(self, instruction: Instruction, grid: OccupancyGrid, hfov: float, rules: Sequence[str] = ()) -> None:
        """A new episode: its instruction, its (empty) map, the camera's horizontal field of view
        and the learned rules for the instruction."""

    def observe(self, view: View) -> None: ...

    def choose(self, ctx: PolicyContext) -> Decision: ...


def _reachable(ctx: PolicyContext) -> list[Frontier]:
    return [f for f in ctx.frontiers if np.isfinite(ctx.paths.dist[f.cell])]


def landmark_m(f: Frontier, landmarks: Sequence[tuple[float, float, float]]) -> float:
    if not landmarks:
        return 0.0
    pts = np.array([(x, y) for x, y, _ in landmarks])
    return float(np.min(np.hypot(pts[:, 0] - f.x, pts[:, 1] - f.y)))


class NearestPolicy:
    name = "nearest"

    def __init__(self, landmark_weight: float = 1.0):
        self.landmark_weight = landmark_weight
        self.stats = PolicyStats()

    def start(self, instruction: Instruction, grid: OccupancyGrid, hfov: float, rules: Sequence[str] = ()) -> None:
        pass

    def observe(self, view: View) -> None:
        pass

    def cost(self, f: Frontier, ctx: PolicyContext) -> float:
        return float(ctx.paths.dist[f.cell]) + self.landmark_weight * landmark_m(f, ctx.landmarks)

    def choose(self, ctx: PolicyContext) -> Decision:
        self.stats.decisions += 1
        options = _reachable(ctx)
        if not options:
            return Decision(None, False, "no reachable frontier")
        best = min(options, key=lambda f: self.cost(f, ctx))
        return Decision(best, False, f"nearest frontier ({ctx.paths.dist[best.cell]:.1f} m)")


class SemanticPolicy(NearestPolicy):
    name = "semantic"

    def __init__(self, text_embedder, value_gain_m: float = VALUE_GAIN_M, landmark_weight: float = 1.0,
                 max_range: float = 6.0, look_closer_margin: float = LOOK_CLOSER_MARGIN):
        super().__init__(landmark_weight)
        self.embedder, self.value_gain_m, self.max_range = text_embedder, value_gain_m, max_range
        self.look_closer_margin = look_closer_margin
        self.values: Optional[SemanticValueMap] = None
        self._grid: Optional[OccupancyGrid] = None
        self._queries = np.zeros((0, 1), np.float32)
        self._weights = np.zeros(0, np.float32)
        self.last_scores: list[tuple[int, float]] = []      # (view step, score): for reports and tests

    def start(self, instruction: Instruction, grid: OccupancyGrid, hfov: float, rules: Sequence[str] = ()) -> None:
        queries = instruction.queries() + [(rule, RULE_WEIGHT) for rule in rules]
        self._queries = self.embedder.embed([q for q, _ in queries]) if queries else np.zeros((0, 1), np.float32)
        self._weights = np.array([w for _, w in queries], np.float32)
        self._grid, self._hfov = grid, hfov
        self.values = SemanticValueMap.like(grid, self.max_range)
        self.last_scores = []

    def score(self, description: str) -> float:
        if not description or self._queries.shape[0] == 0:
            return 0.0
        sims = self._queries @ self.embedder.embed([description])[0]
        return float(np.max(sims * self._weights))

    def observe(self, view: View) -> None:
        if self.values is None or self._grid is None:
            return
        s = self.score(view.description)
        self.last_scores.append((view.step, s))
        self.values.add_view(self._grid, view.pose.x, view.pose.y, view.pose.yaw, self._hfov, s)

    def value(self, f: Frontier) -> float:
        v = self.values.value_of(f.cells) if self.values is not None else float("nan")
        return 0.0 if math.isnan(v) else v

    def cost(self, f: Frontier, ctx: PolicyContext) -> float:
        return super().cost(f, ctx) - self.value_gain_m * self.value(f)

    def look_closer(self, ctx: PolicyContext) -> Optional[tuple[tuple[int, int], float]]:
        """The best reachable cell not yet seen from close enough to recognise anything whose
        value stands ``look_closer_margin`` above the episode's typical view (the target was
        described from afar but no frontier leads there any more), with its cost."""
        if self.values is None or not self.last_scores:
            return None
        typical = float(np.median([s for _, s in self.last_scores]))
        mask = (ctx.paths.reachable & ~ctx.grid.searched & (self.values.confidence > 0)
                & (self.values.value >= typical + self.look_closer_margin))
        if not mask.any():
            return None
        rr, cc = np.nonzero(mask)
        cost = ctx.paths.dist[rr, cc] - self.value_gain_m * self.values.value[rr, cc]
        k = int(np.argmin(cost))
        return (int(rr[k]), int(cc[k])), float(cost[k])

    def choose(self, ctx: PolicyContext) -> Decision:
        self.stats.decisions += 1
        options = _reachable(ctx)
        closer = self.look_closer(ctx)
        best = min(options, key=lambda f: self.cost(f, ctx)) if options else None
        if closer is not None and (best is None or closer[1] < self.cost(best, ctx)):
            (r, c), _ = closer
            return Decision(None, False, f"look closer where the views matched '{ctx.instruction.target}' "
                                         f"(value {self.values.value[r, c]:.2f})", (r, c))
        if best is None:
            return Decision(None, False, "no reachable frontier")
        return Decision(best, False, f"frontier value {self.value(best):.2f} for '{ctx.instruction.target}', "
                                     f"{ctx.paths.dist[best.cell]:.1f} m away")


_MAP_LEGEND = ("The map image (north up): black = boundaries, grey = explored, green = reachable, red numbered "
               "dots = frontiers, blue arrows = camera poses where earlier episodes saw the target, orange = you.\n")
_PLANNER_PROMPT = (
    "You are the planner of a mobile robot exploring a building.\n"
    "Instruction: {text}\n"
    "Decomposed: target: {target}; related objects: {objects}; related areas: {areas}\n"
    "{rules}"
    "{legend}"
    "You are at ({x:.1f}, {y:.1f}) in metres, map frame (x east, y north).\n"
    "Frontiers (edges of unexplored space): {frontiers}\n"
    "{landmarks}"
    "Your latest views, oldest first{images}:\n{views}"
    "Decide the next step. If what you have seen is enough to answer the instruction, reply "
    '{{"action": "ready", "reason": "..."}}; otherwise choose the frontier most likely to lead to the target: '
    '{{"action": "explore", "frontier": <number>, "reason": "..."}}. Reply with JSON only.')


class MllmPolicy:
    """HIMM's model-driven planner; the fallback (semantic) also sees every view, so a failed
    call decides as well as the offline policy would."""

    name = "mllm"

    def __init__(self, client, fallback: ExplorationPolicy, max_views: int = MAX_VIEWS, map_scale: int = 3,
                 send_images: bool = True):
        self.client, self.fallback = client, fallback
        self.max_views, self.map_scale, self.send_images = max_views, map_scale, send_images
        self.views: list[View] = []
        self.stats = PolicyStats()
        self.last_prompt = ""

    def start(self, instruction: Instruction, grid: OccupancyGrid, hfov: float, rules: Sequence[str] = ()) -> None:
        self.views = []
        self.fallback.start(instruction, grid, hfov, rules)

    def observe(self, view: View) -> None:
        self.fallback.observe(view)
        self.views = (self.views + [view])[-self.max_views:]

    def prompt(self, ctx: PolicyContext, options: Sequence[Frontier]) -> str:
        ins = ctx.instruction
        rules = "".join(f"- {r}\n" for r in ctx.rules)
        return _PLANNER_PROMPT.format(
            text=ins.text or ins.target, target=ins.target,
            objects=", ".join(f"{r.phrase} ({r.priority})" for r in ins.related_objects) or "none",
            areas=", ".join(f"{r.phrase} ({r.priority})" for r in ins.related_areas) or "none",
            rules=f"Rules learned in earlier episodes:\n{rules}" if rules else "",
            frontiers="; ".join(f"{f.frontier_id}: ({f.x:.1f}, {f.y:.1f}), {ctx.paths.dist[f.cell]:.1f} m away"
                                for f in options) or "none",
            legend=_MAP_LEGEND if self.send_images else "", x=ctx.robot.x, y=ctx.robot.y,
            landmarks=("Earlier episodes saw the target from: "
                       + "; ".join(f"({x:.1f}, {y:.1f})" for x, y, _ in ctx.landmarks) + "\n") if ctx.landmarks else "",
            images=" (the map image first, then one image per view)" if self.send_images else "",
            views="".join(f"- step {v.step} at ({v.pose.x:.1f}, {v.pose.y:.1f}) facing {math.degrees(v.pose.yaw):.0f} "
                          f"deg: {v.description or 'no description'}\n" for v in self.views) or "- none\n")

    def choose(self, ctx: PolicyContext) -> Decision:
        self.stats.decisions += 1
        options = _reachable(ctx)
        text = self.last_prompt = self.prompt(ctx, options)
        content: list | str = text
        if self.send_images:
            image = render_map(ctx.grid, ctx.paths.reachable, options, poses=ctx.landmarks,
                               robot=(ctx.robot.x, ctx.robot.y, ctx.robot.yaw), scale=self.map_scale)
            content = [{"type": "text", "text": text}, image_part(image)] + [
                image_part(v.image) for v in self.views if v.image is not None]
        try:
            self.stats.model_calls += 1
            reply = self.client.chat([{"role": "user", "content": content}])
        except LLMError as exc:
            return self._fall_back(ctx, f"endpoint error ({exc})")
        self.stats.tokens_in += reply.tokens_in
        self.stats.tokens_out += reply.tokens_out
        by_id = {f.frontier_id: f for f in options}
        for value in extract_json_objects(reply.content):
            if not isinstance(value, dict) or value.get("action") not in ("ready", "explore"):
                continue
            reason = " ".join(str(value.get("reason", "")).split())[:200]
            if value["action"] == "ready":
                if not ctx.question:         # a target to reach: only reaching it ends the episode
                    return self._fall_back(ctx, "'ready to answer' for a goal that is no question")
                return Decision(None, True, reason or "the model is ready to answer")
            chosen = value.get("frontier")
            if isinstance(chosen, int) and not isinstance(chosen, bool) and chosen in by_id:
                return Decision(by_id[chosen], False, reason or f"frontier {chosen} chosen by the model")
            return self._fall_back(ctx, f"frontier {chosen!r} is not on the map (frontiers {sorted(by_id)})")
        return self._fall_back(ctx, f"malformed reply {reply.content[:120]!r}")

    def _fall_back(self, ctx: PolicyContext, why: str) -> Decision:
        self.stats.fallbacks += 1
        log.warning("exploration planner: %s; the %s policy decides", why, self.fallback.name)
        d = self.fallback.choose(ctx)
        return replace(d, reason=f"{self.fallback.name} (model fallback: {why[:80]}): {d.reason}")


@dataclass(frozen=True)
class PolicyConfig:
    name: str = "semantic"
    value_gain_m: float = VALUE_GAIN_M
    look_closer_margin: float = LOOK_CLOSER_MARGIN
    landmark_weight: float = 1.0
    max_views: int = MAX_VIEWS
    max_range: float = 6.0
    send_images: bool = True              # mllm: False for a text-only model (map and views as text)

    def __post_init__(self):
        if not (self.value_gain_m >= 0 and self.look_closer_margin >= 0 and self.landmark_weight >= 0
                and self.max_range > 0 and 1 <= self.max_views <= 16):
            raise ValueError("exploration policy: value_gain_m, look_closer_margin and landmark_weight must be >= 0, "
                             "max_range > 0 and max_views 1-16")


def make_policy(cfg: PolicyConfig, text_embedder=None, client=None) -> ExplorationPolicy:
    """The policy ``cfg.name`` names; a missing model or embedder is a clear error."""
    if cfg.name not in POLICIES:
        raise ValueError(f"explore_policy must be one of {', '.join(POLICIES)}, not {cfg.name!r}")
    if cfg.name == "nearest":
        return NearestPolicy(cfg.landmark_weight)
    if text_embedder is None:
        from ..text_embedding import MiniLMTextEmbedder
        text_embedder = MiniLMTextEmbedder()
    semantic = SemanticPolicy(text_embedder, cfg.value_gain_m, cfg.landmark_weight, cfg.max_range,
                              cfg.look_closer_margin)
    if cfg.name == "semantic":
        return semantic
    if client is None:
        raise ValueError("explore_policy 'mllm' needs llm_base_url (an OpenAI-compatible multimodal endpoint)")
    return MllmPolicy(client, semantic, cfg.max_views, send_images=cfg.send_images)
