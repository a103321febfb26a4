"""Episodes and places: the episode list, semantic rules, occupancy maps, waypoint and people listings.

``episodes`` lists the recorded episodes; semantic rules (``add_rule`` / ``rules_for``: the
agent's system prompt) are matched by embedding; an episode's occupancy map is stored as int8
rows (``save_occupancy_map``; ``occupancy_map`` is its JSON for the query service);
``waypoints`` and ``people`` list the places visited and the identities seen (up to a time),
``recent_positions`` the newest positions for map markers.
"""
from __future__ import annotations

import base64
import time
from typing import Optional

import numpy as np

from ..types import Episode, SemanticRule, as_vector
from .records import _blob, _unblob, _unit
from .tool_registry import query_tool


class EpisodesMixin:
    """Episodes, rules, occupancy maps and the waypoint / people listings of :class:`MemoryStore`.

    Relies on: ``_conn`` and ``_transaction`` (records); ``embed_text`` (index_lifecycle); ``iso`` and
    ``_covers_everything`` (retrieval); ``identity_doubts`` (identities)."""

    def episodes(self) -> list[Episode]:
        return [Episode(r["episode_id"], r["start"], r["end"], r["name"] or "", r["world"] or "")
                for r in self._conn().execute("SELECT * FROM episodes ORDER BY start")]

    def add_rule(self, rule: SemanticRule) -> None:
        vec = rule.embedding if rule.embedding is not None else self.embed_text(
            f"{rule.key}: {rule.condition} -> {rule.action}")
        with self._transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO rules VALUES (?,?,?,?,?,?,?,?)",
                         (rule.rule_id, rule.kind, rule.key, rule.condition, rule.action, rule.episode_id,
                          rule.created or time.time(), _blob(_unit(as_vector(vec)))))

    @query_tool("The learned semantic rules most similar to a text (HIMM semantic memory).",
                result="rule_id, kind, key, condition, action, similarity")
    def rules_for(self, query: str, k: int = 3) -> list[dict]:
        """Top-k semantic rules by similarity to ``query`` (for the agent's system prompt)."""
        rows = self._conn().execute("SELECT * FROM rules").fetchall()
        if not rows:
            return []
        mat = np.stack([_unblob(r["emb"]) for r in rows])
        sims = mat @ _unit(self.embed_text(query))
        order = np.argsort(-sims)[:k]
        return [{"rule_id": rows[i]["rule_id"], "kind": rows[i]["kind"], "key": rows[i]["key"],
                 "condition": rows[i]["condition"], "action": rows[i]["action"],
                 "similarity": round(float(sims[i]), 3)} for i in order]

    def save_occupancy_map(self, episode_id: str, grid: np.ndarray, resolution: float,
                           origin: tuple[float, float]) -> None:
        grid = np.ascontiguousarray(grid, dtype=np.int8)
        with self._transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO occupancy_maps VALUES (?,?,?,?,?,?,?,?)",
                         (episode_id, resolution, origin[0], origin[1], grid.shape[1], grid.shape[0],
                          grid.tobytes(), time.time()))

    def load_occupancy_map(self, episode_id: str) -> Optional[dict]:
        r = self._conn().execute("SELECT * FROM occupancy_maps WHERE episode_id=?", (episode_id,)).fetchone()
        if r is None:
            return None
        grid = np.frombuffer(r["data"], dtype=np.int8).reshape(r["height"], r["width"])
        return {"grid": grid, "resolution": r["resolution"], "origin": (r["origin_x"], r["origin_y"])}

    @query_tool("An episode's occupancy map.",
                result="width, height, resolution, origin [x, y], data_b64 (int8 rows, row 0 at the lowest y), or null")
    def occupancy_map(self, episode_id: str) -> Optional[dict]:
        """An episode's occupancy map as JSON (the query service): values base64-coded int8 rows,
        row 0 at the lowest y (nav_msgs/OccupancyGrid layout)."""
        stored = self.load_occupancy_map(episode_id)
        if stored is None:
            return None
        grid = stored["grid"]
        return {"episode": episode_id, "resolution": stored["resolution"], "origin": list(stored["origin"]),
                "width": int(grid.shape[1]), "height": int(grid.shape[0]),
                "data_b64": base64.b64encode(np.ascontiguousarray(grid, np.int8).tobytes()).decode()}

    @query_tool("Every waypoint the robot recorded observations at: id, count, mean position, last visit.",
                result="waypoint, observations (count), position [x, y] (mean), last_visit (ISO)")
    def waypoints(self, before: Optional[float] = None) -> list[dict]:
        """Every waypoint the robot recorded observations with a position at (up to ``before``):
        id, count, mean position, last visit (observations stored without a pose are found by
        ``waypoint_observations``, not counted here)."""
        if self._covers_everything(before):
            rows = self._conn().execute("SELECT waypoint_id, n, sx / n AS x, sy / n AS y, last FROM waypoint_stats "
                                        "WHERE n > 0 ORDER BY waypoint_id")
        else:
            rows = self._conn().execute(
                "SELECT waypoint_id, COUNT(*) AS n, AVG(x) AS x, AVG(y) AS y, MAX(t) AS last FROM observations "
                "INDEXED BY obs_t WHERE t <= ? AND waypoint_id != '' AND x IS NOT NULL GROUP BY waypoint_id "
                "ORDER BY waypoint_id",
                (before,))
        return [{"waypoint": r["waypoint_id"], "observations": r["n"], "position": [round(r["x"], 2), round(r["y"], 2)],
                 "last_visit": self.iso(r["last"])} for r in rows]

    @query_tool("Every stored identity with its name and last sighting (up to a time).",
                result="person, name (when named), last_seen (ISO, when seen), doubt (why its sightings may be "
                       "more than one person, when they may)")
    def people(self, before: Optional[float] = None) -> list[dict]:
        """Every stored identity with its display name and last sighting (index lookups only);
        with ``before`` only those seen by then, with their last sighting by then."""
        if self._covers_everything(before):
            rows = self._conn().execute(
                "SELECT i.identity_id, i.display_name, (SELECT MAX(t) FROM sightings s WHERE s.identity_id = "
                "i.identity_id) AS last FROM identities i ORDER BY i.identity_id")
        else:
            rows = self._conn().execute(
                "SELECT i.identity_id, i.display_name, (SELECT MAX(t) FROM sightings s WHERE s.identity_id = "
                "i.identity_id AND s.t <= ?) AS last FROM identities i WHERE last IS NOT NULL ORDER BY i.identity_id",
                (before,))
        doubts = self.identity_doubts(before)
        return [{"person": r["identity_id"], **({"name": r["display_name"]} if r["display_name"] else {}),
                 **({"last_seen": self.iso(r["last"])} if r["last"] else {}),
                 **({"doubt": doubts[r["identity_id"]]} if r["identity_id"] in doubts else {})} for r in rows]

    def recent_positions(self, limit: int) -> list[tuple[float, float, float, bool]]:
        """(x, y, z, has_person) of the newest ``limit`` observations (for map markers)."""
        rows = self._conn().execute("SELECT x, y, z, persons FROM observations WHERE x IS NOT NULL "
                                    "ORDER BY t DESC LIMIT ?", (limit,))
        return [(r["x"], r["y"], r["z"], bool(r["persons"])) for r in rows]
