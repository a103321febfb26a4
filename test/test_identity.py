"""Person identity: real faces cluster into the right identities; merges; restarts."""
import glob
import json
from collections import Counter, defaultdict
from pathlib import Path

import cv2
import numpy as np
import pytest

from embodied_memory.people.identity import IdentityManager, IdentityParams

from conftest import shared_data


@pytest.fixture(scope="module")
def faces():
    from embodied_memory.perception.faces import YuNetSFace
    return YuNetSFace()


def test_labelled_faces_cluster_into_the_right_identities(faces, tmp_path):
    root = shared_data("faces", "face_recognition_knn")
    manager = IdentityManager(path=tmp_path / "ids")
    truth_to_ids = defaultdict(list)
    for path in sorted(glob.glob(str(root / "train" / "*" / "*"))):
        found = faces.detect(cv2.imread(path))
        assert len(found) == 1, path
        truth_to_ids[Path(path).parent.name].append(manager.assign(found[0].embedding).identity_id)
    for name, label in (("alex_lacamoire1.jpg", "alex_lacamoire"), ("johnsnow_test1.jpg", "kit_harington"),
                        ("obama1.jpg", "obama")):
        found = faces.detect(cv2.imread(str(root / "test" / name)))
        truth_to_ids[label].append(manager.assign(found[0].embedding).identity_id)
    # purity: each identity holds one person; coverage: each person's photos share one identity
    id_to_truth = defaultdict(set)
    for truth, ids in truth_to_ids.items():
        for i in ids:
            id_to_truth[i].add(truth)
    purity = sum(len(t) == 1 for t in id_to_truth.values()) / len(id_to_truth)
    coverage = sum(Counter(ids).most_common(1)[0][1] for ids in truth_to_ids.values()) / sum(
        len(ids) for ids in truth_to_ids.values())
    print(f"face identities: purity {purity:.2f}, coverage {coverage:.2f}, {len(id_to_truth)} identities for "
          f"{len(truth_to_ids)} people")
    assert purity == 1.0 and coverage == 1.0 and len(id_to_truth) == 5

    # the two-person photo: Obama and Biden get their own identities (a third face, a child
    # at the edge of the photo, is somebody new)
    found = faces.detect(cv2.imread(str(root / "test" / "obama_and_biden.jpg")))
    ids = [manager.assign(f.embedding).identity_id for f in sorted(found, key=lambda f: f.box[0])]
    assert ids[0] == truth_to_ids["biden"][0] and ids[1] == truth_to_ids["obama"][0]
    assert len(set(ids[:2])) == 2 and ids[2] not in sum(truth_to_ids.values(), [])

    # ids survive a restart
    manager.close()
    again = IdentityManager(path=tmp_path / "ids")
    obama = faces.detect(cv2.imread(str(root / "train" / "obama" / "obama2.jpg")))[0]
    assert again.assign(obama.embedding).identity_id == truth_to_ids["obama"][0]
    known = again.identities
    newcomer = again.assign(np.random.default_rng(3).normal(size=128))
    assert newcomer.identity_id not in known  # numbering continues after the restart
    assert int(newcomer.identity_id.split("_")[1]) == max(int(i.split("_")[1]) for i in known) + 1


