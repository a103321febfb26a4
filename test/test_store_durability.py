"""Crash safety and index rebuild: what `insert` acknowledged is there after kill -9."""
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from embodied_memory.store import open_store

from store_fixtures import filled_store, make_params

WRITER = textwrap.dedent("""
    import sys, json
    sys.path.insert(0, {test_dir!r})
    from store_fixtures import make_params, obs, T0
    from embodied_memory.store import open_store
    from pathlib import Path
    store = open_store(make_params(Path({tmp!r}), {backend!r}, checkpoint_every={checkpoint_every}))
    if {warm_up}:
        store.warm_up()      # the indexes open (a closed one is caught up from SQLite when it opens)
    i = 0
    while True:
        batch = [obs(i + j, T0 + i + j, f"record {{i + j}} in the corridor", float(j), 0.0, "corridor",
                     episode="crash") for j in range({batch})]
        for oid in store.insert(batch):
            print(oid, flush=True)   # acknowledged
        i += {batch}
""")


@pytest.mark.parametrize("backend", ["sqlite_faiss", "milvus"])
def test_acknowledged_records_survive_kill_9(tmp_path, backend):
    code = WRITER.format(test_dir=os.path.dirname(__file__), tmp=str(tmp_path), backend=backend, checkpoint_every=50,
                         warm_up=False, batch=7)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    acked = []
    try:
        for line in proc.stdout:
            acked.append(line.strip())
            if len(acked) >= 400:
                break
        os.kill(proc.pid, signal.SIGKILL)  # mid-ingest: it keeps writing until killed
    finally:
        proc.kill()
        proc.wait()
    assert len(acked) >= 400
    store = open_store(make_params(tmp_path, backend))
    try:
        stored = {r["id"] for r in store.observations_between(0, 1e12, limit=10**6)}
        assert set(acked) <= stored
        # vectors were caught up from SQLite for records newer than the last snapshot
        assert store.stats()["vectors"]["text"] == len(stored)
        assert store.text_observations("record 399 corridor", k=1)[0]["id"] == "o399"
    finally:
        store.close()


def test_missing_or_corrupt_index_is_rebuilt(tmp_path, caplog):
    store = filled_store(tmp_path, "sqlite_faiss")
    expected = [r["id"] for r in store.text_observations("red mug", k=3)]
    store.warm_up()  # both snapshots written on close
    store.close()
    caplog.clear()
    (tmp_path / "store" / "text.faiss").unlink()
    (tmp_path / "store" / "image.faiss").write_bytes(b"garbage")
    with caplog.at_level("WARNING"):
        store = open_store(make_params(tmp_path, "sqlite_faiss"))
        assert [r["id"] for r in store.text_observations("red mug", k=3)] == expected  # opens the index
        store.warm_up()
    assert "text.faiss is missing" in caplog.text and "image.faiss is unreadable" in caplog.text
    assert store.stats()["vectors"] == {"text": 6, "image": 6}
    store.close()


def test_stale_snapshot_after_crash_during_delete_is_rebuilt(tmp_path):
    """A delete bumps the generation in SQLite; an older snapshot must not be trusted."""
    store = filled_store(tmp_path, "sqlite_faiss")
    store.warm_up()
    store.close()
    meta = tmp_path / "store" / "text.json"
    saved_snapshot = (tmp_path / "store" / "text.faiss").read_bytes(), meta.read_text()
    store = open_store(make_params(tmp_path, "sqlite_faiss"))
    store.forget_episode("day2")
    store.close()
    # simulate a crash after the SQLite commit but before the snapshot was rewritten
    (tmp_path / "store" / "text.faiss").write_bytes(saved_snapshot[0])
    meta.write_text(saved_snapshot[1])
    store = open_store(make_params(tmp_path, "sqlite_faiss"))
    assert store.stats()["vectors"]["text"] == 5 and json.loads(meta.read_text())["count"] == 5
    store.close()


