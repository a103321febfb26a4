"""Exploration benchmark (HIMM's exploration efficiency) on simulated offices: SPL per policy,
with and without episodic recall.

Worlds: every floor plan of ``sim.floor_plans`` (office, wing, hall) times every seed (the
seed picks the target, its room and where the furniture and objects stand). Per world and policy, a fresh memory: episode A explores from the lobby until the target is seen
(it fills the memory and saves its map); episode B starts elsewhere and looks for the same
target, once with episode A's memory (a copy of it: every run writes its own views) and once
with none. Scenario ``moved``: before episode B the target is carried to another room, so the
recalled place is stale (HIMM: the past is verified, not blindly trusted). Episodes without
memory (A, and B without) compare the policies on a first visit.

EQA (``sim.eqa``): every episode's instruction is its task's question (where the target is, or
whether it is in a named room); when it ends, the answerer answers from this episode's views and
the memory (offline: the query agent over the stored descriptions, whose views carry the floor
plan's room names) and the answer is scored on the simulator's truth, and with LLM-Match when
an endpoint is given; each times SPL (HIMM's LLM-Match x SPL).

Success is judged on the simulator's truth (scoring only): the episode ended within
``approach_radius_m`` + 0.5 m of the target. SPL = success * shortest / max(shortest, driven),
the shortest path from the start to within ``approach_radius_m`` of the target on the true map
(same planner and robot radius). Perception of the target and the descriptions come from
labelled simulator oracles (see ``sim.exploration``); the recall uses the real image/text
embeddings and ORB verification, the semantic policy the real MiniLM embeddings.

The semantic policy's two constants were tuned on seeds 0-9; the default seeds (10-19) are held
out from that tuning.
"""
from __future__ import annotations

import contextlib
import json
import logging
import shutil
import statistics
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Optional

import cv2
import numpy as np

from .exploration import (GroundTruthTargetDetector, SimExplorationEnv, SimTask,  # noqa: I100
                          ground_truth_description, make_task, start_pose)
from .eqa import EqaQuestion, always_baselines, eqa_phrasings, llm_match, question_for, truth_score
from .floor_plans import FLOOR_PLANS, floor_plan
from ..agent.query_agent import AgentParams, QueryAgent
from ..agent.tools import StoreMemoryClient
from ..explore.episode_answer import MemoryAnswerer, VlmAnswerer
from ..explore.episodic_recall import EpisodicRecall, FeatureMatchVerifier
from ..explore.explorer import ExplorationResult, Explorer, ExplorerParams
from ..explore.map_render import render_map, with_legend
from ..explore.policies import PolicyConfig, make_policy
from ..explore.planning import GridPaths, nearest_cell_within, traversable
from ..params import StoreParams
from ..progress import progress_bar

log = logging.getLogger(__name__)


HELD_OUT_SEEDS = tuple(range(10, 20))    # the semantic policy was tuned on seeds 0-9
ANSWERERS = ("memory", "vlm")
EQA_SCORES = ("truth_match", "truth_match_spl", "llm_match", "llm_match_spl")


@dataclass(frozen=True)
class ExploreBenchConfig:
    seeds: tuple[int, ...] = HELD_OUT_SEEDS
    layouts: tuple[str, ...] = tuple(FLOOR_PLANS)   # floor plans; every one is run with every seed
    policies: tuple[str, ...] = ("nearest", "semantic")
    llm_base_url: str = ""                # for the mllm policy and for learning rules
    llm_model: str = ""
    judge_base_url: str = ""              # LLM-Match's judge ("": the llm endpoint judges its own answers)
    judge_model: str = ""
    rules_episodes: int = 0               # > 0: learn rules first (training seeds 100+, needs the endpoint)
                                          # and add the semantic-memory rows (semantic, both)
    first_start: str = ""                 # a start of every layout ("": each floor plan's first_start)
    second_start: str = ""                # "": each floor plan's second_start
    scenarios: tuple[str, ...] = ("same", "moved")
    eqa: bool = True                      # each episode is asked its task's question (sim.eqa)
    eqa_phrasings: str = "evaluation"     # evaluation (held out) | dev (the wordings the planner may use)
    answerer: str = "memory"              # memory (the query agent, offline) | vlm (the views; needs the endpoint)
    width: int = 320
    height: int = 240
    explorer: ExplorerParams = ExplorerParams()

    def __post_init__(self):
        if not self.layouts or not self.seeds:
            raise ValueError("explore-bench: at least one layout and one seed")
        eqa_phrasings(self.eqa_phrasings)              # raises, naming the sets
        for layout in self.layouts:
            floor_plan(layout)                         # raises, naming the known ones
            for start in filter(None, (self.first_start, self.second_start)):
                start_pose(start, layout)              # raises, naming the layout's starts

    def starts(self, layout: str) -> tuple[str, str]:
        """The first and second visits' start names on ``layout``."""
        plan = floor_plan(layout)
        return self.first_start or plan.first_start, self.second_start or plan.second_start


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


