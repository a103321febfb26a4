"""The evaluation runner on a small generated benchmark, with floors set from measurement:
rules / psfr answered every people question on this office day when written (floor 0.75),
removing the people memory must cost person questions, and object questions (objects move
between days) are answered only with object descriptions (the labelled ground-truth ablation:
0.8-1.0 when written, floor 0.6)."""
import json

import pytest

from embodied_memory.evaluation.llm_match import JudgeError, llm_match, llm_match_accuracy
from embodied_memory.evaluation.runner import run_eval
from embodied_memory.llm.chat_client import ChatClient, LLMConfig
from embodied_memory.sim.episode import EpisodeConfig
from embodied_memory.sim.questions import OBJECT_TYPES

from scripted_llm import ScriptedLLM, content

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One simulated day shared by the library and the nodes runs."""
    import os
    before = os.environ.get("EMBODIED_MEMORY_CACHE")
    os.environ["EMBODIED_MEMORY_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if before is None:
        del os.environ["EMBODIED_MEMORY_CACHE"]
    else:
        os.environ["EMBODIED_MEMORY_CACHE"] = before


def test_eval_runner_scores_planners_and_ablations(tmp_path, cache):
    results = run_eval(tmp_path / "out", EpisodeConfig(seed=0, days=1, people=2),
                       planners=("rules", "text_top_k", "full_context"),
                       variants=("psfr", "psfr_no_people", "psfr_gt_objects"), per_type=2, progress=False)
    by = {(r.planner, r.variant): r for r in results}
    rules = by[("rules", "psfr")]

    def accuracy(run, object_questions):
        values = [v for c, vs in run.scores.items() if (c in OBJECT_TYPES) == object_questions for v in vs]
        return sum(values) / len(values)
    print({r.label: r.summary()["per_category"] for r in results})
    assert sum(len(v) for c, v in rules.scores.items() if c not in OBJECT_TYPES) >= 10
    assert sum(len(v) for c, v in rules.scores.items() if c in OBJECT_TYPES) >= 4
    assert accuracy(rules, object_questions=False) >= 0.75
    assert rules.accuracy("persons") > by[("rules", "psfr_no_people")].accuracy("persons")
    gt_objects = by[("rules", "psfr_gt_objects")]
    assert accuracy(gt_objects, object_questions=True) >= 0.6
    assert accuracy(gt_objects, object_questions=True) > accuracy(rules, object_questions=True)
    assert by[("full_context", "psfr")].summary()["tokens_median"] > 1000   # estimated prompt size, no endpoint
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| rules / psfr |" in report and "text_top_k / psfr_no_people" in report
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert len(data["runs"]) == 9 and data["timings"]["keyframes_psfr"] > 100
    assert "LABELLED ABLATION" in report
    assert (tmp_path / "out" / "accuracy_vs_tokens.png").stat().st_size > 5000


def test_eval_through_the_real_nodes(tmp_path, cache):
    with pytest.raises(ValueError, match="library-only"):
        run_eval(tmp_path / "bad", EpisodeConfig(seed=0, days=1, people=2), planners=("text_top_k",), path="nodes")
    results = run_eval(tmp_path / "out", EpisodeConfig(seed=0, days=1, people=2), planners=("rules",),
                       variants=("psfr",), per_type=2, progress=False, objects=False, path="nodes")
    (rules,) = results
    print(rules.summary())
    assert sum(len(v) for v in rules.scores.values()) >= 10 and rules.accuracy() >= 0.75
    assert "| rules / psfr |" in (tmp_path / "out" / "report.md").read_text()


def test_llm_match_judge_protocol():
    with ScriptedLLM([content("4"), content("Mark: 2 - partly right"), content("excellent!")]) as llm:
        judge = ChatClient(LLMConfig(base_url=llm.base_url, model="judge"))
        assert llm_match(judge, "What was in the kitchen?", "red box", "A red box.") == 4
        assert llm_match(judge, "What was in the kitchen?", "red box", "A box.") == 2
        with pytest.raises(JudgeError):
            llm_match(judge, "What was in the kitchen?", "red box", "?")
        prompt = llm.requests[0]["messages"][0]["content"]
    assert "Answer: red box" in prompt and "Response: A red box." in prompt
    assert llm_match_accuracy([5, 1, 3]) == pytest.approx(0.5)
