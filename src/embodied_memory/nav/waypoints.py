"""The waypoint table: ids, poses and optional names ("kitchen"), from config or learned."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..config import ConfigError, load_yaml
from ..types import Pose


@dataclass
class Waypoint:
    waypoint_id: str
    pose: Pose
    names: list[str] = field(default_factory=list)


class WaypointTable:
    def __init__(self, waypoints: Optional[list[Waypoint]] = None):
        self._by_id = {w.waypoint_id: w for w in waypoints or []}

    @classmethod
    def from_yaml(cls, path: str | Path) -> "WaypointTable":
        """``waypoints: {kitchen_1: {x: 1.0, y: 2.0, yaw: 0.0, names: [kitchen]}, ...}``"""
        data = load_yaml(path) or {}
        items = data.get("waypoints") if isinstance(data, dict) else None
        if not isinstance(items, dict):
            raise ConfigError(f"{path}: expected a mapping 'waypoints: {{id: {{x, y, yaw, names}}}}'")
        table = []
        for wid, spec in items.items():
            if not isinstance(spec, dict) or not all(isinstance(spec.get(k), (int, float)) for k in ("x", "y")):
                raise ConfigError(f"{path}: waypoints.{wid}: needs numbers x and y")
            unknown = set(spec) - {"x", "y", "z", "yaw", "names", "frame_id"}
            if unknown:
                raise ConfigError(f"{path}: waypoints.{wid}: unknown key(s) {', '.join(sorted(unknown))}")
            table.append(Waypoint(str(wid), Pose(float(spec["x"]), float(spec["y"]), float(spec.get("z", 0.0)),
                                                 float(spec.get("yaw", 0.0)), spec.get("frame_id", "map")),
                                  [str(n) for n in spec.get("names", [])]))
        return cls(table)

    def __len__(self) -> int:
        return len(self._by_id)

    def ids(self) -> list[str]:
        return sorted(self._by_id)

    def learn(self, waypoint_id: str, pose: Pose) -> None:
        """Record (or move) a waypoint, e.g. from GraphNav localisation."""
        names = self._by_id[waypoint_id].names if waypoint_id in self._by_id else []
        self._by_id[waypoint_id] = Waypoint(waypoint_id, pose, names)

    def resolve(self, id_or_name: str) -> Optional[Waypoint]:
        if id_or_name in self._by_id:
            return self._by_id[id_or_name]
        key = id_or_name.strip().lower().replace(" ", "_")
        for w in self._by_id.values():
            if key == w.waypoint_id.lower() or key in (n.lower().replace(" ", "_") for n in w.names):
                return w
        return None

    def label_for(self, x: float, y: float, radius: float) -> str:
        """The id of the nearest waypoint within ``radius`` metres ("" if none): how an
        observation is tagged when no GraphNav localisation says where the robot is."""
        nearest = self.nearest(x, y, radius)
        return nearest.waypoint_id if nearest else ""

    def nearest(self, x: float, y: float, max_distance: float = math.inf) -> Optional[Waypoint]:
        best = min(self._by_id.values(), key=lambda w: math.hypot(w.pose.x - x, w.pose.y - y), default=None)
        if best is None or math.hypot(best.pose.x - x, best.pose.y - y) > max_distance:
            return None
        return best
