"""A semantic value map: how much each map cell looks like "towards the target", from what the
views showed (VLFM, Yokoyama et al. 2024, with text similarity in place of BLIP-2).

Each view has one score (e.g. the cosine similarity of its description to the target) and
paints it on the cells its camera saw: the horizontal field of view, out to ``max_range``,
stopped by the first occupied cell of the occupancy grid. Cells near the optical axis are
painted with more confidence (``cos^2`` of the angle, scaled to the half field of view), and a
cell seen several times keeps the confidence-weighted average:
``v = (c_old v_old + c s) / (c_old + c)``, ``c = (c_old^2 + c^2) / (c_old + c)``.
Frontiers then carry the value of the cells around them: a frontier at the edge of a view whose
description named the target is worth more than one behind a blank wall.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import ndimage

from .occupancy import OCCUPIED, OccupancyGrid


class SemanticValueMap:
    def __init__(self, shape: tuple[int, int], resolution: float, origin: tuple[float, float],
                 max_range: float = 6.0):
        if not (resolution > 0 and max_range > 0):
            raise ValueError("value map: resolution and max_range must be positive")
        self.resolution, self.origin, self.max_range = resolution, origin, max_range
        self.value = np.zeros(shape, np.float32)
        self.confidence = np.zeros(shape, np.float32)

    @classmethod
    def like(cls, grid: OccupancyGrid, max_range: float = 6.0) -> "SemanticValueMap":
        return cls(grid.shape, grid.resolution, grid.origin, max_range)

    def add_view(self, grid: OccupancyGrid, x: float, y: float, yaw: float, hfov: float, score: float) -> int:
        """Paint ``score`` over the cells the view saw; returns how many cells were painted."""
        if not all(math.isfinite(v) for v in (x, y, yaw, hfov, score)) or hfov <= 0:
            raise ValueError("value map: a view needs a finite pose, field of view and score")
        n_rays = max(3, int(math.degrees(hfov) / 1.5))
        offsets = np.linspace(-hfov / 2, hfov / 2, n_rays)
        step = self.resolution / 2
        t = np.arange(1, int(self.max_range / step) + 1) * step
        xs = x + np.cos(yaw + offsets)[:, None] * t[None, :]
        ys = y + np.sin(yaw + offsets)[:, None] * t[None, :]
        rows, cols = grid.to_cell(xs, ys)
        inside = grid.inside(rows, cols)
        rows, cols = np.where(inside, rows, 0), np.where(inside, cols, 0)
        blocked = (grid.values()[rows, cols] == OCCUPIED) | ~inside
        visible = np.cumsum(blocked, axis=1) == 0          # up to (not including) the first wall
        conf = np.repeat(np.cos(offsets / (hfov / 2) * (math.pi / 2)) ** 2, t.size).reshape(visible.shape)
        if not visible.any():
            return 0
        flat = (rows * self.value.shape[1] + cols)[visible]
        conf = conf[visible]
        order = np.lexsort((-conf, flat))                   # each cell once, at its highest confidence
        flat, conf = flat[order], conf[order]
        first = np.r_[True, flat[1:] != flat[:-1]]
        flat, conf = flat[first], np.maximum(conf[first], 1e-3)
        v, c = self.value.reshape(-1), self.confidence.reshape(-1)
        c_old, v_old = c[flat], v[flat]
        total = c_old + conf
        v[flat] = (c_old * v_old + conf * score) / total
        c[flat] = (c_old ** 2 + conf ** 2) / total
        return int(flat.size)

    def value_of(self, cells, radius_cells: int = 3) -> float:
        """The best value within ``radius_cells`` of any of the cells (a frontier's cells lie on
        the known side of the boundary; the views painted the cells around them). NaN when no
        view covered them."""
        cells = np.asarray(cells, int).reshape(-1, 2)
        if cells.size == 0:
            return float("nan")
        h, w = self.value.shape
        r0, r1 = max(0, cells[:, 0].min() - radius_cells), min(h, cells[:, 0].max() + radius_cells + 1)
        c0, c1 = max(0, cells[:, 1].min() - radius_cells), min(w, cells[:, 1].max() + radius_cells + 1)
        near = np.zeros((r1 - r0, c1 - c0), bool)
        near[cells[:, 0] - r0, cells[:, 1] - c0] = True
        near = ndimage.binary_dilation(near, iterations=radius_cells) if radius_cells else near
        seen = near & (self.confidence[r0:r1, c0:c1] > 0)
        return float(self.value[r0:r1, c0:c1][seen].max()) if seen.any() else float("nan")
