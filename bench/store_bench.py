"""Memory store benchmark of the default configuration: insert rate, query latency, recall,
reopen time, memory and bytes per record.

The store runs with its defaults (StoreParams(): MiniLM query embedder, 384-d text and 1280-d
image vectors, a vector snapshot every 50,000 inserts in the background, the flat index up to
200k vectors and HNSW above). Synthetic records with those sizes (~1 KB descriptions, a person
in 20% of them, 100 waypoints, 30 days), for each size and each backend side by side.
Semantic search is timed with the MiniLM query embedding (``semantic_*``), its embedding
alone (``query_embed``) and the search alone (``search_*``, the query's vector given), and its
recall@30 measured against an exact scan of every vector with the same recency score.
Prints figures; asserts nothing.

Text vectors (``--text-vectors``): ``minilm`` (the default configuration: the store embeds
every description at insert; on 2 cores 20-35 per second, printed by ``pool``, so only for small sizes) or
``pool``: a pool of distinct descriptions is embedded with MiniLM once (its rate printed) and
every record takes one with its MiniLM vector plus a little noise (the near-duplicates a
robot's repeated views make), so insert/s is then the store's own rate.
``--approximate`` compares the FAISS text index kinds above the flat size (``flat`` = never,
for the image index too).

Columns: ``index`` text/image index kinds; ``insert_per_s`` observations stored per second
(batches of 1,000); ``checkpoint_s`` the final snapshot (with a pending approximate build);
``query_embed`` MiniLM embedding of a query; ``semantic`` a top-30 semantic_observations with
it, ``search`` the same with the query's vector given, ``filtered_search`` with a person and a
``before``; ``recall_at_30`` overlap with an exact scan; ``person`` / ``waypoint`` /
``time_window`` / ``near`` the history and position tools; ``reopen_first_query_s`` open +
first query; ``rss_mb`` the process's resident memory after the run (cumulative over rows);
``bytes_per_observation`` on disk.

    .venv/bin/python bench/store_bench.py --sizes 10000 --text-vectors minilm
    .venv/bin/python bench/store_bench.py --sizes 100000 1000000 --text-vectors pool --approximate hnsw ivf flat
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from embodied_memory.params import StoreParams
from embodied_memory.store import open_store
from embodied_memory.types import Observation, PersonSighting, Pose

WORDS = ("kitchen corridor office desk chair mug red blue green person walking standing door window "
         "plant whiteboard laptop bag coffee table shelf box printer stairs elevator lobby sofa lamp "
         "bottle phone screen meeting room cabinet sink fridge microwave poster clock").split()
T0 = 1_790_000_000.0


def description(rng) -> str:
    return " ".join(rng.choice(WORDS, size=160))[:1024]


class TextPool:
    """Distinct descriptions with their MiniLM vectors, embedded once."""

    def __init__(self, size: int, rng):
        from embodied_memory.text_embedding import make_text_embedder
        self.texts = [description(rng) for _ in range(size)]
        embedder = make_text_embedder("minilm")
        t = time.perf_counter()
        self.vectors = np.concatenate([embedder.embed(self.texts[i:i + 32]) for i in
                                       tqdm(range(0, size, 32), desc="MiniLM pool", unit="batch", leave=False)])
        self.embed_per_s = size / (time.perf_counter() - t)
        print(f"MiniLM embeds {self.embed_per_s:.1f} of these descriptions per second (the bound on insert/s "
              "with the default embedder)", flush=True)

    def draw(self, rng):
        i = int(rng.integers(len(self.texts)))
        v = self.vectors[i] + rng.normal(scale=0.02, size=self.vectors.shape[1]).astype(np.float32)
        return self.texts[i], v / np.linalg.norm(v)


def make_batch(rng, start, count, span_s, pool=None):
    image = rng.normal(size=(count, StoreParams.image_dim)).astype(np.float32)
    out = []
    for j in range(count):
        i = start + j
        desc, text = pool.draw(rng) if pool is not None else (description(rng), None)
        people = []
        if rng.random() < 0.2:
            people = [PersonSighting((10, 20, 110, 300), f"person_{rng.integers(50):04d}", 0.9, 0.8,
                                     face_embedding=rng.normal(size=128).astype(np.float32))]
        out.append(Observation(f"obs{i}", T0 + i * span_s, "bench", Pose(float(rng.uniform(-50, 50)),
                                                                         float(rng.uniform(-50, 50))),
                               description=desc, waypoint_id=f"wp_{rng.integers(100)}",
                               text_embedding=text, global_embedding=image[j],
                               people=people))
    return out


def percentile_ms(samples, q):
    return float(np.percentile(np.array(samples) * 1e3, q))


def timed(fn, repeats):
    samples = []
    for i in range(repeats):
        t = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - t)
    return samples


def recall_at_30(store, queries, now) -> float:
    """Mean overlap of the store's top 30 with an exact scan (every text vector, the same score)."""
    rows = store._conn().execute("SELECT observation_id, t, text_emb FROM observations WHERE text_emb IS NOT NULL")
    ids, times, vecs = [], [], []
    for oid, t, blob in rows:
        ids.append(oid)
        times.append(t)
        vecs.append(np.frombuffer(blob, np.float32))
    matrix = np.stack(vecs)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    hours = (now - np.array(times)) / 3600.0
    overlaps = []
    for q in queries:
        v = store.embed_text(q)
        exact = np.argsort(store.recency.score(matrix @ (v / np.linalg.norm(v)), hours), kind="stable")[:30]
        got = {h["id"] for h in store.semantic_observations(q, n=30, now=now)}
        overlaps.append(len(got & {ids[i] for i in exact}) / 30.0)
    return float(np.mean(overlaps))


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def run(backend: str, size: int, root: Path, repeats: int, pool=None, approximate: str = "",
        approximate_min: int = 0) -> dict:
    data_dir = root / f"{backend}_{size}_{approximate}"
    options = {"approximate_min_vectors": approximate_min} if approximate_min else {}
    if backend == "sqlite_faiss" and approximate == "flat":
        options["approximate_min_vectors"] = 2**62
    elif backend == "sqlite_faiss" and approximate:
        options["text_approximate_index"] = approximate
    params = StoreParams(backend=backend, data_dir=str(data_dir),
                         milvus_uri=str(data_dir / "milvus.db") if backend == "milvus" else "", **options)
    rng = np.random.default_rng(0)
    store = open_store(params)
    store.warm_up()  # as the memory node does: indexes open, inserts go straight into them
    span_s = 30 * 86400 / size
    batch = 1000
    insert_s = 0.0
    for start in tqdm(range(0, size, batch), desc=f"{backend} insert {size}", unit="batch", leave=False):
        records = make_batch(rng, start, min(batch, size - start), span_s, pool)
        t = time.perf_counter()
        store.insert(records)
        insert_s += time.perf_counter() - t
    t = time.perf_counter()
    store.checkpoint()
    checkpoint_s = time.perf_counter() - t
    now = T0 + 30 * 86400
    queries = [" ".join(rng.choice(WORDS, size=4)) for _ in range(repeats)]
    store.semantic_observations(queries[0], n=30, now=now)  # warm
    kinds = "/".join(store._index(k).kind for k in ("text", "image")) if backend != "milvus" else "milvus flat"
    figures = {"backend": backend, "records": size, "index": kinds, "insert_per_s": size / insert_s,
               "checkpoint_s": checkpoint_s}
    figures["query_embed_p50_ms"] = percentile_ms(timed(lambda i: store.embed_text(queries[i]), repeats), 50)
    figures["semantic_p50_ms"], figures["semantic_p95_ms"] = (
        lambda s: (percentile_ms(s, 50), percentile_ms(s, 95)))(
        timed(lambda i: store.semantic_observations(queries[i], n=30, now=now), repeats))
    people = [p["person"] for p in store.people()]     # those the store holds (a small one: not all 50; none: no filter figures)
    vectors = {q: store.embed_text(q) for q in queries}       # the search alone: the query's vector given
    embed_text = store.embed_text
    store.embed_text = vectors.__getitem__
    figures["search_p50_ms"], figures["search_p95_ms"] = (
        lambda s: (percentile_ms(s, 50), percentile_ms(s, 95)))(
        timed(lambda i: store.semantic_observations(queries[i], n=30, now=now), repeats))
    figures["filtered_search_p95_ms"] = percentile_ms(timed(      # a person filter and a time bound
        lambda i: store.semantic_observations(queries[i], person=people[i % len(people)],
                                              before=now - (i % 10) * 86400, n=30, now=now), repeats), 95) \
        if people else float("nan")
    store.embed_text = embed_text
    figures["recall_at_30"] = recall_at_30(store, queries[:20], now)
    figures["person_p95_ms"] = percentile_ms(timed(
        lambda i: store.person_observations(people[i % len(people)], T0 + (i % 20) * 86400,
                                            T0 + (i % 20 + 3) * 86400), repeats), 95) if people else float("nan")
    figures["waypoint_p95_ms"] = percentile_ms(timed(
        lambda i: store.waypoint_observations(f"wp_{i % 100}", T0 + (i % 25) * 86400,
                                              T0 + (i % 25 + 1) * 86400), repeats), 95)
    figures["time_window_p95_ms"] = percentile_ms(timed(
        lambda i: store.observations_between(T0 + i * 3600, T0 + i * 3600 + 600), repeats), 95)
    figures["near_p95_ms"] = percentile_ms(timed(
        lambda i: store.observations_near(float(i % 80 - 40), 0.0, k=4), repeats), 95)
    figures["rss_mb"] = rss_mb()
    store.close()
    figures["bytes_per_observation"] = sum(p.stat().st_size for p in data_dir.rglob("*") if p.is_file()) / size
    t = time.perf_counter()
    store = open_store(params)
    store.semantic_observations(queries[1], n=30, now=now)
    figures["reopen_first_query_s"] = time.perf_counter() - t
    store.close()
    shutil.rmtree(data_dir, ignore_errors=True)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--backends", nargs="+", default=["sqlite_faiss", "milvus"])
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--text-vectors", choices=("minilm", "pool"), default="minilm",
                        help="minilm: the store embeds each description at insert (the default configuration); "
                             "pool: records bring MiniLM vectors of a pool of descriptions (see above)")
    parser.add_argument("--pool", type=int, default=2000, help="distinct descriptions in the pool")
    parser.add_argument("--approximate", nargs="+", default=[""], choices=("", "hnsw", "ivf", "flat"),
                        help="sqlite_faiss: the index kind above the flat size ('flat': never; default: the "
                             "store's default)")
    parser.add_argument("--approximate-min-vectors", type=int, default=0,
                        help="the flat index's size limit (default: the store's, 200,000)")
    parser.add_argument("--dir", default="", help="where to build the stores (default: a temp dir)")
    parser.add_argument("--json", default="", help="also write the figures to this file")
    args = parser.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="em_bench_"))
    rows = []
    pool = TextPool(args.pool, np.random.default_rng(1)) if args.text_vectors == "pool" else None
    cols = ("backend", "records", "index", "insert_per_s", "checkpoint_s", "query_embed_p50_ms", "semantic_p50_ms", "semantic_p95_ms",
            "search_p50_ms", "search_p95_ms",
            "filtered_search_p95_ms", "recall_at_30", "person_p95_ms", "waypoint_p95_ms", "time_window_p95_ms",
            "near_p95_ms", "reopen_first_query_s", "rss_mb", "bytes_per_observation")
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for size in args.sizes:
        for backend in args.backends:
            for approximate in (args.approximate if backend == "sqlite_faiss" else [""]):
                fig = run(backend, size, root, args.repeats, pool, approximate, args.approximate_min_vectors)
                rows.append(fig)
                print("| " + " | ".join(f"{fig[c]:.2f}" if isinstance(fig[c], float) else str(fig[c])
                                        for c in cols) + " |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    if not args.dir:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
