"""Reliability of the store: tool arguments are checked before SQLite/FAISS, answers never use
the future, forgetting leaves nothing, write faults are clear and harmless, the vector
indexes hold exactly one vector per row, Milvus credentials come from the environment."""
import json
import os
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from embodied_memory.store import (InvalidArgumentError, StoreError, StoreWriteError, UnknownPersonError,
                                   open_store)
from embodied_memory.store.memory_store import MemoryStore, milvus_credentials

from store_fixtures import HOUR, T0, filled_store, make_params, obs, unit


@pytest.fixture
def store(tmp_path):
    s = filled_store(tmp_path, "sqlite_faiss")
    yield s
    s.close()


def ids(records):
    return [r["id"] for r in records]


def snapshot(store):
    """Everything stored, to check that a rejected call changed nothing."""
    conn = store._conn()
    return {table: conn.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
            for table in ("observations", "sightings", "identities", "episodes", "summaries", "identity_aliases")}


# -- 1. tool arguments ----------------------------------------------------------------------------
@pytest.mark.parametrize("tool, arguments, message", [
    ("get_observation", {"observation_id": [1]}, "get_observation: observation_id must be a string, got list"),
    ("get_observation", {}, "get_observation: observation_id is required"),
    ("get_observation", {"observation_id": None}, "observation_id must be a string, got null"),
    ("get_observation", {"observation_id": "o" * 129}, "observation_id has 129 characters, at most 128"),
    ("get_observation", {"observation_id": "\udc80"}, "observation_id is not valid UTF-8"),
    ("get_observation", {"observation_id": "o0", "extra": 1}, "get_observation: unknown argument 'extra'"),
    ("semantic_observations", {"query": "x" * 2001}, "semantic_observations: query has 2001 characters"),
    ("semantic_observations", {"query": "mug", "n": True}, "n must be an integer, got boolean"),
    ("semantic_observations", {"query": "mug", "n": 0}, "n must be >= 1, got 0"),
    ("semantic_observations", {"query": "mug", "n": 10**9}, "n must be <= 1000"),
    ("observations_near", {"x": 10**400, "y": 0}, "observations_near: x is too large"),
    ("semantic_observations", {"query": "mug", "n": 2.5}, "n must be an integer, got 2.5"),
    ("semantic_observations", {"query": "mug", "before": float("nan")}, "before must be finite, got nan"),
    ("semantic_observations", {"query": "mug", "before": float("inf")}, "before must be finite"),
    ("semantic_observations", {"query": "mug", "before": -1}, "before must be >= 0, got -1"),
    ("semantic_observations", {"query": "mug", "now": 1e20}, "now must be <= 1e+11"),
    ("semantic_observations", {"query": 5}, "semantic_observations: query must be a string, got integer"),
    ("observations_near", {"x": "1", "y": 0}, "observations_near: x must be a number, got string"),
    ("observations_near", {"x": 0, "y": 0, "radius": 0}, "radius must be > 0, got 0"),
    ("observations_near", {"x": 0, "y": 0, "radius": 1e7}, "radius must be <= 1e+06"),
    ("observations_near", {"x": False, "y": 0}, "x must be a number, got boolean"),
    ("observations_between", {"t_start": 0, "t_end": 1e12}, "t_end must be <= 1e+11"),
    ("person_observations", {"person": "alice", "order": "random"}, "order must be one of newest, oldest"),
    ("export_identity", {"person": "alice", "include_embeddings": 1}, "include_embeddings must be a boolean"),
    ("visual_similarity", {"embedding": [0.1] * 15}, "visual_similarity: embedding has 15 values, expected 16"),
    ("visual_similarity", {"embedding": [0.1] * 15 + ["a"]}, "embedding[15] must be a number, got string"),
    ("visual_similarity", {"embedding": [0.1] * 15 + [float("nan")]}, "embedding[15] must be finite"),
    ("visual_similarity", {"embedding": "0.1"}, "embedding must be an array of numbers, got string"),
    ("persons_per_day", {"date": {"a": {"b": [[[[[[[[1]]]]]]]]}}}, "nested more than 8 levels"),
    ("drop_table", {}, "unknown tool 'drop_table'"),
    ("people", [], "people: arguments must be a JSON object, got list"),
])
def test_call_tool_rejects_bad_arguments_before_the_database(store, tool, arguments, message):
    before = snapshot(store)
    with pytest.raises(InvalidArgumentError) as info:
        store.call_tool(tool, arguments)
    assert message in str(info.value)
    assert isinstance(info.value, StoreError) and info.value.kind == "InvalidArgumentError"
    assert snapshot(store) == before


