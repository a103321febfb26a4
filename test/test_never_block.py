"""Never block: while the query agent waits seconds for its model (a scripted OpenAI-compatible
endpoint that delays its reply), the memory node's /memory/stats and /memory/query keep
answering - called back to back by several clients at once, every reply arrives while the
question is still in flight.  Latency figures are printed, not asserted (only a loose sanity
bound): timing on a shared CI machine is noise."""
import json
import statistics
import threading
import time

import pytest
from embodied_memory_interfaces.srv import Ask, GetMemoryStats, QueryMemory
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node

from embodied_memory.nodes.common import service_qos, to_time_msg

from rosutil import call, fixture_stack, wait_until
from scripted_llm import ScriptedLLM, content, slow
from store_fixtures import HOUR, T0

pytestmark = pytest.mark.integration

MODEL_DELAY_S = 10.0      # the model "thinks" this long before it answers
LOAD_S = 4.0              # memory calls are made for this long once the model has the question
CLIENTS = 3               # memory clients calling at once
SANITY_S = 2.0            # a loose bound: a reply this late means the memory node blocked


def timed(client, request, timeout: float = 10.0):
    """(latency s, reply time, response) of one call; the executor spins elsewhere."""
    done = threading.Event()
    start = time.monotonic()
    future = client.call_async(request)
    future.add_done_callback(lambda _f: done.set())
    if not done.wait(timeout):
        client.remove_pending_request(future)
        return None
    end = time.monotonic()
    return end - start, end, future.result()


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def test_memory_answers_while_a_question_is_planned(tmp_path, ros_context):
    answer_json = json.dumps({"type": "text", "text": "The red mug was in the kitchen sink.", "waypoint": "kitchen"})
    with ScriptedLLM([slow(MODEL_DELAY_S, content(answer_json))]) as llm:
        stack = fixture_stack(tmp_path, f'planner: llm, llm_base_url: "{llm.base_url}", llm_model: scripted')
        checker = Node("checker", context=ros_context)
        executor = MultiThreadedExecutor(num_threads=4, context=ros_context)
        nodes = [Node(f"load_{i}", context=ros_context) for i in range(CLIENTS)] + [Node("asker", context=ros_context)]
        try:
            wait_until(lambda: call(checker, GetMemoryStats, "/memory/stats",
                                    GetMemoryStats.Request()).stats.observations == 6, 60, what="6 observations")
            clients = [(n.create_client(GetMemoryStats, "/memory/stats", qos_profile=service_qos()),
                        n.create_client(QueryMemory, "/memory/query", qos_profile=service_qos())) for n in nodes[:-1]]
            ask = nodes[-1].create_client(Ask, "/agent/ask", qos_profile=service_qos())
            for n in nodes:
                executor.add_node(n)
            spinner = threading.Thread(target=executor.spin, daemon=True)
            spinner.start()
            query = QueryMemory.Request(tool="text_observations",
                                        arguments_json=json.dumps({"query": "red mug", "k": 3}))
            for stats_client, query_client in clients:   # discovery settled: a first reply each
                assert stats_client.wait_for_service(timeout_sec=20) and query_client.wait_for_service(timeout_sec=20)
                wait_until(lambda c=stats_client: timed(c, GetMemoryStats.Request(), 3.0), 30, what="a stats reply")
                wait_until(lambda c=query_client: timed(c, query, 3.0), 30, what="a query reply")
            assert ask.wait_for_service(timeout_sec=30)

            asked = time.monotonic()
            answered = {}
            future = ask.call_async(Ask.Request(question="Where is the red mug?", as_of=to_time_msg(T0 + 27 * HOUR)))
            future.add_done_callback(lambda _f: answered.setdefault("t", time.monotonic()))
            wait_until(lambda: llm.requests, 30, what="the model to get the question")  # it is being planned now
            planning_since = time.monotonic()

            replies = {"stats": [], "query": []}
            failures = []

            def load(stats_client, query_client):
                while time.monotonic() - planning_since < LOAD_S:
                    for kind, client, request in (("stats", stats_client, GetMemoryStats.Request()),
                                                  ("query", query_client, query)):
                        reply = timed(client, request)
                        if reply is None:
                            failures.append(f"{kind}: no reply in 10 s")
                            continue
                        ok = reply[2].stats.observations == 6 if kind == "stats" else reply[2].success
                        if not ok:
                            failures.append(f"{kind}: bad reply {reply[2]}")
                        replies[kind].append(reply[:2])

            workers = [threading.Thread(target=load, args=pair) for pair in clients]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            load_done = time.monotonic()
            wait_until(future.done, MODEL_DELAY_S + 60, what="the answer")
            answer = future.result().answer
        finally:
            executor.shutdown()
            for n in nodes + [checker]:
                n.destroy_node()
            code = stack.stop()
    assert code == 0, stack.log()
    assert not failures, failures
    assert answer.status == "ok" and json.loads(answer.json)["planner"] == "llm" and "kitchen" in answer.text, \
        stack.log()
    latencies = {kind: [lat for lat, _ in rows] for kind, rows in replies.items()}
    for kind, values in latencies.items():
        assert len(values) >= 5, f"only {len(values)} {kind} replies"
        print(f"\n/memory/{kind} while a question is planned: {len(values)} replies from {CLIENTS} clients, latency "
              f"p50 {statistics.median(values) * 1000:.1f} ms, p95 {percentile(values, 0.95) * 1000:.1f} ms, "
              f"max {max(values) * 1000:.1f} ms")
    print(f"the answer came {answered['t'] - asked:.1f} s after the question ({MODEL_DELAY_S:.0f} s of it the model), "
          f"{answered['t'] - load_done:.1f} s after the last memory reply")
    # ordering, the claim of this test: every memory reply came while the question was in flight
    last_reply = max(t for rows in replies.values() for _, t in rows)
    assert last_reply < answered["t"], "a memory reply came only after the question was answered"
    assert max(max(v) for v in latencies.values()) < SANITY_S, latencies
