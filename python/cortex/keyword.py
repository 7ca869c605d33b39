"""Keyword search: BM25 over FTS5, in a cascade of tiers that never raises a raw SQLite error.

1. **FTS5, unicode61 + porter** for text without CJK characters. A query written in FTS5
   syntax (``OR``, ``NOT``, ``AND``, ``NEAR``, ``"phrase"``, ``prefix*``, parentheses) runs as
   written; when SQLite rejects it, it is retried as quoted terms and the result says so.
   Plain text runs as quoted terms joined by implicit AND; when no memory holds every term,
   by OR (ranked by BM25, so memories holding more of the terms come first); when still
   nothing matches, by word prefix (``"auth"*`` finds "authentication").
2. **FTS5 trigram** for queries with CJK characters: CJK runs and ASCII words joined by AND.
   A trigram index cannot match a term shorter than three characters (most Chinese words
   have two), so those terms are matched with LIKE inside the same query instead of being
   dropped; this is why multi-term Chinese queries return hits here.
3. **LIKE** when the tiers above find nothing or FTS5 is missing: CJK runs (as bigrams when
   longer than two characters) and ASCII words of three or more characters, each matched
   independently, ranked by how many of them a memory holds.

Each hit keeps its raw measure (``-bm25()``, or the number of terms a LIKE match holds)
and the result carries the query's ``bound``: the sum of the IDFs of its phrases as FTS5
weighs them (or the number of LIKE terms), so that ``raw / bound`` is the share of the
query a memory holds whatever the store's size (cortex.search.hits calibrates it).
``Hit.score`` keeps the older absolute map ``x / (x + 10)`` for callers that read it.

This module is the SQLite backend's keyword retriever: the FTS5 statements live here
(every filter comes from :mod:`cortex.filters`, every value is a bound parameter).

**A project is a wall** (issue 14): FTS5's ``bm25()`` takes N, avgdl and each phrase's
document frequency from the whole table, so other projects' memories would change a
project-filtered ranking. A search whose filters name projects (``filters.projects_of``)
is scored by :class:`Scope` instead: N and the token total from ``keyword_totals`` (kept
by triggers), df counted over the projects' memories, and each phrase's frequency in a
memory read back from FTS5's own per-phrase ``bm25()`` (which it determines exactly);
the same expression as FTS5's, so a project alone in a store scores exactly as FTS5 does.
CJK (trigram) queries too, their token counts read off the trigram table's size records.
"""

from __future__ import annotations

import functools
import json
import math
import re
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from cortex import filters
from cortex.errors import StorageError
from cortex.filters import projects_of
from cortex.log import get_logger
from cortex.options import Mode, Options, OrderBy
from cortex.ranking import RANK_COLUMNS, RankInfo
from cortex.search.plan import DROPPED, MAX_QUERY_CHARS, STOPWORDS
from cortex.search.plan import clean as _clean
from cortex.store import Store, _is_cjk, has_cjk

if TYPE_CHECKING:
    from cortex.keyword_index import KeywordIndexer

__all__ = [
    "MAX_QUERY_CHARS",
    "MAX_TERMS",
    "Hit",
    "KeywordResult",
    "Marker",
    "Scope",
    "bm25_to_score",
    "count",
    "highlighter",
    "positive_phrases",
    "rescore",
    "search",
    "search_fts",
    "share",
    "snippets",
    "text_snippet",
]

#: At most this many distinct terms are searched (the first ones of the query).
MAX_TERMS = 32

MARK_OPEN, MARK_CLOSE, ELLIPSIS = "<mark>", "</mark>", "…"

# FTS5 syntax a user may write on purpose. Operators are case-sensitive in FTS5.
_log = get_logger(__name__)

_SYNTAX = re.compile(r'["*()^]|\b(?:AND|OR|NOT|NEAR)\b|\w:')
# A word, combining marks included ("e\u0301clair" is one word, as FTS5 reads it).
_WORD = re.compile(r"\w[\w\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff]*")


class Hit(NamedTuple):  # a tuple: built for every candidate of every search
    memory_id: int
    score: float  # in [0, 1)
    raw: float  # -bm25 for FTS tiers, the number of matched terms for LIKE
    info: RankInfo  # what ranking needs of the memory, read in the same statement


@dataclass(slots=True)
class KeywordResult:
    hits: list[Hit] = field(default_factory=list)
    tier: str = "none"  # fts | prefix | trigram | like | none
    expression: str | None = None  # the FTS5 expression that ran (for snippets)
    rewritten: str | None = None  # set when the expression is not the query as typed
    notices: list[str] = field(default_factory=list)
    terms: list[str] = field(default_factory=list)  # for snippets outside FTS5
    # An answer, even if empty: a valid FTS5 expression the user wrote, or a query with no
    # words. The LIKE fallback is for plain text that matched nothing, not for these.
    final: bool = False
    # The most `raw` a memory holding each phrase once at average length gets: the sum of
    # the phrases' IDFs as FTS5 computes them (LIKE tiers: the number of terms).
    bound: float = 0.0
    # How to score other memories against this query (the FTS5 table and expression:
    # the OR of the terms for plain text, the expression itself for FTS5 syntax).
    rescore_table: str | None = None
    rescore_expression: str | None = None
    # The projects the statistics are those of (None: the whole table, FTS5's bm25()).
    scope: Scope | None = None
    # Terms a memory under the filters holds all of (the AND of the plain terms matched),
    # so each is a known word (suggestions need not look them up again).
    held: list[str] = field(default_factory=list)
    # The weighted substring tier's terms, their IDFs and the mean length they were
    # weighed against: how to score other memories against this query there.
    weights: tuple[tuple[str, ...], tuple[float, ...], float] | None = None


#: BM25 value that maps to a keyword score of 0.5. Chosen on SciFact's train split
#: (benches/tune_fusion.py): a flatter map than x / (1 + x) keeps strong and weak matches
#: apart, which lifts the linear fusion; nDCG@10 moved 0.7057 -> 0.7340 at alpha 0.5.
BM25_HALF = 10.0


def bm25_to_score(bm25: float) -> float:
    """FTS5's bm25() (<= 0, lower is better) mapped onto [0, 1): ``x / (x + 10)``."""
    x = max(0.0, -bm25)
    return x / (x + BM25_HALF)


def quote(term: str) -> str:
    """One FTS5 string token: quoted, inner quotes doubled."""
    return '"' + term.replace('"', '""') + '"'


clean = _clean

_OPERATORS = frozenset({"AND", "OR", "NOT", "NEAR"})
__all__ += ["STOPWORDS", "clean"]


