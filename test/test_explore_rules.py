"""Semantic memory: rules extracted from a logged exploration episode (scripted LLM), stored,
retrieved for a similar question and put into the query agent's system prompt."""
import json

import pytest

from embodied_memory.agent.query_agent import AgentParams, QueryAgent
from embodied_memory.agent.tools import StoreMemoryClient
from embodied_memory.explore.explorer import Explorer, ExplorerParams
from embodied_memory.explore.rule_extraction import RuleExtractionError, RuleExtractor
from embodied_memory.llm.chat_client import ChatClient, LLMConfig
from embodied_memory.params import StoreParams
from embodied_memory.sim.explore_benchmark import shortest_route
from embodied_memory.sim.exploration import (GroundTruthTargetDetector, SimExplorationEnv, ground_truth_description,
                                             make_task, start_pose)
from embodied_memory.store.memory_store import open_store

from scripted_llm import ScriptedLLM, content

PSEUDOCODE = """target = "rubber duck"
frontiers = detect_frontiers(map)
while not seen(target):
    f = nearest_frontier(frontiers)
    go_to(f)
    look_around()
approach(target)"""
RULES = {"rules": [
    {"key": "nearest_frontier", "kind": "if_then", "condition": "looking for a small object and a doorway to an "
     "unvisited room is close", "action": "enter the room before following a long corridor"},
    {"key": "look_around", "kind": "situation_suggestion", "condition": "arriving in a new room while searching",
     "action": "turn a full circle before leaving, small objects sit near the walls"},
    {"key": "nearest_frontier", "kind": "vibes", "condition": "x", "action": "y"},          # bad kind
    {"key": "teleport", "kind": "if_then", "condition": "lost", "action": "teleport"},      # not in the pseudocode
]}


@pytest.fixture(scope="module")
def episode(tmp_path_factory):
    data = tmp_path_factory.mktemp("rules")
    store = open_store(StoreParams(data_dir=str(data / "memory")))
    task = make_task(0)
    env = SimExplorationEnv(task, start_pose("lobby"))
    try:
        explorer = Explorer(env, GroundTruthTargetDetector(env), ExplorerParams(use_episodic_memory=False),
                            store=store, describer=lambda f: ground_truth_description(env, f), image_dir=data / "img")
        result = explorer.run(task.target, "ep-rules")
        _, reference = shortest_route(env, start_pose("lobby"), explorer.params)
    finally:
        env.close()
    yield store, task, result, reference
    store.close()


def extractor(llm):
    return RuleExtractor(ChatClient(LLMConfig(base_url=llm.base_url, model="m")))


def test_rules_from_a_logged_episode_are_stored_and_reach_the_agent_prompt(episode):
    store, task, result, reference = episode
    assert result.success and len(result.log) > 10
    with ScriptedLLM([content(PSEUDOCODE), content("```json\n" + json.dumps(RULES) + "\n```")]) as llm:
        out = extractor(llm).extract(f"Find the {task.target}", "in the office, near the south wall",
                                     result.log, reference, episode_id="ep-rules", store=store)
        pseudo_req, rules_req = llm.requests
    # the pseudocode prompt carries the execution log; the rules prompt the GT, pseudocode and deviations
    assert "go to frontier" in pseudo_req["messages"][0]["content"]
    parts = rules_req["messages"][0]["content"]
    text = parts[0]["text"]
    assert "near the south wall" in text and "nearest_frontier(frontiers)" in text
    assert 1 <= len(out.deviations.steps) <= 5
    assert sum(p["type"] == "image_url" for p in parts) == len(out.deviations.steps)
    assert [r.kind for r in out.rules] == ["if_then", "situation_suggestion"] and len(out.rejected) == 2
    # retrieved by question similarity (MiniLM) ...
    top = store.rules_for("Where is the first aid kit? Search the rooms.", k=1)
    assert top and top[0]["key"] in ("nearest_frontier", "look_around")
    # ... and put into the llm planner's system prompt
    final = content('{"type": "text", "text": "I have not seen it."}')
    with ScriptedLLM([final]) as llm:
        QueryAgent(StoreMemoryClient(store), AgentParams(planner="llm", llm_base_url=llm.base_url, llm_model="m",
                                                         rules_top_k=2)).ask("Where did you see a first aid kit?")
        system = next(m for m in llm.requests[0]["messages"] if m["role"] == "system")["content"]
    assert "turn a full circle before leaving" in system and "enter the room before" in system


