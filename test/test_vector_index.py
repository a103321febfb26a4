"""FaissVectorIndex past its flat size: the approximate index (HNSW graph or IVF), built by a
snapshot, keeps the interface's promises: removed rows never come back, a row added again holds
its new vector (without a rebuild), filters are exact, a snapshot reopens as the same kind and
never holds a masked row, and rows added, removed or replaced while the approximate index is
being built are in it as they are now."""
import numpy as np
import pytest

from embodied_memory.store.vector_index import FaissVectorIndex

DIM = 32


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


VECS = _vectors(3000)
IDS = np.arange(1, len(VECS) + 1, dtype=np.int64)


def _rows_after(after: int, ids=IDS, vecs=VECS):
    keep = ids > after
    yield ids[keep], vecs[keep]


def _open(path, approximate, rows=(IDS, VECS)):
    index = FaissVectorIndex(path, DIM, approximate_min_vectors=1000, approximate=approximate)
    index.open(1, lambda after: _rows_after(after, *rows), lambda: len(rows[0]))
    if index.wants_rebuild:                 # past the flat size: what the store's background snapshot does
        assert index.kind == "flat"         # opening never waits for the build
        index.checkpoint(index.max_id, 1)
    return index


@pytest.mark.parametrize("approximate", ["hnsw", "ivf"])
def test_past_the_flat_size_the_configured_index_finds_each_vector(tmp_path, approximate):
    index = _open(tmp_path / "text.faiss", approximate)
    assert index.kind == approximate and index.count() == len(IDS)
    found = sum(int(index.search(VECS[i], 1)[0][0]) == IDS[i] for i in range(0, 3000, 30))
    assert found >= 95                     # an approximate index: measured, not assumed exact
    reopened = _open(tmp_path / "text.faiss", approximate)
    assert reopened.kind == approximate and reopened.count() == len(IDS)


@pytest.mark.parametrize("approximate", ["hnsw", "ivf"])
def test_removed_rows_never_come_back_and_filters_are_exact(tmp_path, approximate):
    index = _open(tmp_path / "text.faiss", approximate)
    gone = IDS[:500]
    index.remove(gone)
    assert index.count() == len(IDS) - 500
    for i in (0, 10, 499):
        assert IDS[i] not in index.search(VECS[i], 50)[0]
    subset = IDS[::97]
    ids, sims = index.search(VECS[5], 10, subset)
    exact = subset[subset > 500]
    exact = exact[np.argsort(-(VECS[exact - 1] @ VECS[5]), kind="stable")][:10]
    assert list(ids) == list(exact) and np.all(np.diff(sims) <= 1e-6)
    index.checkpoint(int(IDS.max()), 1)
    if approximate == "hnsw":              # the graph was rebuilt without the removed rows
        assert not index._index.dirty and index._index.graph.ntotal == len(IDS) - 500
    reopened = _open(tmp_path / "text.faiss", approximate, (IDS[500:], VECS[500:]))
    assert reopened.kind == approximate
    assert reopened.count() == len(IDS) - 500 and IDS[0] not in reopened.search(VECS[0], 50)[0]


def test_a_removed_row_added_again_holds_its_new_vector_without_a_rebuild(tmp_path):
    index = _open(tmp_path / "text.faiss", "hnsw")
    graph = index._index
    new = _vectors(1, seed=9)
    index.remove(IDS[:3])
    index.add(IDS[:1], new)                          # a re-embedded description
    assert index._index is graph and index.count() == len(IDS) - 2
    ids, sims = index.search(new[0], 5)
    assert ids[0] == IDS[0] and sims[0] == pytest.approx(1.0, abs=1e-5) and list(ids).count(IDS[0]) == 1
    assert IDS[0] not in index.search(VECS[0], 5)[0][:1] and IDS[1] not in index.search(VECS[1], 50)[0]
    subset_ids, _ = index.search(new[0], 3, subset=IDS[:10])
    assert subset_ids[0] == IDS[0] and IDS[1] not in subset_ids
    index.checkpoint(int(IDS.max()), 2)              # the snapshot folds it into a clean graph
    assert not index._index.dirty and index.count() == len(IDS) - 2
    reopened = FaissVectorIndex(tmp_path / "text.faiss", DIM, approximate_min_vectors=1000)
    rows = (np.concatenate([IDS[:1], IDS[3:]]), np.concatenate([new, VECS[3:]]))
    reopened.open(2, lambda after: _rows_after(after, *rows), lambda: len(rows[0]))
    assert reopened.kind == "hnsw" and reopened.search(new[0], 1)[0][0] == IDS[0]