def _terms(query: str) -> list[str]:
    """The distinct words of `query`, lowercased, without FTS5 operator words."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(query):
        if word in _OPERATORS or not word.strip("_"):  # "_" alone is no token to FTS5
            continue
        key = word.lower()
        if key not in seen:
            seen[key] = None
        if len(seen) >= MAX_TERMS:
            break
    return list(seen)


def _order_sql(opts: Options, rank: str | None = "r") -> str:
    """ORDER BY terms: `rank` is the relevance column of the statement (best first)."""
    relevance = f"{rank}, m.id" if rank else "m.id"
    if opts.order_by is OrderBy.RECENCY:
        return "m.created_at DESC, m.id DESC"
    if opts.order_by is OrderBy.CONFIDENCE:
        return f"m.confidence DESC, {relevance}"
    return relevance


#: How many FTS5 matches, best by BM25, the relevance-ordered statement reads before it
#: joins and filters them, as a multiple of the pool. Sorting every match through the join
#: cost 1.6x more at 100k memories (benches/e2e.md); when the filters leave fewer than
#: the pool of these, the statement runs again over every match, so nothing is lost.
PREFILTER = 4


def _fts(
    store: Store,
    table: str,
    expression: str,
    opts: Options,
    pool: int,
    extra: str = "",
    scope: Scope | None = None,
    *,
    probe: bool = False,
) -> list[Hit]:
    """Run one MATCH against `table` (a fixed name, never user text) under the filters;
    with a `scope`, ranked by the BM25 of its projects' statistics. `probe`: any one
    match, unranked (see _first)."""
    if probe:
        return _first(store, table, expression, opts)
    if scope is not None and table in _SCOPED_TABLES:
        return scope.search(table, expression, opts, pool)
    predicate, params = filters.where(opts)
    if opts.order_by is OrderBy.RELEVANCE and not extra:
        # The FTS top first (ordered by the same key as the final order: bm25, then id),
        # then the join and the filters over those rows only.
        inner = pool * PREFILTER
        sql = (
            f"WITH f AS (SELECT rowid, bm25({table}) AS r FROM {table} WHERE {table} MATCH ?"
            "  ORDER BY r, rowid LIMIT ?)"
            f" SELECT m.id, f.r, {RANK_COLUMNS}, (SELECT COUNT(*) FROM f)"
            f" FROM f JOIN memories m ON m.id = f.rowid WHERE {predicate}"
            " ORDER BY f.r, m.id LIMIT ?"
        )
        rows = store.conn.execute(sql, [expression, inner, *params, pool]).fetchall()
        # Complete when the pool is full, or when the FTS top held every match.
        if len(rows) == pool or (rows and rows[0][-1] < inner):
            return [Hit(int(i), bm25_to_score(r), -r, RankInfo(*rest[:-1])) for i, r, *rest in rows]
        if not rows and _matches(store, table, expression, inner) < inner:
            return []
    sql = (
        f"SELECT m.id, bm25({table}) AS r, {RANK_COLUMNS}"
        f" FROM {table} JOIN memories m ON m.id = {table}.rowid"
        f" WHERE {table} MATCH ? AND {predicate}{extra} ORDER BY {_order_sql(opts)} LIMIT ?"
    )
    rows = store.conn.execute(sql, [expression, *params, pool]).fetchall()
    return [Hit(int(i), bm25_to_score(r), -r, RankInfo(*rest)) for i, r, *rest in rows]


def _first(store: Store, table: str, expression: str, opts: Options) -> list[Hit]:
    """One memory under `opts`'s filters that `expression` matches in `table`, unranked
    (score 0): whether any memory holds a word (`holds`) does not need the BM25 of every
    match, which is what ranking them costs (~5 ms for a common word at 100k)."""
    predicate, params = filters.where(opts)
    row = store.conn.execute(
        f"SELECT m.id, {RANK_COLUMNS} FROM {table} CROSS JOIN memories m"
        f" ON m.id = {table}.rowid WHERE {table} MATCH ? AND {predicate} LIMIT 1",
        [expression, *params],
    ).fetchone()
    return [] if row is None else [Hit(int(row[0]), 0.0, 0.0, RankInfo(*row[1:]))]


def count(store: Store, expression: str, opts: Options, cap: int) -> int:
    """How many memories under `opts`'s filters the FTS5 `expression` matches in the
    stemmed index, counting no further than `cap` (no ranking: what `len(search(...).hits)`
    of a quoted word says, at the price of reading `cap` matches)."""
    predicate, params = filters.where(opts)
    sql = (
        "SELECT COUNT(*) FROM (SELECT 1 FROM memories_fts CROSS JOIN memories m"
        f" ON m.id = memories_fts.rowid WHERE memories_fts MATCH ? AND {predicate} LIMIT ?)"
    )
    try:
        return int(store.conn.execute(sql, [expression, *params, cap]).fetchone()[0])
    except sqlite3.DatabaseError as exc:
        raise StorageError(f"{store.path}: {exc}") from None


def _matches(store: Store, table: str, expression: str, cap: int) -> int:
    """How many rows match, counting no further than `cap` (cheap: no scoring)."""
    sql = f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} WHERE {table} MATCH ? LIMIT ?)"
    return int(store.conn.execute(sql, [expression, cap]).fetchone()[0])


def search_fts(store: Store, query: str, opts: Options | None = None, pool: int = 20) -> list[Hit]:
    """Seed 000's `searchFTS`: the keyword tiers alone; an empty query finds nothing."""
    return search(store, query, opts or Options(mode=Mode.KEYWORD), pool).hits


def holds(
    store: Store,
    word: str,
    opts: Options,
    *,
    native: KeywordIndexer | None = None,
    allowed: Sequence[int] | None = None,
) -> bool:
    """Whether a memory under `opts`'s filters holds `word` as a word or a word's prefix
    (the index tiers of a search, never its substring scan: this runs on the hot path of
    a hybrid search, and LIKE '%word%' reads every row). CJK text asks the CJK tier
    (:func:`_cjk`: the word as a trigram phrase, or a short one as a substring), not the
    last tier, whose bigrams find a word no memory holds in memories holding its pieces
    ("シール解除": "シー" and "ール" are in other words)."""
    text = clean(word)
    if not text:
        return False
    scope = Scope.of(store, opts)
    if has_cjk(text):
        try:
            return bool(_cjk(store, text, opts, 1, scope).hits)
        except sqlite3.Error:
            return True  # not an answer either way: never discount on a failed check
    try:
        found = _latin(store, text, opts, 1, "memories_fts", native, allowed, scope, probe=True)
    except sqlite3.Error:
        return True  # not an answer either way: never discount on a failed check
    return bool(found.hits)


def share(
    store: Store, found: KeywordResult, words: Sequence[str], native: KeywordIndexer | None = None
) -> float | None:
    """The share of the query's keyword weight (the sum of its terms' IDFs: `found`'s
    bound, or when nothing matched, the same sum over `found.terms`) that the terms of
    `words` carry, under the statistics `found` was scored with (its table and projects).
    None when the query has no weight to share."""
    table = found.rescore_table or "memories_fts"
    phrases = [quote(t) for w in words for t in _terms(w)]
    try:
        bound = found.bound
        if bound <= 0:
            bound = _bound(store, table, [quote(t) for t in found.terms], native, found.scope)
        if bound <= 0:
            return None
        weight = _bound(store, table, phrases, native, found.scope)
    except sqlite3.Error:
        return None
    return min(1.0, weight / bound)