def test_tool_table_is_derived_from_the_signatures():
    table = MemoryStore.tool_table()
    assert set(table) == set(MemoryStore.QUERY_TOOLS)
    schema = MemoryStore.tool_schema("person_observations")
    assert schema["required"] == ["person"] and schema["additionalProperties"] is False
    order = dict(schema["properties"]["order"])
    assert order.pop("description").startswith("'newest' (default)")
    assert order == {"type": "string", "enum": ["newest", "oldest"], "default": "newest"}
    assert schema["properties"]["limit"]["minimum"] == 1 and schema["properties"]["limit"]["maximum"] == 1000
    assert schema["properties"]["t_start"]["type"] == ["number", "null"]
    assert MemoryStore.tool_schema("visual_similarity")["properties"]["embedding"]["type"] == "array"


def test_valid_arguments_still_work_and_are_normalised(store):
    direct = ids(store.semantic_observations("red mug", n=2, now=T0 + 27 * HOUR))
    assert ids(store.call_tool("semantic_observations", {"query": "red mug", "n": 2.0, "person": None,
                                                         "now": T0 + 27 * HOUR})) == direct and len(direct) == 2
    assert store.call_tool("get_observation", {"observation_id": "nope"}) is None
    assert ids(store.call_tool("observations_near", {"x": 1, "y": 1, "k": 1})) == ["o0"]


def test_fuzzed_arguments_only_ever_raise_store_errors(store):
    """Every tool, every argument, hostile values: a StoreError or an answer, never anything else."""
    hostile = [None, True, -1, 0, 10**30, 10**400, [10**400], -1e308, float("nan"), float("inf"), "", "x" * 1_000_000, "\udcff",
               "\x00", [], [1], {"a": 1}, [[[[[[[[[[[]]]]]]]]]]], "2026-13-45", "'; DROP TABLE observations; --",
               1.5, "alice", "o0"]
    before = snapshot(store)
    calls = 0
    for tool, specs in MemoryStore.tool_table().items():
        base = {name: {"string": "alice", "integer": 2, "number": T0, "boolean": False,
                       "array": unit(3).tolist()}[spec.json_type] for name, spec in specs.items() if spec.required}
        for name in specs:
            for value in hostile:
                calls += 1
                try:
                    store.call_tool(tool, {**base, name: value})
                except StoreError:
                    pass
        for bad in ({**base, "unknown": 1}, "not a dict", None):
            calls += 1
            with pytest.raises(StoreError):
                store.call_tool(tool, bad)
    assert calls > 1000
    assert snapshot(store) == before


def test_unexpected_errors_inside_a_tool_come_out_as_store_errors(store, monkeypatch):
    def broken(*_args, **_kwargs):
        raise sqlite3.ProgrammingError("Error binding parameter 1: type 'list' is not supported")
    monkeypatch.setattr(store, "get_observation", broken)
    with pytest.raises(StoreError) as info:
        store.call_tool("get_observation", {"observation_id": "o1"})
    assert info.value.kind == "ProgrammingError" and "get_observation" in str(info.value)
    assert not isinstance(info.value, sqlite3.Error)


