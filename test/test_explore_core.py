"""Exploration core (HIMM) on constructed grids: occupancy from depth, frontiers, planning,
both frontier-pruning implementations, deviation detection, meta memory."""
import math

import numpy as np
import pytest

from embodied_memory.explore.cognitive_state import CognitiveState as S
from embodied_memory.explore.cognitive_state import IllegalTransition, MetaMemory
from embodied_memory.explore.deviations import detect_deviations, distance_to_polyline
from embodied_memory.explore.episodic_recall import FeatureMatchVerifier
from embodied_memory.explore.frontier_pruning import GeometricPruner, MllmPruner
from embodied_memory.explore.frontiers import detect_frontiers
from embodied_memory.explore.map_render import LEGEND, render_map, with_legend
from embodied_memory.explore.occupancy import FREE, OCCUPIED, UNKNOWN, CameraModel, GridParams, OccupancyGrid
from embodied_memory.explore.planning import GridPaths, traversable
from embodied_memory.llm.chat_client import ChatClient, LLMConfig

from scripted_llm import ScriptedLLM, content

RES = 0.1


def grid_of(values):
    return OccupancyGrid.from_values(np.asarray(values, np.int8), RES, (0.0, 0.0))


def paths_of(grid, cell):
    return GridPaths(traversable(grid.values(), 0), cell, RES)


# -- a constructed floor: room A (explored) with a door east to room B and a door north to C --------
#   rows 0..59 (y), cols 0..79 (x); walls are OCCUPIED lines, 1 cell thick
def floor(b_known: bool, c_known: bool):
    v = np.full((60, 80), UNKNOWN, np.int8)

    def room(r0, r1, c0, c1, known):
        if known:
            v[r0:r1 + 1, c0:c1 + 1] = OCCUPIED
            v[r0 + 1:r1, c0 + 1:c1] = FREE
    room(0, 30, 0, 30, True)          # A
    room(0, 30, 30, 55, b_known)      # B, east of A, closed on its other sides
    room(30, 50, 0, 30, c_known)      # C, north of A, open to the unknown at its far end
    if c_known:
        v[50, 10:20] = FREE           # C leads on (an opening to unexplored space, rows 51-59)
    v[10:16, 30] = FREE               # door A-B
    v[30, 12:18] = FREE               # door A-C
    return v


def current_map():
    v = floor(False, False)
    v[10:16, 30] = FREE               # the doors are seen, what lies beyond is unknown
    v[30, 12:18] = FREE
    return grid_of(v)


def test_occupancy_from_a_depth_image_of_a_wall():
    grid = OccupancyGrid(GridParams(resolution=RES, size_m=20, origin_x=-10, origin_y=-10))
    cam = CameraModel.from_fov(160, 120, 60)
    depth = np.full((120, 160), 3.0, np.float32)           # a flat wall 3 m ahead (planar depth)
    grid.integrate_depth(depth, 0.0, 0.0, 1.5, 0.0, cam)
    v = grid.values()
    occ_r, occ_c = np.nonzero(v == OCCUPIED)
    xs, _ = grid.to_world(occ_r, occ_c)
    assert len(xs) > 20 and np.all(np.abs(xs - 3.0) < 0.15)   # the wall, where it is
    r, c = grid.to_cell(1.5, 0.0)
    assert v[r, c] == FREE                                   # in front of it: free
    r, c = grid.to_cell(4.5, 0.0)
    assert v[r, c] == UNKNOWN                                # behind it: unknown
    r, c = grid.to_cell(-1.5, 0.0)
    assert v[r, c] == UNKNOWN                                # behind the camera: unknown


