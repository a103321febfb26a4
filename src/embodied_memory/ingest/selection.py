"""Keyframe selection policies, streaming (one frame at a time, bounded memory).

- ``uniform`` (baseline): split time into T-second segments, keep K frames per segment at
  equal intervals (the frame nearest each slot centre).
- ``psfr`` (LVMem, Patch-wise Sparse-Flow Retention): same segments and K, but keep the K
  frames with the strongest structural change, measured by sparse Lucas-Kanade flow from the
  previous frame, per image patch: the score is the mean over patches of the mean flow
  magnitude of the points tracked in the patch (clipped, so one fast patch cannot dominate),
  plus the share of points lost (occlusion, new structure).  Static stretches score ~0 and
  are skipped.
- ``similarity`` (HUMEMBR): keep a frame unless its global embedding is closer than
  ``similarity_threshold`` (cosine) to the last kept frame's.

``push(stamp, image, payload)`` returns the frames selected so far (for segment policies:
when a segment closes); ``flush()`` closes the last segment.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any, Callable, Optional

import cv2
import numpy as np


@dataclass(frozen=True)
class SelectionParams:
    policy: str = "psfr"              # psfr | uniform | similarity
    segment_s: float = 10.0           # T (LVMem: 10 s)
    frames_per_segment: int = 6       # K (LVMem: 6)
    patch_grid: int = 4               # psfr: patches per side
    max_corners: int = 400            # psfr: tracked points
    flow_width: int = 320             # psfr: frames are downscaled to this width for flow
    similarity_threshold: float = 0.95  # HUMEMBR frame filter

    def validate(self) -> None:
        if self.policy not in ("psfr", "uniform", "similarity"):
            raise ValueError(f"policy: unknown '{self.policy}' (psfr | uniform | similarity)")
        if self.segment_s <= 0 or self.frames_per_segment < 1 or self.patch_grid < 1:
            raise ValueError("segment_s > 0, frames_per_segment >= 1 and patch_grid >= 1 are required")


@dataclass
class Selected:
    stamp: float
    segment_id: int
    score: float
    payload: Any


class SparseFlowScorer:
    """Patch-wise sparse LK flow between consecutive frames (a structural-change score)."""

    def __init__(self, grid: int = 4, max_corners: int = 400, width: int = 320):
        self.grid, self.max_corners, self.width = grid, max_corners, width
        self._prev: Optional[np.ndarray] = None

    def _gray(self, image: np.ndarray) -> np.ndarray:
        gray = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY) if image.ndim == 3 else image
        scale = self.width / gray.shape[1]
        return cv2.resize(gray, (self.width, max(1, int(gray.shape[0] * scale)))) if scale < 1 else gray

    def reset(self) -> None:
        self._prev = None

    def score(self, image: np.ndarray) -> float:
        gray = self._gray(image)
        prev, self._prev = self._prev, gray
        if prev is None or prev.shape != gray.shape:
            return 1.0  # the first frame of a stream is new structure
        points = cv2.goodFeaturesToTrack(prev, self.max_corners, 0.01, 7)
        if points is None or len(points) < 4:
            return float(np.mean(cv2.absdiff(prev, gray)) / 255.0)  # textureless: fall back to intensity
        moved, status, _err = cv2.calcOpticalFlowPyrLK(prev, gray, points, None, winSize=(15, 15), maxLevel=2)
        ok = status.reshape(-1) == 1
        p0, p1 = points.reshape(-1, 2), moved.reshape(-1, 2)
        mag = np.linalg.norm(p1 - p0, axis=1)
        h, w = gray.shape
        cell = np.minimum((p0[:, 1] * self.grid / h).astype(int), self.grid - 1) * self.grid + \
            np.minimum((p0[:, 0] * self.grid / w).astype(int), self.grid - 1)
        patch_scores = []
        for c in np.unique(cell):
            in_patch = cell == c
            tracked = in_patch & ok
            lost = 1.0 - tracked.sum() / in_patch.sum()
            motion = float(np.mean(np.minimum(mag[tracked], 0.1 * w))) if tracked.any() else 0.0
            patch_scores.append(motion / (0.02 * w) + lost)  # a 2%-of-width shift scores 1.0
        return float(np.mean(patch_scores))


class FrameSelector:
    def __init__(self, params: SelectionParams = SelectionParams(),
                 embed: Optional[Callable[[np.ndarray], np.ndarray]] = None):
        self.params = params
        if params.policy == "similarity" and embed is None:
            raise ValueError("policy 'similarity' needs an image embedder")
        self._embed = embed
        self._flow = SparseFlowScorer(params.patch_grid, params.max_corners, params.flow_width)
        self._segment: Optional[int] = None
        self._segment_start: Optional[float] = None
        self._heap: list = []                        # psfr: (score, order, Selected) min-heap of size K
        self._slots: dict[int, tuple[float, Selected]] = {}  # uniform: slot -> (distance, frame)
        self._order = 0
        self._last_kept: Optional[np.ndarray] = None
        self.frames_seen = 0

    def segment_of(self, stamp: float) -> int:
        if self._segment_start is None:
            self._segment_start = stamp
        return int((stamp - self._segment_start + 1e-6) // self.params.segment_s)  # 1 us: float noise

    def _close_segment(self) -> list[Selected]:
        if self.params.policy == "psfr":
            chosen = [item[2] for item in self._heap]
        else:
            chosen = [sel for _, sel in self._slots.values()]
        self._heap, self._slots = [], {}
        return sorted(chosen, key=lambda s: s.stamp)

    def push(self, stamp: float, image: np.ndarray, payload: Any = None) -> list[Selected]:
        self.frames_seen += 1
        p = self.params
        if p.policy == "similarity":
            vec = np.asarray(self._embed(image), dtype=np.float32)
            vec = vec / max(float(np.linalg.norm(vec)), 1e-12)
            sim = float(vec @ self._last_kept) if self._last_kept is not None else -1.0
            if sim >= p.similarity_threshold:
                return []
            self._last_kept = vec
            return [Selected(stamp, self.segment_of(stamp), 1.0 - sim, payload)]
        segment = self.segment_of(stamp)
        out: list[Selected] = []
        if self._segment is not None and segment != self._segment:
            out = self._close_segment()
        self._segment = segment
        if p.policy == "psfr":
            score = self._flow.score(image)
            item = (score, self._order, Selected(stamp, segment, score, payload))
            self._order += 1
            if len(self._heap) < p.frames_per_segment:
                heapq.heappush(self._heap, item)
            elif score > self._heap[0][0]:
                heapq.heapreplace(self._heap, item)
        else:  # uniform
            offset = stamp - (self._segment_start + segment * p.segment_s)
            slot_len = p.segment_s / p.frames_per_segment
            slot = min(int((offset + 1e-6) // slot_len), p.frames_per_segment - 1)
            distance = abs(offset - (slot + 0.5) * slot_len)
            if slot not in self._slots or distance < self._slots[slot][0]:
                self._slots[slot] = (distance, Selected(stamp, segment, 0.0, payload))
        return out

    def flush(self) -> list[Selected]:
        return self._close_segment() if self.params.policy != "similarity" else []