# -- 2. answers never use the future -------------------------------------------------------------
def test_answers_as_of_a_past_time_contain_nothing_stored_later(store):
    store.insert([obs(9, T0 + 4 * HOUR, "carol by the window", 30, 30, "kitchen", ["carol"], episode="visit")])
    as_of = T0 + 1.5 * HOUR       # o0 (alice, kitchen) and o1 (bob, corridor) only
    assert {p["person"]: p["sightings"] for p in store.persons_per_day("2026-03-10", before=as_of)} == \
           {"alice": 1, "bob": 1}
    assert {p["person"]: p["sightings"] for p in store.persons_per_day("2026-03-10")} == \
           {"alice": 2, "bob": 2, "carol": 1}
    people = {p["person"]: p["last_seen"] for p in store.people(before=as_of)}
    assert people == {"alice": store.iso(T0), "bob": store.iso(T0 + HOUR)}   # carol first seen later
    wps = {w["waypoint"]: w for w in store.waypoints(before=as_of)}
    assert set(wps) == {"kitchen", "corridor"}
    assert wps["kitchen"]["observations"] == 1 and wps["kitchen"]["position"] == [1.0, 1.0]
    assert wps["kitchen"]["last_visit"] == store.iso(T0)
    summary = store.daily_summary("2026-03-10", "alice", before=as_of)
    assert summary["sightings"] == 1 and "coffee" not in summary["summary"]
    assert store.daily_summary("2026-03-10", "alice")["sightings"] == 2   # the partial day was not cached
    with pytest.raises(UnknownPersonError):
        store.daily_summary("2026-03-10", "carol", before=as_of)
    # the same through the tool interface, and the fast paths agree with the slow ones
    later = T0 + 100 * HOUR
    assert store.call_tool("people", {"before": later}) == store.people()
    assert store.call_tool("waypoints", {"before": later}) == store.waypoints()
    slow = {w["waypoint"]: w for w in store.waypoints(before=T0 + 26 * HOUR - 1)}
    assert slow["kitchen"]["observations"] == 3 and slow["kitchen"]["last_visit"] == store.iso(T0 + 4 * HOUR)
    assert slow["kitchen"]["position"] == [round(32.5 / 3, 2), round(32 / 3, 2)]
    text = json.dumps([store.call_tool(tool, {"before": as_of}) for tool in ("people", "waypoints")]
                      + [store.call_tool("persons_per_day", {"date": "2026-03-10", "before": as_of})])
    for later_thing in ("carol", "meeting_room", "entrance", store.iso(T0 + 2 * HOUR)):
        assert later_thing not in text


# -- 5. forgetting is complete --------------------------------------------------------------------
def residue(store, words):
    """Rows of every table (but forgotten_identities) whose text mentions one of ``words``."""
    conn = store._conn()
    hits = []
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE "
                                         "'obs_xy%' AND name NOT IN ('forgotten_identities', 'meta')")]
    for table in tables:
        for row in conn.execute(f"SELECT * FROM {table}"):
            for value in tuple(row):
                if isinstance(value, str) and any(w in value.lower() for w in words):
                    hits.append((table, value))
    return hits


def index_ids(store, kind):
    index = store._index(kind)
    return sorted(index._ids().tolist()) if hasattr(index, "_ids") else None


def rows_with(store, column):
    return sorted(r[0] for r in store._conn().execute(f"SELECT id FROM observations WHERE {column} IS NOT NULL"))


