"""The llm planner's protocol against a real OpenAI-compatible HTTP server on localhost."""
import base64
import socket

import cv2
import numpy as np
import pytest

from embodied_memory.agent.prompts import FINAL_NOW
from embodied_memory.agent.query_agent import AgentParams, QueryAgent
from embodied_memory.agent.tools import StoreMemoryClient
from embodied_memory.types import SemanticRule

from scripted_llm import ScriptedLLM, content, error, tool_call
from store_fixtures import HOUR, T0, filled_store

NOW = T0 + 27 * HOUR
FINAL = content('{"type": "position", "text": "On the kitchen counter.", "position": [1, 1.5, 0], '
                '"time": "2026-03-11T10:00:00", "waypoint": "kitchen", "evidence": ["o5"]}')


@pytest.fixture
def store(tmp_path):
    s = filled_store(tmp_path, "sqlite_faiss")
    yield s
    s.close()


def agent(store, server_or_url, **kw):
    url = server_or_url if isinstance(server_or_url, str) else server_or_url.base_url
    return QueryAgent(StoreMemoryClient(store), AgentParams(planner="llm", llm_base_url=url, llm_model="m", **kw))


def messages_of(request, role):
    return [m for m in request["messages"] if m["role"] == role]


def test_native_tool_calls_then_typed_answer(store):
    with ScriptedLLM([tool_call("semantic_observations", {"query": "red mug", "n": 3}), FINAL]) as llm:
        ans = agent(store, llm).ask("Where did you last see the red mug?", as_of=NOW)
    assert ans.status == "ok" and ans.type == "position" and ans.position == [1.0, 1.5, 0.0]
    assert ans.time_iso == "2026-03-11T10:00:00+00:00" and ans.minutes_ago == 60.0
    assert ans.tool_calls == 1 and ans.tokens_in == 200 + 400 and ans.tokens_out == 40
    first, second = llm.requests
    assert {t["function"]["name"] for t in first["tools"]} >= {"semantic_observations", "persons_per_day",
                                                               "daily_summary", "image_retrieval"}
    assert "2026-03-11T11:00:00+00:00" in messages_of(first, "system")[0]["content"]
    tool_msg = messages_of(second, "tool")[0]
    assert tool_msg["tool_call_id"] == "call_1" and '"o5"' in tool_msg["content"]
    assert "embedding" not in tool_msg["content"]  # compact results


def test_tool_calls_written_in_content(store):
    script = [content('I will look it up.\n```json\n{"name": "person_observations", "arguments": {"person": "alice"}}\n```'),
              content('{"type": "time", "text": "At 10:00.", "time": "10:00"}')]
    with ScriptedLLM(script) as llm:
        ans = agent(store, llm).ask("When did you last see alice?", as_of=T0 + 5 * HOUR)
    results = messages_of(llm.requests[1], "user")[-1]["content"]
    assert results.startswith("Tool results:") and '"o0"' in results and '"o2"' in results
    assert ans.tool_calls == 1 and ans.type == "time" and ans.time_iso.startswith("2026-03-10T10:00")


def test_malformed_arguments_go_back_as_tool_error(store):
    script = [tool_call("semantic_observations", "{query: red mug"),
              tool_call("persons_per_day", {"date": "10.03.2026"}, "call_2"),
              content('{"type": "persons", "persons": ["alice", "bob"], "text": "alice and bob"}')]
    with ScriptedLLM(script) as llm:
        ans = agent(store, llm).ask("Who was here on March 10?", as_of=NOW)
    assert "not valid JSON" in messages_of(llm.requests[1], "tool")[0]["content"]
    assert "YYYY-MM-DD" in messages_of(llm.requests[2], "tool")[-1]["content"]  # store error, not a crash
    assert ans.persons == ["alice", "bob"] and ans.tool_calls == 2


