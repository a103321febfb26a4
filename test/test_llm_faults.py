"""Faults of an OpenAI-compatible endpoint (a real HTTP server on localhost): every question
gets a fallback answer (the rules planner, noted) or an error, the agent never raises, and a
query agent node over DDS keeps serving afterwards."""
import json
import math

import pytest
from embodied_memory_interfaces.srv import Ask, GetMemoryStats
from rclpy.node import Node
from rclpy.qos import QoSProfile

from embodied_memory.agent.answer import MAX_TIME, Answer
from embodied_memory.agent.query_agent import FALLBACK, AgentParams, QueryAgent
from embodied_memory.agent.tools import StoreMemoryClient
from embodied_memory.nodes.common import to_time_msg
from embodied_memory.nodes.conversions import answer_to_msg

from rosutil import fixture_stack, call, spin_until, wait_until
from scripted_llm import ScriptedLLM, completion, content, cut, error, first_user_message, hang, raw, slow, tool_call
from store_fixtures import HOUR, T0, filled_store

NOW = T0 + 27 * HOUR
QUESTION = "Where did you last see the red mug?"
GOOD = content('{"type": "position", "text": "On the kitchen counter.", "position": [1, 1.5, 0], '
               '"time": "2026-03-11T10:00:00", "waypoint": "kitchen", "evidence": ["o5"]}')
LLM_TIMEOUT_S = 2.0


def _completion_with(message: dict, **extra) -> dict:
    return raw(json.dumps({**completion(message), **extra}))


# the endpoint's reply to every request of the question: each ends in the rules planner's answer
FALLBACK_FAULTS = {
    "html_body": raw("<html><body><h1>502 Bad Gateway</h1></body></html>", content_type="text/html"),
    "text_body_json_type": raw("Internal error, try again later"),
    "json_list": raw("[1, 2, 3]"),
    "json_not_completion": raw('{"result": "ok", "data": {"answer": 42}}'),
    "empty_choices": _completion_with({}, choices=[]),
    "choices_not_a_list": _completion_with({}, choices={"0": "x"}),
    "message_not_an_object": raw(json.dumps({"choices": [{"message": "the mug is in the kitchen"}]})),
    "error_with_http_200": raw('{"error": {"message": "model overloaded"}}'),
    "invalid_utf8": raw(b'\xff\xfe{"choices": \x80\x81'),
    "deep_nesting": raw("[" * 100_000 + "]" * 100_000),
    "connection_cut": cut(),
    "http_400": error(400, "bad request: unknown parameter 'tools'"),
    "http_401": error(401, "invalid api key"),
    "http_404": error(404, "model 'm' not found"),
    "http_429": error(429, "rate limited"),
    "http_500": error(500, "internal server error"),
    "http_503": error(503, "service unavailable"),
    "hang": hang(60),
    "empty_content": content(""),
    "null_content_no_calls": content(None),
    "tool_calls_not_a_list": _completion_with({"role": "assistant", "content": None, "tool_calls": "semantic"}),
    # malformed tool calls, repeated forever: the limit ends them, then the model never answers
    "unknown_tool": tool_call("rm_rf", {"path": "/"}),
    "arguments_not_json": tool_call("semantic_observations", "{query: red mug"),
    "arguments_a_list": tool_call("semantic_observations", "[1, 2, 3]"),
    "arguments_1mb": tool_call("semantic_observations", json.dumps({"query": "x" * 1_000_000})),
    "arguments_an_object": _completion_with({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "semantic_observations", "arguments": {"query": "mug"}}}]}),
    "tool_call_without_name": _completion_with({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"arguments": "{}"}}]}),
    "endless_valid_tool_calls": tool_call("semantic_observations", {"query": "red mug"}),
    "content_tool_calls_forever": content('{"name": "person_observations", "arguments": {"person": "alice"}}'),
    # an answer whose every field is impossible is no answer
    "only_impossible_fields": content('{"type": "time", "time": 1e20, "duration": -3}'),
}

# the model answers, but a field is impossible or of the wrong type: that field is left out, noted
# in error, the rest is kept (field, the JSON answer text)
ABSURD_ANSWERS = {
    "time_1e20": ("time", '{"type": "time", "text": "a while ago", "time": 1e20}'),
    "time_nan": ("time", '{"type": "time", "text": "a while ago", "time": NaN}'),
    "time_inf_string": ("time", '{"type": "time", "text": "a while ago", "time": "inf"}'),
    "time_year_9999": ("time", '{"type": "time", "text": "a while ago", "time": "9999-12-31T23:59:59"}'),
    "time_99_99": ("time", '{"type": "time", "text": "a while ago", "time": "99:99"}'),
    "time_a_list": ("time", '{"type": "time", "text": "a while ago", "time": [2026, 3, 11]}'),
    "duration_1e300": ("duration", '{"type": "duration", "text": "long", "duration": 1e300}'),
    "duration_infinity": ("duration", '{"type": "duration", "text": "long", "duration": Infinity}'),
    "duration_negative": ("duration", '{"type": "duration", "text": "long", "duration": -5}'),
    "position_1e300": ("position", '{"type": "position", "text": "far", "position": [1e300, 0, 0]}'),
    "position_400_digits": ("position", '{"type": "position", "text": "far", "position": [' + "9" * 400 + ', 0]}'),
    "position_nan": ("position", '{"type": "position", "text": "far", "position": [NaN, 1, 0]}'),
    "position_a_string": ("position", '{"type": "position", "text": "far", "position": "kitchen"}'),
    "orientation_infinity": ("orientation", '{"type": "position", "text": "here", "position": [1, 2, 0], '
                                            '"orientation": -Infinity}'),
    "wrong_types": ("position", '{"type": ["x"], "text": {"a": 1}, "binary": [1], "persons": {"a": 1}, '
                                '"evidence": "o1", "waypoint": 5, "confidence": "high", "position": true}'),
}


