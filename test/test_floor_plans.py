"""The simulated offices' floor plans (sim.floor_plans): three layouts whose rooms are all
reachable through their doors, on the plan and in the rendered world, whatever the seed puts
where; the room names the views are tagged with; the settings that pick a plan refuse unknown
names in one line."""
import numpy as np
import pytest
from scipy import ndimage

from embodied_memory.params import ExploreNodeParams, SimCameraNodeParams
from embodied_memory.sim.floor_plans import ALL_ROOMS, FLOOR_PLANS, OFFICE, Door, FloorPlan, floor_plan


def _reachable_fraction(plan, free: np.ndarray, resolution: float, origin: float) -> dict[str, float]:
    """Flood fill from the plan's first start over ``free`` (rows: z, cols: x); per room, the
    fraction of its cells reached."""
    x, y, _ = plan.starts[plan.first_start]
    labels, _ = ndimage.label(free)
    start = labels[int((-y - origin) / resolution), int((x - origin) / resolution)]
    assert start > 0, f"{plan.name}: the first start is not on free floor"
    zs, xs = (np.indices(free.shape) + 0.5) * resolution + origin
    out = {}
    for room, (x0, x1, z0, z1) in plan.rooms.items():
        inside = (xs > x0) & (xs < x1) & (zs > z0) & (zs < z1)
        out[room] = float((labels[inside] == start).mean())
    return out


@pytest.mark.parametrize("name", list(FLOOR_PLANS))
def test_every_room_of_every_plan_is_reachable_through_its_doors(name):
    plan = floor_plan(name)
    resolution, origin = 0.1, -20.0
    zs, xs = (np.indices((400, 400)) + 0.5) * resolution + origin
    free = np.zeros(xs.shape, bool)
    for x0, x1, z0, z1 in plan.free_rects():
        free |= (xs >= x0) & (xs <= x1) & (zs >= z0) & (zs <= z1)
    assert all(f == 1.0 for f in _reachable_fraction(plan, free, resolution, origin).values())
    without_doors = np.zeros(xs.shape, bool)
    for x0, x1, z0, z1 in plan.rooms.values():
        without_doors |= (xs >= x0) & (xs <= x1) & (zs >= z0) & (zs <= z1)
    reached = _reachable_fraction(plan, without_doors, resolution, origin)
    x, y, _ = plan.starts[plan.first_start]
    assert [room for room, f in reached.items() if f > 0] == [plan.place_at(x, y)]   # walls close the others


def test_plans_differ_and_name_their_places():
    assert len({tuple(sorted(p.rooms.items())) for p in FLOOR_PLANS.values()}) == len(FLOOR_PLANS) == 3
    assert OFFICE.place_at(-6.0, -4.0) == "kitchen" and OFFICE.place_at(0.0, 0.5) == "corridor"
    wing, hall = floor_plan("wing"), floor_plan("hall")
    assert wing.place_at(5.0, 1.0) == "lab" and wing.place_at(0.0, -8.0) == "corridor"
    assert hall.place_at(0.0, 0.0) == "lobby" and hall.place_at(0.0, 6.0) == "storage_room"
    assert hall.place_at(-0.5, -3.5) == "lobby"        # between rooms (in a wall gap): the hub
    assert set(ALL_ROOMS) >= {"lab", "storage_room", "corridor", "lobby"}
    for plan in FLOOR_PLANS.values():
        for room in plan.target_rooms:
            assert plan.place_at(plan.centre(room)[0], -plan.centre(room)[1]) == room
        for x, y, _ in plan.starts.values():
            assert any(x0 <= x <= x1 and z0 <= -y <= z1 for x0, x1, z0, z1 in plan.free_rects())


def test_a_plan_refuses_rooms_that_do_not_face_each_other_and_unknown_names():
    rooms = {"a": (0.0, 4.0, 0.0, 4.0), "b": (2.0, 6.0, 2.0, 6.0), "c": (0.0, 4.0, 5.0, 9.0)}
    with pytest.raises(ValueError, match="overlap"):
        FloorPlan("bad", rooms, (Door(("a", "b"), 2.5, 3.5),), "a", "a", ("c",), {"s": (1, -1, 0), "t": (2, -1, 0)}, "s", "s", "t")
    with pytest.raises(ValueError, match="unknown room 'kitchen'"):
        FloorPlan("bad", rooms, (), "a", "a", ("kitchen",), {"s": (1, -1, 0), "t": (2, -1, 0)}, "s", "s", "t")
    with pytest.raises(ValueError, match="training episodes start where scored ones do"):
        FloorPlan("bad", rooms, (), "a", "a", ("c",), {"s": (1, -1, 0)}, "s", "s", "s")
    with pytest.raises(ValueError, match="unknown floor plan 'castle' \\(office \\| wing \\| hall\\)"):
        floor_plan("castle")
    plan = FloorPlan("ok", rooms, (Door(("a", "c"), 1.0, 2.0),), "a", "a", ("c",), {"s": (1, -1, 0), "t": (2, -1, 0)}, "s", "s", "t")
    assert plan.door_rect(plan.doors[0]) == (1.0, 2.0, 4.0, 5.0)
    assert plan.near_door(1.5, 3.5, 0.6) and not plan.near_door(3.5, 2.0, 0.6)


