"""``embodied-memory consolidate``: the memory's "sleep" on a data directory.

Reads every stored sighting, re-clusters the face tracks (``people.consolidation``: average
linkage under cannot-link and the operator's names), applies the merges and splits to the
store (``MemoryStore.relabel_sightings``: sightings, observations' people and descriptions,
summaries; journalled, undoable) and rebuilds perception's identity state from the result, so
that live assignment goes on from the consolidated identities.  Split ids come from the
identity state's counter: never an id issued before.  Needs perception stopped on the data
directory (its identity state is locked while it runs).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from .people.consolidation import ConsolidationParams, ConsolidationPlan, consolidate
from .people.identity import IdentityManager, IdentityParams
from .perception.pipeline import face_px

log = logging.getLogger(__name__)


@dataclass
class ConsolidationReport:
    sightings: int = 0
    tracks: int = 0
    merges: list[tuple[str, str]] = field(default_factory=list)
    splits: list[tuple[str, str, int]] = field(default_factory=list)   # (source, new id, sightings)
    split_sightings: list[list[int]] = field(default_factory=list)     # each split's sighting ids
    relabelled: int = 0
    applied: bool = False

    def summary(self) -> str:
        moves = [f"merge {a} -> {b}" for a, b in self.merges] + \
                [f"split {n} sightings of {s} -> {t}" for s, t, n in self.splits]
        return (f"{self.sightings} sightings, {self.tracks} face tracks: {len(self.merges)} merges, "
                f"{len(self.splits)} splits, {self.relabelled} sightings relabelled"
                f"{'' if self.applied else ' (dry run: nothing changed)'}" + "".join(f"\n  {m}" for m in moves))


def moves_of(plan: ConsolidationPlan, current: dict[int, str]) -> list[tuple[str, str, str, list[int]]]:
    """The plan as the store's moves (kind, source, target, sighting ids): splits first (their
    sightings leave their source), then every other relabelled sighting grouped as a merge."""
    split_of = {sid: split for split in plan.splits for sid in split.sightings}
    grouped: dict[tuple[str, str, str], list[int]] = {}
    for sid, target in sorted(plan.labels.items()):
        source = current[sid]
        kind = "split" if sid in split_of and split_of[sid].identity_id == target else "merge"
        grouped.setdefault((kind, source, target), []).append(sid)
    return [(k, s, t, ids) for (k, s, t), ids in sorted(grouped.items(), key=lambda kv: kv[0][0] != "split")]


def consolidate_memory(store, identity_dir: Path, params: ConsolidationParams = ConsolidationParams(),
                       identity_params: IdentityParams = IdentityParams(), dry_run: bool = False,
                       lock_wait_s: float = 2.0) -> ConsolidationReport:
    """Consolidate the memory of ``store`` and the identity state in ``identity_dir``.  A dry run
    only reads (perception may hold the state); applying needs the state's lock."""
    sightings = store.sighting_evidence()
    report = ConsolidationReport(sightings=len(sightings))
    names = {p["person"]: p["name"].lower() for p in store.people() if p.get("name")}
    if dry_run:
        snapshot = IdentityManager.read_snapshot(identity_dir)
        issued = int(snapshot[0]["next"]) - 1 if snapshot else 0
        manager = None
    else:
        manager = IdentityManager(identity_params, identity_dir, lock_wait_s=lock_wait_s)
        issued = manager._next - 1
    try:
        plan = consolidate(sightings, params, names=names, new_id=None if dry_run else manager.issue_id,
                           taken_ids={f"{identity_params.id_prefix}{issued:04d}"})
        report.tracks = plan.tracks
        report.merges = list(plan.merges)
        report.splits = [(s.source, s.identity_id, len(s.sightings)) for s in plan.splits]
        report.split_sightings = [list(s.sightings) for s in plan.splits]
        report.relabelled = len(plan.labels)
        if dry_run or plan.empty:
            return report
        current = {s.sighting_id: s.identity_id for s in sightings}
        store.relabel_sightings(moves_of(plan, current))
        after = {sid: plan.labels.get(sid, ident) for sid, ident in current.items()}
        manager.rebuild([(after[s.sighting_id], s.obs, s.face_embedding) for s in sightings
                         if s.face_embedding is not None and after[s.sighting_id]
                         and face_px(s.face_box) >= identity_params.min_face_px], plan.merges)
        report.applied = True
        return report
    finally:
        if manager is not None:
            manager.close()
