"""Sessions, superseding, relationships, timeline, and the writes a search makes."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import cortex
from cortex.errors import InvalidOptionError, NotFoundError

KW = cortex.Options(mode="keyword")


def test_search_records_recalls_after_ranking(sqlite_engine: cortex.Engine) -> None:
    engine = sqlite_engine  # lenses are SQLite-only; the log is read with SQLite's SQL
    a = engine.add("release checklist for the api", salience=0.5)
    b = engine.add("release notes draft", salience=0.5)
    engine.save_lens("ops", mode="keyword")
    first = engine.search("release", KW, session_id="s1", lens="ops")
    order = [r.memory.id for r in first]
    assert set(order) == {a, b}
    rows = engine.store.query(
        "SELECT memory_id, query, session_id, lens, score FROM recall_log ORDER BY id"
    )
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [(i, "release", "s1", "ops") for i in order]
    assert [r[4] for r in rows] == [r.score for r in first]
    for memory_id in order:
        m = engine.get(memory_id)
        assert m.access_count == 1
        assert m.last_accessed is not None
        assert m.salience == pytest.approx(0.5)  # reading does not write the ranking
    usages = engine.store.query(
        "SELECT memory_id, usage FROM session_memories WHERE session_id = 's1'"
    )
    assert sorted(usages) == sorted((i, "recalled") for i in order)


def test_recording_can_be_turned_off_and_reinforcement_tuned(engine: cortex.Engine) -> None:
    a = engine.add("zebra crossing", salience=0.5)
    engine.search("zebra", KW, record=False)
    assert engine.get(a).access_count == 0
    engine.search("zebra", KW, reinforce=0.0)
    m = engine.get(a)
    assert m.access_count == 1 and m.salience == 0.5
    for _ in range(3):
        engine.search("zebra", KW, reinforce=0.3)
    assert engine.get(a).salience == 1.0  # capped


def test_read_only_engine_does_not_record(db_path: Path) -> None:
    with cortex.open(db_path) as e:
        a = e.add("read only recall")
    with cortex.open(db_path, read_only=True) as ro:
        assert len(ro.search("recall", KW)) == 1
    with cortex.open(db_path) as e:
        assert e.get(a).access_count == 0


def test_sessions_and_source_session(engine: cortex.Engine) -> None:
    sid = engine.start_session(project="proj1", summary="first session")
    a = engine.add("Decided to use React with TypeScript", project="proj1", session=sid)
    results = engine.search("React", KW, project="proj1")
    assert results[0].memory.id == a
    assert results[0].source_session.id == sid
    assert results[0].source_session.summary == "first session"
    engine.end_session(sid, summary="done")
    ctx = engine.session_context(a)
    assert ctx is not None and ctx.session.id == sid and ctx.usage in ("created", "recalled")
    assert ctx.session.ended_at is not None and ctx.session.summary == "done"
    with pytest.raises(NotFoundError):
        engine.end_session("nope")


def test_session_filter(engine: cortex.Engine) -> None:
    engine.add("memory in session one", session="s1")
    b = engine.add("memory in session two", session="s2")
    results = engine.search("memory", KW, session="s2")
    assert [r.memory.id for r in results] == [b]


def test_session_context_of_memory_without_session(engine: cortex.Engine) -> None:
    a = engine.add("lonely")
    assert engine.session_context(a) is None
    engine.link(a, "later", "reinforced")
    assert engine.session_context(a).usage == "reinforced"
    with pytest.raises(InvalidOptionError):
        engine.link(a, "later", "stolen")


def test_supersede(engine: cortex.Engine) -> None:
    old = engine.add("Old API endpoint is /v1", project="p")
    new = engine.add("New API endpoint is /v2", project="p")
    engine.supersede(old, new)
    default = engine.search("API endpoint", KW, project="p")
    assert [r.memory.id for r in default] == [new]
    both = engine.search("API endpoint", KW, project="p", include_superseded=True)
    old_result = next(r for r in both if r.memory.id == old)
    assert old_result.is_superseded
    assert old_result.superseded_by.id == new
    assert old_result.superseded_by.content.startswith("New API")
    assert old_result.memory.valid_until is not None
    new_result = next(r for r in both if r.memory.id == new)
    assert not new_result.is_superseded and new_result.superseded_by is None
    with pytest.raises(InvalidOptionError):
        engine.supersede(new, new)


def test_related_memory_count(engine: cortex.Engine) -> None:
    m1 = engine.add("Memory one about caching")
    m2 = engine.add("Memory two about queues")
    m3 = engine.add("Memory three about caching again")
    engine.relate(m1, m2, "RELATED_TO", "user")
    engine.relate(m3, m1)
    engine.relate(m3, m1)  # the same relationship twice counts once
    results = {r.memory.id: r for r in engine.search("memory", KW)}
    assert results[m1].related_memory_count == 2
    assert results[m2].related_memory_count == 1


def test_timeline(engine: cortex.Engine) -> None:
    now = datetime.now(UTC)
    ids = [
        engine.add(
            f"event {i}", project="p", session="s1", created_at=now - timedelta(hours=10 - i)
        )
        for i in range(8)
    ]
    engine.add("other project event", project="q", created_at=now - timedelta(hours=5))
    t = engine.timeline(ids[4], before=2, after=2)
    assert t.anchor.id == ids[4]
    assert [m.id for m in t.before] == ids[2:4]
    assert [m.id for m in t.after] == ids[5:7]
    assert "s1" in t.sessions
    edge = engine.timeline(ids[0], before=5, after=0)
    assert edge.before == () and edge.after == ()
    with pytest.raises(InvalidOptionError):
        engine.timeline(ids[0], before=-1)


def test_explain_shows_every_factor(engine: cortex.Engine) -> None:
    engine.add("explain this ranking", created_at=time.time() - 86400 * 9)
    r = engine.search("ranking", KW, explain=True)[0]
    parts = r.explain
    assert parts is not None
    assert parts["score"] == pytest.approx(
        parts["base"] * parts["recency_boost"] * parts["effective_confidence"]
    )
    assert parts["recency_boost"] == pytest.approx(1 + 0.1 / (1 + 9), rel=1e-3)
    assert engine.search("ranking", KW)[0].explain is None


def test_threshold_reports_what_it_hid(engine: cortex.Engine) -> None:
    engine.add("threshold test memory")
    results = engine.search("threshold", KW, min_score=0.99)
    assert list(results) == []
    assert results.hidden == 1
    assert any("below min_score" in n for n in results.notices)


def test_facts_weight_and_filter_by_effective_confidence(engine: cortex.Engine) -> None:
    fresh = engine.add("cache invalidation rule fresh")
    stale = engine.add("cache invalidation rule stale")
    engine.add_fact(fresh, "rule", "invalidate on write", confidence=0.9, decay_rate=0.01)
    engine.add_fact(
        stale, "rule", "invalidate nightly", confidence=0.9, decay_rate=0.1,
        last_reinforced=time.time() - 86400 * 40,
    )  # fmt: skip
    results = engine.search("cache invalidation", KW)
    ids = [r.memory.id for r in results]
    assert ids == [fresh]  # 0.9 * exp(-4) = 0.016 < 0.1: filtered
    assert results.hidden == 1
    assert results[0].facts[0].effective_confidence == pytest.approx(0.9, rel=1e-3)
    assert results[0].effective_confidence == pytest.approx(0.9, rel=1e-3)
    lenient = engine.search("cache invalidation", KW, min_confidence=0.0, min_score=0.0)
    assert [r.memory.id for r in lenient] == [fresh, stale]


@pytest.fixture
def engine(any_engine: cortex.Engine) -> cortex.Engine:
    """This module's behaviour on both backends (SQLite and PostgreSQL)."""
    return any_engine
