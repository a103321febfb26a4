"""What the inspector's pages show, read from a memory directory over a read-only SQLite
connection (``mode=ro``: a page view never writes; WAL lets it read while the memory writes).

Every method returns plain dicts (the pages' rows); times are shown in the memory's time zone.
"""
from __future__ import annotations

import datetime as dt
import json
import sqlite3
import threading
from collections import Counter, defaultdict
from pathlib import Path
from typing import Optional
from zoneinfo import ZoneInfo

from ..calendar_windows import day_window
from ..store.image_files import file_in

DB_NAME = "memory.sqlite3"
PAGE_SIZE = 200                 # keyframes per timeline page
MAP_POINTS = 3000               # most keyframe poses, sightings or path points drawn per map (evenly thinned)
QUARTER_S = 900
TABLES = ("episodes", "observations", "regions", "sightings", "identities", "identity_aliases",
          "forgotten_identities", "summaries", "rules", "occupancy_maps")
_OBS = "id, observation_id, t, episode_id, waypoint_id, x, y, z, yaw, frame_id, description, image_path, persons"


class MemoryNotFound(FileNotFoundError):
    pass


def image_size(path: Optional[Path]) -> Optional[tuple[int, int]]:
    """(width, height) of a stored image, None when unreadable."""
    import cv2
    image = cv2.imread(str(path)) if path else None
    return None if image is None else (image.shape[1], image.shape[0])


def normalised_box(row, size: Optional[tuple[int, int]]) -> list[float]:
    """x1, y1, x2, y2 as fractions of the image (boxes are stored in pixels, or already as
    fractions), clipped to it."""
    box = [row["x1"] or 0.0, row["y1"] or 0.0, row["x2"] or 0.0, row["y2"] or 0.0]
    if size and max(box) > 1.5:
        box = [box[0] / size[0], box[1] / size[1], box[2] / size[0], box[3] / size[1]]
    return [round(min(max(v, 0.0), 1.0), 4) for v in box]


