"""End to end: "go to where you last saw Alice" - the query agent finds the place in memory and
drives the simulated base there through the navigation bridge (every node its own process).
Driving is an AskAndAct goal: the Ask service never moves the robot (test_ask_and_act.py)."""
import json

import pytest
from embodied_memory_interfaces.action import AskAndAct
from embodied_memory_interfaces.srv import GetMemoryStats
from rclpy.node import Node

from embodied_memory.nodes.common import to_time_msg
from embodied_memory.records_io import observation_to_dict

from rosutil import LaunchedStack, call, send_goal, wait_until
from store_fixtures import HOUR, T0, fixture_observations

pytestmark = pytest.mark.integration


def test_agent_navigates_to_where_a_person_was_last_seen(tmp_path, ros_context):
    export = tmp_path / "export.jsonl"
    export.write_text("".join(json.dumps(observation_to_dict(o)) + "\n" for o in fixture_observations(tmp_path)))
    waypoints = tmp_path / "waypoints.yaml"
    waypoints.write_text("waypoints:\n  kitchen: {x: 1.2, y: 1.2}\n  corridor: {x: 10.0, y: 0.0}\n"
                         "  entrance: {x: 0.0, y: -5.0}\n")
    stack_file = tmp_path / "stack.yaml"
    stack_file.write_text(f"""nodes:
  memory:
    executable: memory_node
    parameters: {{data_dir: "{tmp_path / 'store'}", image_dim: 16, face_dim: 8, reid_dim: 8}}
  query_agent:
    executable: query_agent_node
    parameters: {{planner: rules, navigation_action: /navigate_to_waypoint}}
  nav_bridge:
    executable: nav_bridge_node
    parameters: {{backend: sim, waypoints_file: "{waypoints}", sim_speed: 4.0}}
  importer:
    executable: observation_importer
    required: false
    parameters: {{input_path: "{export}"}}
""")
    stack = LaunchedStack(stack_file, tmp_path / "launch.log")
    node = Node("commander", context=ros_context)
    try:
        wait_until(lambda: call(node, GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats.observations == 6,
                   60, what="6 observations imported")
        answer = send_goal(node, AskAndAct, "/agent/ask_and_act", AskAndAct.Goal(
            question="Go to where you last saw alice", as_of=to_time_msg(T0 + 27 * HOUR)), timeout=90).result.answer
        assert answer.status == "ok", answer.error + stack.log()
        assert answer.type == "waypoint" and answer.waypoint_id == "kitchen" and answer.text.startswith("Arrived")
        # the simulated base really drove from the origin to the kitchen waypoint
        assert abs(answer.position.x - 1.2) < 0.3 and abs(answer.position.y - 1.2) < 0.3
        assert json.loads(answer.json)["tool_calls"] >= 3
        answer = send_goal(node, AskAndAct, "/agent/ask_and_act", AskAndAct.Goal(
            question="Take me to where you last saw bob", as_of=to_time_msg(T0 + 27 * HOUR)), timeout=90).result.answer
        assert answer.waypoint_id == "entrance" and abs(answer.position.y + 5.0) < 0.3
    finally:
        node.destroy_node()
        assert stack.stop() == 0, stack.log()