def search(
    store: Store,
    query: str,
    opts: Options,
    pool: int,
    *,
    stemmed: bool = True,
    native: KeywordIndexer | None = None,
    allowed: Sequence[int] | None = None,
) -> KeywordResult:
    """Up to `pool` keyword hits for `query` under `opts`'s filters, best first.

    `stemmed=False` runs word queries on the unstemmed index too (for measurements).
    `native` answers the plain-text tiers from memory when it can (same hits as FTS5).
    `allowed`: the ids `opts`'s filters admit, sorted, when the caller already has them
    (the in-memory index then ranks only those, in one pass).
    """
    text = clean(query)
    if not text:
        return KeywordResult(notices=["the query is empty"])
    started = time.perf_counter()
    scope = Scope.of(store, opts)
    try:
        if has_cjk(text):
            result = _cjk(store, text, opts, pool, scope)
        else:
            words = "memories_fts" if stemmed else EXACT
            result = _latin(
                store, text, opts, pool, words, native if stemmed else None, allowed, scope
            )
        result.scope = scope
    except sqlite3.OperationalError as exc:
        if "no such module" not in str(exc) and "no such table" not in str(exc):
            raise StorageError(f"{store.path}: {exc}") from None
        result = KeywordResult(notices=[f"full-text index unavailable ({exc}); using LIKE"])
    except sqlite3.DatabaseError as exc:
        raise StorageError(f"{store.path}: {exc}") from None
    _log.debug(
        "keyword tier=%s hits=%d in %.1fms", result.tier, len(result.hits),
        (time.perf_counter() - started) * 1000,
    )  # fmt: skip
    if not result.hits and not result.final:
        fallback = _like(store, text, opts, pool, indexed=has_cjk(text))
        _log.debug("keyword tier=like hits=%d (nothing matched above)", len(fallback.hits))
        if fallback.hits:
            fallback.notices = [
                *result.notices,
                "no full-text match; showing memories that contain the terms as substrings",
            ]
            return fallback
    return result


EXACT = "memories_exact"


def _idf(rows: int, hits: int) -> float:
    """FTS5's IDF of a phrase found in `hits` of `rows` rows, clamp included. The two counts
    are read apart, so a write in between may leave `hits` above `rows`: it counts as all."""
    hits = min(max(hits, 0), rows)
    idf = math.log((rows - hits + 0.5) / (hits + 0.5)) if rows > 0 else 0.0
    return idf if idf > 0.0 else 1e-6


def _rows(store: Store, table: str) -> int:
    """The rows FTS5 counts in `table` (its averages record: what bm25() uses). `table`
    names one of the fixed FTS5 tables (an identifier cannot be a bound parameter)."""
    from cortex.keyword_index import _fts5_totals

    if table not in _SCOPED_TABLES:
        raise ValueError(f"not a full-text table of cortex: {table!r}")
    row = store.conn.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()
    return _fts5_totals(row[0])[0] if row else 0


def _bound(
    store: Store,
    table: str,
    phrases: Sequence[str],
    native: KeywordIndexer | None = None,
    scope: Scope | None = None,
) -> float:
    """The sum of the IDFs of `phrases` (FTS5 expressions of one phrase each) in `table`:
    the BM25 of a memory holding each once at average length. Document frequencies come
    from the in-memory index when it holds `table`'s twin, else from FTS5 (a count);
    with a `scope`, over its projects' memories only."""
    phrases = list(dict.fromkeys(p for p in phrases if p))
    if not phrases:
        return 0.0
    projects = scope.projects if scope is not None else None
    if native is not None and table == "memories_fts":
        found = native.df([p.strip('"').replace('""', '"') for p in phrases], projects)
        if found is not None:
            rows, dfs = found
            return sum(_idf(rows, n) for n in dfs)
    if scope is not None and table in _SCOPED_TABLES:
        rows = scope.totals(table)[0]
        total = 0.0
        for phrase in phrases:
            try:
                n = scope.df(table, phrase)
            except sqlite3.OperationalError:
                continue
            total += _idf(rows, n)
        return total
    rows = _rows(store, table)
    total = 0.0
    for phrase in phrases:
        try:
            n = _matches(store, table, phrase, rows + 1)
        except sqlite3.OperationalError:
            continue  # a fragment FTS5 rejects alone (inside NEAR, say) weighs nothing
        total += _idf(rows, n)
    return total


TRIGRAM = "memories_trigram"
#: The FTS5 tables a Scope ranks. The word tables count every token as memories.tokens
#: does (the Porter stemmer changes tokens, not their number), so keyword_totals serves
#: both; the trigram table's counts are read off its own size records.
_SCOPED_TABLES = frozenset({"memories_fts", EXACT, TRIGRAM})
#: FTS5's bm25() parameters.
_K1, _B = 1.2, 0.75


