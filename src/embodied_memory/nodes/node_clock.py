"""A node's notion of "now": ROS time from the node's clock, which follows /clock when the
node runs with ``use_sim_time: true`` (a replayed bag, a simulator) and the system clock
otherwise.

Two kinds of time, never mixed:

- **robot time** (the node clock): message stamps, question time ("today"), explore episode ids,
  freshness checks against observation stamps, and durations of what the robot does (a
  navigation goal's timeout, an exploration's ``max_duration_s``): :func:`now_s`,
  :func:`now_msg`, :class:`RobotDeadline`.
- **wall time** (``time.monotonic``): how long we wait for a network peer, a service, an HTTP
  endpoint or another thread, and housekeeping timers (diagnostics, resends, flushes), which
  must keep running when /clock stops: :class:`WallDeadline`, :func:`steady_clock`.
"""
from __future__ import annotations

import time
from typing import Callable, Protocol

from builtin_interfaces.msg import Time
from rclpy.clock import Clock, ClockType
from rclpy.node import Node

# a node clock that has not moved for this long (a paused simulator, a replay that ended) lets
# wall time count towards a RobotDeadline, so that nothing waits forever
CLOCK_STALL_S = 1.0
NO_CLOCK_YET = "use_sim_time is set but no /clock received yet; pass as_of"


def now_s(node: Node) -> float:
    """The node clock in seconds since the epoch (0.0 under sim time before the first /clock)."""
    return node.get_clock().now().nanoseconds * 1e-9


def now_msg(node: Node) -> Time:
    return node.get_clock().now().to_msg()


def uses_sim_time(node: Node) -> bool:
    return bool(getattr(node.get_clock(), "ros_time_is_active", False))


def waiting_for_clock(node: Node) -> bool:
    """use_sim_time is set and no /clock message has arrived yet (the clock reads 0)."""
    return uses_sim_time(node) and node.get_clock().now().nanoseconds == 0


def steady_clock() -> Clock:
    """For timers that must tick in wall time whatever use_sim_time says."""
    return Clock(clock_type=ClockType.STEADY_TIME)


class Deadline(Protocol):
    def expired(self) -> bool: ...

    def elapsed(self) -> float: ...


class WallDeadline:
    """``seconds`` of wall time (time.monotonic): waits on a peer, a service, a thread."""

    def __init__(self, seconds: float, wall: Callable[[], float] = time.monotonic):
        self._wall, self.seconds = wall, seconds
        self._start = wall()

    def elapsed(self) -> float:
        return self._wall() - self._start

    def expired(self) -> bool:
        return self.elapsed() > self.seconds


class RobotDeadline:
    """``seconds`` of robot time: the node clock's elapsed time (a simulator running at half
    speed takes twice the wall time).  Without use_sim_time it is wall time (monotonic, immune
    to system clock jumps).  While the node clock stands still for more than
    :data:`CLOCK_STALL_S` (no /clock yet, a paused simulation, a replay that ended) wall time
    counts instead, so a deadline always expires."""

    def __init__(self, node: Node, seconds: float, wall: Callable[[], float] = time.monotonic):
        self.seconds = seconds
        self._clock = node.get_clock()
        self._sim = uses_sim_time(node)
        self._wall = wall
        self._wall_start = self._last_move_wall = wall()
        self._clock_start = self._last_clock = self._clock.now().nanoseconds
        self._stalled_s = 0.0              # wall seconds counted for closed stalls

    def elapsed(self) -> float:
        w = self._wall()
        if not self._sim:
            return w - self._wall_start
        c = self._clock.now().nanoseconds
        if c < self._clock_start or self._clock_start == 0:
            self._clock_start = c          # the first /clock, or time went back (a replay restarted)
        if c != self._last_clock:          # the clock moved: close the stall that ended, if any
            self._stalled_s += max(0.0, w - self._last_move_wall - CLOCK_STALL_S)
            self._last_clock, self._last_move_wall = c, w
        ongoing = max(0.0, w - self._last_move_wall - CLOCK_STALL_S)
        return (self._last_clock - self._clock_start) * 1e-9 + self._stalled_s + ongoing

    def expired(self) -> bool:
        return self.elapsed() > self.seconds
