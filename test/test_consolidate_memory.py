"""Consolidation on a real memory directory: a split relabels the store (sightings, people of each
observation, descriptions, journal), survives kill -9 and a restart, keeps the operator's names,
is undoable, and a forget after it leaves nothing of the person."""
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from embodied_memory.consolidate_memory import consolidate_memory
from embodied_memory.params import StoreParams
from embodied_memory.people.identity import IdentityManager, IdentityParams
from embodied_memory.store import StoreError, open_store
from embodied_memory.types import Observation, PersonSighting, Pose

from store_fixtures import T0

RNG = np.random.default_rng(11)
CENTRES = RNG.normal(size=(3, 32))


def face(who):
    v = CENTRES[who] + 0.2 * RNG.normal(size=32)
    return (v / np.linalg.norm(v)).astype(np.float32)


def params(data):
    return StoreParams(data_dir=str(data), text_embedder="hash", image_dim=16, face_dim=32, reid_dim=8)


def memory(data, name_first="ann"):
    """Ann seen 6 times, then Ben 4 times under Ann's id (online chaining); Cid beside Ann once."""
    store = open_store(params(data))
    observations = []
    for i in range(10):
        who = 0 if i < 6 else 1
        people = [PersonSighting((0, 0, 40, 120), "person_0001", 0.9, 0.8, face_box=(0, 0, 30, 30),
                                 face_embedding=face(who), position=(float(5 * who), 0.0, 0.0))]
        if i == 2:
            people.append(PersonSighting((50, 0, 90, 120), "person_0002", 0.9, 0.8, face_box=(50, 0, 80, 30),
                                         face_embedding=face(2), position=(3.0, 0.0, 0.0)))
        ids = ", ".join(dict.fromkeys(p.identity_id for p in people))
        observations.append(Observation(f"o{i}", T0 + 120 * i, "day1", Pose(0, 0, 0, 0),
                                        description=f"1 person visible; identified: {ids} at lab.",
                                        waypoint_id="lab", people=people))
    store.insert(observations)
    if name_first:
        store.name_identity("person_0001", name_first)
    manager = IdentityManager(IdentityParams(), data / "identities")
    for _ in range(2):
        manager.issue_id()       # person_0001 and person_0002 were issued by perception
    manager.close()
    return store


def by_observation(store):
    rows = store._conn().execute("SELECT o.observation_id, s.identity_id, o.persons, o.description FROM sightings s "
                                 "JOIN observations o ON o.id = s.obs ORDER BY o.t, s.id").fetchall()
    return [tuple(r) for r in rows]


def test_a_split_relabels_the_store_and_keeps_the_name(tmp_path):
    data = tmp_path / "mem"
    store = memory(data)
    report = consolidate_memory(store, data / "identities")
    assert report.applied and report.splits == [("person_0001", "person_0003", 4)] and report.merges == []
    rows = by_observation(store)
    ben = [r for r in rows if r[0] in {f"o{i}" for i in range(6, 10)}]
    assert {r[1] for r in ben} == {"person_0003"}
    assert all(r[2] == "person_0003" and "person_0003" in r[3] and "person_0001" not in r[3] for r in ben)
    ann = [r for r in rows if r[1] == "person_0001"]
    assert len(ann) == 6 and all("person_0001" in r[3] for r in ann)
    names = {p["person"]: p.get("name", "") for p in store.people()}
    assert names["person_0001"] == "ann" and not names.get("person_0003")
    change = store.identity_changes()[0]
    assert (change["kind"], change["source"], change["target"], change["sightings"]) == \
        ("split", "person_0001", "person_0003", 4)
    # the identity state goes on from the consolidated identities, its counter past the split
    manager = IdentityManager(IdentityParams(), data / "identities")
    assert manager.assign(face(1)).identity_id == "person_0003"
    assert manager.assign(face(0)).identity_id == "person_0001"
    assert manager.assign(np.ones(32)).identity_id == "person_0004"
    manager.close()
    # nothing more to do the second time
    again = consolidate_memory(store, data / "identities")
    assert not again.applied and again.relabelled == 0 and again.summary().endswith("(nothing to change)")
    # undo moves Ben's sightings back
    assert store.undo_identity_change(change["change"]) == 4
    assert {r[1] for r in by_observation(store)} == {"person_0001", "person_0002"}
    store.close()


