"""Keyword search on PostgreSQL: BM25 equal to FTS5's, the same query language, the wall."""

from __future__ import annotations

from pathlib import Path

import pytest

from cortex import keyword as lite_keyword
from cortex.options import Mode, Options, OrderBy
from cortex.pg import keyword
from cortex.pg.keyword import Atom, Node, ParseError, parse
from cortex.pg.store import PgStore
from cortex.store import MemoryInput, Store

DOCS = [
    ("Deploy the auth service with the blue-green script on Fridays", "ops"),
    ("Deployment of the billing service failed: database migration timed out", "ops"),
    ("Authentication tokens expire after one hour; refresh them early", "ops"),
    ("The quick brown fox jumps over the lazy dog", "misc"),
    ("Deploying on Fridays is risky; deploy on Tuesdays instead", "misc"),
    ("Café naïve résumé: diacritics fold to plain letters", "misc"),
    ("東京タワーの近くでラーメンを食べた", "cjk"),
    ("北京的天气很好，我们去公园散步", "cjk"),
]

OPTS = Options(mode=Mode.KEYWORD, record=False)


@pytest.fixture
def stores(pg_url: str, tmp_path: Path):
    items = [MemoryInput(text, project=project) for text, project in DOCS]
    pg = PgStore.open(pg_url)
    lite = Store.open(tmp_path / "same.db")
    pg_ids = pg.add_many(items)
    lite_ids = lite.add_many(items)
    assert pg_ids == lite_ids  # both start from 1: the same ids on both backends
    yield pg, lite
    pg.close()
    lite.close()


def _raw(hits) -> list[float]:
    return [h.raw for h in hits]


@pytest.mark.parametrize(
    "query",
    [
        "deploy",
        "deploy service",
        "fridays deploy auth",
        "billing OR fox",
        '"auth service"',
        "deploy NOT fridays",
        "depl*",
        "service AND (auth OR billing)",
        "the",  # only a stop word: searched all the same
        "cafe",  # diacritics folded on both sides
    ],
)
def test_same_hits_and_bm25_as_fts5(stores, query: str) -> None:
    pg, lite = stores
    ours = keyword.search(pg, query, OPTS, 20)
    theirs = lite_keyword.search(lite, query, OPTS, 20)
    assert ours.tier == theirs.tier
    assert [h.memory_id for h in ours.hits] == [h.memory_id for h in theirs.hits]
    if '"' not in query:  # FTS5 ranks a phrase as one term; here by its words
        assert _raw(ours.hits) == pytest.approx(_raw(theirs.hits), rel=1e-6)
    assert all(0.0 <= h.score < 1.0 for h in ours.hits)


def test_plain_words_fall_back_from_and_to_or_to_prefix(stores) -> None:
    pg, lite = stores
    both = keyword.search(pg, "deploy billing", OPTS, 10)
    assert both.tier == "fts" and both.rewritten == '"deploy" OR "billing"'
    prefix = keyword.search(pg, "tok", OPTS, 10)
    assert prefix.tier == "prefix" and [h.memory_id for h in prefix.hits] == [3]
    theirs = lite_keyword.search(lite, "tok", OPTS, 10)
    assert (theirs.tier, theirs.rewritten) == (prefix.tier, prefix.rewritten)


@pytest.mark.parametrize("query", ["deploy AND", '"unclosed', "(auth", "colour:red deploy", "a -b"])
def test_invalid_syntax_is_retried_as_terms(stores, query: str) -> None:
    pg, lite = stores
    ours = keyword.search(pg, query, OPTS, 10)
    theirs = lite_keyword.search(lite, query, OPTS, 10)
    assert [h.memory_id for h in ours.hits] == [h.memory_id for h in theirs.hits]
    assert ours.notices == [] or "searched for the quoted terms" in ours.notices[0]


def test_project_is_a_wall(stores) -> None:
    pg, _ = stores
    walled = keyword.search(pg, "deploy", OPTS.replace(project="misc"), 10)
    assert walled.hits and {h.memory_id for h in walled.hits} == {5}
    assert keyword.search(pg, "billing", OPTS.replace(project="misc"), 10).hits == []
    assert keyword.search(pg, "ラーメン", OPTS.replace(project="ops"), 10).hits == []


def test_cjk_through_substrings(stores) -> None:
    pg, lite = stores
    for query in ("東京タワー", "ラーメン", "北京 公园", "天气"):
        ours = keyword.search(pg, query, OPTS, 10)
        theirs = lite_keyword.search(lite, query, OPTS, 10)
        assert [h.memory_id for h in ours.hits] == [h.memory_id for h in theirs.hits], query
        assert ours.hits, query


def test_like_fallback_and_empty_queries(stores) -> None:
    pg, _ = stores
    assert keyword.search(pg, "   ", OPTS, 10).notices == ["the query is empty"]
    assert keyword.search(pg, "zzzz", OPTS, 10).hits == []
    partial = keyword.search(pg, "ployment", OPTS, 10)  # inside a word: LIKE finds it
    assert partial.tier == "like" and [h.memory_id for h in partial.hits] == [2]


