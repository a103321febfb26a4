"""``embodied-memory eval``: planners and ablations side by side on a simulated episode.

Library path (one process, the same core the nodes run): the episode bag is ingested once per
memory variant (psfr; uniform; psfr without people memory), the operator names identities,
then every planner answers every question as of its time; answers are scored per category.
Output: ``report.md``, ``results.json`` and PNG plots (accuracy per category; accuracy vs
tokens on a log scale, as HUMEMBR's Fig. 10).

Scoring: position (of a person or an object) within 5 m or at the right waypoint; time and
duration within 5 minutes; binary exact; persons exact set; text ("what did you see in the
kitchen?") by LLM-Match (a judge model, mark >= 4 of 5) when an endpoint is given, else by the
documented keyword match (at least half of the objects named). Object questions need a
describer that names objects: offline only the labelled ``psfr_gt_objects`` ablation has one.
"""
from __future__ import annotations

import contextlib
import json
import logging
import shutil
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .llm_match import JudgeError, llm_match, llm_match_accuracy

log = logging.getLogger(__name__)

MEMORY_VARIANTS = {
    "psfr": {"selection": "psfr", "people": True},
    "uniform": {"selection": "uniform", "people": True},
    "psfr_no_people": {"selection": "psfr", "people": False},
    # labelled ablation: the simulator's ground truth of visible objects appended to each
    # description (what a VLM describer would add); never used by the default pipeline or the demo
    "psfr_gt_objects": {"selection": "psfr", "people": True, "gt_objects": True},
}


@dataclass
class RunResult:
    variant: str
    planner: str
    scores: dict[str, list[bool]] = field(default_factory=dict)
    tokens: list[int] = field(default_factory=list)
    latency_s: list[float] = field(default_factory=list)
    tool_calls: list[int] = field(default_factory=list)
    answers: list[dict] = field(default_factory=list)
    llm_match: list[int] = field(default_factory=list)     # judge marks 1-5 for text answers (with an endpoint)

    @property
    def label(self) -> str:
        return f"{self.planner} / {self.variant}"

    def accuracy(self, category: Optional[str] = None) -> float:
        values = self.scores.get(category, []) if category else [v for vs in self.scores.values() for v in vs]
        return sum(values) / len(values) if values else 0.0

    def summary(self) -> dict:
        return {"variant": self.variant, "planner": self.planner, "accuracy": round(self.accuracy(), 3),
                "per_category": {c: round(self.accuracy(c), 3) for c in self.scores},
                "tokens_median": statistics.median(self.tokens) if self.tokens else 0,
                "tokens_p95": sorted(self.tokens)[int(0.95 * (len(self.tokens) - 1))] if self.tokens else 0,
                "latency_median_s": round(statistics.median(self.latency_s), 4) if self.latency_s else 0.0,
                "tool_calls_median": statistics.median(self.tool_calls) if self.tool_calls else 0,
                "llm_match_text": round(llm_match_accuracy(self.llm_match), 3) if self.llm_match else None}


def ground_truth_objects(truth):
    """Annotator for the labelled ablation: the objects in view at the observation's time."""
    import bisect
    times = [f["t"] for f in truth.frames]

    def annotate(obs) -> None:
        i = bisect.bisect_left(times, obs.stamp)
        near = [j for j in (i - 1, i) if 0 <= j < len(times) and abs(times[j] - obs.stamp) < 0.6]
        if not near:
            return
        objects = sorted(truth.frames[min(near, key=lambda j: abs(times[j] - obs.stamp))].get("objects", {}))
        if objects:
            text = "Objects in view: " + ", ".join(f"a {name}" for name in objects) + "."
            obs.description = f"{obs.description} {text}".strip()
            obs.text_embedding = None          # re-embedded by the store
    return annotate


def _ingest(bag: Path, data: Path, variant: dict, progress: bool, truth=None):
    """A fresh memory for the variant (a rerun into the same directory starts over)."""
    from ..ingest.offline import ingest_bag
    from ..ingest.selection import SelectionParams
    from ..params import StoreParams
    from ..perception.pipeline import Perception, PerceptionParams
    from ..store import open_store
    if data.exists():
        log.info("removing the previous run's memory %s", data)
        shutil.rmtree(data)
    store = open_store(StoreParams(data_dir=str(data)))
    store.warm_up()
    people = {} if variant["people"] else {"person_detector": "none", "face_backend": "none", "reid": "none"}
    perception = Perception(PerceptionParams(data_dir=str(data), **people))
    annotate = ground_truth_objects(truth) if variant.get("gt_objects") else None
    report = ingest_bag(str(bag), store, perception, progress=progress, annotate=annotate,
                        selection=SelectionParams(policy=variant["selection"], segment_s=10.0, frames_per_segment=6))
    perception.close()
    return store, report