class Scope:
    """The BM25 statistics of a set of projects, for FTS5 searches filtered to them.

    N and the token total come from ``keyword_totals``; a phrase's document frequency is
    the number of the projects' memories it matches. A memory's frequency of a phrase is
    read back from FTS5's ``bm25()`` of the phrase alone: with the table's N, avgdl and
    the phrase's df known, and the memory's length in ``memories.tokens``, that score
    determines the (integer) frequency exactly. Scores then follow FTS5's expression term
    for term, phrase by phrase in query order, over the projects' statistics. One Scope
    serves one search: what it reads is kept for the search's tiers and rescoring.
    """

    def __init__(self, store: Store, projects: Sequence[str]) -> None:
        self.store = store
        self.projects: tuple[str, ...] = tuple(projects)
        self._totals: dict[str, tuple[int, int]] = {}
        # (table, phrase) -> {memory id: frequency}; (table, memory id) -> token count
        self._phrases: dict[tuple[str, str], dict[int, int]] = {}
        self._lengths: dict[tuple[str, int], int] = {}

    @classmethod
    def of(cls, store: Store, opts: Options) -> Scope | None:
        """The statistics a search under `opts` scores with: its projects' (None: every
        project's, or a file without per-project totals: the table's, FTS5's bm25())."""
        projects = projects_of(opts)
        return cls(store, projects) if projects is not None and cls.supported(store) else None

    @staticmethod
    def supported(store: Store) -> bool:
        """Whether the database keeps per-project totals (an older file opened read-only
        does not: its searches keep the table's statistics)."""
        from cortex.store import _KEYWORD_TOTALS_VERSION

        return store.schema_version() >= _KEYWORD_TOTALS_VERSION

    def totals(self, table: str = "memories_fts") -> tuple[int, int]:
        """(live memories, their tokens) of the projects in `table`."""
        key = TRIGRAM if table == TRIGRAM else "memories_fts"
        if key not in self._totals:
            if key == TRIGRAM:
                marks = ",".join("?" * len(self.projects))
                row = self.store.conn.execute(
                    f"SELECT COUNT(*), COALESCE(SUM({_length_sql(TRIGRAM)}), 0) FROM memories m"
                    f" WHERE m.deleted_at IS NULL AND m.has_cjk AND m.project_id IN ({marks})",
                    list(self.projects),
                ).fetchone()
                self._totals[key] = (int(row[0]), int(row[1]))
            else:
                self._totals[key] = self.store.keyword_totals(self.projects)
        return self._totals[key]

    def df(self, table: str, phrase: str) -> int:
        """The projects' memories that `phrase` (one FTS5 phrase) matches in `table`."""
        return len(self._frequencies(table, phrase))

    def _frequencies(self, table: str, phrase: str) -> dict[int, int]:
        key = (table, phrase)
        found = self._phrases.get(key)
        if found is not None:
            return found
        marks = ",".join("?" * len(self.projects))
        # The table's totals and the phrase's df, which bm25() used, are read in the same
        # statement (one snapshot: a write landing between two statements cannot skew the
        # frequencies solved for).
        rows = self.store.conn.execute(
            f"SELECT m.id, -bm25({table}), {_length_sql(table)},"
            f" (SELECT block FROM {table}_data WHERE id = 1),"
            f" (SELECT COUNT(*) FROM {table} WHERE {table} MATCH ?) FROM {table}"
            f" CROSS JOIN memories m ON m.id = {table}.rowid WHERE {table} MATCH ?"
            f" AND m.project_id IN ({marks})",
            [phrase, phrase, *self.projects],
        ).fetchall()
        out: dict[int, int] = {}
        if rows:
            from cortex.keyword_index import _fts5_totals

            n_rows, n_tokens = _fts5_totals(rows[0][3]) if rows[0][3] else (0, 0)
            idf = _idf(n_rows, int(rows[0][4]))
            avgdl = n_tokens / n_rows if n_rows else 1.0
            for memory_id, score, tokens, _, _ in rows:
                # score = idf * tf (k1 + 1) / (tf + k1 K): solve for tf.
                r = float(score) / idf
                k = _K1 * (1 - _B + _B * int(tokens) / avgdl)
                tf = round(r * k / (_K1 + 1.0 - r)) if r < _K1 + 1.0 else 1
                out[int(memory_id)] = max(tf, 1)
                self._lengths[table, int(memory_id)] = int(tokens)
        self._phrases[key] = out
        return out

    def scores(self, table: str, phrases: Sequence[str], ids: Sequence[int]) -> dict[int, float]:
        """BM25 (> 0, FTS5's expression over the projects' statistics) of each of `ids`
        holding any of `phrases` (in query order; a repeated phrase counts again)."""
        n, tokens = self.totals(table)
        if n <= 0:
            return {}
        avgdl = tokens / n
        weights: dict[str, tuple[float, dict[int, int]]] = {}
        for phrase in phrases:
            if phrase in weights:
                continue
            try:
                freqs = self._frequencies(table, phrase)
            except sqlite3.OperationalError:  # a fragment FTS5 rejects alone (in NEAR)
                freqs = {}
            weights[phrase] = (_idf(n, len(freqs)), freqs)
        out: dict[int, float] = {}
        for memory_id in ids:
            score, held = 0.0, False
            for phrase in phrases:
                idf, freqs = weights[phrase]
                tf = freqs.get(memory_id)
                if tf:
                    held = True
                    dl = self._lengths[table, memory_id]
                    score += idf * ((tf * (_K1 + 1.0)) / (tf + _K1 * (1 - _B + _B * dl / avgdl)))
            if held:
                out[memory_id] = score
        return out

    def search(
        self,
        table: str,
        expression: str,
        opts: Options,
        pool: int,
        extra: str = "",
        extra_params: Sequence[str] = (),
        require_all: bool | None = None,
    ) -> list[Hit]:
        """The top `pool` of the memories matching `expression` under `opts`'s filters
        (and `extra`, a fixed SQL condition on ``m`` with `extra_params`), in `opts`'s
        order, ranked with the projects' statistics. `require_all`: `expression` is the
        plain AND (True) or OR (False) of its phrases, whose matches in the projects the
        scoring reads anyway: the memories to rank are taken from those."""
        if require_all is not None and not extra and opts.order_by is OrderBy.RELEVANCE:
            return self._search_plain(table, expression, opts, pool, require_all)
        predicate, params = filters.where(opts)
        rows = self.store.conn.execute(
            f"SELECT m.id, m.created_at, m.confidence FROM {table}"
            f" CROSS JOIN memories m ON m.id = {table}.rowid WHERE {table} MATCH ?"
            f" AND {predicate}{extra}",
            [expression, *params, *extra_params],
        ).fetchall()
        if not rows:
            return []
        phrases = positive_phrases(expression, initial=True)
        scores = self.scores(table, phrases, [int(r[0]) for r in rows])
        ranked = [(int(i), scores.get(int(i), 0.0), c, conf) for i, c, conf in rows]
        if opts.order_by is OrderBy.RECENCY:
            ranked.sort(key=lambda x: (-x[2], -x[0]))
        elif opts.order_by is OrderBy.CONFIDENCE:
            ranked.sort(key=lambda x: (-x[3], -x[1], x[0]))
        else:
            ranked.sort(key=lambda x: (-x[1], x[0]))
        top = ranked[:pool]
        info = filters.admitted(self.store, [x[0] for x in top], opts)
        return [
            Hit(i, bm25_to_score(-score), score, info[i]) for i, score, _, _ in top if i in info
        ]

    def _search_plain(
        self, table: str, expression: str, opts: Options, pool: int, require_all: bool
    ) -> list[Hit]:
        """`search` of a plain AND / OR in relevance order: the union (or intersection)
        of the phrases' matches in the projects, best first, then the filters over
        those rows only, a chunk at a time until the pool is full."""
        phrases = positive_phrases(expression, initial=True)
        found = [set(self._frequencies(table, p)) for p in dict.fromkeys(phrases)]
        if not found:
            return []
        ids = set.intersection(*found) if require_all else set.union(*found)
        scores = self.scores(table, phrases, list(ids))
        ranked = sorted(scores.items(), key=lambda x: (-x[1], x[0]))
        hits: list[Hit] = []
        step = max(pool * PREFILTER, 256)
        for start in range(0, len(ranked), step):
            part = ranked[start : start + step]
            info = filters.admitted(self.store, [i for i, _ in part], opts)
            hits += [Hit(i, bm25_to_score(-r), r, info[i]) for i, r in part if i in info]
            if len(hits) >= pool:
                break
        return hits[:pool]

    def rescore(self, table: str, expression: str, ids: Sequence[int]) -> dict[int, float]:
        """BM25 over the projects' statistics of the memories among `ids` that
        `expression` matches (the caller's filters admitted them already)."""
        matched: list[int] = []
        for start in range(0, len(ids), 500):
            part = list(ids[start : start + 500])
            marks = ",".join("?" * len(part))
            matched += [
                int(r[0])
                for r in self.store.conn.execute(
                    f"SELECT rowid FROM {table} WHERE {table} MATCH ? AND rowid IN ({marks})",
                    [expression, *part],
                )
            ]
        return self.scores(table, positive_phrases(expression, initial=True), matched)


def _length_sql(table: str) -> str:
    """SQL: the token count of memory ``m`` in `table` (as bm25() reads it)."""
    if table == TRIGRAM:
        from cortex.store import _tokens_sql

        return _tokens_sql("m.id", f"{TRIGRAM}_docsize")
    return "m.tokens"


_NOT_CLAUSE = re.compile(r'\bNOT\s+(?:"(?:[^"]|"")*"\*?|\([^)]*\)|\S+)')
_PHRASE = re.compile(r'"(?:[^"]|"")*"\*?|[^\s()",]+')


_QUOTED = re.compile(r'"((?:[^"]|"")*)"')
_BARE = re.compile(r'[^\s()"*^]+')


def constraints(text: str) -> tuple[list[str], list[str]]:
    """What a query in FTS5 syntax excludes (the text of each NOT's operand, every word of
    a parenthesised one) and the phrases it requires (quoted, outside any NOT; none when
    the query holds an OR, which makes each optional), as plain text. The CJK tiers rank
    by trigrams and substrings, which read no operator: the search checks its candidates
    against these instead (Store.holding). Reading a NOT (a OR b) as excluding each word
    is stricter than FTS5's "(a AND b)"-free reading only where a and b differ: a result
    dropped, never one that holds what the query excludes."""
    excluded: list[str] = []
    for clause in _NOT_CLAUSE.findall(text):
        operand = clause[3:].strip()
        quoted = _QUOTED.findall(operand)
        if quoted:
            excluded += [q.replace('""', '"') for q in quoted]
            continue
        for word in _BARE.findall(operand):
            word = word.split(":", 1)[1] if ":" in word else word  # a column filter
            if word and word not in _OPERATORS:
                excluded.append(word)
    rest = _NOT_CLAUSE.sub(" ", text)
    phrases = [] if re.search(r"\bOR\b", rest) else _QUOTED.findall(rest)
    return (
        [e for e in dict.fromkeys(excluded) if e.strip()],
        [p.replace('""', '"') for p in dict.fromkeys(phrases) if p.strip()],
    )


