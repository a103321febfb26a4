"""bench/store_bench.py measures what it says: on a small store its figures are there, the flat
index's recall@30 against the exact scan is 1.0 (it is exact), an HNSW index past a lowered flat
size is measured too, and Milvus Lite runs beside it."""
import json
import math
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "store_bench.py"


def test_the_store_bench_reports_recall_and_timings(tmp_path):
    out = tmp_path / "figures.json"
    run = subprocess.run([sys.executable, str(BENCH), "--sizes", "600", "--backends", "sqlite_faiss", "milvus",
                          "--text-vectors", "pool", "--pool", "40", "--repeats", "5", "--approximate", "flat", "hnsw",
                          "--approximate-min-vectors", "300", "--dir", str(tmp_path / "stores"), "--json", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    rows = {(r["backend"], r["index"]): r for r in json.loads(out.read_text())}
    assert set(rows) == {("sqlite_faiss", "flat/flat"), ("sqlite_faiss", "hnsw/ivf"), ("milvus", "milvus flat")}
    assert rows[("sqlite_faiss", "flat/flat")]["recall_at_30"] == 1.0
    assert rows[("sqlite_faiss", "hnsw/ivf")]["recall_at_30"] >= 0.9
    for r in rows.values():
        assert r["insert_per_s"] > 0 and r["search_p95_ms"] > 0 and r["semantic_p95_ms"] >= r["search_p50_ms"]
        assert r["rss_mb"] > 0 and r["bytes_per_observation"] > 1000
    assert "MiniLM embeds" in run.stdout


def test_a_store_without_people_has_no_person_figures_and_no_crash(tmp_path):
    out = tmp_path / "figures.json"
    run = subprocess.run([sys.executable, str(BENCH), "--sizes", "3", "--backends", "sqlite_faiss", "--text-vectors",
                          "pool", "--pool", "5", "--repeats", "3", "--json", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    row = json.loads(out.read_text())[0]    # the bench's seeded draw puts no person in its first 3 records
    assert math.isnan(row["filtered_search_p95_ms"]) and math.isnan(row["person_p95_ms"]), row
    assert row["search_p95_ms"] > 0
