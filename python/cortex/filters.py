"""The search filters as one SQL predicate over the `memories` table (alias ``m``).

Every retriever (keyword tiers, semantic candidates, filter-only listing) uses this one
function, so a filter cannot hold in one mode and leak in another. Values are always bound
parameters; prefixes are compared with ``substr`` so that ``%`` and ``_`` in user text stay
literal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cortex.code import code_clause
from cortex.errors import InvalidOptionError, StorageError
from cortex.options import Options
from cortex.ranking import RANK_COLUMNS, RankInfo

if TYPE_CHECKING:
    from cortex.store import Store

__all__ = [
    "NO_PROJECT",
    "SQLITE",
    "Dialect",
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


@dataclass(frozen=True, slots=True)
class Dialect:
    """What differs between the backends in :func:`where`: the clauses below (each with
    its parameters; a column or alias put in is one of the fixed names of `where`)."""

    #: The parameter mark: ``?`` (sqlite3) or ``%s`` (psycopg).
    mark: str
    #: (column, projects) -> "the column holds one of these projects".
    projects: Callable[[str, tuple[str, ...]], tuple[str, list[Any]]]
    #: (column, prefix) -> "the column starts with the prefix" (``%`` and ``_`` literal).
    prefix: Callable[[str, str], tuple[str, list[Any]]]
    #: alias -> "the memory has a fact of the type" (one parameter: the type).
    fact_type: Callable[[str], str]
    #: (code, alias) -> "the memory references the code"; None where the backend has no
    #: code references (the filter is then refused, never ignored).
    code: Callable[[str, str], tuple[str, list[Any]]] | None


def _sqlite_projects(column: str, projects: tuple[str, ...]) -> tuple[str, list[Any]]:
    if len(projects) == 1:
        return f"{column} = ?", list(projects)
    return f"{column} IN ({','.join('?' * len(projects))})", list(projects)


def _sqlite_prefix(column: str, prefix: str) -> tuple[str, list[Any]]:
    return f"substr({column}, 1, length(?)) = ?", [prefix, prefix]


def _sqlite_fact_type(m: str) -> str:
    # uncorrelated: SQLite reads the facts of the type once, not once per memory
    return f"{m}.id IN (SELECT memory_id FROM facts WHERE type = ?)"


#: The SQLite store's dialect (cortex.pg.filters has PostgreSQL's).
SQLITE = Dialect(
    mark="?",
    projects=_sqlite_projects,
    prefix=_sqlite_prefix,
    fact_type=_sqlite_fact_type,
    code=code_clause,
)


def where(opts: Options, *, alias: str = "m", dialect: Dialect = SQLITE) -> tuple[str, list[Any]]:
    """The predicate (never empty) and its parameters for `opts`'s filters, in the SQL of
    `dialect` (both backends build it here, so they apply the same filters)."""
    d, m, p = dialect, alias, dialect.mark
    clauses = [f"{m}.deleted_at IS NULL"]
    params: list[Any] = []

    def add(clause: tuple[str, list[Any]]) -> None:
        clauses.append(clause[0])
        params.extend(clause[1])

    if not opts.include_superseded:
        clauses.append(f"{m}.superseded_by IS NULL")
    projects = project_ids(opts)
    if projects is not None:
        add(d.projects(f"{m}.project_id", projects))
    for column, value in (
        ("sector", opts.sector),
        ("tier", opts.tier),
        ("category", opts.category),
    ):
        if value is not None:
            add((f"{m}.{column} = {p}", [value]))
    if opts.scope is not None:
        if opts.scope.endswith("*"):
            add(d.prefix(f"{m}.scope", opts.scope[:-1]))
        else:
            add((f"{m}.scope = {p}", [opts.scope]))
    if opts.source_prefix is not None:
        add(d.prefix(f"{m}.source_path", opts.source_prefix))
    if opts.code is not None:
        if d.code is None:
            raise InvalidOptionError("code is SQLite-only for now; leave it out on this backend")
        add(d.code(opts.code, m))
    if opts.fact_type is not None:
        add((d.fact_type(m), [opts.fact_type]))
    if opts.min_salience is not None:
        add((f"{m}.salience >= {p}", [opts.min_salience]))
    if opts.created_since is not None:
        add((f"{m}.created_at >= {p}", [opts.created_since.timestamp()]))
    if opts.created_until is not None:
        add((f"{m}.created_at <= {p}", [opts.created_until.timestamp()]))
    if opts.session is not None:
        clause = (
            f"EXISTS (SELECT 1 FROM session_memories sm WHERE sm.memory_id = {m}.id"
            f" AND sm.session_id = {p})"
        )
        add((clause, [opts.session]))
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
