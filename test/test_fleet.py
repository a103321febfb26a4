"""A fleet's shared memory on a real PostgreSQL server (started by the tests, never mocked):
robots writing at once from their own processes, answers across robots, a server that dies
mid-replay."""
from __future__ import annotations

import json
import multiprocessing
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest

from embodied_memory.params import StoreParams
from embodied_memory.store import open_store
from embodied_memory.store.image_files import insert_with_images
from embodied_memory.types import PersonSighting

from fleet_workers import observation, write
from store_fixtures import DIMS, T0

ROBOTS = ("spot1", "spot2", "nav2base")


def fleet_store(url, tmp_path, robot=""):
    return open_store(StoreParams(backend="postgres", postgres_url=url, data_dir=str(tmp_path / (robot or "query")),
                                  robot_id=robot, text_embedder="hash", **DIMS))


def test_three_robots_write_at_once_and_every_record_is_there_once_with_its_robot(fleet_database, tmp_path):
    reader = fleet_store(fleet_database, tmp_path)
    reader.warm_up()                       # indexes open before the robots write: they must catch up
    ctx = multiprocessing.get_context("spawn")
    robots = [ctx.Process(target=write, args=(fleet_database, str(tmp_path / r), r, 120)) for r in ROBOTS]
    for p in robots:
        p.start()
    for p in robots:
        p.join(120)
        assert p.exitcode == 0
    rows = reader._conn().execute("SELECT robot_id, COUNT(*), COUNT(DISTINCT observation_id) FROM observations "
                                  "GROUP BY robot_id ORDER BY robot_id").fetchall()
    assert [tuple(r) for r in rows] == [(r, 120, 120) for r in sorted(ROBOTS)]
    # the reader opened before they wrote: its times and vectors follow the server (call_tool)
    latest = reader.call_tool("latest_observation", {})
    assert latest["robot"] in ROBOTS and latest["id"].startswith(latest["robot"] + "/")
    assert reader.stats()["observations"] == 360
    hits = reader.call_tool("text_observations", {"query": "spot2 sees a lab scene number 33", "k": 1})
    assert hits[0]["id"] == "spot2/33" and hits[0]["robot"] == "spot2"
    lab = reader.call_tool("waypoint_observations", {"waypoint_id": "lab", "limit": 500})
    assert {r["robot"] for r in lab} == set(ROBOTS) and len(lab) == 3 * 40
    assert reader._index("image").count() == 360
    reader.close()


def test_a_record_written_by_one_robot_is_found_by_anothers_query_agent(fleet_database, tmp_path):
    spot1, spot2 = fleet_store(fleet_database, tmp_path, "spot1"), fleet_store(fleet_database, tmp_path, "spot2")
    spot2.warm_up()
    kept, shown = observation("spot1", 0, T0 + 40), observation("spot1", 1, T0 + 50, person="alice")
    kept.image_jpeg = shown.image_jpeg = b"\xff\xd8jpeg"
    insert_with_images(spot1, [kept, shown])
    seen = spot2.call_tool("person_observations", {"person": "alice"})
    assert [(r["id"], r["robot"]) for r in seen] == [("spot1/1", "spot1")]
    spot2.insert([observation("spot2", 2, T0 + 60, person="alice")])
    seen = spot1.call_tool("person_observations", {"person": "alice"})
    assert [(r["id"], r["robot"]) for r in seen] == [("spot2/2", "spot2"), ("spot1/1", "spot1")]
    # a forget on the server reaches every robot's open indexes (the generation moved)
    assert spot2.forget_identity("alice")["sightings_removed"] == 2      # made on another robot (its operator)
    assert spot1.call_tool("persons_between", {"t_start": T0, "t_end": T0 + 100}) == []
    assert spot1.identities() == [] and "alice" in spot1.forgotten_identities()
    # the image showing her is on spot1's disk: spot1 removes it (its memory node, every fleet_poll_s)
    assert Path(shown.image_path).exists() and spot2.remove_files_handed_over() == 0
    assert spot1.remove_files_handed_over() == 1 and spot1.remove_files_handed_over() == 0
    assert not Path(shown.image_path).exists() and Path(kept.image_path).exists()
    spot1.close()
    spot2.close()


