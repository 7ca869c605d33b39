"""Vector search with pgvector: exact and HNSW, filters and the wall inside the query,
models never mixed."""

from __future__ import annotations

import numpy as np
import pytest

from cortex.options import Options
from cortex.pg import vectors
from cortex.pg.store import EmbeddingBatch, PgStore
from cortex.store import MemoryInput, content_hash

DIM = 16


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def filled(pg_url: str):
    rng = np.random.default_rng(7)
    vecs = _unit(rng, 300)
    items = [
        MemoryInput(f"memory {i}", project="even" if i % 2 == 0 else "odd", sector=
                    "semantic" if i % 3 == 0 else None)
        for i in range(300)
    ]  # fmt: skip
    with PgStore.open(pg_url) as store:
        by_hash = {content_hash(it.content): v for it, v in zip(items, vecs, strict=True)}
        ids = store.add_many(items, EmbeddingBatch("model-a", DIM, by_hash))
        # the same memories under another model, with other vectors: never mixed in
        other = {h: -v for h, v in by_hash.items()}
        store.add_many([], None)
        with store.transaction() as tx:
            store._write_embeddings(tx, EmbeddingBatch("model-b", DIM, other),
                                    list(zip(ids, items, strict=True)), 0.0)  # fmt: skip
        yield store, ids, vecs


def _exact(vecs: np.ndarray, ids: list[int], q: np.ndarray, keep, k: int) -> list[int]:
    sims = vecs @ q
    order = [i for i in np.argsort(-sims, kind="stable") if keep(i)]
    return [ids[i] for i in order[:k]]


def test_exact_search_matches_numpy_under_filters(filled) -> None:
    store, ids, vecs = filled
    q = vecs[5]
    hits = vectors.search(store, q, "model-a", Options(), 10, exact=True)
    assert [h.memory_id for h in hits] == _exact(vecs, ids, q, lambda i: True, 10)
    assert hits[0].memory_id == ids[5] and hits[0].score == pytest.approx(1.0, abs=1e-5)
    walled = vectors.search(store, q, "model-a", Options(project="odd"), 10, exact=True)
    assert [h.memory_id for h in walled] == _exact(vecs, ids, q, lambda i: i % 2 == 1, 10)
    both = vectors.search(
        store, q, "model-a", Options(project="even", sector="semantic"), 10, exact=True
    )
    assert [h.memory_id for h in both] == _exact(
        vecs, ids, q, lambda i: i % 2 == 0 and i % 3 == 0, 10
    )


def test_models_never_mix(filled) -> None:
    store, ids, vecs = filled
    a = vectors.search(store, vecs[5], "model-a", Options(), 1, exact=True)
    b = vectors.search(store, vecs[5], "model-b", Options(), 1, exact=True)
    assert a[0].memory_id == ids[5] and b[0].memory_id != ids[5]
    assert vectors.search(store, vecs[5], "model-c", Options(), 5, exact=True) == []
    assert vectors.search(store, vecs[5][:8], "model-a", Options(), 5, exact=True) == []


def test_hnsw_index_is_used_and_close_to_exact_with_filters(filled) -> None:
    store, ids, vecs = filled
    assert not vectors.ensure_hnsw(store, "model-a", DIM, min_rows=1000)  # too few rows
    assert vectors.ensure_hnsw(store, "model-a", DIM, min_rows=100)
    assert vectors.has_hnsw(store, "model-a", DIM)
    assert not vectors.has_hnsw(store, "model-b", DIM)
    agree = total = 0
    for i in range(0, 300, 15):
        q = vecs[i]
        for opts in (Options(), Options(project="odd")):
            approx = vectors.search(store, q, "model-a", opts, 10)
            exact = vectors.search(store, q, "model-a", opts, 10, exact=True)
            assert len(approx) == len(exact) == 10  # a filter does not leave the pool short
            if opts.project:
                assert all(ids.index(h.memory_id) % 2 == 1 for h in approx)
            agree += len({h.memory_id for h in approx} & {h.memory_id for h in exact})
            total += 10
    assert agree / total >= 0.95
    store.delete(ids[5])
    assert ids[5] not in {h.memory_id for h in vectors.search(store, vecs[5], "model-a",
                                                               Options(), 10)}  # fmt: skip


def test_the_engine_builds_the_hnsw_index_past_its_size(pg_engine, embedder, monkeypatch) -> None:
    """Past HNSW_MIN_ROWS vectors of a model the index is built: at a bulk load's end
    (flush), and in the background when searches find the store grown one add at a time;
    searches use it once valid and answer as the exact scan on this small store."""
    from cortex.pg.retrievers import PgSemanticRetriever
    from cortex.search.plan import plan

    monkeypatch.setattr(vectors, "HNSW_MIN_ROWS", 30)
    e = pg_engine
    model, dim = e.model_id, embedder.dim
    e.add_many([{"content": f"deploy note {i} about service {i % 7}"} for i in range(20)])
    e.flush()
    assert not vectors.has_hnsw(e.store, model, dim)  # 20 < 30: exact
    for i in range(12):  # one at a time, past the size: no flush
        e.add(f"release checklist item {i} for the billing team")
    leg = PgSemanticRetriever(e.store, embedder)
    opts = Options(mode="semantic", record=False)
    leg.retrieve(plan("billing release", opts), opts)
    assert leg._building is not None
    leg._building.join(60)
    assert vectors.has_hnsw(e.store, model, dim)
    q = embedder.embed("billing release")
    approx = vectors.search(e.store, q, model, opts, 10)
    exact = vectors.search(e.store, q, model, opts, 10, exact=True)
    assert [h.memory_id for h in approx] == [h.memory_id for h in exact]
    # a bulk load past the size of another database's model builds at flush
    with e.store.transaction() as tx:
        tx.execute(f'DROP INDEX "{vectors.hnsw_index_name(model, dim)}"')
    assert vectors.hnsw_due(e.store) == [(model, dim)]
    e.flush()
    assert vectors.has_hnsw(e.store, model, dim) and vectors.hnsw_due(e.store) == []


def test_an_hnsw_build_left_invalid_is_rebuilt(filled, monkeypatch) -> None:
    """A build that stopped half way leaves an invalid index the planner never uses:
    the next check drops it and builds it again."""
    store = filled[0]
    monkeypatch.setattr(vectors, "HNSW_MIN_ROWS", 100)
    assert vectors.build_due(store) == [("model-a", DIM), ("model-b", DIM)]
    name = vectors.hnsw_index_name("model-a", DIM)
    with store.transaction() as tx:  # what an interrupted CREATE INDEX CONCURRENTLY leaves
        tx.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass(%s)", (name,)
        )
    assert not vectors.has_hnsw(store, "model-a", DIM)
    assert vectors.hnsw_due(store) == [("model-a", DIM)]
    assert vectors.build_due(store) == [("model-a", DIM)]
    assert vectors.has_hnsw(store, "model-a", DIM) and vectors.hnsw_due(store) == []
