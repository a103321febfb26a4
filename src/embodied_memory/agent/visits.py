"""Visits: sightings further apart than 30 minutes belong to different visits; a visit lasts
from its first to its last sighting (what a patrolling robot can observe of a stay)."""
from __future__ import annotations

from typing import Callable, Sequence, TypeVar

T = TypeVar("T")
VISIT_GAP_S = 30 * 60


def split_visits(items: Sequence[T], time_of: Callable[[T], float] = lambda t: t,
                 gap_s: float = VISIT_GAP_S) -> list[list[T]]:
    """Time-ordered ``items`` grouped into visits."""
    visits: list[list[T]] = []
    for item in items:
        if not visits or time_of(item) - time_of(visits[-1][-1]) > gap_s:
            visits.append([])
        visits[-1].append(item)
    return visits


def observed_minutes(visits: list[list[T]], time_of: Callable[[T], float] = lambda t: t) -> float:
    return sum(time_of(v[-1]) - time_of(v[0]) for v in visits) / 60.0


def spoken_duration(minutes: float) -> str:
    """'about 25 minutes', 'about 1 minute', 'under a minute' (a 23-second stay is not 'about 0 minutes')."""
    if minutes < 0.75:
        return "under a minute"
    whole = round(minutes)
    return f"about {whole} minute{'s' if whole != 1 else ''}"
