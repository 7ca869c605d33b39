"""The PostgreSQL store on a real server: schema, writes, reads, counters, redaction."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from cortex.errors import InvalidOptionError, NotFoundError, StorageError
from cortex.pg import schema
from cortex.pg.db import redact, redact_text
from cortex.pg.store import EmbeddingBatch, PgStore
from cortex.store import MemoryInput, content_hash

TABLES = (
    "memories",
    "keyword_stats",
    "facts",
    "session_memories",
    "memory_relationships",
    "recall_log",
    "embeddings",
)


@pytest.fixture
def store(pg_url: str):
    with PgStore.open(pg_url) as s:
        yield s


def test_redact_hides_every_form_of_password() -> None:
    assert redact("postgresql://bob:s3cret@db.example/app") == "postgresql://bob:***@db.example/app"
    assert "s3cret" not in redact("postgresql://bob@h/app?password=s3cret&sslmode=require")
    assert "sslmode=require" in redact("postgresql://bob@h/app?password=s3cret&sslmode=require")
    assert redact("postgresql://h/app") == "postgresql://h/app"
    url = "postgresql://bob:p%40ss@h/app"
    assert "p@ss" not in redact_text("failed for p@ss and password=p@ss", url)


def test_connection_errors_never_show_the_password(tmp_path) -> None:
    url = f"postgresql://bob:hunter2secret@/nodb?host={tmp_path}&connect_timeout=2"
    with pytest.raises(StorageError) as err:
        PgStore.open(url)
    assert "hunter2secret" not in str(err.value)
    assert "bob:***@" in str(err.value)


def test_schema_version_and_idempotent_open(store: PgStore, pg_url: str) -> None:
    assert store.schema_version() == schema.SCHEMA_VERSION
    with PgStore.open(pg_url) as again:  # a second open migrates nothing
        assert again.schema_version() == schema.SCHEMA_VERSION
    assert store.query("SELECT count(*) FROM cortex_schema")[0][0] == schema.SCHEMA_VERSION


def test_project_id_leads_every_key_and_btree_index(store: PgStore) -> None:
    rows = store.query(
        "SELECT c.relname, i.relname, am.amname, a.attname FROM pg_index x"
        " JOIN pg_class c ON c.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid"
        " JOIN pg_am am ON am.oid = i.relam"
        " LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = x.indkey[0]"
        " WHERE c.relname = ANY(%s) AND x.indisprimary",
        (list(TABLES),),
    )
    assert {r[0] for r in rows} == set(TABLES)
    assert all(r[3] == "project_id" for r in rows), rows
    unique = store.query(
        "SELECT i.relname, a.attname FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid"
        " JOIN pg_class i ON i.oid = x.indexrelid"
        " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = x.indkey[0]"
        " WHERE c.relname = ANY(%s) AND x.indisunique",
        (list(TABLES),),
    )
    # A distributed table's unique indexes must hold the distribution column.
    assert unique and all(r[1] == "project_id" for r in unique), unique


def test_add_get_update_delete(store: PgStore) -> None:
    ids = store.add_many(
        [
            MemoryInput("Deploy the auth service on Fridays", project="a", session="s1"),
            MemoryInput("No project here", metadata={"k": [1, 2]}),
        ]
    )
    first = store.get(ids[0])
    assert first.project == "a" and first.content.startswith("Deploy")
    second = store.get(ids[1])
    assert second.project is None and second.metadata == {"k": [1, 2]}
    assert set(store.get_many(ids)) == set(ids)
    changed = store.update(ids[0], content="Deploy on Mondays", salience=0.9, project="b")
    assert changed.content == "Deploy on Mondays" and changed.salience == 0.9
    assert changed.project == "b"
    # the children of the memory follow it to its new project (no orphaned rows)
    assert store.query(
        "SELECT project_id FROM session_memories WHERE memory_id = %s", (ids[0],)
    ) == [("b",)]
    store.delete(ids[1])
    with pytest.raises(NotFoundError):
        store.get(ids[1])
    assert store.get(ids[1], include_deleted=True).deleted_at is not None
    with pytest.raises(NotFoundError):
        store.delete(ids[1])
    with pytest.raises(InvalidOptionError):
        store.update(ids[0], colour="red")
    with pytest.raises(InvalidOptionError):
        store.get("1")  # type: ignore[arg-type]
    with pytest.raises(NotFoundError):
        store.get(2**70)


def test_update_checks_valid_until_as_sqlite_does(store: PgStore) -> None:
    """A valid_until that is no moment (a string, NaN, past the datetime range) is a typed
    error and changes nothing; a number is stored as given."""
    (mid,) = store.add_many([MemoryInput("Rotate the signing keys", project="a")])
    for bad in ("tomorrow", float("nan"), 1e300):
        with pytest.raises(InvalidOptionError):
            store.update(mid, content="changed", valid_until=bad)
        assert store.get(mid).content == "Rotate the signing keys"
        assert store.get(mid).valid_until is None
    when = store.update(mid, valid_until=1_900_000_000.0).valid_until
    assert when is not None and when.timestamp() == 1_900_000_000.0


def test_keyword_stats_follow_every_write(store: PgStore) -> None:
    ids = store.add_many(
        [MemoryInput(f"alpha beta gamma {i}", project="p" if i % 2 else None) for i in range(10)]
    )
    store.delete(ids[0])
    store.update(ids[1], content="one two")
    store.update(ids[3], project="q")
    truth = dict(
        ((p, (int(n), int(t))) for p, n, t in store.query(
            "SELECT project_id, count(*), sum(doc_len) FROM memories WHERE deleted_at IS NULL"
            " GROUP BY project_id"
        ))
    )  # fmt: skip
    assert store.keyword_stats("p") == truth["p"] and store.keyword_stats("q") == truth["q"]
    assert store.query(
        "SELECT sum(docs), sum(total_len) FROM keyword_stats WHERE project_id = ''"
    ) == [truth[""]]
    assert store.keyword_stats() == (
        sum(n for n, _ in truth.values()),
        sum(t for _, t in truth.values()),
    )


def test_sync_source_keeps_unchanged_chunks(store: PgStore) -> None:
    chunks = [MemoryInput(f"chunk {i}", project="p", source_path="notes.md") for i in range(3)]
    counts = store.sync_source("notes.md", "p", chunks)
    assert (counts.added, counts.updated, counts.unchanged, counts.removed) == (3, 0, 0, 0)
    before = {m.content: m.id for m in store.get_many(list(range(1, 4))).values()}
    edited = [chunks[0], MemoryInput("chunk one, edited", project="p", source_path="notes.md")]
    counts = store.sync_source("notes.md", "p", edited)
    assert (counts.added, counts.updated, counts.unchanged, counts.removed) == (0, 1, 1, 1)
    assert store.get(before["chunk 0"]).content == "chunk 0"
    assert store.get(before["chunk 1"]).content == "chunk one, edited"


def test_embeddings_written_with_their_memory_and_dimension_checked(store: PgStore) -> None:
    items = [MemoryInput("first"), MemoryInput("second", project="x")]
    vecs = {content_hash(i.content): np.arange(4, dtype=np.float32) + n for n, i in
            enumerate(items)}  # fmt: skip
    ids = store.add_many(items, EmbeddingBatch("m1", 4, vecs))
    rows = store.query("SELECT project_id, memory_id, vector FROM embeddings ORDER BY memory_id")
    assert [(r[0], r[1]) for r in rows] == [("", ids[0]), ("x", ids[1])]
    np.testing.assert_array_equal(rows[1][2], np.arange(4, dtype=np.float32) + 1)
    bad = {content_hash("third"): np.zeros(3, dtype=np.float32)}
    with pytest.raises(InvalidOptionError):
        store.add_many([MemoryInput("third")], EmbeddingBatch("m1", 4, bad))
    # all or nothing: the memory of the refused vector is not written either
    assert store.stats()["memories"] == 2


def test_concurrent_recalls_lose_no_count(store: PgStore) -> None:
    ids = store.add_many([MemoryInput(f"memory {i}") for i in range(5)])
    per_thread, threads = 20, 4

    def work() -> None:
        for _ in range(per_thread):
            store.record_recall(
                [(i, None, 0.5) for i in ids], query="q", session_id=None, lens=None,
                reinforce=0.001,
            )  # fmt: skip

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    for memory in store.get_many(ids).values():
        assert memory.access_count == per_thread * threads
        assert memory.salience == pytest.approx(0.5 + 0.001 * per_thread * threads)
    assert store.query("SELECT count(*) FROM recall_log")[0][0] == len(ids) * per_thread * threads


def test_stats_name_the_database_without_password(store: PgStore) -> None:
    store.add(MemoryInput("hello", project="a"))
    stats = store.stats()
    assert stats["memories"] == 1 and stats["projects"] == {"a": 1}
    assert stats["backend"] == "postgres" and stats["schema_version"] == schema.SCHEMA_VERSION


def test_read_only_refuses_writes(pg_url: str) -> None:
    PgStore.open(pg_url).close()
    with PgStore.open(pg_url, read_only=True) as ro, pytest.raises(StorageError):
        ro.add(MemoryInput("x"))


def test_empty_project_is_its_own_project(store: PgStore) -> None:
    from cortex.options import Mode, Options
    from cortex.pg import keyword

    ids = store.add_many(
        [MemoryInput("shared word", project=""), MemoryInput("shared word"),
         MemoryInput("shared word", project="\x1fx"), MemoryInput("shared word", project="x")]
    )  # fmt: skip
    assert [store.get(i).project for i in ids] == ["", None, "\x1fx", "x"]
    opts = Options(mode=Mode.KEYWORD, record=False)
    for project, wanted in (("", ids[0]), ("\x1fx", ids[2]), ("x", ids[3])):
        found = keyword.search(store, "shared", opts.replace(project=project), 10).hits
        assert [h.memory_id for h in found] == [wanted], project


def test_sync_source_keeps_the_ids_of_moved_chunks(store: PgStore) -> None:
    def chunks(*texts: str) -> list[MemoryInput]:
        return [MemoryInput(t, project="p", source_path="notes.md") for t in texts]

    store.sync_source("notes.md", "p", chunks("alpha", "charlie"))
    ids = {m.content: m.id for m in store.get_many([1, 2]).values()}
    counts = store.sync_source("notes.md", "p", chunks("alpha", "bravo", "charlie"))
    assert (counts.added, counts.updated, counts.unchanged, counts.removed) == (1, 0, 2, 0)
    moved = store.get(ids["charlie"])
    assert (moved.content, moved.chunk_index) == ("charlie", 2)
    rows = store.query(
        "SELECT content, chunk_index FROM memories WHERE deleted_at IS NULL ORDER BY chunk_index"
    )
    assert [tuple(r) for r in rows] == [("alpha", 0), ("bravo", 1), ("charlie", 2)]
