"""`cortex migrate SRC DST`: copy a cortex database between SQLite and PostgreSQL.

Every table (memories, facts, sessions, session links, relationships, the recall log,
embeddings of every model, import sources, lenses, meta) is copied with its ids, so the
same queries return the same ids on both sides. What one side derives from those is
derived again, not copied: the keyword indexes and their totals (FTS5 tables,
``keyword_totals``; ``tsvector`` columns, ``keyword_stats``), code references
(``memory_code``, from each memory's text) and documents (the whole texts of imported
files, from their chunks) in a SQLite destination, and the change logs each side keeps
for its own caches (``memory_changes``; ``cortex_changes``). The copy is:

* **idempotent**: rows are inserted with ON CONFLICT DO NOTHING / INSERT OR IGNORE, so a
  second run adds nothing;
* **resumable**: each table is copied in id order in batches of one transaction each,
  and the last id copied is written in the destination's ``meta`` in the same
  transaction (``migrate:<table>``), so a run that is stopped picks up after its last
  committed batch;
* **reported**: `progress(table, done, total)` after every batch.

Rows already in the destination stay as they are (a copy never overwrites).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np

from cortex.code import write_refs
from cortex.errors import InvalidOptionError, StorageError
from cortex.pg.db import Vector, is_postgres_url, redact
from cortex.pg.store import PgStore, api_project, db_project
from cortex.pg.text import index_text
from cortex.semantic import append_vectors, read_vectors, row_checksums
from cortex.store import Store, has_cjk
from cortex.vectors import encode_stored

__all__ = ["TABLES", "migrate"]

Progress = Callable[[str, int, int], None]

#: (table, SQLite key column, PostgreSQL key column), in an order that respects the
#: references between them.
TABLES: tuple[tuple[str, str, str], ...] = (
    ("sessions", "rowid", "project_id, id"),
    ("import_sources", "rowid", "import_project, source_path, project"),
    ("memories", "id", "id"),
    ("facts", "id", "id"),
    ("session_memories", "rowid", "id"),
    ("memory_relationships", "id", "id"),
    ("recall_log", "id", "id"),
    ("embeddings", "rowid", "memory_id"),
    ("lenses", "rowid", "name"),
)

BATCH = 1000

_MEMORY = (
    "id, project_id, content, content_hash, source_path, chunk_index, sector, tier, scope,"
    " category, salience, confidence, created_at, updated_at, valid_until, superseded_by,"
    " deleted_at, last_accessed, access_count, metadata"
)
_COLUMNS = {
    "sessions": "id, project_id, started_at, ended_at, summary",
    "import_sources": "source_path, import_project, project",
    "memories": _MEMORY,
    "facts": "id, memory_id, type, content, confidence, decay_rate, last_reinforced, created_at",
    "session_memories": "session_id, memory_id, usage, created_at",
    "memory_relationships": "id, source_id, target_id, type, created_by, created_at",
    "recall_log": "id, memory_id, fact_id, query, session_id, lens, score, recalled_at",
    "embeddings": "memory_id, model_id, dim, content_hash, vector, created_at",
    "lenses": "name, options, description, created_at, updated_at",
}


#: What is read from SQLite where it differs: each vector lives in the vector file, SQLite
#: holds its checksum (cortex.semantic, "the vector file").
_SQLITE_COLUMNS = {
    **_COLUMNS,
    "embeddings": "memory_id, model_id, dim, content_hash, checksum, created_at",
}


def migrate(
    src: str, dst: str, *, progress: Progress | None = None, batch: int = BATCH
) -> dict[str, int]:
    """Copy the cortex database `src` into `dst` (one a SQLite path, the other a
    ``postgresql://`` URL); returns the rows copied per table."""
    if is_postgres_url(src) == is_postgres_url(dst):
        raise InvalidOptionError(
            "migrate copies between SQLite and PostgreSQL: give one database file and one"
            " postgresql:// URL"
        )
    if not is_postgres_url(src) and not Path(src).expanduser().exists():
        raise StorageError(f"no database at {src}")
    if is_postgres_url(dst):
        with closing(_sqlite(src)) as conn, PgStore.open(dst) as pg:
            return _to_postgres(conn, pg, progress, batch, Path(src).expanduser().resolve())
    with PgStore.open(src, read_only=True) as pg:
        Store.open(dst).close()  # create and migrate the schema the SQLite way
        with closing(_sqlite(dst, writable=True)) as conn:
            copied = _to_sqlite(pg, conn, progress, batch, Path(dst).expanduser().resolve())
        with closing(Store.open(dst)) as store:
            store.rebuild_documents()  # the whole texts of the imported files
        return copied


def _sqlite(path: str, *, writable: bool = False) -> sqlite3.Connection:
    p = Path(path).expanduser().resolve()
    uri = p.as_uri() + ("" if writable else "?mode=ro")
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30.0)
        # Rows come from a consistent database in id order; a memory may name a newer
        # one (superseded_by) that the copy has not reached yet.
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.DatabaseError as exc:
        raise StorageError(f"{p} is not a cortex database ({exc})") from None
    return conn