def test_a_dry_run_changes_nothing(tmp_path):
    data = tmp_path / "mem"
    store = memory(data, name_first="")
    before = by_observation(store)
    report = consolidate_memory(store, data / "identities", dry_run=True)
    assert not report.applied and len(report.splits) == 1 and by_observation(store) == before
    assert store.identity_changes() == []
    store.close()


def test_people_seen_together_stay_two_people_in_the_rebuilt_identity_state(tmp_path):
    data = tmp_path / "mem"
    store = memory(data)
    # Ann beside someone whose face the camera never saw (a faceless sighting: no exemplar of them)
    store.insert([Observation("o10", T0 + 1500, "day1", Pose(0, 0, 0, 0), waypoint_id="lab", people=[
        PersonSighting((0, 0, 40, 120), "person_0001", 0.9, 0.8, face_box=(0, 0, 30, 30), face_embedding=face(0)),
        PersonSighting((50, 0, 90, 120), "person_0009", 0.9, 0.8)])])
    report = consolidate_memory(store, data / "identities")
    assert report.applied and len(report.splits) == 1
    store.close()
    manager = IdentityManager(IdentityParams(), data / "identities")
    try:
        assert manager.cannot_link("person_0001", "person_0002")     # o2: both with faces
        assert manager.cannot_link("person_0001", "person_0009")     # o10: one of them faceless
        assert not manager.cannot_link("person_0002", "person_0009")
    finally:
        manager.close()


def test_a_split_survives_kill_9_and_a_restart(tmp_path):
    data = tmp_path / "mem"
    memory(data).close()
    code = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(os.path.dirname(__file__))!r})
        from test_consolidate_memory import params
        from embodied_memory.consolidate_memory import consolidate_memory
        from embodied_memory.store import StoreError, open_store
        from pathlib import Path
        store = open_store(params(Path({str(data)!r})))
        consolidate_memory(store, Path({str(data)!r}) / "identities")
        print("applied", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)      # no close, no checkpoint
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == -signal.SIGKILL and "applied" in run.stdout, run.stderr[-2000:]
    store = open_store(params(data))
    assert {r[1] for r in by_observation(store) if r[0] in {"o6", "o7", "o8", "o9"}} == {"person_0003"}
    manager = IdentityManager(IdentityParams(), data / "identities")
    assert manager.assign(face(1)).identity_id == "person_0003"
    manager.close()
    store.close()


def test_forget_after_a_split_leaves_no_residue(tmp_path):
    data = tmp_path / "mem"
    store = memory(data)
    consolidate_memory(store, data / "identities")
    store.forget_identity("person_0003")
    rows = by_observation(store)
    assert all("person_0003" not in " ".join(map(str, r)) for r in rows)
    assert {r[1] for r in rows} == {"person_0001", "person_0002"}
    conn = store._conn()
    for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT IN "
                                 "('forgotten_identities', 'obs_xy', 'obs_xy_node', 'obs_xy_parent', 'obs_xy_rowid')"):
        for row in conn.execute(f"SELECT * FROM {table}"):
            assert "person_0003" not in " ".join(map(str, tuple(row))), (table, tuple(row))
    with pytest.raises(Exception):
        store.export_identity("person_0003")
    store.close()


def test_consolidation_refuses_while_perception_holds_the_identity_state(tmp_path):
    from embodied_memory.people.identity import IdentityStateBusy
    data = tmp_path / "mem"
    store = memory(data)
    holder = IdentityManager(IdentityParams(), data / "identities")
    with pytest.raises(IdentityStateBusy):
        consolidate_memory(store, data / "identities", lock_wait_s=0.3)
    # a dry run (the inspector's proposals) only reads: it works while perception runs
    proposal = consolidate_memory(store, data / "identities", dry_run=True, lock_wait_s=0.3)
    assert not proposal.applied and [s[0] for s in proposal.splits] == ["person_0001"]
    assert proposal.splits[0][1] == "person_0003" and len(proposal.split_sightings[0]) == 4
    holder.close()
    store.close()


