"""Bags in and out, bad input, and the whole ingest as a library call on a real-image bag."""
import numpy as np
import pytest

from embodied_memory.ingest.bag_reader import Bag, BagError
from embodied_memory.ingest.bag_writer import BagWriter
from embodied_memory.ingest.images import ImageDecodeError, decode_depth, decode_raw
from embodied_memory.ingest.offline import ingest_bag
from embodied_memory.ingest.selection import SelectionParams
from embodied_memory.params import StoreParams
from embodied_memory.perception.pipeline import Perception, PerceptionParams
from embodied_memory.store import open_store

from bags import T_START, people_and_faces_bag, portrait_people_bag, small_bag


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_written_bags_read_back(tmp_path, storage):
    small_bag(tmp_path / "b", storage=storage)
    with Bag(tmp_path / "b") as bag:
        topics = bag.topics
        assert topics["/camera/color/image_raw/compressed"].count == 20 and topics["/tf"].count == 20
        assert topics["/camera/depth/image_raw"].msgtype == "sensor_msgs/msg/Image"
        assert abs(bag.duration_s - 1.9) < 1e-6
        depth = next(bag.deserialize(m) for m in bag.messages(["/camera/depth/image_raw"]))
        assert np.allclose(decode_depth(depth.encoding, depth.height, depth.width, depth.step, depth.data), 1.5)


