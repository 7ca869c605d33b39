"""The in-memory keyword index on PostgreSQL: the SQLite backend's native BM25 index,
filled from the database and kept in step with it through ``keyword_log``.

BM25 in SQL (:mod:`cortex.pg.keyword`) reads every memory holding a query word: ~8 ms
of a ~15 ms hybrid search at 100k memories (BENCHMARKS.md, "PostgreSQL: third pass").
``cortex._native.KeywordIndex`` holds the same postings in memory, tokenized by the same
tokenizer the store writes ``tsv`` with (:mod:`cortex.pg.text`), and ranks with the same
BM25 (FTS5's constants; N, average length and document frequencies of the searched
projects), so it answers the plain-text AND and OR tiers with the SQL statement's hits
and scores (tests/pg/test_pg_keyword_index.py holds it to them) in a millisecond or
two. Everything else stays in SQL: FTS5 syntax, prefixes, CJK, LIKE, other orders.

Keeping in step (schema 4, ``keyword_log``): every statement that inserts, deletes or
changes the indexed text, project or liveness of memories logs their ids with its
transaction id. Before each search the index reads, in one statement, its snapshot's
``xmin`` and the log rows from transactions at or after the ``xmin`` of its previous
read (skipping rows it applied already): every transaction older than that ``xmin`` had
finished, so was in what it read then. It re-reads the logged memories and replaces or
removes them (idempotent). A TRUNCATE, or more than :data:`SYNC_BACKLOG` memories changed
at once, makes it rebuild (in the background under "auto", SQL answering meanwhile).

Differences from SQL BM25, both rare and both where this index agrees with the SQLite
backend instead: a word repeated more than 256 times in a memory (``tsvector`` keeps 256
positions a lexeme) and words past the 16,383rd of a memory (positions are capped).

Policies (as ``cortex.open``'s ``keyword_index``): "auto" builds in a background thread
once the database holds :data:`cortex.keyword_index.AUTO_MIN` memories; "on" builds at
the first search and waits (tests, benchmarks); "saved" and "off" never build (a one-shot
CLI search is faster in SQL than reading every memory over the wire first).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cortex.errors import CortexError
from cortex.keyword_index import AUTO_MIN, BackgroundIndex, fill
from cortex.pg.store import PgStore

__all__ = ["SYNC_BACKLOG", "PgKeywordIndex"]

#: Memories re-read inside a search; a larger change is rebuilt ("auto": in the background).
SYNC_BACKLOG = 20_000
#: The schema version that has ``keyword_log``.
LOG_SCHEMA = 4
_BATCH = 20_000


#: The log is pruned to about its newest LOG_KEEP rows once it spans LOG_PRUNE_AT (by the
#: reader that sees it so; only rows that reader applied). The largest transaction id
#: pruned is kept in ``meta``: a reader whose position it reaches rebuilds.
LOG_KEEP = 10_000
LOG_PRUNE_AT = 20_000
_PRUNED_SQL = "COALESCE((SELECT value::bigint FROM meta WHERE key = 'keyword_log_pruned'), -1)"
#: The log since a position (see _replay): the snapshot's xmin, then the rows not applied.
_LOG_SQL = (
    "SELECT s.x, s.pruned, s.span, l.seq, l.xid::text::bigint, l.ids IS NULL, l.ids FROM"
    " (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS x,"
    f" {_PRUNED_SQL} AS pruned,"
    " COALESCE((SELECT max(seq) - min(seq) FROM keyword_log), 0) AS span) s"
    " LEFT JOIN keyword_log l ON l.xid >= %s::text::xid8 AND NOT l.seq = ANY(%s)"
)


def _log_params(xmin: int, applied: dict[int, int]) -> tuple[str, list[int]]:
    return str(xmin), list(applied)


class _Rebuild(Exception):
    """The log cannot be replayed (a TRUNCATE, or too many changes): build again."""


class PgKeywordIndex(BackgroundIndex):
    """The in-memory keyword index of one Engine on PostgreSQL, and its policy."""

    def __init__(self, store: PgStore, policy: str = "auto") -> None:
        self._checked_policy(policy)
        self._store: PgStore = store
        self._policy = policy if policy in ("auto", "on") else "off"
        if self._policy != "off" and store.schema_version() < LOG_SCHEMA:
            self._policy = "off"  # an older database opened read-only: no log to follow
        self._lock = threading.Lock()  # guards the index and its position; held to search
        self._index: Any = None
        self._xmin = 0  # the log is read from transactions at or after this id
        self._applied: dict[int, int] = {}  # log seq -> its xid, for xids >= _xmin
        self._pruned = -1  # the log's pruned mark when last read (see LOG_KEEP)
        self._prune_refused = False  # a DELETE of the log failed here (see _prune)
        self._worker: threading.Thread | None = None
        self._closed = False
        self.error: str | None = None  # why the index is not used, if it failed
        if self._policy == "auto" and self._size() >= AUTO_MIN:
            self._start_background()

    def persist(self) -> bool:
        """At a bulk load's end (`Engine.flush`): build the index now when the policy
        would ("on", or "auto" past AUTO_MIN memories) and wait for it. Returns whether
        it is ready. Nothing is written: the index lives in this process only."""
        if self._policy == "off" or self._closed:
            return False
        if self._policy == "auto":
            if self._size() < AUTO_MIN:
                return False
            if self._index is None:
                self._start_background()
            return self.wait()
        with self._lock:
            return self._current()

    def close(self) -> None:
        self._stop()
        with self._lock:
            self._index = None

    # ------------------------------------------------------------------ searching

    def search(
        self,
        terms: list[str],
        k: int,
        *,
        require_all: bool,
        allowed: Sequence[int] | None = None,
        projects: list[str] | None = None,
        sync: bool = True,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """(memory ids, BM25 > 0) of the top `k` live memories holding all
        (`require_all`) or any of `terms`, best first, ranked with the statistics of
        `projects` (stored names, see cortex.pg.store.db_project; None: every project);
        None when SQL must answer (no index now, or a word of several tokens).
        `sync`: read the log first (False: a later tier of the search that just did)."""
        if self._policy == "off" or self._closed:
            return None
        from cortex._native import KeywordIndex

        if KeywordIndex.query_terms(terms) is None:
            return None
        with self._lock:
            if (sync or self._index is None) and not self._current():
                return None
            only = None if allowed is None else np.asarray(sorted(allowed), dtype=np.int64)
            if only is not None and len(only) == 0:
                return np.empty(0, np.int64), np.empty(0, np.float64)
            return self._index.search(  # type: ignore[no-any-return]
                terms, k, require_all=require_all, allowed=only, projects=projects
            )

    def search_checked(
        self,
        terms: list[str],
        k: int,
        *,
        require_all: bool,
        projects: list[str] | None,
        then: Callable[[list[int]], tuple[str, list[Any]]],
    ) -> tuple[np.ndarray, np.ndarray, list[tuple[Any, ...]]] | None:
        """`search`, and the rows of the statement `then(ids)` makes of its answer (the
        filters and rank columns of the hits), in one round trip: the index answers as it
        stands and the log is read in the same pipeline as `then`'s statement; when the
        log holds nothing new (the common case) that answer was the database's, else the
        changes are applied and both run again. None: SQL must answer."""
        if self._policy == "off" or self._closed:
            return None
        from cortex._native import KeywordIndex

        if KeywordIndex.query_terms(terms) is None:
            return None
        with self._lock:
            if self._index is not None:
                ids, bm25 = self._index.search(
                    terms, k, require_all=require_all, allowed=None, projects=projects
                )
                sql, params = then(ids.tolist())
                with self._store.db.reads() as conn, conn.pipeline():
                    log = conn.execute(_LOG_SQL, _log_params(self._xmin, self._applied))
                    got = conn.execute(sql, params)
                    log_rows, rows = log.fetchall(), got.fetchall()
                head = log_rows[0]
                if (
                    all(r[3] is None for r in log_rows) and int(head[1]) == self._pruned
                ):  # nothing new: the answer stands (a long log is pruned, not replayed)
                    self._xmin = int(head[0])
                    self._applied = {q: x for q, x in self._applied.items() if x >= self._xmin}
                    if int(head[2]) > LOG_PRUNE_AT:
                        self._prune(self._xmin)
                    return ids, bm25, rows
                try:
                    self._xmin, self._applied = self._replay(
                        self._index, self._xmin, self._applied, log_rows
                    )
                except (_Rebuild, CortexError):
                    self._index = None  # _current below rebuilds, or SQL answers
            if not self._current():
                return None
            ids, bm25 = self._index.search(
                terms, k, require_all=require_all, allowed=None, projects=projects
            )
            sql, params = then(ids.tolist())
            return ids, bm25, self._store.query(sql, params)

    def statistics(
        self, words: list[str], projects: list[str] | None = None
    ) -> tuple[int, int, list[tuple[str, int]]] | None:
        """(live memories, their tokens, [(index term, documents holding it)] in query
        order, each term once) over `projects`; None when the index cannot answer now.
        Read under the same lock as a search just made, so of the same moment when no
        write landed between (the caller checks `position`)."""
        if self._policy == "off" or self._closed or self._index is None:
            return None
        from cortex._native import KeywordIndex

        terms = KeywordIndex.query_terms(words)
        if terms is None:
            return None
        with self._lock:
            if self._index is None:
                return None
            docs, tokens = self._index.stats(projects)
            unique = list(dict.fromkeys(terms))
            return int(docs), int(tokens), [(t, int(self._index.df(t, projects))) for t in unique]

    # ------------------------------------------------------------------ keeping in step

    def _current(self) -> bool:
        """Bring the index up to the log (under the lock); False when SQL must answer."""
        if self._index is None:
            if self._policy == "on" and self.error is None:
                self._index, self._xmin, self._applied = self._build_or_fail()
            elif self._policy == "auto" and self._worker is None and self._size() >= AUTO_MIN:
                self._start_background()
            if self._index is None:
                return False
        try:
            self._xmin, self._applied = self._replay(self._index, self._xmin, self._applied)
        except _Rebuild:
            self._index = None
            if self._policy == "on":
                self._index, self._xmin, self._applied = self._build_or_fail()
                return self._index is not None
            self._worker = None
            self._start_background()
            return False
        except CortexError as exc:
            self._index = None
            self.error = f"the in-memory keyword index could not catch up ({exc})"
            return False
        return True

    def _replay(
        self,
        index: Any,
        xmin: int,
        applied: dict[int, int],
        rows: list[tuple[Any, ...]] | None = None,
    ) -> tuple[int, dict[int, int]]:
        """Apply the log rows of transactions at or after `xmin` not yet `applied`;
        returns the new position. One statement reads the snapshot's xmin and the rows
        (the same snapshot), so a row it does not see has an xid at or past that xmin.
        `rows`: that statement's answer, when the caller read it already."""
        if rows is None:
            rows = self._store.query(_LOG_SQL, _log_params(xmin, applied))
        new_xmin, pruned, span = (int(v) for v in rows[0][:3])
        if pruned != self._pruned and pruned >= xmin:
            raise _Rebuild  # rows this index had not read may be pruned
        self._pruned = pruned
        logged = [r for r in rows if r[3] is not None]
        if any(r[5] for r in logged):
            raise _Rebuild  # a TRUNCATE
        changed: set[int] = set()
        for r in logged:
            changed.update(int(i) for i in r[6])
            if len(changed) > SYNC_BACKLOG:
                raise _Rebuild
        if changed:
            self._apply(index, sorted(changed))
        kept = {seq: x for seq, x in applied.items() if x >= new_xmin}
        kept.update({int(r[3]): int(r[4]) for r in logged if int(r[4]) >= new_xmin})
        if span > LOG_PRUNE_AT:
            self._prune(new_xmin)
        return new_xmin, kept

    def _prune(self, position: int) -> None:
        """Delete the log's older rows, keeping LOG_KEEP, among those of transactions
        before `position` (all applied here), and record the largest id pruned."""
        if self._store.read_only or self._prune_refused:
            return
        try:
            with self._store.transaction() as tx:
                row = tx.execute(
                    "WITH gone AS (DELETE FROM keyword_log WHERE seq < (SELECT max(seq)"
                    " FROM keyword_log) - %s AND xid < %s::text::xid8"
                    " RETURNING xid::text::bigint AS x)"
                    " INSERT INTO meta AS t (key, value)"
                    " SELECT 'keyword_log_pruned', max(x)::text FROM gone HAVING count(*) > 0"
                    " ON CONFLICT (key) DO UPDATE"
                    " SET value = GREATEST(t.value::bigint, excluded.value::bigint)::text"
                    " RETURNING value",
                    (LOG_KEEP, str(position)),
                ).fetchone()
        except CortexError:
            # a role without DELETE (or a conflict): not tried again by this process, whose
            # searches read only the log's new rows; another process prunes it
            self._prune_refused = True
            return
        if row is not None and int(row[0]) < position:
            self._pruned = int(row[0])  # ours (all applied here); a larger one: see _replay

    def _apply(self, index: Any, changed: list[int]) -> None:
        live: list[int] = []
        texts: list[str] = []
        projects: list[str] = []
        for start in range(0, len(changed), _BATCH):
            for i, content, project in self._store.query(
                "SELECT id, content, project_id FROM memories WHERE id = ANY(%s)"
                " AND deleted_at IS NULL",
                (changed[start : start + _BATCH],),
            ):
                live.append(int(i))
                texts.append(content)
                projects.append(project)
        gone = sorted(set(changed) - set(live))
        if gone:
            index.remove(np.asarray(gone, dtype=np.int64))
        if live:  # add() replaces a memory already held (postings and project)
            index.add(np.asarray(live, dtype=np.int64), texts, projects)

    # ------------------------------------------------------------------ building

    def _build(self) -> tuple[Any, int, dict[int, int]]:
        """A fresh index of every live memory, brought up to the log: the position is
        read first, so whatever commits while the rows are read is replayed after."""
        from cortex._native import KeywordIndex

        xmin, self._pruned = (
            int(v)
            for v in self._store.query(
                "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint, " + _PRUNED_SQL
            )[0]
        )
        index = KeywordIndex()
        fill(
            index,
            lambda last: self._store.query(
                "SELECT id, content, project_id FROM memories WHERE deleted_at IS NULL"
                " AND id > %s ORDER BY id LIMIT %s",
                (last, _BATCH),
            ),
            lambda: self._closed,
        )
        xmin, applied = self._replay(index, xmin, {})
        return index, xmin, applied

    def _build_or_fail(self) -> tuple[Any, int, dict[int, int]]:
        try:
            return self._build()
        except (CortexError, _Rebuild, ImportError, MemoryError) as exc:
            self.error = f"the in-memory keyword index is not used ({exc or 'truncated'})"
            return None, 0, {}

    def _start_background(self) -> None:
        if self._closed or (self._worker is not None and self._worker.is_alive()):
            return

        def run() -> None:
            built, xmin, applied = self._build_or_fail()
            if built is None or self._closed:
                return
            with self._lock:
                if self._closed:
                    return
                try:
                    xmin, applied = self._replay(built, xmin, applied)
                except (CortexError, _Rebuild) as exc:
                    self.error = f"the in-memory keyword index could not catch up ({exc})"
                    return
                self._index, self._xmin, self._applied = built, xmin, applied

        self._worker = threading.Thread(target=run, name="cortex-pg-keyword-index", daemon=True)
        self._worker.start()
