"""A hybrid search whose semantic leg fails (the model errors while embedding the query)
answers with its keyword half and says why, without waiting on the failed leg."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import cortex
from cortex.errors import EmbeddingError
from cortex.search.sqlite import SemanticRetriever

PLAIN = cortex.Options(record=False, recency_weight=0.0, salience_weight=0.0, min_similarity=0.0)

TEXTS = [
    "The deployment pipeline builds a wheel, tags the release and rolls it out to staging.",
    "Kubernetes pods restart when the liveness probe fails three times.",
    "Our release train ships every Tuesday afternoon after the smoke tests pass.",
    "The cafeteria serves lentil soup on Fridays.",
    "Rollbacks of the release go through the same pipeline, tagged as hotfixes.",
]


def test_a_failed_embedding_leaves_the_keyword_half_and_says_so(
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
    assert done.wait(60), "the search did not come back after its semantic leg failed"
    results: Any = out[0]
    assert len(results) > 0  # the keyword half answers
    assert any("semantic search failed" in n for n in results.notices)
