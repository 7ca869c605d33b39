"""The PostgreSQL retrievers behind the pipeline's seam give what the SQLite ones give."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cortex.errors import InvalidOptionError
from cortex.options import Mode, Options
from cortex.pg.retrievers import PgKeywordRetriever, PgSemanticRetriever
from cortex.pg.store import EmbeddingBatch, PgStore
from cortex.search.plan import plan
from cortex.search.sqlite import KeywordRetriever
from cortex.store import MemoryInput, Store, content_hash

TEXTS = [
    "Deploy the auth service with the blue-green script on Fridays",
    "Deployment of the billing service failed: database migration timed out",
    "Authentication tokens expire after one hour; refresh them early",
    "The quick brown fox jumps over the lazy dog",
    "Deploying on Fridays is risky; deploy on Tuesdays instead",
]


class FakeEmbedder:
    """Bag-of-letters vectors: deterministic, enough to order five sentences."""

    model_id = "letters"
    dim = 26

    def embed(self, text: str) -> np.ndarray:
        v = np.zeros(26, dtype=np.float32)
        for c in text.lower():
            if "a" <= c <= "z":
                v[ord(c) - 97] += 1
        return v / max(float(np.linalg.norm(v)), 1e-9)


@pytest.fixture
def stores(pg_url: str, tmp_path: Path):
    items = [MemoryInput(t, project="p") for t in TEXTS]
    emb = FakeEmbedder()
    pg = PgStore.open(pg_url)
    pg.add_many(
        items, EmbeddingBatch("letters", 26, {content_hash(t): emb.embed(t) for t in TEXTS})
    )
    lite = Store.open(tmp_path / "same.db")
    lite.add_many(items)
    yield pg, lite
    pg.close()
    lite.close()


@pytest.mark.parametrize("query", ["deploy fridays", "service", "auth* OR fox", "billing deploy"])
def test_keyword_leg_equals_sqlite(stores, query: str) -> None:
    pg, lite = stores
    opts = Options(mode=Mode.KEYWORD, record=False)
    p = plan(query, opts)
    ours = PgKeywordRetriever(pg).retrieve(p, opts)
    theirs = KeywordRetriever(lite, None).retrieve(p, opts)
    assert [h.memory_id for h in ours.hits] == [h.memory_id for h in theirs.hits]
    assert [h.score for h in ours.hits] == pytest.approx([h.score for h in theirs.hits], rel=1e-6)
    others = [1, 2, 3, 4, 5]
    got = PgKeywordRetriever(pg).rescore(p, opts, ours, others)
    want = KeywordRetriever(lite, None).rescore(p, opts, theirs, others)
    assert got.keys() == want.keys()
    for i in got:
        assert got[i] == pytest.approx(want[i], rel=1e-6)


def test_semantic_leg_ranks_by_cosine_and_rescores(stores) -> None:
    pg, _ = stores
    emb = FakeEmbedder()
    opts = Options(mode=Mode.SEMANTIC, record=False)
    p = plan("deploy on fridays", opts)
    leg = PgSemanticRetriever(pg, emb).retrieve(p, opts)
    q = emb.embed(p.semantic_text)
    cos = {i + 1: float(emb.embed(t) @ q) for i, t in enumerate(TEXTS)}
    assert [h.memory_id for h in leg.hits] == sorted(cos, key=lambda i: (-cos[i], i))
    assert all(0.0 <= h.score <= 1.0 for h in leg.hits)
    again = PgSemanticRetriever(pg, emb).rescore(p, opts, leg, [2, 4])
    assert again[2][1] == pytest.approx(cos[2], abs=1e-5)
    walled = PgSemanticRetriever(pg, emb).retrieve(p, opts.replace(project="other"))
    assert walled.hits == []


def test_walled_legs_rank_as_if_other_projects_were_absent(pg_url: str, tmp_path: Path) -> None:
    """Per-project statistics (issue 14): PostgreSQL's walled BM25 and the SQLite
    backend's agree, and neither leg moves when another project grows."""
    emb = FakeEmbedder()
    mine = [MemoryInput(t, project="p") for t in TEXTS]
    others = [MemoryInput(f"deploy the service {i} on fridays", project="q") for i in range(30)]
    every = [*mine, *others]
    vectors = EmbeddingBatch("letters", 26, {content_hash(m.content): emb.embed(m.content)
                                             for m in every})  # fmt: skip
    pg = PgStore.open(pg_url)
    pg.add_many(mine, vectors)
    lite = Store.open(tmp_path / "mixed.db")
    lite.add_many(mine)
    opts = Options(mode=Mode.KEYWORD, record=False, project="p")
    sem_opts = Options(mode=Mode.SEMANTIC, record=False, project="p")
    queries = ["deploy fridays", "service", "auth* OR fox", "billing deploy"]
    try:
        before = [PgKeywordRetriever(pg).retrieve(plan(q, opts), opts).hits for q in queries]
        sem_before = PgSemanticRetriever(pg, emb).retrieve(plan("deploy", sem_opts), sem_opts)
        pg.add_many(others, vectors)
        lite.add_many(others)
        for q, hits in zip(queries, before, strict=True):
            p = plan(q, opts)
            ours = PgKeywordRetriever(pg).retrieve(p, opts)
            theirs = KeywordRetriever(lite, None).retrieve(p, opts)
            assert [h.memory_id for h in ours.hits] == [h.memory_id for h in hits], q
            assert [h.score for h in ours.hits] == pytest.approx([h.score for h in hits], rel=1e-9)
            assert [h.memory_id for h in theirs.hits] == [h.memory_id for h in hits], q
            assert [h.score for h in theirs.hits] == pytest.approx(
                [h.score for h in hits], rel=1e-6
            )
        sem_after = PgSemanticRetriever(pg, emb).retrieve(plan("deploy", sem_opts), sem_opts)
        assert sem_after.state[1:] == pytest.approx(sem_before.state[1:], rel=1e-9)
        assert [h.score for h in sem_after.hits] == pytest.approx(
            [h.score for h in sem_before.hits], rel=1e-9
        )
        unwalled = Options(mode=Mode.SEMANTIC, record=False)
        moved = PgSemanticRetriever(pg, emb).retrieve(plan("deploy", unwalled), unwalled)
        assert moved.state[1:] != pytest.approx(sem_before.state[1:], rel=1e-6)
    finally:
        pg.close()
        lite.close()


