"""Consolidation ("sleep"): re-cluster every stored face track and propose merges and splits.

Online assignment (``people.identity``) sees one keyframe at a time and never undoes a
decision; consolidation sees the whole history at once:
1. sightings are grouped into short-term tracks again (``people.tracks``: consecutive
   keyframes, where each person stood), and each track with clear faces (``min_face_px``) is
   one point, the mean of its faces: a track's faces vote together;
2. the tracks are clustered by average linkage (cosine), and the dendrogram is cut at ``eps``
   except where a cluster would hold two tracks of one keyframe (cannot-link: two people) or
   two identities an operator named differently: there it is cut lower;
3. each cluster keeps the existing identity holding most of its sightings (an operator's
   anchor crops count first, so a named identity's name stays on the part the operator saw);
   a cluster whose identities are all taken is a **split** (a fresh id, never reused), an
   identity left without a cluster is **merged** into the one holding most of its sightings;
   faceless tracks follow their identity.
The result is a plan (``ConsolidationPlan``); the store applies it (relabelling sightings,
summaries and descriptions) and journals it.  ROS-free; pure apart from logging.
"""
from __future__ import annotations

import itertools
import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Sequence

import numpy as np

from ..types import StoredSighting
from .identity import IdentityParams, clear_face, face_px, unit_vector
from .tracks import TrackBook, TrackParams

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConsolidationParams:
    eps: float = 0.45                 # average-linkage cut between face tracks (cosine distance)
    min_face_px: float = IdentityParams.min_face_px   # faces smaller than this do not place a track
    tracks: TrackParams = TrackParams()
    # the attach pass (``attach``): an unidentified sighting's face joins the identity whose clear
    # faces it is nearest, within ``attach_eps`` and ``attach_margin`` nearer than any other's
    attach_eps: float = IdentityParams.eps_low_quality
    attach_margin: float = 0.10
    attach_min_face_px: float = IdentityParams.min_match_face_px   # a smaller face is never attached
    k: int = IdentityParams.k         # a face's distance to an identity: 1 - mean of its k best cosines
    max_exemplars: int = IdentityParams.max_exemplars   # ... among its latest this many clear faces

    def validate(self) -> None:
        if not 0 < self.eps < 2 or self.min_face_px < 0:
            raise ValueError("consolidation eps: a cosine distance in (0, 2); min_face_px >= 0")
        if not 0 < self.attach_eps < 2 or not 0 <= self.attach_margin < 2 or self.attach_min_face_px < 0 or \
                self.k < 1 or self.max_exemplars < 1:
            raise ValueError("consolidation attach_eps: a cosine distance in (0, 2); attach_margin in [0, 2); "
                             "attach_min_face_px >= 0; k, max_exemplars >= 1")
        self.tracks.validate()


@dataclass
class Split:
    source: str                       # the identity a part was taken from
    identity_id: str                  # the new identity of that part
    sightings: list[int]              # the part's sighting ids


@dataclass
class ConsolidationPlan:
    labels: dict[int, str] = field(default_factory=dict)          # sighting id -> identity, where it changes
    merges: list[tuple[str, str]] = field(default_factory=list)   # (absorbed, survivor)
    splits: list[Split] = field(default_factory=list)
    tracks: int = 0                                               # face tracks clustered

    @property
    def empty(self) -> bool:
        return not self.labels


def face_tracks(sightings: Sequence[StoredSighting], params: TrackParams) -> dict[int, int]:
    """Sighting id -> short-term track id (sightings oldest first, a keyframe's together)."""
    book, out = TrackBook(params), {}
    for _, group in itertools.groupby(sightings, key=lambda s: s.obs):
        group = list(group)
        for s, track in zip(group, book.associate(group[0].t, [(s.position, s.box) for s in group])):
            out[s.sighting_id] = track.track_id
    return out


