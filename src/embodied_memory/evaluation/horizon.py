"""Long horizon: accuracy and tokens as the memory grows from 1 to N simulated days.

One memory (psfr, the default) holds the whole episode; after each day d, questions about the
last week up to day d are asked as of the end of day d (every tool sees the memory as of the
question time only, so day d's answers come from d days of memory). Questions are generated
from the ground truth cut at the end of day d, in the evaluation phrasing set; each day draws a
new sample. One leak is stated, not hidden: identities are clustered and named over the whole
episode before any question (the operator names once), so early days profit from later
sightings of a person. Output: ``horizon.md``,
``horizon.json`` and ``horizon.png`` (accuracy and median tokens per question vs days).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import statistics
from pathlib import Path

log = logging.getLogger(__name__)

DAY_S = 86400.0


def truth_until(truth, day: int):
    """The ground truth of the first ``day`` days (1-based)."""
    end = truth.day_starts[day - 1] + DAY_S
    return dataclasses.replace(
        truth, frames=[f for f in truth.frames if f["t"] < end],
        stays=[s for s in truth.stays if s["start"] < end], patrols=[p for p in truth.patrols if p[0] < end],
        day_starts=truth.day_starts[:day], objects=truth.objects[:day])


def run_horizon(out_dir: Path, config, planners: tuple[str, ...] = ("rules", "text_top_k", "full_context"),
                per_type: int = 2, llm_base_url: str = "", llm_model: str = "", progress: bool = True) -> list[dict]:
    from ..sim.episode import GroundTruth, cached_episode
    from ..sim.questions_v2 import generate_questions
    from .runner import RunResult, _answer_all, _memory
    out_dir.mkdir(parents=True, exist_ok=True)
    episode = cached_episode(config, progress)
    truth = GroundTruth.load(episode / "ground_truth.json")
    rows = []
    with _memory("library", episode, truth, out_dir / "memory_psfr", "psfr", progress, llm_base_url, llm_model,
                 "operator") as memory:
        for day in range(1, len(truth.day_starts) + 1):
            questions = generate_questions(truth_until(truth, day), seed=config.seed, per_type=per_type,
                                           phrasing_set="evaluation")
            for planner in planners:
                run = _answer_all(RunResult("psfr", planner), questions, planner, memory, None)
                rows.append({"days": day, "planner": planner, "questions": len(questions),
                             "accuracy": round(run.accuracy(), 3), "strict_accuracy": round(run.strict_accuracy(), 3),
                             "tokens_median": statistics.median(run.tokens) if run.tokens else 0})
                log.info("horizon: %d day(s), %s: %.2f", day, planner, run.accuracy())
    (out_dir / "horizon.json").write_text(json.dumps({"config": dataclasses.asdict(config), "rows": rows}, indent=1))
    lines = ["# Long horizon: accuracy and tokens as the memory grows", "",
             "| days | planner | questions | accuracy | strict | tokens median |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['days']} | {r['planner']} | {r['questions']} | {r['accuracy']:.2f} | {r['strict_accuracy']:.2f} |"
              f" {r['tokens_median']} |" for r in rows]
    (out_dir / "horizon.md").write_text("\n".join(lines + ["", "![horizon](horizon.png)"]) + "\n")
    _plot(out_dir, rows, planners)
    return rows


def _plot(out_dir: Path, rows: list[dict], planners) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, (acc, tok) = plt.subplots(1, 2, figsize=(10, 3.5))
    for planner in planners:
        mine = [r for r in rows if r["planner"] == planner]
        acc.plot([r["days"] for r in mine], [r["accuracy"] for r in mine], marker="o", label=planner)
        tok.plot([r["days"] for r in mine], [max(r["tokens_median"], 1) for r in mine], marker="o", label=planner)
    acc.set_xlabel("days in memory")
    acc.set_ylabel("accuracy")
    acc.set_ylim(0, 1)
    tok.set_xlabel("days in memory")
    tok.set_ylabel("tokens per question (median; 1 = no model)")
    tok.set_yscale("log")
    acc.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / "horizon.png", dpi=100)
    plt.close("all")
