"""Region proposals (HIMM / HOV-SG style): masks -> boxes, region embeddings, 3D boxes from depth.

``sam`` (GPU robot): Segment Anything's automatic mask generator, weights from ``sam_weights``;
each region is embedded with the image embedder (CLIP: open-vocabulary), and, with depth and
intrinsics, given an axis-aligned 3D box in the map frame.  ``segments`` (offline, CPU, no
weights): a classical colour segmentation (k-means in Lab, connected components), object-sized
components only; it finds uniformly coloured things (boxes, bins, signs), not what only a
learned model separates.  Its crops embedded with the image embedder serve image-to-region
recall (a goal given as a picture); naming a region in words needs CLIP.  ``none``: no regions.
"""
from __future__ import annotations

from typing import Callable, Optional

import cv2
import numpy as np

from ..types import Pose, Region
from .projection import MAX_DEPTH_M, pixels_to_map
from .weights import configured_file


def box_3d(mask: np.ndarray, depth: np.ndarray, intrinsics: tuple[float, float, float, float], pose: Pose,
           max_depth: float = MAX_DEPTH_M) -> Optional[tuple[tuple[float, float, float], tuple[float, float, float]]]:
    """(centre, size) in the map frame of the depth pixels under ``mask`` (colour pixels; robust
    percentiles); ``depth`` registered to the colour image, at any size (``projection``)."""
    (h, w), (dh, dw) = mask.shape[:2], depth.shape[:2]
    if (dh, dw) != (h, w):
        mask = cv2.resize(mask.astype(np.uint8), (dw, dh), interpolation=cv2.INTER_NEAREST).astype(bool)
    v, u = np.nonzero(mask & (depth > 0.05) & (depth < max_depth))
    if len(u) < 20:
        return None
    return box_of_points(pixels_to_map(u * (w / dw), v * (h / dh), depth[v, u], intrinsics, pose))


Box3D = tuple[tuple[float, float, float], tuple[float, float, float]]


def box_of_points(pts: np.ndarray) -> Box3D:
    """(centre, size) of the axis-aligned box between the 5th and 95th percentiles of (N, 3) points."""
    lo, hi = np.percentile(pts, 5, axis=0), np.percentile(pts, 95, axis=0)
    centre, size = (lo + hi) / 2, hi - lo
    return tuple(float(v) for v in centre), tuple(float(v) for v in size)


class SamRegionProposer:
    name = "sam"

    def __init__(self, weights: str, model_type: str = "vit_h", device: str = "cuda", max_regions: int = 24):
        path = configured_file(weights, "sam_weights", f"region proposer 'sam' ({model_type})")
        try:
            from segment_anything import SamAutomaticMaskGenerator, sam_model_registry
        except ImportError as exc:
            raise RuntimeError("region_proposer 'sam' needs segment-anything (EXTRAS=gpu)") from exc
        model = sam_model_registry[model_type](checkpoint=path).to(device)
        self._generator = SamAutomaticMaskGenerator(model)
        self.max_regions = max_regions

    def propose(self, image: np.ndarray, embedder, depth: Optional[np.ndarray] = None,
                intrinsics: Optional[tuple[float, float, float, float]] = None,
                pose: Optional[Pose] = None, box_of: Optional[Callable[[np.ndarray], Optional[Box3D]]] = None
                ) -> list[Region]:
        """As :meth:`SegmentRegionProposer.propose` (``box_of``: the explorer's pitched camera)."""
        if box_of is None and depth is not None and intrinsics is not None and pose is not None:
            box_of = lambda mask: box_3d(mask, depth, intrinsics, pose)   # noqa: E731
        masks = sorted(self._generator.generate(image[:, :, ::-1]), key=lambda m: -m["area"])[: self.max_regions]
        crops, regions = [], []
        for m in masks:
            x, y, w, h = (int(v) for v in m["bbox"])
            crops.append(image[y:y + max(h, 1), x:x + max(w, 1)])
            region = Region(box=(float(x), float(y), float(x + w), float(y + h)), score=float(m["predicted_iou"]))
            found = box_of(m["segmentation"]) if box_of is not None else None
            if found:
                region.center_3d, region.size_3d = found
            regions.append(region)
        if embedder is not None and crops:
            for region, vec in zip(regions, embedder.embed(crops)):
                region.embedding = vec
        return regions


MAX_CANDIDATES = 64      # segments considered per image (largest first), before the depth check
FLAT_M = 0.08            # with depth: a segment less tall than this is floor or ceiling texture