def test_the_server_killed_mid_replay_loses_no_acknowledged_record_and_stores_none_twice(
        fleet_server, fleet_database, tmp_path):
    acks = tmp_path / "acks.jsonl"
    ctx = multiprocessing.get_context("spawn")
    writer = ctx.Process(target=write, args=(fleet_database, str(tmp_path / "spot1"), "spot1", 400, str(acks), 4))
    writer.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not acks.exists() or len(acks.read_text().splitlines()) < 20):
        time.sleep(0.05)
    fleet_server.kill()                    # mid-replay, as a power cut
    time.sleep(1.5)
    fleet_server.start()
    writer.join(180)
    assert writer.exitcode == 0
    *lines, last = acks.read_text().splitlines()
    assert json.loads(last)["retries"] > 0            # the writer did meet the dead server
    acknowledged = [i for line in lines for i in json.loads(line)]
    assert len(acknowledged) == len(set(acknowledged)) == 400
    store = fleet_store(fleet_database, tmp_path)
    counts = dict(store._conn().execute("SELECT observation_id, COUNT(*) FROM observations GROUP BY observation_id"
                                        ).fetchall())
    assert set(counts) == set(acknowledged) and set(counts.values()) == {1}
    store.close()


def test_a_robot_started_before_its_server_fails_with_a_clear_error(tmp_path):
    params = StoreParams(backend="postgres", postgres_url="postgresql://spot1@127.0.0.1:9/fleet",
                         data_dir=str(tmp_path), robot_id="spot1", text_embedder="hash", postgres_connect_timeout_s=1)
    with pytest.raises(Exception, match="cannot be reached"):
        open_store(params)


def test_a_password_in_the_url_is_refused():
    with pytest.raises(ValueError, match="postgres_password_env"):
        StoreParams(backend="postgres", postgres_url="postgresql://spot1:secret@fleet:5432/fleet").validate()


