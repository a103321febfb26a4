"""Semantic search with recency is exact for the flat index under every filter: thousands of
near-duplicate old descriptions fill any fixed candidate list, and the recent match (a little
less similar, far more recent) must still win, with a person filter and with ``before``. The
same holds on the HNSW graph (the newest rows scored exactly, bounded by time) and Milvus."""
import dataclasses

import numpy as np
import pytest

from embodied_memory.store import open_store
from embodied_memory.types import Observation, PersonSighting, Pose

from conftest import new_fleet_database
from store_fixtures import HOUR, POSTGRES, T0, make_params

OLD = "a red mug on the kitchen counter next to the coffee machine"
RECENT = "a red mug on the kitchen counter next to the coffee machine this morning"
N_OLD = 5000            # more than the index's first candidate list (2048 for FAISS, 256 Milvus)


def _obs(i, t, text, people=()):
    return Observation(f"o{i}", t, "day", Pose(float(i % 50), 0.0, 0.0, 0.0), description=text, waypoint_id="kitchen",
                       people=[PersonSighting((0, 0, 10, 20), p, 0.9, 0.8) for p in people])


@pytest.fixture(scope="module", params=["sqlite_faiss", "sqlite_faiss_hnsw", "postgres", "milvus"])
def store(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("exact")
    graph = request.param == "sqlite_faiss_hnsw"
    if request.param == "postgres":
        POSTGRES["url"] = new_fleet_database(request.getfixturevalue("fleet_server"), "exactness")
    s = open_store(make_params(tmp, "sqlite_faiss", approximate_min_vectors=1000) if graph else
                   make_params(tmp, request.param))
    old = [_obs(i, T0 + i, OLD, people=["alice"] if i % 2 else ()) for i in range(N_OLD)]
    s.insert(old)
    s.insert([_obs(N_OLD, T0 + 290 * HOUR, RECENT, people=["alice"]),
              _obs(N_OLD + 1, T0 + 300 * HOUR, RECENT, people=["bob"])])
    if graph:
        s.warm_up()
        s.checkpoint()                    # what the background snapshot does past the flat size
        assert s._index("text").kind == "hnsw"
    yield s
    s.close()


def test_the_fixture_defeats_a_fixed_candidate_list(store):
    index = store._index("text")
    assert N_OLD > index.candidates
    sims = {text: float(np.dot(store.embed_text(OLD), store.embed_text(text))) for text in (OLD, RECENT)}
    assert sims[RECENT] < sims[OLD] - 1e-3        # the recent match is the less similar one


def test_the_recent_match_wins_over_thousands_of_old_duplicates(store):
    now = T0 + 301 * HOUR
    top = store.semantic_observations(OLD, n=3, now=now)
    assert [h["id"] for h in top[:2]] == [f"o{N_OLD + 1}", f"o{N_OLD}"]
    # with the person filter: alice's recent sighting, not one of her 2,500 old ones
    assert store.semantic_observations(OLD, person="alice", n=1, now=now)[0]["id"] == f"o{N_OLD}"
    # before bob's: the recent one is alice's
    before = store.semantic_observations(OLD, n=1, before=T0 + 295 * HOUR, now=T0 + 295 * HOUR)
    assert before[0]["id"] == f"o{N_OLD}"


def test_the_widened_result_equals_a_full_scan(store):
    now = T0 + 301 * HOUR
    got = [(h["id"], h["score"]) for h in store.semantic_observations(OLD, n=30, now=now)]
    rows = store._conn().execute("SELECT observation_id, t, text_emb FROM observations").fetchall()
    q = store.embed_text(OLD)
    q = q / np.linalg.norm(q)
    scored = []
    for oid, t, blob in rows:
        v = np.frombuffer(blob, np.float32)
        sim = float(np.dot(q, v / np.linalg.norm(v)))
        scored.append((float(store.recency.score(np.array([sim]), np.array([(now - t) / 3600.0]))[0]), oid))
    scored.sort()
    assert [s for s, _ in scored[:30]] == pytest.approx([s for _, s in got], abs=1e-4)
    assert got[0][0] == scored[0][1] and got[1][0] == scored[1][1]


WORDS = "red blue mug chair desk kitchen office plant door window laptop bag".split()


@pytest.fixture(scope="module", params=["flat", "hnsw"])
def spread_store(request, tmp_path_factory):
    """10,000 near-duplicate descriptions spread over 40 days (more than the first newest block) (the recency penalty flattens out
    for the older ones, so similarity decides there), a third of them showing alice."""
    tmp = tmp_path_factory.mktemp("spread")
    s = open_store(make_params(tmp, "sqlite_faiss", approximate_min_vectors=5000 if request.param == "hnsw" else 10**9))
    rng = np.random.default_rng(3)
    s.insert([_obs(i, T0 + float(rng.uniform(0, 40 * 24)) * HOUR, " ".join(rng.choice(WORDS, size=5)),
                   people=["alice"] if i % 3 == 0 else ()) for i in range(10_000)])
    s.warm_up()
    s.checkpoint()
    assert s._index("text").kind == request.param
    yield s
    s.close()


def _full_scan(store, query, now, before=None, person=None, n=30):
    q = store.embed_text(query)
    q = q / np.linalg.norm(q)
    rows = store._conn().execute("SELECT id, observation_id, t, text_emb, persons FROM observations").fetchall()
    scored = []
    for _, oid, t, blob, persons in rows:
        if (before is not None and t > before) or (person and person not in (persons or "").split(",")):
            continue
        v = np.frombuffer(blob, np.float32)
        sim = float(np.dot(q, v / np.linalg.norm(v)))
        scored.append((float(store.recency.score(np.array([sim]), np.array([(now - t) / 3600.0]))[0]), oid))
    return sorted(scored)[:n]


@pytest.mark.parametrize("days_back", [None, 1, 20, 35])
@pytest.mark.parametrize("person", [None, "alice"])
def test_recency_ranking_equals_a_full_scan_for_any_before_and_filter(spread_store, days_back, person):
    """The newest-first scan with the similarity bound (flat: exact; the graph: its neighbours
    are approximate, so most of the top 30)."""
    now = T0 + 40 * 24 * HOUR
    before = None if days_back is None else now - days_back * 24 * HOUR
    for query in ("red mug kitchen", "a laptop on the office desk", "plant by the window door"):
        got = spread_store.semantic_observations(query, person=person, before=before, n=30, now=now)
        exact = _full_scan(spread_store, query, now, before=before, person=person)
        assert len(got) == len(exact) == 30
        if spread_store._index("text").kind == "flat" or person:       # a filter is scored exactly on both
            assert [h["score"] for h in got] == pytest.approx([s for s, _ in exact], abs=1e-4)   # ties may swap
        else:
            assert len({h["id"] for h in got} & {oid for _, oid in exact}) >= 27


def test_recency_winners_past_the_newest_block_and_outside_the_nearest_are_found(tmp_path):
    """Only the time half of the bound finds these winners (flat index: exact): the
    NEWEST_BLOCK newest rows are barely similar (scored first); half the winners are just older
    (one is the block's last row, the rest lie just past it), half two days old and more
    similar; 200 exact duplicates of the query a month old are nearer than every winner, so the
    k nearest are all duplicates. A scan that stops after the first block, takes the age bound
    from any row but the newest one not scored, or puts it too young (from the best score
    instead of the n-th, a wrong weight) returns old duplicates instead of winners."""
    from embodied_memory.store.retrieval import NEWEST_BLOCK
    query, mild_text, n = "blue chair by the office window", "a blue chair in the hall", 10
    assert 64 * n <= NEWEST_BLOCK            # the first block is NEWEST_BLOCK rows; 4n nearest < 200 duplicates
    now = T0 + 40 * 24 * HOUR
    mild = [(now - (i + 1) * (HOUR / NEWEST_BLOCK), mild_text) for i in range(NEWEST_BLOCK - 1)]
    recent = [(now - HOUR - (j + 1) * 60.0, query + " with a lamp") for j in range(n // 2)]
    two_days = [(now - (45 + j) * HOUR, query + " today") for j in range(n - n // 2)]
    filler = [(now - 3 * HOUR - j * 600.0, mild_text) for j in range(1000)]
    old = [(now - (30 + j / 20) * 24 * HOUR, query) for j in range(200)]
    rows = mild + recent + two_days + filler + old
    s = open_store(make_params(tmp_path, "sqlite_faiss", approximate_min_vectors=10**9))
    try:
        order = np.random.default_rng(5).permutation(len(rows))       # row ids out of time order
        s.insert([_obs(int(i), rows[i][0], rows[i][1]) for i in order])
        assert s._index("text").kind == "flat"
        times_desc = np.sort([t for t, _ in rows])[::-1]
        recent_times = {t for t, _ in recent}
        assert times_desc[NEWEST_BLOCK - 1] in recent_times and times_desc[NEWEST_BLOCK] in recent_times
        assert not set(times_desc[:NEWEST_BLOCK - 1]) & recent_times
        q = s.embed_text(query)
        sim = {text: float(q @ s.embed_text(text)) for text in (mild_text, recent[0][1], two_days[0][1])}
        assert max(sim.values()) < 1.0 - 1e-3                          # the duplicates are the nearest

        def score(text_sim, hours):
            return float(s.recency.score(np.array([text_sim]), np.array([hours]))[0])
        # every winner beats every duplicate and every newest row
        assert max(score(sim[recent[0][1]], 1 + n / 60), score(sim[two_days[0][1]], 45 + n)) < \
            min(score(1.0, 30 * 24), score(sim[mild_text], 0))
        got = s.semantic_observations(query, n=n, now=now)
        exact = _full_scan(s, query, now, n=n)
        winners = {f"o{NEWEST_BLOCK - 1 + j}" for j in range(n)}           # recent and two_days
        assert {h["id"] for h in got} == {oid for _, oid in exact} == winners
        assert [h["score"] for h in got] == pytest.approx([sc for sc, _ in exact], abs=1e-4)
    finally:
        s.close()


def test_a_graph_trapped_among_duplicates_still_ranks_exactly(tmp_path):
    """HNSW: thousands of identical mild rows trap the graph's search (its k nearest are all of
    them), so its k-th similarity bounds nothing; the recent winners and the old exact copies
    must still be ranked as a full scan ranks them."""
    from embodied_memory.store.retrieval import NEWEST_BLOCK
    query, n = "blue chair by the office window", 10
    now = T0 + 40 * 24 * HOUR
    rows = ([(now - (i + 1) * (HOUR / NEWEST_BLOCK), "a blue chair in the hall") for i in range(NEWEST_BLOCK - 1)]
            + [(now - HOUR - (j + 1) * 60.0, "blue chair by the office window with a lamp") for j in range(n)]
            + [(now - 3 * HOUR - j * 600.0, "a blue chair in the hall") for j in range(1000)]
            + [(now - (30 + j / 20) * 24 * HOUR, query) for j in range(200)])
    order = np.random.default_rng(5).permutation(len(rows))
    s = open_store(make_params(tmp_path, "sqlite_faiss", approximate_min_vectors=4000))
    try:
        s.insert([_obs(int(i), rows[i][0], rows[i][1]) for i in order])
        s.warm_up()
        s.checkpoint()
        assert s._index("text").kind == "hnsw"
        got = [h["id"] for h in s.semantic_observations(query, n=n, now=now)]
        assert got == [o for _, o in _full_scan(s, query, now, n=n)]
    finally:
        s.close()


def test_the_running_best_keeps_ties_newer_first_and_counts_a_row_once():
    """The incremental ranking's running best (retrieval._top): every row tied with the m-th
    score competes (none dropped by where a partition cut), newer first among equals, and a row
    found both among the newest and among the nearest counts once."""
    from embodied_memory.store.retrieval import _top
    ids = np.array([5, 6, 7, 8, 9, 5], np.int64)
    scores = np.array([0.3, 0.1, 0.3, 0.3, 0.2, 0.3])
    times = np.array([50.0, 60.0, 70.0, 40.0, 90.0, 50.0])
    top_ids, top_scores, _ = _top(ids, scores, times, 3, unique=True)
    assert top_ids.tolist() == [6, 9, 7]              # 0.1, 0.2, then the newest of the three 0.3s
    assert top_scores.tolist() == [0.1, 0.2, 0.3]
    assert _top(ids, scores, times, 6, unique=True)[0].tolist() == [6, 9, 7, 5, 8]   # 5 once
    assert _top(ids[:0], scores[:0], times[:0], 3)[0].size == 0


def test_rows_deleted_while_a_query_ranks_them_are_replaced_by_the_next_best(tmp_path):
    """A delete commits in SQLite before the vector index and the time table drop its rows: a
    query in that window ranks rows it cannot read. It must still return n rows, the exact best
    of those left (the deleted rows' scores set no bound)."""
    s = open_store(make_params(tmp_path, "sqlite_faiss"))
    rng = np.random.default_rng(1)
    s.insert([_obs(i, T0 + i * 60.0, " ".join(rng.choice(WORDS, 4))) for i in range(300)])
    now, query = T0 + 301 * 60.0, "red mug kitchen"
    top = [h["id"] for h in s.semantic_observations(query, n=10, now=now)]
    with s._transaction() as tx:           # the SQL half of a delete; the index still holds the rows
        tx.execute(f"DELETE FROM observations WHERE observation_id IN ({','.join('?' * 8)})", top[:8])
    got = [(h["id"], h["score"]) for h in s.semantic_observations(query, n=10, now=now)]
    q = s.embed_text(query)
    scored = sorted((float(s.recency.score(np.array([np.dot(q, np.frombuffer(blob, np.float32))]),
                                           np.array([(now - t) / 3600.0]))[0]), oid)
                    for oid, t, blob in s._conn().execute("SELECT observation_id, t, text_emb FROM observations"))
    assert [oid for oid, _ in got] == [oid for _, oid in scored[:10]]
    assert not set(top[:8]) & {oid for oid, _ in got}
    s.close()


def test_find_sorted_by_subtraction_and_by_search_agree():
    from embodied_memory.store.stored_vectors import find_sorted
    wanted = np.array([0, 3, 5, 9, 12, 20, -1])
    consecutive = np.arange(3, 13)                        # 3..12: found by subtraction
    gapped = np.array([3, 4, 5, 7, 9, 12])                # a row deleted: found by binary search
    for ids in (consecutive, gapped):
        at, held = find_sorted(ids, wanted)
        assert held.tolist() == [w in set(ids.tolist()) for w in wanted]
        assert (ids[at[held]] == wanted[held]).all()
    assert find_sorted(np.zeros(0, np.int64), wanted)[1].sum() == 0
    at, held = find_sorted(np.array([1, 2, 2, 4]), np.array([3, 4]))     # the span looks consecutive, it is not
    assert held.tolist() == [False, True] and at[1] == 3


@pytest.mark.parametrize("graph", [False, True])
def test_ranking_stays_exact_after_forgetting_rows_in_the_middle(tmp_path, graph):
    """A forgotten episode leaves a gap in the row ids: lookups by id stop taking the
    consecutive-ids shortcut and every filter still equals a full scan."""
    s = open_store(make_params(tmp_path, "sqlite_faiss", **({"approximate_min_vectors": 200} if graph else {})))
    rng = np.random.default_rng(2)
    rows = [_obs(i, T0 + i * 60.0, " ".join(rng.choice(WORDS, 4)), people=["alice"] if i % 3 else ())
            for i in range(600)]
    for i in range(200, 300):
        rows[i] = dataclasses.replace(rows[i], episode_id="errand")
    s.insert(rows)
    assert s.forget_episode("errand")["observations_removed"] == 100
    now = T0 + 601 * 60.0
    for person, before in ((None, None), ("alice", None), ("alice", now - 5 * HOUR), (None, now - 6 * HOUR)):
        got = s.semantic_observations("red mug kitchen", person=person, before=before, n=20, now=now)
        exact = _full_scan(s, "red mug kitchen", now, before=before, person=person, n=20)
        assert not {h["id"] for h in got} & {f"o{i}" for i in range(200, 300)}
        if person or not graph:
            assert [h["score"] for h in got] == pytest.approx([sc for sc, _ in exact], abs=1e-4)
        else:
            assert len({h["id"] for h in got} & {oid for _, oid in exact}) >= 18
    s.close()


def test_newer_than_counts_by_binary_search_on_a_descending_array():
    from embodied_memory.store.time_order import TimeTable, newer_than
    times_desc = np.array([9.0, 7.0, 7.0, 5.0, 1.0])
    assert [newer_than(times_desc, t) for t in (10, 9, 7, 6, 0)] == [0, 0, 1, 3, 5]
    assert [newer_than(times_desc, t, inclusive=True) for t in (10, 9, 7, 6, 0)] == [0, 1, 3, 3, 5]
    table = TimeTable.of_rows(np.array([3, 1, 2]), np.array([5.0, 9.0, 7.0]), 0).appended(np.array([4]),
                                                                                      np.array([2.0]))
    assert table.ids.tolist() == [1, 2, 3, 4] and table.newest == 9.0
    assert table.times_of(np.array([4, 5, 2]))[0][[0, 2]].tolist() == [2.0, 7.0]
    assert table.times_of(np.array([4, 5, 2]))[1].tolist() == [True, False, True]

