"""Forgetting a person end to end over DDS: replay a simulated patrol, the operator names the
identities of the person seen most (one name: they are merged) and forgets that name, replay
again (a second episode of the same patrol): no residue of the forgotten ids in SQLite, the
vector indexes, perception's identity state or the files; the person is not recorded again
(perception's default, ``forgotten_person: drop``); and the second replay stores as many
observations as the first (nothing rejected because the person came back)."""
import json
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from embodied_memory_interfaces.srv import Forget, GetMemoryStats, NameIdentity, QueryMemory

from chaos import Listener, people_in_view, simulated_day, start_replay
from rosutil import LaunchedStack, call, wait_until

pytestmark = pytest.mark.integration


def _stack_file(path: Path, data: Path, episode: str) -> Path:
    path.write_text(f"""nodes:
  frame_selector:
    executable: frame_selector_node
    parameters: {{policy: uniform, segment_s: 10.0, frames_per_segment: 3, episode_id: {episode}, flush_after_s: 1.0}}
  perception:
    executable: perception_node
    parameters: {{data_dir: "{data}"}}
  memory:
    executable: memory_node
    parameters: {{data_dir: "{data}", markers_period_s: 2.0}}
""")
    return path


def _replay_and_settle(tmp, bag, listener, expected_min):
    replay = start_replay(bag, tmp / "replay.log")
    assert replay.wait(timeout=300) == 0, (tmp / "replay.log").read_text()
    counts = []

    def settled():
        counts.append(call(listener.node, GetMemoryStats, "/memory/stats", GetMemoryStats.Request()).stats.observations)
        return len(counts) > 5 and counts[-1] >= expected_min and len(set(counts[-5:])) == 1 and \
            listener.value("/perception", "observations_unacknowledged", -1) == 0
    wait_until(settled, 240, interval=1.0, what="perception to finish")
    return counts[-1]


def _query(node, tool, **args):
    res = call(node, QueryMemory, "/memory/query", QueryMemory.Request(tool=tool, arguments_json=json.dumps(args)))
    return json.loads(res.result_json) if res.success else res.error


def _mentions(db_path: Path, identity: str) -> list[str]:
    """Every table row (as SQL text) that names ``identity``, tombstones excepted."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return [line[:160] for line in db.iterdump() if identity in line and "forgotten_identities" not in line]
    finally:
        db.close()


def _who(data: Path, truth, episode: str) -> dict[str, Counter]:
    """identity -> the simulator's people seen in its sightings (unambiguous views only); the
    test's ground truth, never given to the system."""
    db = sqlite3.connect(f"file:{data / 'memory.sqlite3'}?mode=ro", uri=True)
    out = defaultdict(Counter)
    for identity, t in db.execute("SELECT s.identity_id, o.t FROM sightings s JOIN observations o ON o.id = s.obs "
                                  "WHERE s.identity_id IS NOT NULL AND o.episode_id = ?", (episode,)):
        visible = people_in_view(truth, t)
        if len(visible) == 1:
            out[identity][visible[0]] += 1
    db.close()
    return out


def test_forget_a_person_then_keep_recording(tmp_path, ros_context):
    episode, truth = simulated_day()
    data = tmp_path / "data"
    listener = Listener(ros_context)
    stack = LaunchedStack(_stack_file(tmp_path / "one.yaml", data, "patrol_one"), tmp_path / "one.log")
    try:
        first = _replay_and_settle(tmp_path, episode / "bag", listener, 20)
        people = _query(listener.node, "people")
        who = _who(data, truth, "patrol_one")
        person = Counter(name for counts in who.values() for name in counts.elements()).most_common(1)[0][0]
        gone_ids = sorted(i for i, counts in who.items() if counts.most_common(1)[0][0] == person)
        for identity in gone_ids:   # the operator recognises the person on stored images and names them
            assert call(listener.node, NameIdentity, "/memory/name_identity",
                        NameIdentity.Request(identity_id=identity, display_name="Forgettable")).success
        seen_in = _query(listener.node, "person_observations", person="Forgettable", limit=1000)
        images = [r["image_path"] for r in seen_in if r.get("image_path")]
        assert len(people) >= 2 and images and all(Path(p).exists() for p in images)

        forget = call(listener.node, Forget, "/memory/forget", Forget.Request(mode="identity", identity_id="Forgettable"))
        assert forget.success and forget.sightings_removed == len(seen_in), forget.message
        assert forget.files_removed >= len(images)
        for identity in gone_ids:
            wait_until(lambda: f"forgot identity {identity}" in stack.log(), 30, what="perception to forget too")
        assert not any(Path(p).exists() for p in images)                   # keyframe images that showed them
        assert "unknown person" in _query(listener.node, "export_identity", person="Forgettable")
        from embodied_memory.people.identity import IdentityManager
        meta, arrays = IdentityManager.read_snapshot(data / "identities")
        state = json.dumps(meta)
        for identity in gone_ids + ["Forgettable"]:
            assert "unknown person" in _query(listener.node, "export_identity", person=identity)
            assert _mentions(data / "memory.sqlite3", identity) == []
            assert identity not in state
        assert (data / "identities" / "identities.journal").read_text() == ""
    finally:
        assert stack.stop() == 0, stack.log()

    # the robot keeps recording: the person walks past again (a second episode of the same patrol)
    stack = LaunchedStack(_stack_file(tmp_path / "two.yaml", data, "patrol_two"), tmp_path / "two.log")
    try:
        total = _replay_and_settle(tmp_path, episode / "bag", listener, first + 1)
        second = total - first
        assert second == first, f"the second replay stored {second} observations, the first {first}"
        assert "rejected observation" not in stack.log()
        for identity in gone_ids:
            assert _mentions(data / "memory.sqlite3", identity) == []         # never stored again
        # the person walked past again, but nobody recorded them: no identity holds them
        again = _who(data, truth, "patrol_two")
        print({k: dict(v) for k, v in again.items()})
        assert again and all(counts.most_common(1)[0][0] != person for counts in again.values())
    finally:
        listener.close()
        assert stack.stop() == 0, stack.log()

    # vector indexes: exactly one vector per row that has one (the scrubbed texts were re-embedded)
    from embodied_memory.params import StoreParams
    from embodied_memory.store import open_store
    store = open_store(StoreParams(data_dir=str(data)))
    try:
        stats = store.stats()
        db = sqlite3.connect(f"file:{data / 'memory.sqlite3'}?mode=ro", uri=True)
        text_rows = db.execute("SELECT COUNT(*) FROM observations WHERE text_emb IS NOT NULL").fetchone()[0]
        image_rows = db.execute("SELECT COUNT(*) FROM observations WHERE image_emb IS NOT NULL").fetchone()[0]
        db.close()
        assert stats["vectors"] == {"text": text_rows, "image": image_rows}
        for identity in gone_ids:
            assert not any(identity in r["description"] for r in store.semantic_observations(identity, n=30))
    finally:
        store.close()