NODE_VARIANT_SETTINGS = {   # eval --path nodes: the same memory variants as stack parameter overrides
    "psfr": (), "uniform": ("frame_selector.policy=uniform",),
    "psfr_no_people": ("perception.person_detector=none", "perception.face_backend=none", "perception.reid=none"),
}
NODE_PLANNERS = ("rules", "full_context", "llm")


def run_eval(out_dir: Path, config=None, planners: tuple[str, ...] = ("rules", "text_top_k", "full_context"),
             variants: tuple[str, ...] = tuple(MEMORY_VARIANTS), llm_base_url: str = "", llm_model: str = "",
             per_type: int = 4, progress: bool = True, objects: bool = True, path: str = "library") -> list[RunResult]:
    """``path``: ``library`` (the core in this process) or ``nodes`` (the default stack launched as
    processes, the bag replayed into it, every question through the Ask service)."""
    from ..sim.episode import EpisodeConfig, GroundTruth, cached_episode
    from ..sim.questions import generate_questions

    planners = tuple(planners) + (("llm",) if llm_base_url and "llm" not in planners else ())
    if path not in ("library", "nodes"):
        raise ValueError(f"path: unknown {path!r} (library | nodes)")
    if path == "nodes":
        bad = [v for v in variants if v not in NODE_VARIANT_SETTINGS] + [p for p in planners if p not in NODE_PLANNERS]
        if bad:
            raise ValueError(f"--path nodes cannot run {', '.join(bad)} (library-only: the text-only baseline and "
                             f"the ground-truth object ablation); nodes run variants "
                             f"{', '.join(NODE_VARIANT_SETTINGS)} and planners {', '.join(NODE_PLANNERS)}")
    config = config or EpisodeConfig(days=1, people=3)
    out_dir.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    episode = cached_episode(config, progress)
    timings["simulate_s"] = time.perf_counter() - start
    truth = GroundTruth.load(episode / "ground_truth.json")
    questions = generate_questions(truth, seed=config.seed, per_type=per_type, objects=objects)
    judge = None
    if llm_base_url:
        from ..llm.chat_client import ChatClient, LLMConfig
        judge = ChatClient(LLMConfig(base_url=llm_base_url, model=llm_model, max_tokens=8))
    results: list[RunResult] = []
    for variant in variants:
        start = time.perf_counter()
        with _memory(path, episode, truth, out_dir / f"memory_{variant}", variant, progress, llm_base_url,
                     llm_model) as (ask, names_of, keyframes):
            timings[f"ingest_{variant}_s"] = time.perf_counter() - start
            for planner in planners:
                start = time.perf_counter()
                results.append(_answer_all(RunResult(variant, planner), questions,
                                           lambda q: ask(q, planner), names_of, judge))
                timings[f"answer_{planner}_{variant}_s"] = time.perf_counter() - start
            timings[f"keyframes_{variant}"] = keyframes
    write_report(out_dir, results, questions, timings, config)
    return results


@contextlib.contextmanager
def _memory(path: str, episode: Path, truth, data: Path, variant: str, progress: bool, llm_base_url: str,
            llm_model: str):
    """(ask(question, planner) -> answer dict, identity names, keyframes stored) for one variant."""
    if path == "nodes":
        from ..sim.demo import StackRun
        if data.exists():
            shutil.rmtree(data)
        overrides = NODE_VARIANT_SETTINGS[variant] + ((f"query_agent.llm_base_url={llm_base_url}",
                                                        f"query_agent.llm_model={llm_model}") if llm_base_url else ())
        with StackRun(episode, truth, data, overrides, progress, label=f"eval {variant}") as run:
            yield ((lambda q, planner: json.loads(run.ask(q.question, q.asked_at, planner).json or "{}")),
                   run.names_of, run.stats.observations)
        return
    from ..agent.query_agent import AgentParams, QueryAgent
    from ..agent.tools import StoreMemoryClient
    from ..sim.naming import label_identities
    from .text_only import TextOnlyPlanner
    store, report = _ingest(episode / "bag", data, MEMORY_VARIANTS[variant], progress, truth)
    try:
        names_of = label_identities(lambda tool, args: store.call_tool(tool, args),
                                    lambda ident, display: store.name_identity(ident, display), truth)
        agent = QueryAgent(StoreMemoryClient(store), AgentParams(planner="rules", llm_base_url=llm_base_url,
                                                                 llm_model=llm_model),
                           extra_planners={"text_top_k": TextOnlyPlanner()})
        yield (lambda q, planner: agent.ask(q.question, as_of=q.asked_at, planner=planner).to_dict()), names_of, \
            report.keyframes
    finally:
        store.close()