class SegmentRegionProposer:
    """Object-sized uniformly coloured segments: k-means (``colours``) in Lab on a downscaled
    image, then 8-connected components of each colour; a component is a region when it covers
    ``min_area``-``max_area`` of the image and touches at most one image border (walls, floor
    and ceiling run across the view), and, with depth, stands at least ``FLAT_M`` tall (a floor
    tile does not). Deterministic (seeded)."""
    name = "segments"

    def __init__(self, max_regions: int = 12, colours: int = 8, width: int = 160, min_area: float = 0.004,
                 max_area: float = 0.25, margin: float = 0.1):
        if not (1 <= max_regions <= 64 and 2 <= colours <= 32 and 0 < min_area < max_area <= 1):
            raise ValueError("segments: max_regions 1-64, colours 2-32, 0 < min_area < max_area <= 1")
        self.max_regions, self.colours, self.width = max_regions, colours, width
        self.min_area, self.max_area, self.margin = min_area, max_area, margin

    def boxes(self, image: np.ndarray) -> list[tuple[tuple[int, int, int, int], np.ndarray]]:
        """(x1, y1, x2, y2) in image pixels and the full-size mask of each proposed segment, largest first."""
        h, w = image.shape[:2]
        scale = self.width / w
        small = cv2.resize(image, (self.width, max(1, int(round(h * scale)))), interpolation=cv2.INTER_AREA)
        lab = cv2.cvtColor(cv2.GaussianBlur(small, (3, 3), 0), cv2.COLOR_BGR2LAB).reshape(-1, 3).astype(np.float32)
        cv2.setRNGSeed(0)
        criteria = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 10, 1.0)
        _, labels, _ = cv2.kmeans(lab, self.colours, None, criteria, 1, cv2.KMEANS_PP_CENTERS)
        labels = labels.reshape(small.shape[:2])
        sh, sw = labels.shape
        found = []
        for colour in range(self.colours):
            n, comp, stats, _ = cv2.connectedComponentsWithStats((labels == colour).astype(np.uint8), connectivity=8)
            for i in range(1, n):
                x, y, bw, bh, area = (int(v) for v in stats[i])
                borders = (x == 0) + (y == 0) + (x + bw == sw) + (y + bh == sh)
                if not self.min_area <= area / (sw * sh) <= self.max_area or borders > 1:
                    continue
                found.append((area, x, y, bw, bh, comp == i))
        out = []
        for area, x, y, bw, bh, mask in sorted(found, key=lambda f: -f[0])[:MAX_CANDIDATES]:
            mx, my = self.margin * bw, self.margin * bh
            box = (max(0, int((x - mx) / scale)), max(0, int((y - my) / scale)),
                   min(w, int(np.ceil((x + bw + mx) / scale))), min(h, int(np.ceil((y + bh + my) / scale))))
            out.append((box, cv2.resize(mask.astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST).astype(bool)))
        return out

    def propose(self, image: np.ndarray, embedder, depth: Optional[np.ndarray] = None,
                intrinsics: Optional[tuple[float, float, float, float]] = None,
                pose: Optional[Pose] = None, box_of: Optional[Callable[[np.ndarray], Optional[Box3D]]] = None
                ) -> list[Region]:
        """``box_of(mask)``: the 3D box under a mask for a camera that is not level (the explorer's
        pitched one); by default ``box_3d`` with ``depth``, ``intrinsics`` and ``pose``."""
        if box_of is None and depth is not None and intrinsics is not None and pose is not None:
            box_of = lambda mask: box_3d(mask, depth, intrinsics, pose)   # noqa: E731
        regions, crops = [], []
        for (x1, y1, x2, y2), mask in self.boxes(image):
            region = Region(box=(float(x1), float(y1), float(x2), float(y2)), label="segment",
                            score=float(mask.mean()))
            found = box_of(mask) if box_of is not None else None
            if found and found[1][2] < FLAT_M:           # a floor tile or a patch of ceiling, not a thing
                continue
            if found:
                region.center_3d, region.size_3d = found
            regions.append(region)
            crops.append(image[y1:y2, x1:x2])
            if len(regions) == self.max_regions:
                break
        if embedder is not None and crops:
            for region, vec in zip(regions, embedder.embed(crops)):
                region.embedding = vec
        return regions


REGION_PROPOSERS = ("none", "segments", "sam")


def make_region_proposer(name: str, sam_weights: str = "", sam_model_type: str = "vit_h", device: str = "cuda"):
    """The region proposer a ``region_proposer`` setting names (None for ``none``)."""
    if name == "sam":
        return SamRegionProposer(sam_weights, sam_model_type, device)
    if name == "segments":
        return SegmentRegionProposer()
    if name == "none":
        return None
    raise ValueError(f"region_proposer: unknown {name!r} ({' | '.join(REGION_PROPOSERS)})")
