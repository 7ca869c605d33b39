"""Recording off the answer's critical path, without losing a write.

A search that records (pipeline step 7: the recall_log rows, access counts, 'recalled'
session links) used to write them in its own transaction before returning: a commit on
every answer, and behind another writer's lock a wait of up to the busy timeout. Now it
hands them to a :class:`Recorder`: one worker thread per Engine takes what is queued and
writes it in batches, one transaction per batch (a stream of searches, one commit).

Every commit by another connection makes SQLite drop the page cache of each of this
Engine's connections at its next read (``PRAGMA data_version`` moves): a commit right
after every search made the next search's statements read their pages again (~1–1.5 ms
CPU of a first-time hybrid search at 100k). So the worker waits until the queue has been
quiet for DELAY (or holds BATCH searches, or its oldest search has waited MAX_DELAY),
and a thread that flushes writes what is queued itself, on its own connection: its own
commit leaves its own cache warm (BENCHMARKS.md, "Recording without cold reads").

Nothing is lost:

- the worker writes DELAY after the last search of a stream, MAX_DELAY after its first
  at the latest, and at once when someone waits (``when_written``, ``flush(timeout)``,
  close);
- :meth:`Recorder.flush` returns once everything queued before it is written (without a
  timeout the calling thread writes it); ``Engine.flush_recalls()`` calls it, and so does
  every Engine read of what recording writes (``get``, ``timeline``,
  ``session_context``, ``stats``, the ``store`` handle): a caller always reads its own
  searches;
- :meth:`Recorder.close` (``Engine.close()``) flushes, stops the worker and fsyncs the
  database's WAL; an Engine never closed is flushed the same way at interpreter exit;
- a batch that fails (the database locked past the busy timeout, a full disk) is retried
  with back-off, then written search by search so that one bad entry cannot take the
  others with it; only what still fails is dropped, logged and counted (``stats()``).
- one writer at a time (the worker or a flushing thread): the log stays in the order of
  the searches.

A search with reinforcement (``Options(reinforce=...)``) is still written before it
returns: it changes later rankings, and the next search must see it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cortex import recall
from cortex.log import get_logger

__all__ = ["BATCH", "DELAY", "MAX_DELAY", "Recall", "Recorder"]

log = get_logger("cortex.search")

#: Searches written per transaction at most.
BATCH = 256
#: The worker writes once no search was queued for this long (seconds)...
DELAY = 0.03
#: ...or once the oldest queued search has waited this long, whichever first.
MAX_DELAY = 0.25
#: Pauses before the retries of a failed batch (seconds).
RETRY_PAUSES = (0.05, 0.25, 1.0)
#: How long close() waits for the worker before writing what is left itself.
CLOSE_WAIT = 60.0


@dataclass(frozen=True, slots=True)
class Recall:
    """One search's recording: a row per result ``(memory_id, fact_id, score)``."""

    rows: tuple[tuple[int, int | None, float], ...]
    query: str | None
    session_id: str | None
    lens: str | None
    reinforce: float
    at: float


