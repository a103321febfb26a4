"""The physical space of an episode: a 2D occupancy grid built from depth images and camera poses.

Depth follows REP 118 (metres along the optical axis, 0 / NaN / inf = no return). Each depth
image becomes a horizontal scan: per pixel column, the nearest point between
``min_obstacle_height`` and ``max_obstacle_height`` above the floor is an obstacle; the cells
from the camera up to it (or up to ``max_range`` when the column sees nothing closer) are free.
Cells keep log-odds, so a person walking through does not leave a permanent wall.

Grid convention (as nav_msgs/OccupancyGrid): row 0 is the lowest y; cell (row, col) covers
x in [origin_x + col * res, +res), y in [origin_y + row * res, +res). Values: -1 unknown, 0 free,
100 occupied.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

UNKNOWN, FREE, OCCUPIED = -1, 0, 100

_L_FREE, _L_OCC, _L_MIN, _L_MAX = -0.4, 0.85, -2.0, 3.5
_OCC_THRESHOLD, _FREE_THRESHOLD = 0.5, -0.3


@dataclass(frozen=True)
class CameraModel:
    """Pinhole intrinsics of the depth camera (sensor_msgs/CameraInfo K)."""

    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int
    pitch: float = 0.0                       # radians, positive = looking up (the camera mount's tilt)

    @classmethod
    def from_fov(cls, width: int, height: int, fov_y_deg: float, pitch: float = 0.0) -> "CameraModel":
        f = (height / 2) / math.tan(math.radians(fov_y_deg) / 2)
        return cls(f, f, (width - 1) / 2, (height - 1) / 2, width, height, pitch)

    def to_body(self, u, v, depth):
        """Pixels with depth -> (forward, left, up) metres relative to the camera, level frame."""
        down = (np.asarray(v, float) - self.cy) * depth / self.fy
        cp, sp = math.cos(self.pitch), math.sin(self.pitch)
        return depth * cp + down * sp, -(np.asarray(u, float) - self.cx) * depth / self.fx, depth * sp - down * cp

    def to_pixel(self, forward, left, up):
        """Body-frame points (forward, left, up relative to the camera) -> (u, v, depth)."""
        cp, sp = math.cos(self.pitch), math.sin(self.pitch)
        depth = np.asarray(forward, float) * cp + np.asarray(up, float) * sp
        down = np.asarray(forward, float) * sp - np.asarray(up, float) * cp
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.cx - self.fx * np.asarray(left, float) / depth, self.cy + self.fy * down / depth, depth


@dataclass(frozen=True)
class GridParams:
    resolution: float = 0.1                  # metres per cell
    size_m: float = 40.0                     # square grid side
    origin_x: float = -20.0                  # lower-left corner of the grid in the map frame
    origin_y: float = -20.0
    max_range: float = 6.0                   # depth beyond this is not trusted for obstacles
    min_obstacle_height: float = 0.1         # above the floor
    max_obstacle_height: float = 1.8
    column_stride: int = 2                   # use every n-th pixel column
    row_stride: int = 4
    search_range: float = 3.5                # cells seen closer than this count as searched for objects

    def __post_init__(self):
        if not (self.resolution > 0 and self.size_m > self.resolution and self.max_range > 0):
            raise ValueError("occupancy grid: resolution, size_m and max_range must be positive")
        if self.min_obstacle_height >= self.max_obstacle_height:
            raise ValueError("occupancy grid: min_obstacle_height must be below max_obstacle_height")


class OccupancyGrid:
    def __init__(self, params: GridParams = GridParams()):
        self.params = params
        self.resolution = params.resolution
        self.origin = (params.origin_x, params.origin_y)
        n = int(round(params.size_m / params.resolution))
        self.log_odds = np.zeros((n, n), np.float32)
        self.observed = np.zeros((n, n), bool)
        self.searched = np.zeros((n, n), bool)

    @property
    def shape(self) -> tuple[int, int]:
        return self.log_odds.shape

    # -- coordinates ------------------------------------------------------------------------
    def to_cell(self, x, y):
        """Map-frame metres -> (row, col) integer arrays (may fall outside the grid)."""
        col = np.floor((np.asarray(x, float) - self.origin[0]) / self.resolution).astype(np.int64)
        row = np.floor((np.asarray(y, float) - self.origin[1]) / self.resolution).astype(np.int64)
        return row, col

    def to_world(self, row, col):
        """Cell centres in the map frame."""
        return (self.origin[0] + (np.asarray(col) + 0.5) * self.resolution,
                self.origin[1] + (np.asarray(row) + 0.5) * self.resolution)

    def inside(self, row, col):
        h, w = self.shape
        return (row >= 0) & (row < h) & (col >= 0) & (col < w)

    # -- integration ------------------------------------------------------------------------
    def integrate_depth(self, depth: np.ndarray, x: float, y: float, camera_height: float, yaw: float,
                        camera: CameraModel) -> int:
        """Fuse one depth image taken by a level camera at (x, y, camera_height) looking along
        ``yaw``. Returns the number of cells updated. Non-finite poses are rejected."""
        if not all(math.isfinite(v) for v in (x, y, camera_height, yaw)):
            raise ValueError("integrate_depth: the camera pose must be finite")
        depth = np.asarray(depth, np.float32)
        if depth.ndim == 3:
            depth = depth[..., 0]
        if depth.shape != (camera.height, camera.width):
            raise ValueError(f"integrate_depth: depth is {depth.shape[1]}x{depth.shape[0]}, camera info says "
                             f"{camera.width}x{camera.height}")
        p = self.params
        cols = np.arange(0, camera.width, p.column_stride)
        rows = np.arange(0, camera.height, p.row_stride)
        d = depth[np.ix_(rows, cols)]
        valid = np.isfinite(d) & (d > 0.05)
        d = np.where(valid, d, np.nan)
        fwd, left, up = camera.to_body(cols[None, :], rows[:, None], d)
        up = up + camera_height
        rng = np.hypot(fwd, left)
        obstacle = valid & (up >= p.min_obstacle_height) & (up <= p.max_obstacle_height) & (rng <= p.max_range)
        seen_far = valid & (rng > p.max_range)
        # per column: the nearest obstacle, else max_range when the column sees past it
        obs_rng = np.where(obstacle, rng, np.inf).min(axis=0)
        free_rng = np.where(np.isfinite(obs_rng), obs_rng, np.where(seen_far.any(axis=0), p.max_range, 0.0))
        # bearing of each column's nearest point (the column's mean bearing when it sees nothing)
        col_left = np.where(obstacle, left, np.nan)
        col_fwd = np.where(obstacle, fwd, np.nan)
        nearest = np.argmin(np.where(obstacle, rng, np.inf), axis=0)
        idx = np.arange(len(cols))
        fallback = np.arctan2(-(cols - camera.cx) / camera.fx, 1.0)
        hit_bearing = np.arctan2(col_left[nearest, idx], col_fwd[nearest, idx])
        bearing = yaw + np.where(np.isfinite(obs_rng), hit_bearing, fallback)
        c, s = math.cos(yaw), math.sin(yaw)
        updated = 0
        # free cells along each ray, stopping half a cell before the obstacle
        step = self.resolution / 2
        n_steps = int(p.max_range / step) + 1
        t = np.arange(n_steps) * step
        ray_t = t[None, :]
        keep = ray_t < (free_rng[:, None] - self.resolution * 0.75)
        fx = x + np.cos(bearing)[:, None] * ray_t
        fy = y + np.sin(bearing)[:, None] * ray_t
        updated += self._update(fx[keep], fy[keep], _L_FREE)
        close = keep & (ray_t <= p.search_range)
        row, col = self.to_cell(fx[close], fy[close])
        ok = self.inside(row, col)
        self.searched[row[ok], col[ok]] = True
        # obstacle cells: every obstacle point in range
        ox = x + c * fwd[obstacle] - s * left[obstacle]
        oy = y + s * fwd[obstacle] + c * left[obstacle]
        updated += self._update(ox, oy, _L_OCC)
        return updated

    def _update(self, xs: np.ndarray, ys: np.ndarray, delta: float) -> int:
        if xs.size == 0:
            return 0
        row, col = self.to_cell(xs, ys)
        ok = self.inside(row, col)
        flat = np.unique(row[ok] * self.shape[1] + col[ok])      # one vote per cell per image
        lo = self.log_odds.reshape(-1)
        lo[flat] = np.clip(lo[flat] + delta, _L_MIN, _L_MAX)
        self.observed.reshape(-1)[flat] = True
        return int(flat.size)

    def mark_free_disc(self, x: float, y: float, radius: float) -> None:
        """The footprint of the robot is free (it stands there)."""
        row, col = self.to_cell(x, y)
        r = int(math.ceil(radius / self.resolution))
        rr, cc = np.mgrid[-r:r + 1, -r:r + 1]
        disc = rr ** 2 + cc ** 2 <= r ** 2
        rows, cols = rr[disc] + row, cc[disc] + col
        ok = self.inside(rows, cols)
        self.log_odds[rows[ok], cols[ok]] = np.minimum(self.log_odds[rows[ok], cols[ok]], _FREE_THRESHOLD - 0.1)
        self.observed[rows[ok], cols[ok]] = True

    # -- views ------------------------------------------------------------------------------
    def values(self) -> np.ndarray:
        """int8 grid: -1 unknown, 0 free, 100 occupied (nav_msgs/OccupancyGrid data)."""
        out = np.full(self.shape, UNKNOWN, np.int8)
        out[self.observed & (self.log_odds < _FREE_THRESHOLD)] = FREE
        out[self.observed & (self.log_odds > _OCC_THRESHOLD)] = OCCUPIED
        return out

    def explored_area_m2(self) -> float:
        return float((self.values() != UNKNOWN).sum()) * self.resolution ** 2

    @classmethod
    def from_values(cls, values: np.ndarray, resolution: float, origin: tuple[float, float]) -> "OccupancyGrid":
        """A grid from stored values (a previous episode's map, or a map server's)."""
        values = np.asarray(values)
        if values.ndim != 2 or min(values.shape) < 2:
            raise ValueError("from_values: a 2D grid is expected")
        grid = cls(GridParams(resolution=resolution, size_m=2 * resolution, origin_x=origin[0], origin_y=origin[1]))
        grid.observed = values != UNKNOWN
        grid.searched = np.zeros(values.shape, bool)
        grid.log_odds = np.where(values == OCCUPIED, _L_MAX, np.where(values == FREE, _L_MIN, 0.0)).astype(np.float32)
        return grid
