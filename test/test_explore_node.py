"""The explore node over DDS with the memory and the query agent (three processes): an Explore
goal finds the target in the simulated office (feedback with cognitive states, the occupancy
grid and frontier markers published, observations and the map stored by the memory node); a
second goal with episodic recall drives a shorter path and is answered by the query agent; a
goal with a picture of the target recalls it by the regions the first one stored, and a picture
that is not an image aborts that goal only."""
import json

import pytest
from embodied_memory_interfaces.action import Explore
from embodied_memory_interfaces.srv import QueryMemory
from nav_msgs.msg import OccupancyGrid
from sensor_msgs.msg import CompressedImage
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from visualization_msgs.msg import MarkerArray

from rosutil import LaunchedStack, call, spin_until, wait_until

pytestmark = pytest.mark.integration


def episode_of(result_json):
    rows = json.loads(result_json)
    return rows[0]["episode"] if rows else ""


def stack_file(tmp_path):
    path = tmp_path / "explore.yaml"
    path.write_text(f"""nodes:
  memory:
    executable: memory_node
    parameters: {{data_dir: "{tmp_path / 'memory'}"}}
  query_agent:
    executable: query_agent_node
    parameters: {{planner: rules}}
  explore:
    executable: explore_node
    parameters: {{environment: sim, sim_seed: 0, sim_start: corridor_west, region_proposer: segments,
                  image_dir: "{tmp_path / 'images'}"}}
""")
    return path


def duck_picture() -> CompressedImage:
    """A photo of seed 0's target (the rubber duck) from another side than the robot's way in:
    what an operator would send as an image goal."""
    import math

    import cv2
    from embodied_memory.sim.exploration import SimExplorationEnv, make_task, start_pose
    task = make_task(0)
    env = SimExplorationEnv(task, start_pose("lobby"))
    try:
        tx, ty = env.target_position()
        cx, cz = env.task.plan.centre(task.target_room)
        a = math.atan2(-cz - ty, cx - tx) + math.pi / 2
        px, py = tx + 1.3 * math.cos(a), ty + 1.3 * math.sin(a)
        env.teleport(px, py, math.atan2(ty - py, tx - px))
        image = env.observe().image
    finally:
        env.close()
    h, w = image.shape[:2]
    return CompressedImage(format="jpeg", data=cv2.imencode(".jpg", image[h // 4: 3 * h // 4, w // 4: 3 * w // 4])[1]
                           .tobytes())


def test_explore_action_over_dds(tmp_path, ros_context):
    stack = LaunchedStack(stack_file(tmp_path), tmp_path / "launch.log")
    node = Node("explore_test_client", context=ros_context)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(node)
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
    maps, markers = [], []
    node.create_subscription(OccupancyGrid, "/explore/map", maps.append, latched)
    node.create_subscription(MarkerArray, "/explore/frontiers", markers.append, latched)
    client = ActionClient(node, Explore, "/explore")

    def spin(future, timeout):
        return spin_until(executor, future, timeout, lambda: stack.log()[-3000:])

    def explore(**fields):
        feedback = []
        handle = spin(client.send_goal_async(Explore.Goal(**fields),
                                                   feedback_callback=lambda m: feedback.append(m.feedback)), 30)
        assert handle.accepted
        return spin(handle.get_result_async(), 240).result, feedback

    try:
        assert client.wait_for_server(timeout_sec=90), stack.log()
        assert not spin(client.send_goal_async(Explore.Goal()), 30).accepted     # neither question nor target
        first, feedback = explore(target_description="rubber duck", use_episodic_memory=False)
        assert first.success and first.message == "target reached" and first.path_length_m > 5
        assert first.answer.has_position and first.answer.type == "position"
        states = [f.cognitive_state for f in feedback]
        assert states[0] == "exploration" and "target_approaching" in states
        assert any(f.frontiers_remaining > 0 for f in feedback)
        assert maps and maps[-1].info.resolution == pytest.approx(0.1)
        assert sum(v == 100 for v in maps[-1].data) > 200 and sum(v == 0 for v in maps[-1].data) > 2000
        assert markers
        # the memory node stores the episode's views (published while exploring) and its map

        def stored():
            res = call(node, QueryMemory, "/memory/query", QueryMemory.Request(
                tool="text_observations", arguments_json='{"query": "rubber duck", "k": 3}'))
            maps_ok = call(node, QueryMemory, "/memory/query", QueryMemory.Request(
                tool="occupancy_map", arguments_json=json.dumps({"episode_id": episode_of(res.result_json)})))
            return "rubber duck" in res.result_json and maps_ok.result_json != "null"
        wait_until(stored, 60, interval=1.0, what="the memory node to store the first episode")
        second, _ = explore(question="Where is the rubber duck?", use_episodic_memory=True)
        assert second.success and second.path_length_m < 0.7 * first.path_length_m
        assert second.answer.status == "ok" and second.answer.has_position
        wait_until(lambda: "recall: episode" in stack.log(), 20, what="the explore node's recall line in its log")
        broken, _ = explore(target_description="rubber duck", target_image=CompressedImage(format="jpeg", data=b"x" * 9))
        assert not broken.success and broken.message == "target_image: 9 bytes that are not an image (format 'jpeg')"
        pictured, _ = explore(target_description="rubber duck", target_image=duck_picture(), use_episodic_memory=True)
        assert pictured.success and pictured.path_length_m < 0.7 * first.path_length_m
        wait_until(lambda: "(by regions like the picture)" in stack.log(), 20, what="a recall by the picture's regions")
    finally:
        node.destroy_node()
        assert stack.stop() == 0
