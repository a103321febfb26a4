"""The operator step of a simulated run: name each pseudonymous identity after the person the
ground truth shows unambiguously (alone in view, or clearly apart from the others) when it was
seen (two ids given one name are merged by the
memory).  A real operator does the same from the stored images."""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from .episode import GroundTruth


def _who(frame: dict, box) -> str | None:
    """The person in ``box`` when the view is unambiguous: alone in view, or the only one whose
    image column is near the box's centre (30 px) with everyone else far from it (> 80 px)."""
    if len(frame["visible"]) == 1:
        return frame["visible"][0]
    centre = (box[0] + box[2]) / 2
    gaps = sorted((abs(seen["u"] - centre), name) for name, seen in frame.get("seen", {}).items())
    if gaps and gaps[0][0] <= 30 and (len(gaps) == 1 or gaps[1][0] > 80):
        return gaps[0][1]
    return None


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
            who = _who(frame, sighting["box"]) if frame else None
            if who:
                votes[who] += 1
        if votes:
            names_of[person["person"]] = votes.most_common(1)[0][0]
            name(person["person"], names_of[person["person"]].capitalize())
    return names_of