def test_a_pitched_camera_sees_the_floor_as_free_and_low_objects_as_obstacles():
    cam = CameraModel.from_fov(160, 120, 60, pitch=math.radians(-25))
    u, v = np.meshgrid(np.arange(160), np.arange(120))
    # floor plane 1.5 m below the camera: the depth that makes every pixel land on it
    f, _, up = cam.to_body(u, v, np.ones((120, 160)))
    with np.errstate(divide="ignore"):
        depth = np.where(up < -1e-3, 1.5 / -up, 0.0).astype(np.float32)
    grid = OccupancyGrid(GridParams(resolution=RES, size_m=20, origin_x=-10, origin_y=-10))
    grid.integrate_depth(depth, 0.0, 0.0, 1.5, 0.0, cam)
    v_ = grid.values()
    assert (v_ == OCCUPIED).sum() == 0 and (v_ == FREE).sum() > 500
    with pytest.raises(ValueError, match="finite"):
        grid.integrate_depth(depth, float("nan"), 0.0, 1.5, 0.0, cam)
    with pytest.raises(ValueError, match="camera info"):
        grid.integrate_depth(depth[:100], 0.0, 0.0, 1.5, 0.0, cam)


def test_frontiers_are_the_doors_to_unknown_space():
    grid = current_map()
    paths = paths_of(grid, (15, 15))
    frontiers = detect_frontiers(grid, paths.reachable, min_size=3)
    assert len(frontiers) == 2
    spots = sorted((round(f.x, 1), round(f.y, 1)) for f in frontiers)
    assert spots[0][0] == pytest.approx(1.5, abs=0.3) and spots[0][1] == pytest.approx(3.05, abs=0.2)  # north door
    assert spots[1][0] == pytest.approx(3.05, abs=0.2) and spots[1][1] == pytest.approx(1.3, abs=0.3)  # east door
    assert all(paths.reachable[f.cell] for f in frontiers)
    assert detect_frontiers(grid, paths.reachable, min_size=10) == []      # the doors are 6 cells wide


def test_paths_go_around_walls_and_unreachable_is_empty():
    grid = current_map()
    paths = paths_of(grid, (5, 5))
    route = paths.path_to((25, 25))
    assert route[0] == (5, 5) and route[-1] == (25, 25)
    assert all(grid.values()[r, c] == FREE for r, c in route)
    assert paths.dist[25, 25] == pytest.approx(20 * math.sqrt(2) * RES, rel=1e-6)
    assert paths.path_to((40, 40)) == [] and not paths.reachable[40, 40]


def test_geometric_pruning_removes_the_frontier_into_space_explored_before():
    grid = current_map()
    previous = grid_of(floor(b_known=True, c_known=True))   # B closed, C open at its far end
    paths = paths_of(grid, (15, 15))
    frontiers = detect_frontiers(grid, paths.reachable, min_size=3)
    east = next(f for f in frontiers if f.x > 2.5)
    north = next(f for f in frontiers if f.y > 2.5)
    result = GeometricPruner().prune(grid, previous, frontiers, paths.reachable, i_explore=True)
    assert set(result.pruned) == {east.frontier_id} and "previous map" in result.pruned[east.frontier_id]
    assert [f.frontier_id for f in result.kept] == [north.frontier_id]
    # without a previous episode nothing is pruned
    assert GeometricPruner().prune(grid, None, frontiers, paths.reachable, True).pruned == {}


def test_geometric_pruning_pocket_and_disconnected_frontiers():
    v = current_map().values().copy()
    v[31:34, 11:19] = OCCUPIED                      # the north door opens onto a closed 2-cell pocket
    v[31:33, 12:18] = UNKNOWN
    grid = grid_of(v)
    paths = paths_of(grid, (15, 15))
    frontiers = detect_frontiers(grid, paths.reachable, min_size=3)
    result = GeometricPruner().prune(grid, None, frontiers, paths.reachable, True)
    north = next(f for f in frontiers if f.y > 2.5)
    assert result.pruned.get(north.frontier_id, "").startswith("enclosed")
    # a frontier given from elsewhere that the reachable space does not touch
    far = paths_of(grid, (15, 45)).reachable            # reachable from inside the unknown: nothing
    result = GeometricPruner().prune(grid, None, frontiers, far, True)
    assert all("not connected" in why for why in result.pruned.values()) and not result.kept


