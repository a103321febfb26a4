"""Replay against faults: damaged bags (reported with count and position, the rest replayed,
non-zero exit) and a frame selector that restarts mid-replay (its counter resets; the replay
re-bases, does not stall, and reports what was never acknowledged)."""
import os
import signal
import subprocess
import threading

import pytest
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CompressedImage
from std_msgs.msg import UInt64

from embodied_memory.ingest.bag_reader import Bag
from embodied_memory.nodes.replay import FrameAcks, replay

from bags import damage, small_bag
from rosutil import VENV_BIN

GARBAGE = 64 * 1024
IMAGE = "/camera/color/image_raw/compressed"


def read_all(path):
    with Bag(path) as bag:
        expected = sum(t.count for t in bag.topics.values())
        got = sum(1 for _ in bag.messages())
        return expected, got, list(bag.corrupt_chunks)


@pytest.fixture(scope="module")
def damaged_bag(tmp_path_factory):
    """A 60 s synthetic bag (camera, depth, odometry, tf) with 64 kB of garbage in the middle of
    its MCAP (no shared data needed: this runs in CI)."""
    path = tmp_path_factory.mktemp("damaged") / "bag"
    small_bag(path, frames=600)
    expected, got, corrupt = read_all(path)
    assert got == expected and not corrupt
    mcap = damage(path, -1, GARBAGE)
    return path, mcap.stat().st_size // 2, expected


def test_garbage_in_the_middle_is_reported_with_position_and_loss(damaged_bag):
    path, start, expected = damaged_bag
    total, got, corrupt = read_all(path)
    assert total == expected                      # the summary (and so the expected counts) is intact
    assert len(corrupt) == 1
    c = corrupt[0]
    assert c.file.endswith(".mcap") and c.kind == "records"
    assert start - 64 <= c.offset < start + GARBAGE          # the first damaged record is where the garbage is
    assert c.chunk_offset <= c.offset and c.damaged_records >= 1
    assert c.messages_lost == expected - got and 0 < c.messages_lost < 80   # only what the garbage hit is lost
    assert f"@ byte {c.offset}" in c.describe() and f"{c.messages_lost} message(s) lost" in c.describe()


