"""Records that cross layers (ingest -> perception -> store -> agent), as dataclasses.

Times are UNIX seconds (float, UTC).  Embeddings are float32 numpy vectors or None.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

Vector = Optional[np.ndarray]


def as_vector(values) -> Vector:
    """A float32 1-D vector, or None for missing/empty input."""
    if values is None:
        return None
    vec = np.asarray(values, dtype=np.float32).reshape(-1)
    return vec if vec.size else None


def finite_point(values) -> Optional[tuple[float, ...]]:
    """A point as a tuple of floats when every value is a finite number, else None (a sender's
    NaN/inf or garbage drops the point, not the record holding it)."""
    try:
        point = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        return None
    return point if point and all(math.isfinite(v) for v in point) else None


@dataclass(frozen=True)
class Pose:
    """Planar robot/camera pose in ``frame_id`` (x, y, z metres; yaw radians)."""

    x: float
    y: float
    z: float = 0.0
    yaw: float = 0.0
    frame_id: str = "map"

    def is_finite(self) -> bool:
        return all(math.isfinite(v) for v in (self.x, self.y, self.z, self.yaw))

    def as_list(self) -> list[float]:
        return [self.x, self.y, self.z]


@dataclass
class Region:
    box: tuple[float, float, float, float]
    label: str = ""
    score: float = 0.0
    embedding: Vector = None
    center_3d: Optional[tuple[float, float, float]] = None
    size_3d: Optional[tuple[float, float, float]] = None


@dataclass
class PersonSighting:
    box: tuple[float, float, float, float]
    identity_id: str = ""                # "" = unresolved
    identity_confidence: float = 0.0
    detection_score: float = 0.0
    face_box: Optional[tuple[float, float, float, float]] = None
    face_embedding: Vector = None
    reid_embedding: Vector = None
    activity: str = ""
    clothing: str = ""
    crop_path: str = ""
    position: Optional[tuple[float, float, float]] = None   # where they stood (x, y, floor z) in the pose's frame
    track_id: int = 0                    # perception's short-term track across keyframes (0: none)


@dataclass
class Observation:
    """What the robot perceived at one keyframe: the unit the memory stores."""

    observation_id: str
    stamp: float
    episode_id: str
    pose: Optional[Pose]                 # None: no transform in time (stored with the waypoint only)
    description: str = ""
    description_json: str = ""
    keyframe_id: str = ""
    segment_id: int = 0
    waypoint_id: str = ""
    image_path: str = ""
    text_embedding: Vector = None
    global_embedding: Vector = None
    regions: list[Region] = field(default_factory=list)
    people: list[PersonSighting] = field(default_factory=list)
    # the keyframe as JPEG, written under the store's images/ only once the store accepts the
    # observation (then image_path names the file); None when image_path is already set or no image
    image_jpeg: Optional[bytes] = field(default=None, repr=False)


@dataclass
class Keyframe:
    """A camera frame kept by the frame selector (pixels decoded, BGR)."""

    keyframe_id: str
    stamp: float
    episode_id: str
    pose: Optional[Pose]                        # None: no transform in time
    image: np.ndarray
    segment_id: int = 0
    waypoint_id: str = ""
    depth: Optional[np.ndarray] = None          # metres, float32, registered to image
    intrinsics: Optional[tuple[float, float, float, float]] = None  # fx, fy, cx, cy
    selection_score: float = 0.0


@dataclass(frozen=True)
class Episode:
    episode_id: str
    start: float
    end: Optional[float] = None
    name: str = ""
    world: str = ""                      # map / site / simulated world


@dataclass(frozen=True)
class StoredSighting:
    """One stored person sighting with what identity assignment reads (consolidation's input)."""
    sighting_id: int
    obs: int                              # the observation (keyframe) row it belongs to
    t: float
    identity_id: str
    box: tuple[float, float, float, float]
    face_box: Optional[tuple[float, float, float, float]] = None
    face_embedding: Vector = None
    reid_embedding: Vector = None
    position: Optional[tuple[float, float]] = None


@dataclass
class Identity:
    identity_id: str
    display_name: str = ""
    created: float = 0.0
    sightings: int = 0
    first_seen: Optional[float] = None
    last_seen: Optional[float] = None


@dataclass(frozen=True)
class SemanticRule:
    """A program-style rule from a finished episode (HIMM semantic memory)."""

    rule_id: str
    kind: str                            # if_then | situation_suggestion | problem_solution
    key: str                             # the variable or function it is keyed to
    condition: str
    action: str
    episode_id: str = ""
    created: float = 0.0
    embedding: Vector = None