def _greedy(points: np.ndarray, forbid: np.ndarray, eps: float) -> list[list[int]]:
    """Average-linkage agglomeration of unit ``points`` that never joins a ``forbid`` pair (cosine
    average linkage is the dot product of the clusters' sums over the product of their sizes)."""
    n = len(points)
    sums, counts = points.astype(np.float64), np.ones(n)
    sim = sums @ sums.T
    forbid = forbid.copy()
    np.fill_diagonal(forbid, True)
    sim[forbid] = -np.inf
    members = {i: [i] for i in range(n)}
    alive = np.ones(n, bool)
    while True:
        idx = int(np.argmax(sim))
        a, b = divmod(idx, n)
        if not sim[a, b] >= 1.0 - eps:
            break
        sums[a] += sums[b]
        counts[a] += counts[b]
        members[a] += members.pop(b)
        alive[b] = False
        forbid[a] |= forbid[b]
        forbid[:, a] = forbid[a]
        row = (sums @ sums[a]) / (counts * counts[a])
        row[forbid[a] | ~alive] = -np.inf
        sim[a], sim[:, a] = row, row
        sim[b], sim[:, b] = -np.inf, -np.inf
    return list(members.values())


def _clusters(points: np.ndarray, obs: list[frozenset], names: list[frozenset], eps: float,
              idents: Optional[list[frozenset]] = None, distinct: frozenset = frozenset()) -> list[list[int]]:
    """Average-linkage clusters of ``points`` (unit rows) cut at ``eps``, never joining two
    points that share an observation, carry different names or hold two identities of a
    ``distinct`` pair (``idents``: each point's current identities): the unconstrained tree
    first (scipy, fast), then each of its clusters agglomerated again under the constraints."""
    n = len(points)
    if n == 1:
        return [[0]]
    from scipy.cluster.hierarchy import fcluster, linkage
    tree = linkage(points.astype(np.float64), method="average", metric="cosine")
    flat = fcluster(tree, t=eps, criterion="distance")
    out = []
    for label in np.unique(flat):
        idx = np.flatnonzero(flat == label)
        if len(idx) == 1:
            out.append([int(idx[0])])
            continue
        forbid = np.zeros((len(idx), len(idx)), bool)
        by_obs: dict[int, list[int]] = defaultdict(list)
        for j, i in enumerate(idx):
            for o in obs[i]:
                by_obs[o].append(j)
        for js in by_obs.values():
            if len(js) > 1:
                forbid[np.ix_(js, js)] = True
        named = [(j, names[i]) for j, i in enumerate(idx) if names[i]]
        for (j, x), (k, y) in itertools.combinations(named, 2):
            if len(x | y) > 1:
                forbid[j, k] = forbid[k, j] = True
        if distinct and idents is not None:
            holding: dict[str, list[int]] = defaultdict(list)
            for j, i in enumerate(idx):
                for ident in idents[i]:
                    holding[ident].append(j)
            for a, b in distinct:
                if a in holding and b in holding:
                    forbid[np.ix_(holding[a], holding[b])] = True
                    forbid[np.ix_(holding[b], holding[a])] = True
        out += [[int(idx[j]) for j in group] for group in _greedy(points[idx], forbid, eps)]
    return out


