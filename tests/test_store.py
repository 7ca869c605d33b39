"""The SQLite store: WAL, migrations, writes in transactions, soft delete, FTS kept in step."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

import cortex
from cortex.errors import InvalidOptionError, NotFoundError, StorageError
from cortex.store import SCHEMA_VERSION, Store

KW = cortex.Options(mode="keyword")


def test_database_is_wal_with_busy_timeout_and_schema_version(engine: cortex.Engine) -> None:
    conn = engine.store.conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000
    assert engine.store.schema_version() == SCHEMA_VERSION


def test_every_table_of_the_data_model_exists(engine: cortex.Engine) -> None:
    names = {r[0] for r in engine.store.query("SELECT name FROM sqlite_master")}
    for table in (
        "memories", "memories_fts", "memories_exact", "memories_trigram", "facts", "sessions",
        "session_memories", "memory_relationships", "recall_log", "embeddings", "meta",
    ):  # fmt: skip
        assert table in names


def test_reopen_does_not_migrate_again(db_path: Path) -> None:
    with cortex.open(db_path) as e:
        memory_id = e.add("persisted across opens")
    with cortex.open(db_path) as e:
        assert e.get(memory_id).content == "persisted across opens"
        assert e.store.schema_version() == SCHEMA_VERSION


def test_newer_schema_is_refused(db_path: Path) -> None:
    cortex.open(db_path).close()
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(StorageError, match="newer than this cortex"):
        cortex.open(db_path)


def test_add_get_update_delete(engine: cortex.Engine) -> None:
    memory_id = engine.add(
        "Use blue-green deploys", project="p", scope="project:p", category="rule",
        salience=0.7, confidence=0.9, metadata={"by": "test"},
    )  # fmt: skip
    memory = engine.get(memory_id)
    assert (memory.project, memory.scope, memory.category) == ("p", "project:p", "rule")
    assert memory.salience == 0.7 and memory.confidence == 0.9
    assert memory.metadata == {"by": "test"}
    assert memory.created_at is not None

    updated = engine.update(memory_id, content="Use canary deploys", confidence=0.5)
    assert updated.content == "Use canary deploys"
    assert updated.confidence == 0.5
    assert updated.created_at == memory.created_at
    # the keyword index followed the update
    assert [r.memory.id for r in engine.search("canary", KW)] == [memory_id]
    assert list(engine.search("blue", KW)) == []

    engine.delete(memory_id)
    with pytest.raises(NotFoundError):
        engine.get(memory_id)
    assert list(engine.search("canary", KW)) == []
    # soft: the row is still in the file
    assert engine.store.get(memory_id, include_deleted=True).deleted_at is not None
    with pytest.raises(NotFoundError):
        engine.delete(memory_id)


def test_soft_deleted_memory_leaves_the_keyword_indexes(engine: cortex.Engine) -> None:
    keep = engine.add("alpha release notes")
    gone = engine.add("alpha 数据库 notes")
    engine.delete(gone)
    docs = {r[0] for r in engine.store.query("SELECT id FROM memories_fts_docsize")}
    assert docs == {keep}
    assert engine.store.query("SELECT COUNT(*) FROM memories_trigram_docsize")[0][0] == 0


def test_batch_add_is_one_transaction(engine: cortex.Engine) -> None:
    with pytest.raises(InvalidOptionError):
        engine.add_many([{"content": "fine"}, {"content": "bad", "salience": 7.0}])
    assert engine.stats()["memories"] == 0
    ids = engine.add_many([{"content": f"memory {i}"} for i in range(100)])
    assert len(ids) == len(set(ids)) == 100
    assert engine.stats()["memories"] == 100


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"content": ""}, "empty"),
        ({"content": "   "}, "empty"),
        ({"content": "a\x00b"}, "NUL"),
        ({"content": "x" * 1_000_001}, "limit"),
        ({"content": "ok", "confidence": float("nan")}, "confidence"),
        ({"content": "ok", "salience": -0.1}, "salience"),
        ({"content": "ok", "metadata": ["not", "a", "dict"]}, "metadata"),
        ({"content": "ok", "metadata": {"x": object()}}, "JSON"),
    ],
)
def test_bad_memories_are_refused(engine: cortex.Engine, fields: dict, message: str) -> None:
    with pytest.raises(InvalidOptionError, match=message):
        engine.add_many([fields])
    assert engine.stats()["memories"] == 0


def test_corrupt_file_is_a_storage_error(tmp_path: Path) -> None:
    bad = tmp_path / "junk.db"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StorageError, match="not a cortex database"):
        cortex.open(bad)
    assert bad.read_bytes() == b"this is not a database" * 100


def test_directory_and_missing_read_only_paths(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="directory"):
        cortex.open(tmp_path)
    with pytest.raises(StorageError, match="no database"):
        cortex.open(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()


def test_read_only_engine_searches_but_refuses_writes(db_path: Path) -> None:
    with cortex.open(db_path) as e:
        e.add("read only memory")
    with cortex.open(db_path, read_only=True) as ro:
        assert len(ro.search("memory", KW)) == 1
        with pytest.raises(StorageError, match="read-only"):
            ro.add("nope")


def test_threads_share_an_engine(engine: cortex.Engine) -> None:
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(20):
                engine.add(f"thread {n} memory {i} zebra")
                engine.search("zebra", KW)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert engine.stats()["memories"] == 80


def test_two_stores_on_one_file_see_each_other(db_path: Path) -> None:
    a = Store.open(db_path)
    b = Store.open(db_path)
    try:
        from cortex.store import MemoryInput

        memory_id = a.add(MemoryInput(content="written by a"))
        assert b.get(memory_id).content == "written by a"
    finally:
        a.close()
        b.close()


def test_a_version_1_file_is_read_read_only_and_migrated_when_opened_writable(
    db_path: Path,
) -> None:
    from cortex.store import EXACT_TOKENIZER, MIGRATIONS, STEMMED_TOKENIZER, _statements

    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    script = MIGRATIONS[0].replace("{stemmed}", STEMMED_TOKENIZER)
    for statement in _statements(script.replace("{exact}", EXACT_TOKENIZER)):
        conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    conn.execute(
        "INSERT INTO memories (content, content_hash, created_at, updated_at)"
        " VALUES ('a version one memory', 'h', 0, 0)"
    )
    conn.commit()
    conn.close()
    with cortex.open(db_path, read_only=True, embedder=None, keyword_index="on") as e:
        assert e.store.schema_version() == 1
        assert [r.memory.content for r in e.search("version", mode="keyword")] == [
            "a version one memory"
        ]
        assert e.keyword_index.policy == "off"  # no change log to follow writes with
    with cortex.open(db_path, embedder=None, keyword_index="on") as e:
        assert e.store.schema_version() == SCHEMA_VERSION
        new = e.add("another version memory")
        got = {r.memory.id for r in e.search("version", mode="keyword")}
        assert new in got and len(got) == 2
        assert e.keyword_index.ready()


def _fts_rows(engine: cortex.Engine, table: str) -> int:
    return engine.store.query(f"SELECT COUNT(*) FROM {table}_docsize")[0][0]


def test_bulk_insert_indexes_every_row_and_leaves_no_flag(engine: cortex.Engine) -> None:
    """add_many writes its keyword-index rows in one statement per index; the rows are
    the same as the per-row trigger's, and the flag that mutes the trigger never stays."""
    engine.add("written alone, through the trigger")
    ids = engine.add_many(
        [{"content": "deployment of the billing service"}, {"content": "数据库 索引 优化"}]
    )
    assert ids == [ids[0], ids[0] + 1]
    assert not engine.store.query("SELECT 1 FROM meta WHERE key = 'bulk_insert'")
    assert _fts_rows(engine, "memories_fts") == _fts_rows(engine, "memories_exact") == 3
    assert _fts_rows(engine, "memories_trigram") == 1  # the CJK one only
    kw = cortex.Options(mode="keyword")
    assert [r.memory.id for r in engine.search("billing", kw)] == [ids[0]]
    assert [r.memory.id for r in engine.search("deploy*", kw)] == [ids[0]]
    assert [r.memory.id for r in engine.search("数据库", kw)] == [ids[1]]
    engine.delete(ids[0])  # the delete trigger removes what the bulk statement added
    assert _fts_rows(engine, "memories_fts") == 2
    assert not engine.search("billing", kw)
    check = engine.store.query("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
    assert check == []


def test_bulk_insert_keeps_tokens_totals_and_change_log_as_the_triggers_do(
    engine: cortex.Engine,
) -> None:
    """The bulk path writes memories.tokens, keyword_totals and memory_changes itself (its
    insert triggers stand aside): the same as a memory written alone gets."""
    store = engine.store
    alone = engine.add("written alone, through the triggers", project="a")
    ids = engine.add_many(
        [
            {"content": "deployment of the billing service", "project": "a"},
            {"content": "the billing service deploys twice a day", "project": "b"},
            {"content": "no project here, only words and more words"},
        ]
    )
    tokens = dict(store.query("SELECT id, tokens FROM memories"))
    assert tokens == {alone: 5, ids[0]: 5, ids[1]: 7, ids[2]: 8}
    totals = sorted(store.query("SELECT project, docs, tokens FROM keyword_totals"))
    assert totals == [("\x00", 1, 8), ("a", 2, 10), ("b", 1, 7)]
    store.rebuild_keyword_totals()  # a recount from FTS5's own records agrees
    assert sorted(store.query("SELECT project, docs, tokens FROM keyword_totals")) == totals
    assert dict(store.query("SELECT id, tokens FROM memories")) == tokens
    log = [r[0] for r in store.query("SELECT memory_id FROM memory_changes ORDER BY seq")]
    assert log == [alone, *ids]
    engine.delete(ids[1])
    assert sorted(store.query("SELECT project, docs, tokens FROM keyword_totals")) == [
        ("\x00", 1, 8),
        ("a", 2, 10),
        ("b", 0, 0),
    ]


def test_bulk_insert_leaves_the_schema_and_its_triggers_as_they_were(
    engine: cortex.Engine,
) -> None:
    """The bulk path drops the insert triggers for its rows and creates them again inside
    its transaction: afterwards, and after a failure half-way, the schema is unchanged and
    a memory written alone is indexed by the triggers."""
    from cortex.store import MemoryInput

    def schema() -> list[tuple[str, str, str]]:
        return sorted(engine.store.query("SELECT type, name, sql FROM sqlite_master"))

    before = schema()
    assert engine.add_many([{"content": "first bulk row"}, {"content": "second bulk row"}])
    assert schema() == before

    def fail(tx: object, ids: list[int], items: list[MemoryInput]) -> None:
        raise RuntimeError("the disk is on fire")

    with pytest.raises(RuntimeError, match="on fire"):
        engine.store.add_many([MemoryInput("rolled back"), MemoryInput("gone too")], after=fail)
    assert schema() == before
    assert engine.store.query("SELECT COUNT(*) FROM memories")[0][0] == 2
    alone = engine.add("a lonely memory written through the triggers")
    assert [r.memory.id for r in engine.search("lonely", mode="keyword")] == [alone]
    assert engine.store.query("SELECT memory_id FROM memory_changes ORDER BY seq DESC")[0] == (
        alone,
    )


def test_a_failed_bulk_insert_leaves_nothing(engine: cortex.Engine) -> None:
    before = engine.store.query("SELECT COUNT(*) FROM memories")[0][0]
    with pytest.raises(InvalidOptionError):
        engine.add_many([{"content": "fine"}, {"content": "   "}])
    assert engine.store.query("SELECT COUNT(*) FROM memories")[0][0] == before
    assert not engine.store.query("SELECT 1 FROM meta WHERE key = 'bulk_insert'")


def test_add_many_with_vectors_checks_and_stores_them(engine: cortex.Engine, embedder) -> None:
    import numpy as np

    texts = ["we deploy with a blue-green switch", "alice drinks green tea every morning"]
    vecs = embedder.embed_batch(texts)
    records = [{"content": t} for t in texts]
    bad = [
        (vecs[:1], "shape"),
        (vecs[:, :100], "shape"),
        (np.where(np.arange(384) == 3, np.nan, vecs), "NaN"),
        (np.zeros_like(vecs), "zero"),
        ("not numbers", "array of numbers"),
    ]
    for value, message in bad:
        with pytest.raises(InvalidOptionError, match=message):
            engine.add_many(records, vectors=value)
    with pytest.raises(InvalidOptionError, match="model"):
        engine.add_many(records, vectors=vecs, model_id="another-model@0")
    assert engine.store.query("SELECT COUNT(*) FROM memories")[0][0] == 0
    ids = engine.add_many(records, vectors=vecs * 3.0, model_id=engine.model_id)
    stored = engine.store.query(
        "SELECT memory_id, model_id, supplied FROM embeddings ORDER BY memory_id"
    )
    assert [r[0] for r in stored] == ids and {r[1] for r in stored} == {engine.model_id}
    assert {r[2] for r in stored} == {1}  # supplied by the caller
    # stored as the unit vector (the scale is not a direction) rounded to float16
    unit = vecs[1] / np.linalg.norm(vecs[1])
    from .vector_truth import stored_vector

    half = stored_vector(engine, ids[1])
    np.testing.assert_allclose(half, unit, rtol=2**-11, atol=1e-7)
    hits = engine.search("what does alice drink", mode="semantic", explain=True)
    assert hits[0].memory.id == ids[1]
    assert hits[0].explain is not None
    cosine = float(vecs[1] @ embedder.embed_query("what does alice drink"))
    assert abs(hits[0].explain["cosine"] - cosine) < 1e-4


@pytest.mark.parametrize("n", [1, 237])
def test_a_bulk_write_logs_every_memory_in_order(engine: cortex.Engine, n: int) -> None:
    # the change log of a bulk write: one row a memory, in the order written
    before = engine.store.query("SELECT COALESCE(MAX(seq), 0) FROM memory_changes")[0][0]
    ids = engine.add_many({"content": f"note {i} about the deploy"} for i in range(n))
    log = engine.store.query(
        "SELECT memory_id FROM memory_changes WHERE seq > ? ORDER BY seq", (before,)
    )
    assert [m for (m,) in log] == ids
