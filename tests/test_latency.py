"""Latency off the critical path (issue 16 item 5, issue 17): the cache of query
embeddings, the background recorder of recalls, and the trims between the kernels. Every
test checks that an answer is exactly what it was without the shortcut."""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cortex
from cortex.errors import EmbeddingError, InvalidOptionError
from cortex.search.query_cache import QueryCache, normalise
from cortex.search.recorder import Recall, Recorder
from cortex.store import Store

from .conftest import run_python

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
WORDS = ["canary", "database", "release", "latency"]  # each found by keyword


class Counting:
    """The real embedder, counting the queries it embeds (the cache's misses)."""

    def __init__(self, real: Any, model_id: str | None = None) -> None:
        self.real = real
        self.model_id = model_id or real.model_id
        self.dim = real.dim
        self.calls = 0
        self.lock = threading.Lock()

    def embed(self, text: str) -> Any:
        # only queries come here (documents go through embed_batch): the real
        # embedder's query encoder, as the plain engine beside it runs
        with self.lock:
            self.calls += 1
        return getattr(self.real, "embed_query", self.real.embed)(text)

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


# --------------------------------------------------------------------------- recorder


def logged(path: Path) -> list[tuple[int, str, str | None]]:
    """The recall log as another process sees it: (memory id, query, lens) in order."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT memory_id, query, lens FROM recall_log ORDER BY id").fetchall()
    finally:
        conn.close()


def test_every_recorded_search_is_in_the_log_after_close(filled: Path, embedder: Any) -> None:
    expected: list[tuple[int, str, str | None]] = []
    with cortex.open(filled, embedder=embedder) as e:
        for j in range(30):
            q = WORDS[j % len(WORDS)]
            results = e.search(q, mode="keyword", recorded_as=f"run-{j}")
            expected.extend((r.memory.id, q, f"run-{j}") for r in results)
    assert len(expected) >= 30
    assert logged(filled) == expected  # every row, in the order of the searches
    conn = sqlite3.connect(filled)
    counts = dict(conn.execute("SELECT id, access_count FROM memories").fetchall())
    conn.close()
    for memory_id in {m for m, _, _ in expected}:
        assert counts[memory_id] == sum(1 for m, _, _ in expected if m == memory_id)


def test_every_search_of_many_threads_is_recorded(filled: Path, embedder: Any) -> None:
    per_thread, threads = 15, 8
    found: list[int] = []
    lock = threading.Lock()
    errors: list[BaseException] = []
    with cortex.open(filled, embedder=embedder) as e:

        def worker(k: int) -> None:
            try:
                for j in range(per_thread):
                    q = WORDS[(k + j) % len(WORDS)]
                    mode = "hybrid" if j % 3 == 0 else "keyword"
                    ids = [r.memory.id for r in e.search(q, mode=mode, recorded_as=f"t{k}")]
                    with lock:
                        found.extend(ids)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(timeout=300)
        assert not errors
    rows = logged(filled)
    assert sorted(m for m, _, _ in rows) == sorted(found)
    for k in range(threads):
        assert sum(1 for _, _, lens in rows if lens == f"t{k}") > 0


def test_an_engine_never_closed_is_flushed_at_exit(filled: Path) -> None:
    script = (
        "import sys, cortex\n"
        "e = cortex.open(sys.argv[1], embedder=None)\n"
        "n = 0\n"
        "for q in ['deploy', 'snapshot', 'rollback', 'latency', 'backups']:\n"
        "    n += len(e.search(q, mode='keyword', recorded_as='exit'))\n"
        "print(n)\n"  # no close: the interpreter's exit flushes
    )
    out = run_python(script, str(filled))
    n = int(out.strip())
    assert n >= 5
    assert len([r for r in logged(filled) if r[2] == "exit"]) == n


def test_a_search_does_not_wait_for_the_write_lock(filled: Path, embedder: Any) -> None:
    """Another writer holds the database: the search answers anyway, and its rows are
    written once the lock is free (before, it waited on the lock inside the search)."""
    with cortex.open(filled, embedder=embedder) as e:
        e.search("warm up", mode="keyword", record=False)
        other = sqlite3.connect(filled, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            results = e.search("canary pipeline", mode="keyword", recorded_as="held")
            assert results and not any("not recorded" in n for n in results.notices)
            assert not e.flush_recalls(timeout=0.2)  # still queued behind the lock
            assert [r for r in logged(filled) if r[2] == "held"] == []
        finally:
            other.execute("COMMIT")
            other.close()
        assert e.flush_recalls()
        assert len([r for r in logged(filled) if r[2] == "held"]) == len(results)
        assert e.get(results[0].memory.id).access_count == 1


def test_reads_see_their_own_searches(filled: Path, embedder: Any) -> None:
    with cortex.open(filled, embedder=embedder) as e:
        results = e.search("staging database", mode="keyword", session_id="s-read")
        top = results[0].memory.id
        assert e.get(top).access_count == 1  # get flushes first
        ctx = e.session_context(top)
        assert ctx is not None and ctx.usage == "recalled"
        n = e.store.query("SELECT COUNT(*) FROM recall_log")[0][0]
        assert n == len(results)


def test_reinforcement_is_written_before_the_answer(filled: Path, embedder: Any) -> None:
    with cortex.open(filled, embedder=embedder) as e:
        e.search("canary pipeline", mode="keyword")  # queued
        top = e.search("canary pipeline", mode="keyword", reinforce=0.25, now=NOW)[0]
        conn = sqlite3.connect(filled)  # not through the Engine: no flush
        salience = conn.execute(
            "SELECT salience FROM memories WHERE id = ?", (top.memory.id,)
        ).fetchone()[0]
        count = conn.execute("SELECT COUNT(*) FROM recall_log").fetchone()[0]
        conn.close()
        assert salience == pytest.approx(top.memory.salience + 0.25)
        assert count >= 2  # the queued search was written first, in order


def test_a_failing_entry_does_not_take_the_batch_with_it(filled: Path) -> None:
    store = Store.open(filled)
    recorder = Recorder(store)
    try:
        good = Recall(((1, None, 0.5),), "good", None, "batch", 0.0, time.time())
        bad = Recall(((999_999, None, 0.5),), "bad", None, "batch", 0.0, time.time())
        with recorder._cond:  # queued together, so that they meet in one batch
            for entry in (good, bad, good):
                recorder._queue.append(entry)
                recorder._submitted += 1
        recorder.flush()
        stats = recorder.stats()
        assert stats["pending"] == 0 and stats["dropped"] == 1 and stats["written"] == 2
        assert [r for r in logged(filled) if r[2] == "batch"] == [(1, "good", "batch")] * 2
    finally:
        recorder.close()
        store.close()


def test_what_is_kept_per_query_follows_writes(filled: Path, embedder: Any) -> None:
    """The query vector and its cosine statistics are kept while the index is unchanged;
    after an add or a delete the answer is the one a fresh Engine gives."""
    with cortex.open(filled, embedder=embedder) as e:
        q = "nightly database snapshot"
        before = answer(e, q)
        new = e.add("A snapshot of the database is verified by restoring it weekly.")
        after_add = answer(e, q)
        assert after_add != before and new in [i for i, *_ in after_add]
        with cortex.open(filled, embedder=embedder) as fresh:
            assert answer(fresh, q) == after_add
        e.delete(before[0][0])
        after_delete = answer(e, q)
        assert before[0][0] not in [i for i, *_ in after_delete]
        with cortex.open(filled, embedder=embedder) as fresh:
            assert answer(fresh, q) == after_delete
        assert e.query_cache.stats()["hits"] >= 2


def test_a_waiter_is_called_once_the_rows_are_written(filled: Path, embedder: Any) -> None:
    with cortex.open(filled, embedder=embedder) as e:
        seen: list[int] = []
        e.when_recalls_written(lambda: seen.append(-1))  # nothing queued: at once
        assert seen == [-1]
        called = threading.Event()
        other = sqlite3.connect(filled, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # hold the rows back until the waiter is set
        try:
            results = e.search("release", mode="keyword", recorded_as="waiter")
            e.when_recalls_written(
                lambda: (
                    seen.append(len([r for r in logged(filled) if r[2] == "waiter"])),
                    called.set(),
                )
            )
            assert not called.is_set()
        finally:
            other.execute("COMMIT")
            other.close()
        assert called.wait(timeout=60)
        assert seen == [-1, len(results)]  # the callback ran after the rows were committed


def test_the_periodic_index_check_does_not_fail_searches_in_flight(
    filled: Path, embedder: Any
) -> None:
    """The vector index is opened afresh and checked once a minute; searches of other
    threads still scanning the old handle must not fail ("this vector index is closed")."""
    with cortex.open(filled, embedder=embedder) as e:
        expected = {q: answer(e, q, mode="semantic") for q in QUERIES}
        stop = threading.Event()
        errors: list[BaseException] = []
        same: list[bool] = []

        def search(k: int) -> None:
            try:
                for j in range(25):
                    q = QUERIES[(k + j) % len(QUERIES)]
                    same.append(answer(e, q, mode="semantic") == expected[q])
            except BaseException as exc:
                errors.append(exc)

        def recheck() -> None:
            while not stop.is_set():
                e._semantic._recheck_at = 0.0  # the check is due: the next search reopens
                time.sleep(0.001)

        poker = threading.Thread(target=recheck)
        poker.start()
        pool = [threading.Thread(target=search, args=(k,)) for k in range(4)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(timeout=300)
        stop.set()
        poker.join()
        assert not errors, errors[0]
        assert len(same) == 100 and all(same)


def test_a_read_inside_a_transaction_does_not_wait_for_the_writer(
    filled: Path, embedder: Any
) -> None:
    with cortex.open(filled, embedder=embedder) as e:
        results = e.search("canary", mode="keyword", recorded_as="tx")
        with e._store.transaction():  # this thread holds the write lock
            assert e.get(results[0].memory.id).id == results[0].memory.id  # no stall
        assert e.flush_recalls()
        assert len([r for r in logged(filled) if r[2] == "tx"]) == len(results)


def test_the_embedders_own_array_is_left_alone(filled: Path, embedder: Any) -> None:
    """The cache keeps a read-only copy: an embedder that hands out its own arrays (a
    table of precomputed vectors) can still change them."""
    table = {q: np.asarray(embedder.embed(q), dtype=np.float32) for q in QUERIES}

    class Table(Counting):
        def embed(self, text: str) -> Any:
            return table[text]

    with cortex.open(filled, embedder=Table(embedder)) as e:
        first = answer(e, QUERIES[0], mode="semantic")
        assert table[QUERIES[0]].flags.writeable
        table[QUERIES[0]][:] = 0.0  # the caller's array, changed after the search
        assert answer(e, QUERIES[0], mode="semantic") == first  # the cached copy answers
