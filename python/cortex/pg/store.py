"""The PostgreSQL store: the same public methods as :class:`cortex.store.Store`.

Every write is one transaction on a pooled connection; counters are updated in place
(``access_count = access_count + 1``), never read, changed and written back, so writers on
several processes and hosts lose no update. ``update`` locks the row it merges into
(``SELECT ... FOR UPDATE``). Ids are drawn from the sequence before the rows are written,
so a batch is written with COPY and its ids are known without relying on RETURNING order.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from cortex import validate
from cortex.errors import InvalidOptionError, NotFoundError, StorageError
from cortex.pg import schema
from cortex.pg.db import Database, Vector, redact
from cortex.pg.text import index_text
from cortex.ranking import RANK_COLUMNS, RankInfo
from cortex.result import Memory, from_epoch
from cortex.store import (
    SYNC_COLUMNS,
    MemoryInput,
    SyncCounts,
    check_updatable,
    has_cjk,
    merge_update,
    plan_sync,
)
from cortex.store_shared import MEMORY_COLUMNS, Dialect, SharedStore

_log = logging.getLogger("cortex.pg")

__all__ = ["MEMORY_COLUMNS", "EmbeddingBatch", "PgStore", "row_to_memory"]

# The columns a batch of new memories is copied into, in order.
_COPY_COLUMNS = (
    "id",
    "project_id",
    "content",
    "content_hash",
    "source_path",
    "chunk_index",
    "sector",
    "tier",
    "scope",
    "category",
    "salience",
    "confidence",
    "created_at",
    "updated_at",
    "metadata",
    "has_cjk",
    "doc_len",
    "tsv",
    "tsv_simple",
)


#: Marks a stored project that would otherwise read as "no project" (or as another one).
_ESCAPE = "\x1f"


def db_project(project: str | None) -> str:
    """A project as stored. Keys cannot be NULL, so no project is ``''``; a project that
    is itself ``''`` (or starts with the escape) is stored escaped, so the mapping stays
    one-to-one and project ``""`` is as much a wall as any other."""
    if project is None:
        return ""
    if project == "" or project.startswith(_ESCAPE):
        return _ESCAPE + project
    return project


def api_project(value: str) -> str | None:
    """The inverse of :func:`db_project`."""
    if value == "":
        return None
    return value[1:] if value.startswith(_ESCAPE) else value


def row_to_memory(row: Sequence[Any]) -> Memory:
    """A Memory from a row selected with `MEMORY_COLUMNS` (in that order)."""
    return Memory(
        id=int(row[0]),
        project=api_project(row[1]),
        content=row[2],
        source_path=row[3],
        chunk_index=row[4],
        sector=row[5],
        tier=row[6],
        scope=row[7],
        category=row[8],
        salience=row[9],
        confidence=row[10],
        created_at=from_epoch(row[11]),
        updated_at=from_epoch(row[12]),
        valid_until=from_epoch(row[13]),
        superseded_by=row[14],
        deleted_at=from_epoch(row[15]),
        last_accessed=from_epoch(row[16]),
        access_count=int(row[17]),
        metadata=json.loads(row[18]) if row[18] else {},
    )


def _check_id(memory_id: object) -> None:
    if isinstance(memory_id, bool) or not isinstance(memory_id, int):
        raise InvalidOptionError(f"a memory id is an integer, not {memory_id!r}")
    if not -(2**63) <= memory_id < 2**63:
        raise NotFoundError(f"no memory with id {memory_id}")


@dataclass(frozen=True, slots=True)
class EmbeddingBatch:
    """Vectors of one model for a batch of memories, by content hash (f32 blobs or arrays),
    written in the same transaction as the memories they belong to."""

    model_id: str
    dim: int
    vectors: Mapping[str, Any]


class PgStore(SharedStore):
    """One cortex database on PostgreSQL. Open with :meth:`open`; safe to share between
    threads (connections come from a pool)."""

    backend = "postgres"
    dialect = Dialect(
        mark="%s",
        project_is="=",
        session_join="sm.project_id = m.project_id AND sm.memory_id = m.id",
        db_project=db_project,
        api_project=api_project,
        row_to_memory=row_to_memory,
        check_id=_check_id,
    )

    def __init__(self, db: Database, *, read_only: bool = False) -> None:
        self.db = db
        self.read_only = read_only
        #: Said with every answer when the database was opened otherwise than asked
        #: (SQLite's read-only fallback); a server grants or refuses, so never here.
        self.notice: str | None = None
        self._local = threading.local()  # the transaction open in this thread, if any

    @classmethod
    def open(cls, url: str, *, read_only: bool = False, pool_size: int | None = None) -> PgStore:
        """Connect to the database at `url` and migrate it forward (unless `read_only`)."""
        kwargs = {"max_size": pool_size} if pool_size else {}
        db = Database(url, **kwargs)
        store = cls(db, read_only=read_only)
        try:
            store._migrate()
        except BaseException:
            db.close()
            raise
        return store

    @property
    def path(self) -> str:
        """The redacted URL (what messages and stats show; never the password)."""
        return self.db.name

    @property
    def name(self) -> str:
        return self.db.name

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> PgStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- plumbing

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One write transaction on a pooled connection (psycopg, ``%s`` parameters). A
        transaction opened inside another in the same thread joins it (as SQLite's
        store does: the recall recorder writes a batch of searches in one)."""
        if self.read_only:
            raise StorageError(f"{self.name} is open read-only")
        current = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        with self.db.transaction() as conn:
            self._local.conn = conn
            try:
                yield conn
            finally:
                self._local.conn = None

    def in_transaction(self) -> bool:
        """Whether this thread is inside a transaction of this store."""
        return getattr(self._local, "conn", None) is not None

    def release(self) -> None:
        """Nothing to release: connections go back to the pool after each use."""

    def after_bulk_write(self) -> None:
        """Refresh the planner's statistics of the tables a bulk load filled (what
        `Engine.flush` and an import call at their end), and build the HNSW index of a
        model that has reached :data:`cortex.pg.vectors.HNSW_MIN_ROWS` vectors. Until
        autovacuum gets to them,
        a freshly loaded table has none, and searches ran on plans 20-40x slower (3,000
        memories: semantic p50 778 ms before ANALYZE, 20 ms after)."""
        if self.read_only:
            return
        with self.db.transaction() as conn:
            conn.execute("ANALYZE memories, embeddings, session_memories, facts")
        # The keyword GIN indexes take new entries into a pending list (fastupdate) that
        # every search reads linearly until VACUUM or autovacuum's ANALYZE (not a manual
        # one) merges it: after a bulk load, up to 4 MB, ~8 ms a keyword search at 100k.
        try:
            with self.db.transaction() as conn:
                conn.execute(
                    "SELECT gin_clean_pending_list(c.oid) FROM pg_class c"
                    " WHERE c.oid IN (to_regclass('memories_tsv'),"
                    " to_regclass('memories_tsv_simple'), to_regclass('memories_trgm'))"
                )
        except StorageError as exc:  # not the owner: autovacuum will do it
            _log.info("the keyword indexes' pending lists are left to autovacuum: %s", exc)
        # A model that has grown past HNSW_MIN_ROWS vectors gets its HNSW index now
        # (CONCURRENTLY: other writers and searches go on; this caller waits for it).
        from cortex.pg.vectors import build_due

        build_due(self)

    def rebuild_keyword_totals(self) -> None:
        """Nothing to rebuild: triggers keep keyword_stats in the same transaction."""

    def rebuild_code(self) -> int:
        """Code references are SQLite-only for now: none to rebuild."""
        return 0

    def rebuild_documents(self) -> int:
        """Documents are SQLite-only for now: none to rebuild."""
        return 0

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a read and return its rows; server failures become StorageError."""
        return self.db.query(sql, params)

    def _migrate(self) -> None:
        version = self.schema_version()
        if version > schema.SCHEMA_VERSION:
            raise StorageError(
                f"{self.name} has cortex schema version {version}, newer than this cortex"
                f" ({schema.SCHEMA_VERSION}); upgrade cortex to open it"
            )
        if version == schema.SCHEMA_VERSION:
            return
        if self.read_only:
            raise StorageError(
                f"{self.name} needs a schema upgrade ({version} -> {schema.SCHEMA_VERSION});"
                " open it writable once"
            )
        with self.db.transaction() as conn:
            # One migrator at a time, across processes and hosts; the version is re-read
            # under the lock, since another one may have just finished.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('cortex.schema'))")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS cortex_schema ("
                " version integer PRIMARY KEY, applied_at double precision NOT NULL)"
            )
            row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM cortex_schema").fetchone()
            current = int(row[0]) if row else 0
            for target in range(current + 1, schema.SCHEMA_VERSION + 1):
                conn.execute(schema.MIGRATIONS[target - 1])
                conn.execute(
                    "INSERT INTO cortex_schema (version, applied_at) VALUES (%s, %s)",
                    (target, time.time()),
                )

    def schema_version(self) -> int:
        rows = self.query(
            "SELECT CASE WHEN to_regclass('cortex_schema') IS NULL THEN 0 ELSE -1 END"
        )
        if rows[0][0] == 0:
            return 0
        return int(self.query("SELECT COALESCE(MAX(version), 0) FROM cortex_schema")[0][0])

    # ---------------------------------------------------------------- writes

    def add(self, item: MemoryInput, embeddings: EmbeddingBatch | None = None) -> int:
        return self.add_many([item], embeddings)[0]

    def add_many(
        self, items: Iterable[MemoryInput], embeddings: EmbeddingBatch | None = None
    ) -> list[int]:
        """Insert memories (and their vectors) in one transaction; all or none are written."""
        items = list(items)
        if not items:
            return []
        now = time.time()
        with self.transaction() as tx:
            ids = self._insert_many(tx, items, now)
            if embeddings is not None:
                self._write_embeddings(
                    tx,
                    embeddings,
                    [(i, item) for i, item in zip(ids, items, strict=True)],
                    now,
                    fresh=True,
                )
        return ids

    def _insert_many(self, tx: Any, items: list[MemoryInput], now: float) -> list[int]:
        ids = [
            int(r[0])
            for r in tx.execute(
                "SELECT nextval(pg_get_serial_sequence('memories', 'id'))"
                " FROM generate_series(1, %s)",
                (len(items),),
            )
        ]
        cols = ", ".join(_COPY_COLUMNS)
        with tx.cursor().copy(f"COPY memories ({cols}) FROM STDIN") as copy:
            for memory_id, item in zip(ids, items, strict=True):
                words = index_text(item.content)
                project, *values = item.row(now)
                copy.write_row(
                    (
                        memory_id,
                        db_project(project),
                        *values,
                        has_cjk(item.content),
                        words.doc_len,
                        words.tsv,
                        words.tsv_simple,
                    )
                )
        links = [(item.session, i, item.project) for i, item in zip(ids, items, strict=True)]
        self._link_sessions(tx, [(s, i, p) for s, i, p in links if s], "created", now)
        return ids

    def _link_sessions(
        self, tx: Any, links: Sequence[tuple[str, int, str | None]], usage: str, now: float
    ) -> None:
        """Each (session, memory) gets a link row; a memory's session is the one of the
        memory's own project (as on SQLite), created on first use."""
        if not links:
            return
        by_session: dict[str, list[int]] = {}
        for session_id, memory_id, _ in links:
            by_session.setdefault(session_id, []).append(memory_id)
        tx.cursor().executemany(
            "INSERT INTO sessions (project_id, id, started_at)"
            " SELECT DISTINCT project_id, %s, %s::float8 FROM memories WHERE id = ANY(%s)"
            " ORDER BY project_id ON CONFLICT (project_id, id) DO NOTHING",
            [(s, now, sorted(ids)) for s, ids in sorted(by_session.items())],
        )
        tx.cursor().executemany(
            "INSERT INTO session_memories (project_id, session_id, memory_id, usage, created_at)"
            " SELECT project_id, %s, id, %s, %s FROM memories WHERE id = %s",
            [(s, usage, now, i) for s, i, _ in links],
        )

    def _write_embeddings(
        self,
        tx: Any,
        batch: EmbeddingBatch,
        rows: Sequence[tuple[int, MemoryInput]],
        now: float,
        *,
        replace: bool = True,
        fresh: bool = False,
    ) -> None:
        """Upsert the vectors of `rows` (memory id, input) for `batch`'s model.

        `fresh`: the memories were inserted by this transaction (no vector of theirs can
        exist yet, and each is in its input's project): the rows go straight into
        ``embeddings`` by one binary COPY, without the staging table and its join
        (ingest of pre-computed vectors, BENCHMARKS.md "PostgreSQL: second pass")."""
        values: list[tuple[Any, ...]] = []
        for memory_id, item in rows:
            chash = item.content_hash
            vec = batch.vectors.get(chash)
            if vec is None:
                continue
            v = Vector(vec)
            if v.data.shape != (batch.dim,):
                raise InvalidOptionError(
                    f"a vector of {v.data.shape[0]} dimensions for model {batch.model_id!r},"
                    f" which has {batch.dim}"
                )
            if fresh:
                values.append(
                    (db_project(item.project), memory_id, batch.model_id, batch.dim, chash, v, now)
                )
            else:
                values.append((memory_id, batch.model_id, batch.dim, chash, v, now))
        if not values:
            return
        if fresh:
            with tx.cursor().copy(
                "COPY embeddings (project_id, memory_id, model_id, dim, content_hash, vector,"
                " created_at) FROM STDIN (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["text", "int8", "text", "int4", "text", "vector", "float8"])
                for row in values:
                    copy.write_row(row)
            return
        conflict = (
            "DO UPDATE SET dim = excluded.dim, content_hash = excluded.content_hash,"
            " vector = excluded.vector, created_at = excluded.created_at"
            if replace
            else "DO NOTHING"
        )
        # Staged through COPY into a temporary table, then one INSERT ... SELECT joins the
        # memories for their project (the leading key of embeddings).
        tx.execute(
            "CREATE TEMP TABLE IF NOT EXISTS cortex_stage_embeddings ("
            " memory_id bigint, model_id text, dim integer, content_hash text, vector vector,"
            " created_at double precision) ON COMMIT DELETE ROWS"
        )
        with tx.cursor().copy("COPY cortex_stage_embeddings FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "text", "int4", "text", "vector", "float8"])
            for row in values:
                copy.write_row(row)
        tx.execute(
            "INSERT INTO embeddings (project_id, memory_id, model_id, dim, content_hash, vector,"
            " created_at) SELECT m.project_id, s.memory_id, s.model_id, s.dim, s.content_hash,"
            " s.vector, s.created_at FROM cortex_stage_embeddings s JOIN memories m"
            " ON m.id = s.memory_id ORDER BY s.memory_id"
            f" ON CONFLICT (project_id, memory_id, model_id) {conflict}"
        )
        tx.execute("TRUNCATE cortex_stage_embeddings")

    def update(
        self,
        memory_id: int,
        *,
        embeddings: EmbeddingBatch | None = None,
        on_write: EmbeddingBatch | None = None,
        **fields: Any,
    ) -> Memory:
        """Change some fields of a live memory; returns it as stored afterwards. The row is
        locked while the change is merged into it, so two updates never overwrite each
        other's fields with stale values."""
        check_updatable(fields)
        _check_id(memory_id)
        valid_until = validate.timestamp("valid_until", fields.get("valid_until"))
        if embeddings is None:
            embeddings = on_write  # the Engine's name for what is written with the row
        now = time.time()
        with self.transaction() as tx:
            rows = tx.execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = %s AND deleted_at IS NULL"
                " FOR UPDATE",
                (memory_id,),
            ).fetchall()
            if not rows:
                raise NotFoundError(f"no memory with id {memory_id}")
            current = row_to_memory(rows[0])
            merged = merge_update(current, fields)
            self._rewrite(tx, memory_id, merged, now)
            if "valid_until" in fields:
                tx.execute(
                    "UPDATE memories SET valid_until = %s WHERE id = %s",
                    (valid_until, memory_id),
                )
            if embeddings is not None:
                self._write_embeddings(
                    tx, embeddings, [(memory_id, merged)], now,
                    replace=merged.content != current.content,
                )  # fmt: skip
        return self.get(memory_id)

    def _rewrite(self, tx: Any, memory_id: int, item: MemoryInput, now: float) -> None:
        words = index_text(item.content)
        tx.execute(
            "UPDATE memories SET project_id = %s, content = %s, content_hash = %s, sector = %s,"
            " tier = %s, scope = %s, category = %s, salience = %s, confidence = %s,"
            " created_at = COALESCE(%s, created_at), updated_at = %s, metadata = %s,"
            " has_cjk = %s, chunk_index = COALESCE(%s, chunk_index), doc_len = %s,"
            " tsv = %s::tsvector, tsv_simple = %s::tsvector WHERE id = %s",
            (
                db_project(item.project),
                item.content,
                item.content_hash,
                item.sector,
                item.tier,
                item.scope,
                item.category,
                float(item.salience),
                float(item.confidence),
                item.created_at,
                now,
                item.metadata_json(),
                has_cjk(item.content),
                item.chunk_index,
                words.doc_len,
                words.tsv,
                words.tsv_simple,
                memory_id,
            ),
        )
        if item.session:
            self._link_sessions(tx, [(item.session, memory_id, item.project)], "updated", now)

    def sync_source(
        self,
        source_path: str,
        project: str | None,
        chunks: Sequence[MemoryInput],
        embeddings: EmbeddingBatch | None = None,
    ) -> SyncCounts:
        """Make the live memories of (`project`, `source_path`) equal `chunks`, in one
        transaction: the same rules as the SQLite store (unchanged chunks keep their id,
        counts and vector; changed ones update the memory at their position; chunks gone
        from the source are soft-deleted). Two importers of the same source queue on an
        advisory lock of (project, source) instead of both inserting its chunks."""
        now = time.time()
        with self.transaction() as tx:
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"cortex.source\x1f{db_project(project)}\x1f{source_path}",),
            )
            rows = tx.execute(
                f"SELECT {SYNC_COLUMNS} FROM memories"
                " WHERE project_id = %s AND source_path = %s AND deleted_at IS NULL"
                " ORDER BY chunk_index, id",
                (db_project(project), source_path),
            ).fetchall()
            plan = plan_sync(rows, chunks)
            kept = [(pick, chunk) for pick, chunk, _ in plan.kept]
            for pick, _, moved in plan.kept:
                if moved is not None:
                    tx.execute("UPDATE memories SET chunk_index = %s WHERE id = %s", (moved, pick))
            written: list[tuple[int, MemoryInput]] = []
            for target, chunk in plan.rewritten:
                self._rewrite(tx, target, chunk, now)
                written.append((target, chunk))
            if plan.fresh:
                ids = self._insert_many(tx, plan.fresh, now)
                written.extend(zip(ids, plan.fresh, strict=True))
            if plan.stale:
                tx.execute(
                    "UPDATE memories SET deleted_at = %s WHERE id = ANY(%s)", (now, plan.stale)
                )
            counts = plan.counts()
            if embeddings is not None:
                self._write_embeddings(tx, embeddings, written, now)
                self._write_embeddings(tx, embeddings, kept, now, replace=False)
        return counts

    def add_fact(
        self,
        memory_id: int,
        type: str,
        content: str,
        *,
        confidence: float,
        decay_rate: float,
        last_reinforced: float,
    ) -> int:
        now = time.time()
        _check_id(memory_id)
        with self.transaction() as tx:
            row = tx.execute(
                "INSERT INTO facts (project_id, memory_id, type, content, confidence, decay_rate,"
                " last_reinforced, created_at) SELECT project_id, id, %s, %s, %s, %s, %s, %s"
                " FROM memories WHERE id = %s AND deleted_at IS NULL RETURNING id",
                (type, content, confidence, decay_rate, last_reinforced, now, memory_id),
            ).fetchone()
        if row is None:
            raise NotFoundError(f"no memory with id {memory_id}")
        return int(row[0])

    def record_recall(
        self,
        rows: Sequence[tuple[int, int | None, float]],
        *,
        query: str | None,
        session_id: str | None,
        lens: str | None,
        reinforce: float,
        at: float | None = None,
    ) -> None:
        """One transaction after a search: a recall_log row per result ``(memory_id,
        fact_id, score)``; access counts and salience changed in place (no lost update when
        several processes recall the same memory at once); 'recalled' session links.
        `at`: when the search ran (default now)."""
        if not rows:
            return
        now = time.time() if at is None else at
        ids = sorted({m for m, _, _ in rows})
        with self.transaction() as tx:
            # The memories locked first, in id order: the log's foreign-key checks and the
            # update below then never lock them in two orders (that deadlocked).
            tx.execute(
                "SELECT id FROM memories WHERE id = ANY(%s) ORDER BY id FOR UPDATE", (ids,)
            ).fetchall()
            tx.cursor().executemany(
                "INSERT INTO recall_log (project_id, memory_id, fact_id, query, session_id, lens,"
                " score, recalled_at) SELECT project_id, id, %s, %s, %s, %s, %s, %s"
                " FROM memories WHERE id = %s",
                [(f, query, session_id, lens, s, now, m) for m, f, s in rows],
            )
            counts: dict[int, int] = {}
            for m, _, _ in rows:
                counts[m] = counts.get(m, 0) + 1
            tx.execute(
                "UPDATE memories m SET access_count = m.access_count + c.n, last_accessed = %s,"
                " salience = round(LEAST(1.0, m.salience + %s * c.n)::numeric, 6)::float8"
                " FROM (SELECT unnest(%s::bigint[]) AS id, unnest(%s::bigint[]) AS n) c"
                " WHERE m.id = c.id",
                (now, reinforce, ids, [counts[i] for i in ids]),
            )
            if session_id:
                self._link_sessions(
                    tx, [(session_id, m, None) for m, _, _ in rows], "recalled", now
                )

    # ---------------------------------------------------------------- reads

    def get_many(
        self, ids: Sequence[int], *, damaged: list[int] | None = None
    ) -> dict[int, Memory]:
        """The memories of `ids` (deleted ones too); a server's rows are typed, so none is
        damaged (`damaged` is SQLite's)."""
        if not ids:
            return {}
        return {
            int(row[0]): row_to_memory(row)
            for row in self.query(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ANY(%s)", (list(ids),)
            )
        }

    def backlog(self, model_id: str) -> list[tuple[int, str]]:
        """Live memories without a vector of `model_id`: (id, content), by id."""
        return [
            (int(i), c)
            for i, c in self.query(
                "SELECT m.id, m.content FROM memories m WHERE m.deleted_at IS NULL AND NOT EXISTS"
                " (SELECT 1 FROM embeddings e WHERE e.project_id = m.project_id"
                " AND e.memory_id = m.id AND e.model_id = %s) ORDER BY m.id",
                (model_id,),
            )
        ]

    def known_vectors(self, model_id: str, hashes: Sequence[str]) -> dict[str, Any]:
        """Vectors `model_id` already computed for texts of these content hashes."""
        if not hashes:
            return {}
        return {
            h: v
            for h, v in self.query(
                "SELECT DISTINCT ON (content_hash) content_hash, vector FROM embeddings"
                " WHERE model_id = %s AND content_hash = ANY(%s)",
                (model_id, list(hashes)),
            )
        }

    def write_vectors(self, batch: EmbeddingBatch, rows: Sequence[tuple[int, str]]) -> None:
        """Store `batch`'s vectors of memories (id, content) in one transaction."""
        with self.transaction() as tx:
            self._write_embeddings(
                tx, batch, [(i, MemoryInput(content=c)) for i, c in rows], time.time()
            )

    def embedding_count(self, model_id: str) -> int:
        return int(
            self.query(
                "SELECT count(*) FROM embeddings e JOIN memories m ON m.project_id = e.project_id"
                " AND m.id = e.memory_id WHERE e.model_id = %s AND m.deleted_at IS NULL",
                (model_id,),
            )[0][0]
        )

    # ---------------------------------------------------------------- search reads
    # The same methods as cortex.store.Store's: what the search pipeline reads.

    def rank_info(self, ids: Sequence[int], opts: Any) -> dict[int, Any]:
        from cortex.pg.filters import admitted

        return admitted(self, ids, opts)

    def allowed_ids(self, opts: Any) -> Any:
        """None: both retrievers apply the filters in their own SQL."""
        from cortex.pg.filters import where

        where(opts)  # an option this backend cannot apply is refused here, not ignored
        return None

    def list_filtered(self, opts: Any, limit: int) -> list[tuple[int, Any]]:
        from cortex.options import OrderBy
        from cortex.pg.filters import where

        predicate, params = where(opts)
        by_confidence = opts.order_by is OrderBy.CONFIDENCE
        order = "m.confidence DESC, m.id" if by_confidence else "m.created_at DESC, m.id DESC"
        if str(opts.order) == "asc":
            order = "m.confidence, m.id DESC" if by_confidence else "m.created_at, m.id"
        rows = self.query(
            f"SELECT m.id, {RANK_COLUMNS} FROM memories m WHERE {predicate}"
            f" ORDER BY {order} LIMIT %s",
            [*params, limit],
        )
        return [(int(r[0]), rank_info(r[1:])) for r in rows]

    def code_refs(self, ids: Sequence[int]) -> dict[int, list[Any]]:
        """Code references are SQLite-only for now: none."""
        return {}

    def referencing(self, keys: Sequence[str], opts: Any, limit: int) -> dict[int, Any]:
        """Code references are SQLite-only for now: no memory references a named file."""
        return {}

    def sessions_of(self, ids: Sequence[int]) -> dict[int, str]:
        """The session each memory was created in, for those created in one."""
        if not ids:
            return {}
        return {
            int(m): str(s)
            for m, s in self.query(
                "SELECT memory_id, MIN(session_id) FROM session_memories"
                " WHERE usage = 'created' AND memory_id = ANY(%s) GROUP BY memory_id",
                (list(ids),),
            )
        }

    def adjacent(self, ids: Sequence[int], documents: bool = True) -> dict[int, list[int]]:
        """As :meth:`cortex.store.Store.adjacent`: the live memories right before and after
        each of `ids` in its Markdown document (unless `documents` is False: none of them
        comes from one) and in the session it was created in."""
        out: dict[int, list[int]] = {}
        if not ids:
            return out
        wanted = list(dict.fromkeys(int(i) for i in ids))[:500]
        by_source = (
            []
            if not documents
            else self.query(
                "WITH src AS (SELECT DISTINCT project_id, source_path FROM memories"
                " WHERE id = ANY(%s) AND (lower(source_path) LIKE '%%.md'"
                " OR lower(source_path) LIKE '%%.markdown')),"
                " seq AS (SELECT m.id, LAG(m.id) OVER w AS prev, LEAD(m.id) OVER w AS next"
                " FROM memories m JOIN src ON m.source_path = src.source_path"
                " AND m.project_id = src.project_id WHERE m.deleted_at IS NULL"
                " WINDOW w AS (PARTITION BY m.project_id, m.source_path"
                " ORDER BY m.chunk_index, m.id))"
                " SELECT id, prev, next FROM seq WHERE id = ANY(%s)",
                (wanted, wanted),
            )
        )
        by_session = self.query(
            "WITH ses AS (SELECT DISTINCT session_id FROM session_memories"
            " WHERE usage = 'created' AND memory_id = ANY(%s)),"
            " seq AS (SELECT m.id, LAG(m.id) OVER w AS prev, LEAD(m.id) OVER w AS next"
            " FROM session_memories sm JOIN ses ON sm.session_id = ses.session_id"
            " JOIN memories m ON m.project_id = sm.project_id AND m.id = sm.memory_id"
            " WHERE sm.usage = 'created' AND m.deleted_at IS NULL"
            " WINDOW w AS (PARTITION BY sm.session_id, m.project_id"
            " ORDER BY m.created_at, m.id))"
            " SELECT id, prev, next FROM seq WHERE id = ANY(%s)",
            (wanted, wanted),
        )
        for memory_id, prev, nxt in [*by_source, *by_session]:
            found = out.setdefault(int(memory_id), [])
            found.extend(int(x) for x in (prev, nxt) if x is not None and int(x) not in found)
        return out

    def facts_for(
        self, ids: Sequence[int], damaged: list[str] | None = None
    ) -> dict[int, list[tuple[Any, ...]]]:
        """Facts of the given memories by memory id: rows (id, memory_id, type, content,
        confidence, decay_rate, last_reinforced)."""
        out: dict[int, list[tuple[Any, ...]]] = {}
        if not ids:
            return out
        for row in self.query(
            "SELECT id, memory_id, type, content, confidence, decay_rate, last_reinforced"
            " FROM facts WHERE memory_id = ANY(%s) ORDER BY id",
            (list(ids),),
        ):
            row = (int(row[0]), int(row[1]), *row[2:])
            out.setdefault(row[1], []).append(row)
        return out

    def vector_of(self, memory_id: int, model_id: str) -> Any:
        """The memory's embedding of `model_id` (float32 array), or None."""
        rows = self.query(
            "SELECT vector FROM embeddings WHERE memory_id = %s AND model_id = %s",
            (memory_id, model_id),
        )
        return rows[0][0] if rows else None

    def metadata_values(self, key: str) -> dict[int, str]:
        """memory id -> the metadata value of `key` of every live memory that has one."""
        return {
            int(i): str(v)
            for i, v in self.query(
                "SELECT id, metadata::jsonb ->> %s FROM memories"
                " WHERE deleted_at IS NULL AND metadata::jsonb ? %s",
                (key, key),
            )
        }

    # ---------------------------------------------------------------- sessions and recall

    def start_session(self, session_id: str, project: str | None, summary: str | None) -> None:
        with self.transaction() as tx:
            tx.execute(
                "INSERT INTO sessions (project_id, id, started_at, summary)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (project_id, id) DO UPDATE SET"
                " summary = COALESCE(excluded.summary, sessions.summary)",
                (db_project(project), session_id, time.time(), summary),
            )

    def end_session(self, session_id: str, summary: str | None, project: str | None) -> None:
        with self.transaction() as tx:
            if project is None:
                projects = [
                    r[0]
                    for r in tx.execute(
                        "SELECT project_id FROM sessions WHERE id = %s ORDER BY project_id",
                        (session_id,),
                    ).fetchall()
                ]
                if len(projects) > 1:
                    shown = ", ".join(repr(api_project(p)) for p in projects)
                    raise InvalidOptionError(
                        f"session {session_id!r} exists in several projects ({shown});"
                        " pass project="
                    )
                stored = projects[0] if projects else ""
            else:
                stored = db_project(project)
            cur = tx.execute(
                "UPDATE sessions SET ended_at = %s, summary = COALESCE(%s, summary)"
                " WHERE project_id = %s AND id = %s",
                (time.time(), summary, stored, session_id),
            )
            if cur.rowcount == 0:
                raise NotFoundError(f"no session with id {session_id!r}")

    def link(self, memory_id: int, session_id: str, usage: str, project: str | None) -> None:
        with self.transaction() as tx:
            self._link_sessions(tx, [(session_id, memory_id, project)], usage, time.time())

    def supersede(self, old_id: int, new_id: int) -> None:
        now = time.time()
        with self.transaction() as tx:
            tx.execute(
                "UPDATE memories SET superseded_by = %s,"
                " valid_until = COALESCE(valid_until, %s) WHERE id = %s",
                (new_id, now, old_id),
            )
            tx.execute(
                "INSERT INTO memory_relationships (project_id, source_id, target_id, type,"
                " created_by, created_at) SELECT project_id, id, %s, 'SUPERSEDES', 'cortex', %s"
                " FROM memories WHERE id = %s ON CONFLICT DO NOTHING",
                (old_id, now, new_id),
            )

    def relate(self, source_id: int, target_id: int, type: str, created_by: str | None) -> None:
        with self.transaction() as tx:
            tx.execute(
                "INSERT INTO memory_relationships (project_id, source_id, target_id, type,"
                " created_by, created_at) SELECT project_id, id, %s, %s, %s, %s"
                " FROM memories WHERE id = %s ON CONFLICT DO NOTHING",
                (target_id, type, created_by, time.time(), source_id),
            )

    def created_sessions(self, ids: Sequence[int]) -> list[tuple[Any, ...]]:
        if not ids:
            return []
        rows = self.query(
            "SELECT sm.memory_id, s.id, s.project_id, s.started_at, s.ended_at, s.summary"
            " FROM session_memories sm JOIN memories m ON m.id = sm.memory_id"
            " AND m.project_id = sm.project_id"
            " JOIN sessions s ON s.id = sm.session_id AND s.project_id = m.project_id"
            " WHERE sm.usage = 'created' AND sm.memory_id = ANY(%s)"
            " ORDER BY sm.created_at DESC, sm.id DESC",
            (list(ids),),
        )
        return [(int(r[0]), r[1], api_project(r[2]), *r[3:]) for r in rows]

    def latest_session(self, memory_id: int, project: str | None) -> tuple[Any, ...] | None:
        rows = self.query(
            "SELECT s.id, s.project_id, s.started_at, s.ended_at, s.summary, sm.usage,"
            " (SELECT COUNT(DISTINCT x.memory_id) FROM session_memories x"
            "  WHERE x.session_id = s.id AND x.project_id = s.project_id)"
            " FROM session_memories sm JOIN sessions s ON s.id = sm.session_id"
            " AND s.project_id = sm.project_id"
            " WHERE sm.memory_id = %s AND s.project_id = %s"
            " ORDER BY sm.created_at DESC, sm.id DESC LIMIT 1",
            (memory_id, db_project(project)),
        )
        if not rows:
            return None
        r = rows[0]
        return (r[0], api_project(r[1]), *r[2:])

    def holding(
        self, ids: Sequence[int], excluded: Sequence[str], phrases: Sequence[str]
    ) -> set[int]:
        """As :meth:`cortex.store.Store.holding` (see cortex.pg.keyword.holding)."""
        from cortex.pg.keyword import holding

        return holding(self, ids, excluded, phrases)

    def around(self, anchor: Memory, before: int, after: int) -> tuple[list[Memory], list[Memory]]:
        created = self._stored_created(anchor)
        live = "deleted_at IS NULL AND project_id = %s"
        project = db_project(anchor.project)
        earlier = self.query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {live}"
            " AND (created_at < %s OR (created_at = %s AND id < %s))"
            " ORDER BY created_at DESC, id DESC LIMIT %s",
            (project, created, created, anchor.id, before),
        )
        later = self.query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {live}"
            " AND (created_at > %s OR (created_at = %s AND id > %s))"
            " ORDER BY created_at, id LIMIT %s",
            (project, created, created, anchor.id, after),
        )
        return [row_to_memory(r) for r in reversed(earlier)], [row_to_memory(r) for r in later]

    def sessions_touching(self, ids: Sequence[int], project: str | None) -> list[tuple[Any, ...]]:
        if not ids:
            return []
        rows = self.query(
            "SELECT DISTINCT s.id, s.project_id, s.started_at, s.ended_at, s.summary"
            " FROM session_memories sm JOIN sessions s ON s.id = sm.session_id"
            " WHERE sm.memory_id = ANY(%s) AND s.project_id = %s",
            (list(ids), db_project(project)),
        )
        return [(r[0], api_project(r[1]), *r[2:]) for r in rows]

    def related_counts(self, ids: Sequence[int]) -> dict[int, int]:
        if not ids:
            return {}
        return {
            int(i): int(n)
            for i, n in self.query(
                "SELECT id, SUM(n) FROM ("
                " SELECT r.source_id AS id, COUNT(*) AS n FROM memory_relationships r"
                " JOIN memories a ON a.id = r.source_id JOIN memories b ON b.id = r.target_id"
                " WHERE r.source_id = ANY(%s) AND a.project_id = b.project_id"
                " GROUP BY r.source_id UNION ALL"
                " SELECT r.target_id AS id, COUNT(*) AS n FROM memory_relationships r"
                " JOIN memories a ON a.id = r.source_id JOIN memories b ON b.id = r.target_id"
                " WHERE r.target_id = ANY(%s) AND a.project_id = b.project_id"
                " GROUP BY r.target_id) t GROUP BY id",
                (list(ids), list(ids)),
            )
        }

    def reinforce(self, ids: Sequence[int], amount: float) -> None:
        """Raise the salience of `ids` by `amount` (capped at 1.0) in place: no lost
        update when several processes reinforce at once."""
        if not ids:
            return
        with self.transaction() as tx:
            tx.execute(
                "UPDATE memories SET salience = round(LEAST(1.0, salience + %s)::numeric, 6)"
                "::float8 WHERE id = ANY(%s)",
                (amount, sorted(set(ids))),
            )

    def keyword_stats(self, project: str | None = None) -> tuple[int, int]:
        """(live documents, their total length in words), of `project` or of all."""
        if project is None:
            row = self.query("SELECT COALESCE(SUM(docs), 0), COALESCE(SUM(total_len), 0)"
                             " FROM keyword_stats")[0]  # fmt: skip
        else:
            row = self.query(
                "SELECT COALESCE(SUM(docs), 0), COALESCE(SUM(total_len), 0) FROM keyword_stats"
                " WHERE project_id = %s",
                (db_project(project),),
            )[0]
        return int(row[0]), int(row[1])

    def stats(self) -> dict[str, Any]:
        counts = self._counts()
        span = self.query(
            "SELECT MIN(created_at), MAX(created_at) FROM memories WHERE deleted_at IS NULL"
        )[0]
        size = self.query("SELECT pg_database_size(current_database())")[0][0]
        return {
            "path": redact(self.name),
            "backend": self.backend,
            "schema_version": self.schema_version(),
            **counts,
            "oldest": span[0],
            "newest": span[1],
            "size_bytes": int(size),
        }


def rank_info(row: Sequence[Any]) -> RankInfo:
    """A RankInfo from the RANK_COLUMNS of a row (the project as the API names it)."""
    return RankInfo(row[0], row[1], row[2], row[3], row[4], bool(row[5]),
                    api_project(row[6]), row[7])  # fmt: skip