def reached(env: SimExplorationEnv, result: ExplorationResult, params: ExplorerParams) -> bool:
    """Success on the simulator's truth (scoring only): the episode ended near the target."""
    tx, ty = env.target_position()
    p = result.final_pose
    return bool(result.success) and float(np.hypot(tx - p.x, ty - p.y)) <= params.reached_within_m


def spl(success: bool, path_m: float, shortest: float) -> float:
    if not success or not np.isfinite(shortest):
        return 0.0
    return shortest / max(shortest, path_m, 1e-9)


class _Run:
    def __init__(self, cfg: ExploreBenchConfig, embedder, text_embedder, client, judge, image_dir: Path,
                 map_dir: Path):
        self.cfg, self.embedder, self.image_dir, self.map_dir = cfg, embedder, image_dir, map_dir
        self.text_embedder, self.client, self.judge = text_embedder, client, judge

    def _answer(self, question: Optional[EqaQuestion], result: ExplorationResult, store, spl_value: float) -> dict:
        """The episode's answer to its question and its scores: on the simulator's truth, and
        LLM-Match (OpenEQA's judge) when an endpoint is given; each times SPL."""
        if question is None:
            return {}
        if self.cfg.answerer == "vlm":
            answerer = VlmAnswerer(self.client, self.text_embedder)
        else:
            agent = QueryAgent(StoreMemoryClient(store), AgentParams(planner="rules"))
            answerer = MemoryAnswerer(agent.ask)
        answer = answerer.answer(question.text, result.views)
        truth = truth_score(question, answer)
        match = llm_match(self.judge, question, answer) if self.judge is not None else None
        return {"question": question.text, "question_kind": question.kind, "true_answer": question.answer,
                "answer": answer.text if answer.status == "ok" else f"({answer.status}: {answer.error[:120]})",
                "answer_place": answer.waypoint, "answer_evidence": answer.evidence[:5], "truth_match": truth,
                "judged": self.judge is not None,
                "truth_match_spl": round(truth * spl_value, 3), "llm_match": match,
                "llm_match_spl": None if match is None else round(match * spl_value, 3),
                "answer_tokens": answer.tokens_in + answer.tokens_out}

    def episode(self, task: SimTask, policy: str, start: str, episode_id: str, store, recall: bool,
                rules: bool = False) -> dict:
        """One episode on ``store`` (the memory this run has: episode A's or none), which it
        writes its views into; asked its task's question when ``cfg.eqa``."""
        env = SimExplorationEnv(task, start_pose(start, task.layout), self.cfg.width, self.cfg.height)
        question = question_for(task, self.cfg.eqa_phrasings) if self.cfg.eqa else None
        try:
            params = replace(self.cfg.explorer, use_episodic_memory=recall)
            chooser = make_policy(PolicyConfig(policy, landmark_weight=params.landmark_weight,
                                               max_range=params.grid.max_range), self.text_embedder, self.client)
            explorer = Explorer(env, GroundTruthTargetDetector(env), params, store=store, embedder=self.embedder,
                                describer=lambda f: ground_truth_description(env, f),
                                recall=EpisodicRecall(store, FeatureMatchVerifier()) if recall else None,
                                image_dir=self.image_dir, policy=chooser, place_of=task.plan.place_at)
            t0 = time.perf_counter()
            result = explorer.run(task.target, episode_id, question=question.text if question else "",
                                  world=task.layout)
            seconds = time.perf_counter() - t0
            shortest, _ = shortest_route(env, start_pose(start, task.layout), params)
            success = reached(env, result, params)
            landmarks = result.recall.landmarks if result.recall else []
            image = with_legend(render_map(result.grid, poses=landmarks, robot=(
                result.final_pose.x, result.final_pose.y, result.final_pose.yaw)))
            cv2.imwrite(str(self.map_dir / f"{episode_id}.png"), image)
            stats = chooser.stats
            spl_value = round(spl(success, result.path_length_m, shortest), 3)
            answered = self._answer(question, result, store, spl_value)
            return answered | {
                    "episode": episode_id, "layout": task.layout, "policy": policy, "target": task.target,
                    "room": task.target_room,
                    "start": start, "recall": recall, "rules": rules, "memory": MEMORIES[(recall, rules)],
                    "success": success, "message": result.message,
                    "path_m": round(result.path_length_m, 2), "shortest_m": round(shortest, 2),
                    "spl": spl_value, "steps": result.steps,
                    "seconds": round(seconds, 2), "model_calls": stats.model_calls, "fallbacks": stats.fallbacks,
                    "tokens": stats.tokens_in + stats.tokens_out + answered.get("answer_tokens", 0),
                    "rules_given": len(explorer.rules),
                    "i_explore": None if result.recall is None else bool(result.recall.i_explore),
                    "recall_reason": result.recall.reason if result.recall else "",
                    "states": [c.target.value for c in result.meta.changes]}
        finally:
            env.close()