class Recorder:
    """The queue of one Store's recalls and the thread that writes them (started on the
    first search that records)."""

    def __init__(
        self,
        store: Any,
        *,
        batch: int = BATCH,
        delay: float = DELAY,
        max_delay: float = MAX_DELAY,
    ) -> None:
        self._store = store
        self._batch = batch
        self._delay = delay
        self._max_delay = max_delay
        self._queue: deque[Recall] = deque()
        self._cond = threading.Condition()
        self._submitted = 0  # searches queued so far
        self._done = 0  # of them written (or given up on)
        self._busy = False  # a writer (the worker or a flushing thread) holds a batch
        self._first = 0.0  # monotonic: when the queue last became non-empty
        self._last = 0.0  # monotonic: the last submit
        self._hurry = 0  # threads waiting in flush(timeout): the worker writes at once
        self._thread: threading.Thread | None = None
        self._closed = False
        self._waiters: list[tuple[int, Callable[[], None]]] = []  # (target, callback)
        # per thread: how deep inside `deferred` it is, and whether a submit of its own
        # there has not woken the worker yet (woken when it leaves)
        self._deferring = threading.local()
        self._deferral = _Deferral(self)  # what `deferred` returns (its state is per thread)
        self.written = 0
        self.batches = 0
        self.retries = 0
        self.dropped = 0
        _live.add(self)

    # ------------------------------------------------------------------ callers

    def submit(self, entry: Recall) -> None:
        """Queue one search's recording; written by the worker once the stream of
        searches pauses for DELAY (MAX_DELAY at most), or by the next flush."""
        with self._cond:
            if not self._closed:
                now = time.monotonic()
                if not self._queue:
                    self._first = now
                self._last = now
                self._queue.append(entry)
                self._submitted += 1
                if getattr(self._deferring, "depth", 0):
                    self._deferring.owed = True  # woken when the caller leaves `deferred`
                else:
                    self._start_and_wake()
                return
        self._write([entry])  # closed (a search racing close()): written here and now

    def _start_and_wake(self) -> None:
        """Start the worker if it is not running, and wake it (under the lock)."""
        if self._thread is None or not self._thread.is_alive():  # (or a fork's)
            self._thread = threading.Thread(target=self._run, name="cortex-recorder", daemon=True)
            self._thread.start()
        self._cond.notify_all()

    def deferred(self) -> contextlib.AbstractContextManager[None]:
        """Within, this thread's submits queue their searches without waking the worker;
        it is woken (and started) when the thread leaves, once. A search that records
        is submitted before its suggestions are made: woken then, the worker took the
        GIL back and forth with the search's last steps (its wake-up is Python: the
        condition's wait, `_due`); the write itself waits DELAY after the submit in
        any case. What the thread queued is never left unwoken: leaving wakes it, an
        exception included."""
        return self._deferral

    def pending(self) -> int:
        """Searches queued and not written yet."""
        return self._submitted - self._done

    def flush(self, timeout: float | None = None) -> bool:
        """Return once every search queued before this call is written. Without a
        `timeout` the calling thread writes what is queued (on its own connection, whose
        cache its own commit leaves warm); with one, the worker writes at once and this
        returns False if `timeout` seconds pass first."""
        with self._cond:
            target = self._submitted
            if self._done >= target:
                return True
            alive = self._thread is not None and self._thread.is_alive()
            if timeout is not None and alive:
                self._hurry += 1
                self._cond.notify_all()
                try:
                    return self._cond.wait_for(lambda: self._done >= target, timeout)
                finally:
                    self._hurry -= 1
        # no timeout, or no worker (it died, or exit is tearing threads down)
        self._drain(target)
        return True

    def when_written(self, callback: Callable[[], None]) -> None:
        """Call `callback` once every search queued before this call is written (at once,
        in this thread, if it already is; else on the thread that writes them, at once:
        keep it short, e.g. ``loop.call_soon_threadsafe(...)``). What an event loop
        waits on without a thread of its own."""
        with self._cond:
            target = self._submitted
            if self._done < target:
                self._waiters.append((target, callback))
                self._cond.notify_all()  # someone waits: no coalescing delay
                return
        callback()

    def _wake(self) -> list[Callable[[], None]]:
        """The callbacks whose searches are all written now (called under the lock)."""
        if not self._waiters:
            return []
        ready = [cb for target, cb in self._waiters if target <= self._done]
        if ready:
            self._waiters = [(t, cb) for t, cb in self._waiters if t > self._done]
        return ready

    def _notify(self, ready: list[Callable[[], None]]) -> None:
        for callback in ready:
            try:
                callback()
            except Exception as exc:  # a waiter's failure is its own
                log.warning("a recall waiter failed: %s", exc)

    def close(self) -> None:
        """Flush, stop the worker and fsync the WAL (called by Engine.close and at exit).
        Idempotent; searches submitted afterwards are written synchronously."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(CLOSE_WAIT)
        self._drain(None)  # whatever the worker did not get to (or all of it, if it died)
        _live.discard(self)
        if self.written:
            _fsync_wal(self._store)

    def stats(self) -> dict[str, int]:
        with self._cond:
            return {
                "pending": self._submitted - self._done,
                "written": self.written,
                "batches": self.batches,
                "retries": self.retries,
                "dropped": self.dropped,
            }

    # ------------------------------------------------------------------ writing

    def _take(self) -> list[Recall]:
        n = min(self._batch, len(self._queue))
        return [self._queue.popleft() for _ in range(n)]

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            closer = getattr(self._store, "close_thread_connection", None)
            if closer is not None:
                with contextlib.suppress(Exception):
                    closer()  # so that the Engine's last connection checkpoints the WAL

    def _due(self) -> float | None:
        """Seconds until the worker should write what is queued; None: nothing queued
        (called under the lock)."""
        if not self._queue:
            return None
        if self._closed or self._hurry or self._waiters or len(self._queue) >= self._batch:
            return 0.0
        now = time.monotonic()
        return max(0.0, min(self._last + self._delay, self._first + self._max_delay) - now)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    due = self._due()
                    if due is None:
                        if self._closed:
                            return  # closed and empty
                        self._cond.wait()
                    elif due > 0.0:
                        self._cond.wait(due)
                    elif self._busy:  # a flushing thread is writing: let it finish
                        self._cond.wait()
                    else:
                        break
                batch = self._take()
                self._busy = True
            self._write_taken(batch)

    def _write_taken(self, batch: list[Recall]) -> None:
        """Write a batch taken under the lock (with ``_busy`` set), then account for it."""
        try:
            self._write(batch)
        finally:
            with self._cond:
                self._busy = False
                self._done += len(batch)
                if self._queue:
                    self._first = time.monotonic()  # what is left is due at MAX_DELAY
                self._cond.notify_all()
                ready = self._wake()
            self._notify(ready)

    def _drain(self, target: int | None) -> None:
        """Write in the calling thread what is queued, up to the `target`-th search
        (None: all of it): flush, close, or no live worker. One writer at a time: a batch
        the worker holds is waited for."""
        while True:
            with self._cond:
                if target is not None and self._done >= target:
                    return
                if self._busy:  # the worker (or another thread) is writing a batch
                    if not self._cond.wait_for(lambda: not self._busy, CLOSE_WAIT):
                        return
                    continue
                if not self._queue:
                    return
                batch = self._take()
                self._busy = True
            self._write_taken(batch)

    def _write(self, batch: Sequence[Recall]) -> None:
        """One transaction for the batch; retried, then search by search."""
        for pause in (*RETRY_PAUSES, None):
            try:
                self._transaction(batch)
                return
            except Exception as exc:  # the worker must outlive any failure
                if pause is None:
                    log.warning("recording %d search(es) failed: %s", len(batch), exc)
                    break
                self.retries += 1
                time.sleep(pause)
        if len(batch) == 1:
            self.dropped += 1
            log.error("a search's recall was not recorded: %s", _describe(batch[0]))
            return
        for entry in batch:
            try:
                self._transaction([entry])
            except Exception as exc:
                self.dropped += 1
                log.error("a search's recall was not recorded (%s): %s", _describe(entry), exc)

    def _transaction(self, batch: Sequence[Recall]) -> None:
        with self._store.transaction():
            for e in batch:  # each joins the batch's transaction
                recall.record_recall(
                    self._store,
                    e.rows,
                    query=e.query,
                    session_id=e.session_id,
                    lens=e.lens,
                    reinforce=e.reinforce,
                    at=e.at,
                )
        self.written += len(batch)
        self.batches += 1


def _describe(entry: Recall) -> str:
    # the query may be private: its length and the ids, never its text
    return f"{len(entry.rows)} result(s), query of {len(entry.query or '')} characters"


class _Deferral:
    """Recorder.deferred's scope: re-entrant, its state in the recorder's per-thread
    `_deferring` (a class, not a generator: entered on every search)."""

    __slots__ = ("_recorder",)

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    def __enter__(self) -> None:
        mine = self._recorder._deferring
        mine.depth = getattr(mine, "depth", 0) + 1

    def __exit__(self, *exc: object) -> None:
        recorder = self._recorder
        mine = recorder._deferring
        mine.depth -= 1
        if not mine.depth and getattr(mine, "owed", False):
            mine.owed = False
            with recorder._cond:
                if recorder._queue:
                    recorder._start_and_wake()


def _fsync_wal(store: Any) -> None:
    """Force the committed recall rows to disk: SQLite's synchronous=NORMAL leaves the
    WAL's last commits in the page cache until a checkpoint."""
    path = getattr(store, "path", None)
    if path is None:
        return
    for name in (f"{path}-wal", os.fspath(path)):
        with contextlib.suppress(OSError):
            fd = os.open(name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


_live: weakref.WeakSet[Recorder] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """An Engine that was never closed still writes every search it recorded."""
    for recorder in list(_live):
        with contextlib.suppress(Exception):
            recorder.close()
