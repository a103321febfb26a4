"""Frontiers: reachable free cells bordering unknown space, clustered (8-connected), one
representative per cluster (the cluster cell nearest to its centroid), clusters smaller than
``min_size`` cells dropped."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from .occupancy import UNKNOWN, OccupancyGrid


@dataclass(frozen=True)
class Frontier:
    frontier_id: int                      # 1-based, as drawn on the map
    x: float                              # representative (a reachable cell), map frame
    y: float
    cell: tuple[int, int]
    size: int                             # cells
    centroid: tuple[float, float]
    cells: tuple[tuple[int, int], ...]


def frontier_cells(values: np.ndarray, reachable: np.ndarray) -> np.ndarray:
    unknown = values == UNKNOWN
    touches = ndimage.binary_dilation(unknown, structure=ndimage.generate_binary_structure(2, 1))
    return reachable & touches


def detect_frontiers(grid: OccupancyGrid, reachable: np.ndarray, min_size: int = 5) -> list[Frontier]:
    """Frontier clusters among the ``reachable`` cells (from :class:`GridPaths`), biggest first."""
    values = grid.values()
    cells = frontier_cells(values, reachable)
    labels, n = ndimage.label(cells, structure=np.ones((3, 3), bool))
    out = []
    for lab in range(1, n + 1):
        rr, cc = np.nonzero(labels == lab)
        if rr.size < min_size:
            continue
        mr, mc = rr.mean(), cc.mean()
        k = int(np.argmin((rr - mr) ** 2 + (cc - mc) ** 2))
        x, y = grid.to_world(rr[k], cc[k])
        cx, cy = grid.to_world(mr, mc)
        out.append((rr.size, (int(rr[k]), int(cc[k])), float(x), float(y), (float(cx), float(cy)),
                    tuple(zip(rr.tolist(), cc.tolist()))))
    out.sort(key=lambda f: -f[0])
    return [Frontier(i + 1, x, y, cell, size, centroid, cells)
            for i, (size, cell, x, y, centroid, cells) in enumerate(out)]
