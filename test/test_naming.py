"""The operator step (sim/naming.py) sees the 3 best stored crops of an identity (up to 9 where
those show different people) and names it by what most of them show; a crop that shows no one unambiguously names nobody; nothing else reaches the memory. Also the
identity metrics (evaluation/identity_metrics.py) on a hand-built memory."""
from embodied_memory.evaluation.identity_metrics import identity_metrics
from embodied_memory.sim.episode import GroundTruth
from embodied_memory.sim.naming import best_sightings, label_identities

T0 = 1_773_050_000.0


def frame(t, *people):
    """A frame with people at image columns 100, 400, ... (far apart: unambiguous)."""
    return {"t": t, "visible": list(people),
            "seen": {name: {"u": 100.0 + 300 * i, "room": "lab", "position": [0, 0]} for i, name in enumerate(people)}}


def sighting(t, u=100.0, face=True, confidence=0.9):
    return {"t": t, "box": [u - 40, 50, u + 40, 300], "has_face_embedding": face, "confidence": confidence}


class FakeMemory:
    def __init__(self, identities):
        self.identities, self.named, self.calls = identities, {}, []

    def query(self, tool, args):
        self.calls.append((tool, args))
        if tool == "people":
            return [{"person": i, **({"name": self.named[i]} if i in self.named else {})} for i in self.identities]
        return {"sightings": self.identities[args["person"]]}

    def name(self, identity, display):
        self.named[identity] = display


def test_the_operator_names_by_what_most_of_the_best_crops_show():
    truth = GroundTruth(config={}, frames=[frame(T0 + 60 * k, "alice") for k in range(10)]
                        + [frame(T0 + 1000 + 60 * k, "bob") for k in range(10)])
    identities = {
        # mostly Alice, one crop of Bob among its best: still Alice
        "person_0001": [sighting(T0 + 60 * k) for k in range(6)] + [sighting(T0 + 1000, confidence=0.99)],
        "person_0002": [sighting(T0 + 1000 + 60 * k) for k in range(8)],
        "person_0003": [sighting(T0 + 1120), sighting(T0 + 1180)],        # a fragment of Bob
        "person_0004": [sighting(T0 + 1240, u=500.0)],                    # a box where nobody stands
    }
    memory = FakeMemory(identities)
    report = label_identities(memory.query, memory.name, truth)
    assert memory.named == {"person_0001": "Alice", "person_0002": "Bob", "person_0003": "Bob"}
    # person_0001's three best crops disagree: the operator looks at all seven
    assert report.reviewed == 4 and report.images_looked_at == 7 + 3 + 2 + 1 and "person_0004" not in report.named
    # an operator who skips small identities never looks at the fragment
    memory = FakeMemory(identities)
    report = label_identities(memory.query, memory.name, truth, min_sightings=5)
    assert memory.named == {"person_0001": "Alice", "person_0002": "Bob"} and report.reviewed == 2


def test_where_the_best_crops_disagree_the_operator_looks_at_more_before_naming():
    truth = GroundTruth(config={}, frames=[frame(T0 + 60 * k, "alice") for k in range(10)]
                        + [frame(T0 + 1000 + 60 * k, "bob") for k in range(10)])
    # Alice's identity with two of Bob's crops among its three best: nine crops show 7 Alice, 2 Bob
    mixed = [sighting(T0 + 1000, confidence=0.99), sighting(T0 + 1060, confidence=0.99)] + \
        [sighting(T0 + 60 * k) for k in range(10)]
    memory = FakeMemory({"person_0001": mixed})
    report = label_identities(memory.query, memory.name, truth)
    assert memory.named == {"person_0001": "Alice"} and report.images_looked_at == 9
    # three of Bob's and two of Alice's, the best three mixed: the operator looks at all five, names Bob
    memory = FakeMemory({"person_0001": mixed[:3] + [sighting(T0 + 1120), mixed[3]]})
    report = label_identities(memory.query, memory.name, truth)
    assert memory.named == {"person_0001": "Bob"} and report.images_looked_at == 5


def test_best_crops_prefer_faces_confidence_and_different_moments():
    crops = [sighting(T0, confidence=0.5), sighting(T0 + 1, confidence=0.99), sighting(T0 + 100, face=False),
             sighting(T0 + 200, confidence=0.8), sighting(T0 + 300, confidence=0.7)]
    chosen = best_sightings(crops, 3)
    assert [c["t"] for c in chosen] == [T0 + 1, T0 + 200, T0 + 300]     # one per moment, faces first


def test_identity_metrics_count_merges_and_splits():
    truth = GroundTruth(config={}, frames=[frame(T0 + k, "alice") for k in range(4)]
                        + [frame(T0 + 10 + k, "bob") for k in range(4)])
    memory = FakeMemory({
        "person_0001": [sighting(T0 + k) for k in range(4)] + [sighting(T0 + 10)],   # Alice + one of Bob
        "person_0002": [sighting(T0 + 11 + k) for k in range(3)],                     # the rest of Bob
    })
    m = identity_metrics(memory.query, truth)
    assert m["identities"] == 2 and m["people"] == 2
    assert m["purity"] == round(7 / 8, 3) and m["ids_per_person"] == 1.5
    # same-identity pairs 10 + 3 = 13, of which same person 6 + 3 = 9; same-person pairs 6 + 6 = 12
    assert m["pairwise_precision"] == round(9 / 13, 3) and m["pairwise_recall"] == round(9 / 12, 3)


def test_a_crop_with_one_person_in_it_shows_that_person_even_with_others_near():
    from embodied_memory.sim.naming import who_is_at
    view = {"t": T0, "visible": ["bob", "dave", "frank"],
            "seen": {"bob": {"u": 239.0}, "dave": {"u": 60.0}, "frank": {"u": 320.0}}}
    assert who_is_at(view, [190, 80, 290, 400]) == "bob"          # Frank stands 81 px away, outside the box
    assert who_is_at(view, [190, 80, 340, 400]) is None           # a box over Bob and Frank: ambiguous
    assert who_is_at(view, [280, 80, 480, 400]) is None           # Frank at the box's edge, not its middle
    assert who_is_at(view, [600, 80, 640, 400]) is None           # a box where nobody stands


def test_a_stamp_read_back_rounded_to_the_millisecond_finds_its_frame():
    """The memory's tools give times to the millisecond: 0.8648 comes back as 0.865, which rounds
    to 0.87 where the frame's own stamp rounds to 0.86 (such sightings went unattributed and their
    identities unnamed)."""
    from embodied_memory.sim.naming import FramesByTime
    frames = FramesByTime([{"t": 1773050538.3648405, "i": 0}, {"t": 1773050538.8648405, "i": 1},
                           {"t": 1773050568.8648405, "i": 2}])
    assert frames.get(round(1773050538.8648405, 3))["i"] == 1
    assert frames.get(1773050538.3648405)["i"] == 0 and frames.get(1773050568.865)["i"] == 2
    assert frames.get(1773050538.6) is None and frames.get(1773050600.0) is None and frames.get(0.0) is None
