"""The operator step of a simulated run: a person names the pseudonymous identities the memory
built, from what they can see, as they would at the robot.

- ``label_identities`` (the default operator): the operator reviews the identities with at
  least ``min_sightings`` sightings (default: every identity listed), looks at each one's ``max_images`` best stored crops (face
  embedded, most confident detection, largest box, from different moments) and names the
  identity after the person most of those images show; where they show different people, the
  operator looks at ``MIXED_LOOK`` times as many before deciding. What an image "shows" is read from the
  simulator at that one image (the person at that image column, when the view is unambiguous),
  standing in for the operator's eyes; nothing else from the ground truth reaches the memory.
  Identities whose images show no one unambiguously stay unnamed; two identities given one name are merged
  by the memory (what the operator's naming means).
- ``enrol_identities`` (the alternative): one labelled photo per known person, matched by the
  face backend against each identity's face embeddings (no human looks at anything).
"""
from __future__ import annotations

import bisect
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from .episode import GroundTruth

log = logging.getLogger(__name__)

Query = Callable[[str, dict], Any]
Namer = Callable[[str, str], Any]
SFACE_MATCH = 0.363            # SFace cosine threshold (OpenCV's recommended value)
MAX_IMAGES = 3                 # crops the operator looks at per identity
MIXED_LOOK = 3                 # where those show different people, this many times as many
MIN_SIGHTINGS = 1              # the operator reviews every identity the memory lists


@dataclass
class NamingReport:
    """What the operator step did (reported next to the identity metrics)."""
    mode: str
    identities: int = 0                       # identities in the memory before naming
    reviewed: int = 0                         # identities the operator looked at
    images_looked_at: int = 0
    named: dict[str, str] = field(default_factory=dict)   # identity id -> person name (lower case)

    def to_dict(self) -> dict:
        return {"mode": self.mode, "identities": self.identities, "reviewed": self.reviewed,
                "images_looked_at": self.images_looked_at, "named": len(self.named),
                "names": sorted(set(self.named.values()))}


def who_is_at(frame: dict, box) -> Optional[str]:
    """The person a crop of ``box`` shows, when the view is unambiguous:
    - alone in view, with the box near them (80 px; not a false detection elsewhere);
    - the only person in view whose image column lies within the box, near its middle (the
      central half of the box, or 30 px of its centre): what a person looking at the crop sees;
    - or the only one whose column is near the box's centre (30 px) with everyone else far from it
      (> 80 px)."""
    centre = (box[0] + box[2]) / 2
    if len(frame["visible"]) == 1:   # alone in view, and the box is on them (not a false detection)
        name = frame["visible"][0]
        u = frame.get("seen", {}).get(name, {}).get("u")
        return name if u is None or abs(u - centre) <= 80 else None
    columns = {name: seen["u"] for name, seen in frame.get("seen", {}).items() if name in frame["visible"]}
    inside = [name for name, u in columns.items() if box[0] <= u <= box[2]]
    if len(inside) == 1 and abs(columns[inside[0]] - centre) <= max(30.0, (box[2] - box[0]) / 4):
        return inside[0]
    gaps = sorted((abs(u - centre), name) for name, u in columns.items())
    if gaps and gaps[0][0] <= 30 and (len(gaps) == 1 or gaps[1][0] > 80):
        return gaps[0][1]
    return None


class FramesByTime:
    """The simulator's frames by stamp.  A stamp read back from the memory (its tools round
    times to the millisecond) finds its frame: the nearest within ``tolerance_s`` (frames are
    at least 0.5 s apart)."""

    def __init__(self, frames: list[dict], tolerance_s: float = 0.01):
        self._frames = sorted(frames, key=lambda f: f["t"])
        self._times = [f["t"] for f in self._frames]
        self.tolerance_s = tolerance_s

    def get(self, t: float) -> Optional[dict]:
        i = bisect.bisect_left(self._times, t)
        near = [j for j in (i - 1, i) if 0 <= j < len(self._times)]
        j = min(near, key=lambda j: abs(self._times[j] - t), default=None)
        return self._frames[j] if j is not None and abs(self._times[j] - t) <= self.tolerance_s else None


