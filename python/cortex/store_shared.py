"""The methods the SQLite store (:class:`cortex.store.Store`) and the PostgreSQL one
(:class:`cortex.pg.store.PgStore`) share: their SQL is the same in both dialects but for
what a :class:`Dialect` names (the parameter mark, how a project is matched, how a session
link joins its memory), and the Python around it is the same, so it is written once here
and both backends stay behaviourally equal (DESIGN.md, "the seam").

Every value is a bound parameter; the only text put into the SQL is a Dialect's fixed
fragments and the fixed column list.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from cortex.errors import NotFoundError
from cortex.result import Memory

if TYPE_CHECKING:
    from cortex.store import MemoryInput, SyncCounts

__all__ = ["MEMORY_COLUMNS", "M_COLUMNS", "Dialect", "SharedStore", "split_chunks"]

#: The columns of a Memory, in the order of both backends' ``row_to_memory``.
MEMORY_COLUMNS = (
    "id, project_id, content, source_path, chunk_index, sector, tier, scope, category, "
    "salience, confidence, created_at, updated_at, valid_until, superseded_by, deleted_at, "
    "last_accessed, access_count, metadata"
)
#: MEMORY_COLUMNS of the alias m (statements that join another table).
M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in MEMORY_COLUMNS.split(","))


@dataclass(frozen=True, slots=True)
class Dialect:
    """What differs between the backends in the statements of :class:`SharedStore`."""

    #: The parameter mark: ``?`` (sqlite3) or ``%s`` (psycopg).
    mark: str
    #: The operator that matches a stored project to a bound one: ``IS`` on SQLite (no
    #: project is NULL), ``=`` on PostgreSQL (no project is ``''``).
    project_is: str
    #: The join of ``session_memories sm`` to ``memories m`` (PostgreSQL's link rows carry
    #: the project, the leading key of every table there).
    session_join: str
    #: A project as the API names it -> as stored, and back.
    db_project: Callable[[str | None], Any]
    api_project: Callable[[Any], str | None]
    #: A Memory from a row of MEMORY_COLUMNS.
    row_to_memory: Callable[[Sequence[Any]], Memory]
    #: Raises the backend's error for a memory id that cannot be one.
    check_id: Callable[[object], object]


class SharedStore:
    """A mixin of the methods both stores share; a store sets ``dialect``."""

    dialect: ClassVar[Dialect]

    if TYPE_CHECKING:  # what each store provides

        def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

        def transaction(self) -> AbstractContextManager[Any]: ...

        def sessions_of(self, ids: Sequence[int]) -> dict[int, str]: ...

        # (PgStore's fourth argument is an EmbeddingBatch, Store's an OnWrite callback)
        sync_source: Callable[..., SyncCounts]

    # ---------------------------------------------------------------- memories

    def get(
        self,
        memory_id: int,
        *,
        include_deleted: bool = False,
        project: str | None = None,
    ) -> Memory:
        """One memory by id. With `project`, a memory of another project is not found (a
        project is a wall). A damaged row (SQLite) raises DamagedRowError."""
        d = self.dialect
        d.check_id(memory_id)
        rows = self.query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = {d.mark}", (memory_id,)
        )
        if (
            not rows
            or (rows[0][15] is not None and not include_deleted)
            or (project is not None and rows[0][1] != d.db_project(project))
        ):
            raise NotFoundError(f"no memory with id {memory_id}")
        return d.row_to_memory(rows[0])

    def delete(self, memory_id: int) -> None:
        """Soft delete: the row stays (with `deleted_at`), but no search finds it again."""
        p = self.dialect.mark
        self.dialect.check_id(memory_id)
        with self.transaction() as tx:
            cur = tx.execute(
                f"UPDATE memories SET deleted_at = {p} WHERE id = {p} AND deleted_at IS NULL",
                (time.time(), memory_id),
            )
            if cur.rowcount == 0:
                raise NotFoundError(f"no live memory with id {memory_id}")

    def sync_file(
        self,
        source_path: str,
        import_project: str | None,
        groups: Mapping[str | None, Sequence[MemoryInput]],
        on_write: Any = None,
    ) -> SyncCounts:
        """Sync one imported file in one transaction: each (project, chunks) group with
        `sync_source` (`on_write`: its fourth argument), and every project this file's
        records went to when it was last imported under `import_project` (a record naming
        its own project, since removed from the file, is soft-deleted like the others).
        The projects written are remembered in import_sources."""
        from cortex.store import SyncCounts

        d = self.dialect
        p, stored = d.mark, d.db_project(import_project)
        counts = SyncCounts()
        with self.transaction() as tx:
            previous = [
                d.api_project(row[0])
                for row in tx.execute(
                    "SELECT project FROM import_sources"
                    f" WHERE source_path = {p} AND import_project {d.project_is} {p}",
                    (source_path, stored),
                ).fetchall()
            ]
            todo: dict[str | None, Sequence[MemoryInput]] = {import_project: []}
            todo.update({q: [] for q in previous})
            todo.update(groups)
            for project, chunks in todo.items():
                counts += self.sync_source(source_path, project, chunks, on_write)
            self._file_synced(tx, source_path, {q: list(groups.get(q, ())) for q in todo})
            tx.execute(
                "DELETE FROM import_sources"
                f" WHERE source_path = {p} AND import_project {d.project_is} {p}",
                (source_path, stored),
            )
            tx.cursor().executemany(
                "INSERT INTO import_sources (source_path, import_project, project)"
                f" VALUES ({p}, {p}, {p}) ON CONFLICT DO NOTHING",
                [(source_path, stored, d.db_project(q)) for q, chunks in groups.items() if chunks],
            )
        return counts

    def _file_synced(self, tx: Any, path: str, chunks: dict[str | None, list[Any]]) -> None:
        """What a backend derives from a whole file, in sync_file's transaction once the
        file is synced (`chunks`: its MemoryInputs by project, for every project touched,
        [] where none is left). Nothing by default."""

    def neighbours(self, memory: Memory, n: int) -> tuple[list[Memory], list[Memory]]:
        """Up to `n` live memories just before and after `memory` in its own source (by
        chunk index) or, for a memory without a source, in the session it was created in
        (by time); always within its project."""
        from cortex.store import is_document

        d = self.dialect
        p, project = d.mark, d.db_project(memory.project)
        if (
            memory.source_path is not None
            and memory.chunk_index is not None
            and is_document(memory.source_path)
        ):
            rows = self.query(
                f"SELECT {M_COLUMNS} FROM memories m WHERE m.project_id {d.project_is} {p}"
                f" AND m.source_path = {p} AND m.deleted_at IS NULL"
                f" AND m.chunk_index BETWEEN {p} AND {p} AND m.id <> {p}"
                " ORDER BY m.chunk_index, m.id",
                (
                    project,
                    memory.source_path,
                    memory.chunk_index - n,
                    memory.chunk_index + n,
                    memory.id,
                ),
            )
            return split_chunks([d.row_to_memory(r) for r in rows], memory, n)
        session = self.sessions_of([memory.id]).get(memory.id)
        if session is None or memory.created_at is None:
            return [], []
        when = self._created_sql()  # as stored (see _stored_created), in the statement
        scope = (
            f"FROM memories m JOIN session_memories sm ON {d.session_join}"
            f" WHERE sm.session_id = {p} AND sm.usage = 'created'"
            f" AND m.project_id {d.project_is} {p} AND m.deleted_at IS NULL AND m.id <> {p}"
        )
        args = (session, project, memory.id)
        before_rows = self.query(
            f"SELECT {M_COLUMNS} {scope} AND (m.created_at < {when}"
            f" OR (m.created_at = {when} AND m.id < {p}))"
            f" ORDER BY m.created_at DESC, m.id DESC LIMIT {p}",
            (*args, memory.id, memory.id, memory.id, n),
        )
        after_rows = self.query(
            f"SELECT {M_COLUMNS} {scope} AND (m.created_at > {when}"
            f" OR (m.created_at = {when} AND m.id > {p}))"
            f" ORDER BY m.created_at, m.id LIMIT {p}",
            (*args, memory.id, memory.id, memory.id, n),
        )
        return [d.row_to_memory(r) for r in reversed(before_rows)], [
            d.row_to_memory(r) for r in after_rows
        ]

    def _created_sql(self) -> str:
        """A memory's created_at as stored, read inside a statement (its id bound): the
        value _stored_created would fetch, without a round trip of its own."""
        return f"(SELECT created_at FROM memories WHERE id = {self.dialect.mark})"

    def _stored_created(self, memory: Memory) -> float:
        """`memory`'s created_at as stored: a datetime holds microseconds, and the float
        it came from rounds to them, so ``created_at.timestamp()`` may lie a hair after the
        stored value, and the memory would count as earlier than itself."""
        rows = self.query(
            f"SELECT created_at FROM memories WHERE id = {self.dialect.mark}", (memory.id,)
        )
        if rows and isinstance(rows[0][0], int | float):
            return float(rows[0][0])
        return memory.created_at.timestamp() if memory.created_at else 0.0

    def session_thread(self, memory: Memory, limit: int = 200) -> list[tuple[int, str, float]]:
        """(id, content, created_at) of the other live memories of the session `memory` was
        created in, within its project: up to `limit`, the nearest in time first. Empty
        for a memory created in no session."""
        session = self.sessions_of([memory.id]).get(memory.id)
        if session is None:
            return []
        d = self.dialect
        p = d.mark
        rows = self.query(
            "SELECT m.id, m.content, m.created_at FROM memories m"
            f" JOIN session_memories sm ON {d.session_join}"
            f" WHERE sm.session_id = {p} AND sm.usage = 'created'"
            f" AND m.project_id {d.project_is} {p} AND m.deleted_at IS NULL AND m.id <> {p}"
            f" ORDER BY abs(m.created_at - {self._created_sql()}), m.id LIMIT {p}",
            (session, d.db_project(memory.project), memory.id, memory.id, limit),
        )
        return [(int(i), str(c), float(t)) for i, c, t in rows]

    # ---------------------------------------------------------------- lenses

    def save_lens(self, name: str, options: str, description: str | None, now: float) -> None:
        """Save or replace a lens (cortex.lenses): its options as JSON."""
        p = self.dialect.mark
        with self.transaction() as tx:
            tx.execute(
                "INSERT INTO lenses (name, options, description, created_at, updated_at)"
                f" VALUES ({p}, {p}, {p}, {p}, {p}) ON CONFLICT (name) DO UPDATE SET"
                " options = excluded.options, description = excluded.description,"
                " updated_at = excluded.updated_at",
                (name, options, description, now, now),
            )

    def lens_rows(self, name: str | None = None) -> list[tuple[Any, ...]]:
        """(name, options, description, created_at, updated_at) of the lens `name`, or of
        every lens by name."""
        cols = "SELECT name, options, description, created_at, updated_at FROM lenses"
        if name is None:
            return self.query(f"{cols} ORDER BY name")
        return self.query(f"{cols} WHERE name = {self.dialect.mark}", (name,))

    def delete_lens(self, name: str) -> bool:
        """Delete a lens; False when there was none."""
        with self.transaction() as tx:
            cur = tx.execute(f"DELETE FROM lenses WHERE name = {self.dialect.mark}", (name,))
            return bool(cur.rowcount)

    # ---------------------------------------------------------------- stats

    def _counts(self) -> dict[str, Any]:
        """The counts of :meth:`stats` that both backends report alike: live and deleted
        memories, live ones by project (most first), sources, facts, sessions, and
        embeddings by model."""
        live, deleted = self.query(
            "SELECT COUNT(*) FILTER (WHERE deleted_at IS NULL),"
            " COUNT(*) FILTER (WHERE deleted_at IS NOT NULL) FROM memories"
        )[0]
        projects = self.query(
            "SELECT project_id, COUNT(*) FROM memories WHERE deleted_at IS NULL"
            " GROUP BY project_id ORDER BY COUNT(*) DESC, project_id"
        )
        sources = self.query(
            "SELECT COUNT(DISTINCT source_path) FROM memories"
            " WHERE deleted_at IS NULL AND source_path IS NOT NULL"
        )[0][0]
        facts = self.query("SELECT COUNT(*) FROM facts")[0][0]
        sessions = self.query("SELECT COUNT(*) FROM sessions")[0][0]
        embeddings = self.query("SELECT model_id, COUNT(*) FROM embeddings GROUP BY model_id")
        api = self.dialect.api_project
        return {
            "memories": int(live),
            "deleted": int(deleted),
            "projects": {api(p) or "": int(n) for p, n in projects},
            "sources": int(sources),
            "facts": int(facts),
            "sessions": int(sessions),
            "embeddings": {m: int(n) for m, n in embeddings},
        }


def split_chunks(found: list[Memory], memory: Memory, n: int) -> tuple[list[Memory], list[Memory]]:
    """The `n` chunks of `found` (the other chunks of `memory`'s document within `n` of it,
    in chunk order) right before `memory` and the `n` right after it."""
    index = memory.chunk_index or 0
    before = [m for m in found if (m.chunk_index or 0) < index]
    after = [m for m in found if (m.chunk_index or 0) >= index]
    return before[-n:], after[:n]
