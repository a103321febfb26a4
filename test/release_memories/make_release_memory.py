"""Writes the memory a release leaves behind (``schema<N>/memory.sqlite3``), for
test_store_release_memories.py to open with every later release. Run once per schema version,
by the release that introduces it, and commit the file; never regenerate an existing one.

    .venv/bin/python test/release_memories/make_release_memory.py
"""
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from embodied_memory.store import open_store  # noqa: E402
from embodied_memory.store.migrations import SCHEMA_VERSION  # noqa: E402
from embodied_memory.types import PersonSighting, SemanticRule  # noqa: E402

from store_fixtures import T0, HOUR, fixture_observations, make_params, obs, unit  # noqa: E402


def main() -> int:
    out = HERE / f"schema{SCHEMA_VERSION}" / "memory.sqlite3"
    if out.exists():
        print(f"{out} exists: a release memory is never rewritten", file=sys.stderr)
        return 1
    tmp = Path(tempfile.mkdtemp())
    store = open_store(make_params(tmp, "sqlite_faiss"))
    records = fixture_observations(tmp)
    records[2].people[0].position = (1.8, 2.2, 0.0)                    # where alice stood
    stood_elsewhere = obs(6, T0 + 27 * HOUR, "carol at the printer seen from the corridor", 10, 0, "corridor",
                          episode="day2", image=unit(7))
    stood_elsewhere.people = [PersonSighting((0, 0, 10, 20), "carol", 0.9, 0.8, face_embedding=unit(9, 8),
                                             position=(14.0, 3.0, 0.0), track_id=3 << 20)]
    store.insert(records + [stood_elsewhere])
    store.name_identity("alice", "Alice")
    store.add_rule(SemanticRule("r1", "if_then", "kitchen", "the kitchen door is closed", "try the corridor door",
                                episode_id="day1", created=T0))
    store.save_occupancy_map("day1", np.array([[0, 100], [-1, 0]], np.int8), 0.5, (-1.0, -2.0))
    store.forget_identity("bob")
    store.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(tmp / "store" / "memory.sqlite3") as source, sqlite3.connect(out) as copy:
        source.backup(copy)     # one self-contained file (no WAL beside it)
    with sqlite3.connect(out) as conn:
        conn.execute("VACUUM")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"wrote {out} ({out.stat().st_size} bytes, schema {SCHEMA_VERSION})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
