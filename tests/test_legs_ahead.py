"""The keyword hits' cosines scored on the caller's thread while the semantic leg scans
(QueryVector, SemanticRetriever.known, Leg.known): the same answers as the rescore after
both legs, and no wait when the semantic leg fails before it embeds."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import cortex
from cortex.errors import EmbeddingError
from cortex.search.hits import QueryVector
from cortex.search.sqlite import SemanticRetriever

PLAIN = cortex.Options(record=False, recency_weight=0.0, salience_weight=0.0, min_similarity=0.0)

TEXTS = [
    "The deployment pipeline builds a wheel, tags the release and rolls it out to staging.",
    "Kubernetes pods restart when the liveness probe fails three times.",
    "Our release train ships every Tuesday afternoon after the smoke tests pass.",
    "The cafeteria serves lentil soup on Fridays.",
    "Postgres vacuum runs nightly; bloat alerts page the on-call engineer.",
    "zebra-7 is the codename of the new billing service.",
    "Rollbacks of the release go through the same pipeline, tagged as hotfixes.",
    "The staging cluster mirrors production's Kubernetes version.",
]
QUERIES = ["release pipeline", "kubernetes restarts", "lentil soup", "billing codename", "vacuum"]


def _answers(engine: cortex.Engine) -> list[list[tuple[int, float, float, float]]]:
    return [
        [(r.memory.id, r.score, r.bm25_score, r.semantic_score) for r in engine.search(q, PLAIN)]
        for q in QUERIES
    ]


def test_cosines_ahead_give_the_rescore_after_both_legs(engine: cortex.Engine) -> None:
    engine.add_many({"content": t} for t in TEXTS)
    retriever = engine._pipeline._semantic
    assert isinstance(retriever, SemanticRetriever)
    handed: list[dict[int, float | None]] = []
    known = retriever.known

    def spy(query, ids):  # type: ignore[no-untyped-def]
        out = known(query, ids)
        handed.append(out)
        return out

    retriever.known = spy  # type: ignore[method-assign]
    ahead = _answers(engine)
    assert handed and any(handed), "the caller scored the keyword hits ahead"
    # the same searches with the cosines scored after both legs (the retriever has no
    # `known`: the pipeline does not hand the vector over)
    del retriever.known
    type_known = SemanticRetriever.known
    try:
        del SemanticRetriever.known
        after = _answers(engine)
    finally:
        SemanticRetriever.known = type_known  # type: ignore[method-assign]
    assert ahead == after
    assert any(len(a) > 1 for a in ahead)


def test_known_cosines_are_the_index_cosines(engine: cortex.Engine) -> None:
    ids = engine.add_many({"content": t} for t in TEXTS)
    retriever = engine._pipeline._semantic
    assert isinstance(retriever, SemanticRetriever)
    query = retriever._query("release pipeline")
    found = retriever.known(query, [*ids[:3], 10_000])
    assert set(found) == {*ids[:3], 10_000}
    assert found[10_000] is None  # no such memory: no measure
    exact = retriever.cosines(query, ids[:3])
    assert [found[i] for i in ids[:3]] == [exact[i] for i in ids[:3]]


def test_a_failed_embedding_hands_over_none_and_the_search_says_so(
    engine: cortex.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.add_many({"content": t} for t in TEXTS)
    retriever = engine._pipeline._semantic
    assert isinstance(retriever, SemanticRetriever)

    def broken(text: str) -> None:
        raise EmbeddingError("the model is gone")

    monkeypatch.setattr(retriever, "_query", broken)
    done = threading.Event()
    out: list[object] = []

    def search() -> None:
        out.append(engine.search("release pipeline", PLAIN))
        done.set()

    worker = threading.Thread(target=search, daemon=True)
    worker.start()
    assert done.wait(60), "the search waited for a query vector that never came"
    results: Any = out[0]
    assert len(results) > 0  # the keyword half answers
    assert any("semantic search failed" in n for n in results.notices)


def test_query_vector_wait_returns_none_when_the_leg_is_gone() -> None:
    vector = QueryVector()
    assert vector.wait(lambda: True) is None
    vector.set([1.0])
    assert vector.wait(lambda: True) == [1.0]
    assert vector.wait() == [1.0]
