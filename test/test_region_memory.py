"""Region memory (HIMM part 4): the offline segment proposer on simulated views (3D boxes through
the pitched camera), the store's region queries, CLIP's loader error paths, and image-to-region
recall across two simulated episodes (a goal given as a picture)."""
import math

import numpy as np
import pytest

from embodied_memory.perception.image_embedding import ClipTextQuery
from embodied_memory.perception.regions import SegmentRegionProposer
from embodied_memory.perception.weights import MissingWeightsError
from embodied_memory.store.errors import StoreError
from embodied_memory.store.memory_store import open_store
from embodied_memory.store.params import StoreParams
from embodied_memory.types import Observation, Pose, Region


@pytest.fixture(scope="module")
def mobilenet():
    from embodied_memory.perception.image_embedding import MobileNetV2Embedder
    return MobileNetV2Embedder()


def _facing_target(seed: int, dist: float, turn: float = 0.0):
    """A simulated office whose target object is in view ``dist`` m ahead (from the room centre's
    side, turned by ``turn`` around it), the frame and the target's true position (scoring only)."""
    from embodied_memory.sim.exploration import SimExplorationEnv, make_task, start_pose
    from embodied_memory.sim.world import room_centre
    task = make_task(seed)
    env = SimExplorationEnv(task, start_pose("lobby"))
    tx, ty = env.target_position()
    cx, cz = room_centre(task.target_room)
    a = math.atan2(-cz - ty, cx - tx) + turn
    px, py = tx + math.cos(a) * dist, ty + math.sin(a) * dist
    env.teleport(px, py, math.atan2(ty - py, tx - px))
    return env, task, env.observe(), (tx, ty)


def _box_through(env, frame):
    from embodied_memory.explore.explorer import Explorer
    return Explorer(env, None)._region_box(frame)


@pytest.mark.parametrize("seed", [0, 3])
def test_segments_find_the_object_in_view_with_its_3d_box(seed):
    env, task, frame, (tx, ty) = _facing_target(seed, 2.5)
    try:
        regions = SegmentRegionProposer().propose(frame.image, None, box_of=_box_through(env, frame))
    finally:
        env.close()
    centres = [r.center_3d for r in regions if r.center_3d]
    assert regions and len(regions) <= 12 and all(r.label == "segment" for r in regions)
    assert min(math.hypot(c[0] - tx, c[1] - ty) for c in centres) < 0.3, task.target
    assert all(r.size_3d[2] >= 0.08 for r in regions if r.size_3d)          # no floor tiles


def test_the_proposer_is_deterministic_and_checks_its_settings():
    rng = np.random.default_rng(1)
    image = np.full((120, 160, 3), 200, np.uint8)
    image[40:80, 60:100] = (0, 0, 220)                                      # one red square on grey
    image += rng.integers(0, 6, image.shape, dtype=np.uint8)
    first, second = SegmentRegionProposer().boxes(image), SegmentRegionProposer().boxes(image)
    assert [b for b, _ in first] == [b for b, _ in second]
    (x1, y1, x2, y2), mask = first[0]
    assert x1 <= 60 and y1 <= 40 and x2 >= 100 and y2 >= 80 and mask[60, 80] and not mask[5, 5]
    with pytest.raises(ValueError, match="max_regions"):
        SegmentRegionProposer(max_regions=0)


def _unit(i, dim=8):
    v = np.zeros(dim, np.float32)
    v[i] = 1.0
    return v


@pytest.fixture
def region_store(tmp_path):
    class Words:     # an image-space text encoder for the plumbing: a word -> one axis
        def embed(self, texts):
            return np.stack([_unit({"red chair": 1, "plant": 2}.get(t, 7)) for t in texts])
    store = open_store(StoreParams(data_dir=str(tmp_path / "m"), image_dim=8, text_embedder="hash"),
                       image_query_embedder=Words())
    store.insert([Observation("a/1", 1000.0, "a", Pose(1.0, 2.0), description="a room", global_embedding=_unit(0),
                              regions=[Region((0, 0, 10, 10), "segment", 0.5, _unit(1), (1.5, 2.5, 0.4),
                                              (0.5, 0.5, 0.8)),
                                       Region((10, 0, 20, 10), "segment", 0.5, _unit(2))]),
                  Observation("b/1", 2000.0, "b", Pose(5.0, 5.0), description="a hall", global_embedding=_unit(0),
                              regions=[Region((0, 0, 10, 10), "segment", 0.5, 0.9 * _unit(1) + 0.1 * _unit(3))])])
    yield store
    store.close()


