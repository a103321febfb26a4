"""Identities and privacy: naming, merging, forgetting, exporting what is stored of a person.

An identity is named by an operator (``name_identity``: naming it like another one merges
them) or merged by perception (``merge_identities``; a merge ahead of the sightings is kept
as an alias).  Forgetting: ``forget_identity`` deletes a person's sightings, crops and
summaries, tombstones the ids (``_forgotten_among`` / ``_drop_forgotten`` keep later
sightings of them out on insert) and scrubs descriptions naming them (``scrub_identity``);
``forget_older_than`` and ``forget_episode`` delete observations.  ``export_identity`` is
the subject-access export; ``_remove_files`` deletes files inside the data directory only.
"""
from __future__ import annotations

import json
import logging
import math
import re
import time
from pathlib import Path
from typing import Iterable, Optional, Sequence

import numpy as np

from ..types import Identity, Observation, StoredSighting
from .errors import StoreError, UnknownPersonError
from .image_files import file_in
from .records import _blob, _enroll, _unblob, _unit
from .tool_registry import query_tool

log = logging.getLogger(__package__ + ".memory_store")   # the store's one logger (as before the split)
# assign: sightings without an identity given one by consolidation; track: by their track's later sighting
UNDOABLE_CHANGES = ("merge", "split", "assign", "track")
TRACK_FILL_S = 600.0   # an identified sighting names its track's unidentified sightings this far back


def _name_pattern(words: Iterable[str]) -> Optional[re.Pattern]:
    """Whole-word, case-insensitive match of any of ``words`` (identity ids, display names)."""
    words = sorted({w for w in words if w}, key=len, reverse=True)
    if not words:
        return None
    return re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(re.escape(w) for w in words) + r")(?![A-Za-z0-9_])",
                      re.IGNORECASE)


def scrub_identity(text: str, pattern: Optional[re.Pattern]) -> str:
    """A description with every mention of a forgotten identity replaced by "a person"."""
    return pattern.sub("a person", text) if pattern is not None and text else text


def read_sighting_evidence(conn, since: float = 0.0, reid: bool = True) -> list[StoredSighting]:
    """``MemoryStore.sighting_evidence`` on any connection to a memory's database (perception's
    consolidation reads it read-only beside the running memory node).  ``reid`` False: without
    the body embeddings (consolidation uses faces only; a body embedding is ~5 KB a sighting)."""
    out = []
    for r in conn.execute(
            f"SELECT id, obs, t, identity_id, x1, y1, x2, y2, face_box, face_emb, {'reid_emb' if reid else 'NULL'}, "
            "px, py FROM sightings WHERE t >= ? ORDER BY t, obs, id", (since,)):
        face_box = None
        if r[8]:
            try:
                face_box = tuple(float(v) for v in json.loads(r[8]))
            except (ValueError, TypeError):
                face_box = None
        out.append(StoredSighting(r[0], r[1], r[2], r[3] or "", (r[4], r[5], r[6], r[7]), face_box, _unblob(r[9]),
                                  _unblob(r[10]), (r[11], r[12]) if r[11] is not None else None))
    return out


def read_distinct_pairs(conn) -> set[tuple[str, str]]:
    """Identity pairs an operator said are two people: the two sides of every undone merge
    (sorted pairs).  Consolidation never joins them again; live assignment never merges them."""
    return {(min(a, b), max(a, b)) for a, b in conn.execute(
        "SELECT source, target FROM identity_changes WHERE undone IS NOT NULL AND kind='merge' "
        "AND source != '' AND target != ''")}


def read_pinned_sightings(conn) -> set[int]:
    """Sightings an operator kept where they were by undoing the split that took them away, or
    the assignment or track fill that gave them an identity: consolidation never moves them again."""
    return {int(i) for (ids,) in conn.execute(   # not the assignments undone with their split: nobody judged them
        "SELECT sightings FROM identity_changes c WHERE undone IS NOT NULL AND (kind='split' OR kind IN ('assign', "
        "'track') AND NOT EXISTS (SELECT 1 FROM identity_changes s WHERE s.kind='split' AND s.target=c.target AND "
        "s.undone IS NOT NULL))") for i in json.loads(ids)}


def _prior(conn, source: str, target: str) -> str:
    """What a move that empties ``source`` into ``target`` changes beyond sightings: both names
    and the aliases pointing at ``source`` (JSON, for the undo)."""
    names = {r[0]: r[1] for r in conn.execute(
        "SELECT identity_id, display_name FROM identities WHERE identity_id IN (?, ?)", (source, target))}
    aliases = [r[0] for r in conn.execute("SELECT alias_id FROM identity_aliases WHERE identity_id=?", (source,))]
    return json.dumps({"names": names, "aliases": aliases})


def read_highest_identity(conn, prefix: str) -> int:
    """The highest number of any ``<prefix>NNNN`` id the memory holds or held (identities,
    aliases, tombstones, sightings): a new id must be above it, whatever perception's counter says."""
    ids = set()
    for sql in ("SELECT identity_id FROM identities", "SELECT alias_id FROM identity_aliases",
                "SELECT identity_id FROM forgotten_identities", "SELECT DISTINCT identity_id FROM sightings"):
        ids |= {r[0] for r in conn.execute(sql) if r[0]}
    return max((int(i[len(prefix):]) for i in ids if i.startswith(prefix) and i[len(prefix):].isdigit()), default=0)


