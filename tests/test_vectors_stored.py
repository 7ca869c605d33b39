"""How embeddings are stored in SQLite (cortex.vectors.encode_stored): unit length, float16,
and the migration that converts the float32 rows of older databases (real SQLite, the real
model, the real extension)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import cortex
from cortex.semantic import index_dir, row_checksums, vectors_dir
from cortex.store import _SCHEMA_EMBEDDINGS_F16, MIGRATIONS, SCHEMA_VERSION
from cortex.vectors import decode_stored, encode_stored

from .vector_truth import stored_vectors

TEXTS = [
    "we deploy with a blue-green switch behind the load balancer",
    "alice drinks green tea every morning before standup",
    "the billing service retries failed charges three times",
    "postgres vacuum runs nightly at two in the morning",
    "the mobile app caches thumbnails for a week",
    "bob prefers tabs over spaces in the Go code",
]


def test_encode_is_unit_float16_and_decode_reads_both_forms() -> None:
    rng = np.random.default_rng(7)
    rows = rng.normal(size=(5, 24)) * np.array([[1e-30], [1.0], [1e4], [1e30], [3.0]])
    blobs = encode_stored(rows.astype(np.float32))
    assert all(len(b) == 24 * 2 for b in blobs)
    back = decode_stored(blobs, 24).astype(np.float64)
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    # float16 keeps a relative error <= 2^-11 in its normal range, 2^-25 absolute below it;
    # scales from 1e-30 to 1e30 neither underflow to zero nor overflow (normalised first)
    assert np.all(np.abs(back - unit) <= np.abs(unit) * 2.0**-11 + 2.0**-25)
    assert np.all(np.isfinite(back)) and np.all(np.linalg.norm(back, axis=1) > 0.999)
    # a zero row stays zero (refused later by the index, never a NaN)
    assert decode_stored(encode_stored(np.zeros((1, 24), np.float32)), 24).tolist() == [[0.0] * 24]
    # float32 rows of a database from before the migration are read as they are
    legacy = rows.astype("<f4")
    got = decode_stored([r.tobytes() for r in legacy], 24)
    assert got.dtype == np.float32 and np.array_equal(got, legacy)
    for bad in ([b"\0" * 47], [blobs[0], legacy[0].tobytes()], [b""]):
        with pytest.raises(ValueError, match="24 float16"):
            decode_stored(bad, 24)


def _downgrade(db: Path, vectors: dict[int, np.ndarray]) -> None:
    """Make `db` what the cortex before the float16 conversion left: float32 vectors in
    SQLite (`embeddings.vector`), no vector file, the schema version before the
    conversion (and nothing later migrations add)."""
    conn = sqlite3.connect(db)
    with conn:
        old = conn.execute(
            "SELECT memory_id, model_id, dim, content_hash, created_at FROM embeddings"
        ).fetchall()
        conn.execute("DROP TABLE embeddings")
        conn.execute("DROP TABLE vectors_lost")
        conn.execute(
            "CREATE TABLE embeddings (memory_id INTEGER NOT NULL REFERENCES memories(id),"
            " model_id TEXT NOT NULL, dim INTEGER NOT NULL, content_hash TEXT NOT NULL,"
            " vector BLOB NOT NULL, created_at REAL NOT NULL, PRIMARY KEY (memory_id, model_id))"
        )
        conn.execute("CREATE INDEX embeddings_model_hash ON embeddings(model_id, content_hash)")
        conn.executemany(
            "INSERT INTO embeddings VALUES (?, ?, ?, ?, ?, ?)",
            [(m, mo, d, h, vectors[m].astype("<f4").tobytes(), c) for m, mo, d, h, c in old],
        )
        conn.execute("DELETE FROM meta WHERE key LIKE 'vectors:%'")
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'",
            (str(MIGRATIONS.index(_SCHEMA_EMBEDDINGS_F16)),),
        )
    conn.close()
    shutil.rmtree(vectors_dir(db))


def test_the_migrations_move_float32_rows_to_the_vector_file(tmp_path: Path, embedder) -> None:
    db = tmp_path / "old.db"
    with cortex.open(db, embedder=embedder) as engine:
        ids = engine.add_many([{"content": t} for t in TEXTS])
        engine.delete(ids[4])
        engine.search("tea", mode="semantic")
    raw = {i: embedder.embed(t) for i, t in zip(ids, TEXTS, strict=True)}
    _downgrade(db, raw)
    with sqlite3.connect(db) as conn:
        conn.execute("VACUUM")  # the float32 database as compact as it gets
        (pages_f32,) = conn.execute("PRAGMA page_count").fetchone()
    conn.close()

    # read-only: not migrated (the float32 rows stay where they are)
    with cortex.open(db, read_only=True, embedder=embedder) as engine:
        assert engine.store.schema_version() == MIGRATIONS.index(_SCHEMA_EMBEDDINGS_F16)

    with cortex.open(db, embedder=embedder) as engine:
        assert engine.store.schema_version() == SCHEMA_VERSION
        # the space the vectors took in SQLite is given back (VACUUM after the migration)
        assert engine.store.query("PRAGMA page_count")[0][0] < pages_f32
        cols = {r[1] for r in engine.store.query("PRAGMA table_info(embeddings)")}
        assert "vector" not in cols and {"checksum", "supplied"} <= cols
        (origin,) = engine.store.query("SELECT DISTINCT supplied FROM embeddings")
        assert origin == (None,)  # not known for vectors written before it was recorded
        stored = stored_vectors(db, embedder.model_id)
        assert sorted(stored) == sorted(ids)  # the deleted memory's vector too
        for memory_id, half in stored.items():
            unit = raw[memory_id] / np.linalg.norm(raw[memory_id])
            assert np.all(
                np.abs(half.astype(np.float64) - unit) <= np.abs(unit) * 2.0**-11 + 2.0**-25
            )
        hits = engine.search("what does alice drink in the morning", mode="semantic")
        assert hits[0].memory.id == ids[1]
        assert ids[4] not in [
            h.memory.id for h in engine.search("postgres vacuum", mode="semantic")
        ]
    assert not list(index_dir(db).glob("vectors-*"))  # the old derived files are gone


def test_a_new_database_stores_each_vector_once_and_scores_from_it(
    tmp_path: Path, embedder
) -> None:
    with cortex.open(tmp_path / "new.db", embedder=embedder) as engine:
        ids = engine.add_many([{"content": t} for t in TEXTS])
        cols = {r[1] for r in engine.store.query("PRAGMA table_info(embeddings)")}
        assert "vector" not in cols
        # the vector file holds the rows, SQLite their checksums
        vec = engine._semantic.index_path()
        assert vec.parent == vectors_dir(engine.store.path)
        half = np.frombuffer(vec.read_bytes()[4096:], dtype="<f2").reshape(-1, embedder.dim)
        assert len(half) == len(TEXTS)
        sums = [
            c for (c,) in engine.store.query("SELECT checksum FROM embeddings ORDER BY memory_id")
        ]
        assert row_checksums(half).tolist() == sums
        query = "who likes tabs in Go"
        hits = engine.search(query, mode="semantic", explain=True, min_similarity=-1.0)
        assert hits[0].memory.id == ids[5]
        q = embedder.embed_query(query).astype(np.float64)
        stored = stored_vectors(engine.store.path, embedder.model_id)
        for hit in hits:
            row = stored[hit.memory.id].astype(np.float64)
            # the score is the stored row (unit to within f16 rounding) against the
            # unit query; the cosine proper is within that rounding of it
            score = row @ q / np.linalg.norm(q)
            cosine = score / np.linalg.norm(row)
            assert hit.explain is not None
            assert abs(hit.explain["cosine"] - score) < 1e-6
            assert abs(hit.explain["cosine"] - cosine) < 2.0**-11


def test_checksums_see_every_single_value_change() -> None:
    rng = np.random.default_rng(5)
    rows = encode_stored(rng.normal(size=(4, 384)))
    half = np.frombuffer(b"".join(rows), dtype="<f2").reshape(4, 384)
    base = row_checksums(half)
    assert len(set(base.tolist())) == 4 and (base != 0).all()
    bits = half.view(np.uint16)
    for col in (0, 1, 191, 383):
        for flip in (1, 0x8000, 0x0400):
            changed = bits.copy()
            changed[2, col] ^= flip
            got = row_checksums(changed.view("<f2"))
            assert got[2] != base[2] and (np.delete(got, 2) == np.delete(base, 2)).all()
    swapped = bits.copy()
    swapped[1, [3, 4]] = swapped[1, [4, 3]]
    assert swapped[1, 3] == swapped[1, 4] or row_checksums(swapped.view("<f2"))[1] != base[1]


def test_the_origin_of_each_vector_is_recorded_and_supplied_ones_are_not_reused(
    tmp_path: Path, embedder
) -> None:
    with cortex.open(tmp_path / "o.db", embedder=embedder) as engine:
        text = TEXTS[0]
        mine = np.random.default_rng(3).normal(size=(1, embedder.dim)).astype(np.float32)
        (given,) = engine.add_many([{"content": text}], vectors=mine)
        made = engine.add(text, project="elsewhere")  # the same text, through the model
        other = engine.add(TEXTS[1])
        rows = dict(engine.store.query("SELECT memory_id, supplied FROM embeddings"))
        assert rows == {given: 1, made: 0, other: 0}
        # the model's vector of the text, not the caller's (reuse takes only model rows)
        stored = stored_vectors(engine.store.path, embedder.model_id)
        assert stored[made].tobytes() == encode_stored(embedder.embed(text)[None, :])[0]
        assert stored[given].tobytes() == encode_stored(mine)[0]
        # the lookup by content hash goes through the small prefix index
        plan = " ".join(
            str(r[-1])
            for r in engine.store.query(
                "EXPLAIN QUERY PLAN SELECT content_hash FROM embeddings"
                " WHERE substr(content_hash, 1, 8) IN ('a', 'b') AND model_id = 'm'"
            )
        )
        assert "embeddings_hash" in plan
        names = {r[0] for r in engine.store.query("SELECT name FROM sqlite_master")}
        assert "embeddings_model_hash" not in names


@pytest.mark.parametrize("dim", [384, 6])  # 64-bit words; 16-bit values (dim % 4 != 0)
def test_the_native_row_check_is_the_numpy_one(tmp_path: Path, dim: int) -> None:
    """VectorIndex.check_rows (what Semantic.check reads of a search's page rows in one
    call) gives row_checksums' checksums to the bit and the float64 product of each
    stored row with the query over its length that the numpy path computes; other rows'
    checksums differ."""
    from cortex.vectors import VectorIndex

    rng = np.random.default_rng(dim)
    vi = VectorIndex.create(tmp_path / "v.cvx", dim, "m")
    try:
        rows = rng.normal(size=(40, dim)).astype(np.float32)
        vi.append(np.arange(1, 41, dtype=np.int64), rows)
        query = rng.normal(size=dim).astype(np.float32)
        at = np.array([39, 0, 7, 7, 21], dtype=np.int64)
        found = vi.check_rows(query, at)
        assert found is not None
        sums, exact = found
        half = vi.stored(at)
        assert sums.dtype == np.int64 and sums.tolist() == row_checksums(half).tolist()
        assert sums[2] == sums[3] and len(set(sums.tolist())) == 4  # row 7 twice
        q = query.astype(np.float64)
        want = (half.astype(np.float64) @ q) / np.sqrt(q @ q)
        assert np.allclose(exact, want, rtol=0, atol=1e-12)
        ids, scores = vi.search(query, 40)  # the index's own scores: within f32 rounding
        score_of = dict(zip(ids.tolist(), scores.tolist(), strict=True))
        assert all(
            abs(e - score_of[r + 1]) < 1e-5
            for r, e in zip(at.tolist(), exact.tolist(), strict=True)
        )
        with pytest.raises(cortex.InvalidOptionError, match="rows must be in"):
            vi.check_rows(query, np.array([40], dtype=np.int64))
    finally:
        vi.close()
