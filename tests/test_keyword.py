"""Keyword search: seed 002's BM25 list, seed 000's FTS tests, seed 001's three-tier cascade."""

from __future__ import annotations

import pytest

import cortex
from cortex import keyword
from cortex.options import Options

KW = Options(mode="keyword")

DEPLOY_MEMORIES = [
    "The deployment process starts with a build in CI and ends in production.",
    "Deployment to staging happens on every merge to main.",
    "Our deployed services run on Kubernetes; we deploy with Helm charts.",
    "Shipping code means the release train leaves every Tuesday.",
    "The database backup runs nightly at 02:00.",
    "Process documentation lives in the wiki.",
]


@pytest.fixture
def deploy(engine: cortex.Engine) -> dict[str, int]:
    ids = engine.add_many({"content": c} for c in DEPLOY_MEMORIES)
    return dict(zip(DEPLOY_MEMORIES, ids, strict=True))


def contents(results: list[cortex.Result]) -> list[str]:
    return [r.memory.content for r in results]


# ----------------------------------------------------------------------- seed 002: BM25


def test_bm25_single_term(engine: cortex.Engine, deploy: dict[str, int]) -> None:
    results = engine.search("deployment", KW)
    assert results, "a term present in memories must be found"
    assert all("deploy" in c.lower() for c in contents(results))
    assert all(r.match_type == cortex.MatchType.BM25 for r in results)


def test_bm25_multiple_term_is_implicit_and(engine: cortex.Engine, deploy: dict[str, int]) -> None:
    results = engine.search("deployment process", KW)
    assert contents(results) == [DEPLOY_MEMORIES[0]]


def test_bm25_or(engine: cortex.Engine, deploy: dict[str, int]) -> None:
    found = set(contents(engine.search("staging OR backup", KW)))
    assert found == {DEPLOY_MEMORIES[1], DEPLOY_MEMORIES[4]}


def test_bm25_not(engine: cortex.Engine, deploy: dict[str, int]) -> None:
    found = contents(engine.search("deployment NOT staging", KW))
    assert DEPLOY_MEMORIES[0] in found
    assert DEPLOY_MEMORIES[1] not in found
    assert all("staging" not in c.lower() for c in found)


def test_bm25_not_with_no_match_stays_empty(engine: cortex.Engine, deploy: dict[str, int]) -> None:
    # A valid NOT query that matches nothing is an answer; no substring fallback may add to it.
    assert list(engine.search("staging NOT merge", KW)) == []


def test_bm25_phrase(engine: cortex.Engine, deploy: dict[str, int]) -> None:
    assert contents(engine.search('"deployment process"', KW)) == [DEPLOY_MEMORIES[0]]
    # the same words, not adjacent and in that order: no phrase match
    assert contents(engine.search('"process deployment"', KW)) == []


def test_bm25_prefix(engine: cortex.Engine, deploy: dict[str, int]) -> None:
    found = set(contents(engine.search("deploy*", KW)))
    assert {DEPLOY_MEMORIES[0], DEPLOY_MEMORIES[1], DEPLOY_MEMORIES[2]} <= found
    assert DEPLOY_MEMORIES[4] not in found


def test_prefix_matches_every_word_that_starts_with_it_and_nothing_else(
    engine: cortex.Engine,
) -> None:
    """`deploy*` is a prefix of the words as written: the Porter stem of "deploy" is
    "deploi" and of "deployment" is "deploy", so a stemmed index alone would miss one or
    the other; words that share only a stem or a substring are no match. Both the syntax
    path (`deploy*`) and the prefix tier (a word that matches nothing whole) hold to it."""
    words = {
        "deploy": "we deploy on fridays",
        "deployed": "it was deployed twice",
        "deploying": "deploying takes an hour",
        "deployment": "the deployment failed",
        "deployments": "two deployments a week",
        "Deploys": "Deploys happen at noon",
    }
    others = ["we deplore the outage", "redeploy the cache", "employ more people", "de ploy"]
    ids = engine.add_many({"content": c} for c in [*words.values(), *others])
    wanted = set(ids[: len(words)])
    assert {r.memory.id for r in engine.search("deploy*", KW)} == wanted
    assert {r.memory.id for r in engine.search("deploym*", KW)} == {ids[3], ids[4]}
    # "deplo" is no word here: the cascade's prefix tier finds the words starting with it
    found = engine.search("deplo", KW)
    assert {r.memory.id for r in found} == {*wanted, ids[len(words)]}
    assert all(r.memory.id not in ids[len(words) + 1 :] for r in found)