def positive_phrases(expression: str, *, initial: bool = False) -> list[str]:
    """The phrases of an FTS5 expression that add to BM25: every phrase and word
    except operators, column names and what a NOT excludes. `initial`: keep a phrase's
    ``^`` (first token only), which changes what it matches."""
    out: list[str] = []
    for token in _PHRASE.findall(_NOT_CLAUSE.sub(" ", expression)):
        if token in _OPERATORS or token.startswith("NEAR"):
            continue
        if not token.startswith('"') and ":" in token:
            token = token.split(":", 1)[1]
        if not initial:
            token = token.lstrip("^")
        if token and token not in ("*", "-", "+", "^"):
            out.append(token)
    return out


def plain_terms(text: str) -> list[str] | None:
    """The terms `_latin`'s plain tiers (AND, then OR) search for `text` (stop words and
    question words dropped unless nothing else is left); None when `text` is FTS5 syntax,
    CJK or holds no words (another tier answers it)."""
    if _SYNTAX.search(text) or has_cjk(text):
        return None
    terms = _terms(text)
    if not terms:
        return None
    return (
        [t for t in terms if t not in DROPPED] or [t for t in terms if t not in STOPWORDS] or terms
    )


def _latin(
    store: Store,
    text: str,
    opts: Options,
    pool: int,
    words: str,
    native: KeywordIndexer | None,
    allowed: Sequence[int] | None = None,
    scope: Scope | None = None,
    *,
    probe: bool = False,
) -> KeywordResult:
    """Tier 1. `words` is the index of word queries; prefix queries use the unstemmed one.
    `native` (the in-memory twin of `words`) runs the plain-text AND and OR when it can.
    `probe`: only whether a tier finds anything (`holds`): at most one hit, unranked,
    and no bound."""
    terms = _terms(text)
    if _SYNTAX.search(text):
        try:
            table = EXACT if "*" in text else words
            hits = _fts(store, table, text, opts, pool, scope=scope, probe=probe)
            bound = 0.0 if probe else _bound(store, table, positive_phrases(text), scope=scope)
            return KeywordResult(
                hits, "fts", text, None, [], terms, final=True, bound=bound,
                rescore_table=table, rescore_expression=text,
            )  # fmt: skip
        except sqlite3.OperationalError as exc:
            message = str(exc)
            if not _is_query_error(message):
                raise
            excluded = _excluded(text)
            if excluded:  # a NOT the user wrote is kept: its words are never required
                return _without(
                    store, text, opts, pool, words, excluded, message, scope, probe=probe
                )
            if not terms:
                return KeywordResult(
                    notices=[f"not a valid FTS5 query ({message}) and no words to search for"],
                    final=True,
                )
            notice = f"not a valid FTS5 query ({message}); searched for the quoted terms instead"
    else:
        notice = None
        if not terms:
            return KeywordResult(notices=["the query holds no words to search for"], final=True)
    notices = [notice] if notice else []
    # Without stop words and question words, unless nothing else is left.
    terms = (
        [t for t in terms if t not in DROPPED] or [t for t in terms if t not in STOPWORDS] or terms
    )
    quoted = [quote(t) for t in terms]
    expression = " ".join(quoted)
    any_term = " OR ".join(quoted)
    hits = _plain(
        store, words, native, terms, expression, opts, pool, require_all=True, allowed=allowed,
        scope=scope, probe=probe,
    )  # fmt: skip
    if hits or len(terms) == 1:
        tier_expr = expression
    else:
        tier_expr = any_term
        hits = _plain(
            store, words, native, terms, tier_expr, opts, pool, require_all=False,
            allowed=allowed, scope=scope, probe=probe,
        )  # fmt: skip
    if hits:
        bound = 0.0 if probe else _bound(store, words, quoted, native, scope)
        if tier_expr is expression:
            held = terms
        else:  # the OR: the terms some hit holds (suggestions need not look them up)
            # (a probe asks only whether something holds them: no look-up for it)
            known = (
                native.holding(terms, [h.memory_id for h in hits])
                if native is not None and not probe
                else None
            )
            held = known if known is not None else []
        return tier_result(
            hits, tier_expr, terms, bound, held, notices, table=words, any_term=any_term
        )
    prefix_expr = " OR ".join(q + "*" for q in quoted)
    hits = _fts(store, EXACT, prefix_expr, opts, pool, scope=scope, probe=probe)
    probed = [q + "*" for q in quoted]
    bound = _bound(store, EXACT, probed, scope=scope) if hits and not probe else 0.0
    return KeywordResult(
        hits, "prefix" if hits else "none", prefix_expr, prefix_expr, notices, terms,
        bound=bound, rescore_table=EXACT, rescore_expression=prefix_expr,
    )  # fmt: skip


def _excluded(text: str) -> list[str]:
    """The words a NOT of `text` excludes (``deploy AND NOT staging``: "staging"), without
    the words the rest of the query asks for."""
    wanted = set(_terms(_NOT_CLAUSE.sub(" ", text)))
    return [t for t in _terms(" ".join(_NOT_CLAUSE.findall(text))) if t not in wanted]


def without_terms(text: str, excluded: list[str], message: str) -> tuple[list[str], list[str]]:
    """The words the retry of an invalid query that excludes `excluded` asks for (none: it
    cannot run), and the notice that says what was searched instead (both backends)."""
    terms = _terms(_NOT_CLAUSE.sub(" ", text))
    terms = (
        [t for t in terms if t not in DROPPED] or [t for t in terms if t not in STOPWORDS] or terms
    )
    if not terms:
        return [], [
            f"not a valid FTS5 query ({message}); it excludes words but asks for none,"
            " and a search needs words to look for"
        ]
    return terms, [
        f"not a valid FTS5 query ({message}); searched for the quoted terms instead,"
        f" without {', '.join(excluded)}"
    ]


def _without(
    store: Store,
    text: str,
    opts: Options,
    pool: int,
    words: str,
    excluded: list[str],
    message: str,
    scope: Scope | None,
    *,
    probe: bool,
) -> KeywordResult:
    """The retry of an invalid FTS5 query that excludes words (``deploy AND NOT staging``,
    ``NOT staging``): the quoted words it asks for, all of them, then any of them, with
    the NOT kept, so that no result holds an excluded word. Quoting every word instead
    would turn the exclusion into a requirement: the opposite of what was asked."""
    terms, notices = without_terms(text, excluded, message)
    if not terms:
        return KeywordResult(notices=notices, final=True)
    quoted = [quote(t) for t in terms]
    without = " NOT (" + " OR ".join(quote(t) for t in excluded) + ")"
    every = "(" + " ".join(quoted) + ")" + without
    anyone = "(" + " OR ".join(quoted) + ")" + without
    hits = _fts(store, words, every, opts, pool, scope=scope, probe=probe)
    expression = every
    if not hits and len(terms) > 1:
        hits = _fts(store, words, anyone, opts, pool, scope=scope, probe=probe)
        expression = anyone
    bound = 0.0 if probe or not hits else _bound(store, words, quoted, scope=scope)
    return KeywordResult(
        hits, "fts" if hits else "none", expression, expression, notices, terms, final=True,
        bound=bound, rescore_table=words, rescore_expression=anyone,
    )  # fmt: skip