def choose_by_question(body: dict, _n: int) -> dict:
    """One server, a fault per question: the question starts with [fault name]."""
    text = first_user_message(body)
    name = text[1:text.index("]")] if text.startswith("[") and "]" in text else ""
    if name in FALLBACK_FAULTS:
        return FALLBACK_FAULTS[name]
    if name in ABSURD_ANSWERS:
        return content(ABSURD_ANSWERS[name][1])
    if name == "absurd_usage":
        return _completion_with({"role": "assistant", "content": GOOD["content"]},
                                usage={"prompt_tokens": 1e30, "completion_tokens": -5})
    if name == "surrogates":
        return content('{"type": "text", "text": "a \\ud800 mug\\u0000 here", "persons": ["\\udfff"]}')
    return GOOD


def check_fallback(name: str, ans: Answer) -> None:
    assert ans.planner == FALLBACK and ans.error, (name, ans)
    assert ans.status in ("ok", "no_answer"), (name, ans)


def check_absurd(name: str, ans: Answer) -> None:
    field, _ = ABSURD_ANSWERS[name]
    assert ans.planner == "llm" and ans.status == "ok" and ans.text, (name, ans)
    assert field in ans.error, (name, ans.error)
    kept = {"time": ans.time, "duration": ans.duration_minutes, "position": ans.position,
            "orientation": ans.orientation}[field]
    assert kept is None, (name, ans)
    assert ans.time is None or 0 <= ans.time <= MAX_TIME
    answer_to_msg(ans)  # fits the message


@pytest.fixture(scope="module")
def endpoint():
    with ScriptedLLM([], choose=choose_by_question) as llm:
        yield llm


@pytest.fixture
def agent(tmp_path, endpoint):
    store = filled_store(tmp_path, "sqlite_faiss")
    yield QueryAgent(StoreMemoryClient(store), AgentParams(
        planner="llm", llm_base_url=endpoint.base_url, llm_model="m", llm_timeout_s=LLM_TIMEOUT_S,
        function_call_limit=3))
    store.close()


@pytest.mark.parametrize("name", sorted(FALLBACK_FAULTS))
def test_endpoint_fault_falls_back_to_rules(agent, name):
    question = f"[{name}] {QUESTION}"
    ans = agent.ask(question, as_of=NOW)
    check_fallback(name, ans)
    rules = agent.ask(question, as_of=NOW, planner="rules")  # the fallback is the rules planner's answer
    assert (ans.status, ans.text, ans.position, ans.waypoint) == (rules.status, rules.text, rules.position,
                                                                  rules.waypoint)
    answer_to_msg(ans)


@pytest.mark.parametrize("name", sorted(ABSURD_ANSWERS))
def test_impossible_answer_fields_are_left_out_and_noted(agent, name):
    check_absurd(name, agent.ask(f"[{name}] {QUESTION}", as_of=NOW))


def test_absurd_usage_and_lone_surrogates_fit_the_message(agent):
    ans = agent.ask(f"[absurd_usage] {QUESTION}", as_of=NOW)
    assert ans.planner == "llm" and ans.position == [1.0, 1.5, 0.0]
    assert 0 <= ans.tokens_in <= 2**32 - 1 and ans.tokens_out == 0
    ans = agent.ask(f"[surrogates] {QUESTION}", as_of=NOW)
    assert ans.status == "ok" and "\ud800" not in ans.text and "\x00" not in ans.text and "mug" in ans.text
    msg = answer_to_msg(ans)
    assert json.loads(msg.json)["persons"] == ["?"]


def test_malformed_call_then_answer_goes_back_to_the_model(tmp_path):
    store = filled_store(tmp_path, "sqlite_faiss")
    script = [tool_call("semantic_observations", json.dumps({"query": "x" * 1_000_000})),
              tool_call("no_such_tool", {}, "call_2"), tool_call("semantic_observations", "[1]", "call_3"), GOOD]
    with ScriptedLLM(script) as llm:
        agent = QueryAgent(StoreMemoryClient(store), AgentParams(planner="llm", llm_base_url=llm.base_url))
        ans = agent.ask(QUESTION, as_of=NOW)
        tool_results = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
        sizes = [len(json.dumps(r)) for r in llm.requests]
    assert ans.planner == "llm" and ans.position == [1.0, 1.5, 0.0] and ans.tool_calls == 3
    assert "characters long" in tool_results[0] and "unknown tool" in tool_results[1]
    assert "JSON object" in tool_results[2]
    assert max(sizes[1:]) < 100_000  # the 1 MB arguments are not echoed back to the model
    store.close()


