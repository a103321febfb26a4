"""Two robots' memory nodes, launched in their own namespaces (``launch --namespace``), writing
one fleet memory on a real PostgreSQL server; each answers from what the other saw."""
import json

import pytest
from diagnostic_msgs.msg import DiagnosticArray
from embodied_memory_interfaces.msg import IdentityForgotten
from embodied_memory_interfaces.msg import Observation as ObservationMsg
from embodied_memory_interfaces.srv import Ask, GetMemoryStats, QueryMemory
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from embodied_memory.nodes.common import forgotten_qos
from embodied_memory.nodes.conversions import observation_to_msg
from embodied_memory.nodes.service_client import call_service
from embodied_memory.params import StoreParams
from embodied_memory.store import open_store

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
                  text_embedder: hash, image_dim: 16, face_dim: 8, reid_dim: 8, fleet_poll_s: 0.5}}
""")   # no robot_id: each takes its namespace's name
        stacks[robot] = LaunchedStack(path, tmp_path / f"{robot}.log", "--namespace", robot)
    try:
        node = Node("tester", context=ros_context)
        pub = node.create_publisher(ObservationMsg, "/spot1/memory/observations",     # relative name, namespaced
                                    QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        wait_until(lambda: pub.get_subscription_count() > 0, 30, what="spot1's memory node")
        local = observation("spot1", 7, T0 + 70, person="person_0001")     # as spot1's perception names them
        local.observation_id, local.episode_id = "run_1/7", "run_1"
        pub.publish(observation_to_msg(local))
        wait_until(lambda: call(node, GetMemoryStats, "/spot2/memory/stats",
                                GetMemoryStats.Request()).stats.observations == 1, 30, what="spot2 to see spot1's record")
        # as a user types it: embodied-memory query --namespace spot2 person_observations '{"person": "alice"}'
        res = call_service(QueryMemory, "memory/query", QueryMemory.Request(
            tool="person_observations", arguments_json=json.dumps({"person": "spot1.person_0001"})), 20.0,
            namespace="spot2")
        assert res.success, res.error
        assert [(r["id"], r["episode"], r["robot"]) for r in json.loads(res.result_json)] == \
            [("spot1/run_1/7", "spot1/run_1", "spot1")]          # the fleet's ids: qualified by the robot
        assert "as robot spot1" in stacks["spot1"].log() and "as robot spot2" in stacks["spot2"].log()
        # the explorer's "not this run" names its run as spot1 knows it: its own run only, not spot2's of that name
        for ns, found in (("spot1", []), ("spot2", ["spot1/run_1/7"])):
            res = call_service(QueryMemory, "memory/query", QueryMemory.Request(
                tool="visual_similarity", arguments_json=json.dumps(
                    {"embedding": [float(v) for v in local.global_embedding], "k": 3, "exclude_episode": "run_1"})),
                20.0, namespace=ns)
            assert res.success and [r["id"] for r in json.loads(res.result_json)] == found, (ns, res)
        # an operator forgets her on the server: spot2's memory node tells spot2's perception
        forgotten = []
        node.create_subscription(IdentityForgotten, "/spot2/memory/forgotten_identities",
                                 lambda m: forgotten.append(m.identity_id), forgotten_qos())
        operator = open_store(StoreParams(backend="postgres", postgres_url=fleet_database, data_dir=str(tmp_path / "op"),
                                          text_embedder="hash", image_dim=16, face_dim=8, reid_dim=8))
        operator.merge_identities("spot2.person_0004", "spot1.person_0001")   # as a reconcile found her on spot2 too
        assert operator.forget_identity("spot1.person_0001")["sightings_removed"] == 1
        operator.close()
        executor = SingleThreadedExecutor(context=ros_context)
        executor.add_node(node)
        # each perception hears her forgotten under the id it knows her by
        wait_until(lambda: executor.spin_once(timeout_sec=0.1) or "person_0004" in forgotten, 30,
                   what="spot2's memory node to publish the fleet's forget")
        assert "person_0001" not in forgotten              # spot1's own name for her means nothing to spot2
        # each robot reports its clock against the server's (one machine here: about 0)
        offsets = {}
        node.create_subscription(DiagnosticArray, "/diagnostics", lambda m: offsets.update(
            {s.name: v.value for s in m.status for v in s.values if v.key == "fleet_clock_offset_s"}), 10)
        wait_until(lambda: executor.spin_once(timeout_sec=0.1) or "/spot1/memory" in offsets, 30,
                   what="spot1's memory node diagnostics")
        assert abs(float(offsets["/spot1/memory"])) < 0.5
    finally:
        for stack in stacks.values():
            assert stack.stop() == 0, stack.log()


def test_a_robot_whose_server_is_away_keeps_acknowledging_answers_from_its_outbox_then_sends_it(
        fleet_server, fleet_database, ros_context, tmp_path):
    from embodied_memory.nodes.delivery import ack_qos
    from embodied_memory_interfaces.msg import Ack
    path = tmp_path / "spot1.yaml"
    path.write_text(f"""nodes:
  memory:
    executable: memory_node
    parameters: {{backend: postgres, postgres_url: "{fleet_database}", data_dir: "{tmp_path / 'spot1'}",
                  text_embedder: hash, image_dim: 16, face_dim: 8, reid_dim: 8, fleet_poll_s: 0.5}}
  query_agent:
    executable: query_agent_node
    parameters: {{planner: rules, robot_id: auto}}
