"""The evaluation runner on a small generated benchmark, with floors set from measurement:
rules / psfr answered 12 of 12 on this office day when written (floor 0.75), and removing the
people memory must cost person questions."""
import json

import pytest

from embodied_memory.evaluation.runner import run_eval
from embodied_memory.sim.episode import EpisodeConfig

pytestmark = pytest.mark.integration


def test_eval_runner_scores_planners_and_ablations(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBODIED_MEMORY_CACHE", str(tmp_path / "cache"))
    results = run_eval(tmp_path / "out", EpisodeConfig(seed=0, days=1, people=2),
                       planners=("rules", "text_top_k", "full_context"), variants=("psfr", "psfr_no_people"),
                       per_type=2, progress=False)
    by = {(r.planner, r.variant): r for r in results}
    rules = by[("rules", "psfr")]
    print({r.label: r.summary()["accuracy"] for r in results})
    assert sum(len(v) for v in rules.scores.values()) >= 10
    assert rules.accuracy() >= 0.75
    assert rules.accuracy("persons") > by[("rules", "psfr_no_people")].accuracy("persons")
    assert by[("full_context", "psfr")].summary()["tokens_median"] > 1000   # estimated prompt size, no endpoint
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| rules / psfr |" in report and "text_top_k / psfr_no_people" in report
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert len(data["runs"]) == 6 and data["timings"]["keyframes_psfr"] > 100
    assert (tmp_path / "out" / "accuracy_vs_tokens.png").stat().st_size > 5000