def test_question_budget_bounds_a_slow_model(tmp_path):
    """Each model call is within llm_timeout_s but the question's budget runs out: fallback."""
    store = filled_store(tmp_path, "sqlite_faiss")
    with ScriptedLLM([slow(0.7, tool_call("semantic_observations", {"query": "mug"}))]) as llm:
        agent = QueryAgent(StoreMemoryClient(store), AgentParams(
            planner="llm", llm_base_url=llm.base_url, llm_timeout_s=5.0, question_timeout_s=1.5))
        ans = agent.ask(QUESTION, as_of=NOW)
        calls = len(llm.requests)
    assert ans.planner == FALLBACK and "out of time" in ans.error and ans.waypoint == "kitchen"
    assert calls < 10  # the function_call_limit (10) was not reached: the budget stopped it
    store.close()


def test_ask_never_raises(tmp_path):
    class Broken:
        def call(self, tool, arguments):
            raise RuntimeError(f"memory on fire ({tool})")

    class Absurd:
        name = "absurd"

        def answer(self, question, tools, rules, now_iso, tz_name):
            return Answer(type="nonsense", text="\ud800" * 5000, position=[math.nan, 1e400, 0],
                          time=1e20, time_iso="x", minutes_ago=math.inf, duration_minutes=-1.0,
                          persons=["a" * 10_000, None, 3], confidence=math.nan, tokens_in=2**70,
                          tool_calls=-3, status="weird")

    agent = QueryAgent(Broken(), AgentParams(planner="rules"), extra_planners={"absurd": Absurd()})
    ans = agent.ask(QUESTION, as_of=NOW)
    assert ans.status == "error" and "RuntimeError" in ans.error and "memory on fire" in ans.error
    ans = agent.ask(QUESTION, as_of=NOW, planner="absurd")
    assert ans.status == "error" and ans.type == "text" and ans.position is None and ans.time is None
    assert ans.duration_minutes is None and ans.confidence == 0.0 and ans.tokens_in == 2**32 - 1
    assert "position" in ans.error and "time" in ans.error and "duration" in ans.error
    answer_to_msg(ans)
    for question, as_of in ((None, NOW), ("x" * 100_000, NOW), ("\x00\x01\x1b[31m", NOW), (QUESTION, 1e20),
                            (QUESTION, math.nan)):
        ans = agent.ask(question, as_of=as_of, planner="nope")
        assert ans.status in ("error", "no_answer") and ans.error, (question[:20] if question else question, ans)
        answer_to_msg(ans)
    assert agent.ask(QUESTION, planner="no_such_planner").status == "error"


# -- over DDS: one query agent node, a memory node, the faulty endpoint -------------------------
@pytest.fixture
def stack(tmp_path, endpoint):
    launched = fixture_stack(tmp_path, f"""planner: llm, llm_base_url: "{endpoint.base_url}", llm_timeout_s: {LLM_TIMEOUT_S},
                  function_call_limit: 3""")
    yield launched
    assert launched.stop() == 0, launched.log()


def test_node_survives_every_fault_over_dds(stack, ros_context):
    from rclpy.executors import SingleThreadedExecutor
    node = Node("fault_asker", context=ros_context)
    wait_until(lambda: call(node, GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats.observations == 6,
               60, what="6 observations imported")
    client = node.create_client(Ask, "/agent/ask", qos_profile=QoSProfile(depth=100))
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    assert client.wait_for_service(timeout_sec=30)

    def ask(question, planner=""):
        future = client.call_async(Ask.Request(question=question, planner=planner, as_of=to_time_msg(NOW)))
        msg = spin_until(executor, future, 60, why=stack.log).answer
        return Answer(**json.loads(msg.json)), msg

    for name in sorted(FALLBACK_FAULTS) + sorted(ABSURD_ANSWERS) + ["surrogates"]:
        ans, msg = ask(f"[{name}] {QUESTION}")
        if name in FALLBACK_FAULTS:
            check_fallback(name, ans)
        elif name in ABSURD_ANSWERS:
            check_absurd(name, ans)
        else:
            assert ans.status == "ok" and "mug" in msg.text
    ans, msg = ask(QUESTION)  # the node still answers, with the model
    assert ans.planner == "llm" and msg.has_position and msg.waypoint_id == "kitchen"
    ans, msg = ask(QUESTION, planner="rules")
    assert ans.planner == "rules" and msg.status == "ok" and msg.has_position and msg.waypoint_id == "kitchen"
    assert "query_agent' exited" not in stack.log() and "query_agent' died" not in stack.log()
    executor.remove_node(node)
    node.destroy_node()
