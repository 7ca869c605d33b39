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


def _stats_in_sql(pg: PgStore, query: np.ndarray, model: str, projects: list[str] | None):
    """The calibration as one SQL statement (the retriever's before it kept its sample in
    the process): the reference the kept sample must reproduce."""
    from cortex.pg.db import Vector
    from cortex.pg.retrievers import STATS_ROWS
    from cortex.search.hits import shrunk_stats

    dim = int(query.shape[0])
    if projects is not None:
        scope = "FROM memories m WHERE m.deleted_at IS NULL AND m.project_id = ANY(%s)"
        scope_params: list = [projects]
    else:
        scope = (
            "FROM memories m JOIN embeddings v ON v.project_id = m.project_id"
            " AND v.memory_id = m.id AND v.model_id = %s AND v.dim = %s"
            " WHERE m.deleted_at IS NULL"
        )
        scope_params = [model, dim]
    n, mean, sd = pg.query(
        "WITH c AS (SELECT m.project_id, m.id, row_number() OVER (ORDER BY m.id) - 1 AS rn"
        f" {scope}),"
        " t AS (SELECT count(*) AS n, LEAST(count(*), %s) AS k FROM c),"
        " pos AS (SELECT DISTINCT CASE WHEN t.k <= 1 THEN 0 WHEN i = t.k - 1 THEN t.n - 1"
        " ELSE floor(i * ((t.n - 1)::float8 / (t.k - 1)))::bigint END AS rn"
        " FROM t, generate_series(0, GREATEST(t.k - 1, 0)) i WHERE t.n > 0)"
        f" SELECT count(*), avg(s), stddev_pop(s) FROM (SELECT 1 - (e.vector::vector({dim})"
        f" <=> %s::vector({dim})) AS s FROM c JOIN pos ON pos.rn = c.rn"
        " JOIN embeddings e ON e.project_id = c.project_id AND e.memory_id = c.id"
        " AND e.model_id = %s AND e.dim = %s) x",
        (*scope_params, STATS_ROWS, Vector(query), model, dim),
    )[0]
    return shrunk_stats(int(n), float(mean or 0.0), float(sd or 0.0))


class RandomEmbedder:
    model_id = "random"
    dim = 32

    def embed(self, text: str) -> np.ndarray:
        rng = np.random.default_rng(abs(hash(text)) % 2**32)
        v = rng.normal(size=32).astype(np.float32) + 0.3
        return v / np.linalg.norm(v)


def test_kept_calibration_sample_gives_the_sql_numbers_and_follows_writes(pg_url: str) -> None:
    """The semantic calibration's sample is kept in the process and its cosines computed
    there (after a write, one search on the server first): the same mean and spread as
    the statement over the server's rows (past
    STATS_ROWS, walled and not), and every write that moves the sample (add, delete,
    project move, a new vector) is seen by the next search; recall counts do not
    invalidate it."""
    from cortex.pg.db import Vector
    from cortex.pg.retrievers import STATS_ROWS

    emb = RandomEmbedder()
    texts = [f"note {i} about subject {i % 97}" for i in range(STATS_ROWS + 600)]
    items = [MemoryInput(t, project="a" if i % 3 else "b") for i, t in enumerate(texts)]
    pg = PgStore.open(pg_url)
    try:
        ids = pg.add_many(
            items, EmbeddingBatch("random", 32, {content_hash(t): emb.embed(t) for t in texts})
        )
        leg = PgSemanticRetriever(pg, emb)
        queries = [emb.embed(f"query {j}") for j in range(3)]

        def check() -> None:
            for q in queries:
                for projects in (None, ("a",), ("b",), ("a", "b"), ("none",)):
                    want = _stats_in_sql(pg, q, "random", list(projects) if projects else None)
                    assert leg._stats(q, projects) == pytest.approx(want, rel=1e-6, abs=1e-9)

        check()  # each scope: on the server, then loaded, then from the kept sample
        marker = leg._marker()
        assert len(leg._samples) == 5 and all(v[0] == marker for v in leg._samples.values())
        pg.record_recall([(ids[1], None, 0.5)], query="q", session_id=None, lens=None,
                         reinforce=0.1)  # fmt: skip
        pg.reinforce([ids[2]], 0.1)
        assert leg._marker() == marker  # a recall count is not a change of the sample
        pg.delete(ids[5])
        assert leg._marker() > marker
        check()
        pg.update(ids[7], project="b")
        check()
        more = [f"later note {i}" for i in range(50)]
        pg.add_many(
            [MemoryInput(t, project="b") for t in more],
            EmbeddingBatch("random", 32, {content_hash(t): emb.embed(t) for t in more}),
        )
        check()
        with pg.db.transaction() as tx:
            tx.execute("UPDATE embeddings SET vector = %s WHERE memory_id = %s",
                       (Vector(-emb.embed(texts[0])), ids[0]))  # fmt: skip
        assert leg._marker() > marker
        check()
    finally:
        pg.close()


