"""Person identity: pseudonymous ids for people, from face embeddings that do not chain,
short-term tracks and same-day body re-ID; ids stable across restarts.

Online assignment, one keyframe at a time (``assign_frame``), from the face-clustering and
multi-object-tracking literature rather than single-link growth:
1. **Tracks** (``people.tracks``): a sighting close in time and place to one of the previous
   keyframes' continues its track; a track's faces vote together and a faceless or poorly
   seen sighting in a track inherits its identity.
2. **Faces, quality-gated**: a face smaller than ``min_face_px`` never opens an identity nor
   joins an identity's exemplars; it is matched only at the stricter ``eps_low_quality``.  A
   face's distance to an identity is 1 - the mean of its ``k`` highest cosine similarities to
   that identity's exemplars (k-nearest average linkage: one stray exemplar cannot pull a
   stranger in).
3. **Cannot-link**: the sightings of one keyframe are assigned jointly (Hungarian), so two
   people in one keyframe are never one identity, and every pair of identities seen together
   is remembered: they are never merged.
4. **Merges by average linkage**: an identity with ``min_samples`` exemplars is merged into
   another whose exemplars are, on average, within ``merge_eps`` (the centroid distance) and
   that was never seen beside it; the oldest id survives, the others are reported (``merged``)
   so the memory relabels them.  Merges a face bridged under single-link DBSCAN (HUMEMBR's
   first stage) do not happen.
5. **Body re-ID** only within ``reid_window_s`` (people change clothes between days) and for
   body boxes at least ``reid_min_px`` tall: a sighting without a usable face outside any track
   matches the nearest identity's recent re-ID embeddings under ``reid_threshold``.
Consolidation (``people.consolidation``) later re-clusters the stored sightings and applies
merges and splits that need the whole history.

Crash safety: with a ``path``, every assignment's input is appended to a journal; ``sync``
(called before anything is published) makes it durable; ``save`` writes a snapshot and
empties the journal, and loading replays the journal on the snapshot (assignment is
deterministic, tracks included) and snapshots again (one file, fsync'd), so after ``kill -9``
no id is issued twice; every merge so far is kept (``merge_log``) for the caller to send again
after a start.  The state is locked: a second manager on the same directory fails (after
``lock_wait_s``).

Forgetting (``forget``) removes an identity's face points and re-ID embeddings and snapshots
at once (the forgotten points leave the journal too). With ``suppress`` its face points are
kept, without any id, in a do-not-record bank: a later face within ``eps`` of them is assigned
to nobody (``via="suppressed"``) and the caller drops that sighting; without it the person is
simply unknown again and gets a fresh id.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Optional

import numpy as np

from ..config import ConfigError
from .tracks import Track, TrackBook, TrackParams

log = logging.getLogger(__name__)
JOURNAL = "identities.journal"
SNAPSHOT = "identities.npz"
TRACK_BASE = 2 ** 20                 # track numbers of a fresh state: a random multiple of this (never 1, 2, ...)


@dataclass(frozen=True)
class IdentityParams:
    eps: float = 0.52                 # max face distance to join an identity (1 - mean of the k best cosines)
    min_samples: int = 3              # exemplars before an identity may merge or be merged
    reid_threshold: float = 0.1       # max cosine distance for a faceless re-ID match (generic
                                      # MobileNetV2 features put different people at 0.12-0.3)
    reid_memory: int = 50             # re-ID embeddings kept per identity
    max_face_points: int = 20000      # oldest face points are forgotten beyond this
    max_suppressed_points: int = 5000  # do-not-record face points of forgotten people (oldest go first)
    id_prefix: str = "person_"
    k: int = 3                        # exemplars averaged for a face's distance to an identity
    merge_eps: float = 0.40           # max centroid (average-linkage) distance for an online merge
    min_face_px: float = 16.0         # a smaller face (its box's shorter side) opens no identity, adds no exemplar
    eps_low_quality: float = 0.45     # ... and joins an identity only this close
    min_match_face_px: float = 12.0   # a face smaller still is no evidence (matches, and contradicts, nobody): on
                                      # the benchmark worlds SFace put 12-16 px faces within 0.45 of the right person
                                      # only, and under 12 px 5 of 38 of those within 0.40 on someone else
    track_eps: float = 0.65           # a track's face within this of the track's identity keeps it
    reid_window_s: float = 12 * 3600.0  # body re-ID is evidence within this long only (clothes change daily)
    reid_min_px: float = 120.0        # ... and only for a body box this tall (pixels): the generic features of a
                                      # person 6 m away (a 100 px box) match anyone
    max_exemplars: int = 300          # face points kept per identity (the oldest go first)

    def validate(self) -> None:
        if not (0 < self.eps < 2 and 0 < self.merge_eps < 2 and 0 < self.eps_low_quality < 2 and
                0 < self.track_eps < 2):
            raise ValueError("identity eps, merge_eps, eps_low_quality, track_eps: cosine distances in (0, 2)")
        if self.min_samples < 1 or self.k < 1 or self.max_exemplars < self.k or self.min_face_px < 0:
            raise ValueError("identity min_samples, k >= 1; max_exemplars >= k; min_face_px >= 0")
        if not 0 <= self.min_match_face_px <= self.min_face_px:
            raise ValueError("identity min_match_face_px: in [0, min_face_px]")
        if not self.reid_window_s > 0 or not 0 <= self.reid_threshold < 2 or self.reid_min_px < 0:
            raise ValueError("identity reid_window_s > 0, reid_threshold a cosine distance in [0, 2), "
                             "reid_min_px >= 0")


@dataclass
class Evidence:
    """What perception saw of one person in one keyframe (the identity manager's input)."""
    face: Optional[np.ndarray] = None           # face embedding
    reid: Optional[np.ndarray] = None           # body appearance embedding
    face_px: float = 0.0                        # the face box's shorter side (quality); 0: unknown
    position: Optional[tuple[float, float]] = None   # where they stood (fixed frame), for tracking
    box: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)

    def to_json(self) -> dict:
        return {"face": None if self.face is None else self.face.tolist(),
                "reid": None if self.reid is None else self.reid.tolist(), "q": self.face_px,
                "p": None if self.position is None else list(self.position), "b": list(self.box)}

    @classmethod
    def from_json(cls, d: dict) -> "Evidence":
        return cls(np.asarray(d["face"], np.float32) if d.get("face") else None,
                   np.asarray(d["reid"], np.float32) if d.get("reid") else None, float(d.get("q", 0.0)),
                   tuple(d["p"]) if d.get("p") else None, tuple(d.get("b", (0, 0, 0, 0))))