def test_a_filter_on_a_graph_widens_to_every_row_it_names(tmp_path):
    index = _open(tmp_path / "text.faiss", "hnsw")
    assert index.limit_for(None) == index.max_k < 2**62       # a graph search has a widest k
    assert index.limit_for(150_000) == 150_000                 # a filter is scored exactly: all of it


@pytest.mark.parametrize("approximate", ["hnsw", "ivf"])
def test_rows_added_and_removed_while_the_approximate_index_is_built_are_applied(tmp_path, approximate,
                                                                                    monkeypatch):
    index = FaissVectorIndex(tmp_path / "text.faiss", DIM, approximate_min_vectors=1000, approximate=approximate)
    first = 900                            # flat at open, past the threshold after more adds
    index.open(1, lambda after: _rows_after(after, IDS[:first], VECS[:first]), lambda: first)
    assert index.kind == "flat"
    index.add(IDS[first:2000], VECS[first:2000])
    build = index._new_approximate

    replaced = _vectors(1, seed=7)

    def build_while_writing(ids, vecs):   # runs without the lock: the store keeps writing
        index.add(IDS[2000:2100], VECS[2000:2100])
        index.remove(IDS[:10])
        index.remove(IDS[20:21])          # a description re-embedded (forgetting a person)
        index.add(IDS[20:21], replaced)
        return build(ids, vecs)
    monkeypatch.setattr(index, "_new_approximate", build_while_writing)
    index.checkpoint(2100, 1)
    assert index.kind == approximate and index.count() == 2100 - 10
    assert index.search(VECS[2050], 1)[0][0] == IDS[2050]
    assert IDS[3] not in index.search(VECS[3], 50)[0]
    ids, sims = index.search(replaced[0], 1)
    assert ids[0] == IDS[20] and sims[0] == pytest.approx(1.0, abs=1e-5)      # the new vector, not the copy's
    assert IDS[20] not in index.search(VECS[20], 3)[0] or index.search(VECS[20], 1)[1][0] < 0.9
    if approximate == "hnsw":             # changed while built: not written dirty, rebuilt by the next snapshot
        assert index.wants_rebuild
        index.checkpoint(2100, 1)
        assert not index.wants_rebuild and index.search(replaced[0], 1)[0][0] == IDS[20]


@pytest.mark.parametrize("approximate", ["flat", "hnsw"])
def test_scoring_rows_by_id_follows_adds_out_of_order_and_removals(tmp_path, approximate):
    """score_ids reads the index's own storage through a sorted id map, extended while ids grow
    and re-sorted otherwise; a flat index moves rows up on removal, a graph masks them."""
    index = _open(tmp_path / "i.faiss", "hnsw") if approximate == "hnsw" else \
        FaissVectorIndex(tmp_path / "i.faiss", DIM, approximate_min_vectors=10**9)
    if approximate == "flat":
        index.open(1, lambda after: _rows_after(after), lambda: len(IDS))
    assert index.kind == approximate
    query = VECS[7]
    wanted = np.array([5, 3000, 1, 2999, 4242, 17], np.int64)      # 4242: not held
    expected = np.array([VECS[i - 1] @ query if i <= len(IDS) else -np.inf for i in wanted], np.float32)
    assert index.score_ids(query, wanted) == pytest.approx(expected, abs=1e-5)
    extra = _vectors(2, seed=9)
    index.add(np.array([4242, 3001], np.int64), extra)                  # out of order
    index.remove(np.array([5, 2999], np.int64))
    expected[[0, 3]] = -np.inf
    expected[4] = extra[0] @ query
    assert index.score_ids(query, wanted) == pytest.approx(expected, abs=1e-5)
    newest = np.arange(2000, 3002, dtype=np.int64)                      # a run of neighbours: one slice
    expected = np.concatenate([VECS[1999:3000] @ query, [extra[1] @ query]]).astype(np.float32)
    expected[2999 - 2000] = -np.inf
    assert index.score_ids(query, newest) == pytest.approx(expected, abs=1e-5)


def test_a_query_runs_on_its_own_thread_and_builds_keep_every_core(tmp_path):
    """A query sets OpenMP to one thread for its own thread only (a background build elsewhere
    keeps the default)."""
    import threading

    import faiss
    index = FaissVectorIndex(tmp_path / "q.faiss", DIM, approximate_min_vectors=10**9)
    index.open(1, lambda after: _rows_after(after), lambda: len(IDS))
    seen = {}

    def in_thread(name, fn):
        worker = threading.Thread(target=lambda: seen.__setitem__(name, fn()))
        worker.start()
        worker.join()

    in_thread("default", faiss.omp_get_max_threads)
    in_thread("query", lambda: (index.search(VECS[0], 5), faiss.omp_get_max_threads())[1])
    in_thread("after", faiss.omp_get_max_threads)
    assert seen["query"] == 1
    assert seen["after"] == seen["default"]
