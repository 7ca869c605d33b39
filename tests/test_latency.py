"""Latency off the critical path (issue 16 item 5, issue 17): the cache of query
embeddings, the background recorder of recalls, and the trims between the kernels. Every
test checks that an answer is exactly what it was without the shortcut."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cortex
from cortex.errors import EmbeddingError, InvalidOptionError
from cortex.search.query_cache import QueryCache, normalise

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
NOTES = [
    "Deploys go out through the canary pipeline on Tuesdays.",
    "The staging database is rebuilt from a snapshot every night.",
    "Rollback: revert the release tag and redeploy the previous image.",
    "Auth tokens live in Redis for ten minutes.",
    "The on-call rotation changes every Monday at nine.",
    "Latency budget for search is ten milliseconds at the median.",
    "Backups are copied to a second region each hour.",
    "The schema migration checklist has seven steps.",
]
QUERIES = ["how do we deploy", "database snapshot", "roll back a release", "search latency"]


class Counting:
    """The real embedder, counting the queries it embeds (the cache's misses)."""

    def __init__(self, real: Any, model_id: str | None = None) -> None:
        self.real = real
        self.model_id = model_id or real.model_id
        self.dim = real.dim
        self.calls = 0
        self.lock = threading.Lock()

    def embed(self, text: str) -> Any:
        with self.lock:
            self.calls += 1
        return self.real.embed(text)

    def embed_batch(self, texts: list[str]) -> Any:
        return self.real.embed_batch(texts)


def answer(engine: cortex.Engine, query: str, **kw: Any) -> list[tuple[int, float, float, float]]:
    results = engine.search(query, now=NOW, record=False, **kw)
    return [(r.memory.id, r.score, r.bm25_score, r.semantic_score) for r in results]


@pytest.fixture
def filled(db_path: Path, embedder: Any) -> Path:
    with cortex.open(db_path, embedder=embedder) as e:
        e.add_many({"content": t} for t in NOTES)
    return db_path


# --------------------------------------------------------------------------- query cache


def test_cached_query_vectors_give_exactly_the_same_results(filled: Path, embedder: Any) -> None:
    counting = Counting(embedder)
    with (
        cortex.open(filled, embedder=counting) as cached,
        cortex.open(filled, embedder=embedder) as plain,
    ):
        plain.query_cache.resize(0)
        for mode in ("hybrid", "semantic"):
            for q in QUERIES:
                first = answer(cached, q, mode=mode)
                again = answer(cached, q, mode=mode)
                assert first == again == answer(plain, q, mode=mode)
                assert first  # something was found, so the vectors mattered
        assert counting.calls == len(QUERIES)  # each query embedded once, in both modes
        stats = cached.query_cache.stats()
        assert stats["misses"] == len(QUERIES)
        assert stats["hits"] == 3 * len(QUERIES)
        assert stats["entries"] == len(QUERIES)
        assert plain.query_cache.stats()["entries"] == 0


def test_whitespace_does_not_make_a_new_query(filled: Path, embedder: Any) -> None:
    counting = Counting(embedder)
    with cortex.open(filled, embedder=counting) as e:
        base = answer(e, "database snapshot", mode="semantic")
        assert answer(e, "  database \t snapshot\n", mode="semantic") == base
        assert counting.calls == 1
        answer(e, "Database snapshot", mode="semantic")  # case is the model's business
        assert counting.calls == 2
    assert normalise(" a \n b  c ") == "a b c"


def test_the_cache_is_bounded_least_recently_used_first(filled: Path, embedder: Any) -> None:
    counting = Counting(embedder)
    with cortex.open(filled, embedder=counting) as e:
        e.query_cache.resize(2)
        for q in QUERIES[:3]:
            answer(e, q, mode="semantic")
        assert len(e.query_cache) == 2 and counting.calls == 3
        answer(e, QUERIES[2], mode="semantic")  # newest: still there
        assert counting.calls == 3
        answer(e, QUERIES[0], mode="semantic")  # oldest: evicted, embedded again
        assert counting.calls == 4
        e.query_cache.resize(0)
        answer(e, QUERIES[0], mode="semantic")
        answer(e, QUERIES[0], mode="semantic")
        assert counting.calls == 6 and len(e.query_cache) == 0
    with pytest.raises(InvalidOptionError, match="non-negative"):
        QueryCache(-1)


def test_keyed_by_model_and_never_caches_a_failure() -> None:
    cache = QueryCache(8)
    a = cache.get("model-a", "q", lambda t: np.ones(3, dtype=np.float32))
    b = cache.get("model-b", "q", lambda t: np.zeros(3, dtype=np.float32))
    assert a.tolist() == [1, 1, 1] and b.tolist() == [0, 0, 0]
    assert cache.get("model-a", "q", lambda t: np.zeros(3)).tolist() == [1, 1, 1]
    with pytest.raises(ValueError):
        a[0] = 5.0  # shared between searches: read-only

    def broken(text: str) -> Any:
        raise EmbeddingError("model gone")

    for _ in range(2):
        with pytest.raises(EmbeddingError):
            cache.get("model-c", "q", broken)
    assert cache.stats()["entries"] == 2


def test_concurrent_searches_share_the_cache(filled: Path, embedder: Any) -> None:
    counting = Counting(embedder)
    with cortex.open(filled, embedder=counting) as e:
        expected = {q: answer(e, q) for q in QUERIES}
        e.query_cache.clear()
        errors: list[BaseException] = []
        got: list[bool] = []

        def worker(k: int) -> None:
            try:
                for j in range(12):
                    q = QUERIES[(k + j) % len(QUERIES)]
                    got.append(answer(e, q) == expected[q])
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors and len(got) == 72 and all(got)
        stats = e.query_cache.stats()
        assert stats["hits"] + stats["misses"] == 72 + len(QUERIES)
        assert stats["entries"] == len(QUERIES)
        # threads missing the same query at once may each embed it; once cached, no one does
        assert len(QUERIES) <= counting.calls - len(QUERIES) <= len(QUERIES) * len(threads)