@pytest.mark.parametrize("backend", ["sqlite_faiss", "milvus"])
def test_forget_identity_leaves_no_residue_and_later_sightings_are_dropped(tmp_path, backend):
    if backend == "milvus":
        pytest.importorskip("milvus_lite")
    store = filled_store(tmp_path, backend)
    crop = store.data_dir / "crops" / "p7.jpg"
    crop.parent.mkdir(parents=True, exist_ok=True)
    crop.write_bytes(b"jpeg")
    together = obs(7, T0 + 4 * HOUR, "person_0007 talking to bob near the sofa", 3, 3, "lounge",
                   ["person_0007", "bob"], episode="visit", image=unit(7))
    together.people[0].crop_path = str(crop)
    together.description_json = json.dumps({"persons": ["person_0007", "bob"]})
    store.insert([together])
    store.merge_identities("person_0007", "alice")        # perception: person_0007 is alice
    store.daily_summary("2026-03-10", "alice")
    store.daily_summary("2026-03-10", "bob")               # bob's summary quotes "person_0007 talking to bob"
    store.warm_up()
    result = store.forget_identity("alice")
    assert result["sightings_removed"] == 3 and result["files_removed"] == 2   # the crop + o0's keyframe image
    assert not crop.exists()
    assert residue(store, ["alice", "person_0007"]) == []
    assert {r[0] for r in store._conn().execute("SELECT identity_id FROM forgotten_identities")} == \
           {"alice", "person_0007"}
    with pytest.raises(UnknownPersonError):
        store.export_identity("alice")
    for kind, column in (("text", "text_emb"), ("image", "image_emb")):
        if backend == "sqlite_faiss":
            assert index_ids(store, kind) == rows_with(store, column)
        assert store.stats()["vectors"][kind] == len(rows_with(store, column))
    assert store.get_observation("o0")["persons"] == [] and "image_path" not in store.get_observation("o0")
    # a later observation with the forgotten id or its alias: the sighting is dropped, the rest stored
    later = [obs(60, T0 + 30 * HOUR, "person_0007 and bob at the door", 0, -5, "entrance", ["person_0007", "bob"],
                 episode="day3"),
             obs(61, T0 + 31 * HOUR, "alice alone", 0, -5, "entrance", ["alice"], episode="day3")]
    later[0].people[0].crop_path = str(crop)
    crop.write_bytes(b"jpeg")
    res = store.insert_batch(later)
    assert res.stored == ["o60", "o61"] and res.rejected == {} and res.sightings_dropped == 2
    assert not crop.exists()                               # the new crop of the forgotten person too
    assert store.get_observation("o60")["persons"] == ["bob"] and store.get_observation("o61")["persons"] == []
    assert residue(store, ["alice", "person_0007"]) == []
    assert store.stats()["vectors"]["text"] == len(rows_with(store, "text_emb"))
    store.close()


def test_forget_can_keep_the_keyframe_images(tmp_path):
    store = filled_store(tmp_path, "sqlite_faiss", forget_deletes_images=False)
    image = store.get_observation("o0")["image_path"]
    assert store.forget_identity("alice")["files_removed"] == 0
    assert os.path.exists(image) and store.get_observation("o0")["image_path"] == image
    assert store.stats()["vectors"]["image"] == 6
    store.close()


# -- 6. storage faults ----------------------------------------------------------------------------
FAULT = textwrap.dedent("""
    import json, resource, signal, sqlite3, sys
    sys.path.insert(0, {test_dir!r})
    from pathlib import Path
    from embodied_memory.store import StoreWriteError, open_store
    from store_fixtures import make_params, obs, T0
    out = {{}}
    store = open_store(make_params(Path({tmp!r}), "sqlite_faiss"))
    store.warm_up()
    before = store.stats()["observations"]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)      # writes past the limit fail with EFBIG
    biggest = max(p.stat().st_size for p in store.data_dir.iterdir() if p.is_file())
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    batch = [obs(1000 + i, T0 + 100 * 3600 + i, f"record {{i}} " + "z" * 8000, episode="full") for i in range(300)]
    for label, call, limit in (("insert", lambda: store.insert_batch(batch), biggest + 16384),
                               ("forget", lambda: store.forget_older_than(hours=0, now=T0 + 1), 1),
                               ("forget_identity", lambda: store.forget_identity("alice"), 1)):
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        try:
            call()
            out[label] = "no error"
        except StoreWriteError as exc:
            out[label] = str(exc)
        except Exception as exc:
            out[label] = "WRONG " + type(exc).__name__ + ": " + str(exc)
    out["reads"] = [len(store.observations_between(0, 1e12, limit=1000)),
                    [r["id"] for r in store.text_observations("red mug", k=2)],
                    store.stats()["observations"]]
    out["before"] = before
    out["images"] = sorted(p.name for p in store.images_dir.iterdir())
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    out["retry"] = len(store.insert_batch(batch[:3]).stored)
    store.close()
    print(json.dumps(out))
""")