def test_function_call_limit_forces_an_answer(store):
    script = [tool_call("retrieve_from_text", {"query": f"thing {i}"}, f"c{i}") for i in range(3)] + [FINAL]
    with ScriptedLLM(script) as llm:
        ans = agent(store, llm, function_call_limit=3).ask("Where is the mug?", as_of=NOW)
    assert ans.tool_calls == 3 and ans.position == [1.0, 1.5, 0.0]
    last = llm.requests[-1]
    assert "tools" not in last and last["messages"][-1]["content"] == FINAL_NOW
    assert len(llm.requests) == 4


def test_model_answer_with_bad_fields_is_validated_not_evaluated(store):
    script = [content('{"type": "position", "position": "__import__(\'os\').system(\'x\')", "duration": "long", '
                      '"binary": "YES", "text": "ok"}')]
    with ScriptedLLM(script) as llm:
        ans = agent(store, llm).ask("Is there a mug?", as_of=NOW)
    assert ans.position is None and ans.duration_minutes is None and ans.binary == "yes"
    assert "position" in ans.error and "duration" in ans.error


def test_context_length_error_is_a_wellformed_no_answer(store):
    script = [error(400, "This model's maximum context length is 4096 tokens.", "context_length_exceeded")]
    with ScriptedLLM(script) as llm:
        ans = agent(store, llm).ask("Summarise everything", as_of=NOW)
    assert ans.status == "no_answer" and "context length" in ans.error and ans.text


def test_endpoint_down_falls_back_to_rules(tmp_path):
    store = filled_store(tmp_path / "minilm", "sqlite_faiss", text_embedder="minilm")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    ans = agent(store, url, llm_timeout_s=2.0).ask("Where did you last see the bicycle?", as_of=NOW)
    assert ans.status == "ok" and ans.planner == "rules (fallback)" and "unavailable" in ans.error
    assert ans.waypoint == "corridor" and ans.position == [10.0, 0.0, 0.0]


def test_retrieved_images_are_attached_to_the_final_call(store, tmp_path):
    image = store.data_dir / "images" / "mug.jpg"  # replace the fixture's stub with a real 1600x1200 JPEG
    cv2.imwrite(str(image), np.full((1200, 1600, 3), 127, np.uint8))
    script = [tool_call("image_retrieval", {"query": "red mug", "m": 2}),
              content('{"type": "text", "text": "a red mug"}'), content('{"type": "text", "text": "a red mug, seen"}')]
    with ScriptedLLM(script) as llm:
        ans = agent(store, llm).ask("What does the mug look like?", as_of=NOW)
    assert ans.text == "a red mug, seen" and len(llm.requests) == 3
    final = llm.requests[-1]
    assert "tools" not in final
    parts = final["messages"][-1]["content"]
    images = [p["image_url"] for p in parts if p["type"] == "image_url"]
    assert len(images) == 1 and images[0]["detail"] == "low"  # the stub bike.jpg is not an image
    decoded = cv2.imdecode(np.frombuffer(base64.b64decode(images[0]["url"].split(",", 1)[1]), np.uint8), 1)
    assert max(decoded.shape[:2]) == 768


def test_no_images_means_text_only(store):
    with ScriptedLLM([tool_call("semantic_observations", {"query": "mug"}), FINAL]) as llm:
        agent(store, llm).ask("Where is the mug?", as_of=NOW)
    assert all(isinstance(m["content"], str) for m in llm.requests[-1]["messages"] if "content" in m)


def test_semantic_rules_are_put_in_the_system_prompt(store):
    store.add_rule(SemanticRule("r1", "if_then", "search_target", "looking for a mug", "check the kitchen sink first"))
    store.add_rule(SemanticRule("r2", "if_then", "navigate", "stairs are blocked", "use the elevator"))
    with ScriptedLLM([FINAL]) as llm:
        agent(store, llm, rules_top_k=1).ask("Where can I find a mug?", as_of=NOW)
    system = messages_of(llm.requests[0], "system")[0]["content"]
    assert "check the kitchen sink first" in system and "use the elevator" not in system


