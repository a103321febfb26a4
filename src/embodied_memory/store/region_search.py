"""Region memory queries (HIMM / HOV-SG regions: a crop's embedding and its 3D box per region).

Regions are scored exactly (cosine over their stored embeddings, which share the image
embedder's space): those of one episode (HIMM's target query on a recalled episode, a few
thousand at most), or else the newest ``REGION_SCAN_MAX`` regions up to ``before`` (a bounded
read, in chunks; an index of regions is left for when memories need more).
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

REGION_SCAN_MAX = 50_000       # regions scored per query (newest first): a bounded read on a long memory
REGION_CHUNK = 5_000            # rows read and scored at a time
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

    @query_tool("What this memory can search besides descriptions: regions by words needs an image-space "
                "text encoder (CLIP).", result="{regions_by_words: bool}")
    def capabilities(self) -> dict:
        return {"regions_by_words": self._image_query_embedder is not None}

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
        """Exact top-k by cosine, streamed in chunks (newest first, at most ``REGION_SCAN_MAX``);
        only regions of the query's dimension (another embedder's are not comparable)."""
        vec = np.asarray(vec, np.float32)
        vec = vec / (np.linalg.norm(vec) or 1.0)
        where, args = ["r.emb IS NOT NULL", "length(r.emb) = ?"], [4 * len(vec)]
        for clause, value in (("o.episode_id = ?", episode), ("o.episode_id != ?", exclude_episode),
                              ("o.t <= ?", before)):
            if value is not None and value != "":
                where.append(clause)
                args.append(value)
        cursor = self._conn().execute(
            "SELECT r.id, r.obs, r.emb FROM regions r JOIN observations o ON o.id = r.obs WHERE "
            + " AND ".join(where) + " ORDER BY o.t DESC LIMIT ?", (*args, REGION_SCAN_MAX))
        best_sims, best_ids = np.zeros(0, np.float32), np.zeros(0, np.int64)
        while chunk := cursor.fetchmany(REGION_CHUNK):
            vecs = np.frombuffer(b"".join(r[2] for r in chunk), np.float32).reshape(len(chunk), -1)
            sims = vecs @ vec / np.maximum(np.linalg.norm(vecs, axis=1), 1e-12)
            best_sims = np.concatenate([best_sims, sims.astype(np.float32)])
            best_ids = np.concatenate([best_ids, np.fromiter((r[0] for r in chunk), np.int64, len(chunk))])
            if len(best_sims) > k:                               # keep the running top k
                keep = np.argpartition(-best_sims, k)[:k]
                best_sims, best_ids = best_sims[keep], best_ids[keep]
        order = np.argsort(-best_sims, kind="stable")
        region_ids = [int(best_ids[i]) for i in order]
        if not region_ids:
            return []
        rows = {r[0]: r for r in self._conn().execute(
            "SELECT id, obs, label, x1, y1, x2, y2, cx, cy, cz, sx, sy, sz FROM regions WHERE id IN ("
            + ",".join("?" * len(region_ids)) + ")", region_ids)}
        observations = self._rows_by_id(rows[i][1] for i in region_ids)
        out = []
        for i, sim in zip(region_ids, best_sims[order]):
            r = rows[i]
            rec = self._record(observations[r[1]], float(sim), "similarity")
            rec["region"] = {"box": [round(v, 1) for v in r[3:7]], "label": r[2] or "",
                             "center_3d": None if r[7] is None else [round(v, 3) for v in r[7:10]],
                             "size_3d": None if r[10] is None else [round(v, 3) for v in r[10:13]]}
            out.append(rec)
        return out