def test_live_consolidation_beside_a_running_memory_returns_moves_and_keeps_identities_not_yet_stored(tmp_path):
    """Perception's pass: the memory's database read-only, the live identity state rebuilt at once
    (an identity the memory does not hold yet keeps its exemplars), the moves for the memory to
    apply, kept durably until then; applying them twice changes nothing the second time."""
    from embodied_memory.consolidate_memory import ChangesPending, consolidate_live
    data = tmp_path / "mem"
    store = memory(data)
    live = IdentityManager(IdentityParams(), data / "identities")      # perception holds it
    newcomer = live.assign(face(2) * -1.0).identity_id                  # person_0003: not in the memory yet
    report, changes = consolidate_live(data / "memory.sqlite3", live)
    assert report.applied and [(c["kind"], c["source"], c["target"], c["sightings"]) for c in changes] == \
        [("split", "person_0001", "person_0004", [8, 9, 10, 11])]
    assert live.assign(face(1)).identity_id == "person_0004" and live.assign(face(0)).identity_id == "person_0001"
    assert live.assign(face(2) * -1.0).identity_id == newcomer          # kept through the rebuild
    assert {p["person"] for p in store.people()} == {"person_0001", "person_0002"}   # the memory applies, not this
    with pytest.raises(ChangesPending):                                 # not before the memory acknowledged
        consolidate_live(data / "memory.sqlite3", live)
    _kill(live)                                                         # the moves were saved with the rebuild
    again = IdentityManager(IdentityParams(), data / "identities")
    assert [c["change_id"] for c in again.change_log] == ["split:person_0001>person_0004:8+4"]
    # perception's sighting under the new id reached the memory before the split: still applied, once
    store.insert([Observation("o10", T0 + 2000, "day1", Pose(0, 0, 0, 0), people=[PersonSighting(
        (0, 0, 40, 120), "person_0004", 0.9, 0.8, face_box=(0, 0, 30, 30), face_embedding=face(1))])])
    moves = [(c["kind"], c["source"], c["target"], c["sightings"]) for c in again.change_log]
    assert len(store.relabel_sightings(moves)) == 1 and store.relabel_sightings(moves) == []
    assert len(store.call_tool("export_identity", {"person": "person_0004"})["sightings"]) == 5
    again.acknowledged(change_id=again.change_log[0]["change_id"])
    assert again.change_log == [] and consolidate_live(data / "memory.sqlite3", again)[1] == []
    again.close()
    store.close()


def _kill(manager):
    """What kill -9 leaves: no save(), the journal as written so far, the lock released."""
    manager._journal.flush()
    manager._lock_file.close()


def test_an_undo_at_rest_moves_the_sightings_back_and_perception_follows_it(tmp_path):
    from embodied_memory.consolidate_memory import undo_at_rest
    data = tmp_path / "mem"
    store = memory(data)
    consolidate_memory(store, data / "identities")
    split = store.identity_changes()[0]["change"]
    assert undo_at_rest(store, data / "identities", split) == 4
    assert {p["person"] for p in store.people()} == {"person_0001", "person_0002"}
    manager = IdentityManager(IdentityParams(), data / "identities")
    assert manager.assign(face(1)).identity_id == "person_0001"        # Ben is Ann's again, as the operator said
    assert manager.change_log == []
    manager.close()
    with pytest.raises(StoreError, match="undo"):                        # only merges and splits
        store.undo_identity_change(store.identity_changes()[0]["change"])
    assert undo_at_rest(store, data / "identities", split) == 0          # once
    store.close()


