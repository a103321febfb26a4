"""``embodied-memory consolidate``: the memory's "sleep" on a data directory.

Reads every stored sighting, re-clusters the face tracks (``people.consolidation``: average
linkage under cannot-link and the operator's names), applies the merges and splits to the
store (``MemoryStore.relabel_sightings``: sightings, observations' people and descriptions,
summaries; journalled, undoable) and rebuilds perception's identity state from the result, so
that live assignment goes on from the consolidated identities.  Split ids come from the
identity state's counter: never an id issued before.  Needs perception stopped on the data
directory (its identity state is locked while it runs).

``mode="attach"`` runs only the attach pass (``people.consolidation.attach``): sightings without an
identity whose face is now clearly one identity's are given it; nothing identified moves, no id is
issued, and perception's exemplars stay as they were (an attached face is never evidence for
later assignments); the keyframes they share become cannot-links.  It is what perception runs by
itself once the robot has been idle (``attach_after_idle_s``).
"""
from __future__ import annotations

import itertools
import logging
import sqlite3
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

from .people.consolidation import ConsolidationParams, ConsolidationPlan, attach, consolidate
from .people.identity import IdentityManager, IdentityParams, clear_face, face_px
from .store.identities import (read_display_names, read_distinct_pairs, read_highest_identity,
                               read_pinned_sightings, read_sighting_evidence)

log = logging.getLogger(__name__)


@dataclass
class ConsolidationReport:
    sightings: int = 0
    tracks: int = 0
    merges: list[tuple[str, str]] = field(default_factory=list)
    splits: list[tuple[str, str, int]] = field(default_factory=list)   # (source, new id, sightings)
    split_sightings: list[list[int]] = field(default_factory=list)     # each split's sighting ids
    relabelled: int = 0
    moves: list["Move"] = field(default_factory=list)   # every store change, as the journal will show it
    dry_run: bool = False
    applied: bool = False
    mode: str = "full"
    changes: list[int] = field(default_factory=list)   # the journal's numbers of the applied moves (at rest)

    def summary(self) -> str:
        """One line of counts, then every move the store makes (or would make, on a dry run); an
        attach pass's one-sighting moves are listed by identity, with their numbers."""
        state = " (dry run: nothing changed)" if self.dry_run else "" if self.applied else " (nothing to change)"
        if self.mode == "attach":
            first: dict[str, list[int]] = {}
            for i, (_, _, target, _) in enumerate(self.moves, 1):
                first.setdefault(target, []).append(i)
            lines = [f"[{_numbers(nums)}] assign {len(nums)} sighting{'s' if len(nums) != 1 else ''} of (no identity) "
                     f"-> {target}" for target, nums in first.items()]
            return (f"attach pass over {self.sightings} sightings: {self.relabelled} without an identity given one "
                    f"(one move each){state}" + "".join(f"\n  {line}" for line in lines))
        lines = [f"[{i}] {kind} {len(ids)} sighting{'s' if len(ids) != 1 else ''} of "
                 f"{source or '(no identity)'} -> {target}" for i, (kind, source, target, ids) in enumerate(self.moves, 1)]
        return (f"{self.sightings} sightings, {self.tracks} face tracks: {len(self.merges)} merges, "
                f"{len(self.splits)} splits, {self.relabelled} sightings given another identity (or one, where "
                f"they had none){state}" + "".join(f"\n  {m}" for m in lines))


def _numbers(nums: list[int]) -> str:
    """1,2,3,7 -> '1-3,7'."""
    runs, start = [], nums[0]
    for prev, cur in zip(nums, nums[1:] + [None]):
        if cur != prev + 1:
            runs.append(f"{start}-{prev}" if prev != start else f"{start}")
            start = cur
    return ",".join(runs)


def moves_of(plan: ConsolidationPlan, current: dict[int, str]) -> list[tuple[str, str, str, list[int]]]:
    """The plan as the store's moves (kind, source, target, sighting ids): splits first (their
    sightings leave their source), then every other relabelled sighting grouped as a merge, or
    as an assignment where it had no identity."""
    split_of = {sid: split for split in plan.splits for sid in split.sightings}
    grouped: dict[tuple[str, str, str], list[int]] = {}
    for sid, target in sorted(plan.labels.items()):
        source = current[sid]
        kind = "split" if sid in split_of and split_of[sid].identity_id == target else \
            "assign" if not source else "merge"
        grouped.setdefault((kind, source, target), []).append(sid)
    return [(k, s, t, ids) for (k, s, t), ids in sorted(grouped.items(), key=lambda kv: kv[0][0] != "split")]


