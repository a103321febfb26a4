"""HIMM's claims on the simulated office: a second episode with episodic recall reaches the target
with a shorter path than without (SPL over several seeds); a moved target is still found; the
semantic policy finds targets on a first visit with a shorter path than the nearest frontier; each
episode answers its question (EQA) from what it saw."""
import json

import cv2
import pytest

from embodied_memory.sim.explore_benchmark import ExploreBenchConfig, run_explore_benchmark

SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("explore_bench")
    # dev wording: the evaluation phrasings are asked by the benchmark only, never by tests
    return out, run_explore_benchmark(ExploreBenchConfig(seeds=SEEDS, layouts=("office",), eqa_phrasings="dev"), out,
                                      progress=False)


@pytest.mark.parametrize("policy", ["nearest", "semantic"])
def test_recall_shortens_the_second_episode(results, policy):
    _, res = results
    s = res["summary"]
    assert s[f"{policy}/same/episodic"]["success"] == 1.0 and s[f"{policy}/same/none"]["success"] == 1.0
    assert s[f"{policy}/same/episodic"]["spl"] >= s[f"{policy}/same/none"]["spl"] + 0.2
    for seed in SEEDS:
        rows = {r["recall"]: r for r in res["episodes"]
                if r["seed"] == seed and r["scenario"] == "same" and r["policy"] == policy}
        assert rows[True]["i_explore"] is False                     # the first episode saw the target
        assert rows[True]["path_m"] < rows[False]["path_m"]
        assert rows[True]["states"][-3:] == ["target_verification", "target_approaching", "check_ready_to_answer"]


def test_the_semantic_policy_beats_nearest_on_a_first_visit(results):
    _, res = results
    nearest, semantic = res["by_policy"]["nearest"]["none"], res["by_policy"]["semantic"]["none"]
    assert nearest["episodes"] == semantic["episodes"] == 3 * len(SEEDS)
    assert semantic["success"] == 1.0 and semantic["spl"] > nearest["spl"] + 0.1
    assert semantic["path_m"] < nearest["path_m"]


def test_a_moved_target_is_found_although_the_memory_is_stale(results):
    _, res = results
    moved = [r for r in res["episodes"] if r["scenario"] == "moved" and r["recall"]]
    assert len(moved) == 2 * len(SEEDS) and all(r["success"] for r in moved)
    assert all(r["i_explore"] is True and "moved" in r["recall_reason"] for r in moved)


def test_the_report_and_maps_are_written(results):
    out, res = results
    report = (out / "report.md").read_text()
    assert "| semantic/same/episodic |" in report and "| nearest | none | 9 |" in report
    assert set(res["by_policy"]["semantic"]) == {"none", "episodic"}     # no rules learned: no semantic rows
    assert json.loads((out / "results.json").read_text())["summary"] == res["summary"]
    image = cv2.imread(str(out / "maps" / "office-s0-semantic-B-same-episodic.png"))
    assert image is not None and image.shape[0] > 100
    plot = cv2.imread(str(out / "explore.png"))
    assert plot is not None and plot.shape[1] >= 600 and "![success, SPL and EQA" in report


def test_every_episode_answers_its_question_from_what_it_saw(results):
    out, res = results
    rows = res["episodes"]
    assert {r["question_kind"] for r in rows} == {"location", "yes_no"}     # seeds 0, 1: where; 2: yes/no
    for r in rows:
        if r["success"]:        # the target was reached: the answer names its room (moved: the new one)
            assert r["truth_match"] == 1.0, (r["episode"], r["question"], r["answer"], r["true_answer"])
        if r["memory"] == "none":   # no memory: the answer's evidence is this episode's own views
            assert r["answer_evidence"] and all(e.startswith(r["episode"] + "/") for e in r["answer_evidence"]), r
        assert r["llm_match"] is None and r["truth_match_spl"] == round(r["truth_match"] * r["spl"], 3)
    # the target moved: with episode A's memory, the room this episode saw it in wins over the remembered one
    moved = [r for r in rows if r["scenario"] == "moved" and r["question_kind"] == "location" and r["recall"]]
    assert moved and all(r["truth_match"] == 1.0 for r in moved), moved
    semantic = res["by_policy"]["semantic"]["episodic"]
    assert semantic["truth_match"] == 1.0 and semantic["truth_match_spl"] == semantic["spl"]
    report = (out / "report.md").read_text()
    assert "| EQA truth-match | truth-match x SPL | LLM-Match | LLM-Match x SPL |" in report
    asked = {kind: sum(1 for r in rows if r["question_kind"] == kind) for kind in ("location", "yes_no")}
    right = sum(r["truth_match"] == 1.0 for r in rows if r["question_kind"] == "location")
    assert f"By question (right / asked): location {right} / {asked['location']}, yes/no (truly " in report


def test_other_floor_plans_are_explored_recalled_and_reported_per_plan(tmp_path):
    """The wing (rooms off a north-south corridor) and the hall (rooms around an open lobby):
    the target is found on a first visit, recall shortens the second, and the report splits the
    figures per floor plan."""
    res = run_explore_benchmark(ExploreBenchConfig(seeds=(0,), layouts=("wing", "hall"), policies=("semantic",),
                                                   scenarios=("same",), eqa_phrasings="dev"), tmp_path, progress=False)
    rows = res["episodes"]
    assert [(r["layout"], r["scenario"], r["memory"]) for r in rows] == [
        (layout, scenario, memory) for layout in ("wing", "hall")
        for scenario, memory in (("first", "none"), ("same", "none"), ("same", "episodic"))]
    assert all(r["success"] for r in rows), [(r["episode"], r["message"]) for r in rows]
    for layout in ("wing", "hall"):
        second = {r["memory"]: r for r in rows if r["layout"] == layout and r["scenario"] == "same"}
        assert second["episodic"]["path_m"] < second["none"]["path_m"], layout
        assert second["episodic"]["i_explore"] is False
        assert res["by_layout"][layout]["semantic"]["episodic"]["episodes"] == 1
    assert {r["room"] for r in rows if r["layout"] == "wing"} <= {"kitchen", "office", "meeting_room", "lab"}
    report = (tmp_path / "report.md").read_text()
    assert "Worlds: floor plans wing, hall x seeds 0" in report and "| hall | semantic | episodic | 1 |" in report
    assert (tmp_path / "maps" / "hall-s0-semantic-B-same-episodic.png").is_file()


def test_exploration_goes_on_when_the_memory_fails():
    from embodied_memory.explore.explorer import Explorer, ExplorerParams
    from embodied_memory.perception.image_embedding import MobileNetV2Embedder
    from embodied_memory.sim.exploration import GroundTruthTargetDetector, SimExplorationEnv, make_task, start_pose

    class MemoryDown:
        def recall(self, *args, **kwargs):
            raise RuntimeError("memory service /memory/query is not available")
    task = make_task(1)
    env = SimExplorationEnv(task, start_pose("lobby"))
    try:
        result = Explorer(env, GroundTruthTargetDetector(env), ExplorerParams(), embedder=MobileNetV2Embedder(),
                          recall=MemoryDown()).run(task.target, "ep-no-memory")
    finally:
        env.close()
    assert result.success and result.recall is None
