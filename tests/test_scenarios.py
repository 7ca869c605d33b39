"""Seed 004's search scenarios 1-9 (Cerberus phase 13), through the Engine API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import cortex
from cortex.ranking import estimate_tokens

KW = cortex.Options(mode="keyword")
NOW = datetime.now(UTC)

MEMORIES = [
    # content, scope, category, confidence, age in days
    ("Split files larger than 500 lines by responsibility", "language:go", "rule", 0.9, 10),
    ("Keep output short: answer first, then detail", "universal", "preference", 0.95, 5),
    ("Output of the linter is long; keep it in a file", "universal", "correction", 0.5, 3),
    ("Go files: one package per folder", "language:go", "rule", 0.85, 30),
    ("Never split a test across files in hydra", "project:hydra", "rule", 0.7, 2),
    ("Hydra testing: use table-driven tests", "project:hydra:task:testing", "preference", 0.8, 1),
    ("Python files use snake_case names", "language:python", "rule", 0.6, 20),
    ("Short commit messages are a correction we received", "universal", "correction", 0.85, 7),
    ("Keep it short", "universal", "preference", 0.75, 40),
    ("Hydrangea notes are unrelated to the hydra project", "project:hydrangea", "decision", 1.0, 0),
]


@pytest.fixture
def cerberus(engine: cortex.Engine) -> cortex.Engine:
    engine.add_many(
        {
            "content": content,
            "scope": scope,
            "category": category,
            "confidence": confidence,
            "created_at": NOW - timedelta(days=age),
        }
        for content, scope, category, confidence, age in MEMORIES
    )
    return engine


def test_scenario_1_basic_text_search(cerberus: cortex.Engine) -> None:
    results = cerberus.search("split files", KW)
    assert results
    for r in results:
        text = r.memory.content.lower()
        assert "split" in text or "file" in text
    assert "split" in results[0].memory.content.lower()
    assert "file" in results[0].memory.content.lower()
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True)


def test_scenario_2_scope_filter(cerberus: cortex.Engine) -> None:
    results = cerberus.search(None, scope="language:go")
    assert {r.memory.content for r in results} == {m[0] for m in MEMORIES if m[1] == "language:go"}


def test_scenario_3_category_filter(cerberus: cortex.Engine) -> None:
    results = cerberus.search(None, category="correction")
    assert len(results) == 2
    assert all(r.memory.category == "correction" for r in results)


def test_scenario_4_confidence_filter(cerberus: cortex.Engine) -> None:
    results = cerberus.search(None, min_confidence=0.8, limit=50)
    expected = {m[0] for m in MEMORIES if m[3] >= 0.8}
    assert {r.memory.content for r in results} == expected
    assert all(r.effective_confidence >= 0.8 for r in results)


def test_scenario_5_scope_prefix(cerberus: cortex.Engine) -> None:
    results = cerberus.search(None, scope="project:hydra*")
    scopes = {r.memory.scope for r in results}
    # the prefix is literal text: project:hydrangea also starts with "project:hydra"
    assert scopes == {"project:hydra", "project:hydra:task:testing", "project:hydrangea"}
    colon = cerberus.search(None, scope="project:hydra:*")
    assert {r.memory.scope for r in colon} == {"project:hydra:task:testing"}
    exact = cerberus.search(None, scope="project:hydra")
    assert {r.memory.scope for r in exact} == {"project:hydra"}


def test_scenario_6_relevance_ordering(cerberus: cortex.Engine) -> None:
    results = cerberus.search("keep output short", KW, recency_weight=0.0)
    assert results[0].memory.content == "Keep output short: answer first, then detail"
    # partial matches (fewer of the terms) come after, through the OR fallback or not at all
    assert all(r.score <= results[0].score for r in results)


def test_scenario_7_recency_ordering(cerberus: cortex.Engine) -> None:
    results = cerberus.search(None, order_by="recency", limit=50)
    created = [r.memory.created_at for r in results]
    assert created == sorted(created, reverse=True)
    assert results[0].memory.content.startswith("Hydrangea")
    # the same order for a text query
    texts = cerberus.search("files OR short", KW, order_by="recency")
    assert [r.memory.created_at for r in texts] == sorted(
        (r.memory.created_at for r in texts), reverse=True
    )


def test_scenario_8_token_budget(engine: cortex.Engine) -> None:
    engine.add_many(
        {"content": f"memory number {i} about budget enforcement in the search path"}
        for i in range(100)
    )
    cost = estimate_tokens("memory number 10 about budget enforcement in the search path")
    results = engine.search("budget", KW, limit=100, token_budget=500)
    assert len(results) == 500 // cost
    assert sum(estimate_tokens(r.memory.content) for r in results) <= 500
    # the budget cuts the same ranking the limit would: a prefix of it
    full = engine.search("budget", KW, limit=100)
    assert [r.memory.id for r in results] == [r.memory.id for r in full][: len(results)]


def test_scenario_9_empty_results(cerberus: cortex.Engine) -> None:
    results = cerberus.search("nonexistent-term-xyz", KW)
    assert list(results) == []


def test_confidence_order(cerberus: cortex.Engine) -> None:
    results = cerberus.search(None, order_by="confidence", limit=50)
    confidences = [r.effective_confidence for r in results]
    assert confidences == sorted(confidences, reverse=True)


def test_limit_is_a_prefix_of_a_larger_limit(cerberus: cortex.Engine) -> None:
    small = cerberus.search("files OR short OR hydra OR keep", KW, limit=3)
    large = cerberus.search("files OR short OR hydra OR keep", KW, limit=50)
    assert [r.memory.id for r in small] == [r.memory.id for r in large][:3]


@pytest.fixture
def engine(any_engine: cortex.Engine) -> cortex.Engine:
    """This module's behaviour on both backends (SQLite and PostgreSQL)."""
    return any_engine