def tier_result(
    hits: list[Hit],
    expression: str,
    terms: list[str],
    bound: float,
    held: list[str],
    notices: Sequence[str] = (),
    *,
    table: str = "memories_fts",
    scope: Scope | None = None,
    any_term: str | None = None,
) -> KeywordResult:
    """The answer of a plain-text tier: `expression` (the AND or the OR of `terms`) ran
    on `table`; other memories are scored against the OR of the terms there (`any_term`,
    when the caller has it)."""
    if any_term is None:
        any_term = " OR ".join(quote(t) for t in terms)
    return KeywordResult(
        hits, "fts", expression, expression, list(notices), terms, bound=bound,
        rescore_table=table, rescore_expression=any_term, held=held, scope=scope,
    )  # fmt: skip


#: The in-memory index is asked for the pool, then PREFILTER times more while the filters
#: (or superseded memories) leave it short; beyond NATIVE_MAX_FETCH hits, a filter that
#: rejects most of them is left to FTS5.
NATIVE_MAX_FETCH = 8192


def _plain(
    store: Store,
    words: str,
    native: KeywordIndexer | None,
    terms: list[str],
    expression: str,
    opts: Options,
    pool: int,
    *,
    require_all: bool,
    allowed: Sequence[int] | None = None,
    scope: Scope | None = None,
    probe: bool = False,
) -> list[Hit]:
    """One plain-text tier: from the in-memory index when it can answer, else FTS5
    (`probe`: any one match under the filters, unranked; see _first)."""
    kind = "AND" if require_all else "OR"
    if native is not None and opts.order_by is OrderBy.RELEVANCE:
        hits = _native(store, native, terms, opts, pool, require_all, allowed)
        if hits is not None:
            _log.debug("keyword %s of %d terms: in-memory index, %d hits", kind, len(terms),
                       len(hits))  # fmt: skip
            return hits
    if probe:
        hits = _first(store, words, expression, opts)
    elif scope is not None and words in _SCOPED_TABLES:
        hits = scope.search(words, expression, opts, pool, require_all=require_all)
    else:
        hits = _fts(store, words, expression, opts, pool)
    _log.debug("keyword %s of %d terms: FTS5, %d hits", kind, len(terms), len(hits))
    return hits


def _native(
    store: Store,
    native: KeywordIndexer,
    terms: list[str],
    opts: Options,
    pool: int,
    require_all: bool,
    allowed: Sequence[int] | None = None,
) -> list[Hit] | None:
    """The BM25 top of the in-memory index, then the filters in SQLite over those rows
    only, fetching deeper while the filters leave the pool short; None = ask FTS5.
    With `allowed` (the ids the filters admit) the index ranks only those: one pass.
    A project filter scopes the index's statistics to those projects."""
    projects = projects_of(opts)
    if allowed is not None:
        found = native.search(
            terms, pool, require_all=require_all, allowed=allowed, projects=projects
        )
        if found is None:
            return None
        ids, bm25 = found
        info = _admitted(store, native, ids.tolist(), opts)
        return _native_hits(ids.tolist(), bm25.tolist(), info)
    fetch = pool
    while fetch <= NATIVE_MAX_FETCH:
        found = native.search(terms, fetch, require_all=require_all, projects=projects)
        if found is None:
            return None
        ids, bm25 = found
        if len(ids) == 0:
            return []
        info = _admitted(store, native, ids.tolist(), opts)
        hits = _native_hits(ids.tolist(), bm25.tolist(), info)
        if len(hits) >= pool or len(ids) < fetch:
            return hits[:pool]
        fetch *= PREFILTER
    return None


def _native_hits(ids: list[int], bm25: list[float], info: dict[int, RankInfo]) -> list[Hit]:
    """Hits of the in-memory index's (id, BM25 > 0) pairs that the filters admitted
    (`info`), scored as bm25_to_score(-raw) (inlined: one call less per candidate)."""
    return [
        Hit(i, (x := max(0.0, r)) / (x + BM25_HALF), r, info[i])
        for i, r in zip(ids, bm25, strict=True)
        if i in info
    ]


def _admitted(
    store: Store, native: KeywordIndexer, ids: list[int], opts: Options
) -> dict[int, RankInfo]:
    """filters.admitted, from the ranking columns the in-memory index keeps when its
    filters are ones they judge."""
    info = native.rank_info(ids, opts)
    return info if info is not None else filters.admitted(store, ids, opts)


def _is_query_error(message: str) -> bool:
    """Whether SQLite rejected the MATCH expression itself (rather than failing to run)."""
    transient = ("locked", "busy", "disk i/o", "no such table", "no such module", "interrupt")
    return not any(word in message.lower() for word in transient)


def _cjk_terms(text: str, *, bigrams: bool) -> list[str]:
    """CJK runs and ASCII words (3+ chars) of `text`, in order, without repeats."""
    out: dict[str, None] = {}
    run = ""

    def flush_run() -> None:
        if not run:
            return
        if bigrams and len(run) > 2:
            for i in range(len(run) - 1):
                out.setdefault(run[i : i + 2], None)
        else:
            out.setdefault(run, None)

    for token in re.findall(r"\w+", text):
        run = ""
        word = ""
        for ch in token:
            if _is_cjk(ch):
                if word:
                    if len(word) >= 3:
                        out.setdefault(word.lower(), None)
                    word = ""
                run += ch
            else:
                flush_run()
                run = ""
                word += ch
        flush_run()
        if len(word) >= 3:
            out.setdefault(word.lower(), None)
        if len(out) >= MAX_TERMS:
            break
    return list(out)[:MAX_TERMS]


def _like_param(term: str) -> str:
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _cjk(
    store: Store, text: str, opts: Options, pool: int, scope: Scope | None = None
) -> KeywordResult:
    """CJK and mixed-script text: every term may be missing (a memory holding part of the
    query ranks by how much of its weight it holds, as the plain-text OR does).

    CJK runs of three or more characters alone run as the OR of their trigram phrases,
    ranked by FTS5's BM25 (a rare term weighs more than a common one; with a `scope`,
    over its projects' statistics). A term shorter than a trigram cannot be a trigram
    phrase, and the trigram index holds only memories with CJK text (a Latin word of a
    mixed query is in English notes too): such queries run as substrings over every
    memory, each term weighted by its rarity (:func:`_weighted`)."""
    everything = _cjk_terms(text, bigrams=False)
    terms = [t for t in everything if t not in DROPPED] or everything
    if not terms:
        return KeywordResult(notices=["the query holds no words to search for"])
    if all(len(t) >= 3 and has_cjk(t) for t in terms):
        phrases = [quote(t) for t in terms]
        expression = " OR ".join(phrases)
        if scope is not None:
            hits = scope.search(TRIGRAM, expression, opts, pool, require_all=False)
        else:  # one statement: the trigram table is small (CJK memories only)
            predicate, params = filters.where(opts)
            rows = store.conn.execute(
                f"SELECT m.id, bm25({TRIGRAM}) AS r, {RANK_COLUMNS} FROM {TRIGRAM}"
                f" JOIN memories m ON m.id = {TRIGRAM}.rowid WHERE {TRIGRAM} MATCH ?"
                f" AND {predicate} ORDER BY {_order_sql(opts)} LIMIT ?",
                [expression, *params, pool],
            ).fetchall()
            hits = [Hit(int(i), bm25_to_score(r), -r, RankInfo(*rest)) for i, r, *rest in rows]
        bound = _bound(store, TRIGRAM, phrases, scope=scope) if hits else 0.0
        return KeywordResult(
            hits, "trigram" if hits else "none", None, expression, [], terms, bound=bound,
            rescore_table=TRIGRAM, rescore_expression=expression,
        )  # fmt: skip
    return _weighted(store, terms, opts, pool, indexed=True)