def test_a_robots_credentials_cannot_delete_or_write_another_robots_records(fleet_server, tmp_path, monkeypatch):
    from conftest import FLEET_TEST_PASSWORD
    from embodied_memory.fleet.roles import add_operator, add_robot, create_fleet
    from embodied_memory.store import StoreConfigError, StoreError
    fleet_url = create_fleet(fleet_server.url(), FLEET_TEST_PASSWORD, "fleet_rls",
                             StoreParams(text_embedder="hash", data_dir=str(tmp_path / "admin"), **DIMS))
    for robot in ("spot1", "spot2"):
        add_robot(fleet_server.url(), FLEET_TEST_PASSWORD, robot, f"pw-{robot}")
        monkeypatch.setenv(f"PW_{robot.upper()}", f"pw-{robot}")
    add_operator(fleet_server.url(), FLEET_TEST_PASSWORD, "ops", "pw-ops")
    monkeypatch.setenv("PW_OPS", "pw-ops")

    def login(user, robot_id=""):
        return open_store(StoreParams(backend="postgres", postgres_url=fleet_url.replace("postgres@", f"{user}@"),
                                      postgres_password_env=f"PW_{user.upper()}", robot_id=robot_id,
                                      data_dir=str(tmp_path / user), text_embedder="hash", **DIMS))
    spot1, spot2 = login("spot1", "spot1"), login("spot2", "spot2")
    assert spot1.insert([observation("spot1", 1, T0 + 10, person="spot1.person_0007")]) == ["spot1/1"]
    assert spot2.insert([observation("spot2", 2, T0 + 20, person="spot2.person_0003")]) == ["spot2/2"]
    operator = login("ops")
    operator.merge_identities("spot2.person_0003", "spot1.person_0007", reviewed=True)   # as reconcile does
    operator.name_identity("spot1.person_0007", "Alice")
    assert [r["robot"] for r in spot2.call_tool("person_observations", {"person": "Alice"})] == ["spot2", "spot1"]
    with pytest.raises(StoreError, match="permission denied"):
        spot2.forget_episode("spot1/day1")                     # another robot's records
    with pytest.raises(StoreError, match="permission denied"):
        spot2.forget_episode("spot2/day1")                     # deleting is an operator's act
    raw = spot2._conn()                                        # its own SQL, not the store's
    for attack in ("DELETE FROM observations",
                   "UPDATE meta SET value='999' WHERE key='schema_version'",        # would stop every robot
                   "UPDATE identity_aliases SET alias_id='spot1.person_0099'",     # an alias's id never changes
                   "UPDATE identity_changes SET undone=1",
                   "INSERT INTO observations(id, observation_id, t, episode_id, robot_id) "
                   "VALUES (999999999, 'x', 1, 'e', 'spot2')"):                     # ids from the server only
        with pytest.raises(sqlite3.DatabaseError, match="permission denied|cannot insert"):
            raw.execute(attack)
    for attack in ("INSERT INTO identities(identity_id, display_name, created) VALUES ('spot1.person_0100', '', 1)",
                   "INSERT INTO identities(identity_id, display_name, created) VALUES ('spot10.person_0001', '', 1)",
                   "INSERT INTO identity_aliases(alias_id, identity_id) VALUES ('spot1.person_0101', 'spot2.x')",
                   "INSERT INTO identity_changes(t, kind, source, target, sightings) "      # a forged journal entry:
                   "VALUES (1, 'merge', 'spot2.person_0003', 'spot2.person_0003', "          # an undo would move
                   "(SELECT '[' || MIN(id) || ']' FROM sightings))",                         # spot1's sighting
                   "INSERT INTO identity_changes(t, kind, source, target, sightings) "      # clearing the doubts
                   "VALUES (1, 'reviewed', 'spot1.person_0007', 'spot1.person_0007', '[]')",  # on spot1's person
                   "INSERT INTO occupancy_maps(episode_id, resolution, data) VALUES ('spot1/day1', 0.1, '')"):
        with pytest.raises(sqlite3.DatabaseError, match="row-level security"):
            raw.execute(attack)                                # another robot's range (no prefix wildcards)
    assert raw.execute("UPDATE identities SET display_name='Bob' WHERE identity_id='spot1.person_0007'").rowcount == 0
    for attack in ("INSERT INTO observations(id, observation_id, t, episode_id, robot_id) OVERRIDING SYSTEM VALUE "
                   "VALUES (999999999, 'spot2/x', 1, 'spot2/e', 'spot2')",                   # its own id, chosen
                   ):
        with pytest.raises(sqlite3.DatabaseError, match="permission denied"):
            raw.execute(attack)
    taken = observation("spot2", 5, T0 + 25)
    taken.observation_id = "spot1/100"                                # an id in spot1's range, taken in advance
    with pytest.raises(StoreError, match="row-level security"):
        spot2.insert([taken])
    with pytest.raises(StoreConfigError, match="robot_id"):
        login("spot2", "spot1")                                # spot2's login writing as spot1: refused at open
    with pytest.raises(StoreConfigError, match="refused this login"):
        open_store(StoreParams(backend="postgres", postgres_url=fleet_url.replace("postgres@", "spot1@"),
                               postgres_password_env="PW_OPS", robot_id="spot1", data_dir=str(tmp_path / "x"),
                               text_embedder="hash", **DIMS))                    # a wrong password: not retried
    assert spot1.stats()["observations"] == 2
    # its perception merges two of its own identities (its sightings, its ids): allowed
    spot1.insert(_faces_of("spot1", "spot1.person_0001", face_seed=1, n=2, t0=T0 + 40, start=40))
    spot1.insert(_faces_of("spot1", "spot1.person_0002", face_seed=1, n=2, t0=T0 + 50, start=50))
    assert spot1.merge_identities("spot1.person_0002", "spot1.person_0001") == 2
    with pytest.raises(StoreError, match="permission denied|row-level security"):
        spot2.merge_identities("spot1.person_0001", "spot2.person_0009")     # another robot's identity
    with pytest.raises(StoreError, match="permission denied for 1 of 2 rows"):
        spot1.merge_identities("spot1.person_0007", "spot1.person_0001")     # Alice has a sighting of spot2's
    spot1.insert([observation("spot1", 70, T0 + 70, person="spot1.person_0008")])
    assert spot1.merge_identities("spot1.person_0008", "spot1.person_0007") == 1   # into her: its own sighting only
    assert len(spot2.call_tool("person_observations", {"person": "Alice"})) == 3
    with pytest.raises(StoreError, match="naming spot1.person_0007: permission denied"):
        spot2.name_identity("spot1.person_0007", "Bob")                      # naming is an operator's
    assert len(spot1.call_tool("person_observations", {"person": "Alice"})) == 3   # nothing half done
    assert operator.forget_identity("Alice")["sightings_removed"] == 3      # fleet-wide
    assert [p["person"] for p in spot1.call_tool("persons_between", {"t_start": T0, "t_end": T0 + 100})] == \
        ["spot1.person_0001"]
    # the operator's retention: the deleted records' images on spot1's disk go when spot1 next looks
    pictured = observation("spot1", 60, T0 + 60)
    pictured.image_jpeg = b"\xff\xd8jpeg"
    insert_with_images(spot1, [pictured])
    assert operator.forget_episode("spot1/day1")["observations_removed"] == 7
    assert spot2.remove_files_handed_over() == 0 and Path(pictured.image_path).exists()
    assert spot1.remove_files_handed_over() == 1 and not Path(pictured.image_path).exists()
    # its perception's track gives an earlier faceless sighting the identity (a journalled move of its own)
    far, near = observation("spot1", 80, T0 + 80, person="spot1.person_0009"), \
        observation("spot1", 81, T0 + 81, person="spot1.person_0009")
    far.people[0].identity_id = ""
    for o in (far, near):
        o.episode_id, o.people[0].track_id = "spot1/day2", 5
    spot1.insert([far])
    spot1.insert([near])
    assert len(spot2.call_tool("person_observations", {"person": "spot1.person_0009"})) == 2
    assert spot1.identity_changes(limit=1)[0]["kind"] == "track"
    # spot2's outbox holding a record the server refuses (another robot's id range): set aside, the rest sent
    from embodied_memory.store.outbox import Outbox
    box = Outbox(tmp_path / "spot2_outbox", spot2.params)
    foreign = observation("spot2", 90, T0 + 90)
    foreign.observation_id = "spot1/90"
    for o in (observation("spot2", 91, T0 + 91), foreign, observation("spot2", 92, T0 + 92)):
        box.put(o)
    assert box.flush(spot2) == 2 and list(box.refused()) == ["spot1/90"] and "row-level security" in \
        box.refused()["spot1/90"]
    box.close()
    for store in (spot1, spot2, operator):
        store.close()


