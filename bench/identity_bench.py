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
from embodied_memory.people.consolidation import ConsolidationParams
from embodied_memory.people.identity import Evidence, IdentityManager, IdentityParams
from embodied_memory.people.identity import face_px
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


def identified_share(sightings, labels: dict[int, str], truth: GroundTruth) -> float:
    """Of the sightings that show a person (per the simulator: measurement only), the share
    given an identity: what a question about that person can find."""
    from embodied_memory.sim.naming import frames_by_time, who_is_at
    by_time = frames_by_time(truth)
    shown = [s for s in sightings if (f := by_time.get(s.t)) is not None and who_is_at(f, s.box) is not None]
    return round(sum(1 for s in shown if labels.get(s.sighting_id)) / len(shown), 3) if shown else 0.0


def bench_memory(memory: Path, params: IdentityParams, consolidate: bool,
                 consolidation: ConsolidationParams = ConsolidationParams()) -> list[str]:
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
    lines.append(f"| identified: stored {identified_share(sightings, {s.sighting_id: s.identity_id for s in sightings}, truth)}"
                 f", online {identified_share(sightings, labels, truth)} of the sightings showing a person | | | | | | | |")
    for day, m in online["per_day"].items():
        lines.append(_row(f"  day {day}", m))
    lines.append(f"| ms per sighting (online): median {statistics.median(ms):.2f}, p95 "
                 f"{sorted(ms)[int(0.95 * (len(ms) - 1))]:.2f}, {len(ms)} sightings | | | | | | | |")
    if consolidate:
        from embodied_memory.people.consolidation import consolidate as run
        relabelled = [replace(s, identity_id=labels[s.sighting_id]) for s in sightings]
        start = time.perf_counter()
        plan = run(relabelled, consolidation, set())
        seconds = time.perf_counter() - start
        after = identity_quality([(plan.labels.get(s.sighting_id, s.identity_id), s.t, s.box) for s in relabelled
                                  if plan.labels.get(s.sighting_id, s.identity_id)], truth, keyframe_times=times)
        lines.append(_row(f"{memory.parent.name} consolidated", after))
        for day, m in after["per_day"].items():
            lines.append(_row(f"  day {day}", m))
        lines.append(f"| consolidation: {seconds:.1f} s, {len(plan.merges)} merges, {len(plan.splits)} splits | "
                     "| | | | | | |")
    return lines


def synthetic_week(people: int = 40, sightings: int = 20000, days: int = 7, dim: int = 128, seed: int = 0):
    """``sightings`` stored sightings of ``people`` over ``days`` (SFace-like: same person ~0.6-0.9
    cosine, different ~0.1): walks through the building, a few keyframes per track, 1-3 people
    per keyframe, each already labelled by its person (the online result), oldest first."""
    import numpy as np
    from embodied_memory.types import StoredSighting
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(people, dim))
    out, t, obs = [], 1_773_000_000.0, 0
    gap = days * 86400.0 / (sightings / 6)               # between tracks (about 6 sightings each)
    while len(out) < sightings:
        here = rng.choice(people, size=int(rng.integers(1, 4)), replace=False)
        t += gap
        for _ in range(int(rng.integers(2, 6))):          # one short track: keyframes 1 s apart
            obs += 1
            t += 1.0
            for k, who in enumerate(here):
                face = centres[who] + 0.55 * rng.normal(size=dim)
                out.append(StoredSighting(len(out) + 1, obs, t, f"person_{who + 1:04d}", (100.0 * k, 0, 100.0 * k + 60, 200),
                                          (100.0 * k + 10, 10, 100.0 * k + 50, 50), (face / np.linalg.norm(face)).astype(np.float32),
                                          None, (float(3 * k), float(who % 7))))
    return out[:sightings]


