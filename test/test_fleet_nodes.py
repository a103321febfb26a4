"""Two robots' memory nodes, launched in their own namespaces (``launch --namespace``), writing
one fleet memory on a real PostgreSQL server; each answers from what the other saw."""
import json

import pytest
from embodied_memory_interfaces.msg import Observation as ObservationMsg
from embodied_memory_interfaces.srv import GetMemoryStats, QueryMemory
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from embodied_memory.nodes.conversions import observation_to_msg
from embodied_memory.nodes.service_client import call_service

from fleet_workers import observation
from rosutil import LaunchedStack, call, wait_until
from store_fixtures import T0

pytestmark = pytest.mark.integration


def test_two_namespaced_robots_share_one_memory_and_answer_with_the_robot_that_saw_it(
        fleet_database, ros_context, tmp_path):
    stacks = {}
    for robot in ("spot1", "spot2"):
        path = tmp_path / f"{robot}.yaml"
        path.write_text(f"""nodes:
  memory:
    executable: memory_node
    parameters: {{backend: postgres, postgres_url: "{fleet_database}", data_dir: "{tmp_path / robot}",
                  text_embedder: hash, image_dim: 16, face_dim: 8, reid_dim: 8}}
""")   # no robot_id: each takes its namespace's name
        stacks[robot] = LaunchedStack(path, tmp_path / f"{robot}.log", "--namespace", robot)
    try:
        node = Node("tester", context=ros_context)
        pub = node.create_publisher(ObservationMsg, "/spot1/memory/observations",     # relative name, namespaced
                                    QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        wait_until(lambda: pub.get_subscription_count() > 0, 30, what="spot1's memory node")
        pub.publish(observation_to_msg(observation("spot1", 7, T0 + 70, person="alice")))
        wait_until(lambda: call(node, GetMemoryStats, "/spot2/memory/stats",
                                GetMemoryStats.Request()).stats.observations == 1, 30, what="spot2 to see spot1's record")
        # as a user types it: embodied-memory query --namespace spot2 person_observations '{"person": "alice"}'
        res = call_service(QueryMemory, "memory/query", QueryMemory.Request(
            tool="person_observations", arguments_json=json.dumps({"person": "alice"})), 20.0, namespace="spot2")
        assert res.success, res.error
        assert [(r["id"], r["robot"]) for r in json.loads(res.result_json)] == [("spot1/7", "spot1")]
        assert "as robot spot1" in stacks["spot1"].log() and "as robot spot2" in stacks["spot2"].log()
    finally:
        for stack in stacks.values():
            assert stack.stop() == 0, stack.log()