def test_replay_cli_replays_the_rest_and_exits_3(damaged_bag):
    path, _start, expected = damaged_bag
    proc = subprocess.run([str(VENV_BIN / "embodied-memory"), "replay", str(path), "--rate", "max", "--wait", "0",
                           "--no-clock"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"})
    assert proc.returncode == 3, proc.stderr
    _total, got, corrupt = read_all(path)
    assert f"published {got} messages" in proc.stdout
    assert f"corrupt bag: 1 unreadable part(s), {expected - got} message(s) lost" in proc.stdout
    assert f"@ byte {corrupt[0].offset}" in proc.stdout
    assert "is damaged: 1 part(s) could not be read" in proc.stderr


def test_damaged_message_index_falls_back_to_a_scan(tmp_path):
    small_bag(tmp_path / "b", frames=20)
    with Bag(tmp_path / "b") as bag:
        storage = bag._mcap_storages()[0]
        chunk = storage.chunks[0]
        index_at = min(chunk.message_index_offsets.values())
    damage(tmp_path / "b", index_at, 12)
    expected, got, corrupt = read_all(tmp_path / "b")
    assert got == expected                       # every message recovered by walking the chunk
    assert len(corrupt) == 1 and corrupt[0].messages_lost == 0 and "message index" in corrupt[0].reason


def test_damaged_chunk_header_is_reported_and_its_messages_still_read(tmp_path):
    small_bag(tmp_path / "b", frames=20)
    with Bag(tmp_path / "b") as bag:
        chunk = bag._mcap_storages()[0].chunks[0]
    damage(tmp_path / "b", chunk.chunk_start_offset, 1)   # its opcode: the header no longer matches
    expected, got, corrupt = read_all(tmp_path / "b")
    assert len(corrupt) == 1 and corrupt[0].offset == corrupt[0].chunk_offset == chunk.chunk_start_offset
    assert "chunk header" in corrupt[0].reason
    assert got == expected and corrupt[0].messages_lost == 0   # the index still finds every message


# -- the frame selector's counter -------------------------------------------------------------
def test_frame_acks_rebase_on_restart_and_offset_an_old_counter():
    now = [0.0]
    acks = FrameAcks(clock=lambda: now[0])
    for _ in range(5):
        acks.sent_one()
    for v in (1, 2, 3):                      # frames 4 and 5 are in flight when the node dies
        assert not acks.update(v, "gid-a")
    assert acks.in_flight == 2
    acks.sent_one()                          # frame 6 reaches the restarted node
    assert acks.update(1, "gid-b")           # its counter starts again
    assert (acks.restarts, acks.acknowledged, acks.unacknowledged, acks.in_flight) == (1, 4, 2, 0)
    acks.sent_one(), acks.sent_one()
    acks.update(2, "gid-b"), acks.update(3, "gid-b")
    assert (acks.acknowledged, acks.unacknowledged, acks.in_flight) == (6, 2, 0)
    # same publisher, counter lower: a restart too (no publisher ids from this middleware)
    acks.sent_one()
    assert acks.update(1) and acks.acknowledged == 7

    old = FrameAcks()                        # a frame selector that already took 150 frames
    old.sent_one()
    old.update(151)
    assert (old.acknowledged, old.unacknowledged) == (1, 0)
    before = FrameAcks()                     # its count seen before the first frame
    before.update(150)
    before.sent_one(), before.sent_one()
    before.update(151)
    assert (before.acknowledged, before.in_flight) == (1, 1)


def test_frame_acks_give_up_when_nothing_comes():
    now = [0.0]
    acks = FrameAcks(clock=lambda: now[0])
    for _ in range(3):
        acks.sent_one()
    now[0] = 6.0
    assert acks.waited_s() == 6.0 and acks.give_up() == 3
    assert (acks.in_flight, acks.unacknowledged, acks.healthy) == (0, 3, False)
    acks.sent_one()                          # a probe: the stall clock keeps running
    now[0] = 70.0
    assert acks.silent_s() == 70.0 and acks.waited_s() == 64.0
    for v in (1, 2, 3):                      # late acknowledgements still count
        acks.update(v)
    assert (acks.acknowledged, acks.unacknowledged, acks.healthy) == (3, 1, True)


class FakeFrameSelector:
    """Acknowledges frames like the frame selector (UInt64 count since start); after
    ``drop_after`` frames it 'dies' with ``drop_n`` frames in flight and comes back as a new
    publisher counting from 0."""

    def __init__(self, context, drop_after: int, drop_n: int):
        self.node = Node("fake_frame_selector", context=context)
        self.qos = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        self.pub = self.node.create_publisher(UInt64, "/memory/frames_processed", self.qos)
        self.node.create_subscription(CompressedImage, IMAGE, self._on_image, self.qos)
        self.drop_after, self.drop_n = drop_after, drop_n
        self.received = self.count = self.dropped = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)

    def _on_image(self, _msg) -> None:
        self.received += 1
        if self.received > self.drop_after and self.dropped < self.drop_n:
            self.dropped += 1                # taken by the node that dies: never acknowledged
            if self.dropped == self.drop_n:  # the restarted node: a new publisher, counting from 0
                self.node.destroy_publisher(self.pub)
                self.pub = self.node.create_publisher(UInt64, "/memory/frames_processed", self.qos)
                self.count = 0
            return
        self.count += 1
        self.pub.publish(UInt64(data=self.count))

    def _spin(self) -> None:
        executor = SingleThreadedExecutor(context=self.node.context)
        executor.add_node(self.node)
        while not self._stop.is_set():
            executor.spin_once(timeout_sec=0.05)
        executor.remove_node(self.node)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)
        self.node.destroy_node()


