"""Parameters over DDS (nodes/parameters.py): every field declared with a descriptor; what
``ros2 param set`` does (rcl_interfaces/srv/SetParameters on /<node>/set_parameters): a dynamic
parameter takes effect, a read-only one is refused (rclpy: read-only), an invalid value is
refused with the validation reason; unknown overrides fail at start-up; names remap."""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from contextlib import contextmanager

import cv2
import numpy as np
import pytest
import rclpy
from embodied_memory_interfaces.srv import Ask, GetMemoryStats
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType
from rcl_interfaces.srv import DescribeParameters, ListParameters, SetParameters
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CompressedImage

from embodied_memory.config import ConfigError, field_descriptions
from embodied_memory.nodes.common import to_time_msg
from embodied_memory.params import FrameSelectorNodeParams, QueryAgentNodeParams

from rosutil import VENV_BIN, call, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def contexts():
    """Two DDS participants: the node under test, and the operator's side (`ros2 param ...`)."""
    made = []
    for _ in range(2):
        context = Context()
        rclpy.init(context=context, signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
        made.append(context)
    yield made
    for context in made:
        if context.ok():
            rclpy.shutdown(context=context)


@contextmanager
def spinning(node: Node):
    """The node serves (its own executor in a thread) until the block ends; then it is destroyed."""
    stop = threading.Event()
    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)

    def run():
        while not stop.is_set() and node.context.ok():
            executor.spin_once(timeout_sec=0.02)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield node
    finally:
        stop.set()
        thread.join(timeout=5)
        executor.remove_node(node)
        getattr(node, "close", lambda: None)()
        node.destroy_node()


def set_param(client: Node, node: str, name: str, value):
    """What ``ros2 param set NODE NAME VALUE`` sends; the result for that parameter."""
    msg = ParameterMsg(name=name, value=Parameter(name, value=value).get_parameter_value())
    res = call(client, SetParameters, f"{node}/set_parameters", SetParameters.Request(parameters=[msg]))
    assert len(res.results) == 1
    return res.results[0]


def describe_all(client: Node, node: str) -> dict:
    names = call(client, ListParameters, f"{node}/list_parameters", ListParameters.Request()).result.names
    res = call(client, DescribeParameters, f"{node}/describe_parameters", DescribeParameters.Request(names=names))
    return {d.name: d for d in res.descriptors}


def _jpeg(i: int) -> bytes:
    rng = np.random.default_rng(i)
    image = cv2.resize(rng.integers(0, 255, (6, 8, 3), dtype=np.uint8), (64, 48), interpolation=cv2.INTER_NEAREST)
    return cv2.imencode(".jpg", image)[1].tobytes()


