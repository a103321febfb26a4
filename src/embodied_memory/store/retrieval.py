"""Retrieval: the ranking and the retrieval functions the agent calls as tools.

Ranking (``_ranked`` / ``_best_of``): the k nearest vectors re-scored with the recency term
(``recency.py``) and filtered, k growing until the result is exact; the in-memory row id ->
time table (``_load_times`` / ``_times_of``) spares SQL per candidate.  The retrieval
functions: semantic / text / image / visual search, observations near a place, between or
at times, at a waypoint, of a person; the persons of a window or a day, a person's daily
summary; one or the latest observation.  Results are JSON-serialisable dicts (``_record``).
"""
from __future__ import annotations

import datetime as dt
import logging
import math
import sqlite3
import time
from typing import Callable, Iterable, Optional, Sequence

import numpy as np

from ..calendar_windows import day_window
from ..types import as_vector
from .errors import InvalidArgumentError, StoreError, UnknownPersonError
from .records import _unit
from .time_order import TimeTable, newer_than
from .tool_registry import OBSERVATION, SIGHTING, query_tool
from .vector_index import CannotScoreIds

log = logging.getLogger(__package__ + ".memory_store")   # the store's one logger (as before the split)

_OBS_COLUMNS = ("id, observation_id, t, episode_id, keyframe_id, segment_id, waypoint_id, "
                "x, y, z, yaw, frame_id, description, image_path, persons, robot_id")
HISTORY_ORDERS = ("newest", "oldest")
NEWEST_BLOCK = 4096      # rows scored first by _newest_first_scan
ROWS_PER_SEARCH = 65536  # newest rows scored by id for about the cost of one wider nearest-neighbour search


def _robot_filter(robot: Optional[str], column: str = "robot_id") -> tuple[str, tuple]:
    """`` AND <column>=?`` and its value for a tool's ``robot`` argument ("" / None: every robot)."""
    return (f" AND {column}=?", (robot,)) if robot else ("", ())


