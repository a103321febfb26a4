"""Region memory queries (HIMM / HOV-SG regions: a crop's embedding and its 3D box per region).

Regions are scored exactly (cosine over their stored embeddings, which share the image
embedder's space): those of one episode (HIMM's target query on a recalled episode, a few
thousand at most), or else the newest ``REGION_SCAN_MAX`` regions up to ``before``.
``similar_regions`` takes an embedding (a goal given as an image, embedded like the crops);
``regions`` takes words and needs an image-space text encoder (CLIP: the memory node's
``clip_weights``); without one it is an error that names the setting, never a description
search passed off as a region search.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..types import as_vector
from .errors import StoreError
from .tool_registry import OBSERVATION, query_tool

REGION_SCAN_MAX = 200_000      # regions scored per query without an episode (newest first)
REGION = (f"{OBSERVATION}; region: box (x1, y1, x2, y2 pixels), label, center_3d and size_3d (map frame, "
          "metres, null without depth); similarity (cosine)")


class RegionSearchMixin:
    """Region queries of :class:`MemoryStore` (relies on ``_conn``, ``_record``, ``_rows_by_id``,
    ``_image_query_embedder``)."""

    @query_tool("Regions (object-sized parts of views) whose embedding is nearest to an image embedding: "
                "where something shown in a picture was seen, with its 3D box.", result=f"best first: {REGION}")
    def similar_regions(self, embedding: Sequence[float], k: int = 10, episode: Optional[str] = None,
                        exclude_episode: Optional[str] = None, before: Optional[float] = None) -> list[dict]:
        vec = as_vector(embedding)
        if vec is None:
            raise StoreError("similar_regions: empty embedding")
        return self._best_regions(vec, k, episode, exclude_episode, before)

    @query_tool("Regions (object-sized parts of views, e.g. 'the red chair') best matching words, with the "
                "view they were seen in and their 3D box. Needs CLIP on the robot.", result=f"best first: {REGION}")
    def regions(self, query: str, k: int = 10, before: Optional[float] = None) -> list[dict]:
        if self._image_query_embedder is None:
            raise StoreError("regions: matching words to regions needs an image-space text encoder (CLIP): set the "
                             "memory node's 'clip_weights' (and perception's image_embedder: clip, region_proposer)")
        return self._best_regions(np.asarray(self._image_query_embedder.embed([query])[0], np.float32), k, None,
                                  None, before)

    def _best_regions(self, vec: np.ndarray, k: int, episode: Optional[str], exclude_episode: Optional[str],
                      before: Optional[float]) -> list[dict]:
        where, args = ["r.emb IS NOT NULL"], []
        if episode:
            where.append("o.episode_id = ?")
            args.append(episode)
        if exclude_episode:
            where.append("o.episode_id != ?")
            args.append(exclude_episode)
        if before is not None:
            where.append("o.t <= ?")
            args.append(before)
        rows = self._conn().execute(
            "SELECT r.obs, r.label, r.x1, r.y1, r.x2, r.y2, r.emb, r.cx, r.cy, r.cz, r.sx, r.sy, r.sz "
            "FROM regions r JOIN observations o ON o.id = r.obs WHERE " + " AND ".join(where)
            + " ORDER BY o.t DESC LIMIT ?", (*args, REGION_SCAN_MAX)).fetchall()
        rows = [r for r in rows if len(r[6]) == 4 * len(vec)]     # another embedder's regions are not comparable
        if not rows:
            return []
        vecs = np.frombuffer(b"".join(r[6] for r in rows), np.float32).reshape(len(rows), -1)
        norm = np.linalg.norm(vec) or 1.0
        sims = vecs @ (vec / norm) / np.maximum(np.linalg.norm(vecs, axis=1), 1e-12)
        best = np.argsort(-sims, kind="stable")[:k]
        observations = self._rows_by_id(rows[i][0] for i in best)
        out = []
        for i in best:
            r = rows[i]
            rec = self._record(observations[r[0]], float(sims[i]), "similarity")
            rec["region"] = {"box": [round(v, 1) for v in r[2:6]], "label": r[1] or "",
                             "center_3d": None if r[7] is None else [round(v, 3) for v in r[7:10]],
                             "size_3d": None if r[10] is None else [round(v, 3) for v in r[10:13]]}
            out.append(rec)
        return out
