"""Vector search on PostgreSQL with pgvector: exact below a size, HNSW above it.

Every embedding row names its model; every query names the model it searches and casts
the vectors to that model's dimension, so vectors of two models never meet in one
search. A model's HNSW index is a partial expression index over its own rows::

    CREATE INDEX ... ON embeddings USING hnsw ((vector::vector(384)) vector_cosine_ops)
        WHERE model_id = '<model>'

built by :func:`ensure_hnsw` once the model has :data:`HNSW_MIN_ROWS` rows (an exact scan
is fast enough below that, and exact is always right): the Engine calls
:func:`build_due` at a bulk load's end (``PgStore.after_bulk_write``) and, on a
background thread, when a search finds the store grown (cortex.pg.retrievers). Filters,
the project wall first, are in the query's WHERE: an exact search scans only admitted
rows; an HNSW search runs with ``hnsw.iterative_scan`` so that a filter that rejects most
neighbours still fills the pool instead of returning short.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cortex.errors import InvalidOptionError, StorageError
from cortex.filters import project_ids
from cortex.options import Options
from cortex.pg import filters
from cortex.pg.db import Vector
from cortex.pg.store import PgStore, db_project, rank_info
from cortex.ranking import RANK_COLUMNS, RankInfo

__all__ = [
    "HNSW_MIN_ROWS",
    "VecHit",
    "build_due",
    "ensure_hnsw",
    "has_hnsw",
    "hnsw_due",
    "hnsw_index_name",
    "search",
]

#: Rows of one model from which its HNSW index is built (by the Engine: at a bulk load's
#: end and in the background, cortex.pg.retrievers). Measured on SciFact passages embedded
#: by the default model (benches/bench_pg_vectors.py --real; BENCHMARKS.md, "PostgreSQL:
#: second pass"): at 5,000 vectors the exact scan takes 37 ms p50 and HNSW 6 ms with
#: recall@10 0.999 at the Engine's ef_search (100); the scan grows linearly past it.
#: Building costs ~0.4 s per thousand rows.
HNSW_MIN_ROWS = 5_000

#: HNSW build parameters (pgvector's defaults: recall@10 >= 0.98 on real embeddings at
#: the search's ef_search = max(40, pool), measured to 100,000 vectors).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64


@dataclass(frozen=True, slots=True)
class VecHit:
    memory_id: int
    score: float  # cosine similarity
    info: RankInfo


def _dim(dim: object) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= 16000:
        raise InvalidOptionError(f"a vector dimension is an integer in [1, 16000], not {dim!r}")
    return dim


def hnsw_index_name(model_id: str, dim: int) -> str:
    """A stable index name for (model, dimension): model ids are free text, so a digest."""
    digest = hashlib.sha256(f"{model_id}\x1f{dim}".encode()).hexdigest()[:16]
    return f"embeddings_hnsw_{digest}"


#: Per store, the (model, dim) pairs whose HNSW index was seen valid: a search asks the
#: catalogue only until then (a round trip a search before). Safe if the index is dropped
#: afterwards: the search's index settings are then unused and it scans exactly, as
#: the planner does with an index not yet valid.
_VALID: weakref.WeakKeyDictionary[PgStore, set[tuple[str, int]]] = weakref.WeakKeyDictionary()


def has_hnsw(store: PgStore, model_id: str, dim: int) -> bool:
    """Whether the model's HNSW index exists and is valid (built: a CONCURRENTLY build
    in progress, or one that failed, leaves an index the planner does not use)."""
    rows = store.query(
        "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
        (hnsw_index_name(model_id, dim),),
    )
    valid = bool(rows and rows[0][0])
    if valid:
        _VALID.setdefault(store, set()).add((model_id, dim))
    return valid


def _hnsw_seen(store: PgStore, model_id: str, dim: int) -> bool:
    """has_hnsw, without asking again once the index was seen valid."""
    known = _VALID.get(store)
    if known is not None and (model_id, dim) in known:
        return True
    return has_hnsw(store, model_id, dim)


def hnsw_due(store: PgStore) -> list[tuple[str, int]]:
    """The (model, dimension) pairs with HNSW_MIN_ROWS vectors or more and no HNSW index
    (valid or being built) yet: one count a model, from the table's index on model_id."""
    rows = store.query(
        "SELECT model_id, dim FROM embeddings GROUP BY model_id, dim HAVING count(*) >= %s"
        " ORDER BY model_id, dim",
        (HNSW_MIN_ROWS,),
    )
    due = []
    for model_id, dim in rows:
        name = hnsw_index_name(str(model_id), int(dim))
        state = store.query(
            "SELECT i.indisvalid, EXISTS (SELECT 1 FROM pg_stat_progress_create_index p"
            " WHERE p.index_relid = i.indexrelid) FROM pg_index i"
            " WHERE i.indexrelid = to_regclass(%s)",
            (name,),
        )
        if state and not state[0][0] and not state[0][1] and not store.read_only:
            # left invalid by a build that stopped (a killed process, a server restart):
            # the planner never uses it, and IF NOT EXISTS would keep it; drop, rebuild
            _drop_index(store, name)
            state = []
        if not state:
            due.append((str(model_id), int(dim)))
    return due