def test_malformed_rules_store_nothing(episode):
    store, task, result, reference = episode
    before = len(store.rules_for("anything", k=100))
    with ScriptedLLM([content(PSEUDOCODE), content("Rule 1: always explore more.")]) as llm:
        with pytest.raises(RuleExtractionError, match="no JSON rules"):
            extractor(llm).extract("Find it", "here", result.log, reference, store=store)
    with ScriptedLLM([content("")]) as llm:
        with pytest.raises(RuleExtractionError, match="no pseudocode"):
            extractor(llm).extract("Find it", "here", result.log, reference, store=store)
    assert len(store.rules_for("anything", k=100)) == before


def test_learn_rules_command_runs_training_episodes_and_stores_their_rules(tmp_path):
    from embodied_memory.cli import main
    with ScriptedLLM([content(PSEUDOCODE), content(json.dumps(RULES))]) as llm:
        code = main(["learn-rules", "--episodes", "1", "--llm-base-url", llm.base_url, "--data-dir", str(tmp_path)])
        requests = list(llm.requests)
    assert code == 0 and len(requests) == 2
    assert "Find the" in requests[0]["messages"][0]["content"]             # the training episode's log
    assert "Ground-truth answer: the " in requests[1]["messages"][0]["content"][0]["text"]
    store = open_store(StoreParams(data_dir=str(tmp_path)))
    try:
        rules = store.rules_for("looking for a small object", k=10)
    finally:
        store.close()
    assert sorted(r["key"] for r in rules) == ["look_around", "nearest_frontier"]   # the two valid ones
    assert all(r["kind"] in ("if_then", "situation_suggestion") for r in rules)


@pytest.mark.parametrize("argv,problem", [
    (["learn-rules"], "--llm-base-url URL"),
    (["learn-rules", "--llm-base-url", "http://127.0.0.1:9/v1", "--first-seed", "5"], "training seeds start at 100"),
    (["learn-rules", "--llm-base-url", "http://127.0.0.1:9/v1", "--episodes", "0"], "at least 1"),
    (["explore-bench", "--rules-episodes", "2"], "--rules-episodes needs --llm-base-url"),
    (["explore-bench", "--policies", "nearest,random"], "--policies"),
    (["explore-bench", "--policies", "mllm"], "needs --llm-base-url"),
    (["explore-bench", "--answerer", "vlm"], "--answerer vlm needs --llm-base-url"),
    (["explore-bench", "--seeds=-1"], "world seeds are 0 or more"),
    (["explore-bench", "--out", "/dev/null/x"], "cannot write there"),
    (["explore-bench", "--layouts", "office,castle"], "--layouts: comma-separated names of office, wing, hall"),
    (["explore-bench", "--judge-model", "j"], "--judge-model needs --judge-base-url"),
])
def test_rule_and_bench_commands_refuse_bad_arguments_in_one_line(argv, problem, capsys):
    from embodied_memory.cli import main
    assert main(argv) == 2
    assert problem in capsys.readouterr().err