@pytest.mark.integration
def test_paced_replay_survives_a_frame_selector_restart(tmp_path, ros_context):
    small_bag(tmp_path / "b", frames=40)
    with FakeFrameSelector(ros_context, drop_after=10, drop_n=3) as fake:
        report = replay(str(tmp_path / "b"), paced=True, rate=0.0, window=3, clock=False, topics=[IMAGE, "/odom"],
                        wait_subscribers_s=30.0, stall_timeout_s=60.0, ack_timeout_s=3.0, progress=False)
    # (ack_timeout 3 s: on a loaded 2-core machine an acknowledgement after the restart took over 1 s)
    assert fake.received == 40 and fake.dropped == 3
    assert report.published[IMAGE] == 40 and report.frames_sent == 40
    assert report.pipeline_restarts == 1
    assert (report.frames_acknowledged, report.frames_unacknowledged) == (37, 3)
    assert "frames_unacknowledged 3 (the frame selector restarted 1 time(s))" in report.summary()
    assert not report.corrupt_chunks


@pytest.mark.integration
def test_kill_9_during_a_replay_restarts_the_nodes_and_the_replay_completes(tmp_path, ros_context):
    """The launcher restarts a SIGKILLed memory node and frame selector (respawn is the
    default); the paced replay re-bases on the restarted frame selector's counter, finishes
    and reports the frames it lost in flight."""
    from embodied_memory_interfaces.srv import GetMemoryStats

    from rosutil import LaunchedStack, call, wait_until
    frames = 600
    small_bag(tmp_path / "bag", frames=frames)
    stack_file = tmp_path / "stack.yaml"
    stack_file.write_text(f"""stack: replay_faults
nodes:
  frame_selector:
    executable: frame_selector_node
    respawn_delay_s: 0.2
    parameters: {{policy: uniform, segment_s: 1.0, frames_per_segment: 2, waypoint_topic: ""}}
  memory:
    executable: memory_node
    respawn_delay_s: 0.2
    parameters: {{data_dir: "{tmp_path / 'store'}", text_embedder: hash}}
""")
    stack = LaunchedStack(stack_file, tmp_path / "launch.log")
    node = Node("test_monitor", context=ros_context)
    seen = [0]
    node.create_subscription(UInt64, "/memory/frames_processed", lambda m: seen.__setitem__(0, seen[0] + 1),
                             QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
    executor = SingleThreadedExecutor(context=ros_context)
    result = {}

    def run_replay():
        try:
            result["report"] = replay(str(tmp_path / "bag"), paced=True, rate=0.0, window=3, clock=False,
                                      wait_subscribers_s=90.0, stall_timeout_s=120.0, ack_timeout_s=2.0,
                                      progress=False)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            result["error"] = exc
    player = threading.Thread(target=run_replay, daemon=True)
    try:
        assert call(node, GetMemoryStats, "/memory/stats", GetMemoryStats.Request(), timeout=90).stats
        executor.add_node(node)
        player.start()

        def seen_at_least(n):
            executor.spin_once(timeout_sec=0.05)
            return seen[0] >= n or not player.is_alive()
        wait_until(lambda: seen_at_least(20), 120, interval=0.0, what="the replay to start")
        assert player.is_alive(), "the replay ended before the frame selector could be killed"
        os.kill(stack.pid_of("frame_selector"), signal.SIGKILL)   # the replay waits for its restart
        stack.pid_of("frame_selector", nth=2)
        os.kill(stack.pid_of("memory"), signal.SIGKILL)
        player.join(300)
        assert not player.is_alive() and "error" not in result, result.get("error")
        report = result["report"]
        assert report.frames_sent == frames and report.pipeline_restarts == 1
        assert report.frames_acknowledged + report.frames_unacknowledged == frames
        assert report.frames_acknowledged > 60
        stack.pid_of("memory", nth=2), stack.pid_of("frame_selector", nth=2)
        executor.remove_node(node)
        assert call(node, GetMemoryStats, "/memory/stats", GetMemoryStats.Request(), timeout=60).stats
        assert stack.process.poll() is None
        log = stack.log()
        assert "respawning 'memory'" in log and "respawning 'frame_selector'" in log
    finally:
        stack.stop()
        node.destroy_node()