def _drop_index(store: PgStore, name: str) -> None:
    import psycopg
    from psycopg import sql

    _VALID.pop(store, None)

    try:
        with psycopg.connect(store.db._url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(name))
            )
    except psycopg.Error as exc:
        raise StorageError(store.db.explain(exc)) from None


def build_due(store: PgStore) -> list[tuple[str, int]]:
    """Build the HNSW index of every model that has reached HNSW_MIN_ROWS vectors (what a
    bulk load's end and, in the background, a search that finds the store grown, call).
    Returns the indexes built."""
    built = [(m, d) for m, d in hnsw_due(store) if ensure_hnsw(store, m, d, min_rows=0)]
    return built


def ensure_hnsw(store: PgStore, model_id: str, dim: int, *, min_rows: int = HNSW_MIN_ROWS) -> bool:
    """Build the HNSW index of `model_id` when it has `min_rows` rows or more and none
    exists yet (CONCURRENTLY: writers go on meanwhile). Returns whether it exists."""
    dim = _dim(dim)
    if has_hnsw(store, model_id, dim):
        return True
    if store.read_only:
        return False
    count = store.query(
        "SELECT count(*) FROM embeddings WHERE model_id = %s AND dim = %s", (model_id, dim)
    )[0][0]
    if count < min_rows:
        return False
    from psycopg import sql

    name = hnsw_index_name(model_id, dim)
    statement = sql.SQL(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON embeddings USING hnsw"
        " ((vector::vector({dim})) vector_cosine_ops) WITH (m = {m}, ef_construction = {ef})"
        " WHERE model_id = {model} AND dim = {dim}"
    ).format(
        name=sql.Identifier(name),
        dim=sql.Literal(dim),
        m=sql.Literal(HNSW_M),
        ef=sql.Literal(HNSW_EF_CONSTRUCTION),
        model=sql.Literal(model_id),
    )
    import psycopg

    try:
        with psycopg.connect(store.db._url, autocommit=True) as conn:
            conn.execute("SET maintenance_work_mem = '512MB'")
            conn.execute(statement)
    except psycopg.Error as exc:
        raise StorageError(store.db.explain(exc)) from None
    return True


