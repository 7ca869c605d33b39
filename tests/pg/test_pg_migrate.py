"""`cortex migrate`: SQLite -> PostgreSQL -> SQLite, every table, the same ids, resumable."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

import cortex
from cortex import keyword as lite_keyword
from cortex.options import Mode, Options
from cortex.pg import keyword, vectors
from cortex.pg.migrate import TABLES, migrate
from cortex.pg.store import PgStore
from cortex.semantic import append_vectors, read_vectors, row_checksums
from cortex.store import Store
from cortex.vectors import encode_stored
from tests.conftest import run_cli

OPTS = Options(mode=Mode.KEYWORD, record=False)


def _fill(path: Path) -> None:
    with cortex.open(path, embedder=None) as e:
        ids = [
            e.add(f"deploy note {i}: the auth service restarts on port {8000 + i}"
                  + (" (ops/deploy.sh)" if i % 4 == 0 else ""),
                  project="ops" if i % 3 else None, session="s1" if i % 2 else None)
            for i in range(25)
        ]  # fmt: skip
        e.add("東京タワーの近くでラーメンを食べた", project="travel")
        e.add_fact(ids[0], "config", "port 8000")
        e.supersede(ids[1], ids[2])
        e.relate(ids[3], ids[4])
        e.delete(ids[5])
        e.start_session("s2", project="ops", summary="a session")
        e.link(ids[6], "s2", "reinforced")
        e.search("deploy auth", limit=5)  # writes the recall log
        e.save_lens("ops-only", project="ops", min_confidence=0.5, description="ops notes")
        e.save_lens("everything", limit=7)
    rng = np.random.default_rng(1)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    for model, dim in (("model-a", 8), ("model-b", 4)):
        # as cortex stores them: the unit vector in f16 (encode_stored) in the vector
        # file, its checksum in SQLite; the round trip through pgvector's f32 must give
        # back the same bits
        half = np.frombuffer(
            b"".join(encode_stored(rng.standard_normal((26, dim)))), dtype="<f2"
        ).reshape(26, dim)
        sums = row_checksums(half).tolist()
        for memory_id in range(1, 27):
            conn.execute(
                "INSERT INTO embeddings (memory_id, model_id, dim, content_hash, checksum,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (memory_id, model, dim, f"h{memory_id}", sums[memory_id - 1], 1.0),
            )
        append_vectors(conn, path, model, dim, list(range(1, 27)), half)
    conn.execute("COMMIT")
    conn.close()


def _dump(path: Path) -> dict[str, list[tuple]]:
    with sqlite3.connect(path) as conn:
        out = {}
        for table, key, _ in TABLES:
            cols = "*" if table != "session_memories" else "rowid, *"
            key = "id, project_id" if table == "sessions" else key
            out[table] = conn.execute(f"SELECT {cols} FROM {table} ORDER BY {key}").fetchall()
        out["memories"] = [r[:-1] for r in out["memories"]]  # has_cjk: recomputed
        for model, dim in (("model-a", 8), ("model-b", 4)):  # the vectors themselves
            out[f"vectors {model}"] = sorted(
                (i, v.tobytes()) for i, v in read_vectors(conn, path, model, dim).items()
            )
        return out


def test_round_trip_keeps_every_row_and_id(pg_url: str, tmp_path: Path) -> None:
    src, back = tmp_path / "src.db", tmp_path / "back.db"
    _fill(src)
    copied = migrate(str(src), pg_url)
    original = _dump(src)
    assert copied == {t: len(original[t]) for t, _, _ in TABLES}
    assert migrate(str(src), pg_url) == {t: 0 for t, _, _ in TABLES}  # idempotent
    lite = Store.open(src, read_only=True)
    with PgStore.open(pg_url) as pg:
        for query in ("deploy", "auth 8003", "ラーメン", "port*"):
            ours = [h.memory_id for h in keyword.search(pg, query, OPTS, 50).hits]
            theirs = [h.memory_id for h in lite_keyword.search(lite, query, OPTS, 50).hits]
            assert ours == theirs and ours, query
        first, blob = original["vectors model-a"][0]
        vec = np.frombuffer(blob, dtype="<f2").astype(np.float32)
        hits = vectors.search(pg, vec, "model-a", Options(), 3, exact=True)
        assert hits[0].memory_id == first
        # new memories continue after the copied ids
        assert pg.add_many([cortex.store.MemoryInput("new")])[0] == 27
    lite.close()
    migrate(pg_url, str(back))
    copy = _dump(back)
    copy["memories"] = [r for r in copy["memories"] if r[0] != 27]
    copy["embeddings"] = copy["embeddings"]
    assert len(original["vectors model-a"]) == len(original["vectors model-b"]) == 26
    for table in [*(t for t, _, _ in TABLES), "vectors model-a", "vectors model-b"]:
        if table == "embeddings":  # whether a vector was supplied is not known to pgvector
            copy[table] = [(*r[:5], None, *r[6:]) for r in copy[table]]
            original[table] = [(*r[:5], None, *r[6:]) for r in original[table]]
        assert sorted(copy[table], key=repr) == sorted(original[table], key=repr), table
    # what SQLite derives from the text (code references, documents) is derived again
    refs = "SELECT memory_id, ref, key, name, kind, line FROM memory_code ORDER BY 1, 2"
    with sqlite3.connect(src) as a, sqlite3.connect(back) as b:
        assert b.execute(refs).fetchall() == a.execute(refs).fetchall()
        assert len(a.execute(refs).fetchall()) == 7
    # lenses came along: the same lens search gives the same ids on all three databases
    with cortex.open(src, embedder=None) as a, cortex.open(back, embedder=None) as b, \
            cortex.open(pg_url, embedder=None) as c:  # fmt: skip
        assert a.lenses() == b.lenses() == c.lenses() and len(a.lenses()) == 2
        for lens in ("ops-only", "everything"):
            want = [
                r.memory.id for r in a.search("deploy", lens=lens, mode="keyword", record=False)
            ]
            assert want
            assert [
                r.memory.id for r in b.search("deploy", lens=lens, mode="keyword", record=False)
            ] == want
            got = [r.memory.id for r in c.search("deploy", lens=lens, mode="keyword", record=False)]
            assert got == [i for i in want if i != 27], lens


def test_a_stopped_copy_resumes(pg_url: str, tmp_path: Path) -> None:
    src = tmp_path / "src.db"
    _fill(src)
    calls = []

    def stop_after_two(table: str, done: int, total: int) -> None:
        calls.append((table, done))
        if table == "memories" and len([c for c in calls if c[0] == "memories"]) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        migrate(str(src), pg_url, progress=stop_after_two, batch=4)
    with PgStore.open(pg_url) as pg:
        assert pg.stats()["memories"] + pg.stats()["deleted"] == 8  # two batches committed
    copied = migrate(str(src), pg_url, batch=4)
    assert copied["memories"] == 26 - 8 and copied["sessions"] == 0
    with PgStore.open(pg_url) as pg:
        assert pg.stats()["memories"] + pg.stats()["deleted"] == 26


def test_cli_migrate_and_bad_arguments(pg_url: str, tmp_path: Path) -> None:
    src = tmp_path / "src.db"
    _fill(src)
    done = run_cli("migrate", str(src), pg_url)
    assert done.code == 0, done.err
    assert "memories" in done.out and "26" in done.out
    same = run_cli("migrate", str(src), str(tmp_path / "other.db"))
    assert same.code != 0 and "one postgresql:// URL" in same.err
    missing = run_cli("migrate", str(tmp_path / "nope.db"), pg_url)
    assert missing.code != 0 and "no database" in missing.err
