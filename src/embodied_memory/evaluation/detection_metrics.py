"""Person detection recall against the simulator's visibility, by distance (measurement only:
nothing here reaches the memory).

A person the simulator counts as seen in a keyframe (in the field of view, 0.5-7 m away, in line
of sight, face not hidden: ``sim.building_episode.sightings``) is detected when a stored sighting
of that keyframe spans the person's image column (10 px slack), whatever its identity.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Iterable

from ..sim.episode import GroundTruth
from ..sim.naming import frames_by_time

BANDS_M = (0.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0)   # band edges, metres from the robot
SLACK_PX = 10.0


def band_label(lo: float, hi: float) -> str:
    return f"{lo:g}-{hi:g} m"


def detection_recall(truth: GroundTruth, keyframe_times: Iterable[float],
                     boxes: Iterable[tuple[float, tuple[float, float, float, float]]]) -> dict:
    """``boxes``: (t, box) of every stored sighting.  Returns {band label: {"seen", "detected",
    "recall"}} over the keyframes' visible people, and "all"."""
    by_time = frames_by_time(truth)
    stored = defaultdict(list)
    for t, box in boxes:
        stored[round(t, 2)].append(box)
    counts = {band_label(lo, hi): [0, 0] for lo, hi in zip(BANDS_M, BANDS_M[1:])}
    for t in keyframe_times:
        frame = by_time.get(t)
        if not frame:
            continue
        rx, ry = frame["robot"][:2]
        for seen in frame.get("seen", {}).values():
            distance = math.hypot(seen["position"][0] - rx, seen["position"][1] - ry)
            band = next((band_label(lo, hi) for lo, hi in zip(BANDS_M, BANDS_M[1:]) if lo <= distance < hi), None)
            if band is None:
                continue
            counts[band][0] += 1
            counts[band][1] += any(b[0] - SLACK_PX <= seen["u"] <= b[2] + SLACK_PX for b in stored[round(t, 2)])
    counts["all"] = [sum(c[0] for c in counts.values()), sum(c[1] for c in counts.values())]
    return {band: {"seen": n, "detected": hit, "recall": round(hit / n, 3) if n else None}
            for band, (n, hit) in counts.items()}
