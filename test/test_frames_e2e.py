"""Poses in a fixed frame (issue 13, frames): a bag whose localiser relocalises (map->odom jumps
exactly as much as the odometry drifts back) replayed over DDS into the frame selector,
perception and memory nodes with ``fixed_frame: map``: stored positions are continuous in
``map`` (the odom-frame pose jumps by metres). Frames whose transform never arrives are stored
with the waypoint only after ``transform_wait_s`` and counted on /diagnostics. The same lookup
in the library ingest, and pose-less observations through the store and the agent."""
import json
import math
import threading

import pytest

from embodied_memory.agent.query_agent import AgentParams, QueryAgent
from embodied_memory.agent.tools import StoreMemoryClient
from embodied_memory.ingest.offline import TopicParams, ingest_bag
from embodied_memory.ingest.selection import SelectionParams
from embodied_memory.params import FrameSelectorNodeParams, StoreParams
from embodied_memory.perception.pipeline import Perception, PerceptionParams
from embodied_memory.records_io import observation_from_dict, observation_to_dict
from embodied_memory.store import open_store
from embodied_memory.types import Observation, Pose

from bags import T_START, relocalising_tf_bag

LIGHT_PERCEPTION = dict(text_embedder="hash", image_embedder="none", person_detector="none", face_backend="none",
                        reid="none")
TF_UNTIL_S, FRAMES_WITHOUT_TF = 9.0, 10      # /tf stops at 9 s; frames at 9.025 .. 9.925 s never get one


def _steps(points) -> list[float]:
    return [math.hypot(b[0] - a[0], b[1] - a[1]) for a, b in zip(points, points[1:])]


def _check_positions(rows, info) -> tuple[list, list]:
    """Stored rows against the bag's ground truth: (posed rows, pose-less rows)."""
    def frame_at(t: float) -> dict:
        return min(info["frames"], key=lambda f: abs(f["stamp"] - t))
    posed = sorted((r for r in rows if r["position"] is not None), key=lambda r: r["t"])
    poseless = [r for r in rows if r["position"] is None]
    for r in posed:
        f = frame_at(r["t"])
        assert math.hypot(r["position"][0] - f["map"][0], r["position"][1] - f["map"][1]) < 0.03, (r, f["map"])
        assert abs(r["position"][2] - 0.1) < 1e-6            # base_footprint -> base_link from /tf_static
        assert r["t"] < info["tf_until"]
    map_steps = _steps([r["position"] for r in posed])
    odom_steps = _steps([frame_at(r["t"])["odom"] for r in posed])
    print(f"\n{len(posed)} stored with a pose, {len(poseless)} without; max step between consecutive stored "
          f"positions: {max(map_steps):.2f} m in map, {max(odom_steps):.2f} m in odom")
    assert any(r["t"] < info["jump_at"] for r in posed) and any(r["t"] > info["jump_at"] for r in posed)
    assert max(map_steps) < 0.7                      # 0.5 m/s, keyframes <= 1 s apart: continuous
    assert max(odom_steps) > 3.0                     # while the odometry jumped by 3.6 m
    assert poseless and all(r["t"] > info["tf_until"] and r["waypoint"] == "dock" and r["yaw"] is None
                            for r in poseless)
    return posed, poseless