""")
    stack = LaunchedStack(path, tmp_path / "spot1.log", "--namespace", "spot1")
    node = Node("tester", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    acked = set()
    node.create_subscription(Ack, "/spot1/memory/acks", lambda m: acked.add((m.id, m.status)), ack_qos())
    pub = node.create_publisher(ObservationMsg, "/spot1/memory/observations",
                                QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))

    def send(i, person=""):
        local = observation("spot1", i, T0 + 60 * i, person=person)
        local.observation_id, local.episode_id = f"run_1/{i}", "run_1"
        pub.publish(observation_to_msg(local))
        wait_until(lambda: executor.spin_once(timeout_sec=0.1) or (f"run_1/{i}", Ack.STORED) in acked, 40,
                   what=f"observation {i} acknowledged")

    def ask():
        return call_service(QueryMemory, "memory/query", QueryMemory.Request(
            tool="person_observations", arguments_json=json.dumps({"person": "spot1.person_0001"})), 30.0,
            namespace="spot1")
    try:
        wait_until(lambda: pub.get_subscription_count() > 0, 30, what="spot1's memory node")
        send(1)
        fleet_server.kill()                                   # the link to the server goes
        try:
            send(2, "person_0001")                            # acknowledged all the same: kept on the robot
            send(3, "person_0001")
            res = ask()
            assert res.success, res.error
            assert sorted(r["id"] for r in json.loads(res.result_json)) == ["spot1/run_1/2", "spot1/run_1/3"]
            assert "stale" in res.notice and "2 observations" in res.notice
            answer = call_service(Ask, "agent/ask", Ask.Request(question="What did you see in the lab?"), 60.0,
                                  namespace="spot1").answer           # the robot says its view may be stale
            assert answer.status == "ok" and "the fleet's view is stale" in answer.text, answer
        finally:
            fleet_server.start()
        operator = open_store(StoreParams(backend="postgres", postgres_url=fleet_database,
                                          data_dir=str(tmp_path / "op"), text_embedder="hash", image_dim=16,
                                          face_dim=8, reid_dim=8))
        try:
            def counts():
                return dict(operator._conn().execute(
                    "SELECT observation_id, COUNT(*) FROM observations GROUP BY observation_id").fetchall())
            wait_until(lambda: len(counts()) == 3, 60, what="the outbox sent to the server")
            assert counts() == {"spot1/run_1/1": 1, "spot1/run_1/2": 1, "spot1/run_1/3": 1}
        finally:
            operator.close()
        res = ask()
        assert res.success and not res.notice and len(json.loads(res.result_json)) == 2
        assert "keeping them in the outbox" in stack.log() and "handed to the fleet's server" in stack.log()
    finally:
        node.destroy_node()
        assert stack.stop() == 0, stack.log()