def test_frame_selector_parameters_over_dds(contexts):
    """flush_after_s (dynamic) set over DDS closes the open segment: keyframes appear that the
    start-up value (an hour) would have held back; read-only and invalid sets are refused."""
    from embodied_memory.nodes.frame_selector_node import FrameSelectorNode
    prefix = "/ptest"
    values = dict(policy="uniform", segment_s=1000.0, frames_per_segment=2, image_topic=f"{prefix}/image/compressed",
                  odom_topic="", tf_topic="", tf_static_topic="", waypoint_topic="", depth_topic="",
                  camera_info_topic="", keyframes_topic=f"{prefix}/keyframes", acks_topic=f"{prefix}/acks",
                  progress_topic=f"{prefix}/frames_processed", episode_id="ptest", transform_wait_s=0.1,
                  flush_after_s=3600)                                   # an integer for a float: coerced
    selector = FrameSelectorNode(context=contexts[0],
                                 parameter_overrides=[Parameter(k, value=v) for k, v in values.items()])
    assert selector.params.flush_after_s == 3600.0
    assert selector.get_parameter("flush_after_s").type_ == Parameter.Type.DOUBLE
    operator = Node("operator", context=contexts[1])
    camera = operator.create_publisher(CompressedImage, values["image_topic"],
                                       QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE))
    with spinning(selector):
        # descriptors: every field, typed, described, read-only unless dynamic
        described = describe_all(operator, "/frame_selector")
        descriptions = field_descriptions(FrameSelectorNodeParams)
        for name in descriptions:
            d = described[name]
            assert d.description.startswith(descriptions[name]) and len(d.description) > 10, d
            assert d.read_only == (name not in FrameSelectorNodeParams.DYNAMIC), name
            assert d.type != ParameterType.PARAMETER_NOT_SET, name
        assert described["flush_after_s"].type == ParameterType.PARAMETER_DOUBLE
        assert described["policy"].type == ParameterType.PARAMETER_STRING
        assert "restart" in described["policy"].description
        assert not described["use_sim_time"].read_only

        wait_until(lambda: camera.get_subscription_count() > 0, 20, what="frame selector's image subscription")
        sent, deadline = 0, time.monotonic() + 60
        while selector.processed < 4:                   # frames without a transform go on after 0.1 s
            assert time.monotonic() < deadline, f"{sent} frames sent, {selector.frames} received, " \
                                                f"{selector.processed} processed"
            msg = CompressedImage(format="jpeg", data=_jpeg(sent))
            msg.header.stamp = to_time_msg(1_700_000_000.0 + 0.1 * sent)
            camera.publish(msg)
            sent += 1
            time.sleep(0.1)
        time.sleep(1.0)   # a flush would need an hour of silence: none may come from this pause
        assert selector.keyframes == 0, "the segment was closed before flush_after_s changed"

        refused = set_param(operator, "/frame_selector", "policy", "psfr")
        assert not refused.successful and "read-only" in refused.reason, refused.reason   # rclpy refuses it
        assert selector.params.policy == "uniform"
        refused = set_param(operator, "/frame_selector", "flush_after_s", "soon")
        assert not refused.successful and "type" in refused.reason.lower(), refused.reason
        assert selector.params.flush_after_s == 3600.0

        done = set_param(operator, "/frame_selector", "flush_after_s", 1.0)
        assert done.successful, done.reason
        assert selector.params.flush_after_s == 1.0
        wait_until(lambda: selector.keyframes >= 1, 30, what="the flush that flush_after_s=1 allows")
        print(f"\n{selector.processed} frames processed; {selector.keyframes} keyframes after flush_after_s=1")
        assert set_param(operator, "/frame_selector", "use_sim_time", False).successful
    operator.destroy_node()


def test_query_agent_validates_dynamic_parameters_and_remaps_its_service(contexts):
    """planner is dynamic: a value the dataclass's validate() rejects is refused with its reason,
    a valid one reaches the agent; -r /agent/ask:=... moves the Ask service (absolute names remap)."""
    from embodied_memory.nodes.query_agent_node import QueryAgentNode
    agent = QueryAgentNode(context=contexts[0], cli_args=["--ros-args", "-r", "/agent/ask:=/ptest/agent/ask", "-r", "__node:=ptest_agent"],
                           parameter_overrides=[Parameter("planner", value="auto"),
                                                Parameter("memory_timeout_s", value=1),
                                                Parameter("question_timeout_s", value=5.0),
                                                Parameter("memory_query_service", value="/ptest/no_memory")])
    operator = Node("operator", context=contexts[1])
    with spinning(agent):
        described = describe_all(operator, "/ptest_agent")
        assert {n for n, d in described.items() if not d.read_only} >= set(QueryAgentNodeParams.DYNAMIC)
        assert described["ask_service"].read_only and described["max_concurrent_questions"].read_only
        assert all(described[n].description for n in field_descriptions(QueryAgentNodeParams))

        refused = set_param(operator, "/ptest_agent", "planner", "llm")
        assert not refused.successful and "needs llm_base_url" in refused.reason, refused.reason
        refused = set_param(operator, "/ptest_agent", "planner", "oracle")
        assert not refused.successful and "unknown 'oracle'" in refused.reason, refused.reason
        refused = set_param(operator, "/ptest_agent", "max_queued_questions", 3)
        assert not refused.successful and "read-only" in refused.reason, refused.reason
        assert agent.agent.params.planner == "auto"

        done = set_param(operator, "/ptest_agent", "planner", "rules")
        assert done.successful, done.reason
        assert agent.params.planner == "rules" and agent.agent.params.planner == "rules"

        wait_until(lambda: "/ptest/agent/ask" in {n for n, _ in operator.get_service_names_and_types()}, 20,
                   what="the remapped Ask service")
        # this node's services (other tests' agents may share the domain)
        names = {n for n, _ in operator.get_service_names_and_types_by_node("ptest_agent", "/")}
        assert "/ptest/agent/ask" in names and "/agent/ask" not in names
        answer = call(operator, Ask, "/ptest/agent/ask", Ask.Request(question="where is my mug?"), timeout=60,
                      attempt_s=60).answer
        planner = json.loads(answer.json)["planner"]
        print(f"\nremapped Ask answered: [{answer.status}] {planner} {answer.error[:100]!r}")
        assert answer.status and planner, answer.json
    operator.destroy_node()