def test_the_ablation_gives_learned_rules_to_the_semantic_and_both_runs(tmp_path):
    from embodied_memory.sim.explore_benchmark import ExploreBenchConfig, run_explore_benchmark
    rule_replies = iter([content(PSEUDOCODE), content(json.dumps(RULES))])

    def reply(body, n):        # the rule writer's two calls; OpenEQA's judge is another endpoint
        assert "evaluate the response" not in str(body["messages"][0]["content"])
        return next(rule_replies)
    with ScriptedLLM([], choose=reply) as llm, ScriptedLLM([], choose=lambda body, n: content('{"mark": 4}')) as judge:
        res = run_explore_benchmark(ExploreBenchConfig(seeds=(1,), layouts=("office",), policies=("semantic",),
                                                       scenarios=("same",), rules_episodes=1, eqa_phrasings="dev",
                                                       llm_base_url=llm.base_url, judge_base_url=judge.base_url,
                                                       judge_model="judge-7b"), tmp_path, progress=False)
        judged = len(judge.requests)
    assert len(res["training"]) == 1 and len(res["rules"]) == 2
    # with a judge every answer is judged (LLM-Match, (4 - 1) / 4), and weighed by SPL
    assert judged == len(res["episodes"]) == 5
    assert all(r["llm_match"] == 0.75 and r["llm_match_spl"] == round(0.75 * r["spl"], 3) for r in res["episodes"])
    assert f"Judge: judge-7b at {judge.base_url}. The judge marked 5 of 5 answers." in (tmp_path / "report.md").read_text()
    given = {r["memory"]: r["rules_given"] for r in res["episodes"] if r["scenario"] == "same"}
    assert given == {"none": 0, "episodic": 0, "semantic": 2, "both": 2}
    assert set(res["by_policy"]["semantic"]) == {"none", "episodic", "semantic", "both"}
    report = (tmp_path / "report.md").read_text()
    assert "| semantic | both | 1 |" in report and "enter the room before following a long corridor" in report


def test_without_a_judge_endpoint_the_report_says_the_answering_endpoint_judged_itself():
    from embodied_memory.sim.explore_benchmark import judge_note
    assert "the answering endpoint itself (m at http://x/v1; give --judge-base-url" in judge_note(
        {"llm_base_url": "http://x/v1", "llm_model": "m", "judge_base_url": ""})
    assert judge_note({"llm_base_url": "", "judge_base_url": ""}) == ""
    assert "the answering endpoint itself" in judge_note(       # the same endpoint and model given as the judge
        {"llm_base_url": "http://x/v1", "llm_model": "m", "judge_base_url": "http://x/v1", "judge_model": "m"})


def test_a_bench_whose_judge_never_marked_an_answer_is_flagged():
    from embodied_memory.sim.explore_benchmark import judge_never_marked, judged_count
    dead = [{"judged": True, "llm_match": None}] * 3
    assert judge_never_marked({"episodes": dead}) and judged_count(dead) == " The judge marked 0 of 3 answers."
    assert not judge_never_marked({"episodes": dead + [{"judged": True, "llm_match": 0.5}]})
    assert not judge_never_marked({"episodes": [{"judged": False, "llm_match": None}]}) and judged_count([]) == ""


def test_a_bench_where_no_question_was_answered_is_flagged():
    from embodied_memory.sim.explore_benchmark import answerer_never_answered
    failed = {"question": "Where is the red box?", "answer": "(error: the vision-language endpoint failed: refused)"}
    assert answerer_never_answered({"episodes": [failed, failed]})
    assert not answerer_never_answered({"episodes": [failed, dict(failed, answer="In the kitchen.")]})
    assert not answerer_never_answered({"episodes": [{"question": "", "answer": ""}]})       # --no-eqa


def test_a_bench_where_the_model_never_decided_is_flagged():
    from embodied_memory.sim.explore_benchmark import model_never_decided
    def res(*calls):
        return {"episodes": [{"model_calls": c, "fallbacks": f} for c, f in calls]}
    assert model_never_decided(res((0, 0), (5, 5), (3, 3)))          # every mllm decision fell back
    assert not model_never_decided(res((5, 5), (3, 2)))              # the model decided once
    assert not model_never_decided(res((0, 0)))                      # no model in the run
