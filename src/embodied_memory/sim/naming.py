"""The operator step of a simulated run: name each pseudonymous identity after the person the
ground truth shows alone in view when it was seen (two ids given one name are merged by the
memory).  A real operator does the same from the stored images."""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from .episode import GroundTruth


def label_identities(query: Callable[[str, dict], Any], name: Callable[[str, str], Any],
                     truth: GroundTruth) -> dict[str, str]:
    """``query(tool, args)`` calls the memory; ``name(identity, display_name)`` names one.
    Returns identity id -> ground-truth person name."""
    by_time = {round(f["t"], 2): f for f in truth.frames}
    names_of: dict[str, str] = {}
    for person in query("people", {}):
        votes = Counter()
        for sighting in query("export_identity", {"person": person["person"]})["sightings"]:
            frame = by_time.get(round(sighting["t"], 2))
            if frame and len(frame["visible"]) == 1:  # label only from unambiguous views
                votes[frame["visible"][0]] += 1
        if votes:
            names_of[person["person"]] = votes.most_common(1)[0][0]
            name(person["person"], names_of[person["person"]].capitalize())
    return names_of