def test_sightings_without_an_identity_are_assigned_and_the_assignment_undone(tmp_path):
    """A clear face perception left unassigned (stored with no identity: NULL) that clusters with
    Ann's is given her id by an 'assign' move, journalled; undoing it leaves it with none again."""
    data = tmp_path / "mem"
    store = memory(data)
    store.insert([Observation("o20", T0 + 5000, "day1", Pose(0, 0, 0, 0), waypoint_id="lab", people=[PersonSighting(
        (0, 0, 40, 120), "", 0.9, 0.8, face_box=(0, 0, 30, 30), face_embedding=face(0), position=(0.0, 0.0, 0.0))])])
    (nobody,), = store._conn().execute("SELECT id FROM sightings WHERE identity_id IS NULL").fetchall()
    report = consolidate_memory(store, data / "identities")
    assert report.applied and store._conn().execute("SELECT identity_id FROM sightings WHERE id=?",
                                                    (nobody,)).fetchone()[0] == "person_0001"
    assert "] assign 1 sighting of (no identity) -> person_0001" in report.summary()   # every move listed
    assign = next(c for c in store.identity_changes() if c["kind"] == "assign")
    assert (assign["source"], assign["target"], assign["sightings"]) == ("", "person_0001", 1)
    assert store.undo_identity_change(assign["change"]) == 1
    assert store._conn().execute("SELECT identity_id FROM sightings WHERE id=?", (nobody,)).fetchone()[0] is None
    assert "" not in {p["person"] for p in store.people()}
    store.close()


