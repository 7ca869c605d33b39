"""The embedded backend's two retrievers: keyword (FTS5 or its in-memory twin) and
semantic (the local embedder and the memory-mapped vector index).

Both take the filters once per search: the pipeline reads the ids the filters admit
(`Store.allowed_ids`, None when only deleted and superseded memories are left out) and
hands the same array to both legs, which rank only those.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cortex import keyword
from cortex._lazy import LazyModule
from cortex.errors import EmbeddingError, StorageError
from cortex.filters import projects_of
from cortex.keyword_index import KeywordIndexer, KeywordPage
from cortex.options import Options, OrderBy
from cortex.search.hits import (
    Hit,
    Leg,
    keyword_scores,
    semantic_scores,
    shrunk_stats,
)
from cortex.search.plan import Plan
from cortex.search.query_cache import QueryCache
from cortex.store import Store

if TYPE_CHECKING:
    import numpy as np
else:  # imported when a vector is first touched (start-up of keyword-only commands)
    np = LazyModule("numpy")

__all__ = ["KeywordRetriever", "SemanticRetriever"]

#: Rows fetched beyond the pool when the search is not restricted to an allowed set, so
#: that superseded memories (filtered after the scan) rarely leave the pool short.
OVERFETCH = 32
#: The query's cosine distribution is read over every row up to this many, else over a
#: fixed, evenly spaced sample of this many live rows.
STATS_ROWS = 2048
#: Query vectors whose cosine statistics are kept (see SemanticRetriever._stats).
STATS_KEPT = 256


class KeywordRetriever:
    """BM25 over FTS5, the plain-text tiers answered by the in-memory index when built."""

    def __init__(self, store: Store, native: KeywordIndexer | None) -> None:
        self._store = store
        self._native = native

    def pinned(self) -> contextlib.AbstractContextManager[None]:
        """A scope (one search) in which the in-memory index is checked against the
        change log once (KeywordIndexer.pinned)."""
        if self._native is None:
            return contextlib.nullcontext()
        return self._native.pinned()

    @property
    def in_memory(self) -> bool:
        """Whether the in-memory index answers now (it ranks the filters' ids itself)."""
        return self._native is not None and self._native.ready()

    def retrieve(self, plan: Plan, opts: Options, allowed: Any = None) -> Leg:
        leg = self._plain(plan, opts, allowed)
        if leg is not None:
            return leg
        found = keyword.search(
            self._store, plan.text, opts, plan.pool, native=self._native, allowed=allowed
        )
        scores = keyword_scores([h.raw for h in found.hits], found.bound)
        hits = [
            Hit(h.memory_id, score, h.raw, h.info)
            for h, score in zip(found.hits, scores, strict=True)
        ]
        return Leg(hits, list(found.notices), found.rewritten, list(found.terms), found.tier, found)

    def _plain(self, plan: Plan, opts: Options, allowed: Any) -> Leg | None:
        """keyword.search's answer for a plain-text query that the in-memory index's
        plain tiers answer (KeywordIndexer.hits: searched, filtered by the kept ranking
        columns and calibrated in one native call, the same hits and scores); None for
        any other query (FTS5 syntax, CJK, filters the kept columns cannot judge, an
        order other than relevance, no plain-tier hit): keyword.search answers it."""
        if self._native is None or opts.order_by is not OrderBy.RELEVANCE:
            return None
        text = keyword.clean(plan.text)
        terms = keyword.plain_terms(text) if text else None
        if terms is None:
            return None
        found = self._native.hits(terms, plan.pool, opts, allowed)
        if found is None:
            return None
        scope = keyword.Scope.of(self._store, opts)
        result = keyword.tier_result(
            [], found.expression, terms, found.bound, found.held, scope=scope
        )
        hits = [
            Hit(i, score, raw, info)
            for i, score, raw, info in zip(
                found.ids, found.scores, found.raw, found.infos, strict=True
            )
        ]
        return Leg(hits, [], found.expression, list(terms), "fts", result)

    def page(
        self,
        terms: list[str],
        pool: int,
        opts: Options,
        allowed: Any,
        weights: tuple[Any, ...],
        sectors: dict[str, float],
    ) -> KeywordPage | None:
        """A keyword-only search ranked beside the in-memory index (KeywordIndexer.page);
        None when the index cannot answer it (the general path does)."""
        if self._native is None:
            return None
        return self._native.page(terms, pool, opts, allowed, weights, sectors)

    def absent(self, words: Sequence[str], opts: Options, allowed: Any = None) -> list[str]:
        """The `words` that no memory under `opts`'s filters holds as a word or a word's
        prefix (keyword.holds: the index tiers, not the substring scan)."""
        return [
            w
            for w in words
            if not keyword.holds(self._store, w, opts, native=self._native, allowed=allowed)
        ]

    def share(self, leg: Leg, words: Sequence[str]) -> float | None:
        """The share of the query's keyword weight (the sum of its terms' IDFs) that
        `words` carry in `leg`, this retriever's answer to it (None: no weight)."""
        if leg.state is None:
            return None
        return keyword.share(self._store, leg.state, words, self._native)

    def near(self, words: Sequence[str], opts: Options) -> set[str]:
        """The `words` (held by no memory under `opts`'s filters) that a memory there holds
        a near spelling of: misspellings (cortex.suggest.corrections; `words` are known
        absent, as `absent` found them: not looked up again)."""
        from cortex import suggest

        seen = dict.fromkeys(words, False)
        return set(suggest.corrections(self._store, words, opts, seen=seen, native=self._native))

    def rescore(
        self, plan: Plan, opts: Options, leg: Leg, ids: Sequence[int]
    ) -> dict[int, tuple[float, float]]:
        found: keyword.KeywordResult = leg.state
        if found is None or found.bound <= 0:
            return {}
        raw = keyword.rescore(self._store, found, ids, self._native)
        bm25 = list(raw.values())
        return dict(
            zip(raw, zip(keyword_scores(bm25, found.bound), bm25, strict=True), strict=True)
        )


class SemanticRetriever:
    """Cosine top-k over the vector index of the active model, calibrated against the
    query's own similarity distribution over the store."""

    def __init__(self, semantic: Any, cache: QueryCache | None = None) -> None:
        self._semantic = semantic  # cortex.semantic.Semantic: the embedder and the index
        self._sample: tuple[int, int, np.ndarray] | None = None
        # (projects, index identity, index rows, change-log position) -> their sample
        self._scoped: tuple[tuple[Any, ...], np.ndarray] | None = None
        self._known_stats: OrderedDict[tuple[Any, ...], tuple[float, float]] = OrderedDict()
        self._live_count: tuple[tuple[Any, ...], int] | None = None
        self._lock = threading.Lock()
        self._cache = cache if cache is not None else QueryCache(0)

    def unavailable(self) -> str | None:
        return self._semantic.unavailable()  # type: ignore[no-any-return]

    def _query(self, text: str) -> np.ndarray:
        embedder = self._semantic.embedder()
        # A query encoder of its own when the embedder has one (OnnxEmbedder's int8
        # choice); its vectors are keyed apart in the cache (query_id).
        encode = getattr(embedder, "embed_query", embedder.embed)
        key = getattr(embedder, "query_id", embedder.model_id)

        def embed(text: str) -> np.ndarray:
            # a copy: the cache shares it read-only, and the embedder's array stays its own
            query = np.array(encode(text), dtype=np.float32, copy=True)
            if query.shape != (embedder.dim,) or not np.isfinite(query).all():
                raise EmbeddingError("the embedder returned an unusable query vector")
            return query

        # only a checked vector is cached; an embedder error is raised every time
        return self._cache.get(str(key), text, embed)  # type: ignore[no-any-return]

    def _scope_sample(
        self, index: Any, projects: tuple[str, ...]
    ) -> tuple[tuple[Any, ...], np.ndarray]:
        """The live memories of `projects` the calibration reads: all up to STATS_ROWS,
        else STATS_ROWS of them evenly spaced by id (sorted). Kept until the index or the
        change log (writes, deletes, project moves) moves on."""
        store = self._semantic.store
        try:
            top = store.query("SELECT COALESCE(MAX(seq), 0) FROM memory_changes")[0][0]
        except StorageError:  # an old file opened read-only has no change log: no writes
            top = None
        key = (projects, id(index), index.rows, top)
        with self._lock:
            if self._scoped is not None and self._scoped[0] == key:
                return self._scoped
        marks = ",".join("?" * len(projects))
        ids = np.fromiter(
            (
                r[0]
                for r in store.query(
                    f"SELECT id FROM memories WHERE deleted_at IS NULL AND project_id IN ({marks})"
                    " ORDER BY id",
                    list(projects),
                )
            ),
            dtype=np.int64,
        )
        if len(ids) > STATS_ROWS:
            ids = ids[np.unique(np.linspace(0, len(ids) - 1, STATS_ROWS).astype(int))]
        with self._lock:
            self._scoped = (key, ids)
        return key, ids

    def _stats(
        self, index: Any, query: np.ndarray, n: int, projects: tuple[str, ...] | None = None
    ) -> tuple[float, float]:
        """The mean and spread of the query's cosine over the store's `n` live rows
        (shrunk to the prior in small stores): every row up to STATS_ROWS, else a fixed
        sample. With `projects`, over those projects' memories alone (a project is a
        wall: other projects never move this project's calibration). Kept per query
        vector while the index (and the scope) is unchanged: a repeated query skips the
        scan; the numbers are the same."""
        scope: tuple[Any, ...] = ()
        sample: np.ndarray | None = None
        if projects is not None:
            scope, sample = self._scope_sample(index, projects)
        key = (id(index), index.rows, n, self._semantic.state, scope, query.tobytes())
        with self._lock:
            known = self._known_stats.get(key)
            if known is not None:
                self._known_stats.move_to_end(key)
                return known
        if sample is not None:
            if len(sample) == 0:
                return shrunk_stats(0, 0.0, 0.0)
        elif n > STATS_ROWS:
            where = (id(index), index.rows)
            with self._lock:
                if self._sample is None or self._sample[:2] != where:
                    self._sample = (*where, np.sort(index.sample(STATS_ROWS)[0]))
                sample = self._sample[2]
        # a sample's moments natively (VectorIndex.moments: the same numbers as numpy's
        # over search's scores, its rows read from a contiguous copy), else its scores
        moments = getattr(index, "moments", None)
        found = moments(query, sample) if sample is not None and moments is not None else None
        if found is not None:
            count, mean, sd = found
            stats = shrunk_stats(count, mean, sd) if count else shrunk_stats(0, 0.0, 0.0)
        else:
            if sample is not None:
                _, scores = index.search(query, len(sample), allowed=sample)
            else:
                _, scores = index.search(query, n)
            if len(scores) == 0:
                stats = shrunk_stats(0, 0.0, 0.0)
            else:
                s = scores.astype(np.float64)
                stats = shrunk_stats(len(s), float(s.mean()), float(s.std()))
        with self._lock:
            self._known_stats[key] = stats
            while len(self._known_stats) > STATS_KEPT:
                self._known_stats.popitem(last=False)
        return stats

    def retrieve(self, plan: Plan, opts: Options, allowed: Any = None) -> Leg:
        # SQLite's position first (the index's check, `_wanted`), then the model's run
        index = self._semantic.index()
        seen = self._semantic.state
        live = self._live(index, seen)
        query = self._query(plan.semantic_text)
        if live == 0:
            return Leg(state=(query, 0.0, 1.0, seen))
        mean, sd = self._stats(index, query, live, projects_of(opts))
        # The rows that reach the answer are checked against their embeddings in SQLite
        # (`verify`, called by the pipeline on the page: a damaged index is rebuilt once,
        # or refused read-only), so no wrong id or score reaches the answer.
        held = (index, seen)  # this search's index and position: no second `_wanted`

        def search(q: Any, k: int, allowed: Any = None) -> Any:
            return self._semantic.search_unchecked(q, k, allowed=allowed, held=held)

        approx: dict[str, Any] | None = None
        if opts.approximate:  # opt-in only (cortex.ann); the answer says how it ran
            from cortex import ann

            def search(q: Any, k: int, allowed: Any = None) -> Any:
                nonlocal approx
                *found, approx = ann.semantic_search(
                    self._semantic, q, k, nprobe=opts.nprobe, allowed=allowed, held=held
                )
                return found

        if allowed is not None:
            if len(allowed) == 0:
                return Leg(state=(query, mean, sd, seen))
            ids, scores, seen = search(query, min(plan.pool, len(allowed)), allowed=allowed)
        else:
            ids, scores, seen = search(query, min(plan.pool + OVERFETCH, live))
        if opts.min_similarity is not None:
            keep = scores >= opts.min_similarity
            ids, scores = ids[keep], scores[keep]
        state = (query, mean, sd, seen)
        if len(ids) == 0:
            return Leg(state=state, approximate=approx)
        found = ids.tolist()
        # The rows beyond the pool (OVERFETCH) are read only when filters refused some
        # of the pool's: most searches keep the first `pool` rows as they are.
        info = self._semantic.store.rank_info(found[: plan.pool], opts)
        if len(info) < len(found[: plan.pool]):
            info.update(self._semantic.store.rank_info(found[plan.pool :], opts))
        cosines = scores.tolist()
        hits = [
            Hit(i, score, s, info[i])
            for i, s, score in zip(found, cosines, semantic_scores(cosines, mean, sd), strict=True)
            if i in info
        ]
        return Leg(hits[: plan.pool], state=state, tier="vector", approximate=approx)

    def _live(self, index: Any, seen: Any) -> int:
        """The index's live rows (a count over its live mask, O(rows): 2 ms at 1M),
        kept while the index and the SQLite position it is in step with (`seen`: the
        last embedding and the last deletion) stay the same."""
        key = (id(index), index.rows, seen)
        with self._lock:
            if self._live_count is not None and self._live_count[0] == key:
                return self._live_count[1]
        live = len(index)
        with self._lock:
            self._live_count = (key, live)
        return live

    def cosines_of(self, text: str, ids: Sequence[int]) -> dict[int, float]:
        """The cosine of `text`'s query vector to each memory among `ids` the index holds."""
        return self.cosines(self._query(text), ids)

    def cosines(self, query: np.ndarray, ids: Sequence[int]) -> dict[int, float]:
        """The cosine of `query` to each memory among `ids` that the index holds (exact,
        as the search scores it; unchecked: a row that reaches the page is checked by
        `verify` against the leg's position)."""
        if not ids:
            return {}
        wanted = np.array(sorted({int(i) for i in ids}), dtype=np.int64)  # np.unique's
        found, scores, _ = self._semantic.search_unchecked(query, len(wanted), allowed=wanted)
        finite = math.isfinite
        return {
            i: s
            for i, s in zip(found.tolist(), scores.tolist(), strict=True)
            if finite(s) and abs(s) <= 1.001
        }

    def rescore(
        self, plan: Plan, opts: Options, leg: Leg, ids: Sequence[int]
    ) -> dict[int, tuple[float, float]]:
        if leg.state is None or not ids:
            return {}
        query, mean, sd, _ = leg.state  # checked with the leg's position (`verify`)
        cos = self.cosines(query, ids)
        found = list(cos.values())
        return dict(
            zip(cos, zip(semantic_scores(found, mean, sd), found, strict=True), strict=True)
        )

    def verify(
        self, leg: Leg, rows: Sequence[tuple[int, float]], rebuilt: bool = False
    ) -> str | None:
        """Check the (memory id, cosine) of the `rows` that reach the answer, scored by
        this leg's `retrieve` or `rescore`, against their embeddings in SQLite
        (Semantic.check): None when right, else "changed" or "rebuilt" (search again);
        IndexFormatError when the index is damaged and cannot be rebuilt."""
        if leg.state is None or not rows:
            return None
        query, _, _, seen = leg.state
        ids = np.fromiter((i for i, _ in rows), dtype=np.int64, count=len(rows))
        cosines = np.fromiter((c for _, c in rows), dtype=np.float64, count=len(rows))
        return self._semantic.check(query, ids, cosines, seen, rebuilt=rebuilt)  # type: ignore[no-any-return]