def _faces_of(robot, person_id, face_seed, n, t0, start=0):
    """n keyframes of one robot seeing one person: their face (an axis of its own plus noise, as
    two people's real face embeddings are far apart), clear."""
    rng = np.random.default_rng(abs(hash((robot, person_id))) % 2**32)
    base = np.eye(8)[face_seed]
    out = []
    for i in range(n):
        face = (base / np.linalg.norm(base) + rng.normal(scale=0.08, size=8)).astype(np.float32)
        o = observation(robot, start + i, t0 + i)
        o.people = [PersonSighting((0, 0, 60, 120), person_id, 0.9, 0.9, face_box=(10, 10, 40, 40),
                                   face_embedding=face)]
        out.append(o)
    return out


def test_one_person_seen_by_two_robots_becomes_one_identity_fleet_wide(fleet_database, tmp_path):
    from embodied_memory.fleet.identities import reconcile, robot_of
    spot1, spot2 = fleet_store(fleet_database, tmp_path, "spot1"), fleet_store(fleet_database, tmp_path, "spot2")
    spot1.insert(_faces_of("spot1", "spot1.person_0001", face_seed=1, n=5, t0=T0))            # Alice, enrolled by spot1
    spot2.insert(_faces_of("spot2", "spot2.person_0001", face_seed=2, n=5, t0=T0 + 100))      # Bob, first for spot2
    spot2.insert(_faces_of("spot2", "spot2.person_0002", face_seed=1, n=5, t0=T0 + 200, start=10))  # Alice again
    spot1.name_identity("spot1.person_0001", "Alice")
    merges = reconcile(spot2, dry_run=True)
    assert [(m.absorbed, m.survivor) for m in merges] == [("spot2.person_0002", "spot1.person_0001")]
    assert robot_of("spot2.person_0002") == "spot2" and robot_of("person_0002") == ""
    reconcile(spot1)
    alice = spot2.call_tool("person_observations", {"person": "Alice", "limit": 50})
    assert len(alice) == 10 and {r["robot"] for r in alice} == {"spot1", "spot2"}
    assert sorted(i.identity_id for i in spot1.identities()) == ["spot1.person_0001", "spot2.person_0001"]
    # spot2's perception still calls her by its own id: what it stores now is hers too
    spot2.insert(_faces_of("spot2", "spot2.person_0002", face_seed=1, n=1, t0=T0 + 300, start=20))
    assert len(spot1.call_tool("person_observations", {"person": "Alice", "limit": 50})) == 11
    assert len(spot1.call_tool("person_observations", {"person": "spot2.person_0002", "limit": 50})) == 11  # an alias
    # spot2's perception then finds her under a new id of its own, either way round: she stays one person
    spot2.insert(_faces_of("spot2", "spot2.person_0005", face_seed=1, n=1, t0=T0 + 310, start=21))
    spot2.merge_identities("spot2.person_0005", "spot2.person_0002")        # into the id reconcile merged away
    spot2.insert(_faces_of("spot2", "spot2.person_0006", face_seed=1, n=1, t0=T0 + 320, start=22))
    spot2.merge_identities("spot2.person_0002", "spot2.person_0006")        # the merged-away id into a new one
    assert len(spot1.call_tool("person_observations", {"person": "Alice", "limit": 50})) == 13
    assert sorted(i.identity_id for i in spot1.identities()) == ["spot1.person_0001", "spot2.person_0001"]
    assert reconcile(spot1) == []                      # nothing left to merge; an undone merge is never redone
    change = [c for c in spot1.identity_changes(limit=5) if c["kind"] == "merge"][-1]     # reconcile's
    assert (change["kind"], change["source"]) == ("merge", "spot2.person_0002")
    spot1.undo_identity_change(change["change"])
    # her 5 journalled sightings went back to spot2's id (the one stored under Alice since stays: the store's undo)
    assert reconcile(spot1) == [] and len(spot1.call_tool("person_observations", {"person": "Alice"})) == 8
    assert len(spot1.call_tool("person_observations", {"person": "spot2.person_0002"})) == 5
    spot1.close()
    spot2.close()