def test_regions_are_found_by_image_embedding_and_by_words_with_their_3d_box(region_store):
    hits = region_store.similar_regions(_unit(1).tolist(), k=5)
    assert [h["id"] for h in hits] == ["a/1", "b/1", "a/1"]
    assert hits[0]["region"] == {"box": [0.0, 0.0, 10.0, 10.0], "label": "segment", "center_3d": [1.5, 2.5, 0.4],
                                 "size_3d": [0.5, 0.5, 0.8]} and hits[0]["similarity"] == 1.0
    assert hits[1]["region"]["center_3d"] is None
    assert [h["id"] for h in region_store.similar_regions(_unit(1).tolist(), episode="b")] == ["b/1"]
    assert [h["id"] for h in region_store.similar_regions(_unit(1).tolist(), exclude_episode="a")] == ["b/1"]
    assert [h["id"] for h in region_store.similar_regions(_unit(1).tolist(), before=1500.0)] == ["a/1", "a/1"]
    assert region_store.call_tool("regions", {"query": "plant", "k": 1})[0]["region"]["box"] == [10, 0, 20, 10]
    with pytest.raises(StoreError, match="empty embedding"):
        region_store.similar_regions([])


def test_the_regions_tool_without_clip_names_the_setting(tmp_path):
    store = open_store(StoreParams(data_dir=str(tmp_path / "m"), image_dim=8, text_embedder="hash"))
    try:
        with pytest.raises(StoreError, match="clip_weights"):
            store.call_tool("regions", {"query": "the red chair"})
    finally:
        store.close()


def test_the_clip_loader_names_what_is_missing(tmp_path):
    with pytest.raises(MissingWeightsError, match="set the parameter 'clip_weights'"):
        ClipTextQuery("ViT-B-32", "", "cpu")
    with pytest.raises(MissingWeightsError, match=r"'clip_weights' = .*nowhere.bin does not exist"):
        ClipTextQuery("ViT-B-32", str(tmp_path / "nowhere.bin"), "cpu")
    weights = tmp_path / "clip.bin"
    weights.write_bytes(b"\0" * 16)
    try:
        import open_clip  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="EXTRAS=gpu"):
            ClipTextQuery("ViT-B-32", str(weights), "cpu")
    else:
        with pytest.raises(Exception):                                     # not a checkpoint
            ClipTextQuery("ViT-B-32", str(weights), "cpu")


