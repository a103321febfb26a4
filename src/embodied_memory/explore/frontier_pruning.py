"""Frontier pruning with a recalled episode (HIMM eq. 2), two selectable implementations.

- ``MllmPruner``: HIMM's visual reasoning. The previous and the current exploration map are
  rendered (``map_render``) and sent with HIMM's prompt template (a) when exploration is needed
  (``I_explore`` = 1) or (b) when memory already holds the target (``I_explore`` = 0); the
  model returns the frontiers to prune as JSON.
- ``GeometricPruner``: the same rules computed on the grids (both maps in the same map frame,
  as GraphNav / Nav2 localisation gives across episodes):
  * the maps must agree where both are known ("same house"), else the previous map is ignored;
  * I_explore = 1: prune a frontier that is not connected to the reachable explored space, or
    whose unknown side is enclosed by boundaries: a pocket in the current map, or space the
    previous episode already explored and found closed;
  * I_explore = 0: prune a frontier farther than ``d_min`` from every retrieved landmark. (The
    paper's printed eq. 2 keeps d > d_min; we follow its prompt and the issue: with the target
    already in memory, frontiers that do not lead towards the landmarks are pruned.)
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np
from scipy import ndimage

from ..agent.answer import extract_json_objects
from ..llm.chat_client import LLMError
from ..llm.images import image_part
from .frontiers import Frontier
from .map_render import known_box, render_map
from .occupancy import OCCUPIED, UNKNOWN, OccupancyGrid

log = logging.getLogger(__name__)
_FOUR = ndimage.generate_binary_structure(2, 1)


@dataclass
class PruneResult:
    kept: list[Frontier]
    pruned: dict[int, str] = field(default_factory=dict)      # frontier id -> reason
    same_map: Optional[bool] = None
    implementation: str = "geometric"


def resample(previous: OccupancyGrid, current: OccupancyGrid) -> np.ndarray:
    """The previous map's values on the current grid's cells (unknown outside it)."""
    rows, cols = np.indices(current.shape)
    x, y = current.to_world(rows, cols)
    pr, pc = previous.to_cell(x, y)
    ok = previous.inside(pr, pc)
    out = np.full(current.shape, UNKNOWN, np.int8)
    out[ok] = previous.values()[pr[ok], pc[ok]]
    return out


def map_agreement(current: np.ndarray, previous: np.ndarray) -> Optional[float]:
    """Share of the current boundaries (occupied cells the previous map also knows) that the
    previous map has within one cell; None when too few to judge."""
    walls = (current == OCCUPIED) & (previous != UNKNOWN)
    if walls.sum() < 20:
        return None
    near_prev = ndimage.binary_dilation(previous == OCCUPIED, structure=np.ones((3, 3), bool))
    return float((walls & near_prev).sum() / walls.sum())


class GeometricPruner:
    name = "geometric"

    def __init__(self, d_min: float = 3.0, pocket_cells: int = 100, same_map_agreement: float = 0.6):
        self.d_min, self.pocket_cells, self.same_map_agreement = d_min, pocket_cells, same_map_agreement

    def prune(self, current: OccupancyGrid, previous: Optional[OccupancyGrid], frontiers: Sequence[Frontier],
              reachable: np.ndarray, i_explore: bool, landmarks: Sequence[tuple[float, float, float]] = (),
              question: str = "") -> PruneResult:
        cur = current.values()
        prev = resample(previous, current) if previous is not None else None
        same = None
        if prev is not None:
            agreement = map_agreement(cur, prev)
            same = agreement is None or agreement >= self.same_map_agreement
            if not same:
                log.info("previous map disagrees with the current one (%.2f): not used for pruning", agreement)
                return PruneResult(list(frontiers), {}, False, self.name)
        pruned: dict[int, str] = {}
        if i_explore:
            reach_halo = ndimage.binary_dilation(reachable, structure=np.ones((3, 3), bool))
            beyond_cur, _ = ndimage.label(cur == UNKNOWN, structure=_FOUR)
            sizes_cur = np.bincount(beyond_cur.ravel())
            if prev is not None:   # cells unknown now that the previous episode saw as open
                beyond_prev, _ = ndimage.label((cur == UNKNOWN) & (prev != OCCUPIED), structure=_FOUR)
                still_unknown = ndimage.maximum(prev == UNKNOWN, beyond_prev, np.arange(beyond_prev.max() + 1))
            for f in frontiers:
                rr, cc = np.array(f.cells).T
                if not reach_halo[rr, cc].any():
                    pruned[f.frontier_id] = "not connected to the reachable explored space"
                    continue
                labels = _adjacent_labels(beyond_cur, rr, cc)
                if labels.size and all(sizes_cur[lab] < self.pocket_cells and not _touches_border(beyond_cur, lab)
                                       for lab in labels):
                    pruned[f.frontier_id] = "enclosed by boundaries in the current map"
                    continue
                if prev is not None:
                    labels = _adjacent_labels(beyond_prev, rr, cc)
                    if labels.size and not any(still_unknown[lab] for lab in labels):
                        pruned[f.frontier_id] = "enclosed by boundaries in the previous map (already explored)"
        else:
            if landmarks:
                pts = np.array([(x, y) for x, y, _ in landmarks])
                for f in frontiers:
                    d = float(np.min(np.hypot(pts[:, 0] - f.x, pts[:, 1] - f.y)))
                    if d > self.d_min:
                        pruned[f.frontier_id] = f"{d:.1f} m from the nearest retrieved landmark (> d_min {self.d_min})"
        return PruneResult([f for f in frontiers if f.frontier_id not in pruned], pruned, same, self.name)


def _adjacent_labels(labels: np.ndarray, rr: np.ndarray, cc: np.ndarray) -> np.ndarray:
    h, w = labels.shape
    found = set()
    for dr, dc in ((0, 1), (1, 0), (0, -1), (-1, 0)):
        r, c = np.clip(rr + dr, 0, h - 1), np.clip(cc + dc, 0, w - 1)
        found.update(labels[r, c][labels[r, c] > 0].tolist())
    return np.array(sorted(found), int)


def _touches_border(labels: np.ndarray, lab: int) -> bool:
    return bool((labels[0] == lab).any() or (labels[-1] == lab).any() or (labels[:, 0] == lab).any()
                or (labels[:, -1] == lab).any())


_TASK = ("Task: You are an embodied agent exploring an indoor environment to answer: {question}\n"
         "Based on your previous memory, you {memory} So you need to {goal}\n"
         "Definition: Frontier: A point to an unexplored region based on current cognitive map, that could "
         "potentially lead to new information for answering the question. Selecting a frontier means that you "
         "will further explore that direction.\n"
         "Map legend: black = boundaries, grey = explored, green = reachable explored space, red numbered dots = "
         "frontiers, blue arrows = camera poses of the retrieved past observations, orange = you.\n")
_SAME_HOUSE = ("1. Check whether the CURRENT map and the PREVIOUS exploration map belong to the same house. You "
               "should determine this by comparing the layout shapes (black boundaries). If the layouts do NOT "
               "correspond to the same house, STOP and do NOT perform any further operation.\n")
PROMPT_EXPLORE = _TASK + (
    "Prune the frontiers that can't lead to unexplored area:\n" + _SAME_HOUSE +
    "2. If they belong to the same house: Compare the CURRENT map with the PREVIOUS exploration map. For each "
    "CURRENT frontier: 1. Align its position onto the corresponding location in the PREVIOUS exploration map. "
    "2. Check whether it is completely enclosed by black boundaries in any map. If YES, prune this CURRENT frontier "
    "because it cannot lead to any unknown area. 3. Check whether the reachable explored regions (gray and green "
    "areas) are connected to that frontier. If NO, prune this CURRENT frontier because it cannot lead to any "
    "unknown area.\n")
PROMPT_NO_EXPLORE = _TASK + (
    "Prune the frontiers that do not lead towards the remembered place:\n" + _SAME_HOUSE +
    "2. If they belong to the same house: For each CURRENT frontier: 1. Align its position onto the "
    "corresponding location in the PREVIOUS exploration map. 2. If it is far (more than {d_min:.0f} m) from every "
    "blue arrow, prune it: the target was seen from the blue arrows.\n")
_TAIL = ("Here is the previous exploration map: PREVIOUS_MAP\nHere is the current exploration map: CURRENT_MAP\n"
         "Important: - You may exclude one or multiple frontiers. Current frontiers: {ids}.\n"
         'Reply with JSON only: {{"same_house": true|false, "prune": [frontier numbers], "reason": "..."}}')


class MllmPruner:
    """HIMM's visual-reasoning pruning; any endpoint error or malformed reply falls back to the
    geometric rules (logged), so a flaky model never blocks exploration."""

    name = "mllm"

    def __init__(self, client, d_min: float = 3.0, fallback: Optional[GeometricPruner] = None):
        self.client, self.d_min = client, d_min
        self.fallback = fallback or GeometricPruner(d_min=d_min)
        self.last_prompt = ""

    def prompt(self, question: str, i_explore: bool, frontiers: Sequence[Frontier]) -> str:
        memory = ("NEVER reached a place which has enough information to answer the question." if i_explore else
                  "HAVE reached a place which has enough information to answer the question.")
        goal = ("explore other unvisited places based on previous experience." if i_explore else
                "go back towards that place.")
        body = (PROMPT_EXPLORE if i_explore else PROMPT_NO_EXPLORE)
        return (body + _TAIL).format(question=question or "find the target", memory=memory, goal=goal,
                                     d_min=self.d_min, ids=", ".join(str(f.frontier_id) for f in frontiers))

    def prune(self, current: OccupancyGrid, previous: Optional[OccupancyGrid], frontiers: Sequence[Frontier],
              reachable: np.ndarray, i_explore: bool, landmarks: Sequence[tuple[float, float, float]] = (),
              question: str = "") -> PruneResult:
        if previous is None or not frontiers:
            return PruneResult(list(frontiers), {}, None, self.name)
        prev_on_cur = OccupancyGrid.from_values(resample(previous, current), current.resolution, current.origin)
        crop = _union_box(current.values(), prev_on_cur.values())
        prev_img = render_map(prev_on_cur, poses=landmarks, crop=crop)
        cur_img = render_map(current, reachable, frontiers, crop=crop)
        text = self.prompt(question, i_explore, frontiers)
        self.last_prompt = text
        before, rest = text.split("PREVIOUS_MAP", 1)
        middle, after = rest.split("CURRENT_MAP", 1)
        content = [{"type": "text", "text": before},
                   image_part(prev_img),
                   {"type": "text", "text": middle},
                   image_part(cur_img),
                   {"type": "text", "text": after}]
        try:
            reply = self.client.chat([{"role": "user", "content": content}]).content
        except LLMError as exc:
            log.warning("frontier pruning: endpoint error (%s); geometric rules instead", exc)
            return self._fallback(current, previous, frontiers, reachable, i_explore, landmarks)
        ids = {f.frontier_id for f in frontiers}
        for value in extract_json_objects(reply):
            if not (isinstance(value, dict) and isinstance(value.get("same_house"), bool)):
                continue
            prune = value.get("prune", [])
            if not isinstance(prune, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in prune):
                break
            if not value["same_house"]:
                return PruneResult(list(frontiers), {}, False, self.name)
            reason = str(value.get("reason", ""))[:200] or "pruned by the MLLM"
            pruned = {i: reason for i in prune if i in ids}
            return PruneResult([f for f in frontiers if f.frontier_id not in pruned], pruned, True, self.name)
        log.warning("frontier pruning: malformed reply %r; geometric rules instead", reply[:200])
        return self._fallback(current, previous, frontiers, reachable, i_explore, landmarks)

    def _fallback(self, *args) -> PruneResult:
        result = self.fallback.prune(*args)
        result.implementation = "geometric (mllm fallback)"
        return result


def _union_box(a: np.ndarray, b: np.ndarray) -> tuple[int, int, int, int]:
    ra, rb = known_box(a, 10), known_box(b, 10)
    return min(ra[0], rb[0]), max(ra[1], rb[1]), min(ra[2], rb[2]), max(ra[3], rb[3])
