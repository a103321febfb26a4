"""How well the memory's pseudonymous identities match the simulated people (measurement only:
nothing here reaches the memory).

Every stored sighting is attributed to the person the simulator shows at its box (when the view
is unambiguous, ``sim.naming.who_is_at``); then:
- identities vs people: identities with an attributed sighting, people with one;
- purity: share of attributed sightings that belong to their identity's majority person;
- ids per person: identities holding at least one sighting of a person, averaged over people;
- pairwise precision / recall: over pairs of attributed sightings, "same identity" against
  "same person" (the clustering measure of face-clustering papers);
- named correctly: identities whose display name is their majority person.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Callable

from ..sim.episode import GroundTruth
from ..sim.naming import frames_by_time, who_is_at


def _pairs(n: int) -> int:
    return n * (n - 1) // 2


def identity_metrics(query: Callable[[str, dict], Any], truth: GroundTruth) -> dict:
    by_time = frames_by_time(truth)
    table: dict[str, Counter] = defaultdict(Counter)      # identity -> person -> sightings
    names: dict[str, str] = {}
    sightings = unattributed = 0
    for person in query("people", {}):
        identity = person["person"]
        names[identity] = person.get("name", "").lower()
        for s in query("export_identity", {"person": identity})["sightings"]:
            sightings += 1
            frame = by_time.get(round(s["t"], 2))
            who = who_is_at(frame, s["box"]) if frame else None
            if who is None:
                unattributed += 1
            else:
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
    people_seen = {name for name in per_person}
    return {
        "identities": len(table), "people": len(people_seen), "sightings": sightings,
        "unattributed_sightings": unattributed,
        "purity": round(majority / attributed, 3) if attributed else None,
        "ids_per_person": round(sum(len(c) for c in per_person.values()) / len(per_person), 2) if per_person else None,
        "pairwise_precision": round(both / same_identity, 3) if same_identity else None,
        "pairwise_recall": round(both / same_person, 3) if same_person else None,
        "named": sum(1 for identity in table if names.get(identity)),
        "named_correctly": named_right,
        "per_person": {who: dict(c.most_common()) for who, c in sorted(per_person.items())},
    }