def test_full_context_baseline_puts_every_description_in_one_prompt(store):
    with ScriptedLLM([content('{"type": "text", "text": "a mug"}')]) as llm:
        ans = agent(store, llm).ask("What is in the kitchen?", as_of=T0 + 2.5 * HOUR, planner="full_context")
    prompt = messages_of(llm.requests[0], "system")[0]["content"]
    assert "a red mug on the kitchen counter" in prompt and "meeting room" not in prompt  # only up to as_of
    assert "tools" not in llm.requests[0] and ans.planner == "full_context" and ans.tokens_in == 200


def test_history_tools_return_the_recent_end_and_honour_order(store):
    script = [tool_call("person_observations", {"person": "alice"}),
              tool_call("person_observations", {"person": "alice", "order": "oldest"}, "call_2"),
              tool_call("waypoint_observations", {"waypoint": "kitchen", "order": "sideways"}, "call_3"), FINAL]
    with ScriptedLLM(script) as llm:
        agent(store, llm).ask("When did you last see alice?", as_of=NOW)
    specs = {t["function"]["name"]: t["function"] for t in llm.requests[0]["tools"]}
    for name in ("person_observations", "waypoint_observations"):
        order = specs[name]["parameters"]["properties"]["order"]
        assert order["enum"] == ["newest", "oldest"] and "default" in order["description"]
    newest, oldest, bad = (m["content"] for m in messages_of(llm.requests[-1], "tool"))
    assert newest.index('"o2"') < newest.index('"o0"') and oldest.index('"o0"') < oldest.index('"o2"')
    assert "order" in bad and "sideways" in bad


def test_every_tool_sees_only_the_past(store):
    """Asked at 08:30 on day 1: bob (first seen 09:00) and later waypoints do not exist yet."""
    script = [tool_call("persons_per_day", {"date": "2026-03-10"}),
              tool_call("current_state", {}, "call_2"),
              tool_call("daily_summary", {"date": "2026-03-10", "person": "alice"}, "call_3"), FINAL]
    with ScriptedLLM(script) as llm:
        ans = agent(store, llm).ask("Who was here today?", as_of=T0 + 0.5 * HOUR)
    per_day, state, summary = (m["content"] for m in messages_of(llm.requests[-1], "tool"))
    assert '"alice"' in per_day and "bob" not in per_day
    assert "bob" not in state and "corridor" not in state and "kitchen" in state
    assert '"sightings":1' in summary.replace(" ", "") and ans.tool_calls == 3


def test_remembr_tools_ablation_offers_and_runs_only_its_three_tools(store):
    """HUMEMBR's ablation with only ReMEmbR's tools (evaluation/runner.py llm_remembr_tools):
    the model is offered the three, and a call to any other tool comes back as a tool error."""
    from embodied_memory.agent.llm_planner import LLMPlanner
    from embodied_memory.agent.tools import REMEMBR_TOOLS
    from embodied_memory.evaluation.runner import llm_ablations
    script = [tool_call("semantic_observations", {"query": "red mug"}),
              tool_call("retrieve_from_text", {"query": "red mug"}), FINAL]
    with ScriptedLLM(script) as llm:
        a = agent(store, llm)
        ablations = llm_ablations(a.client)
        assert isinstance(ablations["llm_remembr_tools"], LLMPlanner) and ablations["llm_limit5"].limit == 5
        a.extra_planners.update(ablations)
        ans = a.ask("Where did you last see the red mug?", as_of=NOW, planner="llm_remembr_tools")
    assert ans.status == "ok" and ans.tool_calls == 2
    assert {t["function"]["name"] for t in llm.requests[0]["tools"]} == set(REMEMBR_TOOLS)
    refused, ran = (m["content"] for m in messages_of(llm.requests[2], "tool"))
    assert "unknown tool 'semantic_observations'" in refused and '"o5"' in ran