def test_geometric_pruning_keeps_frontiers_near_the_remembered_target_when_no_exploration_is_needed():
    grid = current_map()
    paths = paths_of(grid, (15, 15))
    frontiers = detect_frontiers(grid, paths.reachable, min_size=3)
    landmarks = [(4.5, 1.3, 0.0)]                  # the target was seen from room B
    result = GeometricPruner(d_min=2.0).prune(grid, grid_of(floor(True, True)), frontiers, paths.reachable,
                                               i_explore=False, landmarks=landmarks)
    assert [f.x > 2.5 for f in result.kept] == [True] and len(result.pruned) == 1


def test_a_previous_map_of_another_building_is_not_used():
    grid = current_map()
    other = np.full((60, 80), FREE, np.int8)        # nothing agrees with the current walls
    paths = paths_of(grid, (15, 15))
    frontiers = detect_frontiers(grid, paths.reachable, min_size=3)
    result = GeometricPruner().prune(grid, grid_of(other), frontiers, paths.reachable, True)
    assert result.same_map is False and result.pruned == {}


def _mllm(url):
    return MllmPruner(ChatClient(LLMConfig(base_url=url, model="m")))


def test_mllm_pruning_sends_both_maps_with_himm_template_and_agrees_on_the_clear_case():
    grid = current_map()
    previous = grid_of(floor(True, True))
    paths = paths_of(grid, (15, 15))
    frontiers = detect_frontiers(grid, paths.reachable, min_size=3)
    geometric = GeometricPruner().prune(grid, previous, frontiers, paths.reachable, True)
    east = next(iter(geometric.pruned))
    reply = content(f'{{"same_house": true, "prune": [{east}], "reason": "enclosed by black boundaries"}}')
    with ScriptedLLM([reply]) as llm:
        result = _mllm(llm.base_url).prune(grid, previous, frontiers, paths.reachable, True, question="Where is X?")
        request = llm.requests[0]
    parts = request["messages"][0]["content"]
    text = " ".join(p["text"] for p in parts if p["type"] == "text")
    assert sum(p["type"] == "image_url" for p in parts) == 2
    assert "belong to the same house" in text and "completely enclosed by black boundaries" in text
    assert text.index("previous exploration map") < text.index("current exploration map")
    assert set(result.pruned) == set(geometric.pruned) and result.implementation == "mllm"
    assert [f.frontier_id for f in result.kept] == [f.frontier_id for f in geometric.kept]


def test_mllm_pruning_falls_back_to_geometry_on_bad_output_or_a_dead_endpoint():
    grid = current_map()
    previous = grid_of(floor(True, True))
    paths = paths_of(grid, (15, 15))
    frontiers = detect_frontiers(grid, paths.reachable, min_size=3)
    expected = set(GeometricPruner().prune(grid, previous, frontiers, paths.reachable, True).pruned)
    for reply in ("prune frontier 2 please", '{"same_house": true, "prune": "all"}'):
        with ScriptedLLM([content(reply)]) as llm:
            result = _mllm(llm.base_url).prune(grid, previous, frontiers, paths.reachable, True)
        assert result.implementation == "geometric (mllm fallback)" and set(result.pruned) == expected
    result = _mllm("http://127.0.0.1:9/v1").prune(grid, previous, frontiers, paths.reachable, True)
    assert result.implementation == "geometric (mllm fallback)"
    with ScriptedLLM([content('{"same_house": false, "prune": [1, 2]}')]) as llm:
        result = _mllm(llm.base_url).prune(grid, previous, frontiers, paths.reachable, True)
    assert result.same_map is False and result.pruned == {}


