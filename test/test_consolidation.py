"""Consolidation: re-clustering stored face tracks proposes splits and merges under cannot-link
and the operator's names (people/consolidation.py; pure, no store)."""
import numpy as np
import pytest

from embodied_memory.people.consolidation import ConsolidationParams, attach, consolidate, face_tracks
from embodied_memory.people.tracks import TrackParams
from embodied_memory.types import StoredSighting

RNG = np.random.default_rng(4)
CENTRES = RNG.normal(size=(4, 64))


def face(who):
    v = CENTRES[who] + 0.25 * RNG.normal(size=64)
    return (v / np.linalg.norm(v)).astype(np.float32)


class World:
    """Sightings one keyframe at a time: people stand apart, 60 s between visits (new tracks)."""

    def __init__(self):
        self.rows, self.t, self.obs = [], 1000.0, 0

    def frame(self, people, dt=60.0, face_px=40):
        """people: (who, identity, x) per sighting of one keyframe; ``face_px``: their faces' size."""
        self.t += dt
        self.obs += 1
        for who, ident, x in people:
            self.rows.append(StoredSighting(len(self.rows) + 1, self.obs, self.t, ident, (x * 100, 0, x * 100 + 50, 200),
                                            (0, 0, face_px, face_px), face(who), None, (float(x), 0.0)))
        return self


def labels_after(rows, plan):
    return {s.sighting_id: plan.labels.get(s.sighting_id, s.identity_id) for s in rows}


def test_an_identity_holding_two_people_is_split_and_the_majority_keeps_the_id():
    w = World()
    for _ in range(6):
        w.frame([(0, "person_0001", 0)])
    for _ in range(3):
        w.frame([(1, "person_0001", 5)])            # a stranger the online pass chained in
    plan = consolidate(w.rows)
    after = labels_after(w.rows, plan)
    ann = {after[s.sighting_id] for s in w.rows[:6]}
    ben = {after[s.sighting_id] for s in w.rows[6:]}
    assert ann == {"person_0001"} and len(ben) == 1 and ben != ann
    assert [(s.source, s.identity_id) for s in plan.splits] == [("person_0001", "person_0002")]
    assert plan.merges == []


def test_two_identities_of_one_person_merge_into_the_larger():
    w = World()
    for _ in range(5):
        w.frame([(2, "person_0003", 0)])
    for _ in range(2):
        w.frame([(2, "person_0007", 0)])
    plan = consolidate(w.rows)
    assert plan.merges == [("person_0007", "person_0003")] and plan.splits == []
    assert set(labels_after(w.rows, plan).values()) == {"person_0003"}


def test_two_people_of_one_keyframe_never_end_in_one_identity():
    """Cannot-link: two faces of one keyframe, however alike, stay two (twins at one desk)."""
    w = World()
    for _ in range(4):
        w.frame([(0, "person_0001", 0), (0, "person_0002", 3)])
    plan = consolidate(w.rows, ConsolidationParams(eps=1.5))     # a cut that would join anyone
    after = labels_after(w.rows, plan)
    for obs in {s.obs for s in w.rows}:
        ids = [after[s.sighting_id] for s in w.rows if s.obs == obs]
        assert len(set(ids)) == 2, ids


def test_differently_named_identities_are_not_merged_and_the_name_stays_with_its_crops():
    w = World()
    for _ in range(3):
        w.frame([(3, "person_0004", 0)])
    for _ in range(3):
        w.frame([(3, "person_0009", 0)])
    plan = consolidate(w.rows, names={"person_0004": "ann", "person_0009": "anna"})
    assert plan.merges == [] and plan.labels == {}
    # a named identity that holds two people: the part the operator's crops show keeps it,
    # even as the smaller part
    w = World()
    for _ in range(2):
        w.frame([(0, "person_0005", 0)])
    for _ in range(5):
        w.frame([(1, "person_0005", 5)])
    anchors = {"person_0005": {w.rows[0].sighting_id, w.rows[1].sighting_id}}
    plan = consolidate(w.rows, names={"person_0005": "ann"}, anchors=anchors)
    after = labels_after(w.rows, plan)
    assert after[w.rows[0].sighting_id] == after[w.rows[1].sighting_id] == "person_0005"
    assert {after[s.sighting_id] for s in w.rows[2:]} == {"person_0006"}


