"""How well the memory's pseudonymous identities match the simulated people (measurement only:
nothing here reaches the memory).

Every stored sighting is attributed to the person the simulator shows at its box (when the view
is unambiguous, ``sim.naming.who_is_at``); then:
- identities vs people: identities with an attributed sighting, people with one;
- purity: share of attributed sightings that belong to their identity's majority person;
- ids per person: identities holding at least one sighting of a person, averaged over people;
- pairwise precision / recall: over pairs of attributed sightings, "same identity" against
  "same person" (the clustering measure of face-clustering papers);
- named correctly: identities whose display name is their majority person;
- per day: the same measures over each simulated day's sightings (quality over the horizon);
- never identified: people in view in many keyframes who are no identity's majority person.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Callable

from ..sim.episode import GroundTruth
from ..sim.naming import frames_by_time, who_is_at


def _pairs(n: int) -> int:
    return n * (n - 1) // 2


def identity_metrics(query: Callable[[str, dict], Any], truth: GroundTruth, keyframe_times=None) -> dict:
    """The memory's identities (through its tools) against the simulator's people, overall and
    per day of the horizon."""
    rows, names = [], {}
    for person in query("people", {}):
        identity = person["person"]
        names[identity] = person.get("name", "").lower()
        rows += [(identity, s["t"], s["box"]) for s in query("export_identity", {"person": identity})["sightings"]]
    return identity_quality(rows, truth, names, keyframe_times)


def _day_of(truth: GroundTruth, t: float) -> int:
    return max(0, sum(1 for start in truth.day_starts if t >= start) - 1) if truth.day_starts else 0


def identity_quality(rows, truth: GroundTruth, names: dict[str, str] | None = None,
                     keyframe_times=None, min_keyframes: int = 10) -> dict:
    """``rows``: (identity, t, box) per stored sighting.  Overall figures, ``per_day`` (each
    day's sightings on their own: the horizon's identity quality), and, with
    ``keyframe_times`` (the stored observations' stamps), ``never_identified``: people in view
    in at least ``min_keyframes`` keyframes who are no identity's majority person."""
    by_time = frames_by_time(truth)
    days: dict[int, list] = defaultdict(list)
    unattributed = 0
    for identity, t, box in rows:
        frame = by_time.get(t)
        who = who_is_at(frame, box) if frame else None
        if who is None:
            unattributed += 1
        else:
            days[_day_of(truth, t)].append((identity, who))
    overall = _quality([x for d in days.values() for x in d], names or {})
    overall.update(sightings=len(rows), unattributed_sightings=unattributed,
                   per_day={str(d + 1): {k: v for k, v in _quality(days[d], {}).items() if k not in ("per_person", "_majorities")}
                            for d in sorted(days)})
    if keyframe_times is not None:
        in_view: Counter = Counter()
        for t in keyframe_times:
            frame = by_time.get(t)
            in_view.update(frame["visible"] if frame else [])
        majority = {who for who, _ in overall.pop("_majorities")}
        overall["never_identified"] = sorted(w for w, n in in_view.items() if n >= min_keyframes and w not in majority)
    else:
        overall.pop("_majorities")
    return overall


def clustering_quality(pairs) -> dict:
    """Clustering measures of (identity, person) pairs (any labelled set: one per sighting or photo)."""
    return {k: v for k, v in _quality(pairs, {}).items() if k not in ("per_person", "_majorities")}


def _quality(pairs, names: dict[str, str]) -> dict:
    """Clustering measures of (identity, person) pairs, one per attributed sighting."""
    table: dict[str, Counter] = defaultdict(Counter)      # identity -> person -> sightings
    for identity, who in pairs:
        table[identity][who] += 1
    per_person: dict[str, Counter] = defaultdict(Counter)
    for identity, counts in table.items():
        for who, n in counts.items():
            per_person[who][identity] += n
    attributed = sum(sum(c.values()) for c in table.values())
    majority = sum(max(c.values()) for c in table.values())
    same_identity = sum(_pairs(sum(c.values())) for c in table.values())
    same_person = sum(_pairs(sum(c.values())) for c in per_person.values())
    both = sum(_pairs(n) for c in table.values() for n in c.values())
    named_right = sum(1 for identity, c in table.items() if names.get(identity)
                      and names[identity] == c.most_common(1)[0][0])
    return {
        "identities": len(table), "people": len(per_person),
        "purity": round(majority / attributed, 3) if attributed else None,
        "ids_per_person": round(sum(len(c) for c in per_person.values()) / len(per_person), 2) if per_person else None,
        "pairwise_precision": round(both / same_identity, 3) if same_identity else None,
        "pairwise_recall": round(both / same_person, 3) if same_person else None,
        "named": sum(1 for identity in table if names.get(identity)),
        "named_correctly": named_right,
        "per_person": {who: dict(c.most_common()) for who, c in sorted(per_person.items())},
        "_majorities": [(c.most_common(1)[0][0], identity) for identity, c in table.items()],
    }
