"""The CJK keyword tiers weigh a term by its rarity and rank partial matches (issue 11).

Two misses of the agent set's tune split: "deploy 手順 nimbus" ranked a hundred
"Deployed nimbus…" notes (two common terms each) above the one note holding the rare 手順,
because the substring tier counted matched terms; "cert-manager 自動更新" missed the English
note about cert-manager, because the trigram tier required every term.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

import cortex
from cortex import keyword as lite_keyword
from cortex.keyword import KeywordResult
from cortex.options import Options
from cortex.pg import keyword as pg_keyword

KW = Options(mode="keyword")


@pytest.fixture
def engine(any_engine: cortex.Engine) -> cortex.Engine:
    """Each test on both backends: they rank CJK text alike."""
    return any_engine


class keyword:  # the backend's keyword module, under the name the tests use
    @staticmethod
    def search(store: Any, query: str, opts: Options, pool: int) -> KeywordResult:
        if getattr(store, "backend", "sqlite") == "postgres":
            return pg_keyword.search(store, query, opts, pool)
        return lite_keyword.search(store, query, opts, pool)

    @staticmethod
    def rescore(store: Any, found: KeywordResult, ids: Sequence[int]) -> dict[int, float]:
        if getattr(store, "backend", "sqlite") == "postgres":
            return pg_keyword.rescore(store, found, ids, KW)
        return lite_keyword.rescore(store, found, ids)


RUNBOOK = "デプロイ手順の見直し：nimbus では本番反映の前に必ずステージングで負荷試験を行う。"
ROUTINE = "Deployed nimbus-api build {n} to production after the canary held for an hour."


def test_a_rare_term_outweighs_two_common_ones(engine: cortex.Engine) -> None:
    engine.add_many({"content": ROUTINE.format(n=n)} for n in range(40))
    runbook = engine.add(RUNBOOK)
    for opts in (KW, Options()):
        results = engine.search("deploy 手順 nimbus", opts)
        assert results[0].memory.id == runbook, opts.mode
    found = keyword.search(engine.store, "deploy 手順 nimbus", KW, 50)
    assert found.hits[0].memory_id == runbook
    # the runbook holds two of three terms, one of them rare: most of the query's weight
    assert found.hits[0].raw / found.bound > 0.5
    assert all(h.raw / found.bound < 0.2 for h in found.hits[1:])


def test_partial_matches_of_a_mixed_query_are_ranked(engine: cortex.Engine) -> None:
    full = engine.add(
        "nimbus の本番クラスタで証明書の期限切れ。cert-manager の自動更新が止まっていた。"
    )
    english = engine.add("Renewed the expired webhook certificate with cert-manager by hand.")
    engine.add("自動更新の設定はダッシュボードから変更できる。")
    engine.add("The cache layer uses Redis with a five minute expiry.")
    found = keyword.search(engine.store, "cert-manager 自動更新", KW, 20)
    ids = [h.memory_id for h in found.hits]
    assert ids[0] == full
    assert english in ids  # holds cert-manager, not 自動更新: found, below the full match
    assert len(ids) == 3


def test_substring_weights_stop_at_the_project_wall(engine: cortex.Engine) -> None:
    engine.add("部署流程：先在预发布环境验证，再发布到生产环境。", project="a")
    engine.add("部署脚本在仓库里。", project="a")
    engine.add("监控告警的阈值。", project="a")
    scoped = KW.replace(project="a")

    def ranked() -> tuple[list[tuple[int, float]], float]:
        found = keyword.search(engine.store, "部署 环境", scoped, 50)
        return [(h.memory_id, h.raw) for h in found.hits], found.bound

    before = ranked()
    assert before[0]
    engine.add_many({"content": f"第{n}个环境的部署记录。", "project": "b"} for n in range(30))
    assert ranked() == before
    # the whole store's counts do change the weights: the wall is what keeps them
    unscoped = keyword.search(engine.store, "部署 环境", KW, 50)
    assert unscoped.bound != before[1]


def test_a_term_held_twice_weighs_more_but_saturates(engine: cortex.Engine) -> None:
    once = engine.add("环境变量写在配置文件里，部署前检查。")
    twice = engine.add("环境变量和环境配置写在文件里，部署前检查。")
    engine.add_many({"content": f"Unrelated note number {n}."} for n in range(6))
    found = keyword.search(engine.store, "部署 环境", KW, 20)
    raw = {h.memory_id: h.raw for h in found.hits}
    assert set(raw) == {once, twice}
    assert raw[once] < raw[twice] < 2 * raw[once]


def test_a_trigram_query_ranks_partial_matches(engine: cortex.Engine) -> None:
    full = engine.add("数据库的自动更新脚本在凌晨运行。")
    partial = engine.add("自动更新失败时会发送告警邮件。")
    engine.add_many({"content": f"第{n}条无关的记录。"} for n in range(5))
    found = keyword.search(engine.store, "数据库 自动更新", KW, 20)
    assert found.tier == "trigram"
    assert [h.memory_id for h in found.hits] == [full, partial]


def test_the_other_legs_hits_are_scored_as_the_tier_scores_them(engine: cortex.Engine) -> None:
    routine = engine.add_many({"content": ROUTINE.format(n=n)} for n in range(10))
    runbook = engine.add(RUNBOOK)
    unrelated = engine.add("The cache layer uses Redis with a five minute expiry.")
    everyone = keyword.search(engine.store, "deploy 手順 nimbus", KW, 50)
    top = keyword.search(engine.store, "deploy 手順 nimbus", KW, 1)
    assert [h.memory_id for h in top.hits] == [runbook]
    raw = keyword.rescore(engine.store, top, [*routine, runbook, unrelated])
    assert raw == {h.memory_id: h.raw for h in everyone.hits}
    assert unrelated not in raw and set(routine) <= set(raw)
