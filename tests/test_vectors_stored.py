"""How embeddings are stored in SQLite (cortex.vectors.encode_stored): unit length, float16,
and the migration that converts the float32 rows of older databases (real SQLite, the real
model, the real extension)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import cortex
from cortex.store import _SCHEMA_EMBEDDINGS_F16, MIGRATIONS, SCHEMA_VERSION
from cortex.vectors import decode_stored, encode_stored

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
    """Make `db` what the previous cortex left: float32 vectors, the schema version before
    the conversion (and without what later migrations add)."""
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DROP INDEX embeddings_hash")
        conn.execute("ALTER TABLE embeddings DROP COLUMN supplied")
        conn.execute("CREATE INDEX embeddings_model_hash ON embeddings(model_id, content_hash)")
        conn.executemany(
            "UPDATE embeddings SET vector = ? WHERE memory_id = ?",
            [(v.astype("<f4").tobytes(), i) for i, v in vectors.items()],
        )
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'",
            (str(MIGRATIONS.index(_SCHEMA_EMBEDDINGS_F16)),),
        )
    conn.close()


def test_the_migration_converts_float32_rows_and_rebuilds_the_index(
    tmp_path: Path, embedder
) -> None:
    db = tmp_path / "old.db"
    with cortex.open(db, embedder=embedder) as engine:
        ids = engine.add_many([{"content": t} for t in TEXTS])
        engine.search("tea", mode="semantic")  # builds the index and its state
    states = list((tmp_path / "old.db-index").glob("vectors-*.state"))
    assert len(states) == 1
    before = json.loads(states[0].read_text())["uuid"]
    raw = {i: embedder.embed(t) for i, t in zip(ids, TEXTS, strict=True)}
    _downgrade(db, raw)
    with sqlite3.connect(db) as conn:
        conn.execute("VACUUM")  # the float32 database as compact as it gets
        (pages_f32,) = conn.execute("PRAGMA page_count").fetchone()
    conn.close()

    # read-only: not migrated, the float32 rows are read as they are
    with cortex.open(db, read_only=True, embedder=embedder) as engine:
        assert engine.store.schema_version() == MIGRATIONS.index(_SCHEMA_EMBEDDINGS_F16)
        assert np.array_equal(engine.store.vector_of(ids[1], embedder.model_id), raw[ids[1]])

    with cortex.open(db, embedder=embedder) as engine:
        assert engine.store.schema_version() == SCHEMA_VERSION
        # the space the float32 rows took is given back (VACUUM after the migration)
        assert engine.store.query("PRAGMA page_count")[0][0] < pages_f32
        rows = engine.store.query("SELECT memory_id, dim, vector FROM embeddings")
        assert len(rows) == len(TEXTS) and all(len(r[2]) == r[1] * 2 == 768 for r in rows)
        for memory_id, _, blob in rows:
            unit = raw[memory_id] / np.linalg.norm(raw[memory_id])
            half = np.frombuffer(blob, dtype="<f2").astype(np.float64)
            assert np.all(np.abs(half - unit) <= np.abs(unit) * 2.0**-11 + 2.0**-25)
        hits = engine.search("what does alice drink in the morning", mode="semantic")
        assert hits[0].memory.id == ids[1]
    after = json.loads(states[0].read_text())["uuid"]
    assert after != before  # the state was dropped: the index was rebuilt from float16


def test_a_new_database_stores_float16_and_scores_from_it(tmp_path: Path, embedder) -> None:
    with cortex.open(tmp_path / "new.db", embedder=embedder) as engine:
        ids = engine.add_many([{"content": t} for t in TEXTS])
        (n,) = engine.store.query("SELECT COUNT(*) FROM embeddings WHERE length(vector) = 768")[0]
        assert n == len(TEXTS)
        # the vector file holds the very bits SQLite stores (one more copy of the source)
        engine.search("tea", mode="semantic")
        vec = engine._semantic.index_path()
        blobs = [b for (b,) in engine.store.query("SELECT vector FROM embeddings ORDER BY rowid")]
        assert vec.read_bytes()[4096:] == b"".join(blobs)
        query = "who likes tabs in Go"
        hits = engine.search(query, mode="semantic", explain=True, min_similarity=-1.0)
        assert hits[0].memory.id == ids[5]
        q = embedder.embed(query).astype(np.float64)
        for hit in hits:
            (blob,) = engine.store.query(
                "SELECT vector FROM embeddings WHERE memory_id = ?", (hit.memory.id,)
            )[0]
            row = np.frombuffer(blob, dtype="<f2").astype(np.float64)
            # the score is the stored row (unit to within f16 rounding) against the
            # unit query; the cosine proper is within that rounding of it
            score = row @ q / np.linalg.norm(q)
            cosine = score / np.linalg.norm(row)
            assert hit.explain is not None
            assert abs(hit.explain["cosine"] - score) < 1e-6
            assert abs(hit.explain["cosine"] - cosine) < 2.0**-11


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
        want = encode_stored(embedder.embed(text)[None, :])[0]
        got = engine.store.query("SELECT vector FROM embeddings WHERE memory_id = ?", (made,))
        assert got[0][0] == want
        assert (
            engine.store.query("SELECT vector FROM embeddings WHERE memory_id = ?", (given,))[0][0]
            == encode_stored(mine)[0]
        )
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
