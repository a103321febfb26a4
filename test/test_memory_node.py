"""Integration: the memory node's topics and services over real DDS, node in its own process."""
import json
import math
import time

import pytest
from embodied_memory_interfaces.msg import Observation as ObservationMsg
from embodied_memory_interfaces.srv import Forget, GetMemoryStats, NameIdentity, QueryMemory
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from visualization_msgs.msg import MarkerArray

from embodied_memory.nodes.conversions import observation_to_msg
from embodied_memory.types import Observation, PersonSighting, Pose

from rosutil import LaunchedStack, call, wait_until

pytestmark = pytest.mark.integration
T0 = 1_800_000_000.0


@pytest.fixture
def memory_stack(tmp_path):
    path = tmp_path / "stack.yaml"
    path.write_text(f"""nodes:
  memory:
    executable: memory_node
    parameters: {{data_dir: "{tmp_path / 'store'}", text_embedder: hash, markers_period_s: 0.3}}
""")
    stack = LaunchedStack(path, tmp_path / "launch.log")
    yield stack
    assert stack.stop() == 0, stack.log()


def message(i, person="", x=1.0):
    obs = Observation(f"n{i}", T0 + i, "ep", Pose(x, 2.0, 0.0, 0.5), description=f"a green plant {i}",
                      waypoint_id="lobby", people=[PersonSighting((1, 1, 5, 9), person, 0.8)] if person else [])
    msg = observation_to_msg(obs)
    msg.image.format = "jpeg"
    msg.image.data = b"\xff\xd8\xff\xe0fake-jpeg-bytes"
    return msg


def test_memory_node_topics_and_services(memory_stack, ros_context, tmp_path):
    node = Node("tester", context=ros_context)
    pub = node.create_publisher(ObservationMsg, "/memory/observations",
                                QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE))
    wait_until(lambda: pub.get_subscription_count() > 0, 20, what="memory node subscription")
    pub.publish(message(0, "person_0001"))
    pub.publish(message(1, x=float("nan")))           # rejected, node keeps running
    pub.publish(message(2, "person_0002"))
    pub.publish(message(3, "person_0001"))

    def stored():
        return call(node, GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats.observations
    wait_until(lambda: stored() == 3, 20, what="3 observations")
    assert "rejected observation 'n1'" in memory_stack.log() and "NaN" in memory_stack.log()

    res = call(node, QueryMemory, "/memory/query", QueryMemory.Request(
        tool="person_observations", arguments_json=json.dumps({"person": "person_0001"})))
    rows = json.loads(res.result_json)
    assert [r["id"] for r in rows] == ["n3", "n0"] and math.isclose(rows[0]["yaw"], 0.5, abs_tol=1e-3)  # newest first
    assert rows[1]["image_path"].endswith("n0.jpg")   # the node wrote the JPEG once
    bad_json = call(node, QueryMemory, "/memory/query", QueryMemory.Request(tool="persons_per_day",
                                                                              arguments_json="{oops"))
    assert not bad_json.success

    named = call(node, NameIdentity, "/memory/name_identity",
                 NameIdentity.Request(identity_id="person_0002", display_name="Dana"))
    assert named.success
    res = call(node, QueryMemory, "/memory/query", QueryMemory.Request(
        tool="person_observations", arguments_json='{"person": "dana"}'))
    assert [r["id"] for r in json.loads(res.result_json)] == ["n2"]

    forget = call(node, Forget, "/memory/forget", Forget.Request(mode="identity", identity_id="person_0001"))
    assert forget.success and forget.sightings_removed == 2
    res = call(node, QueryMemory, "/memory/query", QueryMemory.Request(
        tool="person_observations", arguments_json='{"person": "person_0001"}'))
    assert not res.success and "unknown person" in res.error
    bad = call(node, Forget, "/memory/forget", Forget.Request(mode="everything"))
    assert not bad.success and "unknown mode" in bad.message

    # latched markers: a late subscriber still gets the last array
    got = []
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                         reliability=ReliabilityPolicy.RELIABLE)
    node.create_subscription(MarkerArray, "/memory/markers", got.append, latched)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (got and len(got[-1].markers[1].points) == 1):
        executor.spin_once(timeout_sec=0.1)
    assert got and {m.ns for m in got[-1].markers} == {"observations", "person_sightings"}
    assert len(got[-1].markers[0].points) == 3 and len(got[-1].markers[1].points) == 1
    node.destroy_node()
