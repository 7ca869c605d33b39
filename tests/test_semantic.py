"""Semantic search with the real all-MiniLM-L6-v2 on onnxruntime (seed 002's semantic tests,
seed 000's vector tests) and the degraded paths without a model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import cortex
from cortex.errors import EmbeddingError

from .vector_truth import stored_vector

SEM = cortex.Options(mode="semantic", record=False)

DEPLOY = (
    "Deployment process: build the wheel in CI, tag the release, roll it out to staging,"
    " then production."
)
MEMORIES = [
    DEPLOY,
    "The database backup runs nightly at two in the morning.",
    "Our cat likes to sleep on the warm laptop keyboard.",
    "User authentication with JWT tokens and OAuth2",
    "Database schema design with foreign keys",
]


@pytest.fixture
def sem_engine(tmp_path: Path, embedder) -> cortex.Engine:
    engine = cortex.open(tmp_path / "sem.db", embedder=embedder)
    engine.add_many({"content": c} for c in MEMORIES)
    yield engine
    engine.close()


def ids_of(engine: cortex.Engine, results) -> list[str]:
    return [r.memory.content for r in results]


def test_semantic_similar_finds_what_keyword_cannot(sem_engine: cortex.Engine) -> None:
    # seed 002's own example: no word in common with the memory
    query = "how we ship code"
    assert not set(query.split()) & set(DEPLOY.lower().replace(",", " ").split())
    keyword = sem_engine.search(query, mode="keyword", record=False)
    assert DEPLOY not in ids_of(sem_engine, keyword)
    results = sem_engine.search(query, SEM)
    assert results and results[0].memory.content == DEPLOY
    assert results[0].match_type == cortex.MatchType.SEMANTIC


def test_semantic_dissimilar_scores_low(sem_engine: cortex.Engine) -> None:
    results = sem_engine.search("quantum chromodynamics of gluons", SEM, min_score=0.0)
    assert results
    # calibrated against the query's own distribution: nothing stands out
    assert max(r.semantic_score for r in results) < 0.3
    # and under the default floor, nothing is returned at all
    assert list(sem_engine.search("quantum chromodynamics of gluons", SEM)) == []


def test_semantic_ranking(sem_engine: cortex.Engine) -> None:
    results = sem_engine.search("login system security", SEM, min_score=0.0)
    assert results[0].memory.content.startswith("User authentication")
    scores = [r.semantic_score for r in results]
    assert scores == sorted(scores, reverse=True)


def test_semantic_threshold(sem_engine: cortex.Engine) -> None:
    """`min_similarity` is a floor on the raw cosine (off by default: the calibrated
    `min_score` decides what is relevant)."""
    loose = sem_engine.search("database", SEM, min_score=0.0, explain=True)
    strict = sem_engine.search("database", SEM, min_score=0.0, min_similarity=0.3, explain=True)
    assert len(strict) < len(loose)
    assert all(r.explain is not None and r.explain["cosine"] >= 0.3 for r in strict)


def test_semantic_limit(sem_engine: cortex.Engine) -> None:
    assert len(sem_engine.search("anything at all", SEM, min_score=0.0, limit=2)) == 2


def test_similarity_is_in_unit_interval(sem_engine: cortex.Engine) -> None:
    for r in sem_engine.search("authentication", SEM):
        assert 0.0 < r.semantic_score <= 1.0 + 1e-6


def test_embed_and_search(tmp_path: Path, embedder) -> None:
    with cortex.open(tmp_path / "e.db", embedder=embedder) as engine:
        a = engine.add("The cat sat on the mat")
        engine.add("Stock markets fell sharply on Tuesday")
        rows = engine.store.query("SELECT memory_id, model_id, dim, checksum FROM embeddings")
        assert len(rows) == 2
        # float16 (half the bytes of float32) of the unit vector: each value within 2^-11
        # of it relatively (and 2^-25 absolutely, below float16's normal range), in the
        # vector file; SQLite holds its checksum
        assert all(r[1] == embedder.model_id and r[2] == 384 and r[3] != 0 for r in rows)
        stored = stored_vector(engine, a).astype(np.float64)
        unit = embedder.embed("The cat sat on the mat").astype(np.float64)
        unit /= np.linalg.norm(unit)
        assert np.all(np.abs(stored - unit) <= np.abs(unit) * 2.0**-11 + 2.0**-25)
        assert not np.array_equal(stored, unit)  # rounded, not float32 relabelled
        results = engine.search("a kitten resting on a rug", SEM)
        assert results[0].memory.id == a


def test_only_the_active_models_vectors_are_searched(tmp_path: Path, embedder) -> None:
    with cortex.open(tmp_path / "m.db", embedder=embedder) as engine:
        a = engine.add("vectors of the active model")
        # a vector of another model, nearest to everything, must never be returned
        other = engine.add("another model's memory", metadata={})
        with engine.store.transaction() as tx:
            tx.execute("DELETE FROM embeddings WHERE memory_id = ?", (other,))
            tx.execute(
                "INSERT INTO embeddings (memory_id, model_id, dim, content_hash, checksum,"
                " created_at) VALUES (?, 'other-model', 384, 'x', 1, 0)",
                (other,),
            )
        results = engine.search("vectors of the active model", SEM, min_similarity=-1.0)
        assert [r.memory.id for r in results] == [a]


def test_unchanged_content_is_not_embedded_twice(tmp_path: Path, embedder) -> None:
    calls: list[int] = []

    class Counting:
        model_id = embedder.model_id
        dim = embedder.dim

        def embed(self, text: str) -> np.ndarray:
            return embedder.embed(text)

        def embed_batch(self, texts):
            calls.append(len(texts))
            return embedder.embed_batch(texts)

    note = tmp_path / "n.md"
    note.write_text("# A\nalpha text\n\n# B\nbravo text\n")
    with cortex.open(tmp_path / "c.db", embedder=Counting()) as engine:
        engine.import_path(note)
        assert sum(calls) == 2
        engine.import_path(note)
        assert sum(calls) == 2  # nothing new to embed
        engine.add("# A\nalpha text")  # the text of a stored memory: its vector is reused
        assert sum(calls) == 2
        note.write_text("# A\nalpha text\n\n# B\nbravo text, changed\n")
        engine.import_path(note)
        assert sum(calls) == 3


def test_deleted_memories_leave_semantic_results(sem_engine: cortex.Engine) -> None:
    first = sem_engine.search("how we ship code", SEM)[0]
    sem_engine.delete(first.memory.id)
    assert first.memory.id not in [r.memory.id for r in sem_engine.search("how we ship code", SEM)]


def test_semantic_respects_filters(tmp_path: Path, embedder) -> None:
    with cortex.open(tmp_path / "f.db", embedder=embedder) as engine:
        engine.add("Deploy with a blue-green switch", project="a")
        b = engine.add("Deploy with a canary release", project="b")
        results = engine.search("deployment strategy", SEM, project="b", min_similarity=0.0)
        assert [r.memory.id for r in results] == [b]


def test_hybrid_marks_memories_found_by_both(sem_engine: cortex.Engine) -> None:
    results = sem_engine.search("database backup", mode="hybrid", record=False)
    top = results[0]
    assert top.memory.content.startswith("The database backup")
    assert top.match_type == cortex.MatchType.HYBRID
    assert top.bm25_score > 0 and top.semantic_score > 0
    assert len({r.memory.id for r in results}) == len(results)


# ------------------------------------------------------------------ without a model


def test_no_model_degrades_hybrid_and_fails_semantic(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("CORTEX_MODEL_DIR", raising=False)
    monkeypatch.setenv("CORTEX_HOME", str(tmp_path / "fresh-home"))  # no model installed
    with cortex.open(tmp_path / "d.db") as engine:
        report = engine.import_path(Path(__file__).parents[1] / "examples" / "sample")
        assert report.not_embedded and "cortex model install" in report.not_embedded
        results = engine.search("deployment", record=False)  # default: hybrid
        assert results and results.mode == "keyword"
        assert any("semantic search unavailable" in n for n in results.notices)
        with pytest.raises(EmbeddingError, match="cortex model install"):
            engine.search("deployment", mode="semantic")
        assert engine.store.query("SELECT COUNT(*) FROM embeddings")[0][0] == 0


def test_reindex_embeds_what_was_added_without_a_model(tmp_path: Path, embedder) -> None:
    db = tmp_path / "r.db"
    with cortex.open(db, embedder=None) as engine:
        engine.add_many({"content": c} for c in MEMORIES)
    with cortex.open(db, embedder=embedder) as engine:
        assert list(engine.search("how we ship code", SEM)) == []  # no vectors yet
        seen: list[tuple[int, int]] = []
        done = engine.reindex(progress=lambda n, total: seen.append((n, total)))
        assert done["embedded"] == len(MEMORIES) and done["rows"] == len(MEMORIES)
        assert seen[-1] == (len(MEMORIES), len(MEMORIES))
        assert [n for n, _ in seen] == sorted(n for n, _ in seen)  # never goes back
        assert engine.search("how we ship code", SEM)[0].memory.content == DEPLOY


def test_damaged_index_is_rebuilt_without_being_asked(tmp_path: Path, embedder) -> None:
    db = tmp_path / "x.db"
    with cortex.open(db, embedder=embedder) as engine:
        engine.add_many({"content": c} for c in MEMORIES)
        assert engine.search("how we ship code", SEM)
        path = engine._semantic.index_path()
    path.write_bytes(path.read_bytes()[:100])  # truncated by a crash
    with cortex.open(db, embedder=embedder) as engine:
        # the model's vectors are embedded again (the file was their only copy)
        assert engine.search("how we ship code", SEM)[0].memory.content == DEPLOY
        path = engine._semantic.index_path()
    Path(f"{path}.state").unlink()  # half-written: state gone
    with cortex.open(db, embedder=embedder) as engine:
        assert engine.search("how we ship code", SEM)[0].memory.content == DEPLOY
