"""The PostgreSQL backend's two retrievers behind the search pipeline's seam
(:class:`cortex.search.hits.Retriever`): keyword (BM25 in SQL) and semantic (pgvector).

Scores are calibrated as the SQLite retrievers' are (:mod:`cortex.search.hits`): keyword
BM25 over the sum of the query's IDFs; semantic cosine as a z-score against the query's
own similarity distribution over the store (a fixed sample of up to STATS_ROWS rows; of
the searched projects' rows when the search is walled, so that other projects never move
its calibration).
Both apply `opts`'s filters in their own SQL (the project wall in every statement), so
the `allowed` ids the pipeline may pass are not needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cortex.errors import EmbeddingError, StorageError
from cortex.filters import projects_of
from cortex.options import Options
from cortex.pg import keyword, vectors
from cortex.pg.db import Vector
from cortex.pg.store import PgStore, db_project
from cortex.search.hits import Hit, Leg, keyword_score, semantic_score, shrunk_stats
from cortex.search.plan import Plan
from cortex.search.query_cache import QueryCache

__all__ = ["PgKeywordRetriever", "PgSemanticRetriever"]

#: The query's cosine distribution is read over this many rows of the model (the first
#: by id: a fixed sample, so a query scores the same from one search to the next).
STATS_ROWS = 2048


class PgKeywordRetriever:
    def __init__(self, store: PgStore) -> None:
        self._store = store

    def retrieve(self, plan: Plan, opts: Options, allowed: Any = None) -> Leg:
        found = keyword.search(self._store, plan.text, opts, plan.pool)
        bound = found.bound
        hits = [
            Hit(h.memory_id, keyword_score(h.raw / bound if bound > 0 else 0.0), h.raw, h.info)
            for h in found.hits
        ]
        return Leg(hits, list(found.notices), found.rewritten, list(found.terms), found.tier, found)

    def absent(self, words: Sequence[str], opts: Options, allowed: Any = None) -> list[str]:
        """The `words` that no memory under `opts`'s filters holds as a word or a word's
        prefix (keyword.holds: the index tiers, not the substring scan)."""
        return [w for w in words if not keyword.holds(self._store, w, opts)]

    def rescore(
        self, plan: Plan, opts: Options, leg: Leg, ids: Sequence[int]
    ) -> dict[int, tuple[float, float]]:
        found = leg.state
        if found is None or found.bound <= 0:
            return {}
        raw = keyword.rescore(self._store, found, ids, opts)
        return {i: (keyword_score(r / found.bound), r) for i, r in raw.items()}


class PgSemanticRetriever:
    """Cosine top-k over the active model's vectors in pgvector."""

    def __init__(self, store: PgStore, embedder: Any, cache: QueryCache | None = None) -> None:
        self._store = store
        # An embedder, or what loads one when first needed (cortex.pg.embedding.PgSemantic)
        self._source = embedder
        self._cache = cache if cache is not None else QueryCache(0)

    @property
    def _embedder(self) -> Any:
        source = self._source
        if source is not None and callable(getattr(source, "embedder", None)):
            return source.embedder()  # raises EmbeddingError when there is none
        return source

    def _query(self, text: str) -> np.ndarray:
        embedder = self._embedder
        if embedder is None:
            raise EmbeddingError("semantic search is off")

        def embed(text: str) -> np.ndarray:
            query = np.asarray(embedder.embed(text), dtype=np.float32)
            if query.shape != (embedder.dim,) or not np.isfinite(query).all():
                raise EmbeddingError("the embedder returned an unusable query vector")
            return query

        return self._cache.get(str(embedder.model_id), text, embed)  # type: ignore[no-any-return]

    def _stats(
        self, query: np.ndarray, projects: tuple[str, ...] | None = None
    ) -> tuple[float, float]:
        """The mean and spread of the query's cosine over the same sample as the SQLite
        retriever's (cortex.search.sqlite), so that both calibrate a query alike: every
        live row up to STATS_ROWS, else STATS_ROWS evenly spaced by memory id
        (``np.linspace`` positions); walled, over the live memories of the projects
        (those without a vector of the model then count for nothing), else over the
        live memories that have one."""
        dim = int(query.shape[0])
        model = str(self._embedder.model_id)
        if projects is not None:
            scope = "FROM memories m WHERE m.deleted_at IS NULL AND m.project_id = ANY(%s)"
            scope_params: list[Any] = [[db_project(p) for p in projects]]
        else:
            scope = (
                "FROM memories m JOIN embeddings v ON v.project_id = m.project_id"
                " AND v.memory_id = m.id AND v.model_id = %s AND v.dim = %s"
                " WHERE m.deleted_at IS NULL"
            )
            scope_params = [model, dim]
        rows = self._store.query(
            "WITH c AS (SELECT m.project_id, m.id, row_number() OVER (ORDER BY m.id) - 1 AS rn"
            f" {scope}),"
            " t AS (SELECT count(*) AS n, LEAST(count(*), %s) AS k FROM c),"
            " pos AS (SELECT DISTINCT CASE WHEN t.k <= 1 THEN 0 WHEN i = t.k - 1 THEN t.n - 1"
            " ELSE floor(i * ((t.n - 1)::float8 / (t.k - 1)))::bigint END AS rn"
            " FROM t, generate_series(0, GREATEST(t.k - 1, 0)) i WHERE t.n > 0)"
            f" SELECT count(*), avg(s), stddev_pop(s) FROM (SELECT 1 - (e.vector::vector({dim})"
            f" <=> %s::vector({dim})) AS s FROM c JOIN pos ON pos.rn = c.rn"
            " JOIN embeddings e ON e.project_id = c.project_id AND e.memory_id = c.id"
            " AND e.model_id = %s AND e.dim = %s) x",
            (*scope_params, STATS_ROWS, Vector(query), model, dim),
        )
        n, mean, sd = rows[0]
        return shrunk_stats(int(n), float(mean or 0.0), float(sd or 0.0))

    def retrieve(self, plan: Plan, opts: Options, allowed: Any = None) -> Leg:
        query = self._query(plan.semantic_text)
        mean, sd = self._stats(query, projects_of(opts))
        found = vectors.search(self._store, query, str(self._embedder.model_id), opts, plan.pool)
        hits = [Hit(h.memory_id, semantic_score(h.score, mean, sd), h.score, h.info) for h in found]
        return Leg(hits, state=(query, mean, sd), tier="vector")

    def rescore(
        self, plan: Plan, opts: Options, leg: Leg, ids: Sequence[int]
    ) -> dict[int, tuple[float, float]]:
        if leg.state is None or not ids:
            return {}
        query, mean, sd = leg.state
        dim = int(query.shape[0])
        try:
            rows = self._store.query(
                f"SELECT memory_id, 1 - (vector::vector({dim}) <=> %s::vector({dim}))"
                " FROM embeddings WHERE model_id = %s AND dim = %s AND memory_id = ANY(%s)",
                (Vector(query), str(self._embedder.model_id), dim, sorted({int(i) for i in ids})),
            )
        except StorageError:
            raise
        return {int(i): (semantic_score(float(s), mean, sd), float(s)) for i, s in rows}
