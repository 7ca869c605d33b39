"""The recorder of recalls coalesces a stream of searches into one commit and lets a
flushing thread write on its own connection (issue 16 item 5: a commit by another
connection made the next search's SQL read its pages again). Nothing is lost on the way:
every test reads the recall log through a separate connection."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import cortex
from cortex.search.recorder import Recall, Recorder
from cortex.store import Store

from .conftest import run_python

NOTES = [
    "Deploys go out through the canary pipeline on Tuesdays.",
    "The staging database is rebuilt from a snapshot every night.",
    "Rollback: revert the release tag and redeploy the previous image.",
    "Auth tokens live in Redis for ten minutes.",
]
HOUR = 3600.0  # a delay no test waits out: what is written was written for another reason


@pytest.fixture
def filled(db_path: Path) -> Path:
    with cortex.open(db_path, embedder=None) as e:
        e.add_many({"content": t} for t in NOTES)
    return db_path


def logged(path: Path, lens: str) -> list[tuple[int, str]]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT memory_id, query FROM recall_log WHERE lens = ? ORDER BY id", (lens,)
        ).fetchall()
        return [(int(m), str(q)) for m, q in rows]
    finally:
        conn.close()


def entry(memory_id: int, query: str, lens: str) -> Recall:
    return Recall(((memory_id, None, 0.5),), query, None, lens, 0.0, time.time())


def test_a_stream_of_searches_shares_one_commit(filled: Path) -> None:
    store = Store.open(filled)
    recorder = Recorder(store, delay=HOUR, max_delay=HOUR)
    try:
        for j in range(10):
            recorder.submit(entry(1 + j % 4, f"q{j}", "stream"))
        assert logged(filled, "stream") == []  # the worker waits for the stream to pause
        assert recorder.pending() == 10
        assert recorder.flush(timeout=60)  # someone waits: written at once, by the worker
        stats = recorder.stats()
        assert stats["written"] == 10 and stats["batches"] == 1 and stats["pending"] == 0
        assert logged(filled, "stream") == [(1 + j % 4, f"q{j}") for j in range(10)]
    finally:
        recorder.close()
        store.close()


def test_the_delay_is_bounded(filled: Path) -> None:
    """However long the pause it waits for, the worker writes once the oldest queued
    search has waited max_delay."""
    store = Store.open(filled)
    recorder = Recorder(store, delay=HOUR, max_delay=0.05)
    try:
        recorder.submit(entry(2, "bounded", "bounded"))
        deadline = time.monotonic() + 60  # far beyond max_delay, far below the delay
        while recorder.pending() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert recorder.pending() == 0
        assert logged(filled, "bounded") == [(2, "bounded")]
    finally:
        recorder.close()
        store.close()


def test_a_deferred_submit_wakes_the_worker_when_the_caller_leaves(filled: Path) -> None:
    """Within `deferred` (Engine.search: the pipeline, then the suggestions), a submit
    queues the search without starting or waking the worker; leaving wakes it, an
    exception included, and what was queued is written."""
    store = Store.open(filled)
    recorder = Recorder(store, delay=0.0, max_delay=0.0)
    try:
        with recorder.deferred():
            recorder.submit(entry(1, "held", "deferred"))
            with recorder.deferred():  # nested: only the outermost exit wakes it
                recorder.submit(entry(2, "nested", "deferred"))
            assert recorder._thread is None  # not started, so not writing
            assert recorder.pending() == 2
            assert logged(filled, "deferred") == []
        deadline = time.monotonic() + 60  # the worker writes at once (delay 0)
        while recorder.pending() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert recorder.pending() == 0
        assert logged(filled, "deferred") == [(1, "held"), (2, "nested")]
        with pytest.raises(RuntimeError), recorder.deferred():
            recorder.submit(entry(3, "failed", "deferred"))
            raise RuntimeError("the search failed after its submit")
        deadline = time.monotonic() + 60
        while recorder.pending() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert logged(filled, "deferred")[-1] == (3, "failed")
    finally:
        recorder.close()
        store.close()


def test_another_thread_is_not_deferred(filled: Path) -> None:
    """`deferred` holds back the calling thread's submits only."""
    store = Store.open(filled)
    recorder = Recorder(store, delay=0.0, max_delay=0.0)
    try:
        with recorder.deferred():
            other = threading.Thread(target=recorder.submit, args=(entry(4, "other", "th"),))
            other.start()
            other.join()
            assert recorder._thread is not None  # started (and woken) by the other thread
            deadline = time.monotonic() + 60
            while recorder.pending() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert logged(filled, "th") == [(4, "other")]
    finally:
        recorder.close()
        store.close()


