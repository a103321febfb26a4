"""Ingest benchmark: keyframe selection speed, whole-ingest real-time factor, memory growth.

  1. psfr / uniform selection on 640x480 frames (vtest.avi when available, else synthetic),
     one core: frames per second;
  2. the whole embedded-default ingest (library path: bag -> sync -> psfr -> perception ->
     store) on a 15 fps bag: real-time factor and where the time goes per stage;
  3. stored bytes per hour of robot operation (SQLite + vector snapshots + JPEG keyframes).

    .venv/bin/python bench/ingest_bench.py --seconds 120
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from embodied_memory.ingest.bag_writer import BagWriter
from embodied_memory.ingest.offline import ingest_bag
from embodied_memory.ingest.selection import FrameSelector, SelectionParams
from embodied_memory.params import StoreParams
from embodied_memory.perception.pipeline import Perception, PerceptionParams
from embodied_memory.store import open_store

VTEST = Path(os.environ.get("EMBODIED_MEMORY_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")) \
    / "video" / "vtest.avi"


def frames(n: int) -> list[np.ndarray]:
    out = []
    if VTEST.exists():
        capture = cv2.VideoCapture(str(VTEST))
        while len(out) < n:
            ok, frame = capture.read()
            if not ok:
                capture.set(cv2.CAP_PROP_POS_FRAMES, 0)
                continue
            out.append(cv2.resize(frame, (640, 480)))
    else:
        rng = np.random.default_rng(0)
        base = (rng.random((480, 640, 3)) * 255).astype(np.uint8)
        out = [np.roll(base, i * 3, axis=1) for i in range(n)]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=120.0, help="length of the 15 fps bag")
    parser.add_argument("--fps", type=float, default=15.0)
    args = parser.parse_args()
    import torch
    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    print(f"source: {'vtest.avi (real pedestrians)' if VTEST.exists() else 'synthetic frames'}")
    sample = frames(600)
    for policy in ("psfr", "uniform"):
        selector = FrameSelector(SelectionParams(policy=policy, segment_s=10.0, frames_per_segment=6))
        start = time.perf_counter()
        for i, frame in enumerate(sample):
            selector.push(i / args.fps, frame, i)
        print(f"selection {policy}: {len(sample) / (time.perf_counter() - start):.0f} frames/s at 640x480, one core")
    cv2.setNumThreads(2)
    torch.set_num_threads(2)

    work = Path(tempfile.mkdtemp(prefix="em_ingest_"))
    n = int(args.seconds * args.fps)
    video = frames(n)
    with BagWriter(work / "bag") as bag:
        for i, frame in enumerate(video):
            bag.frame(1_800_000_000.0 + i / args.fps, frame, 0.05 * i, 0.0, 0.0,
                      waypoint=f"wp_{int(i / args.fps // 20)}")
    store = open_store(StoreParams(data_dir=str(work / "store"), image_dim=1280))
    store.warm_up()
    perception = Perception(PerceptionParams(data_dir=str(work / "store")))
    report = ingest_bag(str(work / "bag"), store, perception,
                        selection=SelectionParams(policy="psfr", segment_s=10.0, frames_per_segment=6))
    store.close()
    print(report.summary())
    stored = sum(p.stat().st_size for p in (work / "store").rglob("*") if p.is_file())
    per_hour = stored / report.bag_duration_s * 3600
    print(f"real-time factor {report.realtime_factor:.2f} at {args.fps:.0f} fps; stored {stored / 1e6:.1f} MB for "
          f"{report.bag_duration_s:.0f} s -> {per_hour / 1e6:.0f} MB per hour of operation "
          f"({report.keyframes} keyframes, K=6 per 10 s)")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