MEMORIES = {(False, False): "none", (True, False): "episodic", (False, True): "semantic", (True, True): "both"}


class _RuleBank:
    """Collects the rules the training episodes produce (``learn_rules``' store)."""

    def __init__(self):
        self.rules = []

    def add_rule(self, rule) -> None:
        self.rules.append(rule)


def run_explore_benchmark(cfg: ExploreBenchConfig, out_dir: Path, progress: bool = True) -> dict:
    from ..perception.image_embedding import MobileNetV2Embedder
    from ..text_embedding import MiniLMTextEmbedder
    client = None
    if cfg.answerer not in ANSWERERS:
        raise ValueError(f"explore-bench: answerer must be one of {', '.join(ANSWERERS)}, not {cfg.answerer!r}")
    if ("mllm" in cfg.policies or (cfg.eqa and cfg.answerer == "vlm")) and not cfg.llm_base_url:
        raise ValueError("explore-bench: the mllm policy and the vlm answerer need --llm-base-url "
                         "(an OpenAI-compatible endpoint)")
    if cfg.llm_base_url:     # the model policy, the vlm answerer, LLM-Match's judge and rule learning
        from ..llm.chat_client import ChatClient, LLMConfig
        client = ChatClient(LLMConfig(base_url=cfg.llm_base_url, model=cfg.llm_model))
    judge = client
    if cfg.judge_base_url:
        from ..llm.chat_client import ChatClient, LLMConfig
        judge = ChatClient(LLMConfig(base_url=cfg.judge_base_url, model=cfg.judge_model))
    if cfg.rules_episodes > 0 and not cfg.llm_base_url:
        raise ValueError("explore-bench: learning rules needs --llm-base-url (an OpenAI-compatible endpoint)")
    (out_dir / "maps").mkdir(parents=True, exist_ok=True)
    embedder, text_embedder = MobileNetV2Embedder(), MiniLMTextEmbedder()
    bank, training = _RuleBank(), []
    if cfg.rules_episodes > 0:
        from .rule_training import RuleTrainingConfig, learn_rules
        training = learn_rules(RuleTrainingConfig(episodes=cfg.rules_episodes, layouts=cfg.layouts, width=cfg.width,
                                                  height=cfg.height),
                               bank, client, text_embedder, progress=progress)
    memories = [(False, False), (True, False)] + ([(False, True), (True, True)] if bank.rules else [])
    rows: list[dict] = []
    t_start = time.perf_counter()
    worlds = [(layout, seed) for layout in cfg.layouts for seed in cfg.seeds]
    bar = progress_bar(total=len(worlds) * len(cfg.policies) * (1 + len(memories) * len(cfg.scenarios)),
                       desc="exploration episodes", unit="episode", disable=not progress)
    for layout, seed in worlds:
        task = make_task(seed, layout)
        first_start, second_start = cfg.starts(layout)
        for policy in cfg.policies:
            root = out_dir / layout / f"seed_{seed}" / policy
            shutil.rmtree(root / "images", ignore_errors=True)
            run = _Run(cfg, embedder, text_embedder, client, judge, root / "images", out_dir / "maps")
            prefix = f"{layout}-s{seed}-{policy}"
            with _memory(root / "memory") as store:
                first = run.episode(task, policy, first_start, f"{prefix}-A", store, recall=False)
            rows.append(dict(first, seed=seed, scenario="first"))
            bar.update(1)
            for scenario in cfg.scenarios:
                b_task = task if scenario == "same" else moved(task)
                for recall, rules in memories:
                    name = f"{prefix}-B-{scenario}-{MEMORIES[(recall, rules)]}"
                    # episodic memory: a copy of episode A's memory; without it the robot remembers nothing
                    with _memory(root / name, copy_of=root / "memory" if recall else None) as store:
                        for rule in bank.rules if rules else ():   # learned elsewhere: episode A never saw them
                            store.add_rule(rule)
                        row = run.episode(b_task, policy, second_start, name, store, recall=recall, rules=rules)
                    rows.append(dict(row, seed=seed, scenario=scenario))
                    bar.update(1)
    bar.close()
    summary = summarise(rows)
    results = {"config": asdict(cfg), "episodes": rows, "summary": summary, "by_policy": by_policy(rows),
               "by_layout": by_layout(rows),
               "training": training, "rules": [asdict(r) | {"embedding": None} for r in bank.rules],
               "seconds": round(time.perf_counter() - t_start, 1)}
    (out_dir / "results.json").write_text(json.dumps(results, indent=2))
    (out_dir / "report.md").write_text(report(results))
    plot(results, out_dir / "explore.png")
    return results


