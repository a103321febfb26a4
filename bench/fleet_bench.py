"""Fleet memory benchmark: robots writing one PostgreSQL memory at once, and questions against it.

A real server (``embodied_memory.fleet.server``: pgserver's PostgreSQL 16, TCP, a password) on
this machine; ``--robots`` writer processes, each its own robot (``robot_id``), each storing
``--records / robots`` synthetic observations (384-d text vectors, a 128-d face in one of five,
100 waypoints over 30 days; no image vectors) through ``MemoryStore.insert_batch`` in batches
of ``--batch`` -- as the memory node stores them, one per keyframe, with ``--batch 1``.
Then a query process opens the fleet's memory (``open``: tables read, vectors pulled into its
index) and times the query tools across the fleet and for one robot.

Columns: ``write_per_s`` observations committed per second by all robots together (and
``per_robot``); ``open_s`` a reader's first open (index catch-up over every vector; past
``approximate_min_vectors`` the index's HNSW form is then built in the background, so the
query figures of a large run are taken beside that build);
``follow_s`` a query after another robot wrote 1,000 more (the catch-up); then each tool's
median / p95 ms over 30 calls. Prints figures; asserts nothing.

    .venv/bin/python bench/fleet_bench.py --records 30000 --robots 3
    .venv/bin/python bench/fleet_bench.py --records 1000000 --robots 3 --batch 500
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from embodied_memory.params import StoreParams          # noqa: E402
from embodied_memory.store import open_store             # noqa: E402
from embodied_memory.types import Observation, PersonSighting, Pose   # noqa: E402

PASSWORD = "fleet-bench"
T0 = 1_780_000_000.0
DIMS = dict(text_dim=384, image_dim=1280, face_dim=128, reid_dim=1280)


def params(url: str, data_dir: str, robot: str = "") -> StoreParams:
    return StoreParams(backend="postgres", postgres_url=url, data_dir=data_dir, robot_id=robot,
                       text_embedder="hash", **DIMS)


def records(robot: str, start: int, n: int, rng: np.random.Generator) -> list[Observation]:
    out = []
    text = rng.normal(size=(n, 384)).astype(np.float32)
    for j in range(n):
        i = start + j
        people = [PersonSighting((10, 10, 80, 200), f"{robot}.person_{i % 40:04d}", 0.9, 0.9, face_box=(20, 20, 60, 60),
                                 face_embedding=rng.normal(size=128).astype(np.float32))] if i % 5 == 0 else []
        out.append(Observation(f"{robot}/{i}", T0 + i * 2.6, f"{robot}-run", Pose(float(i % 97), float(i % 89), 0, 0),
                               description=f"{robot} view {i}: a desk, a chair and a plant", waypoint_id=f"wp{i % 100}",
                               text_embedding=text[j], people=people))
    return out


def write(url: str, folder: str, robot: str, n: int, batch: int, out) -> None:
    os.environ["EMBODIED_MEMORY_DB_PASSWORD"] = PASSWORD
    store = open_store(params(url, folder, robot))
    rng = np.random.default_rng(abs(hash(robot)) % 2**32)
    start = time.perf_counter()
    for first in range(0, n, batch):
        store.insert_batch(records(robot, first, min(batch, n - first), rng))
    out.put((robot, n, time.perf_counter() - start))
    store.close()


def timed(fn, runs: int = 30) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=30_000, help="fleet records in all")
    ap.add_argument("--robots", type=int, default=3)
    ap.add_argument("--batch", type=int, default=200, help="observations per insert (the memory node: 1)")
    ap.add_argument("--folder", default="", help="server and caches here (default: a temporary folder)")
    args = ap.parse_args()
    from embodied_memory.fleet.server import FleetServer
    import psycopg
    folder = Path(args.folder or tempfile.mkdtemp(prefix="fleet_bench_"))
    server = FleetServer(folder / "server", superuser_password=PASSWORD).start()
    os.environ["EMBODIED_MEMORY_DB_PASSWORD"] = PASSWORD
    try:
        with psycopg.connect(server.url(), password=PASSWORD, autocommit=True) as conn:
            conn.execute("CREATE DATABASE fleet")
        url = server.url(database="fleet")
        open_store(params(url, str(folder / "admin"))).close()          # the tables, made once
        robots = [f"robot{i + 1}" for i in range(args.robots)]
        per_robot = args.records // args.robots
        ctx = multiprocessing.get_context("spawn")
        results = ctx.Queue()
        start = time.perf_counter()
        procs = [ctx.Process(target=write, args=(url, str(folder / r), r, per_robot, args.batch, results))
                 for r in robots]
        for p in procs:
            p.start()
        done = [results.get() for _ in procs]
        for p in procs:
            p.join()
        wall = time.perf_counter() - start
        total = per_robot * args.robots
        print(f"records {total}  robots {args.robots}  batch {args.batch}")
        print(f"write_per_s {total / wall:,.0f}  (per robot: "
              + ", ".join(f"{r} {n / s:,.0f}/s" for r, n, s in sorted(done)) + f"; wall {wall:,.0f} s)")
        t = time.perf_counter()
        reader = open_store(params(url, str(folder / "reader")))
        reader.warm_up()
        print(f"open_s {time.perf_counter() - t:.1f}  (a reader's first open: {reader.observation_count():,} rows, "
              f"vectors into its index)")
        writer = open_store(params(url, str(folder / robots[0]), robots[0]))
        writer.insert_batch(records(robots[0], per_robot, 1000, np.random.default_rng(1)))
        t = time.perf_counter()
        reader.call_tool("latest_observation", {})
        print(f"follow_s {time.perf_counter() - t:.2f}  (the first query after 1,000 more from {robots[0]})")
        writer.close()
        now = T0 + per_robot * 2.6
        cases = {
            "semantic (text_observations)": lambda: reader.call_tool(
                "text_observations", {"query": "a desk, a chair and a plant", "k": 10}),
            "person_observations": lambda: reader.call_tool("person_observations", {"person": "robot2.person_0005"}),
            "person_observations robot": lambda: reader.call_tool(
                "person_observations", {"person": "robot2.person_0005", "robot": "robot2"}),
            "waypoint_observations": lambda: reader.call_tool("waypoint_observations", {"waypoint_id": "wp42"}),
            "observations_between 1 h": lambda: reader.call_tool(
                "observations_between", {"t_start": now - 7200, "t_end": now - 3600}),
            "latest_observation robot": lambda: reader.call_tool("latest_observation", {"robot": robots[-1]}),
        }
        for name, fn in cases.items():
            med, p95 = timed(fn)
            print(f"{name:32s} median {med:7.1f} ms   p95 {p95:7.1f} ms")
        print("closing the reader (past 200k vectors it waits for its index's background HNSW build)", flush=True)
        reader.close()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
