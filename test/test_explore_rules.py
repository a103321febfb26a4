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
