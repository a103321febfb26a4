"""A small TF buffer with tf2's lookup semantics, for installs without tf2_ros (ROS-free).

Each child frame has one parent; a dynamic edge keeps its samples for ``cache_time_s`` (10 s,
as tf2) behind its newest one, a static edge (/tf_static) holds one transform forever.
:meth:`TransformBuffer.lookup_transform` walks the tree through the common ancestor of the two
frames, interpolating each dynamic edge between the two samples around the requested time
(linear translation, slerp rotation). As in tf2 there is no extrapolation: a time outside an
edge's [oldest, newest] raises :class:`ExtrapolationError` (``extrapolation_tolerance_s``
optionally accepts the nearest sample that close); unknown frames raise
:class:`FrameLookupError`, frames of separate trees :class:`ConnectivityError`, with tf2's
messages. Time 0 asks for the latest time every edge of the chain has data for.

Transforms are full 3D (quaternions ``x, y, z, w``); :func:`planar_pose` makes the memory's
planar pose (x, y, z, yaw) of one.
"""
from __future__ import annotations

import bisect
import math
import threading
from dataclasses import dataclass, field
from typing import Optional

from ..types import Pose

MAX_GRAPH_DEPTH = 1000          # tf2's bound on a chain (a loop in the tree is an error)
DEFAULT_CACHE_TIME_S = 10.0     # tf2's default buffer length


# -- errors (tf2's exception classes, same messages) ------------------------------------------
class TransformError(Exception):
    """Any failed lookup (tf2 TransformException)."""


class FrameLookupError(TransformError, LookupError):
    """A frame the buffer has never heard of (tf2 LookupException)."""


class ConnectivityError(TransformError):
    """Both frames exist but belong to different trees (tf2 ConnectivityException)."""


class ExtrapolationError(TransformError):
    """The time is outside the data of an edge of the chain (tf2 ExtrapolationException).
    ``direction``: "past" (older than the oldest sample), "future" (newer than the newest) or
    "single" (one sample, at another time)."""

    def __init__(self, message: str, direction: str, requested: float, available: float):
        super().__init__(message)
        self.direction, self.requested, self.available = direction, requested, available


class InvalidFrameError(TransformError, ValueError):
    """An empty frame id (tf2 InvalidArgumentException)."""


# -- transforms -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Transform:
    """Maps points of a child frame into its parent: p_parent = R(rotation) p_child + translation."""

    translation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rotation: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)   # x, y, z, w

    def is_finite(self) -> bool:
        return all(math.isfinite(v) for v in self.translation + self.rotation)

    def normalized(self) -> "Transform":
        """With a unit quaternion; raises ValueError for a zero (uninitialised) one."""
        n = math.sqrt(sum(v * v for v in self.rotation))
        if not n > 1e-9:
            raise ValueError(f"rotation {self.rotation} is not a quaternion (norm 0)")
        return Transform(self.translation, tuple(v / n for v in self.rotation))  # type: ignore[arg-type]

    def rotate(self, v: tuple[float, float, float]) -> tuple[float, float, float]:
        qx, qy, qz, qw = self.rotation
        # v' = v + 2w (q x v) + 2 q x (q x v)
        cx, cy, cz = qy * v[2] - qz * v[1], qz * v[0] - qx * v[2], qx * v[1] - qy * v[0]
        ccx, ccy, ccz = qy * cz - qz * cy, qz * cx - qx * cz, qx * cy - qy * cx
        return (v[0] + 2 * (qw * cx + ccx), v[1] + 2 * (qw * cy + ccy), v[2] + 2 * (qw * cz + ccz))

    def __mul__(self, other: "Transform") -> "Transform":
        """self (a <- b) * other (b <- c) = a <- c."""
        r = self.rotate(other.translation)
        t = (self.translation[0] + r[0], self.translation[1] + r[1], self.translation[2] + r[2])
        return Transform(t, _qmul(self.rotation, other.rotation))

    def inverse(self) -> "Transform":
        qx, qy, qz, qw = self.rotation
        inv = Transform((0.0, 0.0, 0.0), (-qx, -qy, -qz, qw))
        t = inv.rotate(self.translation)
        return Transform((-t[0], -t[1], -t[2]), inv.rotation)

    @property
    def yaw(self) -> float:
        x, y, z, w = self.rotation
        return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def _qmul(a, b) -> tuple[float, float, float, float]:
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz)


def slerp(a: tuple[float, float, float, float], b: tuple[float, float, float, float],
          f: float) -> tuple[float, float, float, float]:
    """Spherical interpolation of unit quaternions (the shorter arc), f in [0, 1]."""
    dot = sum(x * y for x, y in zip(a, b))
    if dot < 0.0:                       # q and -q are the same rotation: take the short way
        b, dot = tuple(-v for v in b), -dot
    if dot > 0.9995:                    # nearly the same: lerp, then normalise
        q = tuple(x + f * (y - x) for x, y in zip(a, b))
    else:
        theta = math.acos(min(1.0, dot))
        s = math.sin(theta)
        wa, wb = math.sin((1.0 - f) * theta) / s, math.sin(f * theta) / s
        q = tuple(wa * x + wb * y for x, y in zip(a, b))
    n = math.sqrt(sum(v * v for v in q))
    return tuple(v / n for v in q)      # type: ignore[return-value]


