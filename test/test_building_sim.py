"""The building world (benchmark v2): seeded schedules, free-space line of sight, and a short
rendered episode whose ground truth matches what the real face detector finds in the bag."""
import collections
import itertools
import math

import pytest

from embodied_memory.sim import building
from embodied_memory.sim.building import (DOORS, ROBOT_CLEARANCE, PERSON_GAP, ROOMS, WAYPOINTS, all_person_spots,
                                          line_of_sight, room_of, walk_path)
from embodied_memory.sim.building_episode import BuildingConfig
from embodied_memory.sim.episode import EpisodeConfig, day_start
from embodied_memory.sim.schedules import make_schedule

WAITS = BuildingConfig().waits
DAYS = [day_start(BuildingConfig(), d) for d in range(5)]


def _hour(t: float, day: int) -> float:
    return (t - DAYS[day]) / 3600


@pytest.fixture(scope="module")
def schedule():
    return make_schedule(DAYS, people=8, visitors=1, seed=3, waits=WAITS)


def test_schedules_are_seeded(schedule):
    again = make_schedule(DAYS, people=8, visitors=1, seed=3, waits=WAITS)
    other = make_schedule(DAYS, people=8, visitors=1, seed=4, waits=WAITS)
    assert [s.to_dict() for s in again.stays] == [s.to_dict() for s in schedule.stays]
    assert [s.to_dict() for s in other.stays] != [s.to_dict() for s in schedule.stays]


def test_each_persons_day_is_contiguous_from_arrival_to_departure(schedule):
    days = collections.defaultdict(list)
    for s in schedule.stays:
        days[(s.person, s.day)].append(s)
    for stays in days.values():
        stays.sort(key=lambda s: s.start)
        assert all(abs(a.end - b.start) < 1e-6 for a, b in zip(stays, stays[1:]))
        assert all(s.end >= s.start for s in stays)
        assert stays[0].kind == "walk" and stays[0].room == "reception"     # in through reception
        assert stays[-1].kind == "walk" and stays[-1].room == "reception"   # and out


def test_schedules_have_the_events_of_an_office_week(schedule):
    regulars = [n for n, p in schedule.people.items() if not p.visitor]
    visitors = [n for n, p in schedule.people.items() if p.visitor]
    assert len(regulars) == 8 and len(visitors) == 1
    assert {p.home for p in schedule.people.values() if not p.visitor} >= {"open_office", "lab", "design_studio",
                                                                           "manager_office", "library"}
    present = collections.defaultdict(set)
    arrival = {}
    for s in schedule.stays:
        present[s.day].add(s.person)
        arrival[(s.person, s.day)] = min(arrival.get((s.person, s.day), math.inf), _hour(s.start, s.day))
    assert any(10.0 <= h <= 11.6 for (p, _), h in arrival.items() if p in regulars)               # late arrivals
    assert any(p not in present[d] for d in range(1, 5) for p in regulars)                        # absences
    assert all(present[d] & set(regulars) for d in range(5))                                      # never everyone
    assert [d for d in range(5) if visitors[0] in present[d]] and \
        len([d for d in range(5) if visitors[0] in present[d]]) == 1                              # one day only
    kinds = collections.Counter(s.kind for s in schedule.stays)
    assert kinds["visit"] > 0 and kinds["walk"] > 0 and kinds["wait"] == 1
    assert {s.room for s in schedule.stays if s.kind == "walk"} >= {"north_corridor", "south_corridor", "reception"}
    for day in range(5):
        noon = DAYS[day] + 12.2 * 3600
        lunch = collections.Counter(s.room for s in schedule.stays if s.kind == "lunch" and s.day == day)
        assert lunch["kitchen"] >= 2 and lunch["lounge"] >= 1, lunch
        assert any(s.room == "kitchen" and s.start <= noon < s.end for s in schedule.stays if s.kind == "lunch")
        meetings = [s for s in schedule.stays if s.kind == "meeting" and s.day == day]
        for m in meetings:   # nobody meets alone
            assert sum(1 for o in meetings if o.room == m.room and o.start < m.end and m.start < o.end) >= 2
        during_wait = DAYS[day] + (14.0 + 10 / 60) * 3600   # the robot waits in the conference room at 14:00
        assert sum(1 for m in meetings if m.room == "conference_room" and m.start <= during_wait < m.end) >= 2


def test_people_are_where_their_stays_say(schedule):
    walks = [s for s in schedule.stays if s.kind == "walk" and s.room.endswith("corridor")][:50]
    for s in walks:
        x, z, room = schedule.position_at(s.person, (s.start + s.end) / 2)
        x0, x1, z0, z1 = ROOMS[room]
        assert room == s.room and x0 - 0.5 <= x <= x1 + 0.5 and z0 - 0.5 <= z <= z1 + 0.5
    desk = next(s for s in schedule.stays if s.kind == "desk")
    assert schedule.position_at(desk.person, desk.start + 1)[:2] == desk.xz
    assert schedule.position_at(desk.person, DAYS[desk.day] + 3 * 3600) is None     # 3 am: not in the building


