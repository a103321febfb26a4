"""Fuzz over DDS: more than 1,000 malformed requests and messages to every node of a running
stack (memory, query agent, perception, frame selector, navigation bridge). Every service
request is answered (malformed ones with success=false and the error), no node dies, every
node still answers afterwards and no stored record changed."""
import json
import math
import time

import numpy as np
import pytest
from embodied_memory_interfaces.action import NavigateToWaypoint
from embodied_memory_interfaces.msg import Keyframe as KeyframeMsg
from embodied_memory_interfaces.msg import Observation as ObservationMsg
from embodied_memory_interfaces.srv import Ask, Forget, GetMemoryStats, NameIdentity, QueryMemory
from nav_msgs.msg import Odometry
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CompressedImage

from embodied_memory.nodes.common import keyframe_qos, service_qos, to_time_msg
from embodied_memory.nodes.conversions import observation_to_msg
from embodied_memory.store.memory_store import MemoryStore
from embodied_memory.types import Observation, PersonSighting, Pose

from chaos import Listener
from rosutil import LaunchedStack, call, wait_until

pytestmark = pytest.mark.integration
T0 = 1_800_000_000.0
NODES = ("/memory", "/query_agent", "/perception", "/frame_selector")

BAD_VALUES = [None, True, [], [1], {}, {"a": 1}, "", "x" * 1_000_000, "\udcff\ud800", "\x00\x07\x1b[2J", -1, 0,
              1e300, 10 ** 30, -1e300, float("nan"), float("inf"), float("-inf"), 2.5, "2026-13-45",
              [[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]
BAD_JSON = ["{oops", "[]", "null", "1", '"text"', "{" * 5000 + "}" * 5000, "[" * 100_000, '{"a": 1e999}',
            "\xff\xfe", '{"query": "\\ud800"}', "{}" * 1000, '{"n": NaN}', " " * 10]


def _query_requests():
    """(tool, arguments_json, must_fail) for every tool and a few unknown ones."""
    out = []
    for tool, spec in MemoryStore.tool_table().items():
        required = [name for name, arg in spec.items() if arg.required]
        out.append((tool, json.dumps({"no_such_argument": 1}), True))
        if required:
            out.append((tool, "{}", True))                       # missing what it needs
        for name in spec:
            for value in BAD_VALUES:
                out.append((tool, json.dumps({name: value}), False))
        out += [(tool, text, True) for text in BAD_JSON[:6]]
    for tool in ("", "drop_table", "x" * 100_000, "semantic_observations; DROP TABLE observations", "\x00", "__init__",
                 "_conn", "close", "insert", "forget_identity"):
        out.append((tool, "{}", True))
    out += [("people", text, False) for text in BAD_JSON]
    return out


def _forget_requests():
    reqs = [Forget.Request(mode=m) for m in ("", "everything", "x" * 100_000, "IDENTITY", "\x00")]
    reqs += [Forget.Request(mode="identity", identity_id=i) for i in ("", "person_9999", "x" * 1_000_000, "%", "*",
                                                                      "person_0001' OR 1=1 --", "\x00")]
    reqs += [Forget.Request(mode="older_than", older_than_hours=h) for h in (float("nan"), float("inf"), -1.0, -1e300)]
    reqs += [Forget.Request(mode="episode", episode_id=e) for e in ("", "no_such_episode", "x" * 100_000, "%", "*")]
    return reqs


def _name_requests():
    return [NameIdentity.Request(identity_id=i, display_name=n)
            for i in ("", "person_9999", "x" * 100_000, "\x00") for n in ("", "Alice", "x" * 1_000_000, "\x1b[31m")]


def _questions():
    return ["", " ", "x" * 100_000, "\x00\x01\x02\x1b[2J\x7f", "?" * 5000, "Where " * 20000, "\u202e\u0301" * 300,
            "Where did you last see person_9999?", "When was " + "very " * 10000 + "late?", "🤖" * 10000,
            "{\"tool\": \"drop\"}", "Go to the moon", "How long was person_0001 in the kitchen on 9999-99-99?"]


def _bad_observations():
    msgs = []
    for i, change in enumerate(("nan_pose", "inf_stamp", "empty_id", "long_description", "bad_embedding", "bad_id",
                                "nan_box", "bad_person_id")):
        obs = Observation(f"fz{i}", T0 + 100 + i, "fuzz", Pose(1.0, 1.0, 0.0, 0.0), description="fuzz",
                          people=[PersonSighting((1, 1, 5, 5), "person_0001", 0.9)])
        if change == "nan_pose":
            obs.pose = Pose(float("nan"), 0.0, 0.0, 0.0)
        elif change == "inf_stamp":
            obs.stamp = 0.0
        elif change == "empty_id":
            obs.observation_id = ""
        elif change == "long_description":
            obs.description = "x" * 200_000
        elif change == "bad_embedding":
            obs.text_embedding = np.ones(7, np.float32)
        elif change == "bad_id":
            obs.observation_id = "has spaces and ü"
        elif change == "nan_box":
            obs.people[0].box = (float("nan"), 0, 1, 1)
        elif change == "bad_person_id":
            obs.people[0].identity_id = "bad id with spaces"
        msgs.append(observation_to_msg(obs))
    return msgs


@pytest.fixture
def fuzz_stack(tmp_path):
    data = tmp_path / "data"
    path = tmp_path / "stack.yaml"
    path.write_text(f"""nodes:
  memory:
    executable: memory_node
    parameters: {{data_dir: "{data}", markers_period_s: 0.5}}
  query_agent:
    executable: query_agent_node
    parameters: {{planner: rules}}
  perception:
    executable: perception_node
    parameters: {{data_dir: "{data}"}}
  frame_selector:
    executable: frame_selector_node
    parameters: {{episode_id: fuzz_run, policy: uniform}}
  nav_bridge:
    executable: nav_bridge_node
    parameters: {{backend: sim, sim_speed: 50.0}}
""")
    stack = LaunchedStack(path, tmp_path / "launch.log")
    yield stack
    assert stack.stop() == 0, stack.log()


def _spin_all(executor, futures, timeout):
    end = time.monotonic() + timeout
    while not all(f.done() for f in futures) and time.monotonic() < end:
        executor.spin_once(timeout_sec=0.05)
    return [f.result() if f.done() else None for f in futures]


def _snapshot(node):
    def q(tool, **args):
        res = call(node, QueryMemory, "/memory/query", QueryMemory.Request(tool=tool, arguments_json=json.dumps(args)))
        assert res.success, res.error
        return json.loads(res.result_json)
    stats = call(node, GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats
    counts = {k: getattr(stats, k) for k in ("episodes", "observations", "regions", "person_sightings",
                                              "identities", "rules")}   # not bytes_on_disk (WAL, snapshots)
    return {"between": q("observations_between", t_start=0, t_end=1e11, limit=1000), "people": q("people"),
            "waypoints": q("waypoints"), "counts": counts,
            "sightings": [q("person_observations", person=p["person"], limit=1000) for p in q("people")]}


def test_malformed_requests_never_stop_a_node(fuzz_stack, ros_context):
    listener = Listener(ros_context)
    node = Node("fuzzer", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    try:
        pub = node.create_publisher(ObservationMsg, "/memory/observations",
                                    QoSProfile(depth=500, reliability=ReliabilityPolicy.RELIABLE))
        wait_until(lambda: pub.get_subscription_count() > 0, 60, what="the memory node")
        for i in range(6):
            obs = Observation(f"good{i}", T0 + i, "fuzz", Pose(float(i), 2.0, 0.0, 0.1), description=f"a red mug {i}",
                              waypoint_id="kitchen", people=[PersonSighting((1, 1, 5, 9), f"person_000{1 + i % 2}", 0.8)])
            pub.publish(observation_to_msg(obs))
        executor.remove_node(node)
        wait_until(lambda: call(node, GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats.observations == 6,
                   60, what="6 observations")
        before = _snapshot(node)
        executor.add_node(node)

        sent = 0
        query = node.create_client(QueryMemory, "/memory/query", qos_profile=service_qos())
        assert query.wait_for_service(timeout_sec=30)
        requests = _query_requests()
        for start in range(0, len(requests), 25):
            batch = requests[start:start + 25]
            futures = [query.call_async(QueryMemory.Request(tool=t, arguments_json=a)) for t, a, _ in batch]
            results = _spin_all(executor, futures, 60)
            for (tool, args, must_fail), res in zip(batch, results):
                assert res is not None, f"no answer to {tool[:40]} {args[:80]}"
                if must_fail:
                    assert not res.success and res.error, (tool[:40], args[:80])
            sent += len(batch)

        for srv_type, name, reqs in ((Forget, "/memory/forget", _forget_requests()),
                                     (NameIdentity, "/memory/name_identity", _name_requests())):
            client = node.create_client(srv_type, name, qos_profile=service_qos())
            assert client.wait_for_service(timeout_sec=30)
            results = _spin_all(executor, [client.call_async(r) for r in reqs], 60)
            for req, res in zip(reqs, results):
                assert res is not None and res.message, (name, str(req)[:120])
                # an episode that does not exist is a valid request that removes nothing
                assert not res.success or (srv_type is Forget and res.observations_removed == 0 and
                                           res.sightings_removed == 0), (name, str(req)[:120], res.message)
            sent += len(reqs)

        ask = node.create_client(Ask, "/agent/ask", qos_profile=service_qos())
        assert ask.wait_for_service(timeout_sec=30)
        questions = _questions()
        reqs = [Ask.Request(question=q) for q in questions]
        reqs += [Ask.Request(question="Where is the red mug?", as_of=to_time_msg(t), planner=p)
                 for t in (0.0, 1.0, 4e9) for p in ("", "nonexistent", "llm", "x" * 10_000)]
        for start in range(0, len(reqs), 4):
            futures = [ask.call_async(r) for r in reqs[start:start + 4]]
            for res in _spin_all(executor, futures, 120):
                assert res is not None and res.answer.status in ("ok", "no_answer", "error")
        sent += len(reqs)

        # topics: invalid observations, undecodable keyframes, garbage camera frames and NaN odometry
        for msg in _bad_observations():
            pub.publish(msg)
        keyframes = node.create_publisher(KeyframeMsg, "/memory/keyframes", keyframe_qos())
        frames = node.create_publisher(CompressedImage, "/camera/color/image_raw/compressed",
                                       QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
        odom = node.create_publisher(Odometry, "/odom", QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
        # odometry too: a publisher not yet matched loses what it sends (a full run once counted 1 of 27)
        wait_until(lambda: min(keyframes.get_subscription_count(), frames.get_subscription_count(),
                               odom.get_subscription_count()) > 0, 30,
                   what="perception and frame selector subscriptions")
        for i in range(40):
            stamp = to_time_msg(T0 + 200 + i * 0.25)
            kf = KeyframeMsg(keyframe_id=f"fuzz/{i}", episode_id="fuzz")
            kf.header.stamp = stamp
            kf.compressed_image.format, kf.compressed_image.data = "jpeg", bytes(np.random.default_rng(i).integers(0, 255, 500, dtype=np.uint8))
            keyframes.publish(kf)
            o = Odometry()
            o.header.stamp = stamp
            o.pose.pose.position.x = float("nan") if i % 2 else float(i)
            o.pose.pose.orientation.w = math.nan if i % 3 == 0 else 1.0
            odom.publish(o)
            image = CompressedImage(format="jpeg", data=b"\x00garbage" * (i + 1))
            image.header.stamp = stamp
            frames.publish(image)
            time.sleep(0.02)        # a sensor-data subscription keeps a few messages: no burst past its depth
        sent += len(_bad_observations()) + 120

        goals = ActionClient(node, NavigateToWaypoint, "/navigate_to_waypoint")
        assert goals.wait_for_server(timeout_sec=30)
        for waypoint in ("", "no_such_place", "x" * 100_000, "\x01\x02", "kitchen\n; rm -rf /"):
            goal = NavigateToWaypoint.Goal(waypoint_id=waypoint, timeout_s=2.0)
            if waypoint == "":
                goal.pose.pose.position.x = float("nan")
            handle = _spin_all(executor, [goals.send_goal_async(goal)], 30)[0]
            assert handle is not None
            if handle.accepted:
                result = _spin_all(executor, [handle.get_result_async()], 30)[0]
                assert result is not None and not result.result.success
            sent += 1
        print(f"sent {sent} malformed requests and messages")
        assert sent >= 1000

        # every node still answers, nobody died, nothing stored changed
        executor.remove_node(node)
        wait_until(lambda: listener.value("/perception", "dropped.undecodable_image") >= 40, 60,
                   what="perception to drop the 40 undecodable keyframes")
        def rejected():
            return sum(float(v) for k, v in listener.report("/memory").items()
                       if k.startswith("dropped.observation_rejected"))
        wait_until(lambda: rejected() >= len(_bad_observations()), 30,
                   what="the memory to reject every invalid observation")
        assert " died after " not in fuzz_stack.log() and fuzz_stack.process.poll() is None, fuzz_stack.log()[-3000:]
        listener.status.clear()
        wait_until(lambda: all(n in listener.status for n in NODES), 30, what="/diagnostics from every node")
        assert listener.value("/frame_selector", "count.non_finite_poses") >= 20
        assert _snapshot(node) == before
        answer = call(node, Ask, "/agent/ask", Ask.Request(question="Where did you see the red mug?",
                                                           as_of=to_time_msg(T0 + 50)), timeout=60).answer
        assert answer.status == "ok" and answer.waypoint_id == "kitchen", answer
    finally:
        listener.close()
        node.destroy_node()