def _answer_all(result: RunResult, questions, ask, names_of: dict, judge) -> RunResult:
    from ..llm.chat_client import LLMError
    from ..sim.questions import score
    for q in questions:
        ans = ask(q)
        ok, compared = score(q, ans, names_of)
        if q.type == "text" and judge is not None:
            try:
                mark = llm_match(judge, q.question, ", ".join(q.answer["objects"]), ans.get("text", ""))
                result.llm_match.append(mark)
                ok, compared = mark >= 4, f"LLM-Match {mark}/5"
            except (JudgeError, LLMError) as exc:
                log.warning("LLM-Match judge failed (%s): keyword match kept", exc)
        result.scores.setdefault(q.type, []).append(ok)
        result.tokens.append(ans.get("tokens_in", 0) + ans.get("tokens_out", 0))
        result.latency_s.append(ans.get("latency_s", 0.0))
        result.tool_calls.append(ans.get("tool_calls", 0))
        result.answers.append({"question": q.question, "type": q.type, "truth": q.answer,
                               "answer": ans.get("text") or ans.get("error", ""), "correct": ok, "compared": compared})
    return result


def write_report(out_dir: Path, results: list[RunResult], questions, timings: dict, config) -> None:
    from dataclasses import asdict
    categories = sorted({c for r in results for c in r.scores})
    (out_dir / "results.json").write_text(json.dumps({
        "config": asdict(config), "questions": len(questions), "timings": timings,
        "runs": [r.summary() for r in results], "answers": {r.label: r.answers for r in results}}, indent=2))
    lines = ["# Evaluation report", "",
             f"Simulated office: {config.days} day(s), {config.people} people, patrols at {config.patrol_hours} h; "
             f"{len(questions)} questions ({', '.join(f'{c}: {sum(1 for q in questions if q.type == c)}' for c in categories)}).",
             "Scoring: position within 5 m or the right waypoint; time and duration within 5 min; binary exact; "
             "persons exact set; text by LLM-Match (mark >= 4/5) with an endpoint, else keyword match (>= half of "
             "the objects named). Offline there is no judge model and no VLM: descriptions come from the detectors; "
             "`psfr_gt_objects` is a LABELLED ABLATION whose descriptions add the simulator's ground truth of the "
             "objects in view (what a VLM describer would add).",
             "", "| planner / memory | overall | " + " | ".join(categories) + " | tokens median | tokens p95 | "
             "latency median (s) | tool calls |", "|---" * (len(categories) + 6) + "|"]
    for r in results:
        s = r.summary()
        lines.append(f"| {r.label} | {s['accuracy']:.2f} | " + " | ".join(f"{r.accuracy(c):.2f}" for c in categories)
                     + f" | {s['tokens_median']} | {s['tokens_p95']} | {s['latency_median_s']} | {s['tool_calls_median']} |")
    judged = [r for r in results if r.llm_match]
    if judged:
        lines += ["", "LLM-Match on text questions (OpenEQA aggregate): " + ", ".join(
            f"{r.label} {llm_match_accuracy(r.llm_match):.2f}" for r in judged)]
    lines += ["", "Time per stage: " + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}"
                                                 for k, v in timings.items()), "",
              "![accuracy per category](accuracy_per_category.png)", "![accuracy vs tokens](accuracy_vs_tokens.png)"]
    (out_dir / "report.md").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed: no plots")
        return
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / max(len(results), 1)
    for i, r in enumerate(results):
        ax.bar([c + i * width for c in range(len(categories))], [r.accuracy(c) for c in categories], width,
               label=r.label)
    ax.set_xticks([c + 0.4 - width / 2 for c in range(len(categories))], categories)
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / "accuracy_per_category.png", dpi=100)
    fig, ax = plt.subplots(figsize=(6, 4))
    for r in results:
        ax.scatter(max(r.summary()["tokens_median"], 1), r.accuracy(), label=r.label)
    ax.set_xscale("log")
    ax.set_xlabel("tokens per question (median, log; 1 = no model)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / "accuracy_vs_tokens.png", dpi=100)
    plt.close("all")
