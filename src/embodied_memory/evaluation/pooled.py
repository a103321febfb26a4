"""Per-type accuracy pooled over several worlds (``eval --seeds``): one building day offers at
most 8 arrivals, so one question is 12.5 points of a type's accuracy; three seeds make it about
4.  Pools each run's ``results.json`` (per planner, memory and phrasing set: correct answers
over questions, per type) and writes ``pooled.md`` with each phrasing set beside ``dev`` (the
generator's canonical wording) and the gap between them."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..sim import scoring

CANONICAL = "dev"   # the phrasing set every other one is compared with


@dataclass
class Pooled:
    """Correct / strict / asked counts per question type for one planner, memory and phrasing set."""
    planner: str
    variant: str
    phrasing: str
    correct: dict[str, float] = field(default_factory=dict)
    strict: dict[str, float] = field(default_factory=dict)
    n: dict[str, int] = field(default_factory=dict)

    def add(self, per_category: dict) -> None:
        for category, row in per_category.items():
            self.n[category] = self.n.get(category, 0) + row["n"]
            self.correct[category] = self.correct.get(category, 0.0) + round(row["accuracy"] * row["n"])
            self.strict[category] = self.strict.get(category, 0.0) + round(row["strict_accuracy"] * row["n"])

    def accuracy(self, category: str = "", strict: bool = False) -> float:
        counts = self.strict if strict else self.correct
        keys = [category] if category else list(self.n)
        n = sum(self.n.get(k, 0) for k in keys)
        return sum(counts.get(k, 0.0) for k in keys) / n if n else 0.0

    def split(self, answerable: bool) -> float:
        keys = [k for k in self.n if k.startswith(scoring.UNANSWERABLE) != answerable]
        n = sum(self.n[k] for k in keys)
        return sum(self.correct.get(k, 0.0) for k in keys) / n if n else 0.0


def pool(results: list[dict]) -> list[Pooled]:
    """Runs of several ``results.json`` (one per seed) pooled by (planner, variant, phrasing)."""
    pooled: dict[tuple[str, str, str], Pooled] = {}
    for result in results:
        for run in result["runs"]:
            if run.get("prompt_only"):
                continue
            key = (run["planner"], run["variant"], run["phrasing"])
            pooled.setdefault(key, Pooled(*key)).add(run["per_category"])
    return list(pooled.values())


def _cell(value: float) -> str:
    return f"{value:.2f}"


def pooled_report(runs: list[Pooled], seeds: list[int]) -> str:
    """Markdown: per memory, one table of per-type accuracy per phrasing set, each non-dev set's
    gap to dev in points, and the overall / strict / unanswerable rows."""
    lines = [f"# Pooled over seeds {', '.join(map(str, seeds))}", "",
             "Accuracy per question type, all seeds' questions together (n: questions per phrasing set; "
             "each seed's own report is seed<N>/report.md, with the world and configuration; "
             "`psfr_gt_people` is the labelled ablation whose people come from the simulator). "
             f"`gap`: points behind `{CANONICAL}`, the phrasings the planner's bank and tests may use.", ""]
    for planner, variant in dict.fromkeys((r.planner, r.variant) for r in runs):
        sets = [r for r in runs if (r.planner, r.variant) == (planner, variant)]
        canonical = next((r for r in sets if r.phrasing == CANONICAL), None)
        others = [r for r in sets if r is not canonical]
        header = ["type", "n"] + [r.phrasing for r in sets] + ([f"gap {r.phrasing}" for r in others] if canonical else [])
        lines += [f"## {planner} / {variant}", "", "| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
        categories = sorted({c for r in sets for c in r.n})
        for c in categories:
            gaps = ([f"{100 * (canonical.accuracy(c) - r.accuracy(c)):+.0f}" if c in r.n and c in canonical.n else "-"
                     for r in others] if canonical else [])
            lines.append(f"| {c} | {max(r.n.get(c, 0) for r in sets)} | "
                         + " | ".join(_cell(r.accuracy(c)) if c in r.n else "-" for r in sets)
                         + "".join(f" | {g}" for g in gaps) + " |")
        gap_cells = [""] * len(others) if canonical else []
        for label, n, cells in (("**overall**", str(sum(max(r.n.get(c, 0) for r in sets) for c in categories)),
                                 [f"**{_cell(r.accuracy())}**" for r in sets]),
                                ("strict", "", [_cell(r.accuracy(strict=True)) for r in sets]),
                                ("unanswerable", "", [_cell(r.split(False)) for r in sets])):
            lines.append("| " + " | ".join([label, n] + cells + gap_cells) + " |")
        if canonical:
            within = {r.phrasing: sum(round(100 * (canonical.accuracy(c) - r.accuracy(c))) <= 5
                                      for c in categories if c in r.n) for r in others}
            lines += ["", "Types within 5 points of dev (or ahead of it): "
                      + ", ".join(f"{p} {k}/{len(categories)}" for p, k in within.items())]
        lines.append("")
    return "\n".join(lines)


def write_pooled(out_dir: Path, seeds: list[int]) -> str:
    """Pool ``out_dir/seed<N>/results.json`` for ``seeds`` into ``out_dir/pooled.md`` (+ json)."""
    results = [json.loads((out_dir / f"seed{s}" / "results.json").read_text()) for s in seeds]
    runs = pool(results)
    text = pooled_report(runs, seeds)
    (out_dir / "pooled.md").write_text(text)
    (out_dir / "pooled.json").write_text(json.dumps(
        [{"planner": r.planner, "variant": r.variant, "phrasing": r.phrasing, "n": r.n,
          "accuracy": {c: round(r.accuracy(c), 4) for c in r.n}, "overall": round(r.accuracy(), 4),
          "strict": round(r.accuracy(strict=True), 4), "unanswerable": round(r.split(False), 4)} for r in runs],
        indent=1))
    return text
