"""The search filters as one SQL predicate over the `memories` table (alias ``m``).

Every retriever (keyword tiers, semantic candidates, filter-only listing) uses this one
function, so a filter cannot hold in one mode and leak in another. Values are always bound
parameters; prefixes are compared with ``substr`` so that ``%`` and ``_`` in user text stay
literal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cortex.code import code_clause
from cortex.errors import StorageError
from cortex.options import Options
from cortex.ranking import RANK_COLUMNS, RankInfo

if TYPE_CHECKING:
    from cortex.store import Store

__all__ = [
    "NO_PROJECT",
    "admitted",
    "narrows",
    "narrows_beyond_project",
    "project_ids",
    "projects_of",
    "referencing",
    "where",
]

#: The key of memories without a project in per-project statistics (a project name never
#: holds NUL): keyword_totals and the in-memory keyword index.
NO_PROJECT = "\x00"


def project_ids(opts: Options) -> tuple[str, ...] | None:
    """The projects a search of `opts` may see, in the order given; None when it is not
    walled (every project). The one reading of ``Options.project`` (a name or several):
    every filter, statistic and scope that depends on the wall asks this."""
    project = getattr(opts, "project", None)
    if project is None:
        return None
    if isinstance(project, str):
        return (project,)
    return tuple(str(p) for p in project)


def projects_of(opts: Any) -> tuple[str, ...] | None:
    """The projects a search under `opts` covers, sorted and without repeats, or None when
    it covers every project (project_ids as a set): BM25's N, avgdl and df and the semantic
    calibration are those of these projects alone, so that what other projects hold never
    changes the ranking."""
    ids = project_ids(opts)
    return None if ids is None else tuple(sorted(set(ids)))


def _prefix(column: str, prefix: str, clauses: list[str], params: list[Any]) -> None:
    clauses.append(f"substr({column}, 1, length(?)) = ?")
    params.extend((prefix, prefix))


def narrows(opts: Options) -> bool:
    """Whether `opts` narrows the memories beyond dropping deleted/superseded ones."""
    return opts.project is not None or narrows_beyond_project(opts)


def narrows_beyond_project(opts: Options) -> bool:
    """Whether `opts` narrows the memories beyond the project wall and dropping
    deleted/superseded ones (what the ranking columns of a memory alone cannot judge)."""
    return any(
        v is not None
        for v in (
            opts.session,
            opts.sector,
            opts.tier,
            opts.scope,
            opts.category,
            opts.source_prefix,
            opts.code,
            opts.fact_type,
            opts.min_salience,
            opts.created_since,
            opts.created_until,
        )
    )


def where(opts: Options, *, alias: str = "m") -> tuple[str, list[Any]]:
    """The predicate (never empty) and its parameters for `opts`'s filters."""
    m = alias
    clauses = [f"{m}.deleted_at IS NULL"]
    params: list[Any] = []
    if not opts.include_superseded:
        clauses.append(f"{m}.superseded_by IS NULL")
    projects = project_ids(opts)
    if projects is not None:
        if len(projects) == 1:
            clauses.append(f"{m}.project_id = ?")
        else:
            clauses.append(f"{m}.project_id IN ({','.join('?' * len(projects))})")
        params.extend(projects)
    for column, value in (
        ("sector", opts.sector),
        ("tier", opts.tier),
        ("category", opts.category),
    ):
        if value is not None:
            clauses.append(f"{m}.{column} = ?")
            params.append(value)
    if opts.scope is not None:
        if opts.scope.endswith("*"):
            _prefix(f"{m}.scope", opts.scope[:-1], clauses, params)
        else:
            clauses.append(f"{m}.scope = ?")
            params.append(opts.scope)
    if opts.source_prefix is not None:
        _prefix(f"{m}.source_path", opts.source_prefix, clauses, params)
    if opts.code is not None:
        sql, values = code_clause(opts.code, m)
        clauses.append(sql)
        params.extend(values)
    if opts.fact_type is not None:
        # uncorrelated: SQLite reads the facts of the type once, not once per memory
        clauses.append(f"{m}.id IN (SELECT memory_id FROM facts WHERE type = ?)")
        params.append(opts.fact_type)
    if opts.min_salience is not None:
        clauses.append(f"{m}.salience >= ?")
        params.append(opts.min_salience)
    if opts.created_since is not None:
        clauses.append(f"{m}.created_at >= ?")
        params.append(opts.created_since.timestamp())
    if opts.created_until is not None:
        clauses.append(f"{m}.created_at <= ?")
        params.append(opts.created_until.timestamp())
    if opts.session is not None:
        clauses.append(
            f"EXISTS (SELECT 1 FROM session_memories sm WHERE sm.memory_id = {m}.id"
            " AND sm.session_id = ?)"
        )
        params.append(opts.session)
    return " AND ".join(clauses), params


def admitted(store: Store, ids: Sequence[int], opts: Options) -> dict[int, RankInfo]:
    """The memories among `ids` that pass `opts`'s filters, with what ranking needs of
    them: how a retriever that found ids outside SQLite (the vector and in-memory keyword
    indexes) applies the filters."""
    if not ids:
        return {}
    predicate, params = where(opts)
    marks = ",".join("?" * len(ids))
    return {
        int(i): RankInfo(*rest)
        for i, *rest in store.query(
            f"SELECT m.id, {RANK_COLUMNS} FROM memories m WHERE m.id IN ({marks}) AND {predicate}",
            [*ids, *params],
        )
    }


def referencing(
    store: Store, keys: Sequence[str], opts: Options, limit: int
) -> dict[int, RankInfo]:
    """Up to `limit` memories passing `opts`'s filters that reference one of the code
    `keys` (cortex.code), newest first, with what ranking needs of them."""
    if not keys:
        return {}
    predicate, params = where(opts)
    ors: list[str] = []
    for key in keys:
        sql, values = code_clause(key, "m")
        ors.append(sql)
        params.extend(values)
    try:
        rows = store.query(
            f"SELECT m.id, {RANK_COLUMNS} FROM memories m WHERE {predicate}"
            f" AND ({' OR '.join(ors)}) ORDER BY m.created_at DESC, m.id DESC LIMIT ?",
            [*params, limit],
        )
    except StorageError:
        from cortex.store import SCHEMA_VERSION

        if store.schema_version() < SCHEMA_VERSION:  # read-only, not yet upgraded
            return {}
        raise
    return {int(i): RankInfo(*rest) for i, *rest in rows}