def test_a_picture_of_the_target_is_found_in_an_earlier_episode_by_its_regions(tmp_path, mobilenet):
    """Episode A explores seed 0's office storing its views' regions; a picture of the target taken
    from another side (what an operator would give) then finds it among A's regions, and episode
    B, given only the picture, recalls A and drives to where A saw it."""
    from embodied_memory.explore.episodic_recall import EpisodicRecall, FeatureMatchVerifier
    from embodied_memory.explore.explorer import Explorer, ExplorerParams
    from embodied_memory.sim.exploration import (GroundTruthTargetDetector, SimExplorationEnv, ground_truth_description,
                                                 make_task, start_pose)
    env, task, frame, (tx, ty) = _facing_target(0, 1.3, turn=math.pi / 2)
    env.close()
    h, w = frame.image.shape[:2]
    picture = frame.image[h // 4: 3 * h // 4, w // 4: 3 * w // 4]
    store = open_store(StoreParams(data_dir=str(tmp_path / "memory")))
    try:
        def episode(name, start, recall, target_image=None):
            env = SimExplorationEnv(task, start_pose(start))
            try:
                return Explorer(env, GroundTruthTargetDetector(env), ExplorerParams(), store=store, embedder=mobilenet,
                                describer=lambda f: ground_truth_description(env, f), image_dir=tmp_path / "images",
                                recall=EpisodicRecall(store, FeatureMatchVerifier()) if recall else None,
                                regions=SegmentRegionProposer()).run(task.target, name, target_image=target_image)
            finally:
                env.close()
        first = episode("A", "lobby", recall=False)
        assert first.success
        best = store.similar_regions(mobilenet.embed([picture])[0], k=1, episode="A")[0]
        centre = best["region"]["center_3d"]
        assert math.hypot(centre[0] - tx, centre[1] - ty) < 1.0, best
        second = episode("B", "corridor_west", recall=True, target_image=picture)
    finally:
        store.close()
    assert second.success and second.recall is not None and second.recall.i_explore is False
    assert second.recall.prior_episode == "A" and second.recall.landmarks
    assert second.recall.reason.endswith("(by regions like the picture)")
    assert "remembered view" in " ".join(s.action for s in second.log)      # it drove to where A saw it


def test_the_agent_offers_the_regions_tool_only_where_the_memory_can_match_words_to_regions(region_store, tmp_path):
    """Without CLIP the model is never offered ``regions`` (and a call to it anyway is refused);
    with an image-space text encoder it is offered and returns regions."""
    from embodied_memory.agent.tools import StoreMemoryClient, ToolBox
    from zoneinfo import ZoneInfo
    plain = open_store(StoreParams(data_dir=str(tmp_path / "plain"), image_dim=8, text_embedder="hash"))
    try:
        without = ToolBox(StoreMemoryClient(plain), 3000.0, ZoneInfo("UTC"))
        assert "regions" not in without.names and "semantic_observations" in without.names
        refused = without.run("regions", {"query": "the red chair"})
        assert "unknown tool 'regions'" in refused["error"] and without.trace == []
    finally:
        plain.close()
    with_clip = ToolBox(StoreMemoryClient(region_store), 3000.0, ZoneInfo("UTC"))
    assert "regions" in with_clip.names
    assert with_clip.run("regions", {"query": "plant", "k": 1})[0]["id"] == "a/1"
    assert [call.split("(")[0] for call in with_clip.trace] == ["regions"]


def test_capabilities_are_cached_across_questions_and_an_unknown_answer_hides_nothing():
    from embodied_memory.agent.tools import MemoryCapabilities, ToolBox
    from zoneinfo import ZoneInfo

    class Memory:
        def __init__(self, answer):
            self.answer, self.asked = answer, 0

        def call(self, tool, arguments):
            self.asked += 1
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer
    older = Memory(RuntimeError("unknown tool capabilities"))
    assert "regions" in ToolBox(older, 3000.0, ZoneInfo("UTC")).names
    cached = MemoryCapabilities(older)
    assert cached.hidden() == frozenset() and cached.hidden() == frozenset() and older.asked == 3   # not cached
    without_clip = Memory({"regions_by_words": False})
    cached = MemoryCapabilities(without_clip)
    boxes = [ToolBox(without_clip, 3000.0, ZoneInfo("UTC"), capabilities=cached) for _ in range(3)]
    assert all("regions" not in box.names for box in boxes) and without_clip.asked == 1
    expired = MemoryCapabilities(without_clip, ttl_s=0.0)
    expired.hidden(), expired.hidden()
    assert without_clip.asked == 3


def test_sam_regions_take_the_explorers_3d_box_function():
    """SAM's masks (a scripted mask generator: the model's weights are not here) get their 3D box
    from the caller's ``box_of``, as the explorer's pitched camera needs."""
    from embodied_memory.perception.regions import SamRegionProposer
    mask = np.zeros((48, 64), bool)
    mask[10:20, 5:25] = True

    class Masks:
        def generate(self, image):
            return [{"bbox": (5, 10, 20, 10), "area": 200, "predicted_iou": 0.9, "segmentation": mask}]
    sam = SamRegionProposer.__new__(SamRegionProposer)
    sam._generator, sam.max_regions = Masks(), 4
    seen = []
    regions = sam.propose(np.zeros((48, 64, 3), np.uint8), None,
                          box_of=lambda m: seen.append(int(m.sum())) or ((1.0, 2.0, 0.3), (0.4, 0.4, 0.6)))
    assert seen == [200] and regions[0].box == (5.0, 10.0, 25.0, 20.0)
    assert regions[0].center_3d == (1.0, 2.0, 0.3) and regions[0].size_3d == (0.4, 0.4, 0.6)



def test_a_picture_of_an_episode_without_regions_falls_back_to_its_descriptions():
    """An earlier episode stored without regions (region_proposer none) is still recalled by the
    target's words when the goal also gives a picture; with regions, the picture decides."""
    from embodied_memory.explore.episodic_recall import EpisodicRecall

    class Memory:
        def __init__(self, regions):
            self.regions = regions

        def similar_regions(self, embedding, k=10, episode=None):
            return self.regions

        def text_observations(self, query, k=5, episode=None):
            return [{"id": "A/3", "similarity": 0.8}, {"id": "A/4", "similarity": 0.2}]
    recall = EpisodicRecall(Memory([]), verifier=None)
    assert recall._target_matches("A", "rubber duck", _unit(1)) == ([{"id": "A/3", "similarity": 0.8}], "descriptions")
    region = {"id": "A/5", "similarity": 0.9}
    assert EpisodicRecall(Memory([region]), verifier=None)._target_matches("A", "rubber duck", _unit(1)) == (
        [region], "regions like the picture")