class MemoryReader:
    """Read-only views of the memory in ``data_dir`` (one connection per thread)."""

    def __init__(self, data_dir: str | Path, timezone: str = "UTC"):
        self.data_dir = Path(data_dir).expanduser()
        self.db = self.data_dir / DB_NAME
        if not self.db.exists():
            raise MemoryNotFound(f"no memory in {self.data_dir} ({DB_NAME} is missing): is it the memory node's "
                                 f"data_dir? (a stack's memory appears once its memory node has run)")
        self.tz = ZoneInfo(timezone)
        self._local = threading.local()

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5.0, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
        return conn

    def _rows(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        return self._conn().execute(sql, args).fetchall()

    # -- formatting ------------------------------------------------------------------------
    def local(self, t: Optional[float]) -> Optional[dt.datetime]:
        return None if t is None else dt.datetime.fromtimestamp(t, tz=self.tz)

    def newest_time(self) -> Optional[float]:
        return self._conn().execute("SELECT MAX(t) FROM observations").fetchone()[0]

    def day_of(self, t: float) -> str:
        return self.local(t).date().isoformat()

    def day_bounds(self, day: str) -> tuple[float, float]:
        return day_window(dt.date.fromisoformat(day), self.tz)

    def _observation(self, row: sqlite3.Row) -> dict:
        local = self.local(row["t"])
        return {"id": row["observation_id"], "row": row["id"], "t": row["t"], "time": local.isoformat(timespec="seconds"),
                "clock": local.strftime("%H:%M:%S"), "day": local.date().isoformat(), "episode": row["episode_id"],
                "waypoint": row["waypoint_id"] or "", "frame": row["frame_id"] or "",
                "position": None if row["x"] is None else [round(row["x"], 2), round(row["y"], 2), round(row["z"] or 0, 2)],
                "yaw": None if row["yaw"] is None else round(row["yaw"], 3),
                "description": row["description"] or "", "has_image": bool(row["image_path"]),
                "persons": [p for p in (row["persons"] or "").split(",") if p]}

    # -- timeline --------------------------------------------------------------------------
    def _per_local_hour(self, table: str, where: str = "", args: tuple = ()) -> dict[str, Counter]:
        """Rows of ``table`` per local day and hour, counted in SQL per quarter hour of UTC (every
        time zone's offset is a whole number of quarter hours), so a long memory is not read row
        by row."""
        per_day: dict[str, Counter] = defaultdict(Counter)
        for quarter, n in self._rows(f"SELECT CAST(t / {QUARTER_S} AS INTEGER) AS q, COUNT(*) FROM {table} "
                                     f"WHERE t IS NOT NULL {where} GROUP BY q", args):
            local = self.local(quarter * QUARTER_S)
            per_day[local.date().isoformat()][local.hour] += n
        return per_day

    def days(self) -> list[dict]:
        """Every day with keyframes: count and keyframes per hour (0-23)."""
        return [{"day": day, "count": sum(c.values()), "hours": [c.get(h, 0) for h in range(24)]}
                for day, c in sorted(self._per_local_hour("observations").items())]

    def observations(self, day: Optional[str] = None, hour: Optional[int] = None, waypoint: str = "",
                     person: str = "", limit: int = PAGE_SIZE, offset: int = 0) -> list[dict]:
        sql, args = f"SELECT {_OBS} FROM observations WHERE 1", []
        if day:
            sql, args = sql + " AND t >= ? AND t < ?", args + list(self.day_bounds(day))
        if waypoint:
            sql, args = sql + " AND waypoint_id = ?", args + [waypoint]
        if person:
            sql, args = sql + " AND id IN (SELECT obs FROM sightings WHERE identity_id = ?)", args + [person]
        if day and hour is not None:     # the local hour of each keyframe (a DST day has 23 or 25 hours)
            rows = [r for r in self._rows(sql + " ORDER BY t", tuple(args)) if self.local(r["t"]).hour == hour]
            return [self._observation(r) for r in rows[offset:offset + limit]]
        return [self._observation(r) for r in self._rows(sql + " ORDER BY t LIMIT ? OFFSET ?",
                                                         tuple(args + [limit, offset]))]

    def observations_by_id(self, observation_ids: list[str]) -> list[dict]:
        """The list records (no boxes: nothing decoded) of ``observation_ids`` that exist, in order."""
        if not observation_ids:
            return []
        rows = {r["observation_id"]: r for r in self._rows(
            f"SELECT {_OBS} FROM observations WHERE observation_id IN ({','.join('?' * len(observation_ids))})",
            tuple(observation_ids))}
        return [self._observation(rows[i]) for i in observation_ids if i in rows]

    def observation(self, observation_id: str) -> Optional[dict]:
        """One observation with its sightings (boxes) and regions, boxes as fractions of the image."""
        row = self._conn().execute(f"SELECT {_OBS} FROM observations WHERE observation_id = ?",
                                   (observation_id,)).fetchone()
        if row is None:
            return None
        obs = self._observation(row)
        names = self.names()
        size = image_size(self._inside(row["image_path"])) if row["image_path"] else None
        box = lambda r: normalised_box(r, size)  # noqa: E731
        obs["sightings"] = [{"id": s["id"], "person": s["identity_id"] or "", "name": names.get(s["identity_id"], ""),
                             "box": box(s), "confidence": s["confidence"],
                             "activity": s["activity"] or "", "clothing": s["clothing"] or "",
                             "position": None if s["px"] is None else [round(s["px"], 2), round(s["py"], 2)]}
                            for s in self._rows("SELECT * FROM sightings WHERE obs = ? ORDER BY id", (row["id"],))]
        obs["regions"] = [{"label": r["label"] or "", "score": r["score"], "box": box(r)}
                          for r in self._rows("SELECT label, score, x1, y1, x2, y2 FROM regions WHERE obs = ?",
                                              (row["id"],))]
        return obs

    def image_path(self, observation_id: str) -> Optional[Path]:
        row = self._conn().execute("SELECT image_path FROM observations WHERE observation_id = ?",
                                   (observation_id,)).fetchone()
        return self._inside(row["image_path"]) if row and row["image_path"] else None

    def crop_of(self, sighting_id: int) -> Optional[tuple[Path, Optional[list[float]]]]:
        """A sighting's stored crop (path, None), else its keyframe and the box to cut from it
        (fractions of the image)."""
        row = self._conn().execute("SELECT s.crop_path, s.x1, s.y1, s.x2, s.y2, o.image_path FROM sightings s JOIN "
                                   "observations o ON o.id = s.obs WHERE s.id = ?", (sighting_id,)).fetchone()
        if row is None:
            return None
        if row["crop_path"] and (crop := self._inside(row["crop_path"])):
            return crop, None
        image = self._inside(row["image_path"]) if row["image_path"] else None
        return (image, normalised_box(row, image_size(image))) if image else None

    def _inside(self, path: str) -> Optional[Path]:
        return file_in(self.data_dir, path)

    def waypoint_ids(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT DISTINCT waypoint_id FROM observations WHERE waypoint_id IS NOT NULL "
                                         "AND waypoint_id != '' ORDER BY waypoint_id")]

    # -- people ----------------------------------------------------------------------------
    def names(self) -> dict[str, str]:
        return {r[0]: r[1] for r in self._rows("SELECT identity_id, display_name FROM identities") if r[1]}

    def identities(self, person: Optional[str] = None) -> list[dict]:
        """Each identity (or only ``person``) with first/last seen and its sighting count."""
        where, args = ("WHERE i.identity_id = ?", (person,)) if person is not None else ("", ())
        return [{"person": r["identity_id"], "name": r["display_name"] or "", "sightings": r["n"],
                 "first": self._fmt(r["first"]), "last": self._fmt(r["last"])}
                for r in self._rows("SELECT i.identity_id, i.display_name, COUNT(s.id) AS n, MIN(s.t) AS first, "
                                    "MAX(s.t) AS last FROM identities i LEFT JOIN sightings s ON s.identity_id = "
                                    f"i.identity_id {where} GROUP BY i.identity_id ORDER BY i.identity_id", args)]

    def identity_changes(self, limit: int = 200) -> list[dict]:
        """The journal of identity changes (merges, splits, undos, the operator's reviews), newest first."""
        return [{"change": r["id"], "time": self._fmt(r["t"]), "kind": r["kind"], "source": r["source"],
                 "target": r["target"], "sightings": len(json.loads(r["sightings"] or "[]")),
                 "undone": self._fmt(r["undone"]) if r["undone"] is not None else ""}
                for r in self._rows("SELECT * FROM identity_changes ORDER BY id DESC LIMIT ?", (limit,))]

    def display_names(self) -> dict[str, str]:
        """Identity id -> the operator's name, named identities only."""
        return {r[0]: r[1] for r in self._rows("SELECT identity_id, display_name FROM identities WHERE display_name != ''")}

    def unidentified_sightings(self) -> int:
        return self._conn().execute("SELECT COUNT(*) FROM sightings WHERE COALESCE(identity_id, '') = ''").fetchone()[0]

    def best_crops(self, person: str, n: int) -> list[dict]:
        """The most confident sightings with a crop or a keyframe still stored."""
        return [{"sighting": b["id"], "observation": b["observation_id"]} for b in self._rows(
            "SELECT s.id, o.observation_id FROM sightings s JOIN observations o ON o.id = s.obs WHERE s.identity_id = ? "
            "AND (COALESCE(s.crop_path, '') != '' OR COALESCE(o.image_path, '') != '') "
            "ORDER BY COALESCE(s.confidence, 0) DESC, s.t DESC LIMIT ?", (person, n))]

    def identity(self, person: str, crops: int = 6) -> Optional[dict]:
        found = self.identities(person)
        if not found:
            return None
        ident = found[0]
        per_day = self._per_local_hour("sightings", "AND identity_id = ?", (person,))
        ident["per_day"] = sorted((day, sum(hours.values())) for day, hours in per_day.items())
        ident["crops"] = self.best_crops(person, crops)
        ident["aliases"] = [r[0] for r in self._rows("SELECT alias_id FROM identity_aliases WHERE identity_id = ?",
                                                     (person,))]
        return ident

    def identity_named(self, name: str, other_than: str = "") -> Optional[str]:
        """The identity called ``name`` (any case; the lowest id if several), ``other_than`` excepted."""
        if not name:
            return None
        rows = self._rows("SELECT identity_id FROM identities WHERE lower(display_name) = lower(?) AND "
                          "display_name != '' AND identity_id != ? ORDER BY identity_id LIMIT 1", (name, other_than))
        return rows[0][0] if rows else None

    def _fmt(self, t: Optional[float]) -> str:
        return self.local(t).strftime("%Y-%m-%d %H:%M") if t is not None else ""

    # -- map -------------------------------------------------------------------------------
    def _thinned(self, sql: str, args: tuple, limit: int) -> tuple[list[sqlite3.Row], int]:
        """The rows of ``sql`` (a SELECT with a ``t`` column) in time order; when there are more
        than ``limit``, ``limit`` of them evenly spread, the first and the newest among them (a
        path ends where the person was last seen). And how many there are (one statement)."""
        rows = self._rows(f"SELECT * FROM (SELECT *, ROW_NUMBER() OVER (ORDER BY t) - 1 AS rn_, COUNT(*) OVER () AS "
                          f"total_ FROM ({sql})) WHERE total_ <= ? OR rn_ = 0 OR rn_ = total_ - 1 OR (rn_ * ?) / total_ != "
                          f"((rn_ - 1) * ?) / total_ ORDER BY t", (*args, limit, limit - 1, limit - 1))
        return rows, (rows[0]["total_"] if rows else 0)

    def map_points(self, day: str = "", person: str = "", limit: int = MAP_POINTS) -> dict:
        """Observation positions (with time), sighting positions (with person), waypoints (mean
        position) and a person's path over the day, all in the stored frame; at most ``limit``
        of each, evenly thinned (``counts`` says how many there are)."""
        where, args = "", ()
        if day:
            where, args = " AND t >= ? AND t < ?", self.day_bounds(day)
        obs_rows, n_obs = self._thinned(f"SELECT observation_id, x, y, t, frame_id FROM observations WHERE x IS NOT "
                                        f"NULL{where}", args, limit)
        obs = [{"id": r["observation_id"], "x": r["x"], "y": r["y"], "t": r["t"], "frame": r["frame_id"] or ""}
               for r in obs_rows]
        sighting_sql = f"SELECT identity_id, px, py, t FROM sightings WHERE px IS NOT NULL{where}"
        rows, n_sightings = self._thinned(sighting_sql, args, limit)
        sightings = [{"person": r["identity_id"] or "", "x": r["px"], "y": r["py"], "t": r["t"]} for r in rows]
        path = []
        if person:
            rows, _ = self._thinned(sighting_sql + " AND identity_id = ?", (*args, person), limit)
            path = [{"person": person, "x": r["px"], "y": r["py"], "t": r["t"]} for r in rows]
        waypoints = [{"id": r[0], "x": r[1], "y": r[2], "n": r[3]} for r in self._rows(
            "SELECT waypoint_id, AVG(x), AVG(y), COUNT(*) FROM observations WHERE x IS NOT NULL AND waypoint_id "
            "IS NOT NULL AND waypoint_id != '' GROUP BY waypoint_id ORDER BY waypoint_id")]
        frames = [r[0] for r in self._rows(f"SELECT DISTINCT frame_id FROM observations WHERE x IS NOT NULL AND "
                                           f"COALESCE(frame_id, '') != ''{where} ORDER BY frame_id", args)]
        return {"observations": obs, "sightings": sightings, "waypoints": waypoints, "path": path, "frames": frames,
                "counts": {"observations": n_obs, "sightings": n_sightings}}

    def occupancy_maps(self) -> list[dict]:
        return [{"episode": r[0], "resolution": r[1], "origin": [r[2], r[3]], "width": r[4], "height": r[5]}
                for r in self._rows("SELECT episode_id, resolution, origin_x, origin_y, width, height FROM "
                                    "occupancy_maps ORDER BY updated DESC")]

    def occupancy_grid(self, episode: str):
        import numpy as np
        row = self._conn().execute("SELECT width, height, data FROM occupancy_maps WHERE episode_id = ?",
                                   (episode,)).fetchone()
        if row is None:
            return None
        return np.frombuffer(row["data"], dtype=np.int8).reshape(row["height"], row["width"])

    # -- exploration and health ------------------------------------------------------------
    def episodes(self) -> list[dict]:
        counts = {r[0]: r[1] for r in self._rows("SELECT episode_id, COUNT(*) FROM observations GROUP BY episode_id")}
        maps = {m["episode"] for m in self.occupancy_maps()}
        return [{"episode": r["episode_id"], "name": r["name"] or "", "world": r["world"] or "",
                 "start": self._fmt(r["start"]), "end": self._fmt(r["end"]), "observations": counts.get(r["episode_id"], 0),
                 "has_map": r["episode_id"] in maps}
                for r in self._rows("SELECT * FROM episodes ORDER BY start")]

    def episode_path(self, episode: str) -> list[dict]:
        """An episode's keyframe positions in time order (the exploration page's path)."""
        rows, _ = self._thinned("SELECT x, y, t FROM observations WHERE episode_id = ? AND x IS NOT NULL",
                                (episode,), MAP_POINTS)
        return [{"x": r[0], "y": r[1], "t": r[2]} for r in rows]

    def rules(self) -> list[dict]:
        return [{"kind": r["kind"] or "", "key": r["key"] or "", "condition": r["condition"] or "",
                 "action": r["action"] or "", "episode": r["episode_id"] or ""}
                for r in self._rows("SELECT kind, key, condition, action, episode_id FROM rules ORDER BY created")]

    def health(self) -> dict:
        """Rows per table, bytes on disk per file, schema version and vector snapshot state."""
        rows = {}
        for table in TABLES:
            try:
                rows[table] = self._conn().execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            except sqlite3.OperationalError:      # a table an older schema lacks
                rows[table] = None
        meta = {r[0]: r[1] for r in self._rows("SELECT key, value FROM meta")}
        files = sorted(((p.name, p.stat().st_size) for p in self.data_dir.iterdir() if p.is_file()),
                       key=lambda f: -f[1])
        folders = {p.name: sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
                   for p in self.data_dir.iterdir() if p.is_dir()}      # images/, identities/
        vectors = {kind: self._conn().execute(f"SELECT COUNT(*) FROM observations WHERE {kind}_emb IS NOT NULL")
                   .fetchone()[0] for kind in ("text", "image")}
        t = self._conn().execute("SELECT MIN(t), MAX(t) FROM observations").fetchone()
        return {"rows": rows, "meta": meta, "files": files, "folders": folders,
                "bytes_on_disk": sum(size for _, size in files) + sum(folders.values()),
                "rows_with_vectors": vectors, "oldest": self._fmt(t[0]), "newest": self._fmt(t[1]),
                "snapshots": sorted(p.name for p in self.data_dir.glob("*.faiss"))}

    def remaining_of(self, person: str, aliases: list[str] = ()) -> dict:
        """What still names ``person`` (or its aliases) after a forget: every count should be 0."""
        ids = [person, *aliases]
        marks = ",".join("?" * len(ids))
        likes = " OR ".join("',' || persons || ',' LIKE ?" for _ in ids)
        return {"identities": self._conn().execute(f"SELECT COUNT(*) FROM identities WHERE identity_id IN ({marks})",
                                                   ids).fetchone()[0],
                "sightings": self._conn().execute(f"SELECT COUNT(*) FROM sightings WHERE identity_id IN ({marks})",
                                                  ids).fetchone()[0],
                "observations listing it": self._conn().execute(
                    f"SELECT COUNT(*) FROM observations WHERE {likes}", [f"%,{i},%" for i in ids]).fetchone()[0],
                "summaries": self._conn().execute(f"SELECT COUNT(*) FROM summaries WHERE identity_id IN ({marks})",
                                                  ids).fetchone()[0]}

    def ingest_rates(self) -> list[dict]:
        """Keyframes and sightings per hour over the newest day with data (what ingest kept)."""
        days = self.days()
        if not days:
            return []
        day = days[-1]["day"]
        sightings = self._per_local_hour("sightings", "AND t >= ? AND t < ?", self.day_bounds(day)).get(day, Counter())
        return [{"day": day, "hour": h, "keyframes": n, "sightings": sightings.get(h, 0)}
                for h, n in enumerate(days[-1]["hours"]) if n]