# --------------------------------------------------------------------------- to PostgreSQL


def _pg_resume(pg: PgStore, table: str) -> int:
    rows = pg.query("SELECT value FROM meta WHERE key = %s", (f"migrate:{table}",))
    return int(rows[0][0]) if rows else 0


def _to_postgres(
    conn: sqlite3.Connection, pg: PgStore, progress: Progress | None, batch: int, path: Path
) -> dict[str, int]:
    copied: dict[str, int] = {}
    vectors: dict[str, dict[int, Any]] = {}  # model -> memory id -> stored row (f16)

    def vector_of(model: str, dim: int, memory_id: int) -> Any:
        if model not in vectors:
            vectors[model] = read_vectors(conn, path, model, dim)
        return vectors[model].get(memory_id)

    for table, skey, _ in TABLES:
        # `table` and `skey` are identifiers of the fixed TABLES list (SQLite binds values,
        # not names); every value below is a parameter.
        total = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        after = _pg_resume(pg, table)
        done = conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {skey} <= ?", (after,)).fetchone()[
            0
        ]
        copied[table] = 0
        sql = (
            f"SELECT {skey}, {_SQLITE_COLUMNS[table]} FROM {table} WHERE {skey} > ?"
            f" ORDER BY {skey} LIMIT ?"
        )
        while True:
            rows = conn.execute(sql, (after, batch)).fetchall()
            if not rows:
                break
            after = rows[-1][0]
            with pg.transaction() as tx:
                copied[table] += _pg_insert(tx, table, rows, vector_of)
                tx.execute(
                    "INSERT INTO meta (key, value) VALUES (%s, %s)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (f"migrate:{table}", str(after)),
                )
            done += len(rows)
            if progress is not None:
                progress(table, done, total)
        if progress is not None and total == 0:
            progress(table, 0, 0)
    with pg.transaction() as tx:
        for key, value in conn.execute("SELECT key, value FROM meta WHERE key != 'schema_version'"):
            tx.execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
                (f"sqlite:{key}", value),
            )
        # New rows continue after the copied ids.
        for table in (
            "memories",
            "facts",
            "session_memories",
            "memory_relationships",
            "recall_log",
        ):
            tx.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                f" GREATEST((SELECT MAX(id) FROM {table}), 1))"
            )
    return copied


