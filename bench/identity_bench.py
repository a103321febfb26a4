"""Identity benchmark: person identities over days, from the sightings an eval memory stored.

Perception (detection, faces, body re-ID) ran once when ``embodied-memory eval`` built the
memory; this replays its stored sightings, keyframe by keyframe, through the identity
manager (``people/identity.py``) and then consolidation (``people/consolidation.py``), and
scores both against the simulator (``evaluation/identity_metrics.py``: measurement only,
nothing reaches the manager).  Prints per world and per day: identities vs people, purity,
ids per person, pairwise precision / recall, people never identified; live assignment in ms
per sighting and consolidation seconds.

    .venv/bin/embodied-memory eval --seeds 0,1,2,3,4 --days 5 --variants psfr --planners rules --out eval5d
    .venv/bin/python bench/identity_bench.py eval5d            # every seed*/memory_psfr in it
    .venv/bin/python bench/identity_bench.py eval5d --eps 0.5 --merge-eps 0.4   # another setting
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
from dataclasses import fields, replace
from pathlib import Path

from embodied_memory.evaluation.identity_metrics import identity_quality
from embodied_memory.params import StoreParams
from embodied_memory.people.identity import Evidence, IdentityManager, IdentityParams
from embodied_memory.perception.pipeline import face_px
from embodied_memory.cache import cache_dir
from embodied_memory.sim.episode import GroundTruth
from embodied_memory.store import open_store

COLUMNS = ("identities", "people", "purity", "ids_per_person", "pairwise_precision", "pairwise_recall")


def replay_online(sightings, params: IdentityParams) -> tuple[dict[int, str], list[float]]:
    """Sighting id -> identity from the online manager (no state on disk); ms per sighting."""
    manager = IdentityManager(params)
    labels, ms = {}, []
    for _, group in itertools.groupby(sightings, key=lambda s: s.obs):
        group = list(group)
        start = time.perf_counter()
        results = manager.assign_frame(group[0].t, [Evidence(s.face_embedding, s.reid_embedding, face_px(s.face_box),
                                                             s.position, s.box) for s in group])
        ms += [(time.perf_counter() - start) * 1e3 / len(group)] * len(group)
        for s, r in zip(group, results):
            labels[s.sighting_id] = r.identity_id
        for absorbed, survivor in (m for r in results for m in r.merged):
            for k, v in labels.items():
                if v == absorbed:
                    labels[k] = survivor
    return labels, ms


def _row(label: str, m: dict) -> str:
    cells = " | ".join("-" if m.get(c) is None else str(m[c]) for c in COLUMNS)
    return f"| {label} | {cells} | {', '.join(m.get('never_identified', [])) or '-'} |"


def bench_memory(memory: Path, params: IdentityParams, consolidate: bool) -> list[str]:
    marker = json.loads((memory / "eval_memory.json").read_text())
    truth = GroundTruth.load(cache_dir() / marker["episode"] / "ground_truth.json")
    store = open_store(StoreParams(data_dir=str(memory)))
    try:
        sightings = store.sighting_evidence()
        times = store.observation_times()
    finally:
        store.close()
    lines = []
    stored = identity_quality([(s.identity_id, s.t, s.box) for s in sightings if s.identity_id], truth,
                              keyframe_times=times)
    lines.append(_row(f"{memory.parent.name} stored (as the memory holds it: after the operator's names)", stored))
    labels, ms = replay_online(sightings, params)
    online = identity_quality([(labels[s.sighting_id], s.t, s.box) for s in sightings if labels[s.sighting_id]],
                              truth, keyframe_times=times)
    lines.append(_row(f"{memory.parent.name} online", online))
    for day, m in online["per_day"].items():
        lines.append(_row(f"  day {day}", m))
    lines.append(f"| ms per sighting (online): median {statistics.median(ms):.2f}, p95 "
                 f"{sorted(ms)[int(0.95 * (len(ms) - 1))]:.2f}, {len(ms)} sightings | | | | | | | |")
    if consolidate:
        from embodied_memory.people.consolidation import ConsolidationParams, consolidate as run
        relabelled = [replace(s, identity_id=labels[s.sighting_id]) for s in sightings]
        start = time.perf_counter()
        plan = run(relabelled, ConsolidationParams(), set())
        seconds = time.perf_counter() - start
        after = identity_quality([(plan.labels.get(s.sighting_id, s.identity_id), s.t, s.box) for s in relabelled
                                  if plan.labels.get(s.sighting_id, s.identity_id)], truth, keyframe_times=times)
        lines.append(_row(f"{memory.parent.name} consolidated", after))
        for day, m in after["per_day"].items():
            lines.append(_row(f"  day {day}", m))
        lines.append(f"| consolidation: {seconds:.1f} s, {len(plan.merges)} merges, {len(plan.splits)} splits | "
                     "| | | | | | |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("eval_dir", type=Path, help="an eval --out directory (its seed*/memory_psfr memories)")
    parser.add_argument("--variant", default="psfr")
    parser.add_argument("--no-consolidate", action="store_true")
    for f in fields(IdentityParams):
        if f.type in ("float", "int") or isinstance(f.default, (int, float)):
            parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default,
                                help=f"IdentityParams.{f.name} (default {f.default})")
    args = parser.parse_args(argv)
    params = IdentityParams(**{f.name: getattr(args, f.name) for f in fields(IdentityParams) if hasattr(args, f.name)})
    memories = sorted(args.eval_dir.glob(f"seed*/memory_{args.variant}")) or \
        sorted(args.eval_dir.glob(f"memory_{args.variant}"))
    if not memories:
        print(f"no memory_{args.variant} under {args.eval_dir}", file=sys.stderr)
        return 1
    print("| memory | " + " | ".join(COLUMNS) + " | never identified |")
    print("|---" * (len(COLUMNS) + 2) + "|")
    with tempfile.TemporaryDirectory():
        for memory in memories:
            if not (memory / "eval_memory.json").exists():
                continue
            for line in bench_memory(memory, params, not args.no_consolidate):
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