def test_corrupt_truncated_and_missing(tmp_path):
    small_bag(tmp_path / "b")
    mcap = next((tmp_path / "b").glob("*.mcap"))
    data = mcap.read_bytes()
    mcap.write_bytes(data[: len(data) // 2])            # truncated mid-file
    with pytest.raises(BagError, match="corrupt or truncated|cannot open"):
        with Bag(tmp_path / "b") as bag:
            list(bag.messages())
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "metadata.yaml").write_text("not: a bag")
    with pytest.raises(BagError, match="cannot open as rosbag2"):
        Bag(tmp_path / "junk").__enter__()
    with pytest.raises(BagError, match="no such bag"):
        Bag(tmp_path / "absent")
    small_bag(tmp_path / "ok")
    with Bag(tmp_path / "ok") as bag:
        with pytest.raises(BagError, match="/front/image not in the bag; it has: .*/odom"):
            bag.check_topics(["/front/image"], required=["/front/image"])


def test_image_encodings():
    rgb = np.zeros((2, 3, 3), np.uint8)
    rgb[..., 0] = 255
    assert decode_raw("rgb8", 2, 3, 9, rgb.tobytes())[0, 0].tolist() == [0, 0, 255]  # -> BGR
    with pytest.raises(ImageDecodeError, match="yuv422"):
        decode_raw("yuv422", 2, 3, 6, bytes(12))
    with pytest.raises(ImageDecodeError, match="does not match"):
        decode_raw("bgr8", 20, 30, 90, bytes(10))


def test_nan_poses_are_skipped_not_stored(tmp_path):
    with BagWriter(tmp_path / "nan") as bag:
        for i in range(10):
            bag.frame(T_START + i * 0.1, np.zeros((48, 64, 3), np.uint8), float("nan") if i < 5 else 1.0, 0.0, 0.0)
    store = open_store(StoreParams(data_dir=str(tmp_path / "s"), text_embedder="hash", image_dim=1280))
    perception = Perception(PerceptionParams(data_dir=str(tmp_path / "s"), text_embedder="hash",
                                             person_detector="none", face_backend="none"))
    report = ingest_bag(str(tmp_path / "nan"), store, perception, progress=False,
                        selection=SelectionParams(policy="uniform", segment_s=0.5, frames_per_segment=5))
    assert report.frames == 10 and report.skipped_no_pose == 5 and report.stored == 5
    assert all(o["position"][0] == 1.0 for o in store.observations_between(0, 1e12))


def test_the_idle_hook_runs_at_each_gap_in_the_recording_before_the_next_keyframe(tmp_path):
    """Two bursts of frames 2 h apart and a third 30 min later: ``on_idle`` (the attach pass in
    the eval) runs once, at the 2 h gap, when the earlier burst is stored and the next is not."""
    with BagWriter(tmp_path / "gaps") as bag:
        for start in (0.0, 7200.0, 9000.0):
            for i in range(4):
                bag.frame(T_START + start + i * 0.5, np.zeros((48, 64, 3), np.uint8), 1.0, 0.0, 0.0)
    store = open_store(StoreParams(data_dir=str(tmp_path / "s"), text_embedder="hash", image_dim=1280))
    perception = Perception(PerceptionParams(data_dir=str(tmp_path / "s"), text_embedder="hash",
                                             person_detector="none", face_backend="none"))
    stored_when_idle = []
    report = ingest_bag(str(tmp_path / "gaps"), store, perception, progress=False,
                        selection=SelectionParams(policy="uniform", segment_s=0.5, frames_per_segment=1),
                        on_idle=lambda: stored_when_idle.append(len(store.observations_between(0, 1e12))),
                        idle_s=3600.0)
    assert report.idle_passes == 1 and stored_when_idle == [4] and report.stored == 12


def test_library_ingest_of_a_real_image_bag(tmp_path):
    info = people_and_faces_bag(tmp_path / "bag")
    store = open_store(StoreParams(data_dir=str(tmp_path / "store"), text_embedder="minilm", image_dim=1280))
    perception = Perception(PerceptionParams(data_dir=str(tmp_path / "store")))
    report = ingest_bag(str(tmp_path / "bag"), store, perception, progress=False,
                        selection=SelectionParams(policy="psfr", segment_s=3.0, frames_per_segment=2))
    print(report.summary())
    assert report.frames == info["frames"] and report.keyframes == report.stored == 10
    people = {i.identity_id: i.sightings for i in store.identities()}
    assert len(people) == 2  # Obama (two photos) and Biden; vtest faces are too small for YuNet
    office = store.waypoint_observations("office")
    assert office and office[0]["persons"] and "identified" in office[0]["description"]
    obama = office[0]["persons"][0]
    assert {r["waypoint"] for r in store.person_observations(obama)} == {"office", "kitchen"}
    lobby = store.waypoint_observations("lobby")
    assert len(lobby) == 4 and all("people visible" in r["description"] for r in lobby)
    assert store.stats()["person_sightings"] >= 10


@pytest.mark.parametrize("camera_info", ["/camera/color/camera_info", "/camera/depth/camera_info"])
def test_people_are_placed_from_depth_recorded_after_its_colour_frame(tmp_path, camera_info):
    """The bag writes each depth image (a quarter of the colour size) after its colour frame, as
    a camera driver may: the frame still gets it, and every sighting records where the person
    stood, 2 m ahead, with the colour camera's or the depth camera's intrinsics."""
    from embodied_memory.ingest.offline import TopicParams
    portrait_people_bag(tmp_path / "bag", fps=2.0, seconds_each=4.0, depth_m=2.0)   # 0.5 s apart
    store = open_store(StoreParams(data_dir=str(tmp_path / "store"), text_embedder="hash", image_dim=1280))
    perception = Perception(PerceptionParams(data_dir=str(tmp_path / "store"), text_embedder="hash"))
    topics = TopicParams(depth_topic="/camera/depth/image_raw", camera_info_topic=camera_info)
    ingest_bag(str(tmp_path / "bag"), store, perception, progress=False, topics=topics,
               selection=SelectionParams(policy="uniform", segment_s=1.0, frames_per_segment=1))
    rows = [r for i in store.identities() for r in store.person_observations(i.identity_id)]
    assert len(rows) >= 4
    for r in rows:   # the robot at (x, 2) facing +x; the portrait in the middle of the view
        px, py, _ = r["person_position"]
        assert abs(px - (r["position"][0] + 2.0)) < 0.15 and abs(py - 2.0) < 0.5, r


def test_intrinsics_are_given_in_the_colour_image_pixels():
    from types import SimpleNamespace
    from embodied_memory.ingest.images import pixel_intrinsics
    depth_info = SimpleNamespace(k=[138.6, 0, 80.0, 0, 138.6, 60.0, 0, 0, 1], width=160, height=120)
    assert pixel_intrinsics(depth_info, (640, 480)) == pytest.approx((554.4, 554.4, 320.0, 240.0))
    assert pixel_intrinsics(SimpleNamespace(k=[0.0] * 9, width=160, height=120), (640, 480)) is None


def test_depth_pairs_with_its_frame_whichever_arrives_first():
    from embodied_memory.ingest.sync import DepthPairing
    pairing, got = DepthPairing(tolerance_s=0.1), {}
    pairing.on_depth(1.0, "d1")
    pairing.on_frame(1.0, lambda d: got.__setitem__("f1", d))      # depth first
    pairing.on_frame(2.0, lambda d: got.__setitem__("f2", d))      # depth later
    pairing.on_frame(3.0, lambda d: got.__setitem__("f3", d))      # never any depth near it
    pairing.on_depth(2.05, "d2")
    pairing.on_depth(2.5, "d3")
    assert got == {"f1": "d1", "f2": "d2"}
    # 10 Hz, each depth published after its colour frame: the previous frame's depth (0.1 s
    # away) is replaced by the frame's own
    pairing.on_depth(4.0, "d4")
    pairing.on_frame(4.1, lambda d: got.__setitem__("f5", d))
    assert got["f5"] == "d4"
    pairing.on_depth(4.1, "d5")
    assert got["f5"] == "d5"