def _pg_insert(
    tx: Any, table: str, rows: Sequence[tuple[Any, ...]], vector_of: Callable[..., Any]
) -> int:
    cur = tx.cursor()
    if table == "sessions":
        data = [(r[1], db_project(r[2]), r[3], r[4], r[5]) for r in rows]
        cur.executemany(
            "INSERT INTO sessions (id, project_id, started_at, ended_at, summary)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            data,
        )
    elif table == "import_sources":
        cur.executemany(
            "INSERT INTO import_sources (source_path, import_project, project)"
            " VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
            [(r[1], db_project(r[2]), db_project(r[3])) for r in rows],
        )
    elif table == "memories":
        data = []
        for r in rows:
            v = r[1:]
            words = index_text(v[2])
            data.append(
                (
                    v[0], db_project(v[1]), *v[2:19], v[19] or "{}", has_cjk(v[2]),
                    words.doc_len, words.tsv, words.tsv_simple,
                )
            )  # fmt: skip
        cur.executemany(
            f"INSERT INTO memories ({_MEMORY}, has_cjk, doc_len, tsv, tsv_simple) VALUES"
            f" ({', '.join(['%s'] * 24)}) ON CONFLICT DO NOTHING",
            data,
        )
    elif table == "facts":
        cur.executemany(
            "INSERT INTO facts (project_id, id, memory_id, type, content, confidence,"
            " decay_rate, last_reinforced, created_at) SELECT m.project_id, %s, m.id, %s, %s,"
            " %s, %s, %s, %s FROM memories m WHERE m.id = %s ON CONFLICT DO NOTHING",
            [(r[1], r[3], r[4], r[5], r[6], r[7], r[8], r[2]) for r in rows],
        )
    elif table == "session_memories":
        cur.executemany(
            "INSERT INTO session_memories (project_id, id, session_id, memory_id, usage,"
            " created_at) SELECT m.project_id, %s, %s, m.id, %s, %s FROM memories m"
            " WHERE m.id = %s ON CONFLICT DO NOTHING",
            [(r[0], r[1], r[3], r[4], r[2]) for r in rows],
        )
    elif table == "memory_relationships":
        cur.executemany(
            "INSERT INTO memory_relationships (project_id, id, source_id, target_id, type,"
            " created_by, created_at) SELECT m.project_id, %s, m.id, %s, %s, %s, %s"
            " FROM memories m WHERE m.id = %s ON CONFLICT DO NOTHING",
            [(r[1], r[3], r[4], r[5], r[6], r[2]) for r in rows],
        )
    elif table == "recall_log":
        cur.executemany(
            "INSERT INTO recall_log (project_id, id, memory_id, fact_id, query, session_id,"
            " lens, score, recalled_at) SELECT m.project_id, %s, m.id, %s, %s, %s, %s, %s, %s"
            " FROM memories m WHERE m.id = %s ON CONFLICT DO NOTHING",
            [(r[1], r[3], r[4], r[5], r[6], r[7], r[8], r[2]) for r in rows],
        )
    elif table == "lenses":  # options as saved: project names as the API spells them
        cur.executemany(
            "INSERT INTO lenses (name, options, description, created_at, updated_at)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            [tuple(r[1:]) for r in rows],
        )
    elif table == "embeddings":  # each vector from the file, checked against its checksum
        found = [(r, vector_of(r[2], r[3], r[1])) for r in rows]
        missing = [r[1] for r, v in found if v is None]
        if missing:
            raise StorageError(
                f"the vectors of {len(missing)} memories (first: {missing[0]}) are missing or"
                " damaged in the vector file; run `cortex reindex` on the SQLite database"
                " first (it embeds the model's again and reports supplied ones it lost)"
            )
        cur.executemany(
            "INSERT INTO embeddings (project_id, memory_id, model_id, dim, content_hash,"
            " vector, created_at) SELECT m.project_id, m.id, %s, %s, %s, %s, %s"
            " FROM memories m WHERE m.id = %s ON CONFLICT DO NOTHING",
            [(r[2], r[3], r[4], Vector(v.astype(np.float32)), r[6], r[1]) for r, v in found],
        )
    return len(rows)


# --------------------------------------------------------------------------- to SQLite


def _to_sqlite(
    pg: PgStore, conn: sqlite3.Connection, progress: Progress | None, batch: int, path: Path
) -> dict[str, int]:
    copied: dict[str, int] = {}
    for table, _, _ in TABLES:
        total = int(pg.query(f"SELECT count(*) FROM {table}")[0][0])
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (f"migrate:{table}",)).fetchone()
        after: Any = _decode_key(table, row[0]) if row else None
        copied[table] = 0
        done = 0
        if after is not None:
            done = int(
                pg.query(f"SELECT count(*) FROM {table} WHERE {_pg_after(table)}", after)[0][0]
            )
        while True:
            where = f"WHERE {_pg_after(table)}" if after is not None else ""
            rows = pg.query(
                f"SELECT {_pg_key(table)}, {_pg_columns(table)} FROM {table} {where}"
                f" ORDER BY {_pg_key(table)} LIMIT %s",
                [*(after or ()), batch],
            )
            if not rows:
                break
            after = _row_key(table, rows[-1])
            conn.execute("BEGIN IMMEDIATE")
            try:
                copied[table] += _sqlite_insert(conn, table, rows, path)
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?)"
                    " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (f"migrate:{table}", _encode_key(after)),
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            done += len(rows)
            if progress is not None:
                progress(table, done, total)
    return copied


