"""Shortest paths on an occupancy grid: obstacles inflated by the robot radius, 8-connected
moves, Dijkstra over the traversable cells (scipy's csgraph). Also used for the ground-truth
shortest path of SPL."""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
from scipy import ndimage
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import dijkstra

from .occupancy import FREE, OCCUPIED

_MOVES = [(0, 1, 1.0), (1, 0, 1.0), (1, 1, math.sqrt(2)), (1, -1, math.sqrt(2))]


def disc(radius_cells: int) -> np.ndarray:
    r = max(0, int(radius_cells))
    yy, xx = np.mgrid[-r:r + 1, -r:r + 1]
    return xx ** 2 + yy ** 2 <= r ** 2


def traversable(values: np.ndarray, robot_radius_cells: int, unknown_ok: bool = False) -> np.ndarray:
    """Cells the robot's centre may occupy: free (or unknown, when allowed) and farther than the
    robot radius from every occupied cell."""
    occupied = values == OCCUPIED
    inflated = ndimage.binary_dilation(occupied, structure=disc(robot_radius_cells)) if robot_radius_cells else occupied
    base = (values != OCCUPIED) if unknown_ok else (values == FREE)
    return base & ~inflated


class GridPaths:
    """Distances (metres) from one start cell to every traversable cell, and paths back."""

    def __init__(self, passable: np.ndarray, start: tuple[int, int], resolution: float):
        self.shape = passable.shape
        self.resolution = resolution
        h, w = self.shape
        start = self.snap(passable, start)
        self.start = start
        idx = np.arange(h * w).reshape(h, w)
        rows, cols, costs = [], [], []
        for dr, dc, cost in _MOVES:
            r0, r1 = max(0, -dr), h - max(0, dr)
            c0, c1 = max(0, -dc), w - max(0, dc)
            both = passable[r0:r1, c0:c1] & passable[r0 + dr:r1 + dr, c0 + dc:c1 + dc]
            ia = idx[r0:r1, c0:c1][both]
            ib = idx[r0 + dr:r1 + dr, c0 + dc:c1 + dc][both]
            rows += [ia, ib]
            cols += [ib, ia]
            costs += [np.full(ia.size, cost), np.full(ia.size, cost)]
        graph = coo_matrix((np.concatenate(costs), (np.concatenate(rows), np.concatenate(cols))),
                           shape=(h * w, h * w)).tocsr()
        if start is None:
            self.dist = np.full(self.shape, np.inf)
            self._pred = None
            return
        dist, pred = dijkstra(graph, directed=False, indices=start[0] * w + start[1], return_predecessors=True)
        self.dist = dist.reshape(self.shape) * resolution
        self._pred = pred

    @staticmethod
    def snap(passable: np.ndarray, cell: tuple[int, int], max_cells: int = 8) -> Optional[tuple[int, int]]:
        """The passable cell nearest to ``cell`` (the robot may stand inside an inflated margin)."""
        r, c = cell
        h, w = passable.shape
        if 0 <= r < h and 0 <= c < w and passable[r, c]:
            return (r, c)
        r0, r1, c0, c1 = max(0, r - max_cells), min(h, r + max_cells + 1), max(0, c - max_cells), min(w, c + max_cells + 1)
        rr, cc = np.nonzero(passable[r0:r1, c0:c1])
        if rr.size == 0:
            return None
        k = int(np.argmin((rr + r0 - r) ** 2 + (cc + c0 - c) ** 2))
        return (int(rr[k] + r0), int(cc[k] + c0))

    @property
    def reachable(self) -> np.ndarray:
        return np.isfinite(self.dist)

    def path_to(self, cell: tuple[int, int]) -> list[tuple[int, int]]:
        """Cells from the start to ``cell`` (empty when unreachable)."""
        if self._pred is None or not np.isfinite(self.dist[cell]):
            return []
        w = self.shape[1]
        node, out = cell[0] * w + cell[1], []
        while node >= 0:
            out.append((node // w, node % w))
            node = self._pred[node]
        return out[::-1]


def nearest_cell_within(paths: GridPaths, grid, x: float, y: float, radius: float) -> Optional[tuple[int, int]]:
    """The reachable cell closest to the start (by path) within ``radius`` metres of (x, y)."""
    rows, cols = np.indices(paths.shape)
    wx, wy = grid.to_world(rows, cols)
    d = np.where((np.hypot(wx - x, wy - y) <= radius) & paths.reachable, paths.dist, np.inf)
    k = np.unravel_index(int(np.argmin(d)), d.shape)
    return (int(k[0]), int(k[1])) if np.isfinite(d[k]) else None


def simplify(path: list[tuple[int, int]], spacing: int) -> list[tuple[int, int]]:
    """Every ``spacing``-th cell of a path and its end (the waypoints a base is sent through)."""
    if not path:
        return []
    out = path[spacing::spacing]
    if not out or out[-1] != path[-1]:
        out.append(path[-1])
    return out
