"""fleet/identities.plan: which identities of different robots are one person (pure, no server)."""
import numpy as np

from embodied_memory.fleet.identities import FleetMatchParams, plan
from embodied_memory.types import StoredSighting


def _person(direction: np.ndarray, spread: float, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [direction + spread * rng.normal(size=direction.size) for _ in range(4)]


def _sightings(identities: dict[str, list[np.ndarray]]) -> list[StoredSighting]:
    out, obs = [], 0
    for ident, faces in identities.items():
        for face in faces:
            obs += 1
            out.append(StoredSighting(obs, obs, float(obs), ident, (0, 0, 50, 100), face_box=(0, 0, 40, 40),
                                      face_embedding=face / np.linalg.norm(face)))
    return out


def _pair_distance(a, b):
    a, b = [np.stack([f / np.linalg.norm(f) for f in x]) for x in (a, b)]
    return 1.0 - float(np.mean(a @ b.T))


def test_one_person_seen_by_three_robots_is_merged_once_and_another_person_is_not():
    rng = np.random.default_rng(0)
    alice, bob = rng.normal(size=64), rng.normal(size=64)
    ids = {"spot1.person_0001": _person(alice, 0.35, 1), "spot2.person_0001": _person(alice, 0.35, 2),
           "spot3.person_0004": _person(alice, 1.0, 3),        # far camera: farther from the others than they are
           "spot3.person_0002": _person(bob, 0.35, 4)}
    d = _pair_distance(ids["spot1.person_0001"], ids["spot3.person_0004"])
    d2 = _pair_distance(ids["spot2.person_0001"], ids["spot3.person_0004"])
    assert 0.35 < d < FleetMatchParams.merge_eps and abs(d - d2) < FleetMatchParams.margin   # two close candidates
    merges = plan(_sightings(ids), {}, set())
    absorbed = {m.absorbed for m in merges}
    survivors = {m.survivor for m in merges}
    # all three of alice's are one identity: the third's two candidates are one person already, not a doubt
    assert absorbed | survivors == {"spot1.person_0001", "spot2.person_0001", "spot3.person_0004"}
    assert len(merges) == 2 and "spot3.person_0002" not in absorbed | survivors
    # an operator's different names keep them apart
    named = plan(_sightings(ids), {"spot1.person_0001": "Alice", "spot3.person_0004": "Carol",
                                   "spot2.person_0001": "Alice"}, set())
    assert {(m.absorbed, m.survivor) for m in named} == {("spot2.person_0001", "spot1.person_0001")}