def bench_synthetic(n: int) -> list[str]:
    """Consolidation and live assignment at a week's scale (no simulator needed)."""
    from embodied_memory.people.consolidation import ConsolidationParams, consolidate as run
    sightings = synthetic_week(sightings=n)
    start = time.perf_counter()
    plan = run(sightings, ConsolidationParams(), set())
    seconds = time.perf_counter() - start
    from dataclasses import replace as with_
    from embodied_memory.people.consolidation import attach
    unknown = set(range(0, len(sightings), 10))           # every tenth sighting left unidentified, its face small
    blanked = [with_(s, identity_id="", face_box=(0, 0, 13, 13)) if i in unknown else s for i, s in enumerate(sightings)]
    start = time.perf_counter()
    attached = attach(blanked, ConsolidationParams())
    attach_s = time.perf_counter() - start
    right = sum(sightings[i].identity_id == attached.labels.get(sightings[i].sighting_id) for i in unknown)
    _, ms = replay_online(sightings, IdentityParams())
    late = ms[-len(ms) // 10:]                            # the week's last day: the most exemplars
    return [f"synthetic week: {n} sightings of 40 people, consolidation {seconds:.1f} s ({len(plan.merges)} merges, "
            f"{len(plan.splits)} splits, {plan.tracks} face tracks); attach pass over {len(unknown)} unidentified small "
            f"faces {attach_s:.1f} s ({len(attached.labels)} attached, {right} to their person); live assignment: median "
            f"{statistics.median(ms):.2f} ms, p95 {sorted(ms)[int(0.95 * (len(ms) - 1))]:.2f} ms per sighting "
            f"(last tenth: median {statistics.median(late):.2f} ms)"]


def bench_labelled_faces(photos: list[tuple[str, Path]], label: str) -> list[str]:
    """Labelled photos (person, path) through the same code path (YuNet + SFace -> assign_frame,
    one photo a keyframe): purity, ids per person, pairwise precision / recall."""
    import cv2
    from embodied_memory.evaluation.identity_metrics import clustering_quality
    from embodied_memory.perception.faces import YuNetSFace
    faces, manager, pairs = YuNetSFace(), IdentityManager(IdentityParams()), []
    for person, photo in photos:
        found = faces.detect(cv2.imread(str(photo)))
        if len(found) != 1:
            continue
        [result] = manager.assign_frame(None, [Evidence(found[0].embedding, None, face_px(found[0].box))])
        pairs.append((result.identity_id, person))
    m = clustering_quality(pairs)
    return [f"labelled faces, {label}: {len(pairs)} photos of {m['people']} people -> {m['identities']} identities, "
            f"purity {m['purity']}, ids per person {m['ids_per_person']}, pairwise precision "
            f"{m['pairwise_precision']} / recall {m['pairwise_recall']}"]


def portrait_pairs(out: Path) -> list[tuple[str, Path]]:
    """MiniWorld's stock portraits (the simulator's faces, shipped in its package) with a second
    photo of each: mirrored, scaled, relit (``sim.naming.enrolment_photo``)."""
    from embodied_memory.sim.naming import enrolment_photo
    from embodied_memory.sim.world import usable_portraits
    return [pair for i, p in enumerate(usable_portraits())
            for pair in ((p.stem, p), (p.stem, Path(enrolment_photo(str(p), out / f"{i}.png"))))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("eval_dir", type=Path, nargs="?", help="an eval --out directory (its seed*/memory_psfr memories)")
    parser.add_argument("--synthetic", type=int, default=0, metavar="N",
                        help="also consolidate N synthetic sightings of a week (scale; e.g. 20000)")
    parser.add_argument("--faces", type=Path, default=None, metavar="DIR",
                        help="also cluster a folder of labelled photos, NAME/*.jpg (e.g. ../shared/data/faces/"
                             "face_recognition_knn/train)")
    parser.add_argument("--portraits", action="store_true",
                        help="also cluster the simulator's stock portraits, two photos of each")
    parser.add_argument("--variant", default="psfr")
    parser.add_argument("--no-consolidate", action="store_true")
    parser.add_argument("--consolidation-eps", type=float, default=ConsolidationParams.eps,
                        help=f"ConsolidationParams.eps (default {ConsolidationParams.eps})")
    for f in fields(IdentityParams):
        if f.type in ("float", "int") or isinstance(f.default, (int, float)):
            parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default,
                                help=f"IdentityParams.{f.name} (default {f.default})")
    args = parser.parse_args(argv)
    params = IdentityParams(**{f.name: getattr(args, f.name) for f in fields(IdentityParams) if hasattr(args, f.name)})
    with tempfile.TemporaryDirectory() as tmp:
        lines = (bench_synthetic(args.synthetic) if args.synthetic else []) + \
            (bench_labelled_faces([(p.parent.name, p) for p in sorted(args.faces.glob("*/*")) if p.is_file()],
                                  str(args.faces)) if args.faces else []) + \
            (bench_labelled_faces(portrait_pairs(Path(tmp)), "stock portraits") if args.portraits else [])
    for line in lines:
        print(line, flush=True)
    if args.eval_dir is None:
        return 0 if lines else parser.error("give an eval directory, --synthetic, --faces or --portraits")
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
            for line in bench_memory(memory, params, not args.no_consolidate,
                                     ConsolidationParams(eps=args.consolidation_eps, min_face_px=params.min_face_px)):
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