def test_a_search_is_written_by_the_first_flush(filled: Path) -> None:
    """flush() without a timeout writes in the calling thread, on its connection: the
    rows are in the log when it returns, and the waiters run on that thread."""
    with cortex.open(filled, embedder=None) as e:
        results = e.search("canary pipeline", mode="keyword", recorded_as="now")
        assert results
        ran_on: list[threading.Thread] = []
        e.when_recalls_written(lambda: ran_on.append(threading.current_thread()))
        assert e.flush_recalls()
        assert logged(filled, "now") == [(r.memory.id, "canary pipeline") for r in results]
        # the waiter ran once the rows were written: here, or on the worker, which
        # the waiter hurries; never later than the flush
        assert len(ran_on) == 1


def test_the_callers_own_commit_keeps_its_cache(filled: Path) -> None:
    """What the change is for: a search, then its flush, leave the caller's connection
    without another connection's commit (PRAGMA data_version moves only for those, and
    then SQLite drops the connection's page cache)."""
    with cortex.open(filled, embedder=None) as e:
        e.search("warm up", mode="keyword", record=False)
        # the worker never writes first here (this thread's flush does): not a race
        e._recorder._delay = e._recorder._max_delay = HOUR  # type: ignore[union-attr]
        conn = e._store.conn
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        for q in ("canary", "snapshot", "release"):
            assert e.search(q, mode="keyword", recorded_as="warm")
            assert e.flush_recalls()
        assert conn.execute("PRAGMA data_version").fetchone()[0] == version
        assert len(logged(filled, "warm")) >= 3


def test_a_waiter_hurries_the_worker(filled: Path) -> None:
    store = Store.open(filled)
    recorder = Recorder(store, delay=HOUR, max_delay=HOUR)
    try:
        recorder.submit(entry(3, "waited", "waiter"))
        called = threading.Event()
        seen: list[list[tuple[int, str]]] = []
        recorder.when_written(lambda: (seen.append(logged(filled, "waiter")), called.set()))
        assert called.wait(timeout=60)
        assert seen == [[(3, "waited")]]
    finally:
        recorder.close()
        store.close()


def test_flush_and_worker_write_in_the_order_of_the_searches(filled: Path) -> None:
    """Flushing threads and the worker take turns (one writer at a time)."""
    store = Store.open(filled)
    recorder = Recorder(store, batch=3, delay=0.0, max_delay=0.0)
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            for _ in range(20):
                recorder.flush()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    try:
        pool = [threading.Thread(target=flusher) for _ in range(3)]
        for t in pool:
            t.start()
        for j in range(60):
            recorder.submit(entry(1 + j % 4, f"o{j:02d}", "order"))
        for t in pool:
            t.join(timeout=120)
        recorder.flush()
        assert not errors
        assert logged(filled, "order") == [(1 + j % 4, f"o{j:02d}") for j in range(60)]
        assert recorder.stats()["dropped"] == 0
    finally:
        recorder.close()
        store.close()


def test_nothing_queued_is_lost_at_exit(filled: Path) -> None:
    """A child process queues searches behind an hour's delay and exits without closing:
    the interpreter's exit writes them all."""
    script = (
        "import sys, time\n"
        "from cortex.search.recorder import Recall, Recorder\n"
        "from cortex.store import Store\n"
        "store = Store.open(sys.argv[1])\n"
        "r = Recorder(store, delay=3600.0, max_delay=3600.0)\n"
        "for j in range(25):\n"
        "    r.submit(Recall(((1 + j % 4, None, 0.5),), f'x{j:02d}', None, 'exit', 0.0,"
        " time.time()))\n"
        "print(r.pending())\n"
    )
    out = run_python(script, str(filled))
    assert int(out.strip()) == 25  # still queued when the script ended
    assert logged(filled, "exit") == [(1 + j % 4, f"x{j:02d}") for j in range(25)]


def test_a_failed_batch_is_retried_then_written_search_by_search(
    filled: Path, monkeypatch: Any
) -> None:
    import cortex.search.recorder as rec

    monkeypatch.setattr(rec, "RETRY_PAUSES", (0.0,))
    store = Store.open(filled)
    recorder = Recorder(store, delay=HOUR, max_delay=HOUR)
    try:
        for e in (entry(1, "a", "retry"), entry(999_999, "bad", "retry"), entry(2, "b", "retry")):
            recorder.submit(e)
        recorder.flush()  # this thread writes: the batch fails, then one by one
        stats = recorder.stats()
        assert stats["retries"] == 1 and stats["dropped"] == 1 and stats["written"] == 2
        assert logged(filled, "retry") == [(1, "a"), (2, "b")]
    finally:
        recorder.close()
        store.close()