def test_spots_are_distinct_inside_their_rooms_and_clear_of_the_robot():
    spots = all_person_spots()
    assert len(spots) >= 12 + 12 + 26 + 2
    for (_, _, p), (_, _, q) in itertools.combinations(spots, 2):
        assert math.dist(p, q) >= PERSON_GAP
    for _, room, p in spots:
        assert room_of(*p) == room
        assert min(math.dist(p, w) for w in WAYPOINTS.values()) >= ROBOT_CLEARANCE


def test_line_of_sight_goes_through_doors_not_walls():
    assert line_of_sight((0.0, 3.0), (1.0, 8.0))            # corridor -> conference room through its door
    assert not line_of_sight((-8.0, 3.0), (-5.0, 8.0))      # corridor -> open office through the wall
    assert not line_of_sight((-14.0, 8.0), (-10.0, 8.0))    # kitchen -> open office (no door between)
    assert not line_of_sight((-16.0, 6.0), (0.0, 6.0))      # north room -> north room along the corridor
    assert line_of_sight((0.0, 3.0), (0.0, -4.0))           # corridor -> corridor through reception
    assert not line_of_sight((-8.0, 3.0), (-8.0, -4.0))     # ... and not anywhere else
    assert not line_of_sight((-8.0, 3.0), (8.0, -4.0))
    assert line_of_sight((-18.0, 3.0), (18.0, 3.0))         # along a corridor


def test_walks_follow_doors():
    legs = walk_path(building.DESKS["open_office"][0], building.SEATS["huddle_room"][0])
    assert [room for room, _ in legs] == ["open_office", "north_corridor", "reception", "south_corridor",
                                          "huddle_room"]
    points = [p for _, pts in legs for p in pts]
    assert all(line_of_sight(p, q) for p, q in zip(points, points[1:]))
    assert len(DOORS) == 12


def test_cache_directories_are_per_world(tmp_path, monkeypatch):
    from embodied_memory.sim import building_episode, episode
    monkeypatch.setenv("EMBODIED_MEMORY_CACHE", str(tmp_path))
    made = []

    def fake(cfg, path, progress=True):
        made.append(type(cfg).__name__)
        path.mkdir(parents=True)
        (path / "ground_truth.json").write_text("{}")

    monkeypatch.setattr(episode, "generate_episode", fake)
    monkeypatch.setattr(building_episode, "generate_building_episode", fake)
    office = episode.cached_episode(EpisodeConfig(seed=1), progress=False)
    big = episode.cached_episode(BuildingConfig(seed=1), progress=False)
    assert office.name.startswith("office_seed1_") and big.name.startswith("building_seed1_")
    assert episode.cached_episode(BuildingConfig(seed=1), progress=False) == big and made == ["EpisodeConfig",
                                                                                             "BuildingConfig"]


@pytest.mark.integration
def test_small_world_truth_has_the_v2_fields(tmp_path):
    from embodied_memory.sim.episode import generate_episode
    truth = generate_episode(EpisodeConfig(seed=3, patrol_hours=(12.5,), fps=1.0), tmp_path / "e", progress=False)
    assert truth.config["world"] == "small" and len(truth.day_starts) == 1
    assert set(truth.rooms) == {"kitchen", "office", "meeting_room", "corridor", "lobby"}
    assert truth.rooms["kitchen"]["shared"] and not truth.rooms["office"]["shared"]
    assert set(truth.people) == {"alice", "bob"}
    for s in truth.stays:
        hour = ((s["start"] + s["end"]) / 2 - truth.day_starts[0]) / 3600
        routine = next(r for r in truth.routines[0] if r["name"] == s["person"])
        assert s["room"] == ("kitchen" if routine["lunch"][0] <= hour < routine["lunch"][1] else routine["home"])
    seen = [(n, w) for f in truth.frames for n, w in f["seen"].items()]
    assert seen and all(w["position"] == truth.positions[n][w["room"]] for n, w in seen)


