"""SPL with and without episodic recall (HIMM's exploration efficiency), on simulated offices.

Per seed, a fresh memory: episode A explores from the lobby until the target is seen (it fills
the memory and saves its map); episode B starts elsewhere and looks for the same target, once
without recall and once with it. Scenario ``moved``: before episode B the target is carried to
another room, so the recalled place is stale (HIMM: the past is verified, not blindly trusted).

SPL = success * shortest / max(shortest, driven), the shortest path from the start to within
``approach_radius_m`` of the target on the true map (same planner and robot radius).
Perception of the target and the descriptions come from labelled simulator oracles (see
``sim.exploration``); the recall uses the real image/text embeddings and ORB verification.
"""
from __future__ import annotations

import json
import logging
import statistics
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import cv2
import numpy as np

from .exploration import (TARGET_ROOMS, GroundTruthTargetDetector, SimExplorationEnv, SimTask,  # noqa: I100
                          ground_truth_description, make_task, start_pose)
from ..explore.episodic_recall import EpisodicRecall, FeatureMatchVerifier
from ..explore.explorer import ExplorationResult, Explorer, ExplorerParams
from ..explore.map_render import render_map
from ..explore.planning import GridPaths, nearest_cell_within, traversable
from ..params import StoreParams
from ..progress import progress_bar

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExploreBenchConfig:
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4, 5)
    first_start: str = "lobby"
    second_start: str = "corridor_west"
    scenarios: tuple[str, ...] = ("same", "moved")
    width: int = 320
    height: int = 240
    explorer: ExplorerParams = ExplorerParams()


def shortest_route(env: SimExplorationEnv, start: tuple[float, float, float],
                   params: ExplorerParams) -> tuple[float, list[tuple[float, float]]]:
    """The shortest path (metres, map-frame points) from ``start`` to within the approach radius
    of the target on the true map: SPL's reference and the rule extractor's trajectory."""
    gt = env.ground_truth_grid(params.grid)
    r, c = gt.to_cell(start[0], start[1])
    radius = int(np.ceil(params.robot_radius_m / params.grid.resolution))
    paths = GridPaths(traversable(gt.values(), radius), (int(r), int(c)), params.grid.resolution)
    goal = nearest_cell_within(paths, gt, *env.target_position(), params.approach_radius_m)
    if goal is None:
        return float("inf"), []
    route = [tuple(float(v) for v in gt.to_world(rr, cc)) for rr, cc in paths.path_to(goal)]
    return float(paths.dist[goal]), route


def spl(result: ExplorationResult, shortest: float) -> float:
    if not result.success or not np.isfinite(shortest):
        return 0.0
    return shortest / max(shortest, result.path_length_m, 1e-9)


class _Run:
    def __init__(self, cfg: ExploreBenchConfig, store, embedder, image_dir: Path, map_dir: Path):
        self.cfg, self.store, self.embedder, self.image_dir, self.map_dir = cfg, store, embedder, image_dir, map_dir

    def episode(self, task: SimTask, start: str, episode_id: str, recall: bool, write: bool) -> dict:
        env = SimExplorationEnv(task, start_pose(start), self.cfg.width, self.cfg.height)
        try:
            params = replace(self.cfg.explorer, use_episodic_memory=recall)
            explorer = Explorer(env, GroundTruthTargetDetector(env), params,
                                store=self.store if write else _ReadOnly(self.store), embedder=self.embedder,
                                describer=lambda f: ground_truth_description(env, f),
                                recall=EpisodicRecall(self.store, FeatureMatchVerifier()) if recall else None,
                                image_dir=self.image_dir if write else None)
            t0 = time.perf_counter()
            result = explorer.run(task.target, episode_id, world="office")
            seconds = time.perf_counter() - t0
            shortest, _ = shortest_route(env, start_pose(start), params)
            landmarks = result.recall.landmarks if result.recall else []
            image = render_map(result.grid, poses=landmarks, robot=(result.final_pose.x, result.final_pose.y,
                                                                    result.final_pose.yaw))
            cv2.imwrite(str(self.map_dir / f"{episode_id}.png"), image)
            return {"episode": episode_id, "target": task.target, "room": task.target_room, "start": start,
                    "recall": recall, "success": result.success, "message": result.message,
                    "path_m": round(result.path_length_m, 2), "shortest_m": round(shortest, 2),
                    "spl": round(spl(result, shortest), 3), "steps": result.steps, "seconds": round(seconds, 2),
                    "i_explore": None if result.recall is None else bool(result.recall.i_explore),
                    "recall_reason": result.recall.reason if result.recall else "",
                    "states": [c.target.value for c in result.meta.changes]}
        finally:
            env.close()


