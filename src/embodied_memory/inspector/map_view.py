"""The map page's geometry: stored positions (metres, the memory's fixed frame) to SVG pixels,
the occupancy grid as a PNG, colours by time or by person."""
from __future__ import annotations

import colorsys
import hashlib
from dataclasses import dataclass
from typing import Optional

import cv2
import numpy as np

SIZE = 800          # the SVG's longer side, pixels
MARGIN_M = 1.0


def person_colour(person: str) -> str:
    hue = int(hashlib.sha1(person.encode()).hexdigest()[:4], 16) / 0xFFFF
    return _hex(hue)


def time_colour(t: float, t0: float, t1: float) -> str:
    """Early blue to late red."""
    f = 0.0 if t1 <= t0 else (t - t0) / (t1 - t0)
    return _hex(0.66 * (1.0 - f))


def _hex(hue: float) -> str:
    r, g, b = colorsys.hsv_to_rgb(hue, 0.85, 0.85)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


@dataclass
class MapView:
    x0: float
    y0: float
    scale: float         # pixels per metre
    width: int
    height: int
    t0: float = 0.0
    t1: float = 0.0
    grid_box: Optional[tuple[float, float, float, float]] = None   # x, y, w, h in pixels

    @classmethod
    def fit(cls, points: dict, grid: Optional[dict]) -> "MapView":
        xs = [p["x"] for key in ("observations", "sightings", "waypoints") for p in points[key]]
        ys = [p["y"] for key in ("observations", "sightings", "waypoints") for p in points[key]]
        if grid:
            gx, gy = grid["origin"]
            xs += [gx, gx + grid["width"] * grid["resolution"]]
            ys += [gy, gy + grid["height"] * grid["resolution"]]
        if not xs:
            xs, ys = [0.0, 1.0], [0.0, 1.0]
        x0, x1, y0, y1 = min(xs) - MARGIN_M, max(xs) + MARGIN_M, min(ys) - MARGIN_M, max(ys) + MARGIN_M
        scale = SIZE / max(x1 - x0, y1 - y0, 1e-3)
        times = [p["t"] for p in points["observations"]] or [0.0]
        view = cls(x0, y1, scale, max(1, round((x1 - x0) * scale)), max(1, round((y1 - y0) * scale)),
                   min(times), max(times))
        if grid:   # image row 0 is the grid's top (highest y) once flipped by grid_png
            left, top = view.px(gx, gy + grid["height"] * grid["resolution"])
            view.grid_box = (left, top, grid["width"] * grid["resolution"] * scale,
                             grid["height"] * grid["resolution"] * scale)
        return view

    def px(self, x: float, y: float) -> tuple[float, float]:
        """Metres to pixels (y up on the map, down on the screen)."""
        return round((x - self.x0) * self.scale, 1), round((self.y0 - y) * self.scale, 1)

    def colour(self, point: dict, by: str) -> str:
        return person_colour(point.get("person") or "?") if by == "person" else time_colour(point["t"], self.t0, self.t1)

    def time_steps(self, n: int = 5) -> list[tuple[str, float]]:
        """(colour, time) from the earliest to the latest keyframe shown: the legend's ramp."""
        return [(time_colour(t, self.t0, self.t1), t) for t in np.linspace(self.t0, self.t1, n)]

    def scale_bar(self) -> tuple[float, float]:
        """(metres, pixels): a round length near a sixth of the map's width."""
        target = self.width / self.scale / 6.0
        metres = next((m for m in (0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500) if m >= target), 1000)
        return float(metres), round(metres * self.scale, 1)

    @staticmethod
    def grid_png(grid: np.ndarray) -> bytes:
        """nav_msgs/OccupancyGrid values (-1 unknown, 0 free .. 100 occupied), row 0 at the lowest y."""
        img = np.full(grid.shape, 205, np.uint8)
        known = grid >= 0
        img[known] = (255 - (grid[known].astype(np.int32) * 255 // 100)).astype(np.uint8)
        return cv2.imencode(".png", np.flipud(img))[1].tobytes()