def test_a_fleet_set_up_from_the_command_line(tmp_path):
    """README's fleet set-up: a server, the fleet's database, a robot's and an operator's logins,
    the robot writing, the operator reconciling; passwords only in the environment."""
    import os
    import subprocess
    from conftest import VENV_BIN
    from embodied_memory.fleet.server import free_port
    port = free_port()
    env = {**os.environ, "EMBODIED_MEMORY_FLEET_ADMIN_PASSWORD": "admin-pw"}
    admin = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def cli(*args, password=""):
        run = subprocess.run([str(VENV_BIN / "embodied-memory"), "fleet", *args], capture_output=True, text=True,
                             env={**env, "EMBODIED_MEMORY_DB_PASSWORD": password}, timeout=120)
        assert run.returncode == 0, run.stderr
        return run.stdout
    folder = str(tmp_path / "server")
    assert "fleet memory server running" in cli("server", "--folder", folder, "--port", str(port))
    try:
        assert f"127.0.0.1:{port}/fleet" in cli("init", "--admin-url", admin, "--face-dim", "8", "--image-dim", "16",
                                               "--reid-dim", "8", "--cache-dir", str(tmp_path / "admin"))
        out = cli("add-robot", "spot1", "--admin-url", admin, password="spot1-pw")
        assert "made" in out and "--namespace spot1" in out and f"postgresql://{{robot_id}}@127.0.0.1:{port}/fleet" in out
        assert "password changed" in cli("add-robot", "spot1", "--admin-url", admin, password="spot1-pw")
        assert "--set memory.robot_id=spot-2" in cli("add-robot", "spot-2", "--admin-url", admin, password="x")
        cli("add-operator", "ops", "--admin-url", admin, password="ops-pw")
        os.environ["SPOT1_PW"] = "spot1-pw"
        robot = open_store(StoreParams(backend="postgres", postgres_url=f"postgresql://spot1@127.0.0.1:{port}/fleet",
                                       postgres_password_env="SPOT1_PW", robot_id="spot1", data_dir=str(tmp_path / "r"),
                                       text_embedder="hash", **DIMS))
        assert robot.insert([observation("spot1", 1, T0)]) == ["spot1/1"]
        robot.close()
        out = cli("reconcile", "--url", f"postgresql://ops@127.0.0.1:{port}/fleet", "--dry-run",
                  "--cache-dir", str(tmp_path / "ops"), password="ops-pw")
        assert "0 identities to merge across robots" in out
        out = cli("journal", "--url", f"postgresql://ops@127.0.0.1:{port}/fleet", password="ops-pw")
        assert out.strip() == "no identity changes journalled yet"

        def refused(*args, password="ops-pw"):
            run = subprocess.run([str(VENV_BIN / "embodied-memory"), "fleet", *args], capture_output=True, text=True,
                                 env={**env, "EMBODIED_MEMORY_DB_PASSWORD": password}, timeout=120)
            assert run.returncode == 1 and run.stderr.strip().splitlines()[-1].startswith("error: "), run.stderr
            assert "Traceback" not in run.stderr and "Warning" not in run.stderr, run.stderr
            return run.stderr
        assert "not an operator's login" in refused("journal", "--url", f"postgresql://spot1@127.0.0.1:{port}/fleet",
                                                    password="spot1-pw")
        assert "not 'abc'" in refused("undo", "abc", "--url", f"postgresql://ops@127.0.0.1:{port}/fleet")
        assert "no password in --url" in refused("journal", "--url", f"postgresql://ops:pw@127.0.0.1:{port}/fleet")
        assert "no password in --admin-url" in refused("add-robot", "spot3", "--admin-url",
                                                       admin.replace("postgres@", "postgres:pw@"))
        taken = refused("server", "--folder", str(tmp_path / "other"), "--port", str(port))
        assert "a port in use" in taken and "could not" in taken
        bad = subprocess.run([str(VENV_BIN / "embodied-memory"), "fleet", "name", "spot1.person_0001",
                              "--url", f"postgresql://ops@127.0.0.1:{port}/fleet"], capture_output=True, text=True,
                             env={**env, "EMBODIED_MEMORY_DB_PASSWORD": "ops-pw"})
        assert bad.returncode == 1 and bad.stderr.strip() == "error: name needs IDENTITY NAME"
        wrong = subprocess.run([str(VENV_BIN / "embodied-memory"), "fleet", "journal", "--url",
                                f"postgresql://ops@127.0.0.1:{port}/fleet"], capture_output=True, text=True,
                               env={**env, "EMBODIED_MEMORY_DB_PASSWORD": "not-it"})
        assert wrong.returncode == 1 and "password authentication failed" in wrong.stderr
        assert len(wrong.stderr.strip().splitlines()) == 1          # one line, no traceback
        gone = subprocess.run([str(VENV_BIN / "embodied-memory"), "fleet", "forget", "nobody", "--url",
                               f"postgresql://ops@127.0.0.1:{port}/fleet", "--cache-dir", str(tmp_path / "ops")],
                              capture_output=True, text=True, env={**env, "EMBODIED_MEMORY_DB_PASSWORD": "ops-pw"})
        assert gone.returncode == 1 and "unknown person 'nobody'" in gone.stderr, gone.stderr
        bad = subprocess.run([str(VENV_BIN / "embodied-memory"), "fleet", "add-robot", "spot2", "--admin-url", admin],
                             capture_output=True, text=True, env={**env, "EMBODIED_MEMORY_DB_PASSWORD": ""})
        assert bad.returncode != 0 and "EMBODIED_MEMORY_DB_PASSWORD" in bad.stderr
    finally:
        os.environ.pop("SPOT1_PW", None)
        assert "stopped" in cli("stop", "--folder", folder)
    assert "no fleet memory server running" in cli("stop", "--folder", folder)


