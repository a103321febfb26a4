"""Memories written by released schemas (test/release_memories/schema<N>/memory.sqlite3, frozen
files, see make_release_memory.py there) open with this release: migrated with a backup where
older, every kind of record still read back. And once a new migration step is added, the
current release's memory goes through it the same way."""
import shutil
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

from embodied_memory.store import migrations, open_store
from embodied_memory.store.errors import UnknownPersonError
from embodied_memory.store.migrations import SCHEMA_VERSION

from store_fixtures import T0, make_params

RELEASES = sorted((Path(__file__).parent / "release_memories").glob("schema*/memory.sqlite3"))


def _version(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])


def _open_copy(release: Path, tmp_path):
    (tmp_path / "store").mkdir()
    db = tmp_path / "store" / "memory.sqlite3"
    shutil.copyfile(release, db)
    return db, open_store(make_params(tmp_path, "sqlite_faiss"))


def _reads_everything(store):
    assert store.observation_count() == 7
    assert {h["id"] for h in store.semantic_observations("red mug in the kitchen", n=3, now=T0 + 30 * 3600)} == \
        {"o0", "o2", "o5"}
    alice = store.person_observations("Alice")
    assert [r["id"] for r in sorted(alice, key=lambda r: r["t"])] == ["o0", "o2"]
    assert [r for r in alice if r["id"] == "o2"][0]["person_position"][:2] == pytest.approx([1.8, 2.2])
    carol = store.person_observations("carol")
    assert carol[0]["person_position"][:2] == pytest.approx([14.0, 3.0])
    with pytest.raises(UnknownPersonError):
        store.person_observations("bob")                       # forgotten before the release wrote it
    assert "bob" in store.forgotten_identities()
    assert [r["rule_id"] for r in store.rules_for("kitchen door closed", k=1)] == ["r1"]
    grid = store.load_occupancy_map("day1")
    assert grid is not None and np.array_equal(grid["grid"], [[0, 100], [-1, 0]])


def test_there_is_a_memory_of_the_current_schema():
    assert any(_version(r) == SCHEMA_VERSION for r in RELEASES), \
        f"run test/release_memories/make_release_memory.py (schema {SCHEMA_VERSION}) and commit its file"


@pytest.mark.parametrize("release", RELEASES, ids=[r.parent.name for r in RELEASES])
def test_a_released_memory_opens_and_reads_back(tmp_path, release):
    written = _version(release)
    db, store = _open_copy(release, tmp_path)
    try:
        _reads_everything(store)
        if written >= 6:     # perception's track number of a sighting (schema 6) survives later releases
            assert store.export_identity("carol")["sightings"][-1]["track"] == 3 << 20
    finally:
        store.close()
    assert _version(db) == SCHEMA_VERSION
    assert (db.with_name(f"memory.sqlite3.schema{written}.bak")).exists() == (written < SCHEMA_VERSION)


def test_after_a_new_migration_step_the_current_memory_is_migrated(tmp_path, monkeypatch, caplog):
    current = next(r for r in RELEASES if _version(r) == SCHEMA_VERSION)
    step = SCHEMA_VERSION + 1
    monkeypatch.setitem(migrations.MIGRATIONS, step, ("observations get a note (a test step)",
                                                      ("ALTER TABLE observations ADD COLUMN test_note TEXT",)))
    for module in [m for name, m in sys.modules.items() if name.startswith("embodied_memory.store")]:
        if getattr(module, "SCHEMA_VERSION", None) == SCHEMA_VERSION:
            monkeypatch.setattr(module, "SCHEMA_VERSION", step)
    caplog.set_level("WARNING")
    db, store = _open_copy(current, tmp_path)
    try:
        _reads_everything(store)
    finally:
        store.close()
    assert _version(db) == step and db.with_name(f"memory.sqlite3.schema{SCHEMA_VERSION}.bak").exists()
    assert f"from schema {SCHEMA_VERSION} to {step}" in caplog.text
    with sqlite3.connect(db) as conn:
        assert "test_note" in [row[1] for row in conn.execute("PRAGMA table_info(observations)")]