def test_library_ingest_looks_poses_up_in_the_fixed_frame(tmp_path):
    info = relocalising_tf_bag(tmp_path / "bag", tf_until_s=TF_UNTIL_S)
    store = open_store(StoreParams(data_dir=str(tmp_path / "s"), text_embedder="hash"))
    perception = Perception(PerceptionParams(data_dir=str(tmp_path / "s"), **LIGHT_PERCEPTION))
    report = ingest_bag(str(tmp_path / "bag"), store, perception, progress=False,
                        topics=TopicParams(fixed_frame="map", odom_topic=""),
                        selection=SelectionParams(policy="uniform", segment_s=1.0, frames_per_segment=2))
    print(report.summary())
    assert report.frames == 100 and report.without_pose == FRAMES_WITHOUT_TF and report.skipped_no_pose == 0
    rows = store.observations_between(0, 1e12, limit=1000)
    assert len(rows) == report.stored == report.keyframes
    _check_positions(rows, info)
    # in odom (the default fixed frame) the same bag's positions jump
    odom_store = open_store(StoreParams(data_dir=str(tmp_path / "o"), text_embedder="hash"))
    ingest_bag(str(tmp_path / "bag"), odom_store, perception, progress=False, topics=TopicParams(odom_topic=""),
               selection=SelectionParams(policy="uniform", segment_s=1.0, frames_per_segment=2))
    odom_rows = sorted((r for r in odom_store.observations_between(0, 1e12, limit=1000) if r["position"]),
                       key=lambda r: r["t"])
    assert max(_steps([r["position"] for r in odom_rows])) > 3.0
    store.close(), odom_store.close()


def test_poseless_observations_in_the_store_and_the_agent(tmp_path):
    store = open_store(StoreParams(data_dir=str(tmp_path / "s"), text_embedder="hash", image_dim=16))
    t = T_START
    stored = [Observation("posed", t, "ep", Pose(1.0, 2.0, 0.0, 0.5), description="a green umbrella",
                          waypoint_id="dock"),
              Observation("blind", t + 10, "ep", None, description="a green umbrella", waypoint_id="dock"),
              Observation("lost", t + 20, "ep", None, description="a green umbrella")]
    result = store.insert_batch(stored)
    assert sorted(result.stored) == ["blind", "lost", "posed"] and not result.rejected
    nan = store.insert_batch([Observation("nan", t + 30, "ep", Pose(math.nan, 0.0))])
    assert "nan" in nan.rejected and "non_finite_pose" in nan.rejected["nan"]
    blind = store.get_observation("blind")
    assert blind["position"] is None and blind["yaw"] is None and blind["waypoint"] == "dock"
    assert [r["id"] for r in store.observations_near(1.0, 2.0)] == ["posed"]   # no position, not near anything
    assert [r["id"] for r in store.observations_near(0.0, 0.0, radius=100.0, k=0)] == ["posed"]
    wps = store.waypoints()
    assert wps == [{"waypoint": "dock", "observations": 1, "position": [1.0, 2.0], "last_visit": wps[0]["last_visit"]}]
    assert store.waypoints(before=t + 100) == wps             # the other path (SQL over observations) agrees
    assert {r["id"] for r in store.waypoint_observations("dock")} == {"posed", "blind"}
    assert store.recent_positions(10) == [(1.0, 2.0, 0.0, False)]
    assert json.loads(json.dumps(store.observations_between(0, 1e12)))[1]["position"] is None
    # export / import between robots keeps "no pose"
    again = observation_from_dict(json.loads(json.dumps(observation_to_dict(stored[1]))))
    assert again.pose is None and again.waypoint_id == "dock"
    # the agent answers from a pose-less sighting with its waypoint, or says the position is unknown
    agent = QueryAgent(StoreMemoryClient(store), AgentParams(planner="rules"))
    ans = agent.ask("Where did you last see the green umbrella?", as_of=t + 15)
    assert ans.status == "ok" and ans.waypoint == "dock" and ans.position is None, ans
    ans = agent.ask("Where did you last see the green umbrella?", as_of=t + 25)
    assert ans.status == "ok" and ans.position is None and "unknown position" in ans.text, ans
    ans = agent.ask("Did you see a green umbrella?", as_of=t + 25)
    assert ans.status == "ok" and ans.binary == "yes" and ans.position is None, ans
    store.close()


def test_transform_parameters_are_validated():
    from embodied_memory.config import ConfigError, parse_params
    assert FrameSelectorNodeParams().fixed_frame == "odom"
    for bad in ({"fixed_frame": ""}, {"fixed_frame": "/map"}, {"base_frame": "odom"}, {"transform_wait_s": -1.0},
                {"tf_cache_s": 0.0}):
        with pytest.raises(ConfigError):
            parse_params(FrameSelectorNodeParams, bad, "frame_selector")