def test_bm25_ranking(engine: cortex.Engine) -> None:
    strong = engine.add("kubernetes kubernetes kubernetes cluster upgrade notes")
    weak = engine.add(
        "a long note about many things: lunch, travel plans, the weather, books, and once "
        "kubernetes, among other topics that fill this memory with unrelated words"
    )
    results = engine.search("kubernetes", KW)
    assert [r.memory.id for r in results] == [strong, weak]
    assert results[0].score > results[1].score
    assert results[0].bm25_score > results[1].bm25_score


def test_bm25_snippets(engine: cortex.Engine, deploy: dict[str, int]) -> None:
    results = engine.search("staging", KW)
    assert results
    assert "<mark>staging</mark>" in results[0].snippet.lower()


def test_bm25_no_results(engine: cortex.Engine, deploy: dict[str, int]) -> None:
    results = engine.search("zebrafish", KW)
    assert list(results) == []
    assert isinstance(results, list)


def test_bm25_limit(engine: cortex.Engine) -> None:
    engine.add_many({"content": f"note {i} about release engineering"} for i in range(30))
    assert len(engine.search("release", KW, limit=5)) == 5
    assert len(engine.search("release", KW)) == 20  # seed 002's default limit
    assert len(engine.search("release", KW, limit=50)) == 30


def test_bm25_scores_in_unit_interval(engine: cortex.Engine, deploy: dict[str, int]) -> None:
    results = engine.search("deploy* OR process OR database", KW, recency_weight=0.0)
    assert results
    for r in results:
        assert 0.0 <= r.bm25_score < 1.0
        assert r.score == pytest.approx(r.bm25_score)  # no boost: the score is the mapped bm25


def test_bm25_mapping_is_monotonic() -> None:
    values = [keyword.bm25_to_score(b) for b in (0.0, -0.5, -1.0, -5.0, -30.0, -1e6)]
    assert values == sorted(values)
    assert values[0] == 0.0 and values[-1] < 1.0


def test_plain_query_falls_back_to_or_when_no_memory_has_every_term(
    engine: cortex.Engine, deploy: dict[str, int]
) -> None:
    # each holds a third of the query: the OR tier finds both, the default floor would
    # hide the weaker (that is what it is for), so none here
    results = engine.search("staging backup zebrafish", KW, min_score=0.0)
    assert set(contents(results)) == {DEPLOY_MEMORIES[1], DEPLOY_MEMORIES[4]}
    assert results.rewritten is not None and "OR" in results.rewritten


def test_invalid_fts5_is_retried_as_quoted_terms(
    engine: cortex.Engine, deploy: dict[str, int]
) -> None:
    # "unbalanced" is in no memory: the one match holds half the query, under the default
    # floor; the retry is what is tested here
    results = engine.search('staging "unbalanced', KW, min_score=0.0)
    assert any("not a valid FTS5 query" in n for n in results.notices)
    assert results.rewritten is not None
    assert contents(results) == [DEPLOY_MEMORIES[1]]


# ----------------------------------------------------------------------- seed 000: FTS


@pytest.fixture
def proj1(engine: cortex.Engine) -> cortex.Engine:
    engine.add("The authentication module handles user login and JWT tokens", project="proj1")
    engine.add("Database migrations are run with the migrate command", project="proj1")
    return engine


def test_fts_finds_memories_by_keyword(proj1: cortex.Engine) -> None:
    results = proj1.search("authentication", KW, project="proj1")
    assert len(results) == 1
    assert "authentication" in results[0].snippet


def test_fts_supports_prefix_matching(proj1: cortex.Engine) -> None:
    results = proj1.search("auth", KW, project="proj1")
    assert len(results) == 1  # matches "authentication"
    assert "authentication" in results[0].memory.content