Move = tuple[str, str, str, list[int]]      # (kind, source, target, sighting ids): one store change


MODES = ("full", "attach")


def _plan(sightings, names: dict[str, str], params: ConsolidationParams, issued: int, id_prefix: str,
          new_id, constraints: tuple[set[tuple[str, str]], set[int]],
          mode: str = "full", forgotten=None) -> tuple[ConsolidationReport, ConsolidationPlan]:
    """``constraints``: the operator's undos (``MemoryStore.operator_constraints``); ``new_id``:
    issues a split's id (None: the ids after ``issued``, taken by the caller if it applies them);
    ``forgotten(face)``: a forgotten person's face (the attach pass leaves it alone)."""
    if mode not in MODES:
        raise ValueError(f"consolidation mode {mode!r}: one of {', '.join(MODES)}")
    distinct, pinned = constraints
    if new_id is None:
        numbers = itertools.count(issued + 1)
        new_id = lambda: f"{id_prefix}{next(numbers):04d}"    # noqa: E731
    plan = attach(sightings, params, pinned=pinned, forgotten=forgotten) if mode == "attach" else \
        consolidate(sightings, params, names=names, new_id=new_id, taken_ids={f"{id_prefix}{issued:04d}"},
                    distinct=distinct, pinned=pinned)
    moves = [("assign", "", target, [sid]) for sid, target in sorted(plan.labels.items())] if mode == "attach" else \
        moves_of(plan, {s.sighting_id: s.identity_id for s in sightings})    # attached: each undone on its own
    report = ConsolidationReport(sightings=len(sightings), tracks=plan.tracks, merges=list(plan.merges),
                                 splits=[(s.source, s.identity_id, len(s.sightings)) for s in plan.splits],
                                 split_sightings=[list(s.sightings) for s in plan.splits], relabelled=len(plan.labels),
                                 moves=moves, mode=mode)
    return report, plan


def _selected(report: ConsolidationReport, plan: ConsolidationPlan,
              only: set[int]) -> tuple[ConsolidationReport, ConsolidationPlan]:
    """The report and plan cut down to the moves numbered ``only`` (1-based, as listed)."""
    unknown = sorted(i for i in only if not 1 <= i <= len(report.moves))
    if unknown:
        raise ValueError(f"no move {', '.join(map(str, unknown))}: this pass has {len(report.moves)} "
                         "(run --dry-run to list them)")
    moves = [m for i, m in enumerate(report.moves, 1) if i in only]
    pairs = {(kind, source, target) for kind, source, target, _ in moves}
    kept = ConsolidationPlan(labels={sid: target for _, _, target, ids in moves for sid in ids}, tracks=plan.tracks,
                             merges=[m for m in plan.merges if ("merge", *m) in pairs],
                             splits=[sp for sp in plan.splits if ("split", sp.source, sp.identity_id) in pairs])
    return replace(report, moves=moves, merges=list(kept.merges),
                   splits=[(sp.source, sp.identity_id, len(sp.sightings)) for sp in kept.splits],
                   split_sightings=[list(sp.sightings) for sp in kept.splits],
                   relabelled=len(kept.labels)), kept


def _rebuild_after(manager: IdentityManager, sightings, plan: ConsolidationPlan, distinct: set[tuple[str, str]],
                   keep=None, changes: list[dict] = ()) -> None:
    """Rebuild ``manager`` as the memory will be once the plan is applied: every clear stored face
    an exemplar of its new identity; two people wherever sightings share a keyframe (faceless
    ones too) or an operator's undo kept them apart (``distinct``)."""
    min_px = manager.params.min_face_px
    faces, by_obs = [], {}
    for s in sightings:
        ident = plan.labels.get(s.sighting_id, s.identity_id)
        if not ident:
            continue
        by_obs.setdefault(s.obs, set()).add(ident)
        if s.face_embedding is not None and clear_face(face_px(s.face_box), min_px):
            faces.append((ident, s.face_embedding))
    apart = {(a, b) for idents in by_obs.values() for a in idents for b in idents if a < b} | distinct
    manager.rebuild(faces, apart=apart, keep=keep, changes=changes)


