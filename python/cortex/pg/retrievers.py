"""The PostgreSQL backend's two retrievers behind the search pipeline's seam
(:class:`cortex.search.hits.Retriever`): keyword (BM25 in SQL) and semantic (pgvector).

Scores are calibrated as the SQLite retrievers' are (:mod:`cortex.search.hits`): keyword
BM25 over the sum of the query's IDFs; semantic cosine as a z-score against the query's
own similarity distribution over the store (a fixed sample of up to STATS_ROWS rows; of
the searched projects' rows when the search is walled, so that other projects never move
its calibration). The sample's vectors are kept in the process while the database's
change counter (``cortex_changes``) stands still, and the cosines computed here.
Both apply `opts`'s filters in their own SQL (the project wall in every statement), so
the `allowed` ids the pipeline may pass are not needed.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from cortex.errors import EmbeddingError, StorageError
from cortex.filters import projects_of
from cortex.options import Options
from cortex.pg import keyword, vectors
from cortex.pg.db import Vector
from cortex.pg.keyword_index import PgKeywordIndex
from cortex.pg.store import PgStore, db_project
from cortex.search.hits import Hit, Leg, keyword_score, semantic_score, shrunk_stats
from cortex.search.plan import Plan
from cortex.search.query_cache import QueryCache

__all__ = ["PgKeywordRetriever", "PgSemanticRetriever"]

#: The query's cosine distribution is read over this many rows of the model (the first
#: by id: a fixed sample, so a query scores the same from one search to the next).
STATS_ROWS = 2048
#: Calibration samples kept in the process (one per model and project scope).
SAMPLES_KEPT = 8
#: Seconds between two checks whether a model's HNSW index is due (cortex.pg.vectors).
HNSW_CHECK_SECONDS = 60.0

_log = logging.getLogger("cortex.pg")
#: The change counter the calibration sample is kept under (schema 3).
_MARKER_SQL = "SELECT COALESCE(sum(n), 0) FROM cortex_changes"


class PgKeywordRetriever:
    def __init__(self, store: PgStore, native: PgKeywordIndex | None = None) -> None:
        self._store = store
        self._native = native  # the in-memory keyword index (cortex.pg.keyword_index)

    def retrieve(self, plan: Plan, opts: Options, allowed: Any = None) -> Leg:
        found = keyword.search(self._store, plan.text, opts, plan.pool, self._native)
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

    def share(self, leg: Leg, words: Sequence[str]) -> float | None:
        """The share of the query's keyword weight (the sum of its terms' IDFs) that
        `words` carry in `leg`, this retriever's answer to it (None: no weight): the
        statistic the SQLite retriever gives, so that one ranking serves both backends
        (the unknown-name discount, cortex.search.pipeline.unknown_name_factor)."""
        if leg.state is None:
            return None
        return keyword.share(self._store, leg.state, words)

    def near(self, words: Sequence[str], opts: Options) -> set[str]:
        """The `words` (held by no memory under `opts`'s filters) that a memory there holds
        a near spelling of: misspellings (keyword.near)."""
        return keyword.near(self._store, words, opts)

    def rescore(
        self, plan: Plan, opts: Options, leg: Leg, ids: Sequence[int]
    ) -> dict[int, tuple[float, float]]:
        found = leg.state
        if found is None or found.bound <= 0:
            return {}
        raw = keyword.rescore(self._store, found, ids, opts, self._native)
        return {i: (keyword_score(r / found.bound), r) for i, r in raw.items()}


class PgSemanticRetriever:
    """Cosine top-k over the active model's vectors in pgvector."""

    def __init__(self, store: PgStore, embedder: Any, cache: QueryCache | None = None) -> None:
        self._store = store
        # An embedder, or what loads one when first needed (cortex.pg.embedding.PgSemantic)
        self._source = embedder
        self._cache = cache if cache is not None else QueryCache(0)
        self._lock = threading.Lock()
        # (model, dim, projects) -> (change counter when read, unit sample vectors)
        self._samples: OrderedDict[Any, tuple[int, np.ndarray]] = OrderedDict()
        self._hnsw_known: set[tuple[str, int]] = set()
        self._hnsw_checked = -math.inf
        self._building: threading.Thread | None = None

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

        # the query encoder of the embedder (OnnxEmbedder's int8 choice), keyed apart
        encode = getattr(embedder, "embed_query", embedder.embed)

        def embed(text: str) -> np.ndarray:
            query = np.asarray(encode(text), dtype=np.float32)
            if query.shape != (embedder.dim,) or not np.isfinite(query).all():
                raise EmbeddingError("the embedder returned an unusable query vector")
            return query

        key = getattr(embedder, "query_id", embedder.model_id)
        return self._cache.get(str(key), text, embed)  # type: ignore[no-any-return]

    def _marker(self) -> int:
        """The change counter of what the calibration samples (schema: cortex_changes):
        equal on two reads means no committed write to live memories or vectors between."""
        return int(self._store.query(_MARKER_SQL)[0][0])

    def _sample(
        self, model: str, dim: int, projects: tuple[str, ...] | None, marker: int | None = None
    ) -> np.ndarray:
        """The calibration sample's vectors, unit length, float32 (rows x dim): every live
        row up to STATS_ROWS, else STATS_ROWS evenly spaced by memory id (``floor(i * (n -
        1) / (k - 1))``, the last row last); walled, over the live memories of the projects
        (those without a vector of the model then count for nothing), else over the live
        memories that have one. Kept in the process while the change counter stands still:
        read first, so a write committed meanwhile leaves an older key, never a newer.

        Reloaded at the first search after the counter moved, never computed another way
        meanwhile: pgvector's cosines on the server agree with these only to float
        rounding (~1e-9), and two searches with no write between must give the same
        scores (issue 11). Under a stream of writes every search reloads the
        sample (ids and 2,048 vectors over the wire): slower, never different."""
        key = (model, dim, projects)
        if marker is None:  # else read by the caller (with the vector search)
            marker = self._marker()
        with self._lock:
            known = self._samples.get(key)
            if known is not None and known[0] == marker:
                self._samples.move_to_end(key)
                return known[1]
        if projects is not None:
            rows = self._store.query(
                "SELECT project_id, id FROM memories WHERE deleted_at IS NULL"
                " AND project_id = ANY(%s) ORDER BY id",
                ([db_project(p) for p in projects],),
            )
        else:
            rows = self._store.query(
                "SELECT m.project_id, m.id FROM memories m JOIN embeddings v"
                " ON v.project_id = m.project_id AND v.memory_id = m.id AND v.model_id = %s"
                " AND v.dim = %s WHERE m.deleted_at IS NULL ORDER BY m.id",
                (model, dim),
            )
        n = len(rows)
        k = min(n, STATS_ROWS)
        if k == 0:
            picked: list[tuple[Any, ...]] = []
        elif k == 1:
            picked = [rows[0]]
        else:
            step = (n - 1) / (k - 1)
            at = sorted({n - 1 if i == k - 1 else math.floor(i * step) for i in range(k)})
            picked = [rows[i] for i in at]
        vecs = np.zeros((0, dim), dtype=np.float32)
        if picked:
            with self._store.db.connection() as conn:
                got = (
                    conn.cursor(binary=True)
                    .execute(
                        "SELECT e.vector FROM unnest(%s::text[], %s::bigint[]) AS s(p, i)"
                        " JOIN embeddings e ON e.project_id = s.p AND e.memory_id = s.i"
                        " AND e.model_id = %s AND e.dim = %s",
                        ([r[0] for r in picked], [int(r[1]) for r in picked], model, dim),
                    )
                    .fetchall()
                )
            if got:
                vecs = np.stack([np.asarray(r[0], dtype=np.float64) for r in got])
                norms = np.linalg.norm(vecs, axis=1)
                # pgvector: NaN, no cosine, for a zero vector. float32, as pgvector computes
                vecs = (vecs[norms > 0] / norms[norms > 0, None]).astype(np.float32)
        with self._lock:
            self._samples[key] = (marker, vecs)
            while len(self._samples) > SAMPLES_KEPT:
                self._samples.popitem(last=False)
        self._check_hnsw(model, dim)
        return vecs

    def _check_hnsw(self, model: str, dim: int) -> None:
        """After writes (a refreshed sample), at most once a HNSW_CHECK_SECONDS: when the
        model has grown past HNSW_MIN_ROWS vectors without its HNSW index, build it on a
        background thread (CONCURRENTLY; searches scan exactly until it is valid). A store
        grown one `add` at a time gets its index without a bulk load's flush."""
        if self._store.read_only:
            return
        now = time.monotonic()
        with self._lock:
            if (model, dim) in self._hnsw_known or now - self._hnsw_checked < HNSW_CHECK_SECONDS:
                return
            if self._building is not None and self._building.is_alive():
                return
            self._hnsw_checked = now

            def build() -> None:
                try:
                    if vectors.has_hnsw(self._store, model, dim):
                        built = True
                    else:
                        vectors.build_due(self._store)
                        built = vectors.has_hnsw(self._store, model, dim)
                except StorageError as exc:  # the next check tries again; searches go on
                    _log.warning("building the HNSW index of %s failed: %s", model, exc)
                    return
                if built:
                    with self._lock:
                        self._hnsw_known.add((model, dim))

            self._building = threading.Thread(target=build, name="cortex-pg-hnsw", daemon=True)
            self._building.start()

    def _stats(
        self,
        query: np.ndarray,
        projects: tuple[str, ...] | None = None,
        marker: int | None = None,
    ) -> tuple[float, float]:
        """The mean and spread of the query's cosine over the same sample as the SQLite
        retriever's (cortex.search.sqlite), so that both calibrate a query alike
        (:meth:`_sample`). The cosines are computed here, over the sample kept in the
        process: the same numbers as pgvector's ``1 - (a <=> b)`` to float rounding."""
        dim = int(query.shape[0])
        sample = self._sample(str(self._embedder.model_id), dim, projects, marker)
        q = np.asarray(query, dtype=np.float64)
        qn = float(np.linalg.norm(q))
        if len(sample) == 0 or qn == 0.0:
            return shrunk_stats(0, 0.0, 0.0)
        # einsum's own loop, not BLAS: a matrix-vector product through a threaded BLAS
        # wakes its threads each call (1-25 ms on a loaded machine instead of 0.1)
        s = np.einsum("ij,j->i", sample, (q / qn).astype(np.float32)).astype(np.float64)
        return shrunk_stats(len(s), float(s.mean()), float(s.std()))

    def retrieve(self, plan: Plan, opts: Options, allowed: Any = None) -> Leg:
        query = self._query(plan.semantic_text)
        # The calibration's change counter is read in the same round trip as the search
        # (before it): the sample it keys is read after, as before, never newer.
        counter: list[Any] = []
        found = vectors.search(
            self._store, query, str(self._embedder.model_id), opts, plan.pool,
            also=(_MARKER_SQL, ()), also_rows=counter,
        )  # fmt: skip
        mean, sd = self._stats(query, projects_of(opts), int(counter[0][0]))
        hits = [Hit(h.memory_id, semantic_score(h.score, mean, sd), h.score, h.info) for h in found]
        return Leg(hits, state=(query, mean, sd), tier="vector")

    def rescore(
        self, plan: Plan, opts: Options, leg: Leg, ids: Sequence[int]
    ) -> dict[int, tuple[float, float]]:
        if leg.state is None or not ids:
            return {}
        query, mean, sd = leg.state
        return {i: (semantic_score(s, mean, sd), s) for i, s in self._cosines(query, ids).items()}

    def cosines_of(self, text: str, ids: Sequence[int]) -> dict[int, float]:
        """The cosine of `text`'s query vector to each memory among `ids` with a vector."""
        return self._cosines(self._query(text), ids) if ids else {}

    def _cosines(self, query: np.ndarray, ids: Sequence[int]) -> dict[int, float]:
        dim = int(query.shape[0])
        try:
            rows = self._store.query(
                # by the memories' id index, then embeddings' key (project, memory, model):
                # embeddings has no index on memory_id alone, and a scan of the model's
                # rows cost a hybrid search tens of milliseconds at 100k
                f"SELECT e.memory_id, 1 - (e.vector::vector({dim}) <=> %s::vector({dim}))"
                " FROM memories m JOIN embeddings e ON e.project_id = m.project_id"
                " AND e.memory_id = m.id AND e.model_id = %s AND e.dim = %s"
                " WHERE m.id = ANY(%s)",
                (Vector(query), str(self._embedder.model_id), dim, sorted({int(i) for i in ids})),
            )
        except StorageError:
            raise
        return {int(i): float(s) for i, s in rows}