def test_fresh_ids_are_never_ones_in_use_or_issued_before():
    w = World()
    for who in (0, 0, 0, 1, 1, 1):
        w.frame([(who, "person_0001", who * 5)])
    plan = consolidate(w.rows, taken_ids={"person_0002", "person_0040"})
    assert [s.identity_id for s in plan.splits] == ["person_0041"]


def test_a_still_person_waited_on_is_one_track_and_a_walk_away_another():
    w = World()
    w.frame([(0, "a", 0)], dt=0).frame([(0, "a", 0.1)], dt=30).frame([(0, "a", 0.2)], dt=30)
    w.frame([(0, "a", 9.0)], dt=2)            # 9 m in 2 s: somebody else
    tracks = face_tracks(w.rows, TrackParams())
    assert len({tracks[s.sighting_id] for s in w.rows[:3]}) == 1
    assert tracks[w.rows[3].sighting_id] != tracks[w.rows[0].sighting_id]


@pytest.mark.parametrize("bad", [dict(eps=0.0), dict(eps=2.5), dict(min_face_px=-1), dict(attach_eps=0.0),
                                 dict(attach_margin=-0.1), dict(attach_min_face_px=-1)])
def test_parameters_are_checked(bad):
    with pytest.raises(ValueError, match="consolidation"):
        consolidate([], ConsolidationParams(**bad))


def _known_people(w: World) -> World:
    """Ann (person_0001) and Ben (person_0002), each seen clearly four times."""
    for _ in range(4):
        w.frame([(0, "person_0001", 0), (1, "person_0002", 5)])
    return w


def test_the_attach_pass_gives_a_small_face_the_identity_it_clearly_matches_and_moves_nothing_else():
    w = _known_people(World())
    w.frame([(0, "", 0)], face_px=13)          # Ann far away: unidentified online
    w.frame([(2, "", 0)], face_px=13)          # a stranger: near nobody
    plan = attach(w.rows)
    assert plan.labels == {w.rows[-2].sighting_id: "person_0001"}
    assert not plan.merges and not plan.splits


def test_the_attach_pass_never_gives_an_identity_a_keyframe_already_holds_nor_one_to_two_of_its_people():
    w = _known_people(World())
    w.frame([(0, "person_0001", 0), (0, "", 5)], face_px=13)    # Ann is already in the keyframe
    w.frame([(0, "", 0), (0, "", 5)], face_px=13)                # two faces nearest Ann: the closer only
    plan = attach(w.rows)
    assert w.rows[-3].sighting_id not in plan.labels
    attached = [sid for sid in (w.rows[-2].sighting_id, w.rows[-1].sighting_id) if sid in plan.labels]
    assert len(attached) == 1 and plan.labels[attached[0]] == "person_0001"


def test_the_attach_pass_skips_tiny_faces_ambiguous_faces_and_sightings_an_operator_took_an_identity_from():
    w = _known_people(World())
    w.frame([(0, "", 0)], face_px=10)          # below attach_min_face_px
    w.frame([(0, "", 0)], face_px=13)          # an operator undid its earlier assignment
    assert attach(w.rows, pinned={w.rows[-1].sighting_id}).labels == {}
    ambiguous = (CENTRES[0] + CENTRES[1]) / 2
    ambiguous = (ambiguous / np.linalg.norm(ambiguous)).astype(np.float32)
    w.rows[-1] = StoredSighting(w.rows[-1].sighting_id, w.rows[-1].obs, w.rows[-1].t, "", w.rows[-1].box,
                                (0, 0, 13, 13), ambiguous, None, (0.0, 0.0))
    plan = attach(w.rows, ConsolidationParams(attach_eps=1.5, attach_margin=0.1))
    assert plan.labels == {}                   # as near Ann as Ben: no margin
    assert attach(w.rows, ConsolidationParams(attach_eps=1.5, attach_margin=0.0)).labels != {}


def test_the_attach_pass_leaves_forgotten_faces_and_identities_in_doubt_alone():
    w = _known_people(World())
    w.frame([(0, "", 0)], face_px=13)          # Ann far away ...
    assert attach(w.rows, forgotten=lambda f: float(f @ CENTRES[0] / np.linalg.norm(CENTRES[0])) > 0.8).labels == {}
    w.frame([(1, "person_0001", 0), (0, "person_0001", 5)])    # ... but person_0001 once held two people
    assert attach(w.rows).labels == {}