PLOTTED = (("success", "success"), ("spl", "SPL"), ("truth_match", "EQA truth-match"),
           ("truth_match_spl", "truth-match x SPL"), ("llm_match_spl", "LLM-Match x SPL"))


def plot(results: dict, path: Path) -> bool:
    """Bars per policy and memory of success, SPL and the EQA scores (those measured)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed: no plot")
        return False
    runs = [(f"{policy}\n{memory}", v) for policy, parts in results["by_policy"].items() for memory, v in parts.items()]
    metrics = [(key, label) for key, label in PLOTTED if any(v.get(key) is not None for _, v in runs)]
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(runs)) + 2, 4))
    width = 0.8 / len(metrics)
    for i, (key, label) in enumerate(metrics):
        ax.bar([r + i * width for r in range(len(runs))], [v.get(key) or 0.0 for _, v in runs], width, label=label)
    ax.set_xticks([r + 0.4 - width / 2 for r in range(len(runs))], [name for name, _ in runs], fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_title("explore-bench: per policy and memory (none: A, and B without recall)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


@contextlib.contextmanager
def _memory(data_dir: Path, copy_of: Optional[Path] = None):
    """A store in ``data_dir``, started as a copy of the closed store in ``copy_of``."""
    from ..store.memory_store import open_store
    shutil.rmtree(data_dir, ignore_errors=True)      # a rerun into the same --out starts from nothing
    if copy_of is not None:
        shutil.copytree(copy_of, data_dir)
    store = open_store(StoreParams(data_dir=str(data_dir)))
    try:
        yield store
    finally:
        store.close()


def moved(task: SimTask) -> SimTask:
    """The same target carried to the next room (the world changed since the recalled episode)."""
    rooms = list(task.plan.target_rooms)
    return replace(task, target_room=rooms[(rooms.index(task.target_room) + 1) % len(rooms)])


def run_key(row: dict) -> str:
    """``policy/first`` or ``policy/scenario/memory`` (none, episodic, semantic, both)."""
    if row["scenario"] == "first":
        return f"{row['policy']}/first"
    return f"{row['policy']}/{row['scenario']}/{row['memory']}"


def _mean_of(sel: list[dict], key: str) -> Optional[float]:
    """The mean of a score over the episodes that have it (None: none has it)."""
    values = [r[key] for r in sel if r.get(key) is not None]
    return round(statistics.mean(values), 3) if values else None


def _mean(sel: list[dict]) -> dict:
    return {**{key: _mean_of(sel, key) for key in EQA_SCORES},
            "episodes": len(sel), "success": round(statistics.mean(r["success"] for r in sel), 3),
            "spl": round(statistics.mean(r["spl"] for r in sel), 3),
            "path_m": round(statistics.mean(r["path_m"] for r in sel), 1),
            "shortest_m": round(statistics.mean(r["shortest_m"] for r in sel), 1),
            "tokens": round(statistics.mean(r.get("tokens", 0) for r in sel)),
            "model_calls": sum(r.get("model_calls", 0) for r in sel),
            "fallbacks": sum(r.get("fallbacks", 0) for r in sel)}


def summarise(rows: list[dict]) -> dict:
    keys = sorted({run_key(r) for r in rows})
    return {key: _mean([r for r in rows if run_key(r) == key]) for key in keys}


def by_policy(rows: list[dict]) -> dict:
    """Per policy and memory (HIMM's ablation): ``none`` holds every episode without memory (a
    first visit: A, and B without recall or rules)."""
    out = {}
    for policy in sorted({r["policy"] for r in rows}):
        mine = [r for r in rows if r["policy"] == policy]
        out[policy] = {memory: _mean(sel) for memory in MEMORIES.values()
                       if (sel := [r for r in mine if r["memory"] == memory])}
    return out


def by_layout(rows: list[dict]) -> dict:
    """Per floor plan, policy and memory: the spread behind ``by_policy``'s means."""
    out: dict[str, dict] = {}
    for layout in dict.fromkeys(r["layout"] for r in rows):
        out[layout] = by_policy([r for r in rows if r["layout"] == layout])
    return out