# -- over DDS -------------------------------------------------------------------------------------
class Diagnostics:
    """The latest /diagnostics values of one node."""

    def __init__(self, context, node_name: str):
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        self.node = Node("frames_diagnostics", context=context)
        self.values: dict[str, str] = {}
        self.node.create_subscription(DiagnosticArray, "/diagnostics", lambda m: self.values.update(
            {kv.key: kv.value for s in m.status if s.name.strip("/") == node_name for kv in s.values}), 50)
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self):
        while not self._stop.is_set():
            self._executor.spin_once(timeout_sec=0.05)

    def get(self, key: str, default=None):
        return self.values.get(key, default)

    def close(self):
        self._stop.set()
        self._thread.join(5)
        self._executor.shutdown()
        self.node.destroy_node()


@pytest.mark.integration
def test_relocalisation_over_dds_keeps_positions_continuous_in_map(tmp_path, ros_context):
    from embodied_memory_interfaces.srv import GetMemoryStats, QueryMemory
    from rclpy.node import Node

    from embodied_memory.nodes.replay import replay

    from rosutil import LaunchedStack, call, wait_until
    info = relocalising_tf_bag(tmp_path / "bag", tf_until_s=TF_UNTIL_S)
    data = tmp_path / "data"
    light = ", ".join(f"{k}: {v}" for k, v in LIGHT_PERCEPTION.items())
    stack_file = tmp_path / "stack.yaml"
    stack_file.write_text(f"""stack: frames
nodes:
  frame_selector:
    executable: frame_selector_node
    parameters: {{policy: uniform, segment_s: 1.0, frames_per_segment: 2, episode_id: frames, flush_after_s: 2.0,
                  fixed_frame: map, base_frame: base_link, odom_topic: "", transform_wait_s: 1.0,
                  sensor_qos: reliable}}
  perception:
    executable: perception_node
    parameters: {{data_dir: "{data}", {light}}}
  memory:
    executable: memory_node
    parameters: {{data_dir: "{data}", text_embedder: hash}}
""")   # reliable images: the test counts every frame (a best-effort link may drop one on a busy machine)
    stack = LaunchedStack(stack_file, tmp_path / "launch.log")
    node = Node("frames_checker", context=ros_context)
    diagnostics = Diagnostics(ros_context, "frame_selector")
    try:
        assert call(node, GetMemoryStats, "/memory/stats", GetMemoryStats.Request(), timeout=120).stats
        report = replay(str(tmp_path / "bag"), paced=True, rate=0.0, window=3, clock=False, wait_subscribers_s=90.0,
                        stall_timeout_s=120.0, ack_timeout_s=10.0, progress=False)
        print(report.summary())
        assert report.published["/tf_static"] == 1 and report.frames_sent == 100
        assert report.frames_acknowledged == 100, report.summary() + stack.log()[-3000:]
        stats = lambda: call(node, GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats  # noqa: E731
        wait_until(lambda: stats().observations >= 20, 120, what="20 keyframes stored")
        res = call(node, QueryMemory, "/memory/query", QueryMemory.Request(
            tool="observations_between", arguments_json=json.dumps({"t_start": T_START - 10, "t_end": T_START + 100, "limit": 1000})))
        assert res.success, res.error
        rows = json.loads(res.result_json)
        assert all(r["id"].startswith("frames/") for r in rows)
        posed, poseless = _check_positions(rows, info)
        # the frames whose transform never came: counted, none dropped
        wait_until(lambda: int(diagnostics.get("count.frames_without_pose", 0)) == FRAMES_WITHOUT_TF, 30,
                   what=f"frames_without_pose == {FRAMES_WITHOUT_TF} on /diagnostics")
        assert int(diagnostics.get("frames_total")) == 100
        assert diagnostics.get("frames_pending_transform") == "0"
        assert not [k for k in diagnostics.values if k.startswith("dropped.")], diagnostics.values
        assert "poses: base_link in map" in stack.log()
    finally:
        diagnostics.close()
        node.destroy_node()
        assert stack.stop() == 0, stack.log()[-3000:]