def _like(
    store: Store, text: str, opts: Options, pool: int, *, indexed: bool = False
) -> KeywordResult:
    """CJK runs as bigrams and Latin words as substrings, weighted by rarity. `indexed`
    (CJK text): the memories holding them are found through the indexes."""
    # Stop and question words are substrings of everything ("the" of "then", "other"):
    # as LIKE terms they would match every memory.
    terms = [t for t in _cjk_terms(text, bigrams=True) if t not in DROPPED]
    if not terms:
        return KeywordResult()
    return _weighted(store, terms, opts, pool, indexed=indexed)


def _wall(opts: Options) -> tuple[str, list[object]]:
    """The live memories of the searched projects (a project is a wall), else all."""
    projects = projects_of(opts)
    if projects is None:
        return "m.deleted_at IS NULL", []
    marks = ",".join("?" * len(projects))
    return f"m.deleted_at IS NULL AND m.project_id IN ({marks})", list(projects)


def _holders(store: Store, term: str, opts: Options) -> set[int] | None:
    """The memories inside the wall that hold `term`, found through an index: a CJK term
    by the trigram index (a shorter one by substring over the memories it holds, the only
    ones that can hold CJK text), a Latin word as a word or a word's prefix
    (``deploy`` finds "Deployed", as the FTS tiers would). None: no index answers."""
    wall, params = _wall(opts)
    if has_cjk(term) and len(term) >= 3:
        sql = (
            f"SELECT m.id FROM {TRIGRAM} CROSS JOIN memories m ON m.id = {TRIGRAM}.rowid"
            f" WHERE {TRIGRAM} MATCH ? AND {wall}"
        )
        args: list[object] = [quote(term), *params]
    elif has_cjk(term):
        sql = (
            f"SELECT m.id FROM {TRIGRAM}_docsize d CROSS JOIN memories m ON m.id = d.id"
            f" WHERE m.content LIKE ? ESCAPE '\\' AND {wall}"
        )
        args = [_like_param(term), *params]
    else:
        sql = (
            f"SELECT m.id FROM {EXACT} CROSS JOIN memories m ON m.id = {EXACT}.rowid"
            f" WHERE {EXACT} MATCH ? AND {wall}"
        )
        args = [quote(term) + "*", *params]
    try:
        return {int(r[0]) for r in store.conn.execute(sql, args)}
    except sqlite3.OperationalError as exc:
        if _is_query_error(str(exc)):
            return None  # a term FTS5 cannot take: the substring scan below
        raise


def _like_idfs(
    store: Store, terms: Sequence[str], opts: Options, indexed: bool
) -> tuple[list[float], float, list[int] | None]:
    """Each term's IDF (FTS5's, clamp included) from the number of memories inside the
    wall that hold it, their mean length in characters, and (`indexed`) the memories
    holding any term, found through the indexes (:func:`_holders`); else one scan."""
    wall, params = _wall(opts)
    found: list[set[int] | None] = []
    if indexed:
        try:
            found = [_holders(store, t, opts) for t in terms]
        except sqlite3.OperationalError as exc:
            if "no such module" not in str(exc) and "no such table" not in str(exc):
                raise
            found = [None]  # no full-text index to ask (a build without FTS5): the scan
        if all(f is not None for f in found):
            sets = [f for f in found if f is not None]
            projects = projects_of(opts)
            if projects is None:
                rows = _rows(store, "memories_fts")
            else:
                marks = ",".join("?" * len(projects))
                rows = int(store.conn.execute(
                    f"SELECT COUNT(*) FROM memories m WHERE m.deleted_at IS NULL"
                    f" AND m.project_id IN ({marks})", list(projects),
                ).fetchone()[0])  # fmt: skip
            ids = sorted(set().union(*sets))
            mean = store.conn.execute(
                "SELECT AVG(length(content)) FROM memories"
                " WHERE id IN (SELECT value FROM json_each(?))",
                [json.dumps(ids)],
            ).fetchone()[0]
            return [_idf(rows, len(f)) for f in sets], float(mean or 1.0), ids
    held = "".join(", SUM(m.content LIKE ? ESCAPE '\\')" for _ in terms)
    row = store.conn.execute(
        f"SELECT COUNT(*), AVG(length(m.content)){held} FROM memories m WHERE {wall}",
        [*(_like_param(t) for t in terms), *params],
    ).fetchone()
    rows = int(row[0] or 0)
    return [_idf(rows, int(n or 0)) for n in row[2:]], float(row[1] or 1.0), None