def judged_count(rows: list[dict]) -> str:
    judged = [r for r in rows if r.get("judged")]
    marked = sum(r.get("llm_match") is not None for r in judged)
    return f" The judge marked {marked} of {len(judged)} answers." if judged else ""


def judge_note(config: dict) -> str:
    """Who judged LLM-Match: a separate endpoint, or the endpoint that also answered (a bias)."""
    same = (config.get("judge_base_url"), config.get("judge_model")) == (config.get("llm_base_url"),
                                                                         config.get("llm_model"))
    if config.get("judge_base_url") and not same:
        return f" Judge: {config.get('judge_model') or 'the model'} at {config['judge_base_url']}."
    if config.get("llm_base_url"):
        return (f" Judge: the answering endpoint itself ({config.get('llm_model') or 'its model'} at "
                f"{config['llm_base_url']}; give --judge-base-url for an independent judge).")
    return ""


def eqa_by_kind(rows: list[dict]) -> dict[str, tuple[int, int]]:
    """Right and asked per question kind, yes/no split by the true answer."""
    out: dict[str, list[int]] = {}
    for r in rows:
        if r.get("question_kind"):
            kind = r["question_kind"] if r["question_kind"] != "yes_no" else f"yes/no (truly {r['true_answer']})"
            counts = out.setdefault(kind, [0, 0])
            counts[0] += int(r["truth_match"] == 1.0)
            counts[1] += 1
    return {kind: (right, asked) for kind, (right, asked) in sorted(out.items())}