def consolidate(sightings: Sequence[StoredSighting], params: ConsolidationParams = ConsolidationParams(),
                taken_ids: set[str] = frozenset(), names: Optional[dict[str, str]] = None,
                anchors: Optional[dict[str, set[int]]] = None,
                new_id: Optional[Callable[[], str]] = None,
                distinct: Iterable[tuple[str, str]] = (), pinned: Iterable[int] = ()) -> ConsolidationPlan:
    """A plan of merges and splits for ``sightings`` (oldest first).  ``names``: identity ->
    display name (an operator's: differently named identities are never merged); ``distinct``:
    identity pairs an operator said are two people (never joined); ``pinned``: sighting ids an
    operator kept with their identity (never moved); ``anchors``:
    identity -> the sighting ids an operator saw when naming it; ``new_id`` issues fresh ids
    (default: ``person_NNNN`` after the highest in use and in ``taken_ids``)."""
    params.validate()
    names, anchors = names or {}, anchors or {}
    if new_id is None:
        used = [int(i.rsplit("_", 1)[1]) for i in {s.identity_id for s in sightings} | set(taken_ids)
                if i.rsplit("_", 1)[-1].isdigit()]
        counter = itertools.count(max(used, default=0) + 1)
        new_id = lambda: f"person_{next(counter):04d}"   # noqa: E731
    track_of = face_tracks(sightings, params.tracks)
    faces: dict[int, list[np.ndarray]] = defaultdict(list)
    track_obs: dict[int, set[int]] = defaultdict(set)
    track_sightings: dict[int, list[StoredSighting]] = defaultdict(list)
    for s in sightings:
        t = track_of[s.sighting_id]
        track_sightings[t].append(s)
        track_obs[t].add(s.obs)
        if s.face_embedding is not None and clear_face(face_px(s.face_box), params.min_face_px):
            v = np.asarray(s.face_embedding, np.float32)
            faces[t].append(v / (np.linalg.norm(v) or 1.0))
    tracks = sorted(faces)
    plan = ConsolidationPlan(tracks=len(tracks))
    if not tracks:
        return plan
    dims = Counter(len(faces[t][0]) for t in tracks)
    dim = dims.most_common(1)[0][0]
    tracks = [t for t in tracks if len(faces[t][0]) == dim]
    points = np.stack([np.mean(faces[t], axis=0) for t in tracks])
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    track_names = [frozenset(names[s.identity_id] for s in track_sightings[t] if names.get(s.identity_id))
                   for t in tracks]
    track_idents = [frozenset(s.identity_id for s in track_sightings[t] if s.identity_id) for t in tracks]
    groups = _clusters(points, [frozenset(track_obs[t]) for t in tracks], track_names, params.eps,
                       track_idents, frozenset(distinct))
    # each cluster keeps the identity holding most of its sightings (anchors first)
    votes = []
    for c, group in enumerate(groups):
        counts = Counter(s.identity_id for t in group for s in track_sightings[tracks[t]] if s.identity_id)
        anchored = Counter(s.identity_id for t in group for s in track_sightings[tracks[t]]
                           if s.sighting_id in anchors.get(s.identity_id, ()))
        votes += [((anchored[i], n), c, i) for i, n in counts.items()]
    owner: dict[int, str] = {}
    kept: set[str] = set()
    for _, c, ident in sorted(votes, key=lambda v: (-v[0][0], -v[0][1], v[1], v[2])):
        if c not in owner and ident not in kept:
            owner[c] = ident
            kept.add(ident)
    origin = {}
    for c, group in enumerate(groups):
        if c not in owner:
            counts = Counter(s.identity_id for t in group for s in track_sightings[tracks[t]] if s.identity_id)
            owner[c] = new_id()
            origin[c] = counts.most_common(1)[0][0] if counts else ""
    # identities no cluster kept: merged into the cluster holding most of their sightings
    where: dict[str, Counter] = defaultdict(Counter)
    for c, group in enumerate(groups):
        for t in group:
            for s in track_sightings[tracks[t]]:
                if s.identity_id:
                    where[s.identity_id][owner[c]] += 1
    renamed = {ident: counts.most_common(1)[0][0] for ident, counts in where.items() if ident not in kept}
    plan.merges = sorted(renamed.items())
    for c, group in enumerate(groups):
        for t in group:
            for s in track_sightings[tracks[t]]:
                if owner[c] != s.identity_id:
                    plan.labels[s.sighting_id] = owner[c]
        if c in origin:
            plan.splits.append(Split(origin[c], owner[c], sorted(s.sighting_id for t in group
                                                                 for s in track_sightings[tracks[t]])))
    pinned = set(pinned)
    if pinned:      # an operator's undone split: those sightings stay where they are
        plan.labels = {sid: ident for sid, ident in plan.labels.items() if sid not in pinned}
        plan.splits = [Split(sp.source, sp.identity_id, [i for i in sp.sightings if i not in pinned])
                       for sp in plan.splits]
        plan.splits = [sp for sp in plan.splits if sp.sightings]
    clustered = {tracks[t] for group in groups for t in group}
    for t, members in track_sightings.items():   # faceless tracks follow their identity's merge
        if t in clustered:
            continue
        for s in members:
            if s.identity_id in renamed:
                plan.labels[s.sighting_id] = renamed[s.identity_id]
    log.info("consolidation: %d face tracks -> %d clusters; %d merges, %d splits, %d sightings relabelled",
             len(tracks), len(groups), len(plan.merges), len(plan.splits), len(plan.labels))
    return plan