@pytest.mark.parametrize("approximate", ["hnsw", "ivf"])
def test_approximate_index_survives_forget_and_reopen(tmp_path, approximate):
    """Above approximate_min_vectors the FAISS index is approximate (HNSW by default, or IVF);
    removal, filters and reopen stay correct."""
    from store_fixtures import T0, obs
    params = make_params(tmp_path, "sqlite_faiss", approximate_min_vectors=300, checkpoint_every=10**6,
                         text_approximate_index=approximate)
    store = open_store(params)
    store.insert([obs(i, T0 + i, f"item {i} on shelf {i % 7}", float(i), 0.0, f"wp{i % 5}",
                      people=["pat"] if i % 50 == 0 else [], episode="big") for i in range(600)])
    store.warm_up()          # opening never waits for the approximate index: a (background) snapshot builds it
    store.checkpoint()
    assert store._index("text").kind == approximate
    assert store.text_observations("item 123 on shelf 4", k=1)[0]["id"] == "o123"
    hits = store.semantic_observations("item on shelf", person="pat", n=20, now=T0 + 700)
    assert sorted(int(h["id"][1:]) for h in hits) == list(range(0, 600, 50))
    store.forget_older_than(hours=0, now=T0 + 100.5)  # removes o0..o100
    store.close()
    store = open_store(params)
    assert store._index("text").kind == approximate and store.stats()["vectors"]["text"] == 499
    assert store.text_observations("item 321 on shelf 6", k=1)[0]["id"] == "o321"
    hits = store.semantic_observations("item on shelf", person="pat", n=20, now=T0 + 700)
    assert sorted(int(h["id"][1:]) for h in hits) == list(range(150, 600, 50))
    store.close()


def test_inserts_and_searches_do_not_wait_for_a_snapshot_being_written(tmp_path, monkeypatch):
    """The periodic snapshot runs in the background: while its file is being written (its
    fsync held here), inserts are stored and indexed and queries answer."""
    import threading

    from embodied_memory.store import vector_index
    from store_fixtures import T0, obs
    store = open_store(make_params(tmp_path, "sqlite_faiss", checkpoint_every=20))
    store.insert([obs(i, T0 + i, f"record {i} in the corridor") for i in range(5)])
    store.warm_up()
    writing, release = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def held_fsync(fd):
        if threading.current_thread().name == "vector_snapshot":
            writing.set()
            release.wait(30)
        real_fsync(fd)
    monkeypatch.setattr(vector_index.os, "fsync", held_fsync)
    try:
        store.insert([obs(i, T0 + i, f"record {i} in the corridor") for i in range(5, 25)])   # due: in the background
        assert writing.wait(10), "no background snapshot started"
        store.insert([obs(99, T0 + 99, "a bicycle in the lobby")])        # returns while the snapshot is held
        assert store.text_observations("bicycle lobby", k=1)[0]["id"] == "o99"
        assert store._checkpointer.is_alive()          # still held: neither call waited for it
    finally:
        release.set()
        store.close()
    reopened = open_store(make_params(tmp_path, "sqlite_faiss"))
    try:
        assert reopened.stats()["vectors"]["text"] == 26
    finally:
        reopened.close()




def test_kill_9_while_a_snapshot_is_written_loses_nothing(tmp_path):
    """SIGKILL exactly while the background snapshot's temporary file is being written (tens
    of MB): every acknowledged record is stored, the vector index holds each one once, the
    newest is found."""
    import threading
    import time
    code = WRITER.format(test_dir=os.path.dirname(__file__), tmp=str(tmp_path), backend="sqlite_faiss",
                         checkpoint_every=1000, warm_up=True, batch=250)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    acked = []
    reader = threading.Thread(target=lambda: acked.extend(line.strip() for line in proc.stdout), daemon=True)
    reader.start()
    tmp_snapshot = tmp_path / "store" / "text.faiss.tmp"
    caught = False
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            if len(acked) >= 15000 and tmp_snapshot.exists():
                os.kill(proc.pid, signal.SIGKILL)
                caught = True
                break
            time.sleep(0.0005)
    finally:
        proc.kill()
        proc.wait()
        reader.join(10)
    assert caught, f"no snapshot was caught being written ({len(acked)} records acknowledged)"
    store = open_store(make_params(tmp_path, "sqlite_faiss"))
    try:
        stored = {r["id"] for r in store.observations_between(0, 1e12, limit=10**6)}
        assert set(acked) <= stored
        assert store.stats()["vectors"]["text"] == len(stored)       # each once
        newest = acked[-1]
        assert store.text_observations(f"record {newest[1:]} corridor", k=1)[0]["id"] == newest
    finally:
        store.close()