def params_for(manager_params: IdentityParams) -> ConsolidationParams:
    """Consolidation as perception's identity settings see faces: what is clear, what may be
    attached, how near."""
    return ConsolidationParams(min_face_px=manager_params.min_face_px, attach_eps=manager_params.eps_low_quality,
                               attach_min_face_px=manager_params.min_match_face_px, k=manager_params.k,
                               max_exemplars=manager_params.max_exemplars)


def _after_attach(manager: IdentityManager, sightings, plan: ConsolidationPlan, changes: list[dict] = ()) -> None:
    """An attach pass leaves the exemplars alone; whoever now shares a keyframe with an attached
    sighting is another person (a cannot-link), and the moves wait in the change log."""
    by_obs: dict[int, set[str]] = {}
    for s in sightings:
        ident = plan.labels.get(s.sighting_id, s.identity_id)
        if ident:
            by_obs.setdefault(s.obs, set()).add(ident)
    touched = {s.obs for s in sightings if s.sighting_id in plan.labels}
    manager.keep_apart({(a, b) for obs in touched for a in by_obs[obs] for b in by_obs[obs] if a < b}, changes)


def consolidate_memory(store, identity_dir: Path, params: Optional[ConsolidationParams] = None,
                       identity_params: IdentityParams = IdentityParams(), dry_run: bool = False,
                       lock_wait_s: float = 2.0, only: Optional[set[int]] = None,
                       mode: str = "full") -> ConsolidationReport:
    """Consolidate the memory of ``store`` and the identity state in ``identity_dir`` (perception
    stopped: ``embodied-memory consolidate``, the inspector on a memory at rest).  A dry run only
    reads (perception may hold the state); applying needs the state's lock.  ``only``: apply just
    these moves (numbered from 1 as the summary lists them; the operator rejects the others)."""
    params = params or params_for(identity_params)
    sightings = store.sighting_evidence(reid=False)
    names = store.display_names()
    constraints = store.operator_constraints()
    manager = None
    if dry_run:
        snapshot = IdentityManager.read_snapshot(identity_dir)
        issued = max(int(snapshot[0]["next"]) - 1 if snapshot else 0, store.highest_identity(identity_params.id_prefix))
    else:
        manager = IdentityManager(identity_params, identity_dir, lock_wait_s=lock_wait_s)
        manager.issue_past(store.highest_identity(identity_params.id_prefix))
        issued = manager.issued
    try:
        report, plan = _plan(sightings, names, params, issued, identity_params.id_prefix, None, constraints, mode,
                             None if manager is None else manager.suppressed)
        report.dry_run = dry_run
        if only is not None:
            report, plan = _selected(report, plan, only)
        if dry_run or plan.empty:
            return report
        # the ids the dry run showed, taken now (perception is stopped: nothing else issues ids)
        manager.issue_past(max((int(sp.identity_id[len(identity_params.id_prefix):]) for sp in plan.splits), default=0))
        report.changes = store.relabel_sightings(report.moves)
        if mode == "attach":
            _after_attach(manager, sightings, plan)
        else:
            _rebuild_after(manager, sightings, plan, constraints[0])
        report.applied = True
        return report
    finally:
        if manager is not None:
            manager.close()


class ChangesPending(RuntimeError):
    """The memory has not acknowledged the last pass's moves: another pass would plan on a
    memory that does not show them yet."""