@pytest.mark.integration
def test_a_short_building_episode(tmp_path):
    from embodied_memory.ingest.bag_reader import Bag
    from embodied_memory.ingest.images import decode_compressed
    from embodied_memory.perception.faces import YuNetSFace
    from embodied_memory.sim.building_episode import generate_building_episode
    cfg = BuildingConfig(seed=2, patrol_hours=(9.5,), patrol_wings=("all",), waits=(("kitchen", 12.0, 15),))
    truth = generate_building_episode(cfg, tmp_path / "b", progress=False)
    assert truth.config["world"] == "building" and len(truth.rooms) == 13 and len(truth.day_starts) == 1
    assert sum(p["visitor"] for p in truth.people.values()) == 1 and len(truth.people) == 9
    times = [f["t"] for f in truth.frames]
    assert times == sorted(times) and len(set(times)) == len(times)
    for f in truth.frames:
        for name, seen in f["seen"].items():
            xmin, xmax, ymin, ymax = truth.rooms[seen["room"]]["bounds"]
            x, y = seen["position"]
            assert xmin - 0.5 <= x <= xmax + 0.5 and ymin - 0.5 <= y <= ymax + 0.5, (name, seen)   # 0.5: door passages
    assert {f["waypoint"] for f in truth.frames} >= set(ROOMS) - {"north_corridor", "south_corridor"}
    # the wait: someone at lunch in the kitchen is seen over >= 10 minutes
    t0, t1 = truth.patrols[-1]
    spans = collections.defaultdict(list)
    for f in truth.frames:
        if t0 <= f["t"] <= t1:
            for name, seen in f["seen"].items():
                if seen["room"] == "kitchen":
                    spans[name].append(f["t"])
    assert spans and max(max(ts) - min(ts) for ts in spans.values()) >= 600
    # what the truth says is visible within 4 m (and not cut by the image border), the real face
    # detector finds in the bag's image (a few stock portraits are hard to detect small: >= 90 %)
    detector = YuNetSFace()
    frames = {round(f["t"], 3): f for f in truth.frames}
    checked = found = 0
    with Bag(tmp_path / "b" / "bag") as bag:
        assert {"/camera/color/image_raw/compressed", "/camera/depth/image_raw", "/odom", "/tf", "/clock",
                "/waypoint"} <= set(bag.topics)
        images = 0
        for msg in bag.messages(["/camera/color/image_raw/compressed"]):
            images += 1
            frame = frames[round(msg.stamp_ns / 1e9, 3)]
            near = [(n, s) for n, s in frame["seen"].items()
                    if math.dist(frame["robot"][:2], s["position"]) <= 4.0 and 40 <= s["u"] <= cfg.width - 40]
            if not near:
                continue
            faces = detector.detect(decode_compressed(bag.deserialize(msg).data))
            for _, seen in near:
                checked += 1
                found += any(abs((f.box[0] + f.box[2]) / 2 - seen["u"]) < 30 for f in faces)
    assert images == len(truth.frames)
    assert checked >= 20 and found >= 0.9 * checked, (found, checked)


def test_the_building_patrolled_by_a_fleet(tmp_path):
    """Two robots in one building (sim/fleet_episode.py): one bag each, the same people and
    schedule as the one-robot world of that seed, the fleet's truth their frames in time order,
    each stamp naming one robot's frame."""
    from embodied_memory.ingest.bag_reader import Bag
    from embodied_memory.sim.building_episode import BuildingSim
    from embodied_memory.sim.fleet_episode import FleetConfig, FleetRobot, generate_fleet_episode
    from embodied_memory.sim.naming import frames_by_time
    cfg = FleetConfig(seed=3, robots=(FleetRobot("spot1", ("north",), (10.0,), (("kitchen", 12.0, 5),)),
                                      FleetRobot("spot2", ("south",), (10.0,))))
    truth = generate_fleet_episode(cfg, tmp_path / "f", progress=False)
    alone = BuildingSim.build(BuildingConfig(seed=3, waits=(("kitchen", 12.0, 5),)))
    assert truth.stays == alone.truth.stays and truth.people == alone.truth.people
    alone.env.close()
    times = [f["t"] for f in truth.frames]
    assert times == sorted(times)
    by_robot = collections.Counter(f["robot_id"] for f in truth.frames)
    assert set(by_robot) == {"spot1", "spot2"}
    for robot, n in by_robot.items():
        with Bag(tmp_path / "f" / robot / "bag") as bag:
            assert bag.topics["/camera/color/image_raw/compressed"].count == n
    north = {f["room"] for f in truth.frames if f["robot_id"] == "spot1"}
    south = {f["room"] for f in truth.frames if f["robot_id"] == "spot2"}
    assert "kitchen" in north and "lounge" in south and "lounge" not in north and "kitchen" not in south
    # both patrol at 10:00: their frames interleave, never within naming's 0.01 s of each other
    both = [f for f in truth.frames if 10 * 3600 - 600 < f["t"] - truth.day_starts[0] < 10 * 3600 + 900]
    assert {f["robot_id"] for f in both} == {"spot1", "spot2"}
    assert min(b["t"] - a["t"] for a, b in zip(both, both[1:])) >= 0.09
    lookup = frames_by_time(truth)
    assert all(lookup.get(round(f["t"], 3)) is f for f in truth.frames[::25])