def interpolate(a: Transform, b: Transform, f: float) -> Transform:
    t = tuple(x + f * (y - x) for x, y in zip(a.translation, b.translation))
    return Transform(t, slerp(a.rotation, b.rotation, f))  # type: ignore[arg-type]


@dataclass(frozen=True)
class StampedTransform:
    """target_frame <- source_frame at ``stamp`` (0: static only), as tf2's TransformStamped."""

    frame_id: str            # target
    child_frame_id: str      # source
    stamp: float
    transform: Transform


def planar_pose(found: StampedTransform) -> Pose:
    """The memory's pose of the source frame in the target frame: x, y, z and the yaw."""
    x, y, z = found.transform.translation
    return Pose(x, y, z, found.transform.yaw, found.frame_id)


# -- the buffer -------------------------------------------------------------------------------
@dataclass
class _Edge:
    parent: str
    static: bool
    stamps: list[float] = field(default_factory=list)
    transforms: list[Transform] = field(default_factory=list)


def _time(t: float) -> str:
    return f"{t:.9f}"


def strip_slash(frame_id: str) -> str:
    """``/odom`` -> ``odom``: tf2 drops a leading slash from every frame id."""
    return frame_id[1:] if isinstance(frame_id, str) and frame_id.startswith("/") else frame_id