@dataclass
class Assignment:
    identity_id: str                  # "" when unresolved
    confidence: float
    via: str                          # face | track | reid | none | suppressed
    merged: list[tuple[str, str]] = field(default_factory=list)  # (absorbed id, surviving id)
    track_id: int = 0                 # the short-term track (0: no tracking)


def face_px(face_box) -> float:
    """A face's size for quality gating: its box's shorter side in pixels (0: no box, size unknown)."""
    return float(min(face_box[2] - face_box[0], face_box[3] - face_box[1])) if face_box is not None else 0.0


def clear_face(px: float, min_face_px: float) -> bool:
    """A face clear enough to open an identity, be an exemplar or place a consolidation track:
    at least ``min_face_px`` on its shorter side, or of unknown size (0: an older memory)."""
    return px <= 0 or px >= min_face_px


def unit_vector(vec) -> Optional[np.ndarray]:
    if vec is None or not np.size(vec):
        return None
    v = np.asarray(vec, dtype=np.float32).reshape(-1)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


class IdentityManager:
    """Thread-safe; ``path`` (a directory) makes ids survive restarts."""

    def __init__(self, params: IdentityParams = IdentityParams(), path: Optional[str | Path] = None,
                 lock_wait_s: float = 60.0, tracks: TrackParams = TrackParams()):
        params.validate()
        self.params = params
        self.path = Path(path).expanduser() if path else None
        self._lock = threading.Lock()
        self._face_rows = np.zeros((0, 0), dtype=np.float32)  # face exemplars (unit rows), spare rows at the end
        self._n = 0                                           # exemplars in use (``_faces``)
        self._labels = np.zeros(0, dtype=np.int64)            # cluster per face point
        self._sums: dict[int, np.ndarray] = {}                # cluster -> sum of its exemplars (average linkage)
        self._counts: dict[int, int] = {}                     # cluster -> its exemplars
        self._clusters: dict[int, str] = {}                   # cluster -> identity id
        self._reid: dict[str, list[tuple[Optional[float], np.ndarray]]] = {}   # identity -> recent (t, re-ID)
        self._suppressed = np.zeros((0, 0), dtype=np.float32)  # faces of forgotten people (no id)
        self._cannot: set[tuple[str, str]] = set()            # identity pairs seen in one keyframe
        # track numbers reach the memory (sightings.track): a fresh state starts at a random base (saved at
        # once), so a lost state or another perception node never continues tracks the memory holds
        self._tracks = TrackBook(tracks, first_id=TRACK_BASE * (1 + secrets.randbits(30)))
        self._next = 1
        self._journal = None
        self._seq = 0                                         # journal entries applied
        self.merge_log: list[tuple[str, str]] = []            # every merge so far (re-sent after a start)
        self.change_log: list[dict] = []                      # consolidation's moves (re-sent after a start)
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
            self._lock_file = open(self.path / "identities.lock", "w")
            deadline = time.monotonic() + lock_wait_s   # a stopping node may still hold it a while
            while True:
                try:
                    fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if time.monotonic() > deadline:
                        raise IdentityStateBusy(f"{self.path} is used by another perception node (one identity "
                                                "state per data_dir: give each its own data_dir)") from exc
                    time.sleep(0.2)
            fresh = not self._load()
            replayed = self._replay_journal()
            self._journal = open(self.path / JOURNAL, "a", encoding="utf-8")
            if replayed or fresh:   # a clean snapshot and an empty journal (a torn last line must not stay);
                self._save_locked()  # a fresh state's track base durable before any track is published

    # -- persistence -----------------------------------------------------------------------
    @staticmethod
    def read_snapshot(path: str | Path) -> Optional[tuple[dict, dict]]:
        """(meta, arrays) of the snapshot in ``path``, None if there is none (also for inspection)."""
        path = Path(path)
        if not (path / SNAPSHOT).exists():
            return None
        with np.load(path / SNAPSHOT) as data:
            arrays = {k: data[k] for k in data.files}
        if "meta" in arrays:
            meta = json.loads(str(arrays.pop("meta")))
        else:   # written before the snapshot was one file
            meta = json.loads((path / "identities.json").read_text())
        return meta, arrays

    def _load(self) -> bool:
        """The snapshot's state, if there is one (False: a fresh state)."""
        snapshot = self.read_snapshot(self.path)
        if snapshot is None:
            return False
        meta, data = snapshot
        self._faces = data["faces"].astype(np.float32)
        self._labels = data["labels"].astype(np.int64)
        self._clusters = {int(k): v for k, v in meta["clusters"].items()}
        self._recount()
        self._next = int(meta["next"])
        self._seq = int(meta.get("seq", 0))
        self._reid = {k: [(t, np.asarray(v, np.float32)) for t, v in
                          (e if isinstance(e, list) and len(e) == 2 and isinstance(e[1], list) else (None, e)
                           for e in vs)] for k, vs in meta.get("reid", {}).items()}
        self._cannot = {tuple(pair) for pair in meta.get("cannot_link", [])}
        for d in meta.get("tracks", []):
            self._tracks.tracks.append(Track(d["id"], d["t"], tuple(d["p"]) if d.get("p") else None,
                                             tuple(d["b"]), d.get("identity", ""), d.get("n", 0),
                                             beside=set(d.get("beside", []))))
        if int(meta.get("next_track", 0)) >= TRACK_BASE:     # (an older state numbered from 1: a random base now)
            self._tracks._next = int(meta["next_track"])
        if "suppressed" in data:
            self._suppressed = data["suppressed"].astype(np.float32)
        self.merge_log = [tuple(m) for m in meta.get("merges", [])]
        self.change_log = list(meta.get("changes", []))
        log.info("loaded %d identities (%d face points) from %s", len(set(self._clusters.values())),
                 len(self._labels), self.path)
        return True

    def _replay_journal(self) -> bool:
        """Apply the journal's entries newer than the snapshot; True if there was anything."""
        journal = self.path / JOURNAL
        if not journal.exists() or journal.stat().st_size == 0:
            return False
        replayed = 0
        for line in journal.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                log.warning("identity journal %s: a torn last entry ignored", journal)
                break
            if entry.get("n", 0) <= self._seq:
                continue   # already in the snapshot (a crash between snapshot and new journal)
            if "frame" in entry:
                self._assign_frame(entry.get("t"), [Evidence.from_json(e) for e in entry["frame"]])
            else:          # written before frames were journalled whole: one sighting
                self._assign_frame(None, [Evidence.from_json(entry)])
            self._seq = entry["n"]
            replayed += 1
        log.info("replayed %d identity journal entries (next id %d)", replayed, self._next)
        return True

    def _append(self, entry: dict) -> None:
        """Durable before the caller sees the result (an id is never reissued after a crash)."""
        if self._journal is None:
            return
        self._seq += 1
        entry["n"] = self._seq
        self._journal.write(json.dumps(entry, separators=(",", ":")) + "\n")

    def sync(self) -> None:
        """Make every assignment so far durable (before its ids are published)."""
        with self._lock:
            if self._journal is not None:
                self._journal.flush()
                os.fsync(self._journal.fileno())

    def save(self) -> None:
        if self.path is None:
            return
        with self._lock:
            self._save_locked()

    def _save_locked(self) -> None:
        """One file, replaced atomically and fsync'd before the journal is emptied."""
        self.path.mkdir(parents=True, exist_ok=True)
        meta = {"clusters": {str(k): v for k, v in self._clusters.items()}, "next": self._next, "seq": self._seq,
                "reid": {k: [[t, v.tolist()] for t, v in vs] for k, vs in self._reid.items()},
                "merges": [list(m) for m in self.merge_log], "changes": self.change_log,
                "cannot_link": sorted(list(p) for p in self._cannot),
                "tracks": [{"id": t.track_id, "t": t.t, "p": list(t.position) if t.position else None,
                            "b": list(t.box), "identity": t.identity_id, "n": t.sightings, "beside": sorted(t.beside)}
                           for t in self._tracks.tracks],
                "next_track": self._tracks._next}
        tmp = self.path / f"{SNAPSHOT}.tmp"
        with open(tmp, "wb") as f:
            np.savez(f, faces=self._faces, labels=np.asarray(self._labels, dtype=np.int64),
                     suppressed=self._suppressed, meta=np.array(json.dumps(meta)))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path / SNAPSHOT)
        directory = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        (self.path / "identities.json").unlink(missing_ok=True)   # the old two-file format
        if self._journal is not None:   # the snapshot holds everything: start a new journal
            self._journal.close()
            self._journal = open(self.path / JOURNAL, "w", encoding="utf-8")

    # -- exemplars -------------------------------------------------------------------------
    @property
    def _faces(self) -> np.ndarray:
        return self._face_rows[:self._n]

    @_faces.setter
    def _faces(self, rows: np.ndarray) -> None:
        self._face_rows = np.asarray(rows, dtype=np.float32)
        self._n = len(self._face_rows) if self._face_rows.size else 0

    def _append_face(self, face: np.ndarray) -> None:
        """One exemplar more, amortised O(1) (spare rows double when full)."""
        if self._n == 0 and self._face_rows.shape[1:] != face.shape:
            self._face_rows = np.zeros((16, face.shape[0]), np.float32)
        elif self._n == len(self._face_rows):
            spare = np.zeros((max(16, self._n), face.shape[0]), np.float32)
            self._face_rows = np.vstack([self._face_rows[:self._n], spare])
        self._face_rows[self._n] = face
        self._n += 1

    def _recount(self) -> None:
        """Each cluster's exemplar sum and count from scratch (after a load, rebuild or forget)."""
        self._sums, self._counts = {}, {}
        for c in np.unique(self._labels):
            rows = self._faces[self._labels == c]
            self._sums[int(c)], self._counts[int(c)] = rows.sum(axis=0, dtype=np.float64), len(rows)

    # -- assignment --------------------------------------------------------------------------
    @property
    def identities(self) -> list[str]:
        return sorted(set(self._clusters.values()))

    def cannot_link(self, a: str, b: str) -> bool:
        """True when ``a`` and ``b`` were seen in one keyframe (two people)."""
        return (min(a, b), max(a, b)) in self._cannot

    def _new_identity(self) -> str:
        ident = f"{self.params.id_prefix}{self._next:04d}"
        self._next += 1
        return ident

    def assign(self, face_embedding=None, reid_embedding=None) -> Assignment:
        """One sighting on its own (no keyframe, no track, re-ID without a time window)."""
        return self.assign_frame(None, [Evidence(unit_vector(face_embedding), unit_vector(reid_embedding))])[0]

    def assign_frame(self, t: Optional[float], sightings: list[Evidence]) -> list[Assignment]:
        """Identities for the people of one keyframe at time ``t`` (None: untracked), jointly."""
        sightings = [Evidence(unit_vector(e.face), unit_vector(e.reid), e.face_px, e.position, e.box) for e in sightings]
        with self._lock:
            results = self._assign_frame(t, sightings)
            if any(r.via not in ("none", "suppressed") for r in results) or any(e.reid is not None for e in sightings):
                self._append({"t": t, "frame": [e.to_json() for e in sightings]})
            return results

    def _good(self, e: Evidence) -> bool:
        return e.face is not None and clear_face(e.face_px, self.params.min_face_px)

    def _face_distances(self, face: np.ndarray, idents: list[str]) -> np.ndarray:
        """1 - mean of the k best cosines to each identity's exemplars (inf where it has none)."""
        out = np.full(len(idents), np.inf)
        if self._faces.size == 0 or face.shape[0] != self._faces.shape[1]:
            return out
        index = {ident: j for j, ident in enumerate(idents)}
        column = np.full(max(self._clusters, default=0) + 1, -1, np.int64)   # cluster -> its identity's column
        for c, ident in self._clusters.items():
            column[c] = index.get(ident, -1)
        cols = column[self._labels]
        wanted = cols >= 0
        cols, sims = cols[wanted], (self._faces @ face)[wanted]
        if not len(cols):
            return out
        # one row per identity (its exemplars' cosines, -inf padded), then each row's k best: O(N)
        order = np.argsort(cols.astype(np.int32), kind="stable")
        cols, sims = cols[order], sims[order].astype(np.float64)
        per_ident = np.bincount(cols, minlength=len(idents))
        first = np.concatenate([[0], np.cumsum(per_ident)[:-1]])
        table = np.full((len(idents), int(per_ident.max())), -np.inf)
        table[cols, np.arange(len(cols)) - first[cols]] = sims
        k = min(self.params.k, table.shape[1])
        best = -np.partition(-table, k - 1, axis=1)[:, :k]
        n = np.minimum(per_ident, k)
        total = np.where(np.isfinite(best), best, 0.0).sum(axis=1)
        out[n > 0] = 1.0 - total[n > 0] / n[n > 0]
        return out

    def _assign_frame(self, t: Optional[float], sightings: list[Evidence]) -> list[Assignment]:
        from scipy.optimize import linear_sum_assignment
        p = self.params
        sightings = [replace(e, reid=None) if e.reid is not None and 0 < e.box[3] - e.box[1] < p.reid_min_px else e
                     for e in sightings]     # too small a body to tell people apart by (journalled as given)
        for e in sightings:
            if e.face is not None and self._faces.size and e.face.shape[0] != self._faces.shape[1]:
                raise ValueError(f"face embedding has {e.face.shape[0]} values, earlier ones {self._faces.shape[1]}")
        results: list[Optional[Assignment]] = [None] * len(sightings)
        for i, e in enumerate(sightings):     # however small the face: a forgotten person is not recorded
            if self.suppressed(e.face):
                results[i] = Assignment("", 0.0, "suppressed")
        sightings = [replace(e, face=None) if e.face is not None and 0 < e.face_px < p.min_match_face_px else e
                     for e in sightings]     # too small a face to tell people apart by (journalled as given)
        live = [i for i in range(len(sightings)) if results[i] is None]
        tracks = dict(zip(live, self._tracks.associate(t, [(sightings[i].position, sightings[i].box) for i in live])))\
            if t is not None else {}
        idents = self.identities
        taken: set[str] = set()
        # 1. faces, jointly (one identity per person of the keyframe)
        faced = [i for i in live if sightings[i].face is not None]
        if faced and idents:
            dist = np.stack([self._face_distances(sightings[i].face, idents) for i in faced])
            limit = np.array([p.eps if self._good(sightings[i]) else p.eps_low_quality for i in faced])[:, None]
            cost = np.where(dist <= limit, dist, 10.0)
            for row, i in enumerate(faced):   # a track's own identity is preferred on a tie
                track = tracks.get(i)
                if track is not None and track.identity_id in idents:
                    col = idents.index(track.identity_id)
                    if cost[row, col] < 10.0:
                        cost[row, col] -= 0.05
            for row, col in zip(*linear_sum_assignment(cost)):
                if cost[row, col] < 10.0:
                    i = faced[row]
                    results[i] = Assignment(idents[col], float(1.0 - dist[row, col]), "face")
                    taken.add(idents[col])
        # 2. a track keeps its identity (a face of it close enough, a poor face or none)
        for i in live:
            track = tracks.get(i)
            if results[i] is not None or track is None or not track.identity_id or track.identity_id in taken:
                continue
            e = sightings[i]
            if e.face is not None and self._good(e):
                d = float(self._face_distances(e.face, [track.identity_id])[0])
                if d > p.track_eps:
                    continue   # a clear face of someone else: the track was wrong
            results[i] = Assignment(track.identity_id, 0.5, "track")
            taken.add(track.identity_id)
        # 3. a clear face of nobody known opens an identity
        for i in live:
            if results[i] is None and self._good(sightings[i]):
                results[i] = Assignment(self._new_identity(), 0.5, "face")
                taken.add(results[i].identity_id)
        # 4. body re-ID, same day only
        for i in live:
            if results[i] is None:
                results[i] = self._assign_reid(sightings[i], t, taken) if sightings[i].reid is not None \
                    else Assignment("", 0.0, "none")
                taken.add(results[i].identity_id)
        # bookkeeping: exemplars, re-ID banks, tracks, cannot-links, merges
        for i in live:
            r, e = results[i], sightings[i]
            track = tracks.get(i)
            if track is not None:
                r.track_id = track.track_id
            if not r.identity_id:
                continue
            if self._good(e) and r.via in ("face", "track"):
                self._add_exemplar(r.identity_id, e.face)
            if e.reid is not None:
                bank = self._reid.setdefault(r.identity_id, [])
                bank.append((t, e.reid))
                del bank[:-p.reid_memory]
            if track is not None:
                track.identity_id = r.identity_id
        present = sorted({r.identity_id for r in results if r is not None and r.identity_id})
        for x in range(len(present)):
            for y in range(x + 1, len(present)):
                self._cannot.add((present[x], present[y]))
        for i in live:      # a track's unidentified sightings are its identity's (the memory fills the lone ones)
            track, ident = tracks.get(i), results[i].identity_id
            if track is None:
                continue
            if not ident:
                track.beside.update(present)          # whoever stood beside it meanwhile is someone else
            elif track.beside:
                for other in track.beside - {ident}:
                    self._cannot.add((min(ident, other), max(ident, other)))
                track.beside = set()
        merged = self._merge_candidates({r.identity_id for r in results if r.identity_id and r.via == "face"})
        for absorbed, survivor in merged:
            for r in results:
                if r.identity_id == absorbed:
                    r.identity_id = survivor
        if merged:
            for r in results:
                if r.identity_id:
                    r.merged = list(merged)
                    break
        return [r for r in results]

    def _add_exemplar(self, ident: str, face: np.ndarray) -> None:
        cluster = next((c for c, i in self._clusters.items() if i == ident), None)
        if cluster is None:
            cluster = max(self._clusters, default=-1) + 1
            self._clusters[cluster] = ident
        self._append_face(face)
        self._labels = np.append(self._labels, cluster)
        self._sums[cluster] = self._sums.get(cluster, 0.0) + face.astype(np.float64)
        self._counts[cluster] = self._counts.get(cluster, 0) + 1
        drop = []
        if self._counts[cluster] > self.params.max_exemplars:
            mine = np.flatnonzero(self._labels == cluster)
            drop = list(mine[:-self.params.max_exemplars])
        if len(self._labels) > self.params.max_face_points:
            drop = sorted(set(drop) | set(range(len(self._labels) - self.params.max_face_points)))
        if drop:
            for j in drop:
                lab = int(self._labels[j])
                self._sums[lab] = self._sums[lab] - self._faces[j]
                self._counts[lab] -= 1
            keep = np.setdiff1d(np.arange(len(self._labels)), drop)
            self._faces = self._faces[keep]
            self._labels = self._labels[keep]

    def _centroids(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """(identity ids, sum of each one's exemplars, their counts)."""
        idents = self.identities
        index = {ident: j for j, ident in enumerate(idents)}
        sums = np.zeros((len(idents), self._faces.shape[1] if self._faces.size else 1), np.float64)
        counts = np.zeros(len(idents))
        for c, ident in self._clusters.items():
            if self._counts.get(c):
                sums[index[ident]] += self._sums[c]
                counts[index[ident]] += self._counts[c]
        return idents, sums, counts

    def _merge_candidates(self, touched: set[str]) -> list[tuple[str, str]]:
        """Merge each touched identity into those within ``merge_eps`` by average linkage (the
        mean cosine over all pairs of exemplars), never across a cannot-link."""
        p = self.params
        merged: list[tuple[str, str]] = []
        for ident in sorted(touched):
            if ident not in self._clusters.values():
                continue     # absorbed already
            idents, sums, counts = self._centroids()
            me = idents.index(ident)
            if counts[me] < p.min_samples:
                continue
            with np.errstate(invalid="ignore", divide="ignore"):
                avg = (sums @ sums[me]) / (counts * counts[me])
            for other in np.argsort(-avg):
                o = idents[other]
                if other == me or counts[other] < p.min_samples or 1.0 - avg[other] > p.merge_eps:
                    continue
                if self.cannot_link(ident, o):
                    continue
                survivor, absorbed = min(ident, o), max(ident, o)
                self._merge(absorbed, survivor)
                merged.append((absorbed, survivor))
                break
        return merged

    def _merge(self, absorbed: str, survivor: str) -> None:
        keep = next(c for c, i in self._clusters.items() if i == survivor)
        for c in [c for c, i in self._clusters.items() if i == absorbed]:
            self._labels[self._labels == c] = keep
            self._sums[keep] = self._sums.get(keep, 0.0) + self._sums.pop(c, 0.0)
            self._counts[keep] = self._counts.get(keep, 0) + self._counts.pop(c, 0)
            del self._clusters[c]
        self._reid.setdefault(survivor, []).extend(self._reid.pop(absorbed, []))
        for a, b in list(self._cannot):
            if absorbed in (a, b):
                self._cannot.discard((a, b))
                other = b if a == absorbed else a
                if other != survivor:
                    self._cannot.add((min(other, survivor), max(other, survivor)))
        self._tracks.relabel(absorbed, survivor)
        self.merge_log.append((absorbed, survivor))
        log.info("identity %s merged into %s (average linkage)", absorbed, survivor)

    def _assign_reid(self, e: Evidence, t: Optional[float], taken: set[str]) -> Assignment:
        """The identity whose recent body embeddings are nearest, never one the sighting's face
        (however small) contradicts: farther than ``track_eps`` from its exemplars."""
        candidates = [ident for ident in self._reid if ident not in taken]
        face_dist = dict(zip(candidates, self._face_distances(e.face, candidates))) if e.face is not None else {}
        best, best_dist = "", 2.0
        for ident in candidates:
            recent = [v for bt, v in self._reid[ident]
                      if t is None or bt is None or abs(t - bt) <= self.params.reid_window_s]
            contradicted = face_dist.get(ident, 0.0)
            if not recent or (np.isfinite(contradicted) and contradicted > self.params.track_eps):
                continue
            dist = float(np.min(1.0 - np.stack(recent) @ e.reid))
            if dist < best_dist:
                best, best_dist = ident, dist
        if best and best_dist <= self.params.reid_threshold:
            return Assignment(best, 1.0 - best_dist, "reid")
        return Assignment("", 0.0, "none")

    def issue_id(self) -> str:
        """A fresh identity id, durably (consolidation's splits take theirs here: never reused)."""
        with self._lock:
            ident = self._new_identity()
            if self.path is not None:
                self._save_locked()
            return ident

    def issue_past(self, highest: int) -> None:
        """Ids issued from now on are above ``highest`` (one the memory holds: an identity state
        lost or started on another data directory never reissues it).  Durable at once."""
        with self._lock:
            if highest >= self._next:
                self._next = highest + 1
                if self.path is not None:
                    self._save_locked()

    def acknowledged(self, merge: Optional[tuple[str, str]] = None, change_id: str = "") -> None:
        """The memory acknowledged a merge or a consolidation move: it is not sent again after a
        start (dropped from the logs; on disk with the next snapshot)."""
        with self._lock:
            if merge is not None:
                self.merge_log = [m for m in self.merge_log if tuple(m) != tuple(merge)]
            if change_id:
                self.change_log = [c for c in self.change_log if c["change_id"] != change_id]

    def drop_logged(self, source: str, target: str) -> None:
        """An operator undid a change between ``source`` and ``target``: never send it again."""
        with self._lock:
            self.merge_log = [m for m in self.merge_log if tuple(m) != (source, target)]
            self.change_log = [c for c in self.change_log if (c["source"], c["target"]) != (source, target)]
            if self.path is not None:
                self._save_locked()

    @property
    def issued(self) -> int:
        """The number of the last id issued (ids are never reused)."""
        return self._next - 1

    def rebuild(self, faces: list[tuple[str, np.ndarray]], *, apart: Iterable[tuple[str, str]], keep=None,
                changes: list[dict] = ()) -> None:
        """Replace the exemplars with ``faces`` ((identity, clear face embedding), oldest first:
        the memory after consolidation) and the cannot-links with ``apart`` (identity pairs that
        are two people: seen in one keyframe, or kept apart by an operator's undo); re-ID banks
        start again, tracks go on without identities, suppressed faces and the id counter stay,
        ``changes`` (the moves the memory is to apply) join the change log, in the same snapshot (consolidation's merges
        travel as those moves, never as whole-identity merges).  ``keep(identity)`` true: that
        identity's current exemplars stay too (one the memory did not hold yet).  Durable at once."""
        with self._lock:
            mine: dict[str, list[np.ndarray]] = {}
            for row, label in zip(self._faces, self._labels):
                ident = self._clusters[int(label)]
                if keep is not None and keep(ident):
                    mine.setdefault(ident, []).append(row)
            for ident, face in faces:
                mine.setdefault(ident, []).append(unit_vector(face))
            self._clusters = dict(enumerate(sorted(mine)))
            rows = [(c, v) for c, ident in self._clusters.items() for v in mine[ident][-self.params.max_exemplars:]]
            rows = rows[-self.params.max_face_points:]
            self._faces = np.stack([v for _, v in rows]) if rows else np.zeros((0, 0), np.float32)
            self._labels = np.asarray([c for c, _ in rows], dtype=np.int64)
            self._recount()
            self._cannot = {(min(a, b), max(a, b)) for a, b in apart}
            self._reid = {}
            for track in self._tracks.tracks:    # tracks go on (their numbers are in the memory), identities anew
                track.identity_id, track.votes, track.beside = "", {}, set()
            self.change_log = self.change_log + list(changes)   # until acknowledged: never trimmed
            if self.path is not None:
                self._save_locked()

    def suppressed(self, face: Optional[np.ndarray]) -> bool:
        """Whether a (unit) face is within ``eps`` of a forgotten person's (do-not-record bank)."""
        return face is not None and len(self._suppressed) > 0 and face.shape[0] == self._suppressed.shape[1] and \
            float(np.max(self._suppressed @ face)) >= 1.0 - self.params.eps

    def keep_apart(self, pairs: Iterable[tuple[str, str]], changes: list[dict] = ()) -> None:
        """Identity pairs now known to be two people (an attach pass put them in one keyframe)
        become cannot-links and ``changes`` join the change log; exemplars stay.  Durable at once."""
        with self._lock:
            self._cannot |= {(min(a, b), max(a, b)) for a, b in pairs}
            self.change_log = self.change_log + list(changes)
            if self.path is not None:
                self._save_locked()

    def forget(self, identity_id: str, suppress: bool = False) -> bool:
        """Drop an identity's id, face points and re-ID embeddings (privacy), durably at once
        (the snapshot is rewritten and the journal, which held its points, emptied).  Its id is
        never issued again.  ``suppress``: keep its face points, without the id, so that later
        sightings of the face are not recorded; else a later sighting gets a fresh id."""
        with self._lock:
            known = self._forget(identity_id, suppress)
            if known and self.path is not None:
                self._save_locked()
            return known

    def _forget(self, identity_id: str, suppress: bool = False) -> bool:
        clusters = [c for c, i in self._clusters.items() if i == identity_id]
        known = bool(clusters) or identity_id in self._reid
        mine = np.isin(self._labels, clusters)
        if clusters and suppress:
            gone = self._faces[mine]
            bank = gone if not len(self._suppressed) else np.vstack([self._suppressed, gone])
            self._suppressed = bank[-self.params.max_suppressed_points:]
        if clusters:
            self._faces = self._faces[~mine] if (~mine).any() else np.zeros((0, 0), np.float32)
            self._labels = self._labels[~mine]
            self._recount()
        for c in clusters:
            del self._clusters[c]
        self._reid.pop(identity_id, None)
        self._cannot = {pair for pair in self._cannot if identity_id not in pair}
        self._tracks.drop_identity(identity_id)
        return known

    def close(self) -> None:
        self.save()
        if self._journal is not None:
            self._journal.close()
            self._journal = None
            self._lock_file.close()   # releases the lock


class IdentityStateBusy(ConfigError):
    """Another process holds the identity state of this data directory (a configuration error:
    restarting does not help)."""