def read_display_names(conn) -> dict[str, str]:
    """Identity id -> its operator-given name (lower case), named identities only."""
    return {r[0]: r[1].lower() for r in conn.execute("SELECT identity_id, display_name FROM identities "
                                                     "WHERE display_name != ''")}


class IdentitiesMixin:
    """Identities, naming, merging, forgetting, export and file deletion of :class:`MemoryStore`.

    Relies on: ``params`` and ``data_dir`` (set by ``MemoryStore.__init__``); ``_conn``,
    ``_transaction``, ``_bump_generation`` and ``_rebuild_waypoint_stats`` (records);
    ``_index``, ``text_embedder``, ``VECTOR_KINDS`` and ``_checkpoint_generation``
    (index_lifecycle); ``iso``, ``_rows_by_id`` and ``_load_times`` (retrieval)."""

    def resolve_person(self, person: str) -> str:
        """An identity id from an id or an operator-given display name (case-insensitive).
        An empty name names nobody (identities without a display name have '')."""
        person = person.strip() if isinstance(person, str) else ""
        row = self._conn().execute(
            "SELECT identity_id FROM identities WHERE identity_id=? OR (display_name != '' AND "
            "lower(display_name)=lower(?)) ORDER BY identity_id=? DESC LIMIT 1", (person, person, person)).fetchone() \
            if person else None
        if row is None and person:      # an id merged into another (a reconcile, a review) names the survivor
            row = self._conn().execute("SELECT identity_id FROM identity_aliases WHERE alias_id=?", (person,)).fetchone()
        if row is None:
            raise UnknownPersonError(f"unknown person {person!r}: no identity with that id or name "
                                     f"(known: {', '.join(i.identity_id for i in self.identities()[:20]) or 'none'})")
        return row[0]

    def identities(self) -> list[Identity]:
        rows = self._conn().execute(
            "SELECT i.identity_id, i.display_name, i.created, COUNT(s.id) AS n, MIN(s.t) AS first, "
            "MAX(s.t) AS last FROM identities i LEFT JOIN sightings s ON s.identity_id = i.identity_id "
            "GROUP BY i.identity_id ORDER BY i.identity_id")
        return [Identity(r["identity_id"], r["display_name"], r["created"], r["n"], r["first"], r["last"])
                for r in rows]

    def name_identity(self, identity_id: str, display_name: str) -> str:
        """An operator names an identity.  Naming it like another identity says they are one
        person: it is merged into that one (returned), and later sightings follow."""
        with self._transaction() as conn:
            if conn.execute("SELECT 1 FROM identities WHERE identity_id=?", (identity_id,)).fetchone() is None:
                raise UnknownPersonError(f"unknown person {identity_id!r}")
            same = conn.execute("SELECT identity_id FROM identities WHERE lower(display_name)=lower(?) AND "
                                "display_name != '' AND identity_id != ? ORDER BY identity_id LIMIT 1",
                                (display_name, identity_id)).fetchone()
            if same is None:
                self._expect_rows(conn.execute("UPDATE identities SET display_name=? WHERE identity_id=?",
                                               (display_name, identity_id)), 1, f"naming {identity_id}")
            self._journal_change(conn, "reviewed", identity_id, identity_id, [])   # the operator looked at it
        if same is not None:    # merged under the names they had (an undo gives each its own back), then named
            survivor, absorbed = sorted((same[0], identity_id))
            self.merge_identities(absorbed, survivor, reviewed=True)
            with self._transaction() as conn:
                conn.execute("UPDATE identities SET display_name=? WHERE identity_id=?", (display_name, survivor))
            return survivor
        return identity_id

    def _expect_rows(self, cursor, expected: int, what: str):
        """On a fleet's server, row-level security skips the rows of other robots without an error:
        a change that could not touch every row it meant to is refused whole (the transaction
        rolls back) rather than left half done."""
        if self.on_server and cursor.rowcount != expected:
            raise StoreError(f"{what}: permission denied for {expected - cursor.rowcount} of {expected} rows (another "
                             "robot's records or people: an operator's `embodied-memory fleet ...` changes those)",
                             kind="PermissionError")
        return cursor

    def merge_identities(self, absorbed: str, survivor: str, reviewed: bool = False) -> int:
        """Perception (or, ``reviewed``, an operator) found two identities to be one person:
        relabel every sighting of ``absorbed`` as ``survivor``; returns the number of sightings
        moved.  Journalled; perception's merge is a doubt on ``survivor`` until reviewed."""
        if absorbed == survivor:
            return 0
        with self._transaction() as conn:
            def current(identity: str) -> str:        # an id merged away before: the identity it went to
                row = conn.execute("SELECT identity_id FROM identity_aliases WHERE alias_id=?", (identity,)).fetchone()
                return row[0] if row else identity
            absorbed_now, survivor_now = current(absorbed), current(survivor)
            if absorbed_now == survivor_now:
                return 0
            # ``absorbed`` already went into someone (a fleet's reconcile, an earlier consolidation): that
            # person keeps the id and takes ``survivor``; never an alias re-pointed away from them
            absorbed, survivor = (survivor_now, absorbed_now) if absorbed_now != absorbed else (absorbed, survivor_now)
            names = {r[0]: r[1] for r in conn.execute(
                "SELECT identity_id, display_name FROM identities WHERE identity_id IN (?, ?)", (absorbed, survivor))}
            if conn.execute("SELECT 1 FROM forgotten_identities WHERE identity_id=?", (survivor,)).fetchone():
                log.warning("not merging %s into %s: %s was forgotten", absorbed, survivor, survivor)
                return 0
            if absorbed not in names:
                # the merge came before any sighting of ``absorbed`` (topics are not ordered across
                # resends): remember the alias, so those sightings are stored under the survivor
                conn.execute("UPDATE identity_aliases SET identity_id=? WHERE identity_id=?", (survivor, absorbed))
                conn.execute("INSERT OR REPLACE INTO identity_aliases(alias_id, identity_id) VALUES (?, ?)",
                             (absorbed, survivor))
                return 0
            prior = _prior(conn, absorbed, survivor)
            _enroll(conn, survivor, names.get(absorbed, ""))
            if not names.get(survivor) and names.get(absorbed):
                conn.execute("UPDATE identities SET display_name=? WHERE identity_id=?", (names[absorbed], survivor))
            ids = [r[0] for r in conn.execute("SELECT id FROM sightings WHERE identity_id=?", (absorbed,))]
            moved = self._expect_rows(conn.execute("UPDATE sightings SET identity_id=? WHERE identity_id=?",
                                                   (survivor, absorbed)), len(ids), f"merging {absorbed}").rowcount
            for rid, persons in conn.execute("SELECT id, persons FROM observations WHERE id IN "   # those showing
                                             "(SELECT obs FROM sightings WHERE identity_id=?) AND persons LIKE ?",  # absorbed
                                             (survivor, f"%{absorbed}%")).fetchall():
                people = ",".join(dict.fromkeys(survivor if p == absorbed else p for p in (persons or "").split(",") if p))
                if people != persons:
                    self._expect_rows(conn.execute("UPDATE observations SET persons=? WHERE id=?", (people, rid)),
                                      1, f"merging {absorbed}")
            conn.execute("DELETE FROM summaries WHERE identity_id IN (?, ?)", (absorbed, survivor))
            conn.execute("DELETE FROM identities WHERE identity_id=?", (absorbed,))
            conn.execute("UPDATE identity_aliases SET identity_id=? WHERE identity_id=?", (survivor, absorbed))
            conn.execute("INSERT OR REPLACE INTO identity_aliases(alias_id, identity_id) VALUES (?, ?)",
                         (absorbed, survivor))
            self._journal_change(conn, "merge", absorbed, survivor, ids, prior)
            if reviewed:
                self._journal_change(conn, "reviewed", survivor, survivor, [])
        log.info("merged identity %s into %s (%d sightings)", absorbed, survivor, moved)
        return moved

    def relabel_sightings(self, moves: Sequence[tuple[str, str, str, Sequence[int]]]) -> list[int]:
        """Apply identity changes in one transaction: each (kind, source, target, sighting ids)
        moves those sightings of ``source`` to ``target`` (kind: merge | split | undo), relabels
        each touched observation's people and detector description, drops the touched
        identities' summaries (rebuilt on demand) and journals the move (``identity_changes``).
        A target is created when new (a split's is a fresh id from perception's counter, which
        may already hold sightings perception sent since; never a forgotten or merged-away id); a
        source left without sightings becomes an alias of its target.  Moving only what is still
        with its source, a change applied twice changes nothing.  Returns the journal ids."""
        with self._transaction() as conn:
            return self._relabel(conn, moves)[0]

    def _relabel(self, conn, moves: Sequence[tuple[str, str, str, Sequence[int]]]) -> tuple[list[int], int]:
        """``relabel_sightings`` inside the caller's transaction: (journal ids, sightings moved)."""
        journal, total = [], 0
        forgotten = {r[0] for r in conn.execute("SELECT identity_id FROM forgotten_identities")}
        for kind, source, target, ids in moves:
            if source == target or not ids:
                continue
            if target in forgotten or source in forgotten:
                raise StoreError(f"{kind} {source} -> {target}: a forgotten identity takes no part")
            moved = []
            for chunk in range(0, len(ids), 500):
                part = list(ids[chunk:chunk + 500])
                marks = ",".join("?" * len(part))
                moved += [r[0] for r in conn.execute(   # source "": sightings without an identity
                    f"SELECT id FROM sightings WHERE COALESCE(identity_id, '')=? AND id IN ({marks})",
                    (source, *part))]
            if not moved:       # done before (a change sent again) or nothing of it left
                continue
            if kind in ("split", "assign") and conn.execute("SELECT 1 FROM identity_aliases WHERE alias_id=?",
                                                            (target,)).fetchone():
                raise StoreError(f"{kind} {source or 'no identity'} -> {target}: {target} was merged away (ids are "
                                 "never reused)")
            total += len(moved)
            if target:          # "": back to no identity (an assignment undone)
                _enroll(conn, target)
            obs = set()
            for chunk in range(0, len(moved), 500):
                part = moved[chunk:chunk + 500]
                marks = ",".join("?" * len(part))
                obs |= {r[0] for r in conn.execute(f"SELECT DISTINCT obs FROM sightings WHERE id IN ({marks})", part)}
                self._expect_rows(conn.execute(f"UPDATE sightings SET identity_id=? WHERE id IN ({marks})",
                                               (target or None, *part)), len(part), f"{kind} {source} -> {target}")
                if not target:   # back to no identity (an assignment undone): out of its track for good
                    conn.execute(f"UPDATE sightings SET track=NULL WHERE id IN ({marks})", part)
            pattern = _name_pattern([source])
            for rid in sorted(obs):
                people = [r[0] for r in conn.execute("SELECT identity_id FROM sightings WHERE obs=? ORDER BY id",
                                                     (rid,)) if r[0]]
                row = conn.execute("SELECT description FROM observations WHERE id=?", (rid,)).fetchone()
                text = row[0] or ""
                if source not in people and pattern is not None:   # the observation no longer shows source
                    text = pattern.sub(target or "a person", text)
                self._expect_rows(conn.execute("UPDATE observations SET persons=?, description=? WHERE id=?",
                                               (",".join(dict.fromkeys(people)), text, rid)), 1,
                                  f"{kind} {source} -> {target}")
            conn.execute("DELETE FROM summaries WHERE identity_id IN (?, ?)", (source, target))
            prior = None
            if source and target and not conn.execute("SELECT 1 FROM sightings WHERE identity_id=? LIMIT 1",
                                                      (source,)).fetchone():
                prior = _prior(conn, source, target)
                name = conn.execute("SELECT display_name FROM identities WHERE identity_id=?", (source,)).fetchone()
                if name and name[0]:
                    conn.execute("UPDATE identities SET display_name=? WHERE identity_id=? AND display_name=''",
                                 (name[0], target))
                conn.execute("DELETE FROM identities WHERE identity_id=?", (source,))
                conn.execute("UPDATE identity_aliases SET identity_id=? WHERE identity_id=?", (target, source))
                conn.execute("INSERT OR REPLACE INTO identity_aliases(alias_id, identity_id) VALUES (?, ?)",
                             (source, target))
            elif kind != "undo" and target:
                conn.execute("DELETE FROM identity_aliases WHERE alias_id=?", (target,))
            journal.append(self._journal_change(conn, kind, source, target, moved, prior))
            (log.debug if kind == "track" or kind == "assign" and len(moved) == 1 else log.info)(
                "identity %s: %d sightings of %s -> %s", kind, len(moved),
                                                         source or "no identity", target or "no identity")
        return journal, total

    def _fill_track(self, conn, track: int, identity_id: str, t: float, episode_id: str) -> int:
        """Give ``identity_id`` to the sightings of perception's short-term ``track`` (in the
        episode) in the ``TRACK_FILL_S`` before ``t`` that have no identity (someone seen far or
        from behind before a sighting of the track was identified: one track's sightings are one
        person), only where the sighting was the keyframe's one person: where others stood near,
        a track may have switched people (measured on the five-day worlds: every wrong fill was
        in a keyframe of 2-8 people, none in a keyframe of one).  Journalled as a ``track``
        change, undoable like consolidation's.  Looks back only: an unidentified sighting stored
        after its track's identified ones (a late resend) keeps no identity."""
        rows = conn.execute(
            "SELECT s.id FROM sightings s JOIN observations b ON b.id = s.obs WHERE s.track=? AND s.identity_id IS NULL "
            "AND s.t >= ? AND s.t <= ? AND b.episode_id=? AND NOT EXISTS (SELECT 1 FROM sightings o "
            "WHERE o.obs=s.obs AND o.id != s.id)", (track, t - TRACK_FILL_S, t, episode_id)).fetchall()
        if rows:
            self._relabel(conn, [("track", "", identity_id, [r[0] for r in rows])])
        return len(rows)

    @staticmethod
    def _journal_change(conn, kind: str, source: str, target: str, sightings: Sequence[int],
                        prior: Optional[str] = None) -> int:
        return conn.execute("INSERT INTO identity_changes(t, kind, source, target, sightings, prior) "
                            "VALUES (?, ?, ?, ?, ?, ?)",
                            (time.time(), kind, source, target, json.dumps(list(sightings)), prior)).lastrowid

    def identity_doubts(self, before: Optional[float] = None) -> dict[str, str]:
        """Identity id -> why its sightings may not all be one person: it is seen twice in one
        keyframe (two people in one identity: a cannot-link broken), or a merge or split moved
        its sightings after the operator last named it, merged it by hand or undid a change (not
        yet reviewed).  ``before`` limits the sightings read (data time); the journal is read
        whole (its times are the store's wall clock, not comparable with a replay's data time)."""
        conn = self._conn()
        until = math.inf if before is None else before
        doubts: dict[str, list[str]] = {}
        for ident, views in conn.execute(
                "SELECT identity_id, COUNT(*) FROM (SELECT identity_id, obs FROM sightings WHERE identity_id != '' "
                "AND t <= ? GROUP BY identity_id, obs HAVING COUNT(*) > 1) GROUP BY identity_id", (until,)):
            doubts.setdefault(ident, []).append(f"seen twice in one view {views} time{'s' if views > 1 else ''}")
        reviewed: dict[str, int] = {}
        for r in conn.execute("SELECT id, source, target FROM identity_changes WHERE kind IN ('reviewed', 'undo')"):
            for ident in (r["source"], r["target"]):
                reviewed[ident] = max(reviewed.get(ident, 0), r["id"])
        for r in conn.execute("SELECT id, t, kind, source, target FROM identity_changes WHERE kind IN "
                              "('merge', 'split') AND undone IS NULL ORDER BY id"):
            for ident, what in ((r["target"], f"{r['kind']}d from {r['source']}" if r["kind"] == "merge"
                                 else f"split from {r['source']}"), (r["source"], f"{r['kind']} into {r['target']}")):
                if r["id"] > reviewed.get(ident, 0) and (r["kind"] == "split" or ident == r["target"]):
                    doubts.setdefault(ident, []).append(f"{what} on {self.iso(r['t'])[:10]}, not yet reviewed")
        return {ident: "; ".join(dict.fromkeys(reasons)) for ident, reasons in doubts.items()}

    def identity_changes(self, limit: int = 100) -> list[dict]:
        """The journal of merges, splits, undos and the operator's reviews (naming, merging by
        hand), newest first."""
        return [{"change": r["id"], "time": self.iso(r["t"]), "kind": r["kind"], "source": r["source"],
                 "target": r["target"], "sightings": len(json.loads(r["sightings"])), "undone": r["undone"] is not None}
                for r in self._conn().execute("SELECT * FROM identity_changes ORDER BY id DESC LIMIT ?", (limit,))]

    def undo_identity_change(self, change: int) -> int:
        """Move a journalled change's sightings back (an operator disagrees); returns how many.
        Undoing a split undoes the other moves that built its new identity too (the unassigned
        faces a pass gave it), so no stray identity is left."""
        with self._transaction() as conn:      # all of it or nothing
            row = conn.execute("SELECT * FROM identity_changes WHERE id=?", (change,)).fetchone()
            if row is None:
                raise StoreError(f"no identity change {change}")
            if row["kind"] not in UNDOABLE_CHANGES:
                raise StoreError(f"identity change {change} is {row['kind']!r}: only "
                                 f"{', '.join(UNDOABLE_CHANGES)} are undone")
            if row["undone"] is not None:
                return 0
            moved = 0
            if row["kind"] == "split":
                for other in conn.execute("SELECT * FROM identity_changes WHERE target=? AND id!=? AND undone IS NULL "
                                          "AND kind IN ('split', 'assign', 'track') ORDER BY id DESC",
                                          (row["target"], change)).fetchall():
                    moved += self._undo(conn, other, required=False)
            return moved + self._undo(conn, row, required=True)

    def _undo(self, conn, row, required: bool) -> int:
        """``undo_identity_change`` of one journal row inside the caller's transaction."""
        change = row["id"]
        if row["source"]:      # an assignment's source is "no identity"
            conn.execute("DELETE FROM identity_aliases WHERE alias_id=?", (row["source"],))
            _enroll(conn, row["source"])
        conn.execute("UPDATE identity_changes SET undone=? WHERE id=?", (time.time(), change))
        _, moved = self._relabel(conn, [("undo", row["target"], row["source"], json.loads(row["sightings"]))])
        if not moved and required:
            raise StoreError(f"identity change {change}: none of its sightings is still with {row['target']} "
                             "(moved on or forgotten since): nothing to undo")
        if row["prior"] and row["source"]:    # each side's own name back, the aliases back to the source
            prior = json.loads(row["prior"])
            own = prior["names"].get(row["source"], "")
            conn.execute("UPDATE identities SET display_name=? WHERE identity_id=?", (own, row["source"]))
            if own:     # the target took the source's name only if it had none (a later naming stays)
                conn.execute("UPDATE identities SET display_name=? WHERE identity_id=? AND display_name=?",
                             (prior["names"].get(row["target"], ""), row["target"], own))
            for alias in prior["aliases"]:
                conn.execute("UPDATE identity_aliases SET identity_id=? WHERE alias_id=?", (row["source"], alias))
        return moved

    def operator_constraints(self) -> tuple[set[tuple[str, str]], set[int]]:
        """What an operator's undos said: identity pairs that are two people (undone merges) and
        sightings that stay with their identity (undone splits)."""
        conn = self._conn()
        return read_distinct_pairs(conn), read_pinned_sightings(conn)

    def display_names(self) -> dict[str, str]:
        """``read_display_names``: identity id -> its operator-given name (lower case)."""
        return read_display_names(self._conn())

    def highest_identity(self, prefix: str) -> int:
        """``read_highest_identity``: new ids go above it."""
        return read_highest_identity(self._conn(), prefix)

    def forgotten_identities(self, limit: int = 1000) -> list[str]:
        """The most recently forgotten identity ids (tombstones), for perception to forget too."""
        rows = self._conn().execute("SELECT identity_id FROM forgotten_identities ORDER BY forgotten_at DESC LIMIT ?",
                                    (limit,))
        return [r[0] for r in rows]

    def sighting_evidence(self, since: float = 0.0, reid: bool = True) -> list[StoredSighting]:
        """Every stored sighting since ``since``, oldest first (a keyframe's together), with its
        face and (``reid``) body embeddings: what consolidation re-clusters."""
        return read_sighting_evidence(self._conn(), since, reid)

    @query_tool("Everything stored about one identity (a subject-access export).",
                result="identity_id, display_name, created, sightings (observation_id, time, episode, waypoint, position...), summaries")
    def export_identity(self, person: str, include_embeddings: bool = False) -> dict:
        """Everything stored about one identity (a subject-access export)."""
        identity = self.resolve_person(person)
        conn = self._conn()
        ident = conn.execute("SELECT * FROM identities WHERE identity_id=?", (identity,)).fetchone()
        sightings = []
        for r in conn.execute(
                "SELECT s.*, s.waypoint_id AS place, o.observation_id, o.episode_id, o.waypoint_id AS robot_waypoint, "
                "o.x, o.y, o.image_path "
                "FROM sightings s JOIN observations o ON o.id = s.obs WHERE s.identity_id=? ORDER BY s.t",
                (identity,)):
            item = {"observation_id": r["observation_id"], "time": self.iso(r["t"]), "t": round(r["t"], 3),
                    "episode": r["episode_id"],
                    "waypoint": r["place"] or r["robot_waypoint"], "robot_waypoint": r["robot_waypoint"],
                    "position": [r["x"], r["y"]] if r["x"] is not None else None,
                    "person_position": [r["px"], r["py"], r["pz"]] if r["px"] is not None else None,
                    "box": [r["x1"], r["y1"], r["x2"], r["y2"]],
                    "confidence": r["confidence"], "image_path": r["image_path"], "crop_path": r["crop_path"],
                    "activity": r["activity"], "clothing": r["clothing"], "track": r["track"],
                    "has_face_embedding": r["face_emb"] is not None, "has_reid_embedding": r["reid_emb"] is not None}
            if include_embeddings:
                for col in ("face_emb", "reid_emb"):
                    vec = _unblob(r[col])
                    item[col] = None if vec is None else [round(float(v), 6) for v in vec]
            sightings.append(item)
        summaries = [dict(r) for r in conn.execute("SELECT day, text, created FROM summaries WHERE identity_id=?",
                                                    (identity,))]
        return {"identity_id": identity, "display_name": ident["display_name"], "created": self.iso(ident["created"]),
                "sightings": sightings, "summaries": summaries}

    # -- forgetting ---------------------------------------------------------------------------
    def _forgotten_among(self, conn, ids: Iterable[str]) -> set[str]:
        ids = sorted(set(ids))
        found: set[str] = set()
        for start in range(0, len(ids), 900):
            chunk = ids[start:start + 900]
            found.update(r[0] for r in conn.execute(
                f"SELECT identity_id FROM forgotten_identities WHERE identity_id IN ({','.join('?' * len(chunk))})",
                chunk))
        return found

    @staticmethod
    def _drop_forgotten(obs: Observation, forgotten: set[str]) -> tuple[int, list[str]]:
        """Remove the sightings of forgotten identities from ``obs`` and scrub their ids from its
        description (as forget_identity does); returns (how many, their crop files)."""
        dropped = [s for s in obs.people if s.identity_id in forgotten]
        if not dropped:
            return 0, []
        obs.people = [s for s in obs.people if s.identity_id not in forgotten]
        pattern = _name_pattern(s.identity_id for s in dropped)
        description = scrub_identity(obs.description, pattern)
        if description != obs.description:
            obs.description, obs.text_embedding = description, None  # re-embedded from the scrubbed text
        obs.description_json = scrub_identity(obs.description_json, pattern)
        return len(dropped), [s.crop_path for s in dropped if s.crop_path]

    def _deletable(self, paths: Iterable[str]) -> list[Path]:
        """Existing files among ``paths`` inside the data directory (never delete outside it;
        a memory moved since finds them in its own directory: ``file_in``)."""
        return [p for p in (file_in(self.data_dir, path) for path in paths) if p is not None]

    def _hand_over_files(self, tx, select_robot_and_path: str, args: tuple) -> None:
        """On a fleet's server: the files of rows this transaction deletes lie on the disks of the
        robots that wrote them, not here; each robot removes its own (``remove_files_handed_over``)."""
        if self.on_server:
            tx.execute(f"INSERT INTO files_to_remove(robot_id, path, t) SELECT r, p, ? FROM ({select_robot_and_path}) "
                       "AS f(r, p) WHERE r != '' ON CONFLICT DO NOTHING", (time.time(), *args))

    def remove_files_handed_over(self) -> int:
        """On a fleet's server: delete this robot's files of records an operator deleted elsewhere
        (forget, retention); returns how many files were removed."""
        if not (self.on_server and self.params.robot_id):
            return 0
        paths = [r[0] for r in self._conn().execute("SELECT path FROM files_to_remove WHERE robot_id=?",
                                                    (self.params.robot_id,))]
        if not paths:
            return 0
        removed = self._remove_files(paths)
        with self._transaction() as tx:
            tx.executemany("DELETE FROM files_to_remove WHERE robot_id=? AND path=?",
                           [(self.params.robot_id, p) for p in paths])
        log.info("removed %d files of records deleted on the fleet's server", removed)
        return removed

    def _remove_files(self, paths: Iterable[str]) -> int:
        """Delete files after the rows naming them are committed (a read-only or full disk
        fails the transaction first, changing nothing); one the file system still refuses is
        logged.  Returns how many were deleted."""
        removed = 0
        for p in dict.fromkeys(self._deletable(paths)):
            try:
                p.unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.error("cannot delete %s: %s", p, exc)
                continue
            removed += 1
        return removed

    def forget_identity(self, person: str, dry_run: bool = False) -> dict:
        """Delete every sighting, embedding, crop and summary of ``person`` (and of the ids
        merged into it); its ids are tombstoned, so later sightings of them are dropped on
        insert; descriptions naming it are scrubbed (and re-embedded).  With
        ``forget_deletes_images`` the keyframe images of every observation it was seen in are
        deleted too (file, image_path, image embedding).  Returns counts."""
        identity = self.resolve_person(person)
        conn = self._conn()
        name = conn.execute("SELECT display_name FROM identities WHERE identity_id=?", (identity,)).fetchone()[0]
        aliases = [r[0] for r in conn.execute("SELECT alias_id FROM identity_aliases WHERE identity_id=?", (identity,))]
        crops = [r[0] for r in conn.execute("SELECT crop_path FROM sightings WHERE identity_id=?", (identity,))]
        # the person's tracks: their unidentified sightings there (the same episode) are theirs too
        on_tracks = [(r[0], r[1]) for r in conn.execute(
            "SELECT s.id, s.crop_path FROM sightings s JOIN observations o ON o.id = s.obs WHERE s.identity_id IS NULL "
            "AND s.track IS NOT NULL AND (s.track, o.episode_id) IN (SELECT t.track, w.episode_id FROM sightings t "
            "JOIN observations w ON w.id = t.obs WHERE t.identity_id=? AND t.track IS NOT NULL)", (identity,))]
        crops += [c for _, c in on_tracks]
        obs_rows = [r[0] for r in conn.execute("SELECT DISTINCT obs FROM sightings WHERE identity_id=?", (identity,))]
        forget_ids = {identity, *aliases}
        pattern = _name_pattern([*forget_ids, name])
        mentioned = set()   # descriptions naming it without a sighting (e.g. an id merged later)
        for word in sorted(w for w in {*forget_ids, name} if w):
            like = "%" + word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            mentioned.update(r[0] for r in conn.execute(
                "SELECT id FROM observations WHERE description LIKE ? ESCAPE '\\' OR description_json LIKE ? "
                "ESCAPE '\\'", (like, like)))
        rows = self._rows_by_id(set(obs_rows) | mentioned)
        json_text = self._description_json(rows)
        with_images: list[int] = []
        images: list[str] = []
        image_vectors: list[int] = []
        if self.params.forget_deletes_images and obs_rows:
            for rid, has_vec in self._image_state(obs_rows):
                with_images.append(rid)
                if rows[rid]["image_path"]:
                    images.append(rows[rid]["image_path"])
                if has_vec:
                    image_vectors.append(rid)
        files = [c for c in crops if c] + images
        counts = {"observations_removed": 0, "sightings_removed": len(crops),
                  "images_removed": len(images), "files_removed": len(files)}
        if dry_run:
            return {**counts, "identity_id": identity, "dry_run": True}
        updates = []
        for rid, row in rows.items():
            text = scrub_identity(row["description"] or "", pattern)
            persons = ",".join(p for p in (row["persons"] or "").split(",") if p and p not in forget_ids)
            updates.append((rid, text, persons, text != (row["description"] or ""),
                            scrub_identity(json_text.get(rid, ""), pattern)))
        stale_summaries = [(r[0], r[1]) for r in conn.execute("SELECT identity_id, day, text FROM summaries")
                           if pattern.search(r[2] or "")]
        changed_text = [u for u in updates if u[3]]
        new_vecs = self.text_embedder.embed([u[1] for u in changed_text]) if changed_text else []
        stamp = time.time()
        with self._transaction() as tx:
            self._hand_over_files(tx, "SELECT o.robot_id, s.crop_path FROM sightings s JOIN observations o ON "
                                  "o.id = s.obs WHERE s.identity_id=? AND s.crop_path != ''", (identity,))
            if with_images:
                self._hand_over_files(tx, "SELECT robot_id, image_path FROM observations WHERE image_path != '' AND "
                                      f"id IN ({','.join('?' * len(with_images))})", tuple(with_images))
            tx.executemany("DELETE FROM sightings WHERE id=?", [(sid,) for sid, _ in on_tracks])
            tx.execute("DELETE FROM sightings WHERE identity_id=?", (identity,))
            tx.execute("DELETE FROM summaries WHERE identity_id=?", (identity,))
            tx.execute("DELETE FROM identities WHERE identity_id=?", (identity,))
            tx.executemany("INSERT OR REPLACE INTO forgotten_identities(identity_id, forgotten_at) VALUES (?,?)",
                           [(i, stamp) for i in sorted(forget_ids)])
            tx.execute("DELETE FROM identity_aliases WHERE identity_id=?", (identity,))
            tx.executemany("DELETE FROM identity_changes WHERE source=? OR target=?",   # nothing left to undo
                           [(i, i) for i in sorted(forget_ids)])
            tx.executemany("DELETE FROM summaries WHERE identity_id=? AND day=?", stale_summaries)
            for rid, text, persons, _changed, text_json in updates:
                tx.execute("UPDATE observations SET description=?, persons=?, description_json=? WHERE id=?",
                           (text, persons, text_json, rid))
            for (rid, *_rest), vec in zip(changed_text, new_vecs):
                tx.execute("UPDATE observations SET text_emb=? WHERE id=?", (_blob(_unit(vec)), rid))
            tx.executemany("UPDATE observations SET image_path='', image_emb=NULL WHERE id=?",
                           [(rid,) for rid in with_images])
            gen = self._bump_generation(tx)
        if changed_text:
            ids = np.array([u[0] for u in changed_text], dtype=np.int64)
            self._index("text").remove(ids)
            self._index("text").add(ids, np.stack([_unit(v) for v in new_vecs]))
        if image_vectors:
            self._index("image").remove(np.array(image_vectors, dtype=np.int64))
        counts["files_removed"] = self._remove_files(files)
        self._checkpoint_generation(gen)
        log.info("forgot identity %s: %d sightings, %d files", identity, counts["sightings_removed"],
                 counts["files_removed"])
        return {**counts, "identity_id": identity, "aliases": sorted(aliases), "dry_run": False}

    def _description_json(self, rows) -> dict[int, str]:
        out = {}
        ids = [int(i) for i in rows]
        for start in range(0, len(ids), 900):
            chunk = ids[start:start + 900]
            out.update((r[0], r[1] or "") for r in self._conn().execute(
                f"SELECT id, description_json FROM observations WHERE id IN ({','.join('?' * len(chunk))})", chunk))
        return out

    def _image_state(self, row_ids: Sequence[int]) -> list[tuple[int, bool]]:
        """(row id, has an image embedding) of the rows among ``row_ids`` with an image or its vector."""
        out = []
        ids = [int(i) for i in row_ids]
        for start in range(0, len(ids), 900):
            chunk = ids[start:start + 900]
            out += [(r[0], bool(r[1])) for r in self._conn().execute(
                f"SELECT id, image_emb IS NOT NULL FROM observations WHERE id IN ({','.join('?' * len(chunk))}) "
                "AND (image_path != '' OR image_emb IS NOT NULL)", chunk)]
        return out

    def _delete_observations(self, where: str, args: tuple, dry_run: bool) -> dict:
        conn = self._conn()
        ids = [r[0] for r in conn.execute(f"SELECT id FROM observations WHERE {where}", args)]
        files = [r[0] for r in conn.execute(f"SELECT image_path FROM observations WHERE {where}", args)]
        marks_sql = f"SELECT id FROM observations WHERE {where}"
        crops = [r[0] for r in conn.execute(f"SELECT crop_path FROM sightings WHERE obs IN ({marks_sql})", args)]
        counts = {"observations_removed": len(ids), "sightings_removed": len(crops),
                  "files_removed": sum(1 for f in files + crops if f)}
        if dry_run or not ids:
            return {**counts, "dry_run": dry_run}
        with self._transaction() as tx:
            self._hand_over_files(tx, f"SELECT robot_id, image_path FROM observations WHERE ({where}) AND "
                                  "image_path != ''", args)
            self._hand_over_files(tx, "SELECT o.robot_id, s.crop_path FROM sightings s JOIN observations o ON "
                                  f"o.id = s.obs WHERE s.obs IN ({marks_sql}) AND s.crop_path != ''", args)
            for table, col in (("sightings", "obs"), ("regions", "obs"), ("obs_xy", "id")):
                tx.execute(f"DELETE FROM {table} WHERE {col} IN ({marks_sql})", args)
            tx.execute(f"DELETE FROM observations WHERE {where}", args)
            self._rebuild_waypoint_stats(tx)
            tx.execute("DELETE FROM summaries WHERE identity_id NOT IN (SELECT DISTINCT identity_id FROM sightings "
                       "WHERE identity_id IS NOT NULL)")
            gen = self._bump_generation(tx)
        id_array = np.array(ids, dtype=np.int64)
        for kind in self.VECTOR_KINDS:
            self._index(kind).remove(id_array)
        self._load_times()
        counts["files_removed"] = self._remove_files(files + crops)
        self._checkpoint_generation(gen)
        return {**counts, "dry_run": False}

    def forget_older_than(self, hours: float, now: Optional[float] = None, dry_run: bool = False) -> dict:
        """Retention: delete every observation (and its sightings, regions, files) older than ``hours``."""
        if not (math.isfinite(hours) and hours >= 0):
            raise StoreError("forget_older_than: hours must be a finite number >= 0")
        cutoff = (now if now is not None else time.time()) - hours * 3600.0
        result = self._delete_observations("t < ?", (cutoff,), dry_run)
        if not dry_run:
            with self._transaction() as tx:
                tx.execute("DELETE FROM episodes WHERE episode_id NOT IN (SELECT DISTINCT episode_id FROM observations) "
                           "AND last_stamp < ?", (cutoff,))
        return result

    def forget_episode(self, episode_id: str, dry_run: bool = False) -> dict:
        """Delete one episode and everything recorded in it (an unknown episode is an error)."""
        conn = self._conn()
        if conn.execute("SELECT 1 FROM episodes WHERE episode_id=? UNION SELECT 1 FROM observations WHERE "
                        "episode_id=? LIMIT 1", (episode_id, episode_id)).fetchone() is None:
            known = [r[0] for r in conn.execute("SELECT episode_id FROM episodes ORDER BY start DESC LIMIT 10")]
            raise StoreError(f"no episode {episode_id[:128]!r} (latest: {', '.join(known) or 'none'})",
                             kind="UnknownEpisodeError")
        result = self._delete_observations("episode_id = ?", (episode_id,), dry_run)
        if not dry_run:
            with self._transaction() as tx:
                tx.execute("DELETE FROM episodes WHERE episode_id=?", (episode_id,))
                tx.execute("DELETE FROM occupancy_maps WHERE episode_id=?", (episode_id,))
        return result
