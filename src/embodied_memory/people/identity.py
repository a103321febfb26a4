"""Person identity: online DBSCAN over face embeddings, re-ID association for faceless
sightings, merges when evidence joins two clusters, pseudonymous ids stable across restarts.

HUMEMBR's two stages:
1. Sightings with a face embedding are clustered with an incremental DBSCAN (cosine distance,
   ``eps``, ``min_samples``).  A new point joins the cluster of its neighbours; if it is a
   core point of several clusters (at least ``min_samples - 1`` neighbours in each) they are
   merged (the oldest id survives, the others are reported so the memory can relabel them);
   otherwise it joins the cluster it has most neighbours in (no chaining through one point).
   A point with no clustered neighbour opens a
   new identity at once (tentative until it has ``min_samples`` points), so every sighting
   with a face gets an id immediately.
2. Sightings without a face are matched by body re-ID embedding to the nearest identity's
   recent re-ID embeddings, accepted under ``reid_threshold`` (cosine distance).

Crash safety: with a ``path``, every assignment's input is appended to a journal; ``sync``
(called before anything is published) makes it durable; ``save`` writes a snapshot and
empties the journal, and loading replays the journal on the snapshot (assignment is
deterministic) and snapshots again (one file, fsync'd), so after ``kill -9`` no id is issued
twice; every merge so far is kept (``merge_log``) for the caller to send again after a start.
The state is locked: a second manager on the same directory fails (after ``lock_wait_s``).

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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from ..config import ConfigError

log = logging.getLogger(__name__)
JOURNAL = "identities.journal"
SNAPSHOT = "identities.npz"


@dataclass(frozen=True)
class IdentityParams:
    eps: float = 0.52                 # HUMEMBR: face DBSCAN eps (cosine distance)
    min_samples: int = 3              # HUMEMBR: k
    reid_threshold: float = 0.1       # max cosine distance for a faceless re-ID match (generic
                                      # MobileNetV2 features put different people at 0.12-0.3)
    reid_memory: int = 50             # re-ID embeddings kept per identity
    max_face_points: int = 20000      # oldest face points are forgotten beyond this
    max_suppressed_points: int = 5000  # do-not-record face points of forgotten people (oldest go first)
    id_prefix: str = "person_"


@dataclass
class Assignment:
    identity_id: str                  # "" when unresolved
    confidence: float
    via: str                          # face | reid | none
    merged: list[tuple[str, str]] = field(default_factory=list)  # (absorbed id, surviving id)


def _unit(vec) -> np.ndarray:
    v = np.asarray(vec, dtype=np.float32).reshape(-1)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


class IdentityManager:
    """Thread-safe; ``path`` (a directory) makes ids survive restarts."""

    def __init__(self, params: IdentityParams = IdentityParams(), path: Optional[str | Path] = None,
                 lock_wait_s: float = 60.0):
        self.params = params
        self.path = Path(path).expanduser() if path else None
        self._lock = threading.Lock()
        self._faces = np.zeros((0, 0), dtype=np.float32)    # face embeddings (unit rows)
        self._labels: list[int] = []                          # cluster per face point
        self._clusters: dict[int, str] = {}                   # cluster -> identity id
        self._reid: dict[str, list[np.ndarray]] = {}          # identity -> recent re-ID embeddings
        self._suppressed = np.zeros((0, 0), dtype=np.float32)  # faces of forgotten people (no id)
        self._next = 1
        self._journal = None
        self._seq = 0                                         # journal entries applied
        self.merge_log: list[tuple[str, str]] = []            # every merge so far (re-sent after a start)
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
            self._load()
            replayed = self._replay_journal()
            self._journal = open(self.path / JOURNAL, "a", encoding="utf-8")
            if replayed:   # a clean snapshot and an empty journal (a torn last line must not stay)
                self._save_locked()

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

    def _load(self) -> None:
        snapshot = self.read_snapshot(self.path)
        if snapshot is None:
            return
        meta, data = snapshot
        self._faces = data["faces"].astype(np.float32)
        self._labels = [int(x) for x in data["labels"]]
        self._clusters = {int(k): v for k, v in meta["clusters"].items()}
        self._next = int(meta["next"])
        self._seq = int(meta.get("seq", 0))
        self._reid = {k: [np.asarray(v, np.float32) for v in vs] for k, vs in meta.get("reid", {}).items()}
        if "suppressed" in data:
            self._suppressed = data["suppressed"].astype(np.float32)
        self.merge_log = [tuple(m) for m in meta.get("merges", [])]
        log.info("loaded %d identities (%d face points) from %s", len(set(self._clusters.values())),
                 len(self._labels), self.path)

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
            face, reid = entry.get("face"), entry.get("reid")
            self._assign(np.asarray(face, np.float32) if face else None,
                         np.asarray(reid, np.float32) if reid else None)
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
                "reid": {k: [v.tolist() for v in vs] for k, vs in self._reid.items()},
                "merges": [list(m) for m in self.merge_log]}
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

    # -- assignment --------------------------------------------------------------------------
    @property
    def identities(self) -> list[str]:
        return sorted(set(self._clusters.values()))

    def _new_identity(self) -> str:
        ident = f"{self.params.id_prefix}{self._next:04d}"
        self._next += 1
        return ident

    def assign(self, face_embedding=None, reid_embedding=None) -> Assignment:
        face = _unit(face_embedding) if face_embedding is not None and np.size(face_embedding) else None
        reid = _unit(reid_embedding) if reid_embedding is not None and np.size(reid_embedding) else None
        with self._lock:
            result = self._assign(face, reid)
            if result.via != "none" or reid is not None:
                self._append({"face": None if face is None else face.tolist(),
                              "reid": None if reid is None else reid.tolist()})
            return result

    def _assign(self, face: Optional[np.ndarray], reid: Optional[np.ndarray]) -> Assignment:
        if face is not None and len(self._suppressed) and face.shape[0] == self._suppressed.shape[1] and \
                float(np.max(self._suppressed @ face)) >= 1.0 - self.params.eps:
            return Assignment("", 0.0, "suppressed")   # a forgotten person: not recorded
        if face is not None:
            result = self._assign_face(face)
        elif reid is not None:
            result = self._assign_reid(reid)
        else:
            return Assignment("", 0.0, "none")
        if reid is not None and result.identity_id:
            bank = self._reid.setdefault(result.identity_id, [])
            bank.append(reid)
            del bank[:-self.params.reid_memory]
        return result

    def _assign_face(self, face: np.ndarray) -> Assignment:
        p = self.params
        if self._faces.size == 0:
            self._faces = face[None, :]
        else:
            if face.shape[0] != self._faces.shape[1]:
                raise ValueError(f"face embedding has {face.shape[0]} values, earlier ones {self._faces.shape[1]}")
            self._faces = np.vstack([self._faces, face[None, :]])
        distances = 1.0 - self._faces[:-1] @ face if len(self._faces) > 1 else np.zeros(0)
        neighbours = np.flatnonzero(distances <= p.eps)
        labels = np.asarray(self._labels, dtype=np.int64)
        clusters = sorted({int(labels[i]) for i in neighbours if labels[i] >= 0})
        merged: list[tuple[str, str]] = []
        if not clusters:
            cluster = max(self._clusters, default=-1) + 1
            self._clusters[cluster] = self._new_identity()
            # unclustered neighbours (there are none: every point gets a cluster) stay as they are
        else:
            # a merge needs the face to be a core point of each cluster on its own (at least
            # min_samples - 1 neighbours in it): one face near a single point of another cluster
            # (a blurred, distant face) does not chain two people together; it joins the cluster
            # it has most neighbours in.  The oldest identity survives a merge.
            in_cluster = {c: int(np.sum(labels[neighbours] == c)) for c in clusters}
            dense = [c for c in clusters if in_cluster[c] + 1 >= p.min_samples]
            if dense:
                cluster = min(dense, key=lambda c: self._clusters[c])
            else:   # most neighbours, then the nearest one
                nearest = {c: float(np.min(distances[neighbours][labels[neighbours] == c])) for c in clusters}
                cluster = max(clusters, key=lambda c: (in_cluster[c], -nearest[c]))
            if len(dense) > 1:
                for other in dense:
                    if other == cluster:
                        continue
                    absorbed, survivor = self._clusters[other], self._clusters[cluster]
                    if absorbed != survivor:
                        merged.append((absorbed, survivor))
                        self._reid.setdefault(survivor, []).extend(self._reid.pop(absorbed, []))
                    labels[labels == other] = cluster
                    del self._clusters[other]
                self._labels = labels.tolist()
        self._labels.append(cluster)
        if len(self._labels) > p.max_face_points:
            self._faces, self._labels = self._faces[-p.max_face_points:], self._labels[-p.max_face_points:]
        ident = self._clusters[cluster]
        confidence = float(1.0 - np.min(distances[neighbours])) if len(neighbours) else 0.5
        self.merge_log.extend(merged)
        for absorbed, survivor in merged:
            log.info("identity %s merged into %s (a face joined both clusters)", absorbed, survivor)
        return Assignment(ident, confidence, "face", merged)

    def _assign_reid(self, reid: np.ndarray) -> Assignment:
        best, best_dist = "", 2.0
        for ident, bank in self._reid.items():
            if not bank:
                continue
            dist = float(np.min(1.0 - np.stack(bank) @ reid))
            if dist < best_dist:
                best, best_dist = ident, dist
        if best and best_dist <= self.params.reid_threshold:
            return Assignment(best, 1.0 - best_dist, "reid")
        return Assignment("", 0.0, "none")

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
        keep = [i for i, lab in enumerate(self._labels) if lab not in clusters]
        if clusters and suppress:
            gone = self._faces[[i for i, lab in enumerate(self._labels) if lab in clusters]]
            bank = gone if not len(self._suppressed) else np.vstack([self._suppressed, gone])
            self._suppressed = bank[-self.params.max_suppressed_points:]
        if clusters:
            self._faces = self._faces[keep] if keep else np.zeros((0, 0), np.float32)
            self._labels = [self._labels[i] for i in keep]
        for c in clusters:
            del self._clusters[c]
        self._reid.pop(identity_id, None)
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
