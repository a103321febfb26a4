"""Region proposals (HIMM / HOV-SG style): masks -> boxes, region embeddings, 3D boxes from depth.

``sam`` (GPU robot): Segment Anything's automatic mask generator, weights from ``sam_weights``;
each region is embedded with the image embedder (CLIP: open-vocabulary), and, with depth and
intrinsics, given an axis-aligned 3D box in the map frame.  ``none`` (embedded default: no
segmentation model ships offline).
"""
from __future__ import annotations

from typing import Optional

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
    pts = pixels_to_map(u * (w / dw), v * (h / dh), depth[v, u], intrinsics, pose)
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
                pose: Optional[Pose] = None) -> list[Region]:
        masks = sorted(self._generator.generate(image[:, :, ::-1]), key=lambda m: -m["area"])[: self.max_regions]
        crops, regions = [], []
        for m in masks:
            x, y, w, h = (int(v) for v in m["bbox"])
            crops.append(image[y:y + max(h, 1), x:x + max(w, 1)])
            region = Region(box=(float(x), float(y), float(x + w), float(y + h)), score=float(m["predicted_iou"]))
            if depth is not None and intrinsics is not None and pose is not None:
                found = box_3d(m["segmentation"], depth, intrinsics, pose)
                if found:
                    region.center_3d, region.size_3d = found
            regions.append(region)
        if embedder is not None and crops:
            for region, vec in zip(regions, embedder.embed(crops)):
                region.embedding = vec
        return regions
