"""The simulator: same seed, same episode, same questions and answers; faces are recognisable."""
import json

import numpy as np

from embodied_memory.sim.episode import EpisodeConfig, generate_episode  # noqa: E402
from embodied_memory.sim.questions import generate_questions, score  # noqa: E402
# (embodied_memory.sim.world switches pyglet to headless before miniworld is imported)

CFG = EpisodeConfig(seed=3, patrol_hours=(10.0, 12.5), fps=2.0)


def test_same_seed_gives_identical_questions_and_answers(tmp_path):
    first = generate_episode(CFG, tmp_path / "a", progress=False)
    second = generate_episode(CFG, tmp_path / "b", progress=False)
    q1 = [q.to_dict() for q in generate_questions(first, seed=3)]
    q2 = [q.to_dict() for q in generate_questions(second, seed=3)]
    assert q1 == q2 and len(q1) >= 8
    assert {q["type"] for q in q1} >= {"position", "time", "binary", "persons", "duration"}
    assert json.dumps(first.frames) == json.dumps(second.frames)
    assert any(f["visible"] for f in first.frames)           # people were in view
    other = generate_episode(EpisodeConfig(seed=4, patrol_hours=(10.0,), fps=2.0), tmp_path / "c", progress=False)
    assert other.routines != first.routines[:1] or other.frames != first.frames
    with open(tmp_path / "a" / "ground_truth.json") as handle:
        assert json.load(handle)["config"]["seed"] == 3


def test_the_bag_has_what_a_robot_records_including_depth(tmp_path):
    from embodied_memory.ingest.bag_reader import Bag
    generate_episode(EpisodeConfig(seed=5, patrol_hours=(10.0,), fps=1.0), tmp_path / "e", progress=False)
    with Bag(tmp_path / "e" / "bag") as bag:
        topics = bag.topics
        for name in ("/camera/color/image_raw/compressed", "/camera/color/camera_info", "/camera/depth/image_raw",
                     "/camera/depth/camera_info", "/odom", "/tf", "/clock", "/waypoint"):
            assert name in topics, name
        msg = bag.deserialize(next(bag.messages(["/camera/depth/image_raw"])))
        info = bag.deserialize(next(bag.messages(["/camera/depth/camera_info"])))
    assert (msg.encoding, msg.width, msg.height) == ("16UC1", 160, 120) and (info.width, info.height) == (160, 120)
    depth_mm = np.frombuffer(msg.data.tobytes(), np.uint16)
    assert 300 < np.median(depth_mm) < 15000                  # walls a few metres away, in millimetres


def test_scoring_rules():
    from embodied_memory.sim.questions import Question
    q = Question("Where did you last see Alice?", "position", 0.0, {"position": [1.0, 2.0, 0.0], "waypoint": "office"})
    assert score(q, {"position": [4.0, 5.0, 0.0]}, {})[0] and not score(q, {"position": [9.0, 9.0, 0.0]}, {})[0]
    q = Question("Who was in the kitchen today?", "persons", 0.0, {"persons": ["alice", "bob"]})
    assert score(q, {"persons": ["person_0002", "person_0001"]}, {"person_0001": "alice", "person_0002": "bob"})[0]
    assert not score(q, {"persons": ["person_0001"]}, {"person_0001": "alice"})[0]
    q = Question("How long ...", "duration", 0.0, {"duration_minutes": 10.0})
    assert score(q, {"duration_minutes": 14.0}, {})[0] and not score(q, {"duration_minutes": 16.0}, {})[0]
