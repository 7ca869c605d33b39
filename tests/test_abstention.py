"""Abstention (issue 11): a hybrid search that the store cannot answer comes back empty.

Two mechanisms, each measured on the agent set's tune half (BENCHMARKS.md, "Ranking:
abstention"): the semantic standout rule (a semantic match counts for an answer only as far
as it stands out of the query's crowd of alike memories) and CJK function characters left
out of the keyword side (a lone の matched every Japanese memory). Real store, real model.
"""

from __future__ import annotations

import math

import pytest

import cortex
from cortex.search import hits, pipeline
from cortex.search.plan import DROPPED

SERVICES = ("tiles", "styles", "geocoder", "site")
PEOPLE = ("Marta", "Lena", "Sam", "Chloé", "Ines", "Yuki")
REVIEWS = (
    "asked to split the schema change from the code change",
    "suggested a table-driven test",
    "the new config option needs a default and a doc line",
    "approved with a nit about log wording",
    "asked for a benchmark before merging",
)
# A crowd of alike notes of one project (what a store of a few thousand agent notes holds
# by the hundred), and a few notes that each say one thing.
CROWD = [
    f"Reviewed PR #{100 + i} in atlas-{SERVICES[i % 4]} by {PEOPLE[i % 6]}: {REVIEWS[i % 5]}."
    for i in range(20)
]
CROWD += [f"Annotated releases on the atlas-{s} dashboard." for s in SERVICES]
CROWD += [
    f"Deployed atlas-{s} 5.{i}.0 to the canary pool: a distroless image, 40 MB smaller."
    for i, s in enumerate(SERVICES)
]
SINGLES = [
    "HYD-1301: invoice totals were rounded per line instead of per invoice, so amounts were"
    " off by one cent.",
    "ATL-102: tiles at the antimeridian were clipped. Split geometries that cross 180 degrees"
    " before tiling.",
    "The on-call rotation changes every Monday at 10:00; the handover happens in #hydra-oncall.",
    "Terraform state for nimbus lives in the S3 bucket nimbus-tfstate with DynamoDB locking.",
]
#: Asked of a store that holds nothing about it: the model places it among the atlas notes.
UNANSWERABLE = "where is the on-premise installation guide for atlas?"


@pytest.fixture
def crowd(engine: cortex.Engine) -> cortex.Engine:
    engine.add_many({"content": c, "project": "atlas"} for c in CROWD + SINGLES)
    return engine


def ids(results: cortex.Results) -> list[int]:
    return [r.memory.id for r in results]


# ------------------------------------------------------------------ the measure


def test_standout_reads_the_z_scores_back_from_calibrated_scores() -> None:
    mean, sd = 0.08, 0.07
    cosines = [0.62, 0.5, 0.41, 0.4, 0.38, 0.33, 0.3, 0.29, 0.27, 0.25, 0.2, 0.1]
    scores = [hits.semantic_score(c, mean, sd) for c in cosines]
    expected = (cosines[0] - cosines[pipeline.STANDOUT_RANK - 1]) / sd
    got = pipeline.semantic_standout(scores)
    assert got is not None
    assert got == pytest.approx(expected, rel=1e-6)
    # order does not matter; fewer hits than the rank measure nothing
    assert pipeline.semantic_standout(list(reversed(scores))) == pytest.approx(got)
    assert pipeline.semantic_standout(scores[: pipeline.STANDOUT_RANK - 1]) is None