class _ReadOnly:
    """The memory as seen by an episode that must not write (recall reads only)."""

    def __init__(self, store):
        self._store = store

    def __getattr__(self, name):
        if name in ("insert", "add_episode", "save_occupancy_map", "add_rule"):
            return lambda *a, **k: None
        return getattr(self._store, name)


def run_explore_benchmark(cfg: ExploreBenchConfig, out_dir: Path, progress: bool = True) -> dict:
    from ..perception.image_embedding import MobileNetV2Embedder
    from ..store.memory_store import open_store
    (out_dir / "maps").mkdir(parents=True, exist_ok=True)
    embedder = MobileNetV2Embedder()
    rows: list[dict] = []
    t_start = time.perf_counter()
    bar = progress_bar(total=len(cfg.seeds) * (1 + 2 * len(cfg.scenarios)), desc="exploration episodes",
                       unit="episode", disable=not progress)
    for seed in cfg.seeds:
        task = make_task(seed)
        store = open_store(StoreParams(data_dir=str(out_dir / f"seed_{seed}" / "memory")))
        try:
            run = _Run(cfg, store, embedder, out_dir / f"seed_{seed}" / "images", out_dir / "maps")
            first = run.episode(task, cfg.first_start, f"s{seed}-A", recall=False, write=True)
            rows.append(dict(first, seed=seed, scenario="first"))
            bar.update(1)
            for scenario in cfg.scenarios:
                b_task = task if scenario == "same" else moved(task)
                for recall in (False, True):
                    row = run.episode(b_task, cfg.second_start, f"s{seed}-B-{scenario}-{'recall' if recall else 'no_recall'}",
                                      recall=recall, write=False)
                    rows.append(dict(row, seed=seed, scenario=scenario))
                    bar.update(1)
        finally:
            store.close()
    bar.close()
    summary = summarise(rows)
    results = {"config": asdict(cfg), "episodes": rows, "summary": summary,
               "seconds": round(time.perf_counter() - t_start, 1)}
    (out_dir / "results.json").write_text(json.dumps(results, indent=2))
    (out_dir / "report.md").write_text(report(results))
    return results


def moved(task: SimTask) -> SimTask:
    """The same target carried to the next room (the world changed since the recalled episode)."""
    rooms = list(TARGET_ROOMS)
    return replace(task, target_room=rooms[(rooms.index(task.target_room) + 1) % len(rooms)])


def summarise(rows: list[dict]) -> dict:
    out = {}
    for scenario in sorted({r["scenario"] for r in rows}):
        for recall in (False, True):
            sel = [r for r in rows if r["scenario"] == scenario and r["recall"] == recall]
            if not sel:
                continue
            key = scenario if scenario == "first" else f"{scenario}/{'recall' if recall else 'no_recall'}"
            out[key] = {"episodes": len(sel), "success": round(statistics.mean(r["success"] for r in sel), 3),
                        "spl": round(statistics.mean(r["spl"] for r in sel), 3),
                        "path_m": round(statistics.mean(r["path_m"] for r in sel), 1),
                        "shortest_m": round(statistics.mean(r["shortest_m"] for r in sel), 1)}
    return out


def report(results: dict) -> str:
    lines = ["# Exploration with episodic recall (HIMM) - SPL", "",
             "Target detection and descriptions: simulator oracles (labelled ablation); recall: MobileNetV2 "
             "image embeddings, ORB + RANSAC place verification, MiniLM target query.", "",
             "| run | episodes | success | SPL | mean path (m) | mean shortest (m) |", "|---|---|---|---|---|---|"]
    for key, s in results["summary"].items():
        lines.append(f"| {key} | {s['episodes']} | {s['success']:.2f} | {s['spl']:.3f} | {s['path_m']} | {s['shortest_m']} |")
    lines += ["", "| seed | scenario | recall | target | room | success | path | shortest | SPL | I_explore |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["episodes"]:
        lines.append(f"| {r['seed']} | {r['scenario']} | {r['recall']} | {r['target']} | {r['room']} | {r['success']} "
                     f"| {r['path_m']} | {r['shortest_m']} | {r['spl']} | {r['i_explore']} |")
    lines += ["", f"Total time: {results['seconds']} s"]
    return "\n".join(lines) + "\n"


def main_summary(results: dict) -> str:
    return "\n".join(f"{k:>20}: SPL {v['spl']:.3f}  success {v['success']:.2f}  path {v['path_m']} m"
                     for k, v in results["summary"].items())

