"""A memory written by an older schema is migrated when opened (with a backup kept and a
message); one written by a newer release is refused with a clear error."""
import sqlite3

import pytest

from embodied_memory.store import StoreError, open_store
from embodied_memory.store.migrations import SCHEMA_VERSION
from embodied_memory.types import Observation, PersonSighting, Pose

from store_fixtures import T0, make_params, unit


def seen(i, t, position=None):
    return Observation(f"o{i}", t, "day1", Pose(1.0, 2.0, 0.0, 0.0), description="a person", waypoint_id="lab",
                       people=[PersonSighting((0, 0, 10, 20), "alice", 0.9, 0.8, face_embedding=unit(7, 8),
                                              position=position)])


def as_schema(db_path, version: int):
    """The database as an older release wrote it: schema 1 had no person position columns,
    schema 2 no person place."""
    dropped = {1: ("px", "py", "pz", "waypoint_id"), 2: ("waypoint_id",)}[version]
    with sqlite3.connect(db_path) as conn:
        conn.execute("DROP INDEX sightings_place")
        for column in dropped:
            conn.execute(f"ALTER TABLE sightings DROP COLUMN {column}")
        conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(version),))


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_memory_is_migrated_with_a_backup_and_keeps_its_sightings(tmp_path, caplog, version):
    params = make_params(tmp_path, "sqlite_faiss")
    store = open_store(params)
    store.insert([seen(0, T0)])
    store.close()
    db = store.db_path
    as_schema(db, version)
    with caplog.at_level("WARNING", logger="embodied_memory.store.migrations"):
        store = open_store(params)
    steps = [r.getMessage() for r in caplog.records if "migrated the memory" in r.getMessage()]
    assert [f"from schema {v} to {v + 1}" in m for v, m in zip(range(version, SCHEMA_VERSION), steps)] == \
        [True] * (SCHEMA_VERSION - version)
    backup = db.with_name(f"memory.sqlite3.schema{version}.bak")
    with sqlite3.connect(backup) as old:
        assert old.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(version)
        assert old.execute("SELECT COUNT(*) FROM sightings").fetchone()[0] == 1
    store.insert([seen(1, T0 + 60, position=(3.0, 4.0, 0.9))])
    rows = store.person_observations("alice", order="oldest")
    assert [r["id"] for r in rows] == ["o0", "o1"]
    assert "person_position" not in rows[0] and rows[1]["person_position"] == [3.0, 4.0, 0.9]
    assert [r["waypoint"] for r in rows] == ["lab", "lab"] and "robot_waypoint" not in rows[0]   # the old one: the robot's
    store.close()
    store = open_store(params)       # opened again: nothing left to migrate, nothing lost
    assert len(store.person_observations("alice")) == 2
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    store.close()


def test_a_memory_from_a_newer_release_is_refused(tmp_path):
    params = make_params(tmp_path, "sqlite_faiss")
    store = open_store(params)
    store.close()
    with sqlite3.connect(store.db_path) as conn:
        conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(StoreError, match="newer release"):
        open_store(params)


def test_a_non_finite_person_position_is_rejected(tmp_path):
    store = open_store(make_params(tmp_path, "sqlite_faiss"))
    result = store.insert_batch([seen(0, T0, position=(float("nan"), 0.0, 0.0)), seen(1, T0 + 1, (1.0, 2.0, 0.0))])
    assert result.stored == ["o1"] and "people[0].position" in result.rejected["o0"]
    store.close()


def test_where_a_person_stood_survives_export_and_import():
    from embodied_memory.records_io import observation_from_dict, observation_to_dict
    back = observation_from_dict(observation_to_dict(seen(0, T0, position=(3.0, 4.0, 0.0))))
    assert back.people[0].position == (3.0, 4.0, 0.0)
    assert observation_from_dict(observation_to_dict(seen(1, T0))).people[0].position is None
