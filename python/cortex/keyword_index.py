"""The in-memory keyword index: FTS5's BM25 for plain-text queries, without FTS5's scan.

FTS5 scores every memory that holds any of the query's terms before it can sort them, so a
plain-text OR of eight words costs ~100 ms at 100k memories and over a second at 1M: it
was the slowest part of a hybrid search (benches/e2e.md). `cortex._native.KeywordIndex`
holds the same postings in memory, tokenized exactly as ``memories_fts`` tokenizes
(``porter unicode61 remove_diacritics 2``), and returns the same top-k with the same BM25
scores in milliseconds (tests/test_keyword_native.py holds it to FTS5 on SciFact).

It answers the plain-text tiers of the keyword cascade (AND, then OR) ordered by
relevance; FTS5 syntax, prefix, CJK and LIKE queries, and other orders, stay with SQLite.

The index is derived data: built from SQLite, then kept in step by reading the
``memory_changes`` log (schema version 2), which triggers append to in the
same transaction as every change of indexed text. Before each search the index reads
``MAX(seq)`` (one index lookup) and replays what changed since; a log pruned past the
index's position makes it rebuild. Replaying is idempotent, so a change that lands
between reading the log position and reading the rows is simply applied twice.

A built index is saved as ``keywords.bin`` in the database's derived folder (beside the
vector index, :func:`cortex.semantic.index_dir`), tagged with the log position it reflects
and checksummed, so that a fresh process maps and loads it (0.19-0.32 CPU-s at 1M
memories, benches/bench_first_search.py) instead of tokenizing every memory again (1.1 s
at 100k, 12.8 s at 1M). A loaded file is trusted only
after it passes its checksum and structural checks, the log still reaches back to its
position, the changes since are replayed and its totals (rows, tokens) equal FTS5's own;
anything else (a file of an older format too) rebuilds it from SQLite (and a stale file
is overwritten by the next build).
An index that moved :data:`RESAVE_AFTER` changes past its file is saved again at close.
Stores under :data:`AUTO_MIN` memories are never saved (FTS5 is fast enough there).

Policies (``cortex.open(..., keyword_index=...)``):

- ``"auto"`` (default): when the database holds at least :data:`AUTO_MIN` memories, build
  in a background thread from the moment the engine opens; FTS5 answers until it is ready
  (and while a large backlog of changes is rebuilt the same way).
- ``"on"``: build at the first search that needs it, and wait for it (benchmarks, tests).
- ``"saved"``: the saved file when it is valid and the store holds :data:`SAVED_MIN`
  memories or more, never a build: FTS5 answers otherwise (the CLI's searches: one query
  in a fresh process: at 100k memories one FTS5 query, 0.01-0.03 s, beats loading, ~0.05
  s plus numpy's import; at 1M, on SciFact claims, a fresh CLI process's hybrid search
  costs 1.18 CPU-s p50 with the loaded index against 1.36 with FTS5 alone, its
  keyword-only search 0.76 against 0.55: a close call, left at 1M for the default
  hybrid search; benches/bench_keyword_load.py, benches/bench_first_search.py).
- ``"off"``: FTS5 only (the CLI's other one-shot commands).

Each memory is indexed in its project (``cortex.filters.NO_PROJECT`` when it has none): a
search given ``projects`` ranks with the BM25 statistics (N, avgdl, df) of those projects
alone, so that other projects' memories never change its ranking (issue 14).

Beside the postings the index keeps the ranking columns of the memories its searches
returned (:class:`cortex.ranking.RankInfo`, read from SQLite once, :meth:`KeywordIndexer.
rank_info`), and applies the filters it can judge from them (live, not superseded, the
project wall) without SQL: a keyword search at 10k memories read the columns of its 100
candidates back from SQLite, the largest single part of its time. The change log records
every change of those columns too (schema: ``memories_log_rank``), and replaying it drops
the memories it names, so the kept columns are SQLite's as of the log position the
postings reflect.

The native index keeps a copy of those columns too (``KeywordIndex.keep_ranks``, dropped
with the Python copy), and ranks a keyword-only search beside them
(:meth:`KeywordIndexer.page`, ``KeywordIndex.rank_page``): the plain AND/OR tiers, the
filters the columns judge, the calibration, boosts, floors and order of
``cortex.search.pipeline.Pipeline._rank``, with its constants passed in from Python, in
one call after one check of the log position; only the page's rows are then read
(tests/test_keyword_page.py holds it to the Python path).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

from cortex._lazy import LazyModule
from cortex.errors import CortexError, IndexFormatError, InvalidOptionError, StorageError
from cortex.filters import narrows_beyond_project, project_ids, projects_of
from cortex.keyword import NATIVE_MAX_FETCH, PREFILTER, Scope, _idf, quote
from cortex.log import get_logger
from cortex.ranking import RANK_COLUMNS, RankInfo, is_dated
from cortex.store import Store
from cortex.validate import checked, rank_info_ok

if TYPE_CHECKING:
    import numpy as np
else:  # imported when a vector is first touched (start-up of keyword-only commands)
    np = LazyModule("numpy")

_log = get_logger("cortex.keyword")

__all__ = [
    "AUTO_MIN",
    "POLICIES",
    "BackgroundIndex",
    "KeywordHits",
    "KeywordIndexer",
    "KeywordPage",
]

_T = TypeVar("_T")

#: Below this many memories FTS5 answers in a few ms; "auto" does not build an index.
#: At 10k SciFact passages FTS5 took 9.5 ms for a claim and the index 0.12 s to build
#: (benches/bench_keyword.py), so the index pays for itself well below that.
AUTO_MIN = 5_000
#: Changes replayed inside a search; a longer backlog is rebuilt in the background ("auto").
SYNC_BACKLOG = 20_000
POLICIES = ("auto", "on", "saved", "off")
_BATCH = 20_000
#: The saved index's file name, in the database's derived folder.
FILE_NAME = "keywords.bin"
#: The meta key naming the saved file this database trusts (its checksum): a file saved
#: by a copy of the database that has since diverged (the same log positions, other
#: texts) would pass every other check and answer with the other copy's memories.
STAMP_KEY = "keywords:file"
#: An index this many changes past its saved file is saved again when the engine closes.
RESAVE_AFTER = 1_000
#: The "saved" policy loads the file only for stores this large (see the policies above).
SAVED_MIN = 1_000_000
#: Memories whose ranking columns are kept (~0.3 kB each); past this many they are
#: dropped and read again as searches need them.
RANKS_KEPT = 65_536


class KeywordPage(NamedTuple):
    """The ranked candidates of a keyword-only search (KeywordIndexer.page): the plain
    tier's expression and terms, the terms a hit holds, the admitted hits (BM25 order),
    and every memory that cleared the floors in order (ids, final scores, calibrated
    keyword scores, kept ranking columns), with the number that did not (`hidden`)."""

    expression: str
    terms: list[str]
    held: list[str]
    hits: list[int]
    ids: list[int]
    scores: list[float]
    bm25: list[float]
    infos: list[RankInfo]
    hidden: int


class KeywordHits(NamedTuple):
    """The keyword leg of a hybrid search over the in-memory index (KeywordIndexer.hits):
    the plain tier's expression, the terms a hit holds, the admitted hits in BM25 order
    (ids, BM25, calibrated keyword scores, kept ranking columns), the terms' bound (the
    sum of their IDFs, keyword._bound), and whether the AND of the terms answered (else
    their OR)."""

    expression: str
    held: list[str]
    ids: list[int]
    raw: list[float]
    scores: list[float]
    infos: list[RankInfo]
    bound: float


def _query_terms(words: list[str]) -> list[str] | None:
    """The index terms of `words` (`KeywordIndex.query_terms`); None when a word is several
    terms (a phrase to FTS5) or the extension is missing: FTS5 answers then."""
    try:
        from cortex._native import KeywordIndex
    except ImportError:
        return None
    return KeywordIndex.query_terms(words)


def _row_of(info: RankInfo | None) -> tuple[Any, ...] | None:
    """A kept row as KeywordIndex.keep_ranks takes it: (created, confidence, salience,
    sector, dated, superseded, project, passes rank_info_ok)."""
    if info is None:
        return None
    ok = rank_info_ok(info)
    if not ok:  # only `ok` is read of a damaged row: any numbers stand in for the rest
        return (0.0, 0.0, 0.0, None, False, False, None, False)
    return (
        info.created_at, info.confidence, info.salience, info.sector,
        is_dated(info.source_path), bool(info.superseded), info.project, True,
    )  # fmt: skip


class BackgroundIndex:
    """What the in-memory keyword index of either backend (KeywordIndexer here,
    cortex.pg.keyword_index.PgKeywordIndex) does alike around its background build: the
    policy, waiting for the build, stopping it, and the store's size that "auto" compares
    with AUTO_MIN."""

    _store: Any
    _policy: str
    _index: Any
    _worker: threading.Thread | None
    _closed: bool

    @staticmethod
    def _checked_policy(policy: str) -> None:
        if policy not in POLICIES:
            raise InvalidOptionError(
                f"keyword_index must be one of {', '.join(POLICIES)}, not {policy!r}"
            )

    @property
    def policy(self) -> str:
        return self._policy

    def ready(self) -> bool:
        """Whether a search now would use the index (built, and not rebuilding)."""
        return self._index is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a background build; returns whether the index is ready."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)
        return self.ready()

    def _stop(self) -> None:
        """Mark the index closed and wait for a background build to notice (unless this
        is the build's own thread)."""
        self._closed = True
        worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join()

    def _size(self) -> int:
        """The largest memory id (how large the store has grown); 0 when it cannot be read."""
        try:
            return int(self._store.query("SELECT COALESCE(MAX(id), 0) FROM memories")[0][0])
        except CortexError:
            return 0


class KeywordIndexer(BackgroundIndex):
    """The in-memory keyword index of one Engine, and the policy for building it."""

    def __init__(self, store: Store, policy: str = "auto") -> None:
        self._checked_policy(policy)
        self._store: Store = store
        # Without the change log (an older file opened read-only) it could not follow writes.
        self._policy = policy if store.schema_version() >= 2 else "off"
        self._lock = threading.Lock()  # guards _index and _seq; held while searching
        self._ranks: dict[int, RankInfo | None] = {}
        self._built: Any = None
        self._seq = 0
        self._worker: threading.Thread | None = None
        self._closed = False
        self._saved_seq: int | None = None  # the log position of the file last saved/loaded
        self._tried_file = False
        self.error: str | None = None  # why the index is not available, if it failed
        # per thread: how deep in `pinned` scopes, and the (index, log position) checked
        # against the log in the outermost one
        self._pins = threading.local()
        # only when the change log records changes of the ranking columns (an older file
        # opened read-only does not)
        self._keeps_ranks = bool(getattr(store, "logs_ranks", False))  # PostgreSQL: off
        # With a saved file the first search loads it (fast); without, "auto" builds now.
        if self._policy == "auto" and self._size() >= AUTO_MIN and not self.file.exists():
            self._start_background()

    @property
    def _index(self) -> Any:
        """The native index that answers (None: FTS5 answers)."""
        return self._built

    @_index.setter
    def _index(self, index: Any) -> None:
        # memory id -> its ranking columns (None: deleted or missing) as of `_seq`: read
        # for this index; another one (a rebuild, a load) starts without them
        if index is not self._built:
            self._ranks = {}
        self._built = index

    @property
    def file(self) -> Path:
        """Where the index is saved (it may not exist)."""
        from cortex.semantic import index_dir

        return index_dir(self._store.path) / FILE_NAME

    def close(self) -> None:
        self._stop()
        with self._lock:
            index, seq = self._index, self._seq
            if index is not None and (
                self._saved_seq is None or seq - self._saved_seq >= RESAVE_AFTER
            ):
                self._save(index, seq)
            self._index = None

    def persist(self) -> bool:
        """Build the index if it is not built, and save it now unless its file already
        holds it (`cortex import` and `Engine.flush` call this so that the CLI's next
        searches load it). Returns whether the file holds the index: not for a store under
        AUTO_MIN memories, read-only, or when the index cannot be built."""
        if self._policy == "off" or self._closed or self._store.read_only:
            return False
        if self._size() < AUTO_MIN:
            return False
        self.wait()
        with self._lock:
            if self._index is None:
                self._index, self._seq = self._load(any_size=True) or self._build_or_fail()
            elif not self._current():
                return False
            if self._index is None:
                return False
            if self._saved_seq == self._seq and self.file.is_file():
                return True  # saved (or loaded) at this very position: nothing to write
            return self._save(self._index, self._seq)

    # ------------------------------------------------------------------ searching

    def search(
        self,
        terms: list[str],
        k: int,
        *,
        require_all: bool,
        allowed: Any = None,
        projects: tuple[str, ...] | None = None,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """(memory ids, BM25 > 0) of the top `k` memories holding all (`require_all`) or
        any of `terms`, best first; None when FTS5 must answer instead (no index yet, or a
        term FTS5 would read as a phrase of several tokens). `projects`: only these
        projects' memories, ranked with their statistics alone (None: every project)."""
        if _query_terms(terms) is None:  # a word of several tokens: a phrase
            return None
        if allowed is not None:
            allowed = np.asarray(allowed, dtype=np.int64)
        scope = list(projects) if projects is not None else None

        def search(index: Any) -> tuple[np.ndarray, np.ndarray]:
            if allowed is not None and len(allowed) == 0:
                return np.empty(0, np.int64), np.empty(0, np.float64)
            return index.search(  # type: ignore[no-any-return]
                terms, k, require_all=require_all, allowed=allowed, projects=scope
            )

        return self._ask(search, build=True)

    def df(
        self, words: list[str], projects: tuple[str, ...] | None = None
    ) -> tuple[int, list[int]] | None:
        """(live memories, documents holding each word's index term), as FTS5's bm25()
        counts them, over `projects` (None: all); None when the index cannot answer now
        (FTS5 counts instead)."""
        terms = _query_terms(words)
        if terms is None:
            return None

        def df(index: Any) -> tuple[int, list[int]]:
            if projects is None:
                return len(index), [index.df(t) for t in terms]
            scope = list(projects)
            return int(index.stats(scope)[0]), [index.df(t, scope) for t in terms]

        return self._ask(df)

    def words_starting(self, first: str) -> list[tuple[str, int]] | None:
        """The surface words (unstemmed, as ``memories_exact`` holds them) that start with
        `first`, with how many live memories hold each: exact until a memory is removed
        or replaced, an upper bound after (for ordering candidates, never for reporting);
        None when the index cannot answer now (FTS5's vocabulary is read instead)."""
        return self._ask(lambda index: index.words_starting(first), "words_starting")

    def words_near(self, prefix: str, word: str, limit: int) -> list[tuple[str, int, int]] | None:
        """The surface words that start with `prefix` within `limit` edits of `word`
        (cortex.suggest.edit_distance), `word` left out: (word, memories holding it as
        `words_starting` counts them, distance); None when the index cannot answer now."""
        return self._ask(lambda index: index.words_near(prefix, word, limit), "words_near")

    def holding(self, terms: list[str], ids: list[int]) -> list[str] | None:
        """The `terms` that one of the memories `ids` (a search's hits) holds, the index
        brought up to the log first (the hits may be FTS5's); None when the index cannot
        tell. A word of several index terms (a phrase to FTS5) is left out."""
        held = self._ask(lambda index: index.holding(terms, ids), "holding") if ids else None
        return None if held is None else [t for t, h in zip(terms, held, strict=True) if h]

    def _ask(self, ask: Callable[[Any], _T], needs: str = "", *, build: bool = False) -> _T | None:
        """`ask(index)` of the native index under the lock, the index brought up to the log
        first; None when it cannot answer now: the policy is "off", the indexer closed, no
        index (`build`: unless this call may load or build one, as a search does), the log
        not replayable now, or an older extension without the method `needs`."""
        if self._policy == "off" or self._closed or (self._index is None and not build):
            return None
        with self._lock:
            if (self._index is None and not build) or not self._current():
                return None
            if needs and not hasattr(self._index, needs):
                return None
            return ask(self._index)

    def rank_info(self, ids: list[int], opts: Any) -> dict[int, RankInfo] | None:
        """The memories among `ids` that pass `opts`'s filters, with their ranking columns
        (what :func:`cortex.filters.admitted` answers from SQLite), from the columns kept
        beside the postings; those not kept yet are read in one statement. None when the
        filters ask for more than the kept columns say (live, not superseded, the project
        wall): SQLite judges them then."""
        if not self._keeps_ranks or narrows_beyond_project(opts):
            return None

        projects = project_ids(opts)
        superseded = bool(opts.include_superseded)
        with self._lock:
            if self._index is None:
                return None
            ranks = self._ranks
            missing = [i for i in ids if i not in ranks]
            if missing:
                self._keep_missing(missing, list(ids))
            out: dict[int, RankInfo] = {}
            for i in ids:
                info = ranks[i]
                if (
                    info is not None
                    and (superseded or not info.superseded)
                    and (projects is None or info.project in projects)
                ):
                    out[i] = info
            return out

    def _keep_missing(self, missing: list[int], wanted: list[int]) -> None:
        """Keep the ranking columns of `missing`; when that would pass RANKS_KEPT, every
        kept one is forgotten first and those of `wanted` (what the caller reads next)
        are read instead."""
        if len(self._ranks) + len(missing) > RANKS_KEPT:
            self._forget_ranks(None)
            missing = wanted
        self._read_ranks(missing)

    def _read_ranks(self, ids: list[int]) -> None:
        """Keep the ranking columns of `ids` (None for those deleted or missing), here
        and in the native index (which ranks keyword-only searches with them, `page`)."""
        ranks = self._ranks
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ",".join("?" * len(part))
            for i in part:
                ranks[i] = None
            for i, *rest in self._store.query(
                f"SELECT m.id, {RANK_COLUMNS} FROM memories m"
                f" WHERE m.id IN ({marks}) AND m.deleted_at IS NULL",
                part,
            ):
                ranks[int(i)] = checked(RankInfo(*rest))  # checked once, not every search
        keep = getattr(self._index, "keep_ranks", None)
        if keep is not None:
            keep([(i, _row_of(ranks[i])) for i in ids])

    def _forget_ranks(self, ids: list[int] | None) -> None:
        """Drop the kept columns of `ids` (None: of every memory), here and natively."""
        if ids is None:
            self._ranks.clear()
        else:
            for i in ids:
                self._ranks.pop(i, None)
        drop = getattr(self._index, "drop_ranks", None)
        if drop is not None:
            drop(ids)

    def page(
        self,
        terms: list[str],
        pool: int,
        opts: Any,
        allowed: Any,
        weights: tuple[Any, ...],
        sectors: dict[str, float],
    ) -> KeywordPage | None:
        """The ranked candidates of a keyword-only search of the plain `terms` (stop words
        already dropped), ranked natively beside the kept columns (`KeywordIndex.
        rank_page`: what keyword.search's plain tiers and pipeline._rank give, the AND of
        the terms, else their OR); `weights` the ranking's constants and the options'
        weights (rank_page's tuple), `sectors` the sector weights. One check of the log
        position for the whole search. None when this path cannot answer (no index,
        filters the kept columns do not judge, a term FTS5 reads as a phrase, no
        plain-tier hit, a damaged row): the general path does."""
        with self._lock:
            found = self._plain(terms, pool, opts, allowed, weights, sectors)
            if found is None or found[1][9]:
                return None  # the general path, or a damaged row to name
            expression, out, held, _ = found
            ids = out[5]
            ranks = cast(dict[int, RankInfo], self._ranks)  # admitted: all kept, live
            return KeywordPage(
                expression, list(terms), held, out[2], ids, out[6], out[7],
                [ranks[i] for i in ids], out[8],
            )  # fmt: skip

    def hits(self, terms: list[str], pool: int, opts: Any, allowed: Any) -> KeywordHits | None:
        """The keyword leg of a hybrid search of the plain `terms` (stop words already
        dropped): keyword.search's plain tiers (the AND of the terms, else their OR) over
        the in-memory index, filtered by the kept ranking columns and calibrated
        (hits.keyword_score against the terms' bound) in one native call
        (`KeywordIndex.rank_page` without ranking: the fusion ranks). None when this
        path cannot answer (as `page`): keyword.search does."""
        with self._lock:
            found = self._plain(terms, pool, opts, allowed, None, None)
            if found is None:
                return None
            expression, out, held, bound = found
            ids = out[2]
            ranks = cast(dict[int, RankInfo], self._ranks)  # admitted: all kept, live
            return KeywordHits(
                expression, held, ids, out[3], out[4], [ranks[i] for i in ids], bound
            )

    def _plain(
        self,
        terms: list[str],
        pool: int,
        opts: Any,
        allowed: Any,
        weights: tuple[Any, ...] | None,
        sectors: dict[str, float] | None,
    ) -> tuple[str, tuple[Any, ...], list[str], float] | None:
        """`KeywordIndex.rank_page` of the plain `terms` (ranked with `weights`, else
        not), its missing columns kept first: (the tier's expression, rank_page's answer,
        the terms a hit holds, the terms' bound); None when the index cannot answer or no
        plain tier found anything. Called under the lock."""
        if self._policy == "off" or self._closed or not self._keeps_ranks:
            return None
        if narrows_beyond_project(opts):
            return None
        from cortex.search.hits import KEYWORD_SLOPE

        stems = _query_terms(terms)
        if stems is None:
            return None
        projects = projects_of(opts)
        walled = project_ids(opts)
        wall = list(walled) if walled is not None else None
        scoped = projects if projects is not None and Scope.supported(self._store) else None
        scope = list(projects) if projects is not None else None
        if allowed is not None:
            allowed = np.asarray(allowed, dtype=np.int64)
        if not self._current():
            return None
        index = self._index
        if not hasattr(index, "rank_page"):  # an older extension
            return None
        # keyword._bound over the index's counts: the sum of the terms' IDFs
        if scoped is None:
            rows, dfs = len(index), [index.df(t) for t in stems]
        else:
            names = list(scoped)
            rows = int(index.stats(names)[0])
            dfs = [index.df(t, names) for t in stems]
        bound = sum(_idf(rows, n) for n in dfs)
        for _ in range(3):
            out = index.rank_page(
                terms, pool, len(terms) > 1, bound, KEYWORD_SLOPE, weights, sectors, allowed,
                scope, wall, bool(opts.include_superseded), PREFILTER, NATIVE_MAX_FETCH,
            )  # fmt: skip
            if out is None or not out[0]:
                break
            self._keep_missing(out[0], out[0])
        else:
            return None
        if out is None or not out[2]:
            return None  # FTS5 answers, or no plain-tier hit
        _log.debug(
            "keyword %s of %d terms: in-memory index, %d hits",
            "AND" if out[1] else "OR", len(terms), len(out[2]),
        )  # fmt: skip
        quoted = [quote(t) for t in terms]
        if out[1]:
            return " ".join(quoted), out, list(terms), bound
        found = index.holding(terms, out[2])
        held = [t for t, h in zip(terms, found, strict=True) if h]
        return " OR ".join(quoted), out, held, bound

    def rescore(
        self, words: list[str], ids: list[int], projects: tuple[str, ...] | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """BM25 of the memories among `ids` (sorted) holding any of `words`: their keyword
        score when another leg found them. None when FTS5 must answer."""
        if self._index is None:
            return None
        return self.search(
            words,
            len(ids),
            require_all=False,
            allowed=np.asarray(ids, dtype=np.int64),
            projects=projects,
        )

    @contextlib.contextmanager
    def pinned(self) -> Iterator[None]:
        """Within (on this thread), the index is checked against the change log once:
        the lookups of one search (its keyword leg, the names it checks, the rescoring of
        the other leg's hits, the share of unknown names) then read the same log position
        without a `MAX(seq)` statement each (4.4 per hybrid search before). A write
        committed meanwhile is read by the next search, as one committed just after this
        one's first check always was."""
        pins = self._pins
        depth = getattr(pins, "depth", 0)
        pins.depth = depth + 1
        if depth == 0:
            pins.at = None
        try:
            yield
        finally:
            pins.depth = depth
            if depth == 0:
                pins.at = None

    def _current(self) -> bool:
        """Bring the index up to the log under the lock; False when it cannot answer now."""
        pins = self._pins
        pinned = getattr(pins, "depth", 0) > 0
        if (
            pinned
            and self._index is not None
            and pins.at is not None
            and pins.at[0] is self._index
            and pins.at[1] == self._seq
        ):
            return True  # checked in this pinned scope, and nothing moved it since
        if self._at_log():
            if pinned:
                pins.at = (self._index, self._seq)
            return True
        return False

    def _at_log(self) -> bool:
        """_current without the pin: the index brought up to the log now."""
        if self._index is None:
            if not self._tried_file:
                self._tried_file = True
                loaded = self._load()
                if loaded is not None:
                    self._index, self._seq = loaded
            if self._index is not None:
                pass
            elif self._policy == "on" and self.error is None:
                self._index, self._seq = self._build_or_fail()
                if self._index is not None:
                    self._save(self._index, self._seq)
            elif self._policy == "auto" and self._worker is None and self._size() >= AUTO_MIN:
                self._start_background()
            if self._index is None:
                return False
        # the log's end alone first (one b-tree edge, ~2.5 us less): most searches find
        # the index at it
        top = self._store.query("SELECT COALESCE(MAX(seq), 0) FROM memory_changes")[0][0]
        if top == self._seq:
            return True
        top, oldest = self._log_bounds()
        if top == self._seq:
            return True
        if self._seq + 1 < oldest or (self._policy == "auto" and top - self._seq > SYNC_BACKLOG):
            # The log no longer reaches back to the index, or the backlog is long.
            self._index = None
            if self._policy == "on":
                self._index, self._seq = self._build_or_fail()
                return self._index is not None
            if self._policy == "auto":
                self._start_background()
            return False
        # their ranking columns may have changed too
        self._forget_ranks(self._replay(self._index, self._seq, top))
        self._seq = top
        return True

    # ------------------------------------------------------------------ the saved file

    def _load(self, *, any_size: bool = False) -> tuple[Any, int] | None:
        """The saved index brought up to the log, or None when there is no usable file
        (missing, damaged, of another database or too far behind: a build replaces it)."""
        if self._policy == "off":
            return None
        if self._policy == "saved" and not any_size and self._size() < SAVED_MIN:
            return None
        try:
            from cortex._native import KeywordIndex
        except ImportError:
            return None
        try:
            stamp = self._stamp_in_store()
            if stamp is not None and stamp != self._stamp_of_file():
                return None  # not the file this database saved last: another's, or older
            # (no stamp: a database no cortex with stamps has saved an index for; its file
            # is trusted as before, on the other checks, until the next save stamps it,
            # so that an upgrade does not drop a CLI user's saved index)
            # Mapped, not read into a bytes object first: a copy of 0.3 GB at 1M memories.
            index, seq = KeywordIndex.load(self.file)
            top, oldest = self._log_bounds()
            if seq > top or (top > seq and (seq + 1 < oldest or top - seq > SYNC_BACKLOG)):
                return None  # of another database, or the log no longer reaches it
            self._replay(index, seq, top)
            self._check(index, top)
        except CortexError:  # missing, damaged, or its totals are not FTS5's: rebuilt
            return None
        self._saved_seq = seq
        return index, top

    def _save(self, index: Any, seq: int) -> bool:
        """Write `index` (at log position `seq`) to the file, atomically; False when the
        store is read-only or small, or the folder cannot be written (nothing is lost:
        the next process builds instead)."""
        if self._store.read_only or len(index) < AUTO_MIN:
            return False
        from cortex.semantic import _replace, index_dir

        try:
            folder = index_dir(self._store.path, create=True)
            tmp = folder / f"{FILE_NAME}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
            try:
                data = index.to_bytes(seq)
                with open(tmp, "wb") as f:
                    f.write(data)
                # The database names the file it trusts (its checksum) before the file is
                # in place: a crash between the two leaves them disagreeing (a rebuild).
                with self._store.transaction() as tx:
                    tx.execute(
                        "INSERT INTO meta(key, value) VALUES (?, ?)"
                        " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                        (STAMP_KEY, _stamp(data[-8:])),
                    )
                _replace(tmp, folder / FILE_NAME)
            finally:
                with contextlib.suppress(OSError):
                    tmp.unlink()
        except (OSError, CortexError):
            return False
        self._saved_seq = seq
        return True

    def _stamp_of_file(self) -> str | None:
        """The stamp of the saved file (its checksum, the last eight bytes): None when
        there is none to read."""
        try:
            with open(self.file, "rb") as f:
                f.seek(-8, os.SEEK_END)
                return _stamp(f.read(8))
        except OSError:
            return None

    def _stamp_in_store(self) -> str | None:
        """The stamp of the file this database saved last (meta STAMP_KEY), if any."""
        try:
            rows = self._store.query("SELECT value FROM meta WHERE key = ?", (STAMP_KEY,))
        except CortexError:
            return None
        return str(rows[0][0]) if rows else None

    # ------------------------------------------------------------------ building

    def _log_bounds(self) -> tuple[int, int]:
        # Two subqueries: SQLite reads MIN or MAX alone off the rowid b-tree's ends, but
        # scans the whole table for both in one SELECT.
        top, oldest = self._store.query(
            "SELECT COALESCE((SELECT MAX(seq) FROM memory_changes), 0),"
            " COALESCE((SELECT MIN(seq) FROM memory_changes), 0)"
        )[0]
        return int(top), int(oldest)

    def _build(self) -> tuple[Any, int]:
        """A fresh index of every live memory, and the log position it reflects (read
        first: whatever changes while the rows are read is replayed afterwards)."""
        from cortex._native import KeywordIndex

        seq, _ = self._log_bounds()
        index = KeywordIndex()
        fill(
            index,
            lambda last: self._store.query(
                "SELECT id, content, ifnull(project_id, char(0)) FROM memories"
                " WHERE deleted_at IS NULL AND id > ? ORDER BY id LIMIT ?",
                (last, _BATCH),
            ),
            lambda: self._closed,
        )
        return index, seq

    def _build_or_fail(self) -> tuple[Any, int]:
        try:
            index, seq = self._build()
            top, _ = self._log_bounds()
            self._replay(index, seq, top)
            self._check(index, top)
            return index, top
        except (CortexError, ImportError, MemoryError) as exc:
            self.error = f"the in-memory keyword index is not used ({exc})"
            return None, 0

    def _check(self, index: Any, seq: int) -> None:
        """Compare the index with FTS5's own totals (rows, tokens) at log position `seq`:
        a tokenizer that disagrees with this SQLite's FTS5 in any document changes the
        token count, and then FTS5 keeps answering. Skipped when a write lands meanwhile
        (the totals would be of another moment)."""
        conn = self._store.conn
        try:
            conn.execute("BEGIN")
            try:
                top = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM memory_changes").fetchone()
                row = conn.execute("SELECT block FROM memories_fts_data WHERE id = 1").fetchone()
            finally:
                conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"{self._store.path}: {exc}") from None
        if top[0] != seq:
            return
        rows, tokens = _fts5_totals(row[0]) if row else (0, 0)
        if (rows, tokens) != (len(index), index.total_tokens):
            raise IndexFormatError(
                f"it counts {len(index)} memories and {index.total_tokens} tokens where FTS5"
                f" counts {rows} and {tokens}; FTS5 answers every keyword search"
            )

    def _replay(self, index: Any, after: int, upto: int) -> list[int]:
        """Apply the changes logged after `after` up to `upto`; returns the memories named."""
        changed = [
            int(i)
            for (i,) in self._store.query(
                "SELECT DISTINCT memory_id FROM memory_changes WHERE seq > ? AND seq <= ?",
                (after, upto),
            )
        ]
        live_ids: list[int] = []
        texts: list[str] = []
        projects: list[str] = []
        for start in range(0, len(changed), 500):
            part = changed[start : start + 500]
            marks = ",".join("?" * len(part))
            for i, content, project in self._store.query(
                "SELECT id, content, ifnull(project_id, char(0)) FROM memories"
                f" WHERE id IN ({marks}) AND deleted_at IS NULL",
                part,
            ):
                live_ids.append(int(i))
                texts.append(content)
                projects.append(project)
        gone = set(changed) - set(live_ids)
        if gone:
            index.remove(np.fromiter(sorted(gone), np.int64, len(gone)))
        if live_ids:
            index.add(np.asarray(live_ids, dtype=np.int64), texts, projects)
        return changed

    def _start_background(self) -> None:
        if self._worker is not None and self._worker.is_alive():
            return

        def run() -> None:
            built, seq = self._build_or_fail()
            if built is None or self._closed:
                return
            with self._lock:  # what changed since the build, then it answers
                if self._closed:
                    return
                try:
                    top, _ = self._log_bounds()
                    self._replay(built, seq, top)
                except CortexError as exc:
                    self.error = f"the in-memory keyword index could not catch up ({exc})"
                    return
                self._index, self._seq = built, top
            # Outside the lock: searches may replay later changes into `built` meanwhile,
            # which the file then holds too (replaying them again on load is harmless).
            self._save(built, top)

        self._worker = threading.Thread(target=run, name="cortex-keyword-index", daemon=True)
        self._worker.start()


def _stamp(checksum: bytes) -> str:
    return checksum.hex()


def fill(
    index: Any, read: Callable[[int], Sequence[Sequence[Any]]], stop: Callable[[], bool]
) -> None:
    """Add to `index` every live memory `read(after)` returns, batch after batch: the
    (id, content, project) rows of ids past `after`, ascending, until a batch is empty or
    `stop()` (the backend closing). Both backends build their in-memory index so."""
    last = 0
    while not stop():
        rows = read(last)
        if not rows:
            return
        index.add(
            np.fromiter((r[0] for r in rows), np.int64, len(rows)),
            [r[1] for r in rows],
            [r[2] for r in rows],
        )
        last = int(rows[-1][0])


def _fts5_totals(block: bytes) -> tuple[int, int]:
    """(rows, tokens) of FTS5's averages record (``<table>_data`` id 1): the row count,
    then the token count of each column, as SQLite varints (we have one column)."""
    values: list[int] = []
    i = 0
    try:
        while len(values) < 2:
            value = 0
            for n in range(9):
                byte = block[i]
                i += 1
                if n == 8:
                    value = (value << 8) | byte
                    break
                value = (value << 7) | (byte & 0x7F)
                if byte < 0x80:
                    break
            values.append(value)
    except IndexError:  # a truncated record: report nothing, so the check fails
        return (-1, -1)
    return values[0], values[1]