def frames_by_time(truth: GroundTruth) -> FramesByTime:
    return FramesByTime(truth.frames)


def best_sightings(sightings: list[dict], n: int, min_gap_s: float = 30.0) -> list[dict]:
    """The ``n`` crops an inspector shows first: face embedded, most confident, largest box,
    at least ``min_gap_s`` apart (not three crops of one moment)."""
    def quality(s):
        x1, y1, x2, y2 = s["box"]
        return (bool(s.get("has_face_embedding")), round(s.get("confidence") or 0.0, 2), (x2 - x1) * (y2 - y1))
    chosen: list[dict] = []
    for s in sorted(sightings, key=quality, reverse=True):
        if all(abs(s["t"] - c["t"]) >= min_gap_s for c in chosen):
            chosen.append(s)
        if len(chosen) == n:
            break
    return chosen


def label_identities(query: Query, name: Namer, truth: GroundTruth, max_images: int = MAX_IMAGES,
                     min_sightings: int = MIN_SIGHTINGS) -> NamingReport:
    """``query(tool, args)`` calls the memory; ``name(identity, display_name)`` names one."""
    by_time = frames_by_time(truth)
    report = NamingReport("operator")
    people = query("people", {})
    report.identities = len(people)
    for person in people:
        identity = person["person"]
        sightings = query("export_identity", {"person": identity})["sightings"]
        if len(sightings) < min_sightings:
            continue
        report.reviewed += 1
        votes: Counter = Counter()
        for looked, s in enumerate(best_sightings(sightings, MIXED_LOOK * max_images)):
            if looked == max_images and len(votes) <= 1:
                break                                # the first images agree: no need to look further
            report.images_looked_at += 1
            frame = by_time.get(s["t"])
            who = who_is_at(frame, s["box"]) if frame else None
            if who:
                votes[who] += 1
        if votes:
            (top, count), = votes.most_common(1)
            if count * 2 > sum(votes.values()):      # most of the images the operator could read
                report.named[identity] = top
                name(identity, top.capitalize())
    return report


def enrolment_photo(portrait: str, out: Path) -> str:
    """A stand-in second photo of a stock portrait (only one exists): mirrored, scaled to 90 %,
    relit (+15 % brightness); written to ``out``."""
    import cv2
    image = cv2.imread(str(portrait))
    if image is None:
        raise FileNotFoundError(f"portrait {portrait} is not readable")
    h, w = image.shape[:2]
    image = cv2.resize(cv2.flip(image, 1), (int(w * 0.9), int(h * 0.9)), interpolation=cv2.INTER_AREA)
    out.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(out), cv2.convertScaleAbs(image, alpha=1.15, beta=0))
    return str(out)


def _identity_faces(query: Query, identity: str) -> Optional[np.ndarray]:
    sightings = query("export_identity", {"person": identity, "include_embeddings": True})["sightings"]
    vecs = [s["face_emb"] for s in sightings if s.get("face_emb")]
    return np.asarray(vecs, np.float32) if vecs else None


def enrol_identities(query: Query, name: Namer, photos: dict[str, str], face_backend=None,
                     threshold: float = SFACE_MATCH) -> NamingReport:
    """Name each identity after the enrolled person whose photo's face best matches one of its
    face embeddings (cosine >= ``threshold``); ``photos``: person name -> one labelled photo."""
    import cv2
    if face_backend is None:
        from ..perception.faces import YuNetSFace
        face_backend = YuNetSFace()
    probes = {}
    for person, path in photos.items():
        image = cv2.imread(str(path))
        faces = face_backend.detect(image) if image is not None else []
        if not faces:
            log.warning("enrolment photo of %s (%s): no face found, not enrolled", person, path)
            continue
        probes[person] = max(faces, key=lambda f: f.score).embedding
    report = NamingReport("enrolment")
    people = query("people", {})
    report.identities = len(people)
    for person in people:
        identity = person["person"]
        vecs = _identity_faces(query, identity)
        if vecs is None or not probes:
            continue
        report.reviewed += 1
        scores = {who: float(np.max(vecs @ probe)) for who, probe in probes.items()}
        best = max(scores, key=scores.get)
        if scores[best] >= threshold:
            report.named[identity] = best
            name(identity, best.capitalize())
    return report