def test_the_rendered_map_marks_frontiers_and_poses():
    grid = current_map()
    paths = paths_of(grid, (15, 15))
    frontiers = detect_frontiers(grid, paths.reachable, min_size=3)
    plain = render_map(grid, paths.reachable)
    marked = render_map(grid, paths.reachable, frontiers, poses=[(1.5, 1.5, 0.0)], robot=(1.0, 1.0, 1.0))
    assert plain.shape == marked.shape and plain.dtype == np.uint8
    assert ((marked == (30, 30, 220)).all(axis=2)).sum() > 20          # red frontier dots
    assert ((marked == (200, 90, 20)).all(axis=2)).sum() > 5           # blue pose arrow
    assert ((plain == (0, 0, 0)).all(axis=2)).sum() > 100              # black boundaries
    keyed = with_legend(marked)                  # the map for people: the same map, a key to its colours below
    assert (keyed[:marked.shape[0], :marked.shape[1]] == marked).all() and keyed.shape[0] > marked.shape[0]
    key = keyed[marked.shape[0]:]
    assert all(((key == colour).all(axis=2)).sum() >= 100 for _, colour in LEGEND)     # a swatch per colour


def test_every_option_of_a_command_states_its_default_once():
    from embodied_memory.cli import build_parser
    text = build_parser()._subparsers._group_actions[0].choices["explore-bench"].format_help()
    flat = " ".join(text.split())
    assert "(default: office,wing,hall)" in flat and "(default: 0)" in flat and "(default: evaluation)" in flat
    assert "default 10-19" in flat and "(default: 10,11" not in flat      # said in the help already: not twice
    assert "(default: )" not in flat


def test_deviation_detection_finds_the_planted_deviations():
    reference = np.array([[x, 0.0] for x in np.linspace(0, 30, 61)])
    rng = np.random.default_rng(3)
    positions = np.column_stack([np.linspace(0, 30, 61), rng.normal(0, 0.05, 61)])
    planted = [12, 30, 47]
    for t in planted:                                 # the robot wanders off for three steps
        positions[t:t + 3, 1] += [1.5, 2.5, 1.5]
    result = detect_deviations(positions, reference, seed=0)
    assert set(planted) <= set(result.steps) and 3 <= len(result.steps) <= 5
    assert all(t in planted or t - 1 in planted for t in result.steps)   # onsets (or the next, bigger jump)
    assert np.allclose(distance_to_polyline(positions[:5], reference), np.abs(positions[:5, 1]), atol=1e-9)
    on_track = np.column_stack([np.linspace(0, 30, 61), np.zeros(61)])
    assert detect_deviations(on_track, reference).steps == ()
    with pytest.raises(ValueError):
        detect_deviations(np.zeros((5,)), reference)


def test_meta_memory_allows_only_the_defined_transitions():
    meta = MetaMemory()
    meta.switch(S.TARGET_VERIFICATION, 1, "seen")
    meta.switch(S.TARGET_APPROACHING, 2, "confirmed")
    meta.switch(S.CHECK_READY_TO_ANSWER, 3, "arrived")
    assert [c.target for c in meta.changes] == [S.TARGET_VERIFICATION, S.TARGET_APPROACHING, S.CHECK_READY_TO_ANSWER]
    with pytest.raises(IllegalTransition):
        meta.switch(S.TARGET_VERIFICATION, 4, "not allowed from check_ready_to_answer")
    assert meta.state == S.CHECK_READY_TO_ANSWER and len(meta.changes) == 3


def test_feature_match_verifier_tells_the_same_place_from_another():
    def scene_of(seed):
        blocks = (np.random.default_rng(seed).random((30, 40)) * 255).astype(np.uint8)
        return np.ascontiguousarray(np.repeat(np.kron(blocks, np.ones((8, 8), np.uint8))[..., None], 3, 2))
    scene, other = scene_of(0), scene_of(1)
    shifted = np.roll(scene, 12, axis=1)
    verifier = FeatureMatchVerifier()
    assert verifier.same_place(scene, shifted)
    assert not verifier.same_place(scene, other)
    assert verifier.inliers(scene, np.zeros_like(scene)) == 0
