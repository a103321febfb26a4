"""End to end over DDS: a real-image bag replayed by `embodied-memory replay` through the
frame selector, perception and memory nodes (each its own process), then asked through the
query agent."""
import json
import os
import subprocess

import pytest
from embodied_memory_interfaces.srv import Ask, GetMemoryStats, QueryMemory
from rclpy.node import Node

from embodied_memory.nodes.common import to_time_msg

from bags import T_START, people_and_faces_bag
from rosutil import VENV_BIN, LaunchedStack, call, wait_until

pytestmark = pytest.mark.integration


def test_bag_replay_through_the_nodes(tmp_path, ros_context):
    people_and_faces_bag(tmp_path / "bag")
    data = tmp_path / "data"
    stack_file = tmp_path / "stack.yaml"
    stack_file.write_text(f"""nodes:
  frame_selector:
    executable: frame_selector_node
    parameters: {{policy: uniform, segment_s: 3.0, frames_per_segment: 2, episode_id: test_run, flush_after_s: 1.0}}
  perception:
    executable: perception_node
    parameters: {{data_dir: "{data}"}}
  memory:
    executable: memory_node
    parameters: {{data_dir: "{data}", markers_period_s: 1.0}}
  query_agent:
    executable: query_agent_node
    parameters: {{planner: rules}}
""")
    stack = LaunchedStack(stack_file, tmp_path / "launch.log")
    node = Node("checker", context=ros_context)
    try:
        env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
        replay = subprocess.run([str(VENV_BIN / "embodied-memory"), "replay", str(tmp_path / "bag"), "--rate", "paced",
                                 "--wait", "60"], capture_output=True, text=True, timeout=300, env=env)
        assert replay.returncode == 0, replay.stderr + stack.log()
        assert "/camera/color/image_raw/compressed: 150" in replay.stdout
        stats = lambda: call(node, GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats  # noqa: E731
        wait_until(lambda: stats().observations == 10, 120, what="10 keyframes stored")
        s = stats()
        assert s.identities == 2 and s.person_sightings >= 10, s

        def query(tool, **args):
            res = call(node, QueryMemory, "/memory/query", QueryMemory.Request(tool=tool, arguments_json=json.dumps(args)))
            assert res.success, res.error
            return json.loads(res.result_json)
        office = query("waypoint_observations", waypoint_id="office")
        assert len(office) == 2 and office[0]["id"].startswith("test_run/") and office[0]["persons"]
        assert os.path.exists(office[0]["image_path"])
        obama = office[0]["persons"][0]
        assert {r["waypoint"] for r in query("person_observations", person=obama)} == {"office", "kitchen"}
        assert all("people visible" in r["description"] for r in query("waypoint_observations", waypoint_id="lobby"))

        answer = call(node, Ask, "/agent/ask", Ask.Request(question="Who was in the kitchen?",
                                                           as_of=to_time_msg(T_START + 20)), timeout=60).answer
        assert answer.status == "ok" and len(answer.persons) == 2 and obama in answer.persons
        answer = call(node, Ask, "/agent/ask", Ask.Request(question=f"Where did you last see {obama}?",
                                                           as_of=to_time_msg(T_START + 20)), timeout=60).answer
        assert answer.waypoint_id == "kitchen" and answer.has_position
    finally:
        node.destroy_node()
        assert stack.stop() == 0, stack.log()