def test_fts_returns_highlighted_snippets(proj1: cortex.Engine) -> None:
    results = proj1.search("authentication", KW, project="proj1")
    assert "<mark>" in results[0].snippet


def test_fts_filters_by_project(proj1: cortex.Engine) -> None:
    proj1.add("authentication in another project", project="proj2")
    results = proj1.search("authentication", KW, project="proj1")
    assert len(results) == 1
    assert results[0].memory.project == "proj1"
    assert len(proj1.search("authentication", KW)) == 2  # no filter: both projects


def test_fts_handles_empty_query(proj1: cortex.Engine) -> None:
    assert keyword.search_fts(proj1.store, "", Options(mode="keyword", project="proj1")) == []
    # an engine search with no text lists by filters (seed 004: "" means everything)
    listed = [r.memory.id for r in proj1.search(None, KW, project="proj1")]
    assert listed
    assert [r.memory.id for r in proj1.search("", KW, project="proj1")] == listed
    assert [r.memory.id for r in proj1.search("   \t\n", KW, project="proj1")] == listed


# ----------------------------------------------------------------------- seed 001: cascade


@pytest.fixture
def cjk(engine: cortex.Engine) -> dict[str, int]:
    texts = {
        "index": "数据库查询在高峰时段变慢，原因是缺少索引。我们为订单表添加了复合索引。",
        "deploy": "部署流程：先在预发布环境验证，再发布到生产环境。",
        "docker": "我们用 Docker 容器部署所有服务，镜像保存在私有仓库。",
        "english": "The cache layer uses Redis with a five minute expiry.",
    }
    return {k: engine.add(v) for k, v in texts.items()}


def ids(results: list[cortex.Result]) -> list[int]:
    return [r.memory.id for r in results]


def test_chinese_query_of_two_terms_returns_hits(
    engine: cortex.Engine, cjk: dict[str, int]
) -> None:
    # Two-character words never match a trigram index on their own; several peer systems
    # return nothing for this query.
    results = engine.search("数据库 索引", KW)
    assert ids(results) == [cjk["index"]]
    assert "<mark>" in results[0].snippet


def test_chinese_query_of_two_character_terms_only(
    engine: cortex.Engine, cjk: dict[str, int]
) -> None:
    assert ids(engine.search("部署 环境", KW)) == [cjk["deploy"]]


def test_chinese_query_without_spaces_matches_reordered_words(
    engine: cortex.Engine, cjk: dict[str, int]
) -> None:
    # "查询数据库" is not a substring of the memory ("数据库查询"): the LIKE tier's bigrams find it.
    results = engine.search("查询数据库", KW)
    assert ids(results)[0] == cjk["index"]


def test_mixed_chinese_english_query(engine: cortex.Engine, cjk: dict[str, int]) -> None:
    results = engine.search("Docker 部署", KW)
    assert ids(results)[0] == cjk["docker"]
    assert results[0].score > 0


def test_cjk_filters_apply(engine: cortex.Engine, cjk: dict[str, int]) -> None:
    engine.add("数据库索引的另一条记录", project="other")
    results = engine.search("数据库 索引", KW, project="other")
    assert all(r.memory.project == "other" for r in results)
    assert len(results) == 1


def test_like_fallback_when_fts_finds_nothing(engine: cortex.Engine) -> None:
    engine.add("the kubernetesoperator reconciles state")
    results = engine.search("operator", KW)  # not a word, nor a word's prefix: a substring
    assert len(results) == 1
    assert any("substrings" in n for n in results.notices)
    assert 0 < results[0].score < 1


def test_like_fallback_escapes_wildcards(engine: cortex.Engine) -> None:
    engine.add("progress at one hundred percent")
    # '%' and '_' in the query are literal, not LIKE wildcards
    assert list(engine.search("100%_done", KW)) == []


def test_trigram_index_holds_only_cjk_memories(engine: cortex.Engine, cjk: dict[str, int]) -> None:
    rows = engine.store.query("SELECT id FROM memories_trigram_docsize ORDER BY id")
    assert [r[0] for r in rows] == sorted([cjk["index"], cjk["deploy"], cjk["docker"]])
