"""Decision-deviation detection on a trajectory (HIMM eqs. 3-4, after CorrectNav).

``h_t = d(M_t, x)``: the distance from the robot's position at step t to the reference
(ground-truth) trajectory. A step deviates when the distance jumps: ``h_t > S * h_{t-1}``
(and is above ``min_distance``, so jitter on the path is not a deviation). Instead of a fixed
S, thresholds are tried from strict to loose; the detection stops at a threshold ``S_stop``
chosen at random (seeded) among those that yield 3-5 deviations.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


def distance_to_polyline(points: np.ndarray, polyline: np.ndarray) -> np.ndarray:
    """Distance of each point (N, 2) to the polyline (M, 2)."""
    points, polyline = np.asarray(points, float), np.asarray(polyline, float)
    if len(polyline) == 1:
        return np.hypot(*(points - polyline[0]).T)
    a, b = polyline[:-1], polyline[1:]
    ab = b - a
    denom = np.maximum((ab ** 2).sum(axis=1), 1e-12)
    t = np.clip(((points[:, None, :] - a[None]) * ab[None]).sum(axis=2) / denom[None], 0.0, 1.0)
    closest = a[None] + t[..., None] * ab[None]
    return np.sqrt(((points[:, None, :] - closest) ** 2).sum(axis=2)).min(axis=1)


@dataclass(frozen=True)
class DeviationResult:
    steps: tuple[int, ...]          # indices into the trajectory
    threshold: float                # S_stop (nan when no threshold gave 3-5 deviations)
    distances: tuple[float, ...]    # h_t


def detect_deviations(positions: Sequence[Sequence[float]], reference: Sequence[Sequence[float]],
                      k_range: tuple[int, int] = (3, 5), min_distance: float = 0.5, floor: float = 0.1,
                      thresholds: Sequence[float] = tuple(np.geomspace(8.0, 1.05, 48)), seed: int = 0
                      ) -> DeviationResult:
    positions = np.asarray(positions, float)
    if positions.ndim != 2 or positions.shape[1] < 2 or len(reference) == 0:
        raise ValueError("detect_deviations: positions (N, 2) and a non-empty reference are required")
    h = distance_to_polyline(positions[:, :2], np.asarray(reference, float)[:, :2])
    ratio = h[1:] / np.maximum(h[:-1], floor)
    big = h[1:] > min_distance

    def at(s: float) -> tuple[int, ...]:
        return tuple(int(i) + 1 for i in np.nonzero(big & (ratio > s))[0])

    valid = [(s, at(s)) for s in thresholds if k_range[0] <= len(at(s)) <= k_range[1]]
    if valid:
        s, steps = valid[int(np.random.default_rng(seed).integers(len(valid)))]
        return DeviationResult(steps, float(s), tuple(h.round(3).tolist()))
    # fewer jumps than k_range[0] at every threshold: all of them; more: the k_range[1] largest
    steps = at(min(thresholds))
    if len(steps) > k_range[1]:
        steps = tuple(sorted(sorted(steps, key=lambda t: -ratio[t - 1])[:k_range[1]]))
    return DeviationResult(steps, float("nan"), tuple(h.round(3).tolist()))