def test_write_faults_raise_store_write_error_and_corrupt_nothing(tmp_path):
    store = filled_store(tmp_path, "sqlite_faiss")
    expected = ids(store.text_observations("red mug", k=2))
    store.close()
    code = FAULT.format(test_dir=os.path.dirname(__file__), tmp=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for label in ("insert", "forget", "forget_identity"):
        assert "cannot write the memory in" in out[label] and str(tmp_path / "store") in out[label], out[label]
    assert out["reads"] == [6, expected, 6] and out["before"] == 6
    assert out["images"] == ["bike.jpg", "mug.jpg"]          # a failed forget deletes nothing
    assert out["retry"] == 3
    again = open_store(make_params(tmp_path, "sqlite_faiss"))
    assert again._conn().execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert again.stats()["observations"] == 9 and ids(again.text_observations("red mug", k=2)) == expected
    assert again.stats()["vectors"]["text"] == 9
    again.close()


def test_write_fault_classification():
    from embodied_memory.store.memory_store import _is_write_fault
    import errno
    assert _is_write_fault(sqlite3.OperationalError("database or disk is full"))
    assert _is_write_fault(sqlite3.OperationalError("attempt to write a readonly database"))
    assert _is_write_fault(OSError(errno.ENOSPC, "No space left on device"))
    assert _is_write_fault(OSError(errno.EROFS, "Read-only file system"))
    assert _is_write_fault(OSError(errno.EFBIG, "File too large"))
    assert not _is_write_fault(sqlite3.OperationalError("no such table: x"))
    assert issubclass(StoreWriteError, StoreError)


# -- 7. snapshot, metadata and SQLite agree -------------------------------------------------------
def _stored_69(tmp_path):
    params = make_params(tmp_path, "sqlite_faiss")
    store = open_store(params)
    store.warm_up()
    store.close()                                 # snapshot + metadata of an empty store
    empty_meta = (tmp_path / "store" / "text.json").read_text()
    store = open_store(params)
    store.insert([obs(i, T0 + i, f"record {i} on shelf {i % 5}") for i in range(69)])
    store.warm_up()
    store.close()
    return params, empty_meta


def test_snapshot_newer_than_its_metadata_is_rebuilt_without_duplicates(tmp_path, caplog):
    params, empty_meta = _stored_69(tmp_path)
    (tmp_path / "store" / "text.json").write_text(empty_meta)   # crash between the two writes
    with caplog.at_level("WARNING"):
        store = open_store(params)
        assert store.stats()["vectors"]["text"] == 69              # was 138 for 69 rows
    assert "rebuilding" in caplog.text
    hits = ids(store.semantic_observations("record on shelf", n=69, now=T0 + 100))
    assert len(hits) == len(set(hits)) == 69
    assert index_ids(store, "text") == rows_with(store, "text_emb")
    store.close()


def test_metadata_with_an_old_max_id_does_not_re_add_held_vectors(tmp_path):
    params, _ = _stored_69(tmp_path)
    meta_path = tmp_path / "store" / "text.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "max_id": 10}))       # count right, max_id behind
    store = open_store(params)
    assert store.stats()["vectors"]["text"] == 69 and index_ids(store, "text") == rows_with(store, "text_emb")
    store.close()


def test_rows_deleted_behind_the_snapshot_are_noticed(tmp_path):
    params, _ = _stored_69(tmp_path)
    conn = sqlite3.connect(tmp_path / "store" / "memory.sqlite3")
    conn.execute("DELETE FROM observations WHERE observation_id IN ('o3', 'o4')")   # no generation bump
    conn.commit()
    conn.close()
    store = open_store(params)
    assert store.stats()["vectors"]["text"] == 67 and index_ids(store, "text") == rows_with(store, "text_emb")
    store.close()


# -- 8. Milvus ------------------------------------------------------------------------------------
def test_milvus_credentials_come_from_the_environment(tmp_path, monkeypatch):
    params = make_params(tmp_path, "milvus", milvus_uri="http://milvus.fleet:19530", milvus_user="robot7")
    env = {"MILVUS_TOKEN": "tok", "MILVUS_PASSWORD": "s3cret"}
    assert milvus_credentials(params, env) == {"token": "tok", "user": "robot7", "password": "s3cret"}
    assert milvus_credentials(make_params(tmp_path, "milvus"), {}) == {}
    with pytest.raises(StoreError, match="MILVUS_PASSWORD"):
        milvus_credentials(params, {})
    pymilvus = pytest.importorskip("pymilvus")
    seen = {}

    class Recorder:
        def __init__(self, **kwargs):
            seen.update(kwargs)
            raise ConnectionError("no server in tests")
    monkeypatch.setattr(pymilvus, "MilvusClient", Recorder)
    monkeypatch.setenv("MILVUS_TOKEN", "")
    monkeypatch.setenv("MILVUS_PASSWORD", "s3cret")
    store = open_store(params)
    with pytest.raises(RuntimeError, match="cannot connect"):
        store._index("text")
    assert seen == {"uri": "http://milvus.fleet:19530", "user": "robot7", "password": "s3cret"}
    store.close()


def test_milvus_upsert_does_not_drift_and_open_only_syncs_what_is_missing(tmp_path, caplog):
    pytest.importorskip("milvus_lite")
    store = filled_store(tmp_path, "milvus")
    store.warm_up()
    text = store._index("text")
    vecs = np.stack([unit(i, store.params.text_dim) for i in range(3)])
    text.add(np.array([1, 2, 3]), vecs)                            # a re-sent row: replaced, not counted twice
    assert text.count() == 6
    text.remove(np.array([5, 6]))                                  # vectors lost by Milvus (a crash)
    text.add(np.array([999]), vecs[:1])                            # and one SQLite does not have
    store.close()
    with caplog.at_level("WARNING"):
        store = open_store(make_params(tmp_path, "milvus"))
        assert store.stats()["vectors"]["text"] == 6
    assert "added 2, removed 1" in caplog.text
    assert sorted(store._index("text")._all_ids()) == rows_with(store, "text_emb")
    store.close()
    caplog.clear()
    with caplog.at_level("WARNING"):
        store = open_store(make_params(tmp_path, "milvus"))
        assert store.stats()["vectors"]["text"] == 6
    assert "synchronising" not in caplog.text                      # in step: no resync on open
    store.close()


def test_an_empty_person_names_nobody(tmp_path):
    """Identities without a display name have '' as their name: '' must not select one (a
    forget request with an empty id once forgot a real person)."""
    from embodied_memory.params import StoreParams
    from embodied_memory.store import UnknownPersonError, open_store
    from embodied_memory.types import Observation, PersonSighting, Pose
    store = open_store(StoreParams(data_dir=str(tmp_path / "s"), text_embedder="hash"))
    try:
        store.insert([Observation("o1", 1_800_000_000.0, "ep", Pose(0, 0, 0, 0), description="someone",
                                  people=[PersonSighting((0, 0, 1, 1), "person_0001", 0.9)])])
        for empty in ("", "  "):
            with pytest.raises(UnknownPersonError):
                store.forget_identity(empty)
        assert store.people()[0]["person"] == "person_0001"
    finally:
        store.close()