def search(
    store: PgStore,
    query: np.ndarray,
    model_id: str,
    opts: Options,
    pool: int,
    *,
    exact: bool | None = None,
    ef_search: int | None = None,
    also: tuple[str, Sequence[Any]] | None = None,
    also_rows: list[Any] | None = None,
) -> list[VecHit]:
    """Up to `pool` memories by cosine similarity to `query` among `model_id`'s vectors,
    at least `opts.min_similarity`, under `opts`'s filters, best first.

    `exact`: None uses the model's HNSW index when it has one; True scans exactly.
    `also`: another read (SQL, parameters) sent in the same round trip, before the
    search; its rows are appended to `also_rows`.
    """
    q = np.asarray(query, dtype=np.float32)
    if q.ndim != 1 or not np.isfinite(q).all():
        raise InvalidOptionError("a query vector is one row of finite numbers")
    dim = _dim(int(q.shape[0]))
    use_index = (not exact) and _hnsw_seen(store, model_id, dim)
    predicate, params = filters.where(opts)
    projects = project_ids(opts)
    wall = " AND e.project_id = ANY(%s)" if projects is not None else ""
    wall_params = [[db_project(p) for p in projects]] if projects is not None else []
    distance = f"(e.vector::vector({dim}) <=> %s::vector({dim}))"
    inner = (
        f"SELECT e.memory_id, {distance} AS d, {RANK_COLUMNS}"
        " FROM embeddings e JOIN memories m ON m.project_id = e.project_id AND m.id = e.memory_id"
        f" WHERE e.model_id = %s AND e.dim = %s{wall} AND {predicate}"
        f" ORDER BY {distance} LIMIT %s"
    )
    vec = Vector(q)
    args = [vec, model_id, dim, *wall_params, *params, vec, pool]
    import psycopg

    try:
        if use_index:
            rows = _index_search(store, inner, args, ef_search, pool, also, also_rows)
            return _hits(rows, opts)
        # No HNSW index: one pipeline, BEGIN, the setting and the search go out together
        # and come back in one round trip (then COMMIT).
        with store.db.connection() as conn, conn.pipeline(), conn.transaction():
            first = conn.execute(also[0], also[1]) if also is not None else None
            conn.execute("SET LOCAL enable_indexscan = off")  # no HNSW: scan exactly
            rows = conn.execute(inner, args).fetchall()
            if first is not None and also_rows is not None:
                also_rows.extend(first.fetchall())
    except psycopg.Error as exc:
        raise StorageError(store.db.explain(exc)) from None
    return _hits(rows, opts)


def _hits(rows: list[Any], opts: Options) -> list[VecHit]:
    out = []
    for memory_id, d, *rest in rows:
        score = 1.0 - float(d)
        if opts.min_similarity is None or score >= opts.min_similarity:
            out.append(VecHit(int(memory_id), score, rank_info(rest)))
    return out


#: The ef_search each pooled connection has in its session (set_config(..., false)).
_SESSION_EF: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def _index_search(
    store: PgStore,
    inner: str,
    args: list[Any],
    ef_search: int | None,
    pool: int,
    also: tuple[str, Sequence[Any]] | None = None,
    also_rows: list[Any] | None = None,
) -> list[Any]:
    """The search through the HNSW index: one statement in autocommit, one round trip.
    The index's settings (iterative scans in relaxed order, ef_search) are the pooled
    connection's session settings, set once with the first search on it (sent in the
    same pipeline) and again only when ef_search changes: they act on HNSW index scans
    alone, which only this search makes (before: BEGIN, two SET LOCALs, the query and
    COMMIT, two round trips a search)."""
    # Relaxed order: the index may return neighbours slightly out of order while it
    # scans on past ef_search for filtered rows; the outer ORDER BY puts them back.
    # The candidate list must hold the pool (pgvector's advice: ef_search >= LIMIT);
    # below 40 (its default) it stays at the default.
    ef = int(ef_search) if ef_search is not None else max(40, pool)
    sql = f"SELECT * FROM ({inner}) t ORDER BY d, memory_id"
    with store.db.reads() as conn:
        known = _SESSION_EF.get(conn) == ef
        if known and also is None:
            return conn.execute(sql, args).fetchall()
        _SESSION_EF.pop(conn, None)
        with conn.pipeline():
            first = conn.execute(also[0], also[1]) if also is not None else None
            if not known:
                conn.execute(
                    "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', false),"
                    " set_config('hnsw.ef_search', %s, false)",
                    (str(ef),),
                )
            rows = conn.execute(sql, args).fetchall()
            if first is not None and also_rows is not None:
                also_rows.extend(first.fetchall())
        _SESSION_EF[conn] = ef
        return rows
