"""Seed 003's search (issue 12): time words read as a window, pages and cursors, context
around each result, aggregations. Real SQLite file, real model, a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import cortex

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)  # a Monday


def at(days_ago: float) -> datetime:
    return NOW - timedelta(days=days_ago)


@pytest.fixture
def dated(engine: cortex.Engine) -> cortex.Engine:
    engine.add_many(
        [
            # last Tuesday (2026-11-17)
            {"content": "Paired with Sam on the billing export job", "created_at": at(6)},
            {"content": "Reviewed the ingest retry patch", "created_at": at(6.1)},
            # last week (Mon 16 .. Sun 22): the auth fix
            {
                "content": "Fixed the auth bug: JWT clock skew, added 30s leeway",
                "created_at": at(4),
            },
            # August: an older auth fix
            {"content": "Fixed an auth bug in the login form validation", "created_at": at(100)},
            # a Saturday note that says the word
            {"content": "Standup moves to Tuesdays from December", "created_at": at(2)},
            {"content": "Deploy freeze for the holidays starts Dec 18", "created_at": at(30)},
        ]
    )
    return engine


def contents(results: cortex.Results) -> list[str]:
    return [r.memory.content for r in results]


def test_last_tuesday_is_a_window_not_a_word(dated: cortex.Engine) -> None:
    results = dated.search("what was I working on last Tuesday", now=NOW, record=False)
    assert set(contents(results)) == {
        "Paired with Sam on the billing export job",
        "Reviewed the ingest retry patch",
    }
    assert results.interpretation is not None
    frame = results.interpretation["timeframe"]
    assert frame["since"] == "2026-11-17T00:00:00Z" and frame["until"] == "2026-11-18T00:00:00Z"
    assert results.interpretation["applied"] == "hard"
    assert "tuesday" not in results.interpretation["searched"].lower()


def test_how_did_i_fix_the_auth_bug_last_week(dated: cortex.Engine) -> None:
    results = dated.search("How did I fix the auth bug last week?", now=NOW, record=False)
    assert contents(results)[0].startswith("Fixed the auth bug: JWT")
    assert "login form" not in " ".join(contents(results))


def test_a_window_with_no_match_falls_back_to_a_boost(dated: cortex.Engine) -> None:
    results = dated.search("deploy freeze yesterday", now=NOW, record=False)
    assert contents(results)[0].startswith("Deploy freeze")
    assert results.interpretation is not None
    assert results.interpretation["applied"].startswith("soft")


def test_time_filter_off_and_explicit_dates_win(dated: cortex.Engine) -> None:
    off = dated.search("auth bug last week", now=NOW, time_filter="off", record=False)
    assert off.interpretation is None
    assert "Fixed an auth bug in the login form validation" in contents(off)
    explicit = dated.search("auth bug last week", now=NOW, created_since=at(200), record=False)
    assert explicit.interpretation is not None and explicit.interpretation["applied"] is None
    assert len(explicit) == 2


# ------------------------------------------------------------------ pages


@pytest.fixture
def many(engine: cortex.Engine) -> cortex.Engine:
    engine.add_many(
        {"content": f"release note {i}: the deploy of build {i} went out", "project": f"p{i % 3}"}
        for i in range(70)
    )
    return engine


def test_pages_followed_by_cursor_return_every_match_once(many: cortex.Engine) -> None:
    full = [r.memory.id for r in many.search("deploy build", limit=50, now=NOW, record=False)]
    seen: list[int] = []
    page = many.search("deploy build", limit=10, now=NOW, record=False)
    while True:
        seen.extend(r.memory.id for r in page)
        if not page.has_more:
            break
        assert page.next_cursor
        page = many.search("deploy build", limit=10, now=NOW, record=False, cursor=page.next_cursor)
    assert len(seen) == len(set(seen)) == page.total
    assert seen[:50] == full


def test_offset_and_order(many: cortex.Engine) -> None:
    full = [r.memory.id for r in many.search("deploy", limit=40, now=NOW, record=False)]
    page = many.search("deploy", limit=10, offset=10, now=NOW, record=False)
    assert [r.memory.id for r in page] == full[10:20]
    newest = [r.memory.id for r in many.search(None, order_by="recency", limit=5)]
    oldest = [r.memory.id for r in many.search(None, order_by="recency", order="asc", limit=5)]
    assert newest == [70, 69, 68, 67, 66] and oldest == [1, 2, 3, 4, 5]


def test_a_cursor_of_another_search_is_refused(many: cortex.Engine) -> None:
    page = many.search("deploy", limit=5, record=False)
    assert page.next_cursor
    with pytest.raises(cortex.InvalidOptionError, match="another search"):
        many.search("release", limit=5, cursor=page.next_cursor)
    with pytest.raises(cortex.InvalidOptionError):
        many.search("deploy", limit=5, cursor="not-a-cursor!")


def test_aggregations_count_every_match(many: cortex.Engine) -> None:
    results = many.search("deploy", limit=5, now=NOW, record=False)
    agg = results.aggregations
    assert agg is not None and agg["total"] == results.total == 70
    assert agg["by_project"] == {"p0": 24, "p1": 23, "p2": 23}
    assert sum(b["count"] for b in agg["over_time"]["buckets"]) == 70
    assert results.to_dict()["aggregations"] == agg


def test_a_listing_beyond_the_candidate_pool_counts_every_match(tmp_path: Path) -> None:
    """A listing by filters reads a page's worth of candidates; its total and aggregations
    are counted in SQL over every memory the filters admit (not capped at the pool)."""
    with cortex.open(tmp_path / "big.db", embedder=None) as engine:
        start = NOW.timestamp() - 200 * 86400
        engine.add_many(
            {
                "content": f"note {i}",
                "project": f"p{i % 3}",
                "category": "ops" if i % 2 else None,
                "session": f"s{i % 7}",
                "created_at": start + i * 86400 / 2,
            }
            for i in range(400)
        )
        engine.add_fact(1, "decision", "a fact", confidence=0.9)
        listed = engine.search("", limit=10, record=False)
        assert listed.total == 400 and listed.has_more and len(listed) == 10
        agg = listed.aggregations
        assert agg is not None and agg["total"] == 400
        assert agg["by_project"] == {"p0": 134, "p1": 133, "p2": 133}
        assert agg["by_category"] == {"ops": 200}
        assert sum(agg["by_session"].values()) == 400 and len(agg["by_session"]) == 7
        assert agg["by_fact_type"] == {"decision": 1}
        assert agg["over_time"]["unit"] == "week"
        assert sum(b["count"] for b in agg["over_time"]["buckets"]) == 400
        walled = engine.search(None, project="p1", limit=5, record=False)
        assert walled.total == 133 and walled.aggregations["by_project"] == {"p1": 133}
        # the last page: has_more is false exactly when the page reaches the total
        last = engine.search(None, project="p1", limit=100, offset=100, record=False)
        assert len(last) == 33 and not last.has_more and last.total == 133


# ------------------------------------------------------------------ context


def test_context_carries_the_neighbouring_chunks(engine: cortex.Engine, tmp_path: Path) -> None:
    note = tmp_path / "runbook.md"
    note.write_text(
        "# One\nalpha step\n\n# Two\nbravo step\n\n# Three\ncharlie zebra step\n\n"
        "# Four\ndelta step\n\n# Five\necho step\n"
    )
    engine.import_path(note)
    r = engine.search("zebra", context=1, mode="keyword", record=False)[0]
    assert r.context is not None
    assert [c["content"] for c in r.context["before"]] == ["# Two\nbravo step"]
    assert [c["content"] for c in r.context["after"]] == ["# Four\ndelta step"]
    wide = engine.search("zebra", context=5, mode="keyword", record=False)[0].context
    assert wide is not None and len(wide["before"]) == 2 and len(wide["after"]) == 2


def test_session_context_is_by_time_within_the_session(engine: cortex.Engine) -> None:
    for i, text in enumerate(["we chose postgres", "it needs a vacuum job", "Sam owns it"]):
        engine.add(text, session="s1", project="a", created_at=at(3 - i))
    engine.add("unrelated in another project", session="s1", project="b", created_at=at(2))
    r = engine.search("vacuum", context=2, mode="keyword", project="a", record=False)[0]
    assert r.context is not None
    assert [c["content"] for c in r.context["before"]] == ["we chose postgres"]
    assert [c["content"] for c in r.context["after"]] == ["Sam owns it"]


@pytest.fixture
def engine(any_engine: cortex.Engine) -> cortex.Engine:
    """This module's behaviour on both backends (SQLite and PostgreSQL)."""
    return any_engine
