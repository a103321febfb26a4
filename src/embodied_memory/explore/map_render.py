"""Exploration maps as images, for an MLLM (frontier pruning prompts) and for people: black
boundaries, grey explored space, green reachable space, numbered red frontiers, blue arrows
for the camera poses of retrieved observations, the robot in orange. North (+y) is up."""
from __future__ import annotations

import math
from typing import Iterable, Optional, Sequence

import cv2
import numpy as np

from .frontiers import Frontier
from .occupancy import FREE, OCCUPIED, UNKNOWN, OccupancyGrid

WHITE, GREY, BLACK, GREEN = (255, 255, 255), (170, 170, 170), (0, 0, 0), (120, 200, 120)
RED, BLUE, ORANGE = (30, 30, 220), (200, 90, 20), (0, 140, 255)


def known_box(values: np.ndarray, margin: int) -> tuple[int, int, int, int]:
    rr, cc = np.nonzero(values != UNKNOWN)
    if rr.size == 0:
        return 0, values.shape[0], 0, values.shape[1]
    return (max(0, rr.min() - margin), min(values.shape[0], rr.max() + margin + 1),
            max(0, cc.min() - margin), min(values.shape[1], cc.max() + margin + 1))


def render_map(grid: OccupancyGrid, reachable: Optional[np.ndarray] = None, frontiers: Sequence[Frontier] = (),
               poses: Iterable[tuple[float, float, float]] = (), robot: Optional[tuple[float, float, float]] = None,
               scale: int = 4, crop: Optional[tuple[int, int, int, int]] = None) -> np.ndarray:
    """BGR image of the map; ``crop`` = (row0, row1, col0, col1) to draw two maps alike."""
    values = grid.values()
    r0, r1, c0, c1 = crop or known_box(values, margin=10)
    img = np.full((r1 - r0, c1 - c0, 3), WHITE, np.uint8)
    sub = values[r0:r1, c0:c1]
    img[sub == FREE] = GREY
    if reachable is not None:
        img[reachable[r0:r1, c0:c1] & (sub == FREE)] = GREEN
    img[sub == OCCUPIED] = BLACK
    img = cv2.resize(img[::-1], None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST)

    def px(x: float, y: float) -> tuple[int, int]:
        row, col = grid.to_cell(x, y)
        return int((col - c0 + 0.5) * scale), int((r1 - 1 - row + 0.5) * scale)

    def arrow(x, y, yaw, colour, length=0.6):
        a, b = px(x, y), px(x + length * math.cos(yaw), y + length * math.sin(yaw))
        cv2.arrowedLine(img, a, b, colour, 2, tipLength=0.4)

    for x, y, yaw in poses:
        arrow(x, y, yaw, BLUE)
    for f in frontiers:
        centre = px(f.x, f.y)
        cv2.circle(img, centre, max(4, scale * 2), RED, -1)
        cv2.putText(img, str(f.frontier_id), (centre[0] + 6, centre[1] - 6), cv2.FONT_HERSHEY_SIMPLEX, 0.5, RED, 2)
    if robot is not None:
        cv2.circle(img, px(robot[0], robot[1]), max(4, scale * 2), ORANGE, -1)
        arrow(*robot, ORANGE)
    return img


LEGEND = (("wall / obstacle", BLACK), ("explored", GREY), ("reachable", GREEN), ("frontier", RED),
          ("recalled view", BLUE), ("robot", ORANGE))


def with_legend(img: np.ndarray, entries: Sequence[tuple[str, tuple[int, int, int]]] = LEGEND) -> np.ndarray:
    """``img`` with a key to its colours below it (for people; a model's prompt says them in words)."""
    row_h, swatch, pad = 18, 12, 6
    per_row = max(1, img.shape[1] // 130)
    rows = -(-len(entries) // per_row)
    strip = np.full((rows * row_h + pad, max(img.shape[1], 130), 3), WHITE, np.uint8)
    for i, (text, colour) in enumerate(entries):
        x, y = pad + (i % per_row) * 130, pad + (i // per_row) * row_h
        cv2.rectangle(strip, (x, y), (x + swatch, y + swatch), colour, -1)
        cv2.rectangle(strip, (x, y), (x + swatch, y + swatch), BLACK, 1)
        cv2.putText(strip, text, (x + swatch + 4, y + swatch - 1), cv2.FONT_HERSHEY_SIMPLEX, 0.38, BLACK, 1)
    if img.shape[1] < strip.shape[1]:
        img = cv2.copyMakeBorder(img, 0, 0, 0, strip.shape[1] - img.shape[1], cv2.BORDER_CONSTANT, value=WHITE)
    return np.vstack([img, strip])

