"""Memory inspector page latency on a long memory.

Fills a store with N synthetic observations over D days (a person with a position in a third of
them, 12 waypoints, descriptions of ~40 words; hash text embedder, no images), serves the
inspector on it (uvicorn, loopback) and fetches each page R times. Prints the median and worst
time and the page size per page; asserts nothing.

    .venv/bin/python bench/inspector_bench.py --observations 300000 --days 30
"""
from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

from embodied_memory.agent.query_agent import AgentParams
from embodied_memory.inspector.app import InspectorConfig, create_app
from embodied_memory.inspector.backends import StoreBackend
from embodied_memory.params import StoreParams
from embodied_memory.progress import progress_bar
from embodied_memory.store import open_store
from embodied_memory.types import Observation, PersonSighting, Pose

WORDS = "kitchen corridor office desk chair mug person walking door window plant laptop coffee table shelf".split()
PAGES = ("timeline", "timeline?day=all", "timeline?day=all&offset=100000", "map", "map?day=all",
         "map?day=all&person=person_0001&color=person", "people", "people/person_0001", "exploration", "health")
T0 = 1_790_000_000.0


def fill(params: StoreParams, n: int, days: int, batch: int = 5000) -> None:
    rng = np.random.default_rng(0)
    store = open_store(params)
    span = days * 86400.0
    with progress_bar(total=n, desc="filling the store", unit="obs") as bar:
        for start in range(0, n, batch):
            records = []
            for i in range(start, min(n, start + batch)):
                x, y = rng.uniform(0, 40), rng.uniform(0, 20)
                people = [PersonSighting((10, 10, 60, 200), f"person_{(i // 3) % 9:04d}", 0.9, 0.8,
                                         position=(x + 1.0, y, 0.0))] if i % 3 == 0 else []
                records.append(Observation(f"obs_{i}", T0 + span * i / n, f"day_{int(i * days / n)}",
                                           Pose(x, y, 0.0, 0.0), description=" ".join(rng.choice(WORDS, 40)),
                                           waypoint_id=f"wp_{i % 12}", people=people))
            store.insert(records)
            bar.update(len(records))
    store.close()


def serve(params: StoreParams):
    import uvicorn
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(InspectorConfig(data_dir=params.data_dir, read_only=True),
                     StoreBackend(params, AgentParams(planner="rules")))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--observations", type=int, default=300_000)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        params = StoreParams(data_dir=str(Path(tmp) / "memory"), text_embedder="hash")
        t = time.monotonic()
        fill(params, args.observations, args.days)
        print(f"{args.observations} observations over {args.days} days stored in {time.monotonic() - t:.0f} s")
        server, url = serve(params)
        print("| page | median s | worst s | KB |\n|---|---|---|---|")
        for page in PAGES:
            times, size = [], 0
            for _ in range(args.repeats):
                t = time.monotonic()
                with urllib.request.urlopen(f"{url}/{page}", timeout=300) as r:
                    size = len(r.read())
                times.append(time.monotonic() - t)
            print(f"| /{page} | {statistics.median(times):.3f} | {max(times):.3f} | {size / 1000:.0f} |")
        server.should_exit = True


if __name__ == "__main__":
    main()