def test_the_factor_is_one_for_a_standout_and_the_floor_for_a_crowd() -> None:
    def at(z: float) -> float:
        return 1.0 / (1.0 + math.exp(-(z - hits.SEMANTIC_MID)))

    crowd = [at(3.8), at(3.75)] + [at(3.5)] * 7 + [at(3.2)]  # the tenth 0.6 below the best
    standout = [at(4.2)] + [at(1.0)] * 8 + [at(0.2)]  # 4.0 above the tenth
    assert pipeline.standout_factor(standout) == 1.0
    assert pipeline.standout_factor(crowd) == pytest.approx(
        max(pipeline.STANDOUT_FLOOR, 0.6 / pipeline.STANDOUT_GAP), rel=1e-6
    )
    assert pipeline.standout_factor([at(9.0)] + [at(0.0)] * 9 + [at(9.0)]) == 1.0
    assert pipeline.standout_factor([at(2.0)] * 12) == pipeline.STANDOUT_FLOOR
    assert pipeline.standout_factor(standout[:5]) == 1.0  # too few hits to judge


# ------------------------------------------------------------------ on a real store


def test_a_question_the_store_cannot_answer_comes_back_empty(crowd: cortex.Engine) -> None:
    found = crowd.search(UNANSWERABLE, record=False)
    assert list(found) == []
    assert found.hidden > 0
    assert any("nothing passed the thresholds" in n for n in found.notices)
    # every match's semantic evidence is a crowd's: counted so, none reaches the floor
    shown = crowd.search(UNANSWERABLE, record=False, min_score=0.0, explain=True)
    assert len(shown) > 0
    for r in shown:
        x = r.explain
        assert x is not None
        assert x["standout_base"] < x["base"]


