"""Concurrency of the query agent node over DDS: a burst of simultaneous questions is answered
or refused as busy (never dropped, never a client timeout), and a hung LLM endpoint for one
planner does not keep the others from answering."""
import json
import time

import pytest
from embodied_memory_interfaces.srv import Ask, GetMemoryStats
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile

from embodied_memory.agent.query_agent import FALLBACK
from embodied_memory.nodes.common import to_time_msg
from embodied_memory.params import ANSWER_GRACE_S, QueryAgentNodeParams

from rosutil import fixture_stack, call, wait_until
from scripted_llm import ScriptedLLM, hang
from store_fixtures import HOUR, T0

pytestmark = pytest.mark.integration

NOW = T0 + 27 * HOUR
QUESTION_TIMEOUT_S = 20.0
LLM_TIMEOUT_S = 2.0
DEFAULTS = QueryAgentNodeParams()
CAPACITY = DEFAULTS.max_concurrent_questions + DEFAULTS.max_queued_questions
QUESTIONS = ["Where did you last see the red mug?", "Who was in the kitchen?", "When did you last see bob?",
             "Where is the bicycle?", "Did you see alice in the kitchen?"]


@pytest.fixture(scope="module")
def hung_endpoint():
    with ScriptedLLM([hang(600)]) as llm:
        yield llm


@pytest.fixture(scope="module")
def stack(tmp_path_factory, hung_endpoint):
    tmp_path = tmp_path_factory.mktemp("concurrency")
    launched = fixture_stack(tmp_path, f"""planner: rules, llm_base_url: "{hung_endpoint.base_url}", llm_timeout_s: {LLM_TIMEOUT_S},
                  question_timeout_s: {QUESTION_TIMEOUT_S}""")
    yield launched
    assert launched.stop() == 0, launched.log()


@pytest.fixture
def asker(stack, ros_context):
    node = Node("burst_asker", context=ros_context)
    wait_until(lambda: call(node, GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats.observations == 6,
               60, what="6 observations imported")
    client = node.create_client(Ask, "/agent/ask", qos_profile=QoSProfile(depth=1000))
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    assert client.wait_for_service(timeout_sec=30)

    def ask_all(requests: list[tuple[str, str]]) -> list:
        """Send every (question, planner) at once; the answers (None: no answer in time)."""
        futures = [client.call_async(Ask.Request(question=q, planner=p, as_of=to_time_msg(NOW)))
                   for q, p in requests]
        deadline = time.monotonic() + QUESTION_TIMEOUT_S + ANSWER_GRACE_S + 10  # what a client waits at most
        while not all(f.done() for f in futures) and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        return [f.result().answer if f.done() else None for f in futures]

    yield ask_all
    executor.remove_node(node)
    node.destroy_node()


def is_busy(answer) -> bool:
    return answer.status == "error" and answer.error.startswith("busy:")


def planner_of(answer) -> str:
    return json.loads(answer.json)["planner"]


def test_a_burst_of_50_questions_is_answered_or_refused_as_busy(asker, stack):
    answers = asker([(QUESTIONS[i % len(QUESTIONS)], "") for i in range(50)])
    assert all(a is not None for a in answers), f"{sum(a is None for a in answers)} questions never answered"
    answered = [a for a in answers if not is_busy(a)]
    assert all(a.status in ("ok", "no_answer") and planner_of(a) == "rules" for a in answered), \
        [(a.status, a.error) for a in answered if a.status not in ("ok", "no_answer")]
    assert len(answered) >= DEFAULTS.max_concurrent_questions
    mug = [a for a, i in zip(answers, range(50)) if i % len(QUESTIONS) == 0 and not is_busy(a)]
    assert mug and all(a.has_position and a.waypoint_id == "kitchen" for a in mug)


def test_questions_beyond_the_queue_are_refused_at_once_not_dropped(asker):
    """30 questions to the hung endpoint: the admitted ones fall back to the rules planner when
    their model call times out; those beyond max_concurrent + max_queued are refused as busy."""
    answers = asker([(QUESTIONS[0], "llm")] * 30)
    assert all(a is not None for a in answers), f"{sum(a is None for a in answers)} questions never answered"
    busy = [a for a in answers if is_busy(a)]
    fallback = [a for a in answers if not is_busy(a)]
    assert len(busy) >= 30 - CAPACITY and len(fallback) >= DEFAULTS.max_concurrent_questions
    assert all(planner_of(a) == FALLBACK and "unavailable" in a.error and a.has_position for a in fallback), \
        [(a.status, a.error) for a in fallback]


def test_a_hung_endpoint_does_not_stop_the_other_planner(asker):
    requests = [(QUESTIONS[0], "llm")] * DEFAULTS.max_concurrent_questions + \
               [(QUESTIONS[i % len(QUESTIONS)], "rules") for i in range(10)]
    answers = asker(requests)
    assert all(a is not None for a in answers), f"{sum(a is None for a in answers)} questions never answered"
    llm, rules = answers[:DEFAULTS.max_concurrent_questions], answers[DEFAULTS.max_concurrent_questions:]
    assert all(planner_of(a) == FALLBACK and "unavailable" in a.error for a in llm)
    assert all(planner_of(a) == "rules" and a.status in ("ok", "no_answer") for a in rules)
    after = asker([(QUESTIONS[0], "rules")])[0]  # and the node keeps serving
    assert after is not None and after.status == "ok" and after.waypoint_id == "kitchen"