def _weighted(
    store: Store, terms: Sequence[str], opts: Options, pool: int, *, indexed: bool = False
) -> KeywordResult:
    """Memories holding any of `terms` as a substring, ranked by a BM25 over substrings:
    each term weighs its IDF (:func:`_like_idfs`), its count in a memory saturates
    (k1 1.2) and is normalised by the memory's length in characters (b 0.75), as FTS5
    weighs a phrase. The bound is the sum of the IDFs, so ``raw / bound`` means what it
    means in the FTS tiers: a memory holding each term once at mean length scores 1.
    Counting matched terms instead let a hundred notes holding the two common words of
    "deploy 手順 nimbus" bury the one holding the rare 手順. `indexed`: the memories to
    rank are found through the indexes (a CJK query), not by reading every memory (the
    fallback for plain text no index matched: "operator" in "kubernetesoperator")."""
    try:
        idfs, mean, ids = _like_idfs(store, terms, opts, indexed)
        if ids is not None and not ids:
            return KeywordResult(terms=list(terms))
        score, score_params = _weighted_sql(terms, idfs, mean)
        if ids is None:
            among = " OR ".join("content LIKE ? ESCAPE '\\'" for _ in terms)
            among_params: list[object] = [_like_param(t) for t in terms]
        else:
            among, among_params = "id IN (SELECT value FROM json_each(?))", [json.dumps(ids)]
        predicate, params = filters.where(opts)
        sql = (
            f"SELECT m.id, {score} AS r, {RANK_COLUMNS}"
            f" FROM (SELECT id, {_counts_sql(len(terms))} FROM memories WHERE {among}) t"
            f" JOIN memories m ON m.id = t.id WHERE {predicate}"
            f" ORDER BY {_order_sql(opts, 'r DESC')} LIMIT ?"
        )
        rows = store.conn.execute(
            sql, [*score_params, *_counts_params(terms), *among_params, *params, pool]
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise StorageError(f"{store.path}: {exc}") from None
    hits = [Hit(int(i), bm25_to_score(-r), float(r), RankInfo(*rest)) for i, r, *rest in rows]
    return KeywordResult(
        hits, "like" if hits else "none", None, None, [], list(terms), bound=sum(idfs),
        weights=(tuple(terms), tuple(idfs), mean),
    )  # fmt: skip


def _weighted_sql(
    terms: Sequence[str], idfs: Sequence[float], mean: float
) -> tuple[str, list[object]]:
    """The substring BM25 of a memory ``m`` whose term counts are ``t.f0``, ``t.f1``…"""
    norm = f"{_K1} * ({1 - _B} + {_B} * length(m.content) / ?)"
    parts: list[str] = []
    params: list[object] = []
    for i, idf in enumerate(idfs):
        parts.append(f"? * t.f{i} * {_K1 + 1} / (t.f{i} + {norm})")
        params += [idf, max(mean, 1.0)]
    return " + ".join(parts), params


def _counts_sql(n: int) -> str:
    """Columns ``f0``… of the times each term occurs in ``content`` (see _counts_params)."""
    return ", ".join(
        f"(length(content) - length(replace(lower(content), ?, ''))) * 1.0 / ? AS f{i}"
        for i in range(n)
    )


def _counts_params(terms: Sequence[str]) -> list[object]:
    out: list[object] = []
    for term in terms:
        out += [term.lower(), len(term)]
    return out


def _rescore_weighted(
    store: Store, weights: tuple[tuple[str, ...], tuple[float, ...], float], ids: Sequence[int]
) -> dict[int, float]:
    """The substring BM25 of each memory among `ids` holding any of the terms."""
    terms, idfs, mean = weights
    score, score_params = _weighted_sql(terms, idfs, mean)
    rows = store.conn.execute(
        f"SELECT m.id, {score} FROM (SELECT id, {_counts_sql(len(terms))} FROM memories"
        " WHERE id IN (SELECT value FROM json_each(?))) t JOIN memories m ON m.id = t.id",
        [*score_params, *_counts_params(terms), json.dumps(sorted(set(ids)))],
    ).fetchall()
    return {int(i): float(r) for i, r in rows if r is not None and r > 0}


def rescore(
    store: Store,
    result: KeywordResult,
    ids: Sequence[int],
    native: KeywordIndexer | None = None,
) -> dict[int, float]:
    """``-bm25`` of each memory among `ids` that the query's rescoring expression matches
    (the OR of its terms for plain text, the expression itself for FTS5 syntax): the
    keyword score of memories another leg found. Filters are the caller's: `ids` passed
    them already."""
    if ids and result.weights is not None:
        try:
            return _rescore_weighted(store, result.weights, ids)
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"{store.path}: {exc}") from None
    if not ids or result.rescore_table is None or result.rescore_expression is None:
        return {}
    table, expression = result.rescore_table, result.rescore_expression
    wanted = sorted({int(i) for i in ids})
    scope = result.scope
    if native is not None and table == "memories_fts" and not result.final:
        found = native.rescore(result.terms, wanted, scope.projects if scope is not None else None)
        if found is not None:
            return dict(zip(found[0].tolist(), found[1].tolist(), strict=True))
    if scope is not None and table in _SCOPED_TABLES:
        try:
            return scope.rescore(table, expression, wanted)
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"{store.path}: {exc}") from None
    out: dict[int, float] = {}
    for start in range(0, len(wanted), 500):
        part = wanted[start : start + 500]
        marks = ",".join("?" * len(part))
        try:
            rows = store.conn.execute(
                f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ?"
                f" AND rowid IN ({marks})",
                [expression, *part],
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StorageError(f"{store.path}: {exc}") from None
        out.update((int(i), -float(r)) for i, r in rows)
    return out


def snippets(result: KeywordResult, contents: dict[int, str], ids: list[int]) -> dict[int, str]:
    """Highlighted snippets for `ids`: a window around the first matched term.

    Computed in Python rather than with FTS5's snippet(), which re-runs the match and
    re-tokenises every document (0.4 ms a result on abstract-length text; this is ~30 us).
    """
    marker = highlighter(result.terms)
    return {i: text_snippet(contents[i], marker) for i in ids if i in contents}


_SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ies", "ied", "ers", "er",
             "es", "ed", "ly", "s")  # fmt: skip


def _stem_prefix(term: str) -> str:
    """A prefix of `term` that its inflections share ("deployment" -> "deploy"), so that
    highlighting agrees roughly with the Porter-stemmed match."""
    for suffix in _SUFFIXES:
        if term.endswith(suffix) and len(term) - len(suffix) >= 3:
            return term[: -len(suffix)]
    return term


class Marker:
    """Marks the query's terms in text: words that start with a term's stem for
    alphabetic terms, any occurrence for CJK ones, through one regex, compiled when a
    snippet is first made (a search whose snippets are never read never compiles it:
    compiling a new query's pattern costs ~0.3-0.6 ms)."""

    __slots__ = ("_pattern", "_words")

    def __init__(self, words: tuple[str, ...]) -> None:
        self._words = words
        self._pattern: re.Pattern[str] | None = None

    @property
    def pattern(self) -> re.Pattern[str]:
        pattern = self._pattern
        if pattern is None:  # two threads may both compile it: the same pattern
            pattern = self._pattern = _pattern(self._words)
        return pattern

    def first(self, text: str) -> int | None:
        """Where the first marked span of `text` starts, or None."""
        found = self.pattern.search(text)
        return found.start() if found is not None else None

    def mark(self, text: str) -> str:
        """`text` with every marked span wrapped in MARK_OPEN/MARK_CLOSE."""
        return self.pattern.sub(lambda m: f"{MARK_OPEN}{m.group(0)}{MARK_CLOSE}", text)


def highlighter(terms: list[str]) -> Marker | None:
    """A Marker of `terms`, or None when there is nothing to mark."""
    words = tuple(sorted({t for t in terms if t}))
    return Marker(words) if words else None


@functools.lru_cache(maxsize=256)
def _pattern(words: tuple[str, ...]) -> re.Pattern[str]:
    # One group of stems behind one \b compiles in ~60 % of the time of one \b...\w*
    # alternative per term (compiling is most of the snippet cost of a new query).
    stems = sorted({_stem_prefix(t.lower()) for t in words if not has_cjk(t)}, key=len)[::-1]
    cjk = sorted((t for t in words if has_cjk(t)), key=len, reverse=True)
    parts = [re.escape(t) for t in cjk]
    if stems:
        parts.append(r"\b(?:" + "|".join(re.escape(t) for t in stems) + r")\w*")
    return re.compile("|".join(parts), re.IGNORECASE)


def text_snippet(content: str, marker: Marker | None, width: int = 200) -> str:
    """A window of `content` around the first match of `marker`, every match marked."""
    first = marker.first(content) if marker is not None else None
    start = 0
    if first is not None and first > width // 3:
        start = first - width // 3
        space = content.find(" ", start, first)  # do not cut a word in half
        start = space + 1 if space != -1 else start
    end = min(len(content), start + width)
    if end < len(content):
        space = content.rfind(" ", start + width // 2, end)
        end = space if space != -1 else end
    window = content[start:end]
    if marker is not None:
        window = marker.mark(window)
    window = " ".join(window.split())
    return (ELLIPSIS if start > 0 else "") + window + (ELLIPSIS if end < len(content) else "")