def test_unknown_override_is_a_config_error(ros_context):
    from embodied_memory.nodes.query_agent_node import QueryAgentNode
    with pytest.raises(ConfigError, match=r"node /query_agent parameters: unknown parameter\(s\) bogus_key; known: "):
        QueryAgentNode(context=ros_context, parameter_overrides=[Parameter("bogus_key", value=3),
                                                                  Parameter("use_sim_time", value=False)])
    with pytest.raises(ConfigError, match="memory_timeout_s: must be > 0"):
        QueryAgentNode(context=ros_context, parameter_overrides=[Parameter("memory_timeout_s", value=0)])


def test_memory_services_remap_over_dds(tmp_path, ros_context):
    """The memory node's fixed absolute service names (/memory/stats, ...) move with -r."""
    env = {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    proc = subprocess.Popen([str(VENV_BIN / "memory_node"), "--ros-args",
                             "-r", "/memory/stats:=/robot7/memory/stats", "-r", "/memory/query:=/robot7/memory/query",
                             "-p", f"data_dir:={tmp_path / 'store'}", "-p", "text_embedder:=hash",
                             "-r", "__node:=remapped_memory", "-p", "autostart:=true"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    node = Node("remap_tester", context=ros_context)
    try:
        stats = call(node, GetMemoryStats, "/robot7/memory/stats", GetMemoryStats.Request(), timeout=60).stats
        assert stats.observations == 0 and stats.data_dir.endswith("store"), stats

        def listed_services() -> set[str]:    # the graph may lag the first answer; /memory/forget stays where it was
            if "remapped_memory" not in node.get_node_names():
                return set()
            names = {n for n, _ in node.get_service_names_and_types_by_node("remapped_memory", "/")}
            return names if "/memory/forget" in names else set()
        names = wait_until(listed_services, 30, what="the remapped node's unremapped /memory/forget in the graph")
        assert "/robot7/memory/query" in names and "/memory/stats" not in names and "/memory/query" not in names
    finally:
        node.destroy_node()
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
        print(out[-2000:])


def test_every_node_parameter_has_a_ros_type_and_a_description():
    import dataclasses
    import typing

    from embodied_memory.config import dynamic_fields
    from embodied_memory.nodes.parameters import parameter_type
    from embodied_memory.params import NODE_PARAMS
    for executable, cls in NODE_PARAMS.items():
        hints = typing.get_type_hints(cls)
        descriptions = field_descriptions(cls)
        dynamic = dynamic_fields(cls)          # raises on a name that is no field
        for f in dataclasses.fields(cls):
            assert parameter_type(hints[f.name]) is not None, f"{executable}.{f.name}: {hints[f.name]}"
            assert descriptions[f.name].strip(), f"{executable}.{f.name}"
        print(f"{executable}: {len(descriptions)} parameters, dynamic: {', '.join(sorted(dynamic)) or '-'}")
