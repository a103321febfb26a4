"""``eval --seeds``: per-type accuracy pooled over several worlds' results (counts, not means of
means), each phrasing set's gap to dev."""
import json

import pytest

from embodied_memory.evaluation.pooled import pool, pooled_report, write_pooled


def run(phrasing, arrival, n_arrival, never_seen=(1.0, 2)):
    return {"planner": "rules", "variant": "psfr", "phrasing": phrasing, "per_category": {
        "arrival": {"n": n_arrival, "accuracy": arrival, "strict_accuracy": arrival / 2},
        "unanswerable/never_seen": {"n": never_seen[1], "accuracy": never_seen[0], "strict_accuracy": never_seen[0]}}}


def test_runs_are_pooled_by_counts_and_compared_with_dev(tmp_path):
    seed0 = {"runs": [run("dev", 1.0, 8), run("evaluation", 0.875, 8),
                      {"planner": "full_context", "variant": "psfr", "phrasing": "dev", "prompt_only": True,
                       "per_category": {}}]}
    seed1 = {"runs": [run("dev", 0.5, 2), run("evaluation", 1.0, 2, never_seen=(0.5, 2))]}
    runs = pool([seed0, seed1])
    assert [(r.planner, r.phrasing) for r in runs] == [("rules", "dev"), ("rules", "evaluation")]   # no prompt-only
    dev, evaluation = runs
    assert dev.accuracy("arrival") == pytest.approx(9 / 10)                  # 8 + 1 of 10, not (1.0 + 0.5) / 2
    assert evaluation.accuracy("arrival") == pytest.approx(9 / 10)
    assert evaluation.split(answerable=False) == pytest.approx(3 / 4)
    assert evaluation.accuracy() == pytest.approx(12 / 14)
    text = pooled_report(runs, [0, 1])
    assert "| arrival | 10 | 0.90 | 0.90 | +0 |" in text
    assert "| unanswerable/never_seen | 4 | 1.00 | 0.75 | +25 |" in text
    assert "evaluation 1/2" in text                                          # arrival within 5 points, never_seen not
    for seed, result in ((0, seed0), (1, seed1)):
        (tmp_path / f"seed{seed}").mkdir()
        (tmp_path / f"seed{seed}" / "results.json").write_text(json.dumps(result))
    assert write_pooled(tmp_path, [0, 1]) == text
    saved = json.loads((tmp_path / "pooled.json").read_text())
    assert saved[1]["accuracy"]["arrival"] == 0.9 and saved[1]["unanswerable"] == 0.75


@pytest.mark.parametrize("argv, says", [
    (["--phrasings", "dev,nosuch"], "--phrasings: unknown nosuch"),
    (["--seeds", "0,x"], "--seeds: comma-separated integers"),
    (["--seeds", "0", "--horizon"], "not with --horizon"),
])
def test_eval_arguments_are_refused_before_anything_is_simulated(tmp_path, argv, says, capsys):
    from embodied_memory.cli import main
    assert main(["eval", "--out", str(tmp_path / "out"), *argv]) != 0
    assert says in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