def test_orders_and_deleted(stores) -> None:
    pg, _ = stores
    recent = keyword.search(pg, "deploy", OPTS.replace(order_by=OrderBy.RECENCY), 10)
    assert [h.memory_id for h in recent.hits] == sorted((h.memory_id for h in recent.hits),
                                                        reverse=True)  # fmt: skip
    pg.delete(5)
    assert 5 not in {h.memory_id for h in keyword.search(pg, "deploy", OPTS, 10).hits}


def test_parser_maps_fts5_syntax() -> None:
    tree = parse('auth* OR "blue green" NOT fox')
    assert isinstance(tree, Node) and tree.op == "or"
    assert tree.kids[0] == Atom("auth", prefix=True)
    assert tree.kids[1].op == "not" and tree.kids[1].kids[0] == Atom("blue green")
    assert parse("NEAR(a b, 5)").op == "and"
    assert parse("content:deploy") == Atom("deploy")
    for bad in ("a AND", "(a", '"a', "x:deploy", "a - b", "OR"):
        with pytest.raises(ParseError):
            parse(bad)


def test_quotes_backslashes_and_repeats_index_as_written(pg_url: str, tmp_path: Path) -> None:
    texts = ["it's O'Brien's \\path\\to\\file and it's fine", "word " * 300 + "end", "x" * 600]
    with PgStore.open(pg_url) as pg:
        lite = Store.open(tmp_path / "q.db")
        pg.add_many([MemoryInput(t) for t in texts])
        lite.add_many([MemoryInput(t) for t in texts])
        for query in ("brien", "path file", "word", "end", "x" * 600):
            ours = keyword.search(pg, query, OPTS, 10).hits
            theirs = lite_keyword.search(lite, query, OPTS, 10).hits
            assert [h.memory_id for h in ours] == [h.memory_id for h in theirs], query
            assert ours, query
        lite.close()


CJK_DOCS = [
    ("デプロイ手順の見直し：nimbus では本番反映の前に必ずステージングで負荷試験を行う。", "ops"),
    *(
        (f"Deployed nimbus-api build {n} to production after the canary held.", "ops")
        for n in range(6)
    ),
    ("nimbus の本番クラスタで証明書の期限切れ。cert-manager の自動更新が止まっていた。", "ops"),
    ("Renewed the expired webhook certificate with cert-manager by hand.", "ops"),
    ("自動更新の設定はダッシュボードから変更できる。自動更新は毎晩。", "ops"),
    ("数据库的自动更新脚本在凌晨运行。", "data"),
    ("自动更新失败时会发送告警邮件。哈哈哈哈", "data"),
    ("部署流程：先在预发布环境验证，再发布到生产环境。", "data"),
    ("环境变量和环境配置写在文件里，部署前检查。", "ops"),
    ("The kubernetesoperator reconciles every minute.", "ops"),
]


@pytest.mark.parametrize(
    "query",
    [
        "deploy 手順 nimbus",  # mixed: substrings weighted by rarity
        "cert-manager 自動更新",
        "部署 环境",  # short CJK terms
        "数据库 自动更新",  # trigram tier: the OR of phrases, FTS5's trigram BM25
        "自動更新",
        "哈哈哈",  # overlapping occurrences count as FTS5's trigram phrase does
        "operator",  # plain text no index holds: the LIKE fallback, weighted
        "本周谁值班",  # nothing
    ],
)
@pytest.mark.parametrize("project", [None, "ops"])
def test_cjk_tiers_rank_as_sqlite(
    pg_url: str, tmp_path: Path, query: str, project: str | None
) -> None:
    """The CJK and LIKE tiers give the SQLite backend's hits, BM25, bound and rescore."""
    items = [MemoryInput(text, project=p) for text, p in CJK_DOCS]
    opts = OPTS.replace(project=project)
    with PgStore.open(pg_url) as pg:
        lite = Store.open(tmp_path / "cjk.db")
        try:
            assert pg.add_many(items) == lite.add_many(items)
            ours = keyword.search(pg, query, opts, 50)
            theirs = lite_keyword.search(lite, query, opts, 50)
            assert (ours.tier, ours.terms) == (theirs.tier, theirs.terms)
            assert [h.memory_id for h in ours.hits] == [h.memory_id for h in theirs.hits]
            assert _raw(ours.hits) == pytest.approx(_raw(theirs.hits), rel=1e-9)
            if ours.hits:
                assert ours.bound == pytest.approx(theirs.bound, rel=1e-9)
            top = keyword.search(pg, query, opts, 1)
            ids = list(range(1, len(items) + 1))
            mine = keyword.rescore(pg, top, ids, opts)
            assert mine == pytest.approx({h.memory_id: h.raw for h in ours.hits}, rel=1e-9)
        finally:
            lite.close()