@pytest.mark.parametrize("params, problem", [
    (dict(sim_layout="castle"), "sim_layout: unknown 'castle' (office | wing | hall)"),
    (dict(sim_layout="hall", sim_start="corridor_west"), "sim_start: unknown 'corridor_west' on hall"),
    (dict(sim_layout="office", sim_target_room="lab"), "sim_target_room: unknown 'lab' on office"),
])
def test_the_nodes_refuse_an_unknown_plan_start_or_room(params, problem):
    with pytest.raises(ValueError) as err:
        ExploreNodeParams(environment="sim", **params).validate()
    assert problem in str(err.value)
    ExploreNodeParams(environment="sim", sim_layout="wing", sim_start="corridor_north", sim_target_room="lab").validate()
    if "sim_start" not in params:           # the simulated camera renders the same world
        with pytest.raises(ValueError) as err:
            SimCameraNodeParams(**params).validate()
        assert problem in str(err.value)


@pytest.mark.parametrize("name", list(FLOOR_PLANS))
def test_no_object_closes_a_door_whatever_the_seed_places(name):
    """Objects are placed at random in their rooms; none may close a door to the robot (its
    radius inflated on the true map), so every room stays reachable from the first start."""
    from embodied_memory.explore.planning import GridPaths, traversable
    from embodied_memory.sim.exploration import SimExplorationEnv, make_task, start_pose
    from embodied_memory.sim.world import DOOR_CLEARANCE
    plan = floor_plan(name)
    for seed in range(6):
        start = start_pose(plan.first_start, name)
        env = SimExplorationEnv(make_task(seed, name), start, 64, 48)
        try:
            grid = env.ground_truth_grid()
            paths = GridPaths(traversable(grid.values(), 3), tuple(int(v) for v in grid.to_cell(*start[:2])),
                              grid.params.resolution)                  # 0.3 m robot radius
            x, y = grid.to_world(*np.indices(grid.shape))
            for room, (x0, x1, z0, z1) in plan.rooms.items():
                inside = (x > x0) & (x < x1) & (-y > z0) & (-y < z1)
                assert np.isfinite(paths.dist[inside]).mean() > 0.5, (name, seed, room)
            for kind, _, ent in env.world.objects:
                assert not plan.near_door(ent.pos[0], ent.pos[2], ent.radius + DOOR_CLEARANCE), (name, seed, kind)
        finally:
            env.close()


@pytest.mark.parametrize("name", list(FLOOR_PLANS))
def test_the_rendered_world_has_every_door_cut(name):
    """Looking level through each door from 1.5 m before it, the camera sees into the next room
    (depth beyond the door passage): MiniWorld cut the portal the plan names."""
    import math

    from embodied_memory.sim.exploration import SimExplorationEnv, make_task, start_pose
    plan = floor_plan(name)
    env = SimExplorationEnv(make_task(0, name), start_pose(plan.first_start, name), 64, 48)
    try:
        env.world.agent.cam_pitch = 0.0                       # level: the ray passes over objects and furniture
        for door in plan.doors:
            x0, x1, z0, z1 = plan.door_rect(door)
            if plan.door_along_x(door):                       # rooms one above the other: look along +z
                x, z, yaw, gap = (x0 + x1) / 2, z0 - 1.5, -math.pi / 2, z1 - z0
            else:                                             # side by side: look along +x
                x, z, yaw, gap = x0 - 1.5, (z0 + z1) / 2, 0.0, x1 - x0
            env.teleport(x, -z, yaw)
            depth = env.observe().depth
            h, w = depth.shape
            assert depth[h // 2, w // 2] > 1.5 + gap + 1.0, (name, door.rooms, float(depth[h // 2, w // 2]))
    finally:
        env.close()