class TransformBuffer:
    """tf2_ros.Buffer's lookup semantics without ROS; thread-safe."""

    def __init__(self, cache_time_s: float = DEFAULT_CACHE_TIME_S, extrapolation_tolerance_s: float = 0.0):
        if not cache_time_s > 0 or extrapolation_tolerance_s < 0:
            raise ValueError("cache_time_s must be > 0 and extrapolation_tolerance_s >= 0")
        self.cache_time_s, self.tolerance_s = cache_time_s, extrapolation_tolerance_s
        self._edges: dict[str, _Edge] = {}
        self._parents: set[str] = set()
        self._lock = threading.Lock()
        self.reparented: list[tuple[str, str, str]] = []   # (child, old parent, new parent), for a warning

    # -- writing --------------------------------------------------------------------------
    def set_transform(self, parent: str, child: str, stamp: float, transform: Transform,
                      static: bool = False) -> bool:
        """Add parent <- child at ``stamp``. False (not stored) for data older than the cache
        behind the edge's newest sample or a repeated time (tf2 ignores both). Raises
        ValueError for NaN/inf values, an invalid quaternion, empty or equal frame ids. A leading
        '/' is dropped (ROS 1 style ids; tf2 does the same)."""
        parent, child = strip_slash(parent), strip_slash(child)
        if not parent or not child:
            raise ValueError("frame ids cannot be empty")
        if parent == child:
            raise ValueError(f"the child frame and the parent frame are the same ({child!r})")
        if not (transform.is_finite() and math.isfinite(stamp)):
            raise ValueError(f"NaN/inf in the transform {parent} <- {child} at {stamp}")
        transform = transform.normalized()
        with self._lock:
            edge = self._edges.get(child)
            if edge is not None and (edge.parent != parent or edge.static != static):
                if edge.parent != parent:
                    self.reparented.append((child, edge.parent, parent))
                    del self.reparented[:-10]
                edge = None                 # a new parent (or kind): the old samples describe another tree
            if edge is None:
                edge = self._edges[child] = _Edge(parent, static)
                self._parents = {e.parent for e in self._edges.values()}
            if static:
                edge.stamps, edge.transforms = [stamp], [transform]
                return True
            if edge.stamps and stamp < edge.stamps[-1] - self.cache_time_s:
                return False                # TF_OLD_DATA
            i = bisect.bisect_left(edge.stamps, stamp)
            if i < len(edge.stamps) and edge.stamps[i] == stamp:
                return False                # TF_REPEATED_DATA
            edge.stamps.insert(i, stamp)
            edge.transforms.insert(i, transform)
            oldest = edge.stamps[-1] - self.cache_time_s
            drop = bisect.bisect_left(edge.stamps, oldest)
            if drop:
                del edge.stamps[:drop], edge.transforms[:drop]
            return True

    def clear(self) -> None:
        """Forget everything (tf2_ros does on a jump back in time, e.g. a bag played again)."""
        with self._lock:
            self._edges.clear()
            self._parents = set()

    # -- reading --------------------------------------------------------------------------
    def frames(self) -> list[str]:
        with self._lock:
            return sorted(set(self._edges) | self._parents)

    def _exists(self, frame: str) -> bool:
        return frame in self._edges or frame in self._parents

    def _validate(self, frame: str, arg: str) -> None:
        if not frame:
            raise InvalidFrameError(f"Invalid argument passed to lookupTransform argument {arg} in tf2 "
                                    "frame_ids cannot be empty")
        if not self._exists(frame):
            raise FrameLookupError(f'"{frame}" passed to lookupTransform argument {arg} does not exist. ')

    def _chain(self, frame: str) -> list[str]:
        """frame, its parent, ... up to its root."""
        chain = [frame]
        while chain[-1] in self._edges:
            chain.append(self._edges[chain[-1]].parent)
            if len(chain) > MAX_GRAPH_DEPTH:
                raise TransformError(f"The tf tree is invalid because it contains a loop (at {frame!r})")
        return chain

    def _path(self, target: str, source: str) -> tuple[list[str], list[str]]:
        """Children on the way up from source and from target to their common ancestor."""
        up_source, up_target = self._chain(source), self._chain(target)
        on_source = {f: i for i, f in enumerate(up_source)}
        for j, frame in enumerate(up_target):
            if frame in on_source:
                return up_source[:on_source[frame]], up_target[:j]
        raise ConnectivityError(f"Could not find a connection between '{target}' and '{source}' because they "
                                "are not part of the same tree.Tf has two or more unconnected trees.")

    def _at(self, child: str, t: float) -> Transform:
        edge = self._edges[child]
        if edge.static:
            return edge.transforms[0]
        stamps, tol = edge.stamps, self.tolerance_s
        i = bisect.bisect_left(stamps, t)
        if i < len(stamps) and stamps[i] == t:
            return edge.transforms[i]
        if 0 < i < len(stamps):
            t0, t1 = stamps[i - 1], stamps[i]
            return interpolate(edge.transforms[i - 1], edge.transforms[i], (t - t0) / (t1 - t0))
        if i == 0 and stamps[0] - t <= tol:
            return edge.transforms[0]
        if i == len(stamps) and t - stamps[-1] <= tol:
            return edge.transforms[-1]
        if len(stamps) == 1:
            raise ExtrapolationError(f"Lookup would require extrapolation at time {_time(t)}, but only time "
                                     f"{_time(stamps[0])} is in the buffer", "single", t, stamps[0])
        if i == 0:
            raise ExtrapolationError(f"Lookup would require extrapolation into the past.  Requested time {_time(t)} "
                                     f"but the earliest data is at time {_time(stamps[0])}", "past", t, stamps[0])
        raise ExtrapolationError(f"Lookup would require extrapolation into the future.  Requested time {_time(t)} "
                                 f"but the latest data is at time {_time(stamps[-1])}", "future", t, stamps[-1])

    def _latest_common(self, children: list[str]) -> float:
        dynamic = [self._edges[c].stamps[-1] for c in children if not self._edges[c].static]
        return min(dynamic) if dynamic else 0.0

    def latest_common_time(self, target_frame: str, source_frame: str) -> float:
        """The newest time every dynamic edge between the frames has data for (0: all static)."""
        target_frame, source_frame = strip_slash(target_frame), strip_slash(source_frame)
        with self._lock:
            self._validate(target_frame, "target_frame")
            self._validate(source_frame, "source_frame")
            up_source, up_target = self._path(target_frame, source_frame)
            return self._latest_common(up_source + up_target)

    def lookup_transform(self, target_frame: str, source_frame: str, stamp: float = 0.0) -> StampedTransform:
        """target_frame <- source_frame at ``stamp`` (UNIX seconds; 0 = the latest common time):
        p_target = result.transform * p_source."""
        target_frame, source_frame = strip_slash(target_frame), strip_slash(source_frame)
        if target_frame == source_frame and target_frame:
            return StampedTransform(target_frame, source_frame, stamp, Transform())
        with self._lock:
            self._validate(target_frame, "target_frame")
            self._validate(source_frame, "source_frame")
            up_source, up_target = self._path(target_frame, source_frame)
            t = self._latest_common(up_source + up_target) if stamp == 0.0 else stamp
            try:
                to_ancestor_from_source = Transform()
                for child in up_source:            # ancestor <- ... <- source
                    to_ancestor_from_source = self._at(child, t) * to_ancestor_from_source
                to_ancestor_from_target = Transform()
                for child in up_target:
                    to_ancestor_from_target = self._at(child, t) * to_ancestor_from_target
            except ExtrapolationError as exc:
                raise ExtrapolationError(f"{exc}, when looking up transform from frame [{source_frame}] to frame "
                                         f"[{target_frame}]", exc.direction, exc.requested, exc.available) from None
        return StampedTransform(target_frame, source_frame, t,
                                to_ancestor_from_target.inverse() * to_ancestor_from_source)

    def can_transform(self, target_frame: str, source_frame: str, stamp: float = 0.0) -> bool:
        try:
            self.lookup_transform(target_frame, source_frame, stamp)
            return True
        except TransformError:
            return False

    def edge_span(self, child: str) -> Optional[tuple[float, float]]:
        """(oldest, newest) sample time of a dynamic edge; None when unknown or static."""
        with self._lock:
            edge = self._edges.get(child)
            if edge is None or edge.static or not edge.stamps:
                return None
            return edge.stamps[0], edge.stamps[-1]
