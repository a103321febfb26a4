"""Integration: consolidation in a running stack. The perception node re-clusters the memory
node's stored face tracks on /perception/consolidate and sends each split as an IdentitySplit;
the memory node relabels the store and acknowledges it; a change sent again or malformed
changes nothing and the nodes keep serving."""
import json
import time

import cv2
import numpy as np
import pytest
from embodied_memory_interfaces.msg import Ack, IdentitySplit
from embodied_memory_interfaces.msg import Keyframe as KeyframeMsg
from embodied_memory_interfaces.srv import Consolidate, QueryMemory
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from embodied_memory.nodes.common import keyframe_qos, to_time_msg
from rosutil import LaunchedStack, call, wait_until
from store_fixtures import T0
from test_consolidate_memory import _far_ann, memory

pytestmark = pytest.mark.integration


def launch(tmp_path, perception_extra=""):
    data = tmp_path / "mem"
    store = memory(data)       # Ann 6 times, then Ben 4 times under Ann's id (person_0001); Cid beside Ann once
    _far_ann(store)            # and Ann far away (o20), unidentified
    store.close()
    path = tmp_path / "stack.yaml"
    path.write_text(f"""nodes:
  memory:
    executable: memory_node
    parameters: {{data_dir: "{data}", text_embedder: hash, image_dim: 16, face_dim: 32, reid_dim: 8}}
  perception:
    executable: perception_node
    parameters: {{data_dir: "{data}", text_embedder: hash, image_embedder: none, person_detector: none,
                  face_backend: none, reid: none{perception_extra}}}
""")
    return LaunchedStack(path, tmp_path / "launch.log")


@pytest.fixture
def stack(tmp_path):
    launched = launch(tmp_path, ", attach_after_idle_s: 0.0")
    yield launched
    assert launched.stop() == 0, launched.log()


def sightings_of(node, person):
    res = call(node, QueryMemory, "/memory/query", QueryMemory.Request(
        tool="person_observations", arguments_json=json.dumps({"person": person})))
    return [r["id"] for r in json.loads(res.result_json)] if res.success else []


def test_a_split_from_perception_relabels_the_memory_and_is_acknowledged(stack, ros_context):
    node = Node("tester", context=ros_context)
    acks = []
    node.create_subscription(Ack, "/memory/acks", acks.append, QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    wait_until(lambda: len(sightings_of(node, "person_0001")) == 10, 60, what="the memory node serving")

    proposal = call(node, Consolidate, "/perception/consolidate", Consolidate.Request(dry_run=True), timeout=60)
    assert proposal.success and (proposal.splits, proposal.merges) == (1, 0), proposal.message
    assert "dry run" in proposal.message and len(sightings_of(node, "person_0001")) == 10

    done = call(node, Consolidate, "/perception/consolidate", Consolidate.Request(dry_run=False), timeout=60)
    assert done.success and done.splits == 1 and done.relabelled == 4, done.message   # o20 (13 px) is not clustered
    wait_until(lambda: len(sightings_of(node, "person_0003")) == 4, 30, what="the split applied by the memory")
    assert sorted(sightings_of(node, "person_0003")) == ["o6", "o7", "o8", "o9"]
    assert len(sightings_of(node, "person_0001")) == 6

    def acked(change_id):
        executor.spin_once(timeout_sec=0.1)
        return [a.status for a in acks if a.id == change_id]

    def split_acked():
        executor.spin_once(timeout_sec=0.1)
        return next((a.id for a in acks if a.id.startswith("split:person_0001>person_0003:")
                     and a.status == Ack.STORED), None)
    wait_until(split_acked, 30, what="the split's Ack")
    change_id = split_acked()

    # the same change again (a resend after a restart): acknowledged, nothing moves; a malformed one is refused
    pub = node.create_publisher(IdentitySplit, "/memory/identity_changes",
                                QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
    wait_until(lambda: pub.get_subscription_count() > 0, 20, what="the memory's subscription")
    again = IdentitySplit(change_id=change_id, kind="split", source_id="person_0001", target_id="person_0003",
                          sighting_ids=[8, 9, 10, 11])       # Ben's: o6..o9 (o2 holds sightings 3 and 4)
    bad = IdentitySplit(change_id="bogus", kind="teleport", source_id="person_0001", target_id="person_0009",
                        sighting_ids=[1])
    pub.publish(again)
    pub.publish(bad)
    wait_until(lambda: acked("bogus") == [Ack.REJECTED] and len(acked(change_id)) >= 2, 30, what="both Acks")
    assert all(status == Ack.STORED for status in acked(change_id))
    assert len(sightings_of(node, "person_0001")) == 6 and len(sightings_of(node, "person_0003")) == 4
    # perception keeps serving; the next pass has nothing to do
    later = call(node, Consolidate, "/perception/consolidate", Consolidate.Request(dry_run=True), timeout=60)
    assert later.success and (later.splits, later.merges, later.relabelled) == (0, 0, 0), later.message
    node.destroy_node()


def test_an_idle_robot_attaches_the_far_faces_it_could_not_tell_then(tmp_path, ros_context):
    """No attach pass before perception has perceived anything; once a keyframe came and the
    robot stayed idle ``attach_after_idle_s``, Ann's far face (o20) is given her id, by a
    journalled assignment the memory applies, while her chained identity is not split."""
    launched = launch(tmp_path, ", attach_after_idle_s: 1.0")
    try:
        node = Node("tester", context=ros_context)
        wait_until(lambda: len(sightings_of(node, "person_0001")) == 10, 60, what="the memory node serving")
        time.sleep(3.0)                          # idle, but nothing perceived yet: no pass
        assert "o20" not in sightings_of(node, "person_0001")
        keyframes = node.create_publisher(KeyframeMsg, "/memory/keyframes", keyframe_qos())
        wait_until(lambda: keyframes.get_subscription_count() > 0, 30, what="perception's subscription")
        kf = KeyframeMsg(keyframe_id="idle/0", episode_id="day1")
        kf.header.stamp = to_time_msg(T0 + 9000)
        kf.compressed_image.format = "jpeg"
        kf.compressed_image.data = cv2.imencode(".jpg", np.zeros((48, 64, 3), np.uint8))[1].tobytes()
        keyframes.publish(kf)
        wait_until(lambda: "o20" in sightings_of(node, "person_0001"), 60, what="the attach pass applied")
        assert len(sightings_of(node, "person_0001")) == 11      # Ben's four were not split off
        node.destroy_node()
    finally:
        assert launched.stop() == 0, launched.log()