@pytest.mark.parametrize("query", ["deploy fridays", "auth* OR fox", '"blue-green" deploy'])
def test_keyword_rescore_from_kept_idfs_equals_the_full_scan(stores, query: str) -> None:
    """Rescoring reads only the asked memories, with the IDFs and average length the
    search computed: the same BM25 as scoring them by the search's whole scan again."""
    import dataclasses
    import json

    from cortex.pg import keyword

    pg, _ = stores
    for opts in (Options(mode=Mode.KEYWORD, record=False),
                 Options(mode=Mode.KEYWORD, record=False, project="p")):  # fmt: skip
        found = keyword.search(pg, query, opts, 2)  # a pool smaller than the matches
        assert found.rescore_expression and json.loads(found.rescore_expression)["idf"]
        spec = json.loads(found.rescore_expression)
        del spec["idf"]
        slow = dataclasses.replace(found, rescore_expression=json.dumps(spec))
        ids = [1, 2, 3, 4, 5]
        fast = keyword.rescore(pg, found, ids, opts)
        assert fast and fast == pytest.approx(keyword.rescore(pg, slow, ids, opts), rel=1e-12)


def test_holds_by_exists_agrees_with_the_scored_tiers(stores) -> None:
    """The unknown-name check asks one EXISTS per word: the same answer as running the
    word's scored tiers and looking for a hit (words, compounds, prefixes, the wall)."""
    from cortex.pg import keyword

    pg, _ = stores
    words = ["deploy", "Deploying", "blue-green", "green-blue", "auth", "authen", "zzz",
             "REPORTING_DSN", "fox", "Tuesdays", "the"]  # fmt: skip
    for opts in (Options(record=False), Options(record=False, project="p"),
                 Options(record=False, project="other")):  # fmt: skip
        for word in words:
            with pg.db.connection() as conn:
                scored = bool(keyword._latin(pg, conn, word, opts, 1, keyword.Ran()).hits)
            assert keyword.holds(pg, word, opts) is scored, (word, opts.project)
    assert keyword.holds(pg, "authen", Options(record=False))  # a prefix of a word
    assert not keyword.holds(pg, "deploy", Options(record=False, project="other"))


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("deploy fridays Heroku", ["Heroku"]),  # an unknown name among matched words
        ("deploy fridays", ["fridays"]),  # a known word's part of the weight
        ("billing Zuora Stripe", ["Zuora", "Stripe"]),
        ("Zuora Stripe", ["Zuora"]),  # nothing matched: the weight of the query's terms
        ("auth* OR fox", ["fox"]),  # FTS5 syntax: the unstemmed index
    ],
)
@pytest.mark.parametrize("project", [None, "p"])
def test_share_equals_sqlite(stores, query: str, words: list[str], project: str | None) -> None:
    """The PostgreSQL keyword retriever weighs a query's unknown names as the SQLite one
    does (one ranking serves both backends: the unknown-name discount)."""
    pg, lite = stores
    opts = Options(mode=Mode.HYBRID, record=False, project=project)
    p = plan(query, opts)
    ours = PgKeywordRetriever(pg)
    theirs = KeywordRetriever(lite, None)
    got = ours.share(ours.retrieve(p, opts), words)
    want = theirs.share(theirs.retrieve(p, opts), words)
    assert want is not None and 0.0 < want <= 1.0
    assert got == pytest.approx(want, rel=1e-9)


def test_share_of_an_unknown_name_discounts_as_on_sqlite(stores) -> None:
    """The pipeline's relevance factor on PostgreSQL is sqrt(1 - share), not the flat
    UNKNOWN_NAME_BASE kept for a retriever that cannot weigh the names."""
    from cortex.search.pipeline import UNKNOWN_NAME_BASE, unknown_name_factor

    pg, _ = stores
    opts = Options(record=False)
    ours = PgKeywordRetriever(pg)
    share = ours.share(ours.retrieve(plan("deploy Heroku", opts), opts), ["Heroku"])
    assert share is not None and 0.3 < share < 1.0
    assert unknown_name_factor(share) != UNKNOWN_NAME_BASE
    assert unknown_name_factor(share) == pytest.approx((1 - share) ** 0.5)


def test_share_of_the_weighted_cjk_tier_equals_sqlite(pg_url: str, tmp_path: Path) -> None:
    """A mixed-script query runs the weighted substring tier: its terms' own IDFs."""
    texts = [*TEXTS, "デプロイ 手順 は nimbus の runbook", "数据库 索引 设计"]
    items = [MemoryInput(t, project="p") for t in texts]
    pg = PgStore.open(pg_url)
    pg.add_many(items)
    lite = Store.open(tmp_path / "cjk.db")
    lite.add_many(items)
    try:
        for query in ("deploy 手順 Zorg", "数据库 Zorg"):
            opts = Options(record=False)
            p = plan(query, opts)
            ours, theirs = PgKeywordRetriever(pg), KeywordRetriever(lite, None)
            mine, want_leg = ours.retrieve(p, opts), theirs.retrieve(p, opts)
            assert mine.state is not None and mine.state.weights is not None
            want = theirs.share(want_leg, ["Zorg"])
            assert want is not None and 0.0 < want < 1.0
            assert ours.share(mine, ["Zorg"]) == pytest.approx(want, rel=1e-9)
    finally:
        pg.close()
        lite.close()
