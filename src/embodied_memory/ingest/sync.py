"""Pairing camera frames with poses (looked up in a TF buffer), depth and camera info by time."""
from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass
from typing import Callable, Generic, Optional, TypeVar

from ..types import Pose
from .transforms import ExtrapolationError, Transform, TransformError, planar_pose

T = TypeVar("T")


def yaw_from_quaternion(x: float, y: float, z: float, w: float) -> float:
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def odometry_transform(msg, base_frame: str) -> tuple[str, str, Transform]:
    """nav_msgs/Odometry (rclpy or rosbags) as the transform (parent, child, parent <- child) it
    states; an empty frame_id is "odom", an empty child_frame_id ``base_frame``."""
    p, q = msg.pose.pose.position, msg.pose.pose.orientation
    return (msg.header.frame_id or "odom", msg.child_frame_id or base_frame,
            Transform((p.x, p.y, p.z), (q.x, q.y, q.z, q.w)))


def tf_transform(tf) -> Transform:
    """geometry_msgs/TransformStamped (rclpy or rosbags) -> Transform."""
    tr, q = tf.transform.translation, tf.transform.rotation
    return Transform((tr.x, tr.y, tr.z), (q.x, q.y, q.z, q.w))


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


DEPTH_TOLERANCE_S = 0.1   # a depth image pairs with the colour frame this close in time


class DepthPairing(Generic[T]):
    """Pairs colour frames with the depth image nearest in time, whichever arrives first: a frame
    gets the nearest depth image already received (``attach`` is called at once) and, unless its
    stamp is the frame's, a nearer one that arrives later (a camera driver or a bag may publish
    depth after colour; ``attach`` is called again, it replaces).  The last ``max_waiting``
    frames wait; the last ``max_depths`` depth images are kept (about a second of a camera)."""

    def __init__(self, tolerance_s: float = DEPTH_TOLERANCE_S, max_waiting: int = 8, max_depths: int = 30):
        self.tolerance_s = tolerance_s
        self._depths: TimeBuffer[T] = TimeBuffer(max_items=max_depths)
        self._waiting: deque[list] = deque(maxlen=max_waiting)     # [stamp, attach, |dt| of its depth so far]

    def on_frame(self, stamp: float, attach: Callable[[T], None]) -> None:
        found = self._depths.nearest(stamp, self.tolerance_s)
        gap = math.inf
        if found is not None:
            attach(found[1])
            gap = abs(found[0] - stamp)
        if gap > 0:
            self._waiting.append([stamp, attach, gap])

    def on_depth(self, stamp: float, depth: T) -> None:
        self._depths.add(stamp, depth)
        for entry in self._waiting:
            gap = abs(entry[0] - stamp)
            if gap <= self.tolerance_s and gap < entry[2]:
                entry[1](depth)
                entry[2] = gap
        exact = [e for e in self._waiting if e[2] == 0]
        for entry in exact:
            self._waiting.remove(entry)


@dataclass
class PosedFrame(Generic[T]):
    """A frame with its pose (None: no transform in time; ``reason`` says which lookup failed)."""

    stamp: float
    payload: T
    pose: Optional[Pose]
    non_finite: bool = False        # no pose because the transform had NaN/inf there: drop the frame
    reason: str = ""


class FramePoser(Generic[T]):
    """Frames in, each with the pose of ``base_frame`` in ``fixed_frame`` at the frame's stamp.

    A frame whose transform is not there yet (/tf lags the camera) waits, in arrival order, up
    to ``wait_s`` (on the caller's clock ``now``: the steady clock in a node, bag time offline)
    and is retried on every :meth:`poll` (call it for each new transform and on a timer); then
    it goes on without a pose. A frame older than every sample of an edge of the chain cannot
    get one (tf2 keeps no data from before) and goes on at once; one near a rejected NaN/inf
    transform is marked ``non_finite`` (callers drop it). At most ``max_pending`` frames wait:
    beyond, the oldest goes on as it is. ``buffer`` is a TransformBuffer (ingest/transforms.py)
    or an adapter of tf2_ros.Buffer with the same two methods."""

    def __init__(self, buffer, fixed_frame: str, base_frame: str, wait_s: float, *, max_pending: int = 50,
                 non_finite_tolerance_s: float = 0.25):
        if wait_s < 0 or max_pending < 1:
            raise ValueError("wait_s must be >= 0 and max_pending >= 1")
        self.buffer, self.fixed_frame, self.base_frame = buffer, fixed_frame, base_frame
        self.wait_s, self.max_pending, self.non_finite_tolerance_s = wait_s, max_pending, non_finite_tolerance_s
        self._pending: deque[tuple[float, float, T]] = deque()      # (deadline, stamp, payload)
        self._non_finite: TimeBuffer[None] = TimeBuffer(max_items=200)   # stamps of rejected transforms

    def __len__(self) -> int:
        return len(self._pending)

    def add_transform(self, parent: str, child: str, stamp: float, transform: Transform,
                      static: bool = False) -> bool:
        """Into the buffer; False when rejected (NaN/inf, zero quaternion) or ignored (too old,
        repeated). A rejected one marks its time: frames there without a pose are dropped."""
        try:
            return bool(self.buffer.set_transform(parent, child, stamp, transform, static))
        except ValueError:
            if math.isfinite(stamp):
                self._non_finite.add(stamp, None)
            raise

    def _lookup(self, stamp: float) -> tuple[Optional[Pose], Optional[TransformError]]:
        try:
            return planar_pose(self.buffer.lookup_transform(self.fixed_frame, self.base_frame, stamp)), None
        except TransformError as exc:
            return None, exc

    def _resolved(self, stamp: float, payload: T, error: Optional[TransformError]) -> PosedFrame[T]:
        bad = self._non_finite.nearest(stamp, self.non_finite_tolerance_s) is not None
        return PosedFrame(stamp, payload, None, non_finite=bad, reason=str(error or "no transform"))

    def add_frame(self, stamp: float, payload: T, now: float) -> list[PosedFrame[T]]:
        """Queue a frame; returns the frames that are done (this one too when its transform is
        there), in arrival order."""
        self._pending.append((now + self.wait_s, stamp, payload))
        return self.poll(now)

    def poll(self, now: float) -> list[PosedFrame[T]]:
        done: list[PosedFrame[T]] = []
        while self._pending:
            deadline, stamp, payload = self._pending[0]
            pose, error = self._lookup(stamp)
            gone = isinstance(error, ExtrapolationError) and (   # older than all the data: it never comes
                error.direction == "past" or (error.direction == "single" and error.requested < error.available))
            if pose is None and not gone and now < deadline and len(self._pending) <= self.max_pending:
                break                       # it may still come
            self._pending.popleft()
            done.append(PosedFrame(stamp, payload, pose) if pose is not None else
                        self._resolved(stamp, payload, error))
        return done

    def flush(self) -> list[PosedFrame[T]]:
        """Every waiting frame, with the pose if it is there by now (end of stream)."""
        return self.poll(float("inf"))