def test_the_command_proposes_applies_lists_and_undoes(tmp_path):
    from conftest import VENV_BIN

    def cli(*args):
        done = subprocess.run([str(VENV_BIN / "embodied-memory"), "consolidate", "--data-dir", str(data), *args],
                              capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout + done.stderr
    data = tmp_path / "mem"
    memory(data).close()
    code, out = cli("--dry-run", "--attach-only")
    assert code == 0 and "attach pass over 11 sightings: 0 without an identity given one" in out   # all have one
    code, out = cli("--dry-run")
    assert code == 0 and "1 splits" in out and "dry run: nothing changed" in out and "--only 1,3" in out
    code, out = cli("--only", "9")
    assert code == 2 and "no move 9" in out
    code, out = cli()
    assert code == 0 and "split 4 sightings of person_0001 -> person_0003" in out
    assert "journalled as identity change" in out and "--undo N" in out
    before = (data / "memory.sqlite3").stat().st_mtime_ns
    code, out = cli("--journal")
    split = next(line for line in out.splitlines() if " split " in line)
    assert code == 0 and "4 sightings of person_0001 (ann) -> person_0003" in split
    assert "person_0001 (ann) named or merged by the operator" in out
    assert (data / "memory.sqlite3").stat().st_mtime_ns == before     # listing writes nothing
    code, out = cli("--undo", split.split()[0])
    assert code == 0 and "4 sightings moved back" in out
    code, out = cli("--undo", "999")
    assert code == 2 and "no identity change 999" in out
    before = (data / "memory.sqlite3").stat().st_mtime_ns
    code, out = cli("--undo", "0")          # not "no --undo": nothing is consolidated
    assert code == 2 and "no identity change 0" in out and (data / "memory.sqlite3").stat().st_mtime_ns == before


def test_an_undone_split_is_not_split_again_by_the_next_pass(tmp_path):
    """The operator says Ben's four sightings are Ann's after all: the next pass leaves them."""
    from embodied_memory.consolidate_memory import undo_at_rest
    data = tmp_path / "mem"
    store = memory(data)
    assert consolidate_memory(store, data / "identities").splits
    assert undo_at_rest(store, data / "identities", store.identity_changes()[0]["change"]) == 4
    again = consolidate_memory(store, data / "identities")
    assert not again.applied and again.splits == [] and again.relabelled == 0
    assert {r[1] for r in by_observation(store)} == {"person_0001", "person_0002"}
    store.close()


def test_an_undone_merge_gives_names_back_and_is_never_merged_again(tmp_path):
    """One person's faces under two ids, the second named 'cid' and holding an alias: the pass
    merges them (the survivor takes the name).  The operator undoes it: each id has its own name
    and aliases again, the next pass does not merge them, and live assignment never will."""
    from embodied_memory.consolidate_memory import undo_at_rest
    data = tmp_path / "mem"
    store = open_store(params(data))
    store.insert([Observation(f"o{i}", T0 + 120 * i, "day1", Pose(0, 0, 0, 0), waypoint_id="lab", people=[
        PersonSighting((0, 0, 40, 120), "person_0001" if i < 6 else "person_0002", 0.9, 0.8,
                       face_box=(0, 0, 30, 30), face_embedding=face(0), position=(0.0, 0.0, 0.0))])
        for i in range(10)])
    store.name_identity("person_0002", "cid")
    store.merge_identities("person_0009", "person_0002")    # an id merged before any sighting: an alias
    manager = IdentityManager(IdentityParams(), data / "identities")
    for _ in range(2):
        manager.issue_id()
    manager.close()
    report = consolidate_memory(store, data / "identities")
    assert report.applied and {r[1] for r in by_observation(store)} == {"person_0001"}
    names = {p["person"]: p.get("name", "") for p in store.people()}
    assert names == {"person_0001": "cid"}
    merge = next(c for c in store.identity_changes() if c["kind"] == "merge")
    assert undo_at_rest(store, data / "identities", merge["change"]) == 4
    names = {p["person"]: p.get("name", "") for p in store.people()}
    assert names["person_0002"] == "cid" and not names["person_0001"]
    assert store._conn().execute("SELECT identity_id FROM identity_aliases WHERE alias_id='person_0009'"
                                 ).fetchone()[0] == "person_0002"
    again = consolidate_memory(store, data / "identities")
    assert not again.applied and again.merges == []
    manager = IdentityManager(IdentityParams(), data / "identities")
    assert manager.cannot_link("person_0001", "person_0002")
    manager.close()
    store.close()


def test_a_lost_identity_state_never_reissues_an_id_the_memory_holds(tmp_path):
    """Perception's state gone (another data_dir, a wiped disk): its counter starts at 1, but the
    split takes an id above every one the memory holds or held (person_0007 was forgotten)."""
    import shutil
    data = tmp_path / "mem"
    store = memory(data)
    store.merge_identities("person_0006", "person_0002")      # an alias
    store.insert([Observation("o30", T0 + 9000, "day1", Pose(0, 0, 0, 0), waypoint_id="lab", people=[PersonSighting(
        (0, 0, 40, 120), "person_0007", 0.9, 0.8, face_box=(0, 0, 30, 30), face_embedding=face(2),
        position=(0.0, 0.0, 0.0))])])
    store.forget_identity("person_0007")
    shutil.rmtree(data / "identities")
    report = consolidate_memory(store, data / "identities")
    assert report.splits == [("person_0001", "person_0008", 4)]
    store.close()


def test_a_forget_while_a_pass_is_pending_leaves_no_face_under_the_moves_targets(tmp_path):
    """A pass gives four of person_0001's faces to a new id; before the memory applies it, the
    operator forgets person_0001 (all its sightings go).  Rebuilt from the memory plus the pending
    moves, perception keeps no face of them under the new id."""
    from embodied_memory.consolidate_memory import consolidate_live, refresh_live
    data = tmp_path / "mem"
    store = memory(data, name_first="")
    live = IdentityManager(IdentityParams(), data / "identities")
    _, changes = consolidate_live(data / "memory.sqlite3", live)
    [split] = changes
    assert live.assign(face(1)).identity_id == split["target"]      # the split's faces, before the forget
    store.forget_identity("person_0001")
    live.forget("person_0001")
    assert refresh_live(data / "memory.sqlite3", live)
    assert live.assign(face(1)).identity_id not in {split["target"], "person_0001"}
    assert [c["change_id"] for c in live.change_log] == [split["change_id"]]    # still sent (the memory rejects it)
    live.close()
    store.close()


def test_undoing_a_merge_the_operator_made_by_naming_gives_back_the_earlier_name(tmp_path):
    """person_0002 was named 'frank'; the operator renames it 'ann', the name of person_0001, and
    confirms the merge; undoing that merge leaves person_0002 'frank' again, not a second 'ann'."""
    data = tmp_path / "mem"
    store = memory(data, name_first="ann")
    store.name_identity("person_0002", "frank")
    assert store.name_identity("person_0002", "ann") == "person_0001"
    merge = next(c for c in store.identity_changes() if c["kind"] == "merge")
    store.undo_identity_change(merge["change"])
    names = {p["person"]: p.get("name", "") for p in store.people()}
    assert names == {"person_0001": "ann", "person_0002": "frank"}
    store.close()


def test_the_operator_applies_only_the_moves_they_accept(tmp_path):
    """Ben's split (move 1) and an assignment (move 2) proposed; the operator accepts only the
    assignment: Ben stays under Ann's id, the unassigned face goes to Ann, one journal entry."""
    data = tmp_path / "mem"
    store = memory(data)
    store.insert([Observation("o20", T0 + 5000, "day1", Pose(0, 0, 0, 0), waypoint_id="lab", people=[PersonSighting(
        (0, 0, 40, 120), "", 0.9, 0.8, face_box=(0, 0, 30, 30), face_embedding=face(0), position=(0.0, 0.0, 0.0))])])
    proposal = consolidate_memory(store, data / "identities", dry_run=True)
    assert [(k, s, t, len(ids)) for k, s, t, ids in proposal.moves] == [
        ("split", "person_0001", "person_0003", 4), ("assign", "", "person_0001", 1)]
    with pytest.raises(ValueError, match="no move 3"):
        consolidate_memory(store, data / "identities", only={3})
    report = consolidate_memory(store, data / "identities", only={2})
    assert report.applied and report.splits == [] and report.relabelled == 1
    assert {r[1] for r in by_observation(store)} == {"person_0001", "person_0002"}
    assert [c["kind"] for c in store.identity_changes() if c["kind"] != "reviewed"] == ["assign"]
    store.close()


def test_undoing_a_split_undoes_the_whole_new_identity(tmp_path):
    """The pass builds Ben's new id from four of Ann's sightings and one face stored without an
    identity (two journal rows); undoing the split takes both back: no stray identity is left."""
    data = tmp_path / "mem"
    store = memory(data)
    store.insert([Observation("o20", T0 + 5000, "day1", Pose(0, 0, 0, 0), waypoint_id="lab", people=[PersonSighting(
        (0, 0, 40, 120), "", 0.9, 0.8, face_box=(0, 0, 30, 30), face_embedding=face(1), position=(0.0, 0.0, 0.0))])])
    report = consolidate_memory(store, data / "identities")
    assert [(k, s, t, len(ids)) for k, s, t, ids in report.moves] == [
        ("split", "person_0001", "person_0003", 4), ("split", "", "person_0003", 1)]
    split = next(c for c in store.identity_changes() if c["kind"] == "split" and c["source"] == "person_0001")
    assert store.undo_identity_change(split["change"]) == 5
    assert {p["person"] for p in store.people()} == {"person_0001", "person_0002"}
    assert store._conn().execute("SELECT COUNT(*) FROM sightings WHERE identity_id IS NULL").fetchone()[0] == 1
    assert all(c["undone"] for c in store.identity_changes() if c["kind"] == "split")
    store.close()


def _far_ann(store, i=20, obs_people=()):
    """Ann far away (a 13 px face) with nobody identified: what online assignment leaves unidentified."""
    store.insert([Observation(f"o{i}", T0 + 5000 + i, "day1", Pose(0, 0, 0, 0), waypoint_id="lab", people=[
        PersonSighting((0, 0, 20, 60), "", 0.9, 0.8, face_box=(0, 0, 13, 13), face_embedding=face(0),
                       position=(0.0, 0.0, 0.0)), *obs_people])])
    return store._conn().execute("SELECT max(id) FROM sightings WHERE identity_id IS NULL").fetchone()[0]


def test_the_attach_pass_names_a_far_face_undone_it_stays_unnamed_and_perception_learns_who_was_beside_it(tmp_path):
    """The in-process attach pass (the offline ingest's, when the robot is idle) gives Ann's far
    face her id as a journalled 'assign', moves nothing identified, keeps perception's exemplars
    and makes whoever shared the keyframe another person; an operator's undo is never redone."""
    from embodied_memory.consolidate_memory import attach_in_process
    data = tmp_path / "mem"
    store = memory(data)
    before = by_observation(store)
    far = _far_ann(store, obs_people=[PersonSighting((50, 0, 90, 120), "person_0002", 0.9, 0.8,
                                                     face_box=(50, 0, 80, 30), face_embedding=face(2),
                                                     position=(3.0, 0.0, 0.0))])
    manager = IdentityManager(IdentityParams(), data / "identities")
    exemplars = len(manager._faces)
    report = attach_in_process(store, manager)
    assert report.applied and report.relabelled == 1 and not report.splits and not report.merges
    assert store._conn().execute("SELECT identity_id FROM sightings WHERE id=?", (far,)).fetchone()[0] == "person_0001"
    assert by_observation(store)[:len(before)] == before          # nothing identified moved
    assert len(manager._faces) == exemplars and manager.cannot_link("person_0001", "person_0002")
    assign = store.identity_changes()[0]
    assert (assign["kind"], assign["source"], assign["target"]) == ("assign", "", "person_0001")
    assert store.undo_identity_change(assign["change"]) == 1
    assert attach_in_process(store, manager).relabelled == 0     # the operator said no: it stays without one
    assert store._conn().execute("SELECT identity_id FROM sightings WHERE id=?", (far,)).fetchone()[0] is None
    manager.close()
    store.close()


def test_the_attach_mode_of_a_consolidation_pass_only_gives_identities(tmp_path):
    """``consolidate_memory(mode="attach")`` (at rest) attaches Ann's far face but splits nothing,
    where the full pass would split Ben's chained sightings off; an unknown mode is refused."""
    data = tmp_path / "mem"
    store = memory(data)
    far = _far_ann(store)
    report = consolidate_memory(store, data / "identities", mode="attach")
    assert report.applied and report.splits == [] and report.relabelled == 1 and len(report.changes) == 1
    assert "[1] assign 1 sighting of (no identity) -> person_0001" in report.summary()
    assert store._conn().execute("SELECT identity_id FROM sightings WHERE id=?", (far,)).fetchone()[0] == "person_0001"
    assert consolidate_memory(store, data / "identities", dry_run=True).splits       # the full pass would split
    with pytest.raises(ValueError, match="mode"):
        consolidate_memory(store, data / "identities", mode="everything")
    store.close()


def test_each_attached_sighting_is_undone_on_its_own_and_never_to_an_identity_merged_away(tmp_path):
    from embodied_memory.consolidate_memory import attach_in_process
    data = tmp_path / "mem"
    store = memory(data)
    first, second = _far_ann(store, 20), _far_ann(store, 21)
    manager = IdentityManager(IdentityParams(), data / "identities")
    assert attach_in_process(store, manager).relabelled == 2
    changes = [c for c in store.identity_changes() if c["kind"] == "assign"]
    assert len(changes) == 2 and all(c["sightings"] == 1 for c in changes)
    assert store.undo_identity_change(changes[0]["change"]) == 1     # the operator rejects one of them
    held = dict(store._conn().execute("SELECT id, identity_id FROM sightings WHERE id IN (?, ?)", (first, second)))
    assert set(held.values()) == {None, "person_0001"}
    store.merge_identities("person_0002", "person_0001")
    undone = next(sid for sid, ident in held.items() if ident is None)
    with pytest.raises(StoreError, match="merged away"):
        store.relabel_sightings([("assign", "", "person_0002", [undone])])
    manager.close()
    store.close()
