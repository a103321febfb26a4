"""Keyframe selection: psfr keeps the frames where the scene changes; uniform spreads them."""
import numpy as np
import pytest

from embodied_memory.ingest.selection import FrameSelector, SelectionParams, SparseFlowScorer


def textured(seed, shift=0):
    rng = np.random.default_rng(seed)
    base = (rng.random((60, 80)) * 255).astype(np.uint8)
    image = np.kron(base, np.ones((8, 8), np.uint8))  # 480x640 blocks: trackable corners
    return np.dstack([np.roll(image, shift, axis=1)] * 3)


def sequence():
    """10 fps, 10 s: static, then the camera pans (frames 40-59), then static again."""
    frames = []
    for i in range(100):
        shift = 0 if i < 40 else (i - 40) * 6 if i < 60 else 120
        frames.append(textured(1, shift))
    return frames


def run(policy, frames, k=4, segment=10.0):
    sel = FrameSelector(SelectionParams(policy=policy, segment_s=segment, frames_per_segment=k))
    chosen = []
    for i, frame in enumerate(frames):
        chosen += sel.push(i * 0.1, frame, i)
    chosen += sel.flush()
    return [c.payload for c in chosen]


def test_psfr_keeps_the_changing_frames_at_the_same_k():
    frames = sequence()
    psfr, uniform = run("psfr", frames), run("uniform", frames)
    assert len(psfr) == len(uniform) == 4
    assert sum(41 <= i <= 60 for i in psfr) >= 3          # the pan (frame 60 is its last step)
    assert sum(41 <= i <= 60 for i in uniform) <= 2       # uniform: slots at 1.25, 3.75, 6.25, 8.75 s
    assert uniform == [12, 37, 62, 87]


def test_segments_and_flush():
    frames = [textured(2, i % 3) for i in range(55)]
    chosen = run("uniform", frames, k=2, segment=2.0)
    assert len(chosen) == 6 and chosen == sorted(chosen)  # 5.5 s: segments 0-2 full, 3 half


def test_flow_score_is_zero_for_a_static_scene():
    scorer = SparseFlowScorer()
    still = textured(5)
    assert scorer.score(still) == 1.0              # first frame: new structure
    assert scorer.score(still) == pytest.approx(0.0, abs=1e-3)
    assert scorer.score(textured(5, 12)) > 0.5


def test_similarity_policy_drops_near_duplicates():
    embed = lambda image: np.array([image.mean(), 1.0])  # noqa: E731 - a stand-in embedding for the policy
    sel = FrameSelector(SelectionParams(policy="similarity", similarity_threshold=0.999), embed)
    kept = [i for i, v in enumerate([10, 10, 10, 200, 200, 10]) for _ in sel.push(i, np.full((4, 4, 3), v, np.uint8))]
    assert kept == [0, 3, 5]
    with pytest.raises(ValueError, match="embedder"):
        FrameSelector(SelectionParams(policy="similarity"))