def report(results: dict) -> str:
    lines = ["# Exploration (HIMM) - SPL per policy, with and without episodic recall", "",
             "Target detection and descriptions: simulator oracles (labelled ablation); success judged on the "
             "simulator's truth; recall: MobileNetV2 image embeddings, ORB + RANSAC place verification, MiniLM "
             "target query; semantic policy: MiniLM similarity of the views' descriptions to the instruction.", "",
             f"Worlds: floor plans {', '.join(results['config']['layouts'])} x seeds "
             f"{', '.join(str(s) for s in results['config']['seeds'])} (sim.floor_plans).", "",
             "| policy | memory | episodes | success | SPL | EQA truth-match | truth-match x SPL | LLM-Match | "
             "LLM-Match x SPL | mean path (m) | mean shortest (m) | tokens/episode | model calls (fallbacks) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for policy, parts in results["by_policy"].items():
        for memory, s in parts.items():
            eqa = " | ".join("-" if s.get(k) is None else f"{s[k]:.3f}" for k in EQA_SCORES)
            lines.append(f"| {policy} | {memory.replace('_', ' ')} | {s['episodes']} | {s['success']:.2f} | "
                         f"{s['spl']:.3f} | {eqa} | {s['path_m']} | {s['shortest_m']} | {s['tokens']} | "
                         f"{s['model_calls']} ({s['fallbacks']}) |")
    if results["config"].get("eqa", True):
        floor = always_baselines(results["episodes"])
        lines += ["", "EQA: each episode is asked its task's question (where the target is, or whether it is in a "
                  "named room; phrasing set: " + results["config"]["eqa_phrasings"] + ") and answers when it ends "
                  "(answerer: " + results["config"].get("answerer", "memory") + "). Truth-match scores the answer on the simulator's truth (1 right, 0 wrong or 'I don't "
                  "know'; a 'no' only with evidence); LLM-Match is OpenEQA's judge ((mark - 1) / 4, with an "
                  "endpoint only; '-' also when the judge gave no mark); x SPL weighs each episode's score by "
                  "its SPL (HIMM's LLM-Match x SPL)." + judge_note(results["config"])
                  + judged_count(results["episodes"])
                  + (f" On the yes/no questions, answering always yes would score {floor['always_yes']:.2f}, "
                     f"always no {floor['always_no']:.2f}." if floor else ""),
                  "", "By question (right / asked): " + ", ".join(
                      f"{kind} {right} / {asked}" for kind, (right, asked) in eqa_by_kind(results["episodes"]).items())
                  + "."]
    lines += ["", "Per floor plan:", "", "| layout | policy | memory | episodes | success | SPL | EQA truth-match | "
              "truth-match x SPL |", "|---|---|---|---|---|---|---|---|"]
    for layout, policies in results["by_layout"].items():
        for policy, parts in policies.items():
            for memory, s in parts.items():
                eqa = " | ".join("-" if s.get(k) is None else f"{s[k]:.3f}" for k in EQA_SCORES[:2])
                lines.append(f"| {layout} | {policy} | {memory} | {s['episodes']} | {s['success']:.2f} | "
                             f"{s['spl']:.3f} | {eqa} |")
    lines += ["", "| run | episodes | success | SPL | mean path (m) | mean shortest (m) |", "|---|---|---|---|---|---|"]
    for key, s in results["summary"].items():
        lines.append(f"| {key} | {s['episodes']} | {s['success']:.2f} | {s['spl']:.3f} | {s['path_m']} | "
                     f"{s['shortest_m']} |")
    lines += ["", "| layout | seed | policy | scenario | recall | target | room | success | path | shortest | SPL | "
              "I_explore | question | answer | right |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["episodes"]:
        answer = " ".join(str(r.get("answer", "")).split()).replace("|", "/")[:90] + (
            f" [place: {r['answer_place']}]" if r.get("answer_place") else "")
        lines.append(f"| {r['layout']} | {r['seed']} | {r['policy']} | {r['scenario']} | {r['recall']} | {r['target']} | "
                     f"{r['room']} | {r['success']} | {r['path_m']} | {r['shortest_m']} | {r['spl']} | "
                     f"{r['i_explore']} | {r.get('question', '')} | {answer} | {r.get('truth_match', '')} |")
    if results.get("rules"):
        lines += ["", f"Rules learned from {len(results['training'])} training episodes (seeds 100+):", ""]
        lines += [f"- {r['kind']} ({r['key']}): if {r['condition']} then {r['action']}" for r in results["rules"]]
    lines += ["", "![success, SPL and EQA per policy and memory](explore.png)", "",
              f"Total time: {results['seconds']} s"]
    return "\n".join(lines) + "\n"


def judge_never_marked(results: dict) -> bool:
    """A judge was asked and gave no usable mark for any answer (a dead or unusable endpoint):
    the LLM-Match columns are empty for the endpoint's sake, not the robot's."""
    judged = [r for r in results["episodes"] if r.get("judged")]
    return bool(judged) and all(r.get("llm_match") is None for r in judged)


def answerer_never_answered(results: dict) -> bool:
    """Every question went unanswered for an error (a dead or unusable endpoint behind the vlm
    answerer): the EQA columns measure the endpoint, not the robot."""
    asked = [r for r in results["episodes"] if r.get("question")]
    return bool(asked) and all(r["answer"].startswith("(error:") for r in asked)


def model_never_decided(results: dict) -> bool:
    """Every mllm decision fell back (a dead or unusable endpoint): the mllm rows are semantic's."""
    calls = [r for r in results["episodes"] if r.get("model_calls")]
    return bool(calls) and all(r["fallbacks"] >= r["model_calls"] for r in calls)


def main_summary(results: dict) -> str:
    out = []
    for policy, parts in results["by_policy"].items():
        for memory, v in parts.items():
            eqa = "" if v.get("truth_match") is None else (
                f"EQA {v['truth_match']:.2f} (x SPL {v['truth_match_spl']:.3f}"
                + ("" if v.get("llm_match") is None
                   else f", LLM-Match {v['llm_match']:.2f} x SPL {v['llm_match_spl']:.3f}")
                + ")  ")
            out.append(f"{policy:>9} {memory:>9}: SPL {v['spl']:.3f}  success {v['success']:.2f}  {eqa}"
                       f"path {v['path_m']} m  ({v['episodes']} episodes"
                       + (f", {v['model_calls']} model calls, {v['fallbacks']} fell back" if v["model_calls"] else "")
                       + ")")
    return "\n".join(out)