def test_the_standout_rule_is_what_empties_it(
    crowd: cortex.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A floor between the two scores: the fused score clears it, the standout one does not.
    shown = crowd.search(UNANSWERABLE, record=False, min_score=0.0, explain=True)
    top = shown[0].explain
    assert top is not None
    best_standout = max(r.explain["standout_base"] for r in shown if r.explain is not None)
    floor = (top["base"] + best_standout) / 2
    assert best_standout < floor < top["base"]
    assert list(crowd.search(UNANSWERABLE, record=False, min_score=floor)) == []
    monkeypatch.setattr(pipeline, "STANDOUT_GAP", 0.0)  # the rule off
    assert len(crowd.search(UNANSWERABLE, record=False, min_score=floor)) > 0


def test_an_answer_that_stands_out_is_kept_as_it_was(crowd: cortex.Engine) -> None:
    # A paraphrase with no shared word: the one note about it stands out of the store.
    found = crowd.search("billing amounts a penny wrong", record=False, explain=True)
    assert found, found.notices
    assert found[0].memory.content.startswith("HYD-1301")
    x = found[0].explain
    assert x is not None
    assert x["standout_base"] == x["base"]


def test_the_rule_never_reorders_what_a_search_answers(
    crowd: cortex.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    queries = ("terraform", "map tiles cut off at the date line", "atlas-tiles canary deploy")
    with_rule = {q: crowd.search(q, record=False, explain=True) for q in queries}
    monkeypatch.setattr(pipeline, "STANDOUT_GAP", 0.0)
    for q in queries:
        without = crowd.search(q, record=False, explain=True)
        assert ids(with_rule[q]) == ids(without), q
        # (the recency boost reads the clock: equal up to the time between the searches)
        assert [r.score for r in with_rule[q]] == pytest.approx([r.score for r in without])
        assert len(without) > 0, q


def test_a_query_that_names_what_the_store_holds_is_exempt(crowd: cortex.Engine) -> None:
    # "Marta" is held: notes about her are what the question asks for, alike as they are.
    found = crowd.search("what did Marta review?", record=False, min_score=0.0, explain=True)
    assert found
    for r in found:
        x = r.explain
        assert x is not None
        assert x["standout_base"] == x["base"]


def test_keyword_and_semantic_modes_are_not_judged_by_the_rule(crowd: cortex.Engine) -> None:
    for mode in ("keyword", "semantic"):
        shown = crowd.search(UNANSWERABLE, mode=mode, record=False, min_score=0.0, explain=True)
        for r in shown:
            x = r.explain
            assert x is not None
            assert x["standout_base"] == x["base"], mode


# ------------------------------------------------------------------ CJK function characters

JAPANESE = [
    "朝会：Lena は Sam さんのレビュー対応。レビュー待ち。",
    "デプロイ手順の見直し：nimbus では本番反映の前に必ずステージングで負荷試験を行う。",
    "atlas のタイル生成バッチが夜間に失敗していた。原因はディスク容量不足。",
]


def test_a_lone_particle_is_not_searched(engine: cortex.Engine) -> None:
    assert {"の", "的", "は"} <= DROPPED
    engine.add_many({"content": c, "project": "ops"} for c in JAPANESE)
    # Every note holds の; none holds Spinnaker or 導入計画 (introduction plan).
    for mode in ("keyword", "hybrid"):
        found = engine.search("Spinnaker の 導入計画", mode=mode, record=False)
        assert list(found) == [], (mode, [r.memory.content for r in found])
    # the particle left out, the words around it still find their note
    found = engine.search("デプロイ手順 の 見直し", mode="keyword", record=False)
    assert found and found[0].memory.content.startswith("デプロイ手順")


# ------------------------------------------------------------------ narrow filters

DECISIONS = [
    ("Secrets go in Vault under kv/nimbus/<service>; never commit secrets in .env files.",
     "decision"),
    ("Staging load tests are required before every production rollout of nimbus.", "decision"),
    ("nimbus Kubernetes clusters: prod-eu-1 and prod-us-1 on version 1.29.", "infra"),
    ("The ingress controller 1.11 rollout failed on an expired admission webhook certificate.",
     "incident"),
]  # fmt: skip


@pytest.fixture
def decisions(engine: cortex.Engine) -> cortex.Engine:
    engine.add_many({"content": c, "project": "nimbus", "category": k} for c, k in DECISIONS)
    engine.add_many({"content": c, "project": "atlas"} for c in CROWD)
    return engine


def test_a_narrow_filter_shows_every_memory_it_admits(decisions: cortex.Engine) -> None:
    # No word of "what did we decide" is in either decision: the floor hid both. The
    # filters admit two memories: they are what was asked, ordered by relevance (keyword
    # mode ranks only memories holding a word of the query: here none).
    opts = {"project": "nimbus", "category": "decision", "record": False}
    for mode in ("hybrid", "semantic"):
        found = decisions.search("what did we decide", mode=mode, **opts)
        assert {r.memory.content for r in found} == {c for c, k in DECISIONS if k == "decision"}
    # an explicit floor still holds
    assert list(decisions.search("what did we decide", min_score=0.9, **opts)) == []


def test_the_project_alone_is_not_a_narrow_filter(decisions: cortex.Engine) -> None:
    # nimbus holds four memories, yet a question none of them answers stays unanswered
    found = decisions.search("who owns the RabbitMQ cluster?", project="nimbus", record=False)
    assert list(found) == []


def test_a_wide_filter_keeps_the_floor(
    decisions: cortex.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline, "NARROW_FILTER", 1)  # two decisions: no longer narrow
    found = decisions.search(
        "what did we decide", project="nimbus", category="decision", record=False
    )
    assert list(found) == []


def test_a_narrow_filter_with_a_match_keeps_the_floor(decisions: cortex.Engine) -> None:
    # one decision holds "rollout": the floor keeps what matches, the other is left out
    found = decisions.search("rollout", category="decision", project="nimbus", record=False)
    assert [r.memory.content for r in found] == [DECISIONS[1][0]]


def test_a_narrow_filter_pages_the_same_for_every_limit(decisions: cortex.Engine) -> None:
    opts = {"project": "nimbus", "category": "decision", "record": False}
    full = decisions.search("what did we decide", limit=20, **opts)
    assert len(full) == 2
    for limit in (1, 2, 5):
        page = decisions.search("what did we decide", limit=limit, **opts)
        assert ids(page) == ids(full)[:limit]
