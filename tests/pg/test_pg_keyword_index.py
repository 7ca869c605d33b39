"""The in-memory keyword index on PostgreSQL (cortex.pg.keyword_index): the same hits and
BM25 as the SQL statement, kept in step with every kind of write through keyword_log."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from typing import Any

import pytest

from cortex.options import Mode, Options
from cortex.pg import keyword
from cortex.pg.keyword_index import PgKeywordIndex
from cortex.pg.store import PgStore
from cortex.store import MemoryInput

WORDS = [
    "deploy",
    "deployment",
    "deploying",
    "service",
    "billing",
    "auth",
    "token",
    "refresh",
    "database",
    "migration",
    "timeout",
    "cache",
    "ledger",
    "invoice",
    "sidekiq",
    "queue",
    "worker",
    "retry",
    "backoff",
    "fridays",
    "rollout",
    "canary",
    "config",
    "secret",
    "rotate",
    "key",
    "vault",
    "postgres",
    "sqlite",
    "index",
    "vector",
    "search",
]
PROJECTS = ("alpha", "beta", None)

QUERIES = [
    "deploy",
    "deploy service",
    "billing invoice ledger",
    "retry backoff queue worker",
    "canary rollout fridays config",
    "vault secret rotate nosuchword",  # AND empty: the OR tier
    "nosuchword",  # nothing: the prefix tier (SQL) and then LIKE
    "deploying services",  # stems
    "the deploy",  # a stop word left out
    "cache cache cache",  # a repeated word
]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 40)))


def _items(n: int, seed: int = 7) -> list[MemoryInput]:
    rng = random.Random(seed)
    return [
        MemoryInput(
            _text(rng),
            project=PROJECTS[i % 3],
            category="ops" if i % 4 == 0 else None,
        )
        for i in range(n)
    ]


@pytest.fixture
def store(pg_url: str) -> Iterator[PgStore]:
    pg = PgStore.open(pg_url)
    pg.add_many(_items(300))
    yield pg
    pg.close()


@pytest.fixture
def native(store: PgStore) -> Iterator[PgKeywordIndex]:
    ix = PgKeywordIndex(store, "on")
    yield ix
    ix.close()


def _opts(**kw: Any) -> Options:
    return Options(mode=Mode.KEYWORD, record=False, **kw)


def _same(store: PgStore, native: PgKeywordIndex, query: str, opts: Options, pool: int) -> Any:
    """The search with and without the index: the same tier, hits, BM25 and bound."""
    sql = keyword.search(store, query, opts, pool)
    mem = keyword.search(store, query, opts, pool, native)
    assert (mem.tier, mem.rewritten, mem.terms) == (sql.tier, sql.rewritten, sql.terms), query
    assert [h.memory_id for h in mem.hits] == [h.memory_id for h in sql.hits], query
    for a, b in zip(mem.hits, sql.hits, strict=True):
        assert math.isclose(a.raw, b.raw, rel_tol=1e-9), (query, a, b)
        assert a.info == b.info
    assert math.isclose(mem.bound, sql.bound, rel_tol=1e-9, abs_tol=1e-12), query
    return sql, mem


def _check_all(store: PgStore, native: PgKeywordIndex) -> None:
    for opts in (_opts(), _opts(project="alpha"), _opts(category="ops"), _opts(project="beta")):
        for q in QUERIES:
            _same(store, native, q, opts, 500)  # every match: no cut among equal scores


def test_same_hits_and_bm25_as_sql(store: PgStore, native: PgKeywordIndex) -> None:
    _check_all(store, native)
    assert native.ready()  # it answered (not SQL twice)
    sql, _ = _same(store, native, "deploy service", _opts(), 500)
    assert len(sql.hits) > 50  # the comparison covers many ranked matches


def test_a_short_pool_and_filters_fetch_deeper(store: PgStore, native: PgKeywordIndex) -> None:
    # supersede most memories holding 'ledger': the index's best rows are filtered out
    ids = [h.memory_id for h in keyword.search(store, "ledger", _opts(), 500).hits]
    for old in ids[1:-3]:
        store.supersede(old, ids[-1])
    sql, _ = _same(store, native, "ledger", _opts(), 3)
    assert len(sql.hits) == 3


def test_rescore_gives_the_sql_numbers(store: PgStore, native: PgKeywordIndex) -> None:
    mem = keyword.search(store, "retry backoff", _opts(), 5, native)
    sql = keyword.search(store, "retry backoff", _opts(), 5)
    ids = list(range(1, 301))
    a = keyword.rescore(store, mem, ids, _opts(), native)
    b = keyword.rescore(store, sql, ids, _opts())
    assert a.keys() == b.keys() and len(a) > 20
    assert all(math.isclose(a[i], b[i], rel_tol=1e-9) for i in a)


def test_follows_every_kind_of_write(pg_url: str, store: PgStore, native: PgKeywordIndex) -> None:
    _check_all(store, native)
    other = PgStore.open(pg_url)  # another process's writes: only the log tells
    try:
        new = other.add_many(_items(40, seed=11))
        _check_all(store, native)
        other.update(new[0], content="zebra deploy zebra")
        other.update(new[1], project="beta")
        other.delete(new[2])
        other.delete(5)
        other.update(7, content="zebra only now")
        _check_all(store, native)
        sql, _ = _same(store, native, "zebra", _opts(), 10)
        assert {h.memory_id for h in sql.hits} == {new[0], 7}
        # recall counts and salience are not logged: the log stays as it was
        logged = store.query("SELECT count(*) FROM keyword_log")[0][0]
        other.record_recall(
            [(new[3], None, 0.5)], query="deploy", session_id=None, lens=None, reinforce=0.1
        )
        other.reinforce([new[3], 8], 0.1)
        assert store.query("SELECT count(*) FROM keyword_log")[0][0] == logged
        _check_all(store, native)
    finally:
        other.close()


def test_a_transaction_that_commits_late_is_not_missed(
    pg_url: str, store: PgStore, native: PgKeywordIndex
) -> None:
    """Commit order is not transaction-id order: a writer that began first and commits
    after a younger one (which the index already read) is still read at its commit."""
    _same(store, native, "deploy", _opts(), 5)
    early = PgStore.open(pg_url)
    late = PgStore.open(pg_url)
    try:
        with early.transaction() as tx:
            # the older transaction takes its id first (writing its memory only at the
            # end: a write now could share a statistics slot with the younger writer's
            # and make it wait for this commit)
            tx.execute("SELECT pg_current_xact_id()")
            # a younger transaction commits while the older one is open
            second = late.add(MemoryInput("quokka late writer"))
            _, mem = _same(store, native, "quokka", _opts(), 10)
            assert [h.memory_id for h in mem.hits] == [second]
            first = early.add(MemoryInput("quokka early writer"))
        _, mem = _same(store, native, "quokka", _opts(), 10)
        assert {h.memory_id for h in mem.hits} == {first, second}
    finally:
        early.close()
        late.close()


def test_truncate_rebuilds(store: PgStore, native: PgKeywordIndex) -> None:
    _same(store, native, "deploy", _opts(), 5)
    with store.transaction() as conn:
        conn.execute("TRUNCATE memories CASCADE")
    assert keyword.search(store, "deploy", _opts(), 5, native).hits == []
    store.add_many(_items(30, seed=3))
    # (SQL's collection statistics do not see a TRUNCATE: keyword_stats keeps its rows;
    # cortex never truncates. The index is held to one built afresh instead.)
    fresh = PgKeywordIndex(store, "on")
    try:
        for q in QUERIES:
            a = keyword.search(store, q, _opts(), 500, native)
            b = keyword.search(store, q, _opts(), 500, fresh)
            assert [(h.memory_id, h.raw) for h in a.hits] == [(h.memory_id, h.raw) for h in b.hits]
        assert len(keyword.search(store, "deploy", _opts(), 500, native).hits) > 5
    finally:
        fresh.close()


def test_off_and_small_stores_leave_it_to_sql(store: PgStore) -> None:
    for policy in ("off", "saved", "auto"):  # "auto": 300 memories, under AUTO_MIN
        ix = PgKeywordIndex(store, policy)
        try:
            assert ix.search(["deploy"], 5, require_all=True) is None
            assert not ix.ready() and not ix.persist()
        finally:
            ix.close()


def test_engine_uses_it_and_answers_alike(pg_url: str) -> None:
    import cortex

    with PgStore.open(pg_url) as pg:
        pg.add_many(_items(200))
    from datetime import UTC, datetime

    # one `now` for both: recency moves a score between two calls otherwise
    opts = Options(mode="keyword", limit=10, record=False, now=datetime.now(UTC))
    with (
        cortex.open(pg_url, embedder=None, keyword_index="on") as on,
        cortex.open(pg_url, embedder=None, keyword_index="off") as off,
    ):
        for q in QUERIES:
            a = [(r.memory.id, round(r.score, 9)) for r in on.search(q, opts)]
            b = [(r.memory.id, round(r.score, 9)) for r in off.search(q, opts)]
            assert a == b, q
        assert on._pg_keywords.ready() and not off._pg_keywords.ready()


def test_auto_builds_in_the_background_past_its_size(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cortex
    from cortex.pg import keyword_index

    monkeypatch.setattr(keyword_index, "AUTO_MIN", 100)  # the store's 200 memories qualify
    with PgStore.open(pg_url) as pg:
        pg.add_many(_items(200))
    with cortex.open(pg_url, embedder=None) as engine:  # "auto": building from the open
        assert engine._pg_keywords.wait(60) and engine._pg_keywords.policy == "auto"
        engine.add("walrus deploy")  # a write of this process, then another's
        with PgStore.open(pg_url) as other:
            other.add(MemoryInput("walrus rollout"))
        found = engine.search("walrus", Options(mode="keyword", record=False))
        assert len(found) == 2
        engine.flush()  # keeps it
        assert engine._pg_keywords.ready()


def test_a_pruned_log_makes_a_reader_left_behind_rebuild(
    pg_url: str, store: PgStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cortex.pg import keyword_index

    monkeypatch.setattr(keyword_index, "LOG_KEEP", 2)
    monkeypatch.setattr(keyword_index, "LOG_PRUNE_AT", 4)
    ahead, behind = PgKeywordIndex(store, "on"), PgKeywordIndex(store, "on")
    try:
        for ix in (ahead, behind):
            _same(store, ix, "deploy", _opts(), 500)
        with PgStore.open(pg_url) as other:
            for n in range(8):  # one log row a statement
                other.add(MemoryInput(f"narwhal sighting {n}"))
        _same(store, ahead, "narwhal", _opts(), 500)  # reads the log and prunes it
        assert store.query("SELECT count(*) FROM keyword_log")[0][0] <= 3
        assert ahead.ready()
        # the other reader's unread rows are gone: it rebuilds, and answers alike
        _, mem = _same(store, behind, "narwhal", _opts(), 500)
        assert len(mem.hits) == 8 and behind.ready()
        _check_all(store, behind)
        _check_all(store, ahead)
    finally:
        ahead.close()
        behind.close()