_PG_KEYS = {
    "embeddings": ("memory_id", "model_id"),
    "sessions": ("project_id", "id"),
    "import_sources": ("import_project", "source_path", "project"),
    "lenses": ("name",),
}


def _pg_key(table: str) -> str:
    return ", ".join(_PG_KEYS.get(table, ("id",)))


def _pg_after(table: str) -> str:
    cols = _PG_KEYS.get(table, ("id",))
    return f"({', '.join(cols)}) > ({', '.join(['%s'] * len(cols))})"


def _row_key(table: str, row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(row[: len(_PG_KEYS.get(table, ("id",)))])


def _encode_key(key: tuple[Any, ...]) -> str:
    import json

    return json.dumps(list(key))


def _decode_key(table: str, value: str) -> tuple[Any, ...]:
    import json

    return tuple(json.loads(value))


def _pg_columns(table: str) -> str:
    if table == "session_memories":
        return "session_id, memory_id, usage, created_at"
    return _COLUMNS[table]


def _sqlite_insert(
    conn: sqlite3.Connection, table: str, rows: Sequence[tuple[Any, ...]], path: Path
) -> int:
    project = api_project

    data: list[tuple[Any, ...]]
    if table == "import_sources":
        data = [(r[3], project(r[4]), project(r[5])) for r in rows]
        sql = (
            "INSERT OR IGNORE INTO import_sources (source_path, import_project, project)"
            " VALUES (?, ?, ?)"
        )
    elif table == "sessions":  # after its key (project_id, id)
        data = [(r[2], project(r[3]), r[4], r[5], r[6]) for r in rows]
        sql = (
            "INSERT OR IGNORE INTO sessions (id, project_id, started_at, ended_at, summary)"
            " VALUES (?, ?, ?, ?, ?)"
        )
    elif table == "memories":
        data = [(*r[1:2], project(r[2]), *r[3:21], int(has_cjk(r[3]))) for r in rows]
        sql = (
            f"INSERT OR IGNORE INTO memories ({_MEMORY}, has_cjk) VALUES ({', '.join(['?'] * 21)})"
        )
    elif table == "session_memories":
        data = [(r[0], *r[1:]) for r in rows]
        sql = (
            "INSERT OR IGNORE INTO session_memories (rowid, session_id, memory_id, usage,"
            " created_at) VALUES (?, ?, ?, ?, ?)"
        )
    elif table == "embeddings":  # checksums in SQLite, the rows in the vector file
        groups: dict[tuple[str, int], list[Any]] = {}
        for r in rows:
            groups.setdefault((str(r[3]), int(r[4])), []).append(r)
        new: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
        for key, group in groups.items():
            # each model's rows stored and checksummed in one call
            stored = encode_stored(np.asarray([r[6] for r in group], dtype=np.float32))
            checks = row_checksums(np.frombuffer(b"".join(stored), "<f2").reshape(len(stored), -1))
            for r, half, check in zip(group, stored, checks.tolist(), strict=True):
                cur = conn.execute(
                    "INSERT OR IGNORE INTO embeddings (memory_id, model_id, dim, content_hash,"
                    " checksum, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (r[2], r[3], r[4], r[5], check, r[7]),
                )
                if cur.rowcount:
                    new.setdefault(key, []).append((int(r[2]), half))
        for (model, dim), got in new.items():
            half_rows = np.frombuffer(b"".join(h for _, h in got), dtype="<f2").reshape(-1, dim)
            append_vectors(conn, path, model, dim, [i for i, _ in got], half_rows)
        return sum(len(g) for g in new.values())
    else:
        cols = _COLUMNS[table]
        data = [tuple(r[1:]) for r in rows]
        sql = f"INSERT OR IGNORE INTO {table} ({cols}) VALUES ({', '.join(['?'] * len(data[0]))})"
    before = conn.total_changes
    conn.executemany(sql, data)
    copied = conn.total_changes - before
    if table == "memories":  # what SQLite derives from a memory's text when it is written
        write_refs(conn, [(r[1], r[3]) for r in rows], replace=False)
    return copied


def describe(url_or_path: str) -> str:
    """How a database is named in messages: a path as given, a URL without its password."""
    return redact(url_or_path) if is_postgres_url(url_or_path) else url_or_path
