"""Short-term person tracks across consecutive keyframes (multi-object tracking's first step).

A sighting continues a track when it is close to the track's last sighting in time and space:
where the person stood (depth + pose) within ``radius_m`` over at most ``gap_s`` (a still
person waited on for minutes stays one track), or, without a position, the image box
overlapping (IoU) within ``box_gap_s`` (the robot has barely moved).  Association is one to one
within a keyframe, nearest first.  A track's faces vote together for one identity
(``identity.IdentityManager``); a faceless sighting in a track inherits its identity, which is
stronger evidence than body appearance alone.  ROS-free and deterministic (the identity journal
replays it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence


@dataclass(frozen=True)
class TrackParams:
    gap_s: float = 40.0          # a track ends after this long without a sighting (a wait's frames are 30 s apart)
    radius_m: float = 0.8        # how far a person may be from where the track last saw them
    speed_mps: float = 1.0       # plus this much per second since (people walk), for at most max_walk_s
    max_walk_s: float = 2.0      # (keyframes of a moving robot are ~2 s apart; a wait's people stand still)
    box_gap_s: float = 3.0       # without positions: boxes this close in time ...
    box_iou: float = 0.3         # ... overlapping at least this much

    def validate(self) -> None:
        if not (self.gap_s > 0 and self.radius_m > 0 and self.speed_mps >= 0 and self.max_walk_s >= 0 and self.box_gap_s >= 0
                and 0 < self.box_iou <= 1):
            raise ValueError("track parameters: gap_s, radius_m > 0; speed_mps, box_gap_s >= 0; 0 < box_iou <= 1")


@dataclass
class Track:
    track_id: int
    t: float                                  # last sighting
    position: Optional[tuple[float, float]]
    box: tuple[float, float, float, float]
    identity_id: str = ""
    sightings: int = 0
    votes: dict[str, float] = field(default_factory=dict)   # identity -> face evidence
    beside: set[str] = field(default_factory=set)   # identities seen in its keyframes while it had none


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


class TrackBook:
    """The live tracks; ``associate`` maps one keyframe's sightings onto them."""

    def __init__(self, params: TrackParams = TrackParams(), first_id: int = 1):
        params.validate()
        self.params = params
        self.tracks: list[Track] = []
        self._next = first_id

    def _cost(self, track: Track, t: float, position, box) -> Optional[float]:
        p, dt = self.params, t - track.t
        if dt < 0 or dt > p.gap_s:
            return None
        if position is not None and track.position is not None:
            d = math.dist(position, track.position)
            return d if d <= p.radius_m + p.speed_mps * min(dt, p.max_walk_s) else None
        if dt <= p.box_gap_s:
            overlap = iou(box, track.box)
            return 10.0 + (1.0 - overlap) if overlap >= p.box_iou else None
        return None

    def associate(self, t: float, sightings: Sequence[tuple[Optional[tuple[float, float]], tuple]]) -> list[Track]:
        """One track per sighting ((position or None, box) each), continued or new, one to one."""
        self.tracks = [tr for tr in self.tracks if t - tr.t <= self.params.gap_s]
        pairs = sorted((c, i, j) for i, (pos, box) in enumerate(sightings) for j, tr in enumerate(self.tracks)
                       if (c := self._cost(tr, t, pos, box)) is not None)
        chosen: dict[int, Track] = {}
        used: set[int] = set()
        for _, i, j in pairs:
            if i not in chosen and j not in used:
                chosen[i] = self.tracks[j]
                used.add(j)
        out = []
        for i, (pos, box) in enumerate(sightings):
            track = chosen.get(i)
            if track is None:
                track = Track(self._next, t, pos, tuple(box))
                self._next += 1
                self.tracks.append(track)
            track.t, track.box, track.sightings = t, tuple(box), track.sightings + 1
            if pos is not None:
                track.position = pos
            out.append(track)
        return out

    def relabel(self, absorbed: str, survivor: str) -> None:
        for track in self.tracks:
            if track.identity_id == absorbed:
                track.identity_id = survivor
            if absorbed in track.votes:
                track.votes[survivor] = track.votes.get(survivor, 0.0) + track.votes.pop(absorbed)
            if absorbed in track.beside:
                track.beside.discard(absorbed)
                track.beside.add(survivor)

    def drop_identity(self, identity_id: str) -> None:
        for track in self.tracks:
            if track.identity_id == identity_id:
                track.identity_id = ""
            track.votes.pop(identity_id, None)
            track.beside.discard(identity_id)