def unit(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def at(degrees):
    return unit([np.cos(np.radians(degrees)), np.sin(np.radians(degrees)), 0, 0])


def test_a_chain_of_near_faces_does_not_merge_two_people():
    """Single-link growth (HUMEMBR's DBSCAN) joins two people through a few faces between them;
    k-nearest average linkage and centroid merges do not: each bridge joins one side."""
    manager = IdentityManager(IdentityParams(eps=0.3, merge_eps=0.2, min_samples=3))
    ann = {manager.assign(at(0)).identity_id for _ in range(4)}
    ben = {manager.assign(at(70)).identity_id for _ in range(4)}
    assert len(ann) == len(ben) == 1 and ann != ben
    bridges = [manager.assign(at(d)) for d in (15, 25, 35, 45, 55, 20, 30, 40, 50)]
    assert all(b.merged == [] for b in bridges)
    assert {b.identity_id for b in bridges} <= ann | ben
    assert manager.assign(at(0)).identity_id in ann and manager.assign(at(70)).identity_id in ben
    assert len(manager.identities) == 2


def test_two_identities_of_one_person_merge_by_average_linkage():
    manager = IdentityManager(IdentityParams(eps=0.15, merge_eps=0.25, min_samples=3))
    first = {manager.assign(at(0)).identity_id for _ in range(3)}
    second = [manager.assign(at(35)) for _ in range(3)]     # 0.18 from every earlier face: a new identity ...
    assert second[0].identity_id not in first
    assert second[-1].merged == [(second[0].identity_id, *first)]   # ... until its exemplars average close
    assert manager.identities == sorted(first)


def test_every_tracked_sighting_carries_its_track_identified_or_not():
    """A person walking up: two keyframes with no face (no identity), then a clear face; all three
    carry one track (the memory gives the face's identity to the first two), a second person
    standing elsewhere another."""
    from embodied_memory.people.identity import Evidence
    manager = IdentityManager(IdentityParams(min_samples=1))
    far = [manager.assign_frame(t, [Evidence(position=(5.0 - t / 4, 0.0), box=(0, 0, 10, 30)),
                                    Evidence(position=(0.0, 8.0), box=(50, 0, 60, 30))]) for t in (0.0, 2.0)]
    near = manager.assign_frame(4.0, [Evidence(at(0), face_px=40.0, position=(4.0, 0.0), box=(0, 0, 40, 120))])[0]
    assert [r.identity_id for frame in far for r in frame] == ["", "", "", ""] and near.identity_id
    walker, stander = {frame[0].track_id for frame in far}, {frame[1].track_id for frame in far}
    assert walker == {near.track_id} and len(stander) == 1 and 0 not in walker | stander and walker != stander


def test_whoever_stood_beside_a_track_before_it_was_identified_is_someone_else():
    """The memory gives a track's identity to its earlier unidentified sightings, so the people
    beside those become cannot-links of that identity: never merged with it later."""
    from embodied_memory.people.identity import Evidence
    manager = IdentityManager(IdentityParams(min_samples=1))
    first = manager.assign_frame(0.0, [Evidence(position=(5.0, 0.0), box=(0, 0, 10, 30)),
                                       Evidence(at(90), face_px=40.0, position=(0.0, 8.0), box=(50, 0, 90, 120))])
    gus = first[1].identity_id
    hal = manager.assign_frame(2.0, [Evidence(at(0), face_px=40.0, position=(4.6, 0.0), box=(0, 0, 40, 120))])[0]
    assert first[0].identity_id == "" and gus and hal.identity_id not in ("", gus)
    assert hal.track_id == first[0].track_id and manager.cannot_link(gus, hal.identity_id)


def test_two_faces_in_one_keyframe_are_never_one_identity():
    """Cannot-link: the people of one keyframe get distinct identities even when one of them is
    nearest to the other's identity, and two identities once seen together never merge."""
    from embodied_memory.people.identity import Evidence
    manager = IdentityManager(IdentityParams(eps=0.3, merge_eps=0.25, min_samples=1))
    ann = manager.assign(at(0)).identity_id
    together = manager.assign_frame(10.0, [Evidence(at(5)), Evidence(at(12))])   # both nearest to Ann
    ids = [r.identity_id for r in together]
    assert ids[0] == ann and ids[1] != ann and ids[1]
    assert manager.cannot_link(ids[0], ids[1])
    for _ in range(5):     # more faces between them: the two stay two
        assert manager.assign(at(8)).merged == []
    assert len(manager.identities) == 2


def test_one_face_near_a_single_point_of_another_cluster_does_not_chain_them():
    """Two people; a blurred face close to three of Ann's faces and to one of Ben's (the one
    most like Ann) joins Ann and merges nothing: Ben stays Ben."""
    manager = IdentityManager(IdentityParams(eps=0.3, min_samples=3))      # eps: 45.6 degrees apart
    ann, ben_near, ben = at(0), at(50), at(75)
    first = {manager.assign(ann).identity_id for _ in range(3)}
    second = {manager.assign(v).identity_id for v in (ben, ben, ben_near)}
    assert len(first) == len(second) == 1 and first != second
    blurred = manager.assign(at(15))    # near Ann's three faces and Ben's nearest one only
    assert blurred.identity_id in first and blurred.merged == []
    assert manager.assign(ben).identity_id in second and len(manager.identities) == 2

def test_faceless_sightings_use_reid_under_a_threshold():
    manager = IdentityManager(IdentityParams(reid_threshold=0.2))
    body = unit([1, 1, 0, 0])
    ident = manager.assign(unit([1, 0, 0]), reid_embedding=body).identity_id
    assert manager.assign(None, reid_embedding=unit([1, 0.9, 0.05, 0])).identity_id == ident
    far = manager.assign(None, reid_embedding=unit([0, 0, 1, 1]))
    assert far.identity_id == "" and far.via == "none"
    manager.forget(ident)
    assert manager.assign(None, reid_embedding=body).identity_id == ""


def test_a_body_too_small_to_tell_apart_is_not_reidentified():
    """A person 6 m away (a 100 px box, an 11 px face found by the upscaled pass) took the identity
    of someone seen hours before by generic body features: re-ID needs a box reid_min_px tall."""
    from embodied_memory.people.identity import Evidence
    manager = IdentityManager(IdentityParams(reid_threshold=0.2))
    body = unit([1, 1, 0, 0])
    [carol] = manager.assign_frame(0.0, [Evidence(unit([1, 0, 0]), body, 30.0, box=(300, 200, 380, 460))])
    [far] = manager.assign_frame(3600.0, [Evidence(unit([0, 1, 0]), body, 11.0, box=(258, 231, 292, 330))])
    assert far.identity_id == "" and far.via == "none"
    [near] = manager.assign_frame(3700.0, [Evidence(None, body, 0.0, box=(250, 200, 330, 440))])
    assert near.identity_id == carol.identity_id and near.via == "reid"
    # a body like hers but a face (however small) that is clearly someone else's: not her
    [other] = manager.assign_frame(3800.0, [Evidence(unit([0, 1, 0]), body, 14.0, box=(250, 200, 330, 440))])
    assert other.identity_id == "" and other.via == "none"
    [same] = manager.assign_frame(3900.0, [Evidence(unit([1, 0.4, 0]), body, 14.0, box=(250, 200, 330, 440))])
    assert same.identity_id == carol.identity_id


def test_a_small_face_joins_only_close_and_a_tiny_face_is_no_evidence():
    """Quality gates by face size: a 14 px face (under ``min_face_px``) joins Ann only within
    ``eps_low_quality`` and opens nothing; a 10 px face (under ``min_match_face_px``) matches
    nobody, even Ann's own face, and does not contradict the track it walks in."""
    from embodied_memory.people.identity import Evidence
    p = IdentityParams(min_samples=1)
    assert p.min_match_face_px <= 10 + 2 <= p.min_face_px - 2
    manager = IdentityManager(p)
    [ann] = manager.assign_frame(0.0, [Evidence(at(0), face_px=40.0, position=(0.0, 0.0), box=(0, 0, 40, 120))])
    close, far_off = at(55), at(75)          # 0.43 and 0.74 from Ann (cosine distance)
    assert [manager.assign_frame(100.0 * (i + 1), [Evidence(face, face_px=14.0, position=(9.0 * i, 30.0),
                                                           box=(0, 0, 20, 60))])[0].identity_id
            for i, face in enumerate((close, far_off))] == [ann.identity_id, ""]
    tiny = manager.assign_frame(500.0, [Evidence(at(0), face_px=10.0, position=(50.0, 50.0), box=(0, 0, 15, 45))])[0]
    assert tiny.identity_id == "" and tiny.via == "none"
    # Ann walks on (one track): a tiny face of someone else does not break her track
    [walk] = manager.assign_frame(600.0, [Evidence(at(0), face_px=40.0, position=(0.0, 0.0), box=(0, 0, 40, 120))])
    [on] = manager.assign_frame(602.0, [Evidence(at(120), face_px=10.0, position=(0.5, 0.0), box=(0, 0, 40, 120))])
    assert on.identity_id == ann.identity_id == walk.identity_id and on.via == "track"


def _kill(manager):
    """What kill -9 leaves: no save(), the journal as written so far, the lock released."""
    manager._journal.flush()
    manager._lock_file.close()


def _people(rng, n_people=4, dim=128):
    centres = rng.normal(size=(n_people, dim))
    return lambda who: centres[who] + 0.15 * rng.normal(size=dim)


def test_identity_state_survives_kill_without_save(tmp_path):
    """Every assignment is journalled before assign returns: a process that dies without save()
    (kill -9) restarts with the same clusters, the same merges and the id counter after the last
    issued id."""
    rng = np.random.default_rng(7)
    face_of = _people(rng)
    sequence = [face_of(i % 4) for i in range(24)]
    crashed = IdentityManager(IdentityParams(eps=0.3), path=tmp_path / "ids")
    crashed.save()                                   # a snapshot early, then only the journal
    first = [crashed.assign(f).identity_id for f in sequence]
    assert len(set(first)) == 4
    _kill(crashed)
    restarted = IdentityManager(IdentityParams(eps=0.3), path=tmp_path / "ids")
    assert restarted.identities == crashed.identities
    for who in range(4):
        assert restarted.assign(face_of(who)).identity_id == first[who]
    newcomer = restarted.assign(rng.normal(size=128) * 5).identity_id
    assert newcomer not in first                      # never issued twice
    _kill(restarted)
    # a torn last journal line (the crash hit mid-write) is ignored, the rest replayed
    with open(tmp_path / "ids" / "identities.journal", "a") as journal:
        journal.write('{"face": [0.1, 0.2')
    again = IdentityManager(IdentityParams(eps=0.3), path=tmp_path / "ids")
    assert newcomer in again.identities and set(first) <= set(again.identities)
    # ... and does not spoil the next recovery: more ids, another kill, all of them come back
    later = again.assign(rng.normal(size=128) * 5).identity_id
    _kill(again)
    last = IdentityManager(IdentityParams(eps=0.3), path=tmp_path / "ids")
    assert {newcomer, later} <= set(last.identities) and later != newcomer
    assert last.assign(rng.normal(size=128) * 5).identity_id not in {newcomer, later, *first}


def test_a_second_manager_on_the_same_state_fails_at_once(tmp_path):
    from embodied_memory.people.identity import IdentityStateBusy
    first = IdentityManager(path=tmp_path / "ids")
    with pytest.raises(IdentityStateBusy, match="another perception node"):
        IdentityManager(path=tmp_path / "ids", lock_wait_s=0.5)
    first.close()
    IdentityManager(path=tmp_path / "ids").close()   # free again once the first is gone


def test_snapshot_then_crash_does_not_apply_the_journal_twice(tmp_path):
    rng = np.random.default_rng(8)
    face_of = _people(rng, 2)
    manager = IdentityManager(IdentityParams(eps=0.3), path=tmp_path / "ids")
    ids = [manager.assign(face_of(i % 2)).identity_id for i in range(6)]
    manager._journal.flush()
    journal = (tmp_path / "ids" / "identities.journal").read_text()
    manager.save()
    _kill(manager)
    # a crash after the snapshot but before the journal was emptied: the old entries are back
    (tmp_path / "ids" / "identities.journal").write_text(journal)
    restarted = IdentityManager(IdentityParams(eps=0.3), path=tmp_path / "ids")
    assert len(restarted._labels) == 6 and restarted.identities == sorted(set(ids))


def test_forget_leaves_no_face_points_anywhere(tmp_path):
    """new_id: the id, its face points and re-ID embeddings are gone; the person comes back
    under a fresh id."""
    rng = np.random.default_rng(9)
    face_of = _people(rng, 2)
    manager = IdentityManager(IdentityParams(eps=0.3), path=tmp_path / "ids")
    ids = [manager.assign(face_of(i % 2), reid_embedding=rng.normal(size=16)).identity_id for i in range(6)]
    gone, kept = ids[0], ids[1]
    assert manager.forget(gone)
    manager.close()
    restarted = IdentityManager(IdentityParams(eps=0.3), path=tmp_path / "ids")
    assert restarted.identities == [kept] and gone not in restarted._reid
    assert (tmp_path / "ids" / "identities.journal").read_text() == ""   # the journal held its points
    state = np.load(tmp_path / "ids" / "identities.npz")
    assert len(state["faces"]) == 3 and len(state["suppressed"]) == 0
    fresh = restarted.assign(face_of(0)).identity_id
    assert fresh not in (gone, kept)                 # the person comes back under a new id


def test_forget_with_suppress_stops_recording_the_face(tmp_path):
    """drop (the default of perception's forgotten_person): the id is gone, the face points are
    kept without it, and a later sighting of that face is assigned to nobody."""
    rng = np.random.default_rng(10)
    face_of = _people(rng, 2)
    manager = IdentityManager(IdentityParams(eps=0.3), path=tmp_path / "ids")
    ids = [manager.assign(face_of(i % 2)).identity_id for i in range(6)]
    gone, kept = ids[0], ids[1]
    assert manager.forget(gone, suppress=True)
    assert manager.assign(face_of(0)).via == "suppressed"
    manager.close()
    restarted = IdentityManager(IdentityParams(eps=0.3), path=tmp_path / "ids")
    meta, arrays = IdentityManager.read_snapshot(tmp_path / "ids")
    assert restarted.identities == [kept] and gone not in json.dumps(meta) and len(arrays["suppressed"]) == 3
    later = restarted.assign(face_of(0))
    assert later.identity_id == "" and later.via == "suppressed"
    assert restarted.assign(face_of(1)).identity_id == kept
    from embodied_memory.people.identity import Evidence    # far away too: a 10 px face is no evidence, but
    [far] = restarted.assign_frame(10.0, [Evidence(face_of(0), face_px=10.0)])   # never recorded either
    assert far.via == "suppressed"


def test_a_camera_with_smaller_clear_faces_lowers_the_match_floor_with_them(tmp_path):
    from embodied_memory.perception.pipeline import Perception, PerceptionParams
    perception = Perception(PerceptionParams(data_dir=str(tmp_path), text_embedder="hash", image_embedder="none",
                                             person_detector="none", face_backend="none", reid="none",
                                             identity_min_face_px=8.0))
    try:
        assert perception.identities.params.min_match_face_px == 8.0
    finally:
        perception.close()

