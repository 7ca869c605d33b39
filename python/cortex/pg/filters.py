"""The search filters as one PostgreSQL predicate over ``memories`` (alias ``m``).

:func:`cortex.filters.where` in PostgreSQL's dialect (psycopg's ``%s`` parameters). Every
retriever of the backend uses it, so a filter (the project wall above all) cannot hold in
one mode and leak in another.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cortex import filters
from cortex.filters import Dialect
from cortex.options import Options
from cortex.ranking import RANK_COLUMNS, RankInfo

__all__ = ["POSTGRES", "admitted", "where"]


def _projects(column: str, projects: tuple[str, ...]) -> tuple[str, list[Any]]:
    from cortex.pg.store import db_project

    return f"{column} = ANY(%s)", [[db_project(p) for p in projects]]


def _prefix(column: str, prefix: str) -> tuple[str, list[Any]]:
    return f"starts_with({column}, %s)", [prefix]


def _fact_type(m: str) -> str:
    return (
        f"EXISTS (SELECT 1 FROM facts f WHERE f.project_id = {m}.project_id"
        f" AND f.memory_id = {m}.id AND f.type = %s)"
    )


#: PostgreSQL's dialect of :func:`cortex.filters.where`.
POSTGRES = Dialect(mark="%s", projects=_projects, prefix=_prefix, fact_type=_fact_type, code=None)


def where(opts: Options, *, alias: str = "m") -> tuple[str, list[Any]]:
    """The predicate (never empty) and its parameters for `opts`'s filters (the code
    filter refused: POSTGRES has no code references yet, and a filter ignored would widen
    the answer)."""
    return filters.where(opts, alias=alias, dialect=POSTGRES)


def admitted(store: Any, ids: Sequence[int], opts: Options) -> dict[int, RankInfo]:
    """The memories among `ids` that pass `opts`'s filters, with what ranking needs."""
    if not ids:
        return {}
    from cortex.pg.store import rank_info

    predicate, params = where(opts)
    return {
        int(r[0]): rank_info(r[1:])
        for r in store.query(
            f"SELECT m.id, {RANK_COLUMNS} FROM memories m WHERE m.id = ANY(%s) AND {predicate}",
            [list(ids), *params],
        )
    }
