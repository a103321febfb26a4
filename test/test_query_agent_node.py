"""Integration: the Ask service round-trips over DDS between processes (memory node, query
agent node, and the `embodied-memory ask` CLI, each its own process)."""
import json
import os
import subprocess

import pytest
from embodied_memory_interfaces.srv import Ask, GetMemoryStats
from rclpy.node import Node

from embodied_memory.nodes.common import to_time_msg

from rosutil import VENV_BIN, fixture_stack, call, wait_until
from store_fixtures import HOUR, T0

pytestmark = pytest.mark.integration


@pytest.fixture
def stack(tmp_path):
    launched = fixture_stack(tmp_path, "planner: rules", "")
    yield launched
    assert launched.stop() == 0, launched.log()


def test_ask_service_between_processes(stack, ros_context):
    node = Node("asker", context=ros_context)
    wait_until(lambda: call(node, GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats.observations == 6,
               180, what="6 observations imported (the memory loads MiniLM first)")
    request = Ask.Request(question="Where did you last see the red mug?", as_of=to_time_msg(T0 + 27 * HOUR))
    answer = call(node, Ask, "/agent/ask", request, timeout=60).answer
    assert answer.status == "ok" and answer.type == "position" and answer.has_position
    assert (answer.position.x, answer.position.y) == (1.0, 1.5) and answer.waypoint_id == "kitchen"
    assert answer.has_time and answer.time_iso == "2026-03-11T10:00:00+00:00" and answer.tool_calls >= 1
    assert json.loads(answer.json)["evidence"][0] == "o5"

    proc = subprocess.run([str(VENV_BIN / "embodied-memory"), "ask", "Who was in the kitchen?", "--json",
                           "--as-of", "2026-03-11T11:00:00+00:00"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"})
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert printed["persons"] == ["alice"] and printed["planner"] == "rules"
    node.destroy_node()


def test_cli_ask_waits_for_the_agents_worst_case():
    from embodied_memory.agent.query_agent import AgentParams
    from embodied_memory.cli import ask_timeout_s, build_parser
    from embodied_memory.config import ConfigError, parse_params
    from embodied_memory.params import QueryAgentNodeParams
    defaults = AgentParams()
    worst = defaults.llm_timeout_s * (defaults.function_call_limit + 1)
    assert defaults.question_timeout() == worst
    assert AgentParams(question_timeout_s=30.0).question_timeout() == 30.0
    assert build_parser().parse_args(["ask", "q"]).timeout is None
    assert ask_timeout_s() > QueryAgentNodeParams().answer_wait_s() > worst
    assert ask_timeout_s(12.5) == 12.5
    with pytest.raises(ConfigError, match="max_concurrent_questions"):
        parse_params(QueryAgentNodeParams, {"max_concurrent_questions": 0}, "query_agent")
    with pytest.raises(ConfigError, match="question_timeout_s"):
        parse_params(QueryAgentNodeParams, {"question_timeout_s": -1.0}, "query_agent")