def attach(sightings: Sequence[StoredSighting], params: ConsolidationParams = ConsolidationParams(),
           pinned: Iterable[int] = (), forgotten: Optional[Callable[[np.ndarray], bool]] = None) -> ConsolidationPlan:
    """The attach pass: a plan that only gives identities to sightings without one, never moves an
    identified sighting.  Online assignment judges a small face against the exemplars an identity
    had then (often none yet: a person first seen far away); here it is judged against the
    identity's latest ``max_exemplars`` clear faces in the memory.  A face (at least
    ``attach_min_face_px``) joins the nearest identity within ``attach_eps`` that is
    ``attach_margin`` nearer than the next, unless another sighting of its keyframe holds that
    identity (two people) or is attached to it more closely, or the identity is itself in doubt
    (twice in one keyframe: two people in one identity).  ``pinned``: sightings an operator took
    an identity from (never given one again); ``forgotten(face)``: true for a forgotten person's
    face (left alone)."""
    params.validate()
    exemplars: dict[str, list[np.ndarray]] = defaultdict(list)
    held: dict[int, Counter] = defaultdict(Counter)
    for s in sightings:
        if not s.identity_id:
            continue
        held[s.obs][s.identity_id] += 1
        if s.face_embedding is not None and clear_face(face_px(s.face_box), params.min_face_px):
            exemplars[s.identity_id].append(unit_vector(s.face_embedding))
    doubtful = {ident for counts in held.values() for ident, n in counts.items() if n > 1}
    pinned = set(pinned)
    candidates = [s for s in sightings if not s.identity_id and s.face_embedding is not None and
                  s.sighting_id not in pinned and face_px(s.face_box) >= params.attach_min_face_px]
    plan = ConsolidationPlan()
    if not exemplars or not candidates:
        return plan
    dim = Counter(len(v[0]) for v in exemplars.values()).most_common(1)[0][0]
    idents = sorted(i for i, v in exemplars.items() if len(v[0]) == dim)
    banks = [np.stack(exemplars[i][-params.max_exemplars:]) for i in idents]
    bank = np.concatenate(banks)
    starts = np.concatenate([[0], np.cumsum([len(b) for b in banks])[:-1]])
    faces = [(s, unit_vector(s.face_embedding)) for s in candidates]
    faces = [(s, f) for s, f in faces if len(f) == dim and not (forgotten is not None and forgotten(f))]
    best: dict[tuple[int, str], tuple[float, int]] = {}     # (keyframe, identity) -> (distance, sighting)
    for chunk in range(0, len(faces), 512):
        part = faces[chunk:chunk + 512]
        sims = np.stack([f for _, f in part]) @ bank.T            # faces x exemplars
        dist = np.full((len(part), len(idents)), np.inf)
        for j, (start, b) in enumerate(zip(starts, banks)):       # 1 - mean of each identity's k best
            k = min(params.k, len(b))
            block = sims[:, start:start + len(b)]
            dist[:, j] = 1.0 - np.partition(block, len(b) - k, axis=1)[:, len(b) - k:].mean(axis=1)
        order = np.argsort(dist, axis=1)
        for row, (s, _) in enumerate(part):
            first = int(order[row, 0])
            second = float(dist[row, order[row, 1]]) if len(idents) > 1 else 2.0
            ident = idents[first]
            if dist[row, first] > params.attach_eps or second - dist[row, first] < params.attach_margin or \
                    ident in held[s.obs] or ident in doubtful:
                continue
            key = (s.obs, ident)
            if key not in best or dist[row, first] < best[key][0]:
                best[key] = (float(dist[row, first]), s.sighting_id)
    plan.labels = {sid: ident for (_, ident), (_, sid) in best.items()}
    log.info("attach: %d of %d unidentified faces given an identity", len(plan.labels), len(candidates))
    return plan

