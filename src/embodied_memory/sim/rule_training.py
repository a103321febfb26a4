"""Learning semantic rules from training episodes in the simulated office (HIMM section 3.3),
the work behind ``embodied-memory learn-rules``.

Each training episode explores a world the benchmark never uses (seeds from ``first_seed``,
100 by default; ``explore-bench`` reports seeds 0-19; the floor plans are the benchmark's, cycled,
but each from its ``training_start``, where no scored episode starts), logs its steps, builds the reference
trajectory (the shortest path to the target on the full map), detects the decision deviations
and has the LLM turn log + pseudocode + deviations into rules (``explore.rule_extraction``),
stored with MiniLM keys in the memory given. Training may use the simulator's truth: the
reference path and the ground-truth answer are what HIMM's rule extraction learns from; the
episodes that are scored later never see them.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from .exploration import GroundTruthTargetDetector, SimExplorationEnv, ground_truth_description, make_task, start_pose
from .floor_plans import FLOOR_PLANS, floor_plan
from ..explore.explorer import Explorer, ExplorerParams
from ..explore.policies import PolicyConfig, make_policy
from ..explore.rule_extraction import RuleExtractionError, RuleExtractor
from ..llm.chat_client import LLMError
from ..progress import progress_bar

log = logging.getLogger(__name__)

TRAINING_FIRST_SEED = 100


@dataclass(frozen=True)
class RuleTrainingConfig:
    episodes: int = 5
    first_seed: int = TRAINING_FIRST_SEED
    layouts: tuple[str, ...] = tuple(FLOOR_PLANS)    # episode k runs on layouts[k % len(layouts)]
    start: str = ""                  # a start of every layout ("": each floor plan's training_start, where no
                                     # scored episode starts)
    policy: str = "semantic"         # the policy whose mistakes the rules should correct
    width: int = 320
    height: int = 240
    explorer: ExplorerParams = ExplorerParams(use_episodic_memory=False)

    def __post_init__(self):
        if self.episodes < 1:
            raise ValueError("learn-rules: --episodes must be at least 1")
        if self.first_seed < TRAINING_FIRST_SEED:
            raise ValueError(f"learn-rules: training seeds start at {TRAINING_FIRST_SEED} or later (the benchmark "
                             "uses 0-19)")
        if not self.layouts:
            raise ValueError("learn-rules: at least one layout")
        for layout in self.layouts:
            if self.start:
                start_pose(self.start, layout)      # raises, naming the layout's starts
            else:
                floor_plan(layout)


def learn_rules(cfg: RuleTrainingConfig, store, client, text_embedder=None, progress: bool = True) -> list[dict]:
    """Run the training episodes, extract and store rules; one row per episode."""
    from .explore_benchmark import shortest_route
    extractor = RuleExtractor(client)
    rows = []
    bar = progress_bar(total=cfg.episodes, desc="training episodes", unit="episode", disable=not progress)
    for k in range(cfg.episodes):
        seed = cfg.first_seed + k
        task = make_task(seed, cfg.layouts[k % len(cfg.layouts)])
        start = start_pose(cfg.start or task.plan.training_start, task.layout)
        env = SimExplorationEnv(task, start, cfg.width, cfg.height)
        try:
            policy = make_policy(PolicyConfig(cfg.policy), text_embedder)
            params = replace(cfg.explorer, use_episodic_memory=False)
            explorer = Explorer(env, GroundTruthTargetDetector(env), params,
                                describer=lambda f: ground_truth_description(env, f), policy=policy)
            result = explorer.run(task.target, f"train-{seed}")
            _, reference = shortest_route(env, start, params)
            tx, ty = env.target_position()
        finally:
            env.close()
        row = {"seed": seed, "layout": task.layout, "target": task.target, "room": task.target_room, "steps": len(result.log),
               "path_m": round(result.path_length_m, 1), "rules": 0, "rejected": 0, "error": ""}
        try:
            if not reference:
                raise RuleExtractionError("no reference path to the target")
            out = extractor.extract(f"Find the {task.target}", f"the {task.target} is in the "
                                    f"{task.target_room.replace('_', ' ')} at ({tx:.1f}, {ty:.1f})",
                                    result.log, reference, episode_id=f"train-{seed}", store=store, seed=seed)
            row.update(rules=len(out.rules), rejected=len(out.rejected), deviations=list(out.deviations.steps))
        except (RuleExtractionError, LLMError) as exc:
            log.warning("training episode %s: no rules (%s)", seed, exc)
            row["error"] = str(exc)[:200]
        rows.append(row)
        bar.update(1)
    bar.close()
    return rows


def summary(rows: list[dict]) -> str:
    lines = [f"{r['layout']} seed {r['seed']}: {r['target']} in the {r['room']}, {r['steps']} steps, {r['path_m']} m -> "
             f"{r['rules']} rules stored, {r['rejected']} rejected" + (f" ({r['error']})" if r["error"] else "")
             for r in rows]
    lines.append(f"{sum(r['rules'] for r in rows)} rules from {len(rows)} episode{'s' if len(rows) != 1 else ''}")
    return "\n".join(lines)