def test_an_answer_says_which_robot_saw_the_person(fleet_database, tmp_path):
    """"Where did you last see Alice?" on a fleet's memory: the robot that saw her, in the text
    and in the evidence."""
    from embodied_memory.agent.query_agent import AgentParams, QueryAgent
    from embodied_memory.agent.tools import StoreMemoryClient
    spot1, spot2 = fleet_store(fleet_database, tmp_path, "spot1"), fleet_store(fleet_database, tmp_path, "spot2")
    spot1.insert([observation("spot1", 1, T0 + 10, person="alice")])
    spot2.insert([observation("spot2", 2, T0 + 20, person="alice")])
    agent = QueryAgent(StoreMemoryClient(spot1), AgentParams(planner="rules"))
    answer = agent.ask("Where did you last see alice?", as_of=T0 + 60)
    assert answer.status == "ok" and answer.waypoint == "corridor" and answer.text.endswith("Seen by spot2."), answer
    spot1.close()
    spot2.close()


def test_an_agent_knows_which_robot_it_answers_for(fleet_database, tmp_path):
    """"Where are you?" on a fleet's memory: the asking robot's own latest record, not the
    fleet's latest (another robot's)."""
    from embodied_memory.agent.query_agent import AgentParams
    from embodied_memory.agent.tools import StoreMemoryClient, ToolBox
    from zoneinfo import ZoneInfo
    spot1, spot2 = fleet_store(fleet_database, tmp_path, "spot1"), fleet_store(fleet_database, tmp_path, "spot2")
    spot1.insert([observation("spot1", 1, T0 + 10)])
    spot2.insert([observation("spot2", 2, T0 + 20)])
    assert AgentParams(robot_id="spot1").robot_id == "spot1"
    for robot, where in (("spot1", "kitchen"), ("", "corridor")):     # "" (one robot's memory): the latest of any
        state = ToolBox(StoreMemoryClient(spot1), T0 + 60, ZoneInfo("UTC"), robot=robot).run("current_state", {})
        assert state["robot_waypoint"] == where, (robot, state)
    spot1.close()
    spot2.close()


