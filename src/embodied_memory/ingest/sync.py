"""Pairing camera frames with poses, depth, camera info and the current waypoint by time."""
from __future__ import annotations

import bisect
import math
from collections import deque
from typing import Generic, Optional, TypeVar

from ..types import Pose

T = TypeVar("T")


def yaw_from_quaternion(x: float, y: float, z: float, w: float) -> float:
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


class TimeBuffer(Generic[T]):
    """A bounded, time-ordered buffer; lookup of the nearest item within a tolerance."""

    def __init__(self, max_items: int = 2000):
        self._stamps: deque[float] = deque(maxlen=max_items)
        self._items: deque[T] = deque(maxlen=max_items)

    def add(self, stamp: float, item: T) -> None:
        if self._stamps and stamp < self._stamps[-1]:
            return  # out of order (bag replays can repeat): keep the buffer sorted
        self._stamps.append(stamp)
        self._items.append(item)

    def nearest(self, stamp: float, tolerance: float) -> Optional[tuple[float, T]]:
        if not self._stamps:
            return None
        stamps = list(self._stamps)
        i = bisect.bisect_left(stamps, stamp)
        best = min((j for j in (i - 1, i) if 0 <= j < len(stamps)), key=lambda j: abs(stamps[j] - stamp))
        if abs(stamps[best] - stamp) > tolerance:
            return None
        return stamps[best], self._items[best]

    def latest(self) -> Optional[tuple[float, T]]:
        return (self._stamps[-1], self._items[-1]) if self._stamps else None

    def __len__(self) -> int:
        return len(self._stamps)


class PoseBuffer(TimeBuffer[Pose]):
    """Poses by time, linearly interpolated between neighbours (yaw on the circle)."""

    def at(self, stamp: float, tolerance: float) -> Optional[Pose]:
        if not self._stamps:
            return None
        stamps = list(self._stamps)
        i = bisect.bisect_left(stamps, stamp)
        if 0 < i < len(stamps) and stamps[i] - stamps[i - 1] <= 2 * tolerance:
            t0, t1 = stamps[i - 1], stamps[i]
            a, b = self._items[i - 1], self._items[i]
            f = 0.0 if t1 == t0 else (stamp - t0) / (t1 - t0)
            dyaw = math.atan2(math.sin(b.yaw - a.yaw), math.cos(b.yaw - a.yaw))
            return Pose(a.x + f * (b.x - a.x), a.y + f * (b.y - a.y), a.z + f * (b.z - a.z),
                        a.yaw + f * dyaw, a.frame_id)
        found = self.nearest(stamp, tolerance)
        return found[1] if found else None
