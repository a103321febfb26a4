"""A kinematic simulated base: drives straight to a goal at a set speed inside map bounds."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..types import Pose


@dataclass(frozen=True)
class SimBaseParams:
    speed: float = 1.0                       # m/s
    x_min: float = -50.0
    x_max: float = 50.0
    y_min: float = -50.0
    y_max: float = 50.0
    start_x: float = 0.0
    start_y: float = 0.0


class SimBase:
    def __init__(self, params: SimBaseParams = SimBaseParams()):
        self.params = params
        self.pose = Pose(params.start_x, params.start_y)

    def reachable(self, goal: Pose) -> bool:
        p = self.params
        return goal.is_finite() and p.x_min <= goal.x <= p.x_max and p.y_min <= goal.y <= p.y_max

    def step(self, goal: Pose, dt: float) -> float:
        """Advance ``dt`` seconds towards ``goal``; returns the remaining distance. On arrival
        the base takes the goal's heading (a goal at the current position is a turn in place)."""
        dx, dy = goal.x - self.pose.x, goal.y - self.pose.y
        dist = math.hypot(dx, dy)
        move = min(dist, self.params.speed * dt)
        x, y, yaw = self.pose.x, self.pose.y, self.pose.yaw
        if dist > 1e-9:
            x, y, yaw = x + move * dx / dist, y + move * dy / dist, math.atan2(dy, dx)
        if dist - move <= 1e-6:
            yaw = goal.yaw
        self.pose = Pose(x, y, 0.0, yaw, goal.frame_id)
        return dist - move
