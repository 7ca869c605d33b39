"""The search filters as one PostgreSQL predicate over ``memories`` (alias ``m``).

The same filters as :func:`cortex.filters.where`, with psycopg's ``%s`` parameters. Every
retriever of the backend uses it, so a filter (the project wall above all) cannot hold in
one mode and leak in another.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cortex.errors import InvalidOptionError
from cortex.filters import project_ids
from cortex.options import Options
from cortex.ranking import RANK_COLUMNS, RankInfo

__all__ = ["SQLITE_ONLY", "admitted", "where"]

#: Options the PostgreSQL backend does not apply yet: refused, never ignored (a filter
#: ignored would widen the answer).
SQLITE_ONLY = ("code",)


def where(opts: Options, *, alias: str = "m") -> tuple[str, list[Any]]:
    """The predicate (never empty) and its parameters for `opts`'s filters."""
    from cortex.pg.store import db_project

    for name in SQLITE_ONLY:
        if getattr(opts, name, None) is not None:
            raise InvalidOptionError(f"{name} is SQLite-only for now; leave it out on PostgreSQL")
    m = alias
    clauses = [f"{m}.deleted_at IS NULL"]
    params: list[Any] = []
    if not opts.include_superseded:
        clauses.append(f"{m}.superseded_by IS NULL")
    projects = project_ids(opts)
    if projects is not None:
        clauses.append(f"{m}.project_id = ANY(%s)")
        params.append([db_project(p) for p in projects])
    for column, value in (
        ("sector", opts.sector),
        ("tier", opts.tier),
        ("category", opts.category),
    ):
        if value is not None:
            clauses.append(f"{m}.{column} = %s")
            params.append(value)
    if opts.scope is not None:
        if opts.scope.endswith("*"):
            clauses.append(f"starts_with({m}.scope, %s)")
            params.append(opts.scope[:-1])
        else:
            clauses.append(f"{m}.scope = %s")
            params.append(opts.scope)
    if opts.source_prefix is not None:
        clauses.append(f"starts_with({m}.source_path, %s)")
        params.append(opts.source_prefix)
    if opts.fact_type is not None:
        clauses.append(
            f"EXISTS (SELECT 1 FROM facts f WHERE f.project_id = {m}.project_id"
            f" AND f.memory_id = {m}.id AND f.type = %s)"
        )
        params.append(opts.fact_type)
    if opts.min_salience is not None:
        clauses.append(f"{m}.salience >= %s")
        params.append(opts.min_salience)
    if opts.created_since is not None:
        clauses.append(f"{m}.created_at >= %s")
        params.append(opts.created_since.timestamp())
    if opts.created_until is not None:
        clauses.append(f"{m}.created_at <= %s")
        params.append(opts.created_until.timestamp())
    if opts.session is not None:
        clauses.append(
            f"EXISTS (SELECT 1 FROM session_memories sm WHERE sm.memory_id = {m}.id"
            " AND sm.session_id = %s)"
        )
        params.append(opts.session)
    return " AND ".join(clauses), params


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