def test_tools_take_a_robot_or_span_the_fleet(fleet_database, tmp_path):
    spot1, spot2 = fleet_store(fleet_database, tmp_path, "spot1"), fleet_store(fleet_database, tmp_path, "spot2")
    spot1.insert([observation("spot1", i, T0 + i, person="alice") for i in range(0, 6)])
    spot2.insert([observation("spot2", i, T0 + 100 + i, person="alice") for i in range(0, 6)])
    q = spot1.call_tool
    assert {r["robot"] for r in q("observations_between", {"t_start": T0, "t_end": T0 + 200})} == {"spot1", "spot2"}
    assert {r["robot"] for r in q("observations_between", {"t_start": T0, "t_end": T0 + 200, "robot": "spot2"})} == \
        {"spot2"}
    assert q("latest_observation", {"robot": "spot1"})["id"] == "spot1/5"
    assert q("latest_observation", {})["id"] == "spot2/5"
    assert [r["id"] for r in q("person_observations", {"person": "alice", "robot": "spot1", "limit": 2})] == \
        ["spot1/5", "spot1/4"]
    lab = q("waypoint_observations", {"waypoint_id": "lab", "robot": "spot2"})
    assert lab and {r["robot"] for r in lab} == {"spot2"}
    assert q("observations_between", {"t_start": T0, "t_end": T0 + 200, "robot": "spot9"}) == []
    spot1.close()
    spot2.close()


def test_a_writer_that_waited_too_long_for_the_fleets_lock_writes_again_once_it_is_free(
        fleet_database, tmp_path, monkeypatch):
    """The fleet's write lock held by another session past lock_timeout: the write is a write fault
    (kept, resent), and the next one is stored, not refused by a transaction left aborted."""
    import psycopg
    from conftest import FLEET_TEST_PASSWORD
    from embodied_memory.store import StoreWriteError
    from embodied_memory.store import postgres
    monkeypatch.setitem(postgres.SESSION_LIMITS, "options", "-c lock_timeout=1s")
    spot1 = fleet_store(fleet_database, tmp_path, "spot1")
    holder = psycopg.connect(fleet_database, password=FLEET_TEST_PASSWORD, autocommit=True)
    holder.execute("SELECT pg_advisory_lock(%s)", (postgres.WRITE_LOCK_KEY,))
    with pytest.raises(StoreWriteError, match="did not answer in time"):
        spot1.insert([observation("spot1", 1, T0 + 1)])
    holder.execute("SELECT pg_advisory_unlock(%s)", (postgres.WRITE_LOCK_KEY,))
    holder.close()
    assert spot1.insert([observation("spot1", 1, T0 + 1)]) == ["spot1/1"]
    assert spot1.insert([observation("spot1", 2, T0 + 2)]) == ["spot1/2"]
    spot1.close()
