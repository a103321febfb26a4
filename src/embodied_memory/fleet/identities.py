"""One person, one identity across the fleet: identities different robots enrolled for the same
face are merged on the server.

Each robot's perception names the people it meets itself (``<robot_id>.person_NNNN``, so two
robots never mint the same id).  ``reconcile`` compares the identities of *different* robots by
their faces (average linkage over each identity's newest clear faces, as perception's own
online merge) and merges a pair when it is within ``merge_eps`` and each is the other's nearest
by ``margin``.  A merge is the store's journalled ``merge_identities`` (undoable with
``consolidate --undo N`` or the inspector; an undone merge is never redone), so the absorbed
id becomes an alias: every later sighting a robot stores under it lands on the survivor, and
every robot's questions find one person.  The survivor is the named identity, else the one
seen first.  Never merged: identities seen in one keyframe, two different operator-given names,
pairs an operator kept apart, forgotten identities.

It runs where every robot's sightings may be relabelled: with an operator's login
(``embodied-memory fleet reconcile``, by hand or every few minutes as a service).
"""
from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ..people.identity import IdentityParams, face_px, unit_vector
from ..types import StoredSighting

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FleetMatchParams:
    merge_eps: float = 0.50       # average-linkage face distance of one person across robots (wider than
                                  # perception's online 0.40: other cameras, light and distance; tuned on seeds 0-4)
    margin: float = 0.10                               # the next candidate at least this much farther
    min_faces: int = IdentityParams.min_samples        # clear faces an identity needs to be compared
    min_face_px: float = IdentityParams.min_face_px
    max_exemplars: int = 50                            # newest clear faces per identity


@dataclass(frozen=True)
class FleetMerge:
    absorbed: str
    survivor: str
    distance: float


def robot_of(identity_id: str) -> str:
    """The robot that enrolled an identity (``spot1.person_0003`` -> ``spot1``; "" for ids of a
    one-robot memory)."""
    head, dot, _rest = identity_id.partition(".")     # robot ids hold no '.'
    return head if dot else ""


@dataclass
class FaceDistances:
    """Identities with enough clear faces to compare, and their average-linkage face distances
    across robots (inf within one robot: its own perception's job)."""
    ids: list[str]
    dist: np.ndarray
    keyframes: dict[str, set[int]]
    first_seen: dict[str, float]

    def pairs(self, below: float = np.inf) -> list[tuple[str, str, float]]:
        """(a, b, distance) of every cross-robot pair closer than ``below``, nearest first."""
        n = len(self.ids)
        out = [(self.ids[a], self.ids[b], float(self.dist[a, b])) for a in range(n) for b in range(a + 1, n)
               if self.dist[a, b] < below]
        return sorted(out, key=lambda p: p[2])


def face_distances(sightings: list[StoredSighting], params: "FleetMatchParams") -> FaceDistances:
    faces: dict[str, list] = defaultdict(list)
    first_seen: dict[str, float] = {}
    keyframes: dict[str, set[int]] = defaultdict(set)
    for s in sightings:
        if not s.identity_id:
            continue
        first_seen.setdefault(s.identity_id, s.t)
        keyframes[s.identity_id].add(s.obs)
        if s.face_embedding is not None and s.face_box is not None and face_px(s.face_box) >= params.min_face_px:
            faces[s.identity_id].append(unit_vector(s.face_embedding))
    ids = sorted(i for i, f in faces.items() if len(f) >= params.min_faces)
    exemplars = {i: np.stack(faces[i][-params.max_exemplars:]) for i in ids}
    n = len(ids)
    dist = np.full((n, n), np.inf)
    for a in range(n):
        for b in range(a + 1, n):
            if robot_of(ids[a]) == robot_of(ids[b]):      # one robot's own people: its perception's job
                continue
            d = 1.0 - float(np.mean(exemplars[ids[a]] @ exemplars[ids[b]].T))
            dist[a, b] = dist[b, a] = d
    return FaceDistances(ids, dist, keyframes, first_seen)


def plan(sightings: list[StoredSighting], names: dict[str, str], kept_apart: set[tuple[str, str]],
         params: FleetMatchParams = FleetMatchParams()) -> list[FleetMerge]:
    """The merges ``reconcile`` applies (pure: from stored sightings, display names and the
    operator's kept-apart pairs)."""
    faces = face_distances(sightings, params)
    ids, dist, keyframes, first_seen = faces.ids, faces.dist, faces.keyframes, faces.first_seen
    n = len(ids)
    if n < 2:
        return []
    merges: list[FleetMerge] = []
    group = {i: i for i in ids}                          # identity -> the survivor it was merged into

    def root(i: str) -> str:
        while group[i] != i:
            i = group[i]
        return i
    for flat in np.argsort(dist, axis=None):
        a, b = divmod(int(flat), n)
        d = dist[a, b]
        if not d <= params.merge_eps:
            break
        if a > b:
            continue
        x, y = root(ids[a]), root(ids[b])
        if x == y:
            continue
        # each one's next candidate outside both groups (a person two robots share already is one candidate)
        others = [j for j in range(n) if root(ids[j]) not in (x, y)]
        second = min((min(dist[a, j], dist[b, j]) for j in others), default=np.inf)
        if second - d < params.margin or (min(x, y), max(x, y)) in kept_apart:
            continue
        if keyframes[x] & keyframes[y]:                   # seen together: two people
            continue
        name_x, name_y = names.get(x, ""), names.get(y, "")
        if name_x and name_y and name_x != name_y:
            continue
        survivor, absorbed = (x, y) if (bool(name_x), -first_seen[x]) >= (bool(name_y), -first_seen[y]) else (y, x)
        merges.append(FleetMerge(absorbed, survivor, round(float(d), 4)))
        group[absorbed] = survivor
        keyframes[survivor] |= keyframes[absorbed]
        first_seen[survivor] = min(first_seen[survivor], first_seen[absorbed])
    return merges


def reconcile(store, params: FleetMatchParams = FleetMatchParams(), dry_run: bool = False) -> list[FleetMerge]:
    """Merge the identities different robots enrolled for one person (see the module)."""
    kept_apart, _pinned = store.operator_constraints()
    merges = plan(store.sighting_evidence(reid=False), store.display_names(), kept_apart, params)
    if not dry_run:
        for m in merges:
            moved = store.merge_identities(m.absorbed, m.survivor, reviewed=False)
            log.info("fleet: %s is %s (face distance %.3f): %d sightings moved", m.absorbed, m.survivor,
                     m.distance, moved)
    return merges