def _top(ids: np.ndarray, scores: np.ndarray, times: np.ndarray, m: int,
         unique: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The m lowest scores with their ids and times, best first, newer first among equals;
    ``unique``: an id listed twice (a row both among the newest and the nearest) counts once."""
    if unique and len(ids):
        ids, first = np.unique(ids, return_index=True)       # the same row has the same score
        scores, times = scores[first], times[first]
    if len(scores) > m:                                      # every row tied with the m-th stays
        within = scores <= np.partition(scores, m - 1)[m - 1]
        ids, scores, times = ids[within], scores[within], times[within]
    order = np.lexsort((-times, scores))[:m]
    return ids[order], scores[order], times[order]


class RetrievalMixin:
    """Ranking and the retrieval functions of :class:`MemoryStore`.

    Relies on: ``params``, ``tz``, ``recency``, ``summariser``, ``_image_query_embedder``
    and ``_time_table`` (a time_order.TimeTable, set by ``MemoryStore.__init__``
    through ``_load_times``), ``_newest_first`` (a time_order.NewestFirst); ``_conn`` and ``_transaction`` (records); ``_index`` and
    ``embed_text`` (index_lifecycle); ``resolve_person`` (identities)."""

    # -- helpers for results ----------------------------------------------------------------
    def iso(self, t: float) -> str:
        return dt.datetime.fromtimestamp(t, tz=self.tz).isoformat(timespec="seconds")

    def _record(self, row: sqlite3.Row, score: Optional[float] = None, key: str = "score") -> dict:
        rec = {"id": row["observation_id"], "time": self.iso(row["t"]), "t": round(row["t"], 3),
               "episode": row["episode_id"], "waypoint": row["waypoint_id"] or "",
               "position": [round(row["x"], 2), round(row["y"], 2), round(row["z"], 2)]
               if row["x"] is not None else None,               # None: stored without a pose
               "yaw": round(row["yaw"], 3) if row["yaw"] is not None else None,
               "description": row["description"] or "",
               "persons": [p for p in (row["persons"] or "").split(",") if p]}
        if row["image_path"]:
            rec["image_path"] = row["image_path"]
        if row["robot_id"]:                 # a fleet's memory: which robot saw it
            rec["robot"] = row["robot_id"]
        if score is not None:
            rec[key] = round(float(score), 4)
        return rec

    def _rows_by_id(self, ids: Iterable[int]) -> dict[int, sqlite3.Row]:
        ids = [int(i) for i in ids]
        out: dict[int, sqlite3.Row] = {}
        conn = self._conn()
        for start in range(0, len(ids), 900):
            chunk = ids[start:start + 900]
            for row in conn.execute(f"SELECT {_OBS_COLUMNS} FROM observations WHERE id IN "
                                    f"({','.join('?' * len(chunk))})", chunk):
                out[row["id"]] = row
        return out

    def _episode_row_ids(self, episode: str, column: str) -> np.ndarray:
        return np.fromiter((r[0] for r in self._conn().execute(
            f"SELECT id FROM observations WHERE episode_id=? AND {column} IS NOT NULL", (episode,))), np.int64)

    def _person_row_ids(self, person: str) -> np.ndarray:
        identity = self.resolve_person(person)
        # one string parsed in C: a row per id costs a person with 4,000 sightings ~3 ms in Python
        ids = self._conn().execute("SELECT group_concat(obs) FROM (SELECT DISTINCT obs FROM sightings "
                                   "WHERE identity_id=?)", (identity,)).fetchone()[0]
        return np.fromstring(ids, dtype=np.int64, sep=",") if ids else np.zeros(0, np.int64)

    # -- ranking ----------------------------------------------------------------------------
    def _load_times(self) -> None:
        """Row id -> time, in memory (ids only grow), so ranking needs no SQL per candidate.
        Read from the time index (small), not the table (embeddings make its rows large)."""
        rows = self._conn().execute("SELECT id, t FROM observations INDEXED BY obs_t").fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        times = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
        previous = getattr(self, "_time_table", None)      # rows deleted: orders start afresh
        self._time_table = TimeTable.of_rows(ids, times, previous.version + 1 if previous else 0)

    def _times_of(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(times, known) for row ids; unknown = deleted since the index was written."""
        return self._time_table.times_of(ids)

    def _ranked(self, kind: str, query_vec: np.ndarray, n: int, *, before: Optional[float],
                now: Optional[float], use_recency: bool, subset: Optional[np.ndarray] = None,
                accept: Optional[Callable[[sqlite3.Row], bool]] = None) -> list[tuple[float, sqlite3.Row]]:
        """Top-n rows by score (lower is better), exact for an exact index (flat FAISS, Milvus
        within its top-k limit) under every filter (``subset``, ``before``, ``accept``).

        An index that scores rows by id (flat, HNSW) scores every row of a filter (``subset``)
        exactly, and ranks by recency newest rows first (``_ranked_newest_first``). Otherwise
        (IVF, Milvus, no recency) a vector search fetches the k nearest by cosine (first the index's ``candidates``); they
        are re-scored with the recency term and filtered. A record outside them has a similarity
        of at most the k-th one's, so its score is at least ``bound`` = a*(1 - s_k) plus the
        smallest time penalty any eligible record can have; while the n-th score found is above
        that bound (or fewer than n passed the filters), k grows fourfold, up to every vector.
        ``now`` (the question's time, needed only with ``use_recency``) is what "hours ago"
        counts from."""
        if use_recency and now is None:
            raise StoreError("recency ranking needs the question time (now)")
        if n <= 0:
            return []
        index = self._index(kind)
        query_vec = _unit(np.asarray(query_vec, dtype=np.float32))
        if query_vec.shape != (index.dim,):
            raise StoreError(f"{kind} query has {query_vec.size} values, index dimension is {index.dim}")
        if subset is not None and before is not None:       # rows after ``before`` are never scored
            times, known = self._times_of(subset)
            subset = subset[known & (times <= before)]
        total = index.count() if subset is None else len(subset)
        if total == 0:
            return []
        try:      # the index may have become IVF since the check (a snapshot swapped it): then search
            if subset is not None and getattr(index, "scores_filter_by_id", lambda size: False)(len(subset)):
                sims = index.score_ids(query_vec, subset)          # every row of the filter, exactly
                held = np.isfinite(sims)
                return self._best_of(subset[held], sims[held], n, before=before, now=now,
                                     use_recency=use_recency, accept=accept)
            if use_recency and subset is None and accept is None and getattr(index, "scores_ids", False):
                return self._ranked_newest_first(index, query_vec, n, before=before, now=now)
        except CannotScoreIds:
            pass
        least_penalty = 0.0
        table = self._time_table
        if use_recency and len(table.ids):
            newest = table.newest if before is None else min(before, table.newest)
            least_penalty = self.recency.weight_time * float(self.recency.penalty((now - newest) / 3600.0))
        limit = index.limit_for(None if subset is None else len(subset))
        k = min(total, max(index.candidates, 4 * n), limit)
        while True:
            ids, sims = index.search(query_vec, k, subset)
            best = self._best_of(ids, sims, n, before=before, now=now, use_recency=use_recency, accept=accept)
            # fewer than k back: every candidate was seen (an approximate index, e.g. IVF's probed
            # lists, may hold fewer: its result is approximate, as its measured recall says)
            if len(ids) < k or k >= min(total, limit):
                if k < total and len(ids) >= k:
                    log.warning("%s search: %d of %d vectors ranked (the index's top-k limit): the result is "
                                "exact among them only", kind, k, total)
                return best
            bound = self.recency.weight_cos * (1.0 - float(sims.min())) + least_penalty
            if len(best) == n and best[-1][0] <= bound:
                return best
            k = min(total, k * 4, limit)

    def _ranked_newest_first(self, index, query_vec: np.ndarray, n: int, *, before: Optional[float],
                             now: float) -> list[tuple[float, sqlite3.Row]]:
        """``_newest_first_scan``'s best rows, read once. A row deleted after the scan ranked it
        (a delete commits in SQLite before the indexes and the time table drop the row) is left
        out and the scan runs again without it: its score may have set the bound."""
        gone = np.zeros(0, np.int64)
        while True:
            best_ids, best_scores = self._newest_first_scan(index, query_vec, n, before=before, now=now, gone=gone)
            rows = self._rows_by_id(best_ids)
            missing = np.array([i for i in best_ids.tolist() if i not in rows], np.int64)
            if not len(missing):
                return [(float(score), rows[int(i)]) for i, score in zip(best_ids, best_scores)]
            gone = np.concatenate([gone, missing])

    def _newest_first_scan(self, index, query_vec: np.ndarray, n: int, *, before: Optional[float], now: float,
                           gone: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row ids, scores) of the n best, best first, leaving out the rows ``gone``.

        Recency ranking for an index that scores rows by id (flat, HNSW), bounded two ways
        (Fagin's threshold algorithm over time and similarity): the newest rows (up to
        ``before``) are scored exactly from the index's vectors, beside the index's k nearest by
        cosine. A row in neither is older than every row scored and less similar than the k-th
        nearest (s_k; exact on a flat index, a graph's approximate neighbours otherwise), so its
        score is at least its time penalty + a*(1 - s_k). Once the n-th score found is
        ``best_n``, no row older than the age where the time penalty reaches best_n -
        a*(1 - s_k) can beat it: where up to ROWS_PER_SEARCH rows lie before that age the scan
        jumps straight there; where more do (an old ``before``: the penalty has flattened out and similarity
        decides) k grows fourfold instead. The newest rows come NEWEST_BLOCK at a time, more
        while fewer than n are held (masked rows). Near-duplicates cost nothing either way.
        Each round scores only the rows it adds (their times are the newest-first table's) and
        keeps a running best; no row is read."""
        ids_desc, times_desc = self._newest_first.order(self._time_table)
        if before is not None:
            start = newer_than(times_desc, before)                     # the first at or before it
            ids_desc, times_desc = ids_desc[start:], times_desc[start:]
        if len(ids_desc) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        k, limit = min(index.count(), 4 * n), min(index.count(), index.max_k)   # a graph's ef >= 128 anyway
        graph = getattr(index, "kind", "flat") != "flat"

        def nearest(k: int) -> tuple[np.ndarray, np.ndarray, tuple]:
            near_ids, near_sims = index.search(query_vec, k)
            times, known = self._times_of(near_ids)
            held = known & ((times <= before) if before is not None else True)
            if len(gone):
                held &= ~np.isin(near_ids, gone)
            scores = self.recency.score(near_sims[held], (now - times[held]) / 3600.0)
            return near_ids, near_sims, _top(near_ids[held], scores, times[held], n)

        near_ids, near_sims, near_best = nearest(k)
        end, scored_to = min(len(ids_desc), max(NEWEST_BLOCK, 64 * n)), 0
        newest_best = (np.zeros(0, np.int64), np.zeros(0, np.float64), np.zeros(0, np.float64))
        newest_max_sim = -np.inf
        while True:
            chunk = slice(scored_to, end)              # only the rows not scored yet
            sims = index.score_ids(query_vec, ids_desc[chunk])
            held = np.isfinite(sims)
            if len(gone):
                held &= ~np.isin(ids_desc[chunk], gone)
            if held.any():
                newest_max_sim = max(newest_max_sim, float(sims[held].max()))
                times = times_desc[chunk][held]
                scores = self.recency.score(sims[held], (now - times) / 3600.0)
                newest_best = _top(*(np.concatenate([a, b]) for a, b in
                                     zip(newest_best, (ids_desc[chunk][held], scores, times))), n)
            scored_to = end
            best_ids, best_scores, _ = _top(*(np.concatenate([a, b]) for a, b in zip(newest_best, near_best)),
                                            n, unique=True)
            # every row is among the nearest (a graph may return fewer than k while rows are masked)
            all_near = k >= index.count() or (len(near_ids) < k and not graph)
            if scored_to >= len(ids_desc) or all_near:
                break
            if len(best_ids) < n:                      # too few held (masked rows): more of the newest
                end = min(len(ids_desc), 4 * end)
                continue
            s_k = float(near_sims[-1]) if len(near_sims) else 1.0
            if graph:     # a graph's k-th is no bound (a search trapped among duplicates): the best seen is
                s_k = max(s_k, newest_max_sim if np.isfinite(newest_max_sim) else 1.0)
            needed = best_scores[n - 1] - self.recency.weight_cos * (1.0 - s_k)   # the penalty that ties the n-th
            oldest_that_can_win = now - 3600.0 * self.recency.hours_for_penalty(needed)
            if times_desc[scored_to] < oldest_that_can_win:
                break
            reach = newer_than(times_desc, oldest_that_can_win, inclusive=True)
            if reach - scored_to > ROWS_PER_SEARCH and k < limit:    # cheaper to look further by similarity
                k = min(limit, 4 * k)
                near_ids, near_sims, near_best = nearest(k)
                continue
            end = min(len(ids_desc), max(reach, scored_to + 1))
        return best_ids, best_scores

    def _best_of(self, ids: np.ndarray, sims: np.ndarray, n: int, *, before: Optional[float], now: Optional[float],
                 use_recency: bool, accept) -> list[tuple[float, sqlite3.Row]]:
        """The n best-scored of these search hits that pass the filters."""
        times, known = self._times_of(ids)
        keep = known & ((times <= before) if before is not None else True)
        ids, sims, times = ids[keep], sims[keep].astype(np.float64), times[keep]
        if use_recency:
            scores = self.recency.score(sims, (now - times) / 3600.0)
        else:
            scores = self.recency.weight_cos * (1.0 - sims)
        order = np.argsort(scores, kind="stable")
        best: list[tuple[float, sqlite3.Row]] = []
        start = 0
        while len(best) < n and start < len(order):  # rows for the best candidates only
            chunk = order[start:start + (n + 4 if accept is None else max(n * 2, 16))]   # a filter rejects some
            rows = self._rows_by_id(ids[chunk])
            for i in chunk:
                row = rows.get(int(ids[i]))
                if row is not None and (accept is None or accept(row)):
                    best.append((float(scores[i]), row))
                    if len(best) == n:
                        break
            start += len(chunk)
        return best

    # -- retrieval functions (agent tools) ----------------------------------------------------
    @query_tool("Observations most relevant to a text query, ranked by similarity and recency (HUMEMBR: a*cosine_distance + b*(1 - exp(-lambda*hours_ago)), newer first among equals); optionally only those showing a person, or only before a time.",
                result=f"best first: {OBSERVATION}; score (lower is better: 0 to 2a + b, HUMEMBR a=3, b=1)")
    def semantic_observations(self, query: str, person: Optional[str] = None,
                              before: Optional[float] = None, n: int = 30,
                              now: Optional[float] = None) -> list[dict]:
        """HUMEMBR: observations ranked by a*cosine_distance + b*(1-exp(-lambda*hours_ago)),
        optionally only those showing ``person`` and only up to ``before``.  Hours ago count
        from ``now``, the question's time (the agent passes it: under use_sim_time a replayed
        bag's day); without it from ``before``, and only with neither from the wall clock."""
        now = now if now is not None else (before if before is not None else time.time())
        subset = self._person_row_ids(person) if person else None
        hits = self._ranked("text", self.embed_text(query), n, before=before, now=now,
                            use_recency=True, subset=subset)
        return [self._record(row, score) for score, row in hits]

    @query_tool("The observations whose descriptions best match a text, by cosine similarity alone (ReMEmbR retrieve_from_text; no recency).",
                result=f"best first: {OBSERVATION}; similarity (cosine, higher is better)")
    def text_observations(self, query: str, k: int = 5, before: Optional[float] = None,
                          episode: Optional[str] = None) -> list[dict]:
        """ReMEmbR ``retrieve_from_text``: plain cosine top-k over descriptions (optionally of
        one episode: HIMM's target query on a recalled episode)."""
        hits = self._ranked("text", self.embed_text(query), k, before=before, now=None,
                            use_recency=False, subset=self._episode_row_ids(episode, "text_emb") if episode else None)
        return [self._record(row, 1.0 - score / self.recency.weight_cos, "similarity") for score, row in hits]

    @query_tool("LVMem: the observations whose images best match a query (with their image paths).",
                result=f"best first: {OBSERVATION}; similarity (cosine, higher is better)")
    def image_retrieval(self, query: str, m: int = 3, before: Optional[float] = None) -> list[dict]:
        """LVMem: the M observations whose images best match ``query`` (with their image paths).

        With an image-space text encoder (CLIP backend) the query is matched against the global
        image embeddings; otherwise against the descriptions of observations that have images."""
        def has_image(row):
            return bool(row["image_path"])
        if self._image_query_embedder is not None:
            vec = self._image_query_embedder.embed([query])[0]
            hits = self._ranked("image", vec, m, before=before, now=None, use_recency=False,
                                accept=has_image)
        else:
            hits = self._ranked("text", self.embed_text(query), m, before=before, now=None,
                                use_recency=False, accept=has_image)
        return [self._record(row, 1.0 - score / self.recency.weight_cos, "similarity") for score, row in hits]

    @query_tool("Observations whose global image embedding is nearest to an embedding (episodic recall across episodes).",
                result=f"best first: {OBSERVATION}; similarity")
    def visual_similarity(self, embedding: Sequence[float], k: int = 10, episode: Optional[str] = None,
                          exclude_episode: Optional[str] = None) -> list[dict]:
        """Top-k observations by global image embedding (episodic recall across episodes)."""
        vec = as_vector(embedding)
        if vec is None:
            raise StoreError("visual_similarity: empty embedding")
        subset = self._episode_row_ids(episode, "image_emb") if episode else None
        accept = (lambda row: row["episode_id"] != exclude_episode) if exclude_episode else None
        hits = self._ranked("image", vec, k, before=None, now=None, use_recency=False,
                            subset=subset, accept=accept)
        return [self._record(row, 1.0 - score / self.recency.weight_cos, "similarity") for score, row in hits]

    @query_tool("Observations made near a map position, nearest first (ReMEmbR retrieve_from_position).",
                result=f"nearest first: {OBSERVATION}; distance_m")
    def observations_near(self, x: float, y: float, radius: Optional[float] = None, k: int = 4,
                          before: Optional[float] = None) -> list[dict]:
        """Observations within ``radius`` metres of (x, y), nearest first; without a radius the
        k nearest (ReMEmbR ``retrieve_from_position``)."""
        if not all(math.isfinite(v) for v in (x, y)):
            raise StoreError("observations_near: x and y must be finite")
        conn = self._conn()
        total = None                              # observations with a position, counted only when widening
        r = radius if radius is not None else 1.0
        while True:
            # the R-tree's own (float32) coordinates pick the candidates; only the chosen rows are read
            box = conn.execute("SELECT id, min_x, min_y FROM obs_xy WHERE min_x >= ? AND max_x <= ? AND min_y >= ? "
                               "AND max_y <= ?", (x - r, x + r, y - r, y + r)).fetchall()
            ids = np.fromiter((b[0] for b in box), np.int64, count=len(box))
            dist = np.hypot(np.fromiter((b[1] for b in box), np.float64, count=len(box)) - x,
                            np.fromiter((b[2] for b in box), np.float64, count=len(box)) - y)
            times, known = self._times_of(ids)
            keep = known & (dist <= r + 1e-3) & ((times <= before) if before is not None else True)
            order = np.lexsort((-times[keep], dist[keep]))          # nearest first, newest among equals
            within = ids[keep][order]
            if radius is not None:
                chosen = within[:k] if k else within
                break
            if len(within) < k and total is None:
                total = conn.execute("SELECT COUNT(*) FROM obs_xy").fetchone()[0]
            if len(within) >= k or len(box) >= total or r > 1e6:
                chosen = within[:k]
                break
            r *= 4
        rows = self._rows_by_id(chosen)
        with_dist = sorted(((math.hypot(row["x"] - x, row["y"] - y), row) for row in rows.values()),
                           key=lambda item: (item[0], -item[1]["t"]))
        chosen = [item for item in with_dist if radius is None or item[0] <= radius]
        return [{**self._record(row), "distance_m": round(d, 2)} for d, row in chosen]

    @query_tool("Observations in a time window, oldest first.",
                result=f"oldest first: {OBSERVATION}")
    def observations_between(self, t_start: float, t_end: float, limit: int = 50,
                             robot: Optional[str] = None) -> list[dict]:
        by_robot, robot_args = _robot_filter(robot)
        rows = self._conn().execute(f"SELECT {_OBS_COLUMNS} FROM observations WHERE t >= ? AND t <= ?{by_robot} "
                                    "ORDER BY t LIMIT ?", (t_start, t_end, *robot_args, limit))
        return [self._record(r) for r in rows]

    @query_tool("The observations closest in time to a time (ReMEmbR retrieve_from_time).",
                result=f"closest first: {OBSERVATION}; dt_s (seconds from t)")
    def observations_at(self, t: float, k: int = 4) -> list[dict]:
        """The k observations closest in time to ``t`` (ReMEmbR ``retrieve_from_time``)."""
        conn = self._conn()
        before = conn.execute(f"SELECT {_OBS_COLUMNS} FROM observations WHERE t <= ? ORDER BY t DESC LIMIT ?",
                              (t, k)).fetchall()
        after = conn.execute(f"SELECT {_OBS_COLUMNS} FROM observations WHERE t > ? ORDER BY t LIMIT ?",
                             (t, k)).fetchall()
        rows = sorted(before + after, key=lambda r: abs(r["t"] - t))[:k]
        return [{**self._record(r), "dt_s": round(r["t"] - t, 1)} for r in rows]

    @staticmethod
    def _order_sql(order: str, column: str) -> str:
        if order not in HISTORY_ORDERS:
            raise InvalidArgumentError(f"order must be one of {', '.join(HISTORY_ORDERS)}, got {order!r}")
        return f"ORDER BY {column} {'DESC' if order == 'newest' else 'ASC'}"

    @query_tool("What was observed at a waypoint (place) in a time window: the robot's observations there and views from elsewhere of people standing there; persons: who was at that place.",
                result=f"in the given order: {SIGHTING}; unidentified: faces seen at that place whose identity "
                       "is not known (present only when there are any; a body without a face is not counted)")
    def waypoint_observations(self, waypoint_id: str, t_start: Optional[float] = None,
                              t_end: Optional[float] = None, limit: int = 50,
                              order: str = "newest", robot: Optional[str] = None) -> list[dict]:
        """HUMEMBR waypoint history: what was seen at waypoint W in [t_start, t_end]: the robot's
        observations there and views from elsewhere of a person standing at W (through a door:
        ``waypoint`` W, ``robot_waypoint`` where the robot was); each record's ``persons`` are
        the people who were at W.  ``order`` "newest" = the most recent ``limit``, newest first;
        "oldest" = the earliest, oldest first.  Two ordered index scans, merged."""
        conn = self._conn()
        window = (0.0 if t_start is None else t_start, 1e18 if t_end is None else t_end)
        order_sql = self._order_sql(order, "t")
        by_robot, robot_args = _robot_filter(robot)
        here = conn.execute(f"SELECT {_OBS_COLUMNS} FROM observations WHERE waypoint_id=? AND t >= ? AND t <= ?"
                            f"{by_robot} {order_sql} LIMIT ?", (waypoint_id, *window, *robot_args, limit)).fetchall()
        robot_views = " AND obs IN (SELECT id FROM observations WHERE robot_id=?)" if robot else ""
        views = conn.execute(
            f"SELECT {', '.join('o.' + c.strip() for c in _OBS_COLUMNS.split(','))} FROM observations o WHERE o.id IN "
            f"(SELECT obs FROM sightings WHERE waypoint_id=? AND t >= ? AND t <= ?{robot_views} {order_sql} LIMIT ?) "
            f"{self._order_sql(order, 'o.t')}",
            (waypoint_id, *window, *robot_args, 4 * limit)).fetchall()   # a view: several people
        view_ids = {r["id"] for r in views}
        rows = sorted({r["id"]: r for r in [*here, *views]}.values(), key=lambda r: (r["t"], r["id"]),
                      reverse=order == "newest")[:limit]
        places_of: dict[int, dict[str, set]] = {}   # observation -> person -> places (None: the robot's)
        unknown_at: dict[int, list] = {}             # observation -> places of its unidentified people
        for start in range(0, len(rows), 900):
            chunk = [r["id"] for r in rows[start:start + 900]]
            for s in conn.execute(f"SELECT obs, identity_id, waypoint_id, face_box FROM sightings WHERE obs IN "
                                  f"({','.join('?' * len(chunk))})", chunk):
                if s["identity_id"] is None:
                    if s["face_box"] is None:
                        continue       # a body alone, no face: too often not a person (HOG takes chairs for people)
                    unknown_at.setdefault(s["obs"], []).append(s["waypoint_id"])
                else:
                    places_of.setdefault(s["obs"], {}).setdefault(s["identity_id"], set()).add(s["waypoint_id"])
        records = []
        for r in rows:
            rec, places = self._record(r), places_of.get(r["id"], {})
            if r["id"] in view_ids and rec["waypoint"] != waypoint_id:     # a view from elsewhere
                rec["robot_waypoint"], rec["waypoint"] = rec["waypoint"], waypoint_id
                rec["persons"] = [x for x in rec["persons"] if waypoint_id in places.get(x, ())]
                here_too = {waypoint_id}
            else:                                  # the robot was there: all but those standing elsewhere
                rec["persons"] = [x for x in rec["persons"] if places.get(x, {None}) & {None, waypoint_id}]
                here_too = {None, waypoint_id}
            unknown = sum(place in here_too for place in unknown_at.get(r["id"], ()))
            if unknown:
                rec["unidentified"] = unknown
            records.append(rec)
        return records

    @query_tool("Sightings of one person in a time window, each with the place the person was in and, when known, where they stood.",
                result=f"in the given order: {SIGHTING}")
    def person_observations(self, person: str, t_start: Optional[float] = None,
                            t_end: Optional[float] = None, limit: int = 50,
                            order: str = "newest", robot: Optional[str] = None) -> list[dict]:
        """HUMEMBR person history: sightings of ``person`` in [t_start, t_end]; ``order`` as
        for waypoint_observations (default the most recent ``limit``, newest first)."""
        identity = self.resolve_person(person)
        by_robot, robot_args = _robot_filter(robot, "o.robot_id")
        rows = self._conn().execute(
            f"SELECT {', '.join('o.' + c.strip() for c in _OBS_COLUMNS.split(','))}, s.confidence, "
            "s.activity, s.px, s.py, s.pz, s.waypoint_id AS place FROM sightings s JOIN observations o "
            f"ON o.id = s.obs WHERE s.identity_id=? AND s.t >= ? AND s.t <= ?{by_robot} "
            f"{self._order_sql(order, 's.t')} LIMIT ?",
            (identity, 0.0 if t_start is None else t_start, 1e18 if t_end is None else t_end, *robot_args, limit))
        return [self._sighting_record(r) for r in rows]

    def _sighting_record(self, r: sqlite3.Row) -> dict:
        """An observation as a sighting of one person: ``waypoint`` is where the person was (the
        waypoint nearest where they stood, when depth placed them), ``robot_waypoint`` where
        the robot was when that differs, ``person_position`` where they stood (when known)."""
        rec = {**self._record(r), "confidence": round(r["confidence"] or 0.0, 3),
               **({"activity": r["activity"]} if r["activity"] else {})}
        if r["px"] is not None:
            rec["person_position"] = [round(r["px"], 2), round(r["py"], 2), round(r["pz"], 2)]
        if r["place"] and r["place"] != rec["waypoint"]:
            rec["robot_waypoint"], rec["waypoint"] = rec["waypoint"], r["place"]
        return rec

    def day_bounds(self, date: str) -> tuple[float, float]:
        """[start, end) UNIX times of a calendar day (YYYY-MM-DD) in the store's time zone."""
        try:
            day = dt.date.fromisoformat(date)
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"date {date!r} is not a calendar date (YYYY-MM-DD): {exc}") from exc
        return day_window(day, self.tz)

    def _newest(self) -> Optional[float]:
        return self._conn().execute("SELECT MAX(t) FROM observations").fetchone()[0]

    def _covers_everything(self, before: Optional[float]) -> bool:
        """True when ``before`` excludes nothing stored (the fast paths then answer)."""
        if before is None:
            return True
        newest = self._newest()
        return newest is None or before >= newest

    @query_tool("Everyone seen in a time window, by first sighting in it.",
                result="person, name (when named), sightings, first_seen / last_seen (ISO), first_t / last_t (UNIX), first_id / last_id (observation ids)")
    def persons_between(self, t_start: float, t_end: float) -> list[dict]:
        """Everyone with a sighting in [t_start, t_end] (UNIX times), ordered by first sighting
        in the window: person (identity id), name (when named), sightings (count), first_seen /
        last_seen (ISO in the store's zone), first_t / last_t (UNIX, ms), first_id / last_id
        (observation ids of the first and last sighting in the window).  An empty or reversed
        window gives []."""
        if not t_start <= t_end:
            return []
        rows = self._conn().execute(
            "SELECT g.identity_id, g.n, g.first, g.last, i.display_name, "
            "(SELECT o.observation_id FROM sightings s JOIN observations o ON o.id = s.obs WHERE s.identity_id = "
            "g.identity_id AND s.t >= ?1 AND s.t <= ?2 ORDER BY s.t, s.id LIMIT 1) AS first_id, "
            "(SELECT o.observation_id FROM sightings s JOIN observations o ON o.id = s.obs WHERE s.identity_id = "
            "g.identity_id AND s.t >= ?1 AND s.t <= ?2 ORDER BY s.t DESC, s.id DESC LIMIT 1) AS last_id "
            "FROM (SELECT identity_id, COUNT(*) AS n, MIN(t) AS first, MAX(t) AS last FROM sightings "
            "WHERE t >= ?1 AND t <= ?2 GROUP BY identity_id) g JOIN identities i ON i.identity_id = g.identity_id "
            "ORDER BY g.first, g.identity_id", (t_start, t_end))
        return [{"person": r["identity_id"], **({"name": r["display_name"]} if r["display_name"] else {}),
                 "sightings": r["n"], "first_seen": self.iso(r["first"]), "last_seen": self.iso(r["last"]),
                 "first_t": round(r["first"], 3), "last_t": round(r["last"], 3),
                 "first_id": r["first_id"], "last_id": r["last_id"]} for r in rows]

    @query_tool("Everyone seen on a calendar day (up to a time), by first sighting.",
                result="as persons_between")
    def persons_per_day(self, date: str, before: Optional[float] = None) -> list[dict]:
        """HUMEMBR available persons: everyone seen on ``date`` (a calendar day in the store's
        zone) up to ``before``: :meth:`persons_between` of that day's window."""
        t0, t1 = self.day_bounds(date)
        t_end = math.nextafter(t1, -math.inf)
        return self.persons_between(t0, t_end if before is None else min(t_end, before))

    @query_tool("A summary of one person's day: where and when they were seen.",
                result="person, date, summary (text), sightings")
    def daily_summary(self, date: str, person: str, before: Optional[float] = None) -> dict:
        """HUMEMBR person daily summary of the whole day in time order (up to ``before``; an
        identity first seen after ``before`` is unknown).  Summariser injectable; cached per
        person and day (a day cut by ``before`` is summarised afresh and not cached)."""
        identity = self.resolve_person(person)
        t0, t1 = self.day_bounds(date)
        conn = self._conn()
        if before is not None and conn.execute("SELECT 1 FROM sightings WHERE identity_id=? AND t <= ? LIMIT 1",
                                               (identity, before)).fetchone() is None:
            raise UnknownPersonError(f"unknown person {person!r} as of {self.iso(before)}")
        t_end = t1 - 1e-6
        partial = before is not None and before < t_end
        sightings = self.person_observations(identity, t0, before if partial else t_end, limit=100_000,
                                             order="oldest")
        cached = None if partial else conn.execute(
            "SELECT text, sightings FROM summaries WHERE identity_id=? AND day=?", (identity, date)).fetchone()
        if cached and cached["sightings"] == len(sightings):
            return {"person": identity, "date": date, "sightings": len(sightings), "summary": cached["text"]}
        summariser = self.summariser or self._fallback_summary
        try:
            text = summariser(identity, date, sightings)
        except Exception as exc:  # noqa: BLE001 - an LLM summariser may fail: fall back
            log.warning("summariser failed (%s): using the deterministic summary", exc)
            text = self._fallback_summary(identity, date, sightings)
        if partial:
            return {"person": identity, "date": date, "sightings": len(sightings), "summary": text}
        with self._transaction() as tx:
            tx.execute("INSERT OR REPLACE INTO summaries(identity_id, day, text, sightings, created) "
                       "VALUES (?,?,?,?,?)", (identity, date, text, len(sightings), time.time()))
        return {"person": identity, "date": date, "sightings": len(sightings), "summary": text}

    def _fallback_summary(self, person: str, date: str, sightings: list[dict]) -> str:
        if not sightings:
            return f"{person} was not seen on {date}."
        places: dict[str, int] = {}
        for s in sightings:
            places[s["waypoint"] or "unknown place"] = places.get(s["waypoint"] or "unknown place", 0) + 1
        first, last = sightings[0]["time"][11:16], sightings[-1]["time"][11:16]
        where = ", ".join(f"{w} ({n})" for w, n in sorted(places.items(), key=lambda kv: -kv[1]))
        lines = [f"{person} on {date} ({self.params.timezone}): seen {len(sightings)} times between "
                 f"{first} and {last}; at {where}."]
        step = max(1, len(sightings) // 12)
        for s in sightings[::step]:
            lines.append(f"{s['time'][11:16]} {s['waypoint'] or 'at ' + str(s['position'][:2])}: "
                         f"{s['description'][:100]}")
        return "\n".join(lines)

    @query_tool("One observation by its id.",
                result=f"{OBSERVATION}, or null")
    def get_observation(self, observation_id: str) -> Optional[dict]:
        row = self._conn().execute(f"SELECT {_OBS_COLUMNS} FROM observations WHERE observation_id=?",
                                   (observation_id,)).fetchone()
        return self._record(row) if row else None

    @query_tool("The most recent observation (up to a time): where the robot last was.",
                result=f"{OBSERVATION}, or null")
    def latest_observation(self, before: Optional[float] = None, robot: Optional[str] = None) -> Optional[dict]:
        by_robot, robot_args = _robot_filter(robot)
        row = self._conn().execute(f"SELECT {_OBS_COLUMNS} FROM observations WHERE t <= ?{by_robot} ORDER BY t DESC "
                                   "LIMIT 1", (before if before is not None else 1e18, *robot_args)).fetchone()
        return self._record(row) if row else None
