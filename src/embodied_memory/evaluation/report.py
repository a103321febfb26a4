"""The evaluation report: ``report.md``, ``results.json`` and plots, from the runs of
``evaluation.runner``.

Per run (planner x memory variant): accuracy per question type at HUMEMBR's thresholds and at
tight ones, mean / median errors (position m, time and duration min) as LVMem reports them,
precision / recall for person-set questions; identity quality per memory variant; error
histograms; the failure list (question, answer, truth, the tool calls made); the configuration.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

from ..sim import scoring as sc
from .llm_match import llm_match_accuracy

log = logging.getLogger(__name__)

THRESHOLDS = (f"Scoring (`sim/scoring.py`): **accuracy** at HUMEMBR's thresholds (position within {sc.POSITION_M:g} m; "
              f"time and duration within {sc.TIME_MIN:g} / {sc.DURATION_MIN:g} min; sets, yes/no, counts and day lists "
              f"exact) and our usual-lunch-time threshold ({sc.HABIT_TIME_MIN:g} min); **strict** at tight ones "
              f"({sc.POSITION_STRICT_M:g} m; {sc.TIME_STRICT_MIN:g} min; duration within "
              f"{sc.DURATION_STRICT_SHARE:.0%} or {sc.DURATION_STRICT_MIN:g} min; lunch time within "
              f"{sc.HABIT_TIME_STRICT_MIN:g} min). Unanswerable questions (by reason: absent that day, activity "
              "unobserved, name never seen) count as right only for an explicit \"I don't know\" / \"not seen\"; an "
              "answerable question answered that way is wrong. Errors and precision are over the answered questions "
              "(column `answered`), recall over all.")
HIDDEN_TRUTH_KEYS = ("all_people", "all_rooms")   # scoring context in a question's answer, not its truth
MAX_FAILURES = 40        # per run in report.md (results.json has them all)


def _fmt(value, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _run_table(results, categories: list[str]) -> list[str]:
    lines = ["| planner / memory | overall | strict | answerable | unanswerable | " + " | ".join(categories)
             + " | tokens median | tokens p95 | latency median (s) | tool calls |", "|---" * (len(categories) + 9) + "|"]
    for r in results:
        s = r.summary()
        if r.prompt_only:      # no endpoint: nothing answered, only the prompt it would send is measured
            lines.append(f"| {r.label} (no endpoint: prompt size only) | - | - | - | - | "
                         + " | ".join("-" for _ in categories)
                         + f" | {s['tokens_median']} | {s['tokens_p95']} | - | - |")
            continue
        lines.append(f"| {r.label} | {s['accuracy']:.2f} | {s['strict_accuracy']:.2f} | "
                     f"{s['answerable_accuracy']:.2f} | {s['unanswerable_accuracy']:.2f} | "
                     + " | ".join(_fmt(s["per_category"].get(c, {}).get("accuracy")) for c in categories)
                     + f" | {s['tokens_median']} | {s['tokens_p95']} | {s['latency_median_s']} |"
                       f" {s['tool_calls_median']} |")
    return lines


def _detail_table(run) -> list[str]:
    lines = [f"**{run.label}**", "", "| type | n | answered | accuracy | strict | mean error | median error | "
             "precision | recall |", "|---|---|---|---|---|---|---|---|---|"]
    for kind, s in sorted(run.summary()["per_category"].items()):
        unit = f" {s['unit']}" if s.get("unit") else ""
        lines.append(f"| {kind} | {s['n']} | {s['answered']} | {_fmt(s['accuracy'])} | {_fmt(s['strict_accuracy'])} | "
                     f"{_fmt(s.get('mean_error'), 1)}{unit if s.get('mean_error') is not None else ''} | "
                     f"{_fmt(s.get('median_error'), 1)}{unit if s.get('median_error') is not None else ''} | "
                     f"{_fmt(s.get('mean_precision'))} | {_fmt(s.get('mean_recall'))} |")
    return lines + [""]


def _identity_lines(identity: dict) -> list[str]:
    if not identity:
        return []
    lines = ["## Identities (measured against the simulator, never given to the memory)", "",
             "Clustering: the identities perception built; after naming: once the operator's names merged "
             "identities named alike.", "",
             "| memory | stage | people seen | identities | ids per person | purity | pairwise precision |"
             " pairwise recall | named / named right |", "|---|---|---|---|---|---|---|---|---|"]
    for variant, stages in identity.items():
        for stage in ("clustering", "after_naming"):
            m = stages.get(stage)
            if not m:
                continue
            lines.append(f"| {variant} | {stage.replace('_', ' ')} | {m['people']} | {m['identities']} | "
                         f"{_fmt(m['ids_per_person'])} | {_fmt(m['purity'], 3)} | {_fmt(m['pairwise_precision'], 3)} |"
                         f" {_fmt(m['pairwise_recall'], 3)} | {m['named']} / {m['named_correctly']} |")
        for day, m in (stages.get("after_naming") or {}).get("per_day", {}).items():
            lines.append(f"| {variant} | day {day} | {m['people']} | {m['identities']} | {_fmt(m['ids_per_person'])} | "
                         f"{_fmt(m['purity'], 3)} | {_fmt(m['pairwise_precision'], 3)} | "
                         f"{_fmt(m['pairwise_recall'], 3)} | |")
        never = (stages.get("after_naming") or {}).get("never_identified")
        if never is not None:
            lines.append(f"| {variant} | never identified (in view in >= 10 keyframes) | {len(never)} | | | | | | "
                         f"{', '.join(never) or '-'} |")
        op = stages.get("naming")
        if op:
            lines.append(f"| {variant} | {op['mode']} | | | | | | | reviewed {op['reviewed']} of {op['identities']}, "
                         f"{op['images_looked_at']} images looked at |")
    detection = {variant: stages["detection"] for variant, stages in identity.items() if stages.get("detection")}
    if detection:
        bands = list(next(iter(detection.values())))
        lines += ["", "Person detection recall by distance from the robot: people the simulator counts as seen in "
                  "a keyframe that a stored sighting spans (detected / seen).", "",
                  "| memory | " + " | ".join(bands) + " |", "|---" * (len(bands) + 1) + "|"]
        for variant, by_band in detection.items():
            lines.append(f"| {variant} | " + " | ".join(
                f"{_fmt(m['recall'])} ({m['detected']}/{m['seen']})" for m in by_band.values()) + " |")
    return lines + [""]


def _failure_lines(results) -> list[str]:
    lines = ["## Failures (first per run; all in results.json)", ""]
    for r in results:
        wrong = [a for a in r.answers if not a["correct"]]
        if not wrong or r.prompt_only:
            continue
        lines += [f"**{r.label}**: {len(wrong)} of {len(r.answers)} wrong", "",
                  "| type | question | answer | truth | compared | tool calls |", "|---|---|---|---|---|---|"]
        for a in wrong[:MAX_FAILURES]:
            calls = ", ".join(a.get("calls", []))[:160] or "-"
            truth = {k: v for k, v in a["truth"].items() if k not in HIDDEN_TRUTH_KEYS}
            shown = str(a["answer"])[:100] + "".join(f" [{k}: {v}]" for k, v in a.get("fields", {}).items()
                                                   if k in ("time_iso", "position", "duration_minutes", "persons",
                                                            "binary", "waypoint"))
            lines.append(f"| {a['type']} | {a['question']} | {shown[:200].replace('|', '/')} | "
                         f"{json.dumps(truth)[:100].replace('|', '/')} | {a['compared']} | {calls} |")
        lines.append("")
    return lines


def write_report(out_dir: Path, results, questions, timings: dict, config: dict, identity: dict) -> None:
    categories = sorted({c for r in results for c in r.scores})
    counts = ", ".join(f"{c}: {sum(1 for q in questions if sc.category(q) == c)}" for c in categories)
    (out_dir / "results.json").write_text(json.dumps({
        "config": config, "questions": len(questions), "timings": timings, "identities": identity,
        "runs": [r.summary() for r in results], "answers": {r.label: r.answers for r in results}}, indent=2))
    lines = ["# Evaluation report", "", f"World: {config.get('world_description', '')}",
             f"{len(questions)} questions ({counts}); phrasings: {', '.join(config.get('phrasings', []))} "
             "(a row without a phrasing set is on the evaluation set).",
             "", THRESHOLDS,
             "Offline there is no judge model and no VLM: descriptions come from the detectors; "
             "`psfr_gt_objects` is a LABELLED ABLATION whose descriptions add the simulator's ground truth of the "
             "objects in view (what a VLM describer would add); `psfr_gt_people` is a LABELLED ABLATION whose people "
             "come from the simulator (who is in view, named), not from perception: the planner on a perfect people "
             "memory. Text questions: LLM-Match (mark >= 4/5) with an "
             "endpoint, else keyword match (>= half of the objects named).", "",
             "## Accuracy per type (HUMEMBR thresholds)", "", *_run_table(results, categories), "",
             "## Per type: strict accuracy, errors, precision / recall", ""]
    for r in results:
        if not r.prompt_only:
            lines += _detail_table(r)
    judged = [r for r in results if r.llm_match]
    if judged:
        lines += ["LLM-Match on text questions (OpenEQA aggregate): " + ", ".join(
            f"{r.label} {llm_match_accuracy(r.llm_match):.2f}" for r in judged), ""]
    lines += _identity_lines(identity)
    lines += _failure_lines(results)
    lines += ["## Configuration", "", "```json", json.dumps(config, indent=1, default=str), "```", "",
              "Time per stage (s): " + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}"
                                                 for k, v in timings.items()), "",
              "![accuracy per category](accuracy_per_category.png)", "![accuracy vs tokens](accuracy_vs_tokens.png)",
              "![errors](error_histograms.png)"]
    (out_dir / "report.md").write_text("\n".join(lines) + "\n")
    _plots(out_dir, results, categories)


def _plots(out_dir: Path, results, categories: list[str]) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed: no plots")
        return
    fig, ax = plt.subplots(figsize=(max(9, len(categories) * 0.7), 4))
    answered = [r for r in results if not r.prompt_only]
    width = 0.8 / max(len(answered), 1)
    for i, r in enumerate(answered):
        ax.bar([c + i * width for c in range(len(categories))], [r.accuracy(c) for c in categories], width,
               label=r.label)
    ax.set_xticks([c + 0.4 - width / 2 for c in range(len(categories))], categories, rotation=45, ha="right")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / "accuracy_per_category.png", dpi=100)
    fig, ax = plt.subplots(figsize=(6, 4))
    for r in answered:
        ax.scatter(max(r.summary()["tokens_median"], 1), r.accuracy(), label=r.label)
    ax.set_xscale("log")
    ax.set_xlabel("tokens per question (median, log; 1 = no model)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / "accuracy_vs_tokens.png", dpi=100)
    units = {"position": "m", "time": "min", "duration": "min"}
    fig, axes = plt.subplots(1, len(units), figsize=(12, 3.5))
    for ax, (group, unit) in zip(axes, units.items()):
        for r in answered:
            errors = r.errors(group)
            if errors:
                ax.hist(errors, bins=20, alpha=0.5, label=r.label)
        ax.set_title(f"{group} error ({unit})")
        ax.set_yscale("log")
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out_dir / "error_histograms.png", dpi=100)
    plt.close("all")