def consolidate_live(db_path: Path, manager: IdentityManager, params: Optional[ConsolidationParams] = None,
                     dry_run: bool = False, mode: str = "full") -> tuple[ConsolidationReport, list[dict]]:
    """Consolidation beside a running memory (perception's, with its own identity state): the
    stored sightings are read from the memory's database read-only, split ids come from
    ``manager``, which is rebuilt at once (identities the database does not hold yet keep their
    exemplars) with the moves for the memory in its change log, in one snapshot; the moves are
    returned as change records (``change_records``: ``IdentitySplit`` messages to send)."""
    params = params or params_for(manager.params)
    if manager.change_log and not dry_run:
        raise ChangesPending(f"{len(manager.change_log)} identity change(s) of an earlier pass not yet acknowledged "
                             "by the memory (is the memory node running?)")
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30.0)
    try:
        sightings, names = read_sighting_evidence(conn, reid=False), read_display_names(conn)
        constraints = read_distinct_pairs(conn), read_pinned_sightings(conn)
        if not dry_run:
            manager.issue_past(read_highest_identity(conn, manager.params.id_prefix))
    finally:
        conn.close()
    report, plan = _plan(sightings, names, params, manager.issued, manager.params.id_prefix,
                         None if dry_run else manager.issue_id, constraints, mode, manager.suppressed)
    report.dry_run = dry_run
    if dry_run or plan.empty:
        return report, []
    changes = change_records(report.moves)
    if mode == "attach":
        _after_attach(manager, sightings, plan, changes)
    else:
        stored = {s.identity_id for s in sightings}
        _rebuild_after(manager, sightings, plan, constraints[0], keep=lambda ident: ident not in stored,
                       changes=changes)
    report.applied = True
    return report, changes


def attach_in_process(store, manager: IdentityManager,
                      params: Optional[ConsolidationParams] = None) -> ConsolidationReport:
    """The attach pass on a store and an identity state this process holds (the offline ingest's,
    when the recording shows the robot idle): applied at once, nothing to acknowledge."""
    params = params or params_for(manager.params)
    sightings = store.sighting_evidence(reid=False)
    report, plan = _plan(sightings, {}, params, manager.issued, manager.params.id_prefix, None,
                         store.operator_constraints(), "attach", manager.suppressed)
    if not plan.empty:
        store.relabel_sightings(report.moves)
        _after_attach(manager, sightings, plan)
        report.applied = True
    return report


def refresh_live(db_path: Path, manager: IdentityManager) -> bool:
    """Rebuild perception's identity state from the memory's database as it is now plus the
    moves the memory has not acknowledged yet: a person forgotten while a pass's moves were
    pending leaves no face under the identities those moves were taking them to (the memory
    deleted their sightings; the moves' sightings of them match nothing).  False when no move
    is pending (nothing of a pass can hold the person)."""
    if not manager.change_log:
        return False
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30.0)
    try:
        sightings, distinct = read_sighting_evidence(conn, reid=False), read_distinct_pairs(conn)
    finally:
        conn.close()
    plan = ConsolidationPlan(labels={int(i): c["target"] for c in manager.change_log for i in c["sightings"]})
    rebuilt = {s.identity_id for s in sightings} | set(plan.labels.values())   # a move's target: from the moves
    _rebuild_after(manager, sightings, plan, distinct, keep=lambda ident: ident not in rebuilt)
    return True


def undo_at_rest(store, identity_dir: Path, change: int, identity_params: IdentityParams = IdentityParams(),
                 lock_wait_s: float = 2.0) -> int:
    """An operator undoes a merge or split on a memory at rest: the store moves the sightings
    back and perception's identity state is rebuilt from the store (and never sends the change
    again), so later sightings follow the undo.  Needs perception stopped."""
    manager = IdentityManager(identity_params, identity_dir, lock_wait_s=lock_wait_s)
    try:
        row = next((c for c in store.identity_changes(limit=1_000_000) if c["change"] == change), None)
        moved = store.undo_identity_change(change)
        if moved and row is not None:
            manager.drop_logged(row["source"], row["target"])
            _rebuild_after(manager, store.sighting_evidence(reid=False), ConsolidationPlan(),
                           store.operator_constraints()[0])
        return moved
    finally:
        manager.close()


def change_records(moves: list[Move]) -> list[dict]:
    """Each move as the record perception keeps and sends (``IdentitySplit``), with the id the
    memory acknowledges it by."""
    return [{"change_id": f"{kind}:{source}>{target}:{ids[0]}+{len(ids)}", "kind": kind, "source": source,
             "target": target, "sightings": [int(i) for i in ids]} for kind, source, target, ids in moves if ids]