def test_several_projects_and_fact_type_on_both_legs(pg_url: str) -> None:
    """Issue 12: `project` as a list walls off every project not listed, on both legs and
    the keyword statistics; `fact_type` keeps the memories holding a fact of that type."""
    emb = FakeEmbedder()
    items = [MemoryInput(t, project=p) for p in ("a", "b", "c") for t in TEXTS[:3]]
    pg = PgStore.open(pg_url)
    try:
        ids = pg.add_many(
            items,
            EmbeddingBatch("letters", 26, {content_hash(t): emb.embed(t) for t in TEXTS[:3]}),
        )
        project_of = {i: item.project for i, item in zip(ids, items, strict=True)}
        pg.add_fact(ids[0], "decision", "blue-green", confidence=1.0, decay_rate=0.0,
                    last_reinforced=1.7e9)  # fmt: skip
        for mode, leg in ((Mode.KEYWORD, PgKeywordRetriever(pg)),
                          (Mode.SEMANTIC, PgSemanticRetriever(pg, emb))):  # fmt: skip
            opts = Options(mode=mode, record=False, project=["a", "c"])
            hits = leg.retrieve(plan("deploy service", opts), opts).hits
            assert hits and {project_of[h.memory_id] for h in hits} == {"a", "c"}
            only = opts.replace(fact_type="decision")
            assert [h.memory_id for h in leg.retrieve(plan("deploy", only), only).hits] == [ids[0]]
        with pytest.raises(InvalidOptionError, match="SQLite-only"):
            PgKeywordRetriever(pg).retrieve(plan("x", Options(code="a.py")), Options(code="a.py"))
    finally:
        pg.close()
