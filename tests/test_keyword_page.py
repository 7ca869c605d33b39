"""The native ranking of keyword-only searches (KeywordIndex.rank_page, Pipeline.
_keyword_page) against the general path it replaces (keyword.search, Pipeline._fuse,
_rank and _finish in Python: the reference), over random stores, queries and options:
the same page, scores, counts, tier and held words, and the same after writes (the kept
ranking columns follow SQLite natively as they do in Python).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import cortex
from cortex.result import MatchType, Memory, Result, memory_of
from cortex.search.pipeline import Pipeline

NOW = datetime(2026, 11, 26, 12, tzinfo=UTC)
WORDS = (
    "deploy",
    "cluster",
    "kafka",
    "billing",
    "invoice",
    "penny",
    "rounding",
    "auth",
    "token",
    "middleware",
    "cache",
    "redis",
    "latency",
    "budget",
    "schema",
    "migration",
    "index",
    "vector",
    "search",
    "ranking",
    "decay",
    "sector",
    "salience",
    "journal",
    "meeting",
    "decision",
    "owner",
    "ledger",
    "report",
)
SECTORS = (None, "semantic", "episodic", "reflective", "procedural", "emotional", "other")
PROJECTS = (None, "alpha", "beta", "gamma")


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14)))


def _store(path: Path, seed: int, *, facts: bool = False) -> cortex.Engine:
    rng = random.Random(seed)
    engine = cortex.open(path, embedder=None, keyword_index="on")
    records = []
    for _ in range(rng.randint(150, 400)):
        created = NOW - timedelta(days=rng.uniform(0, 400))
        records.append(
            {
                "content": _text(rng),
                "project": rng.choice(PROJECTS),
                "sector": rng.choice(SECTORS),
                "salience": round(rng.uniform(0, 1), 3),
                "confidence": round(rng.uniform(0.2, 1), 3),
                "created_at": created,
                "source_path": rng.choice(
                    (None, "notes/design.md", f"journal/{created:%Y-%m-%d}.md")
                ),
            }
        )
    ids = engine.add_many(records)
    for old, new in zip(rng.sample(ids, 15), rng.sample(ids, 15), strict=True):
        if old != new:
            engine.supersede(old, new)
    for i in rng.sample(ids, 10):
        engine.delete(i)
    if facts:
        for i in rng.sample(ids, 20):
            engine.add_fact(i, "decision", "a fact", confidence=0.6)
    return engine


def _options(rng: random.Random) -> cortex.Options:
    project: Any = rng.choice((None, None, "alpha", ["alpha", "beta"], "gamma", "nobody"))
    return cortex.Options(
        mode="keyword",
        record=False,
        now=NOW,
        project=project,
        limit=rng.choice((1, 5, 20, 50)),
        offset=rng.choice((0, 0, 0, 3, 30)),
        include_superseded=rng.random() < 0.3,
        min_score=rng.choice((None, None, 0.0, 0.3, 0.6)),
        min_confidence=rng.choice((0.0, 0.0, 0.5)),
        recency_weight=rng.choice((0.0, 0.1, 0.7)),
        half_life_days=rng.choice((0.0, 30.0)),
        salience_weight=rng.choice((0.0, 0.2, 1.0)),
        sector_weights=rng.choice((None, {"episodic": 1.5, "semantic": 0.5})),
        order=rng.choice(("desc", "desc", "asc")),
    )


def _query(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.3:
        words.append(rng.choice(("unheardof", "the", "what", "zyxw")))
    return " ".join(words)


def _answer(results: cortex.Results) -> tuple[Any, ...]:
    return (
        [
            (r.memory, r.score, r.bm25_score, r.semantic_score, r.effective_confidence,
             r.match_type, r.snippet, r.is_superseded, r.related, r.facts)
            for r in results
        ],
        results.total, results.hidden, results.has_more, results.rewritten, results.notices,
        results.mode, results.query, results._held, results.aggregations,
    )  # fmt: skip


class _Paths:
    """Runs each search twice: natively ranked, then by the general path."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.native = 0
        original = Pipeline._keyword_page
        self.general = False

        def counted(pipeline: Pipeline, *args: Any) -> Any:
            if self.general:
                return None
            out = original(pipeline, *args)
            self.native += out is not None
            return out

        monkeypatch.setattr(Pipeline, "_keyword_page", counted)

    def both(self, engine: cortex.Engine, query: str, opts: cortex.Options) -> tuple[Any, Any]:
        self.general = False
        fast = _answer(engine.search(query, opts))
        self.general = True
        slow = _answer(engine.search(query, opts))
        self.general = False
        return fast, slow


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Paths]:
    yield _Paths(monkeypatch)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_native_ranking_gives_the_general_paths_answer(
    tmp_path: Path, paths: _Paths, seed: int
) -> None:
    rng = random.Random(seed * 7919)
    with _store(tmp_path / "kw.db", seed) as engine:
        runs = 120
        for n in range(runs):
            query, opts = _query(rng), _options(rng)
            fast, slow = paths.both(engine, query, opts)
            assert fast == slow, (n, query, opts)
        # most searches took the native path; a few (single unknown words: the prefix
        # tier) the general one
        assert paths.native >= runs * 0.6, paths.native


def test_writes_reach_the_native_ranking(tmp_path: Path, paths: _Paths) -> None:
    """Supersede, delete, reinforce and add between searches: the kept columns are
    dropped and read again natively as in Python, and both paths still agree."""
    rng = random.Random(11)
    with _store(tmp_path / "kw.db", 11) as engine:
        opts = cortex.Options(mode="keyword", record=False, now=NOW, limit=50)
        queries = ["deploy cluster", "billing penny", "kafka", "schema migration index"]
        for q in queries:
            fast, slow = paths.both(engine, q, opts)
            assert fast == slow
        first = engine.search("deploy cluster", opts)
        top = [r.memory.id for r in first]
        assert len(top) >= 3
        engine.supersede(top[0], top[1])
        engine.delete(top[2])
        engine.search("deploy cluster", opts.replace(record=True, reinforce=0.3))
        engine.add("deploy cluster deploy cluster kafka", salience=1.0, created_at=NOW)
        for q in queries:
            fast, slow = paths.both(engine, q, opts)
            assert fast == slow
        after = [r.memory.id for r in engine.search("deploy cluster", opts)]
        assert top[0] not in after and top[2] not in after
        for _ in range(40):
            query, o = _query(rng), _options(rng)
            fast, slow = paths.both(engine, query, o)
            assert fast == slow, (query, o)
        assert paths.native > 20


def test_stores_with_facts_agree(tmp_path: Path, paths: _Paths) -> None:
    rng = random.Random(5)
    """Facts change a memory's effective confidence: a search whose hits hold some takes
    the general path, the others the native one; explain always the general one."""
    with _store(tmp_path / "kw.db", 5, facts=True) as engine:
        for _ in range(30):
            query, opts = _query(rng), _options(rng)
            fast, slow = paths.both(engine, query, opts)
            assert fast == slow
        found = engine.search("deploy cluster", mode="keyword", record=False, explain=True)
        assert found and found[0].explain is not None


def test_memory_of_and_result_of_make_what_the_constructors_make() -> None:
    values = (7, "text", "alpha", "a.md", 2, "semantic", "core", "s", "c", 0.4, 0.9,
              NOW, NOW, None, 3, None, NOW, 5, {"k": 1})  # fmt: skip
    assert memory_of(values) == Memory(*values)
    with pytest.raises(ValueError, match="19 fields"):
        memory_of(values[:-1])
    m = Memory(1, "x")
    made = Result.of(m, 0.5, 0.4, 0.0, 1.0, "snip", MatchType.BM25, (), None, False, None, 0,
                     None, None, {"code": []}, None)  # fmt: skip
    assert made == Result(memory=m, score=0.5, bm25_score=0.4, snippet="snip",
                          related={"code": []})  # fmt: skip
    assert made.snippet == "snip" and made.score == 0.5
    lazy = Result.of(m, 0.5, 0.4, 0.0, 1.0, lambda: "made", MatchType.BM25, (), None, False,
                     None, 0, None, None, None, None)  # fmt: skip
    assert lazy.snippet == "made"


def test_damaged_rows_are_named_and_skipped_alike(tmp_path: Path, paths: _Paths) -> None:
    """A page row that cannot be read (metadata not JSON) is skipped and named, the next
    taking its place; a candidate whose ranking columns are damaged (a salience stored
    as text) sends the search to the general path, which names it."""
    import sqlite3

    with _store(tmp_path / "kw.db", 17) as engine:
        opts = cortex.Options(mode="keyword", record=False, now=NOW, limit=5)
        top = [r.memory.id for r in engine.search("deploy cluster", opts)]
        assert len(top) == 5
        conn = sqlite3.connect(tmp_path / "kw.db")
        with conn:
            conn.execute("UPDATE memories SET metadata = '[1' WHERE id = ?", (top[1],))
            conn.execute("UPDATE memories SET salience = 'high' WHERE id = ?", (top[3],))
        conn.close()
        engine.add("an unrelated write, so that the index reads the log", created_at=NOW)
        for q in ("deploy cluster", "deploy", "cluster kafka billing", "penny"):
            fast, slow = paths.both(engine, q, opts)
            assert fast == slow
        got = engine.search("deploy cluster", opts)
        assert top[1] not in [r.memory.id for r in got] and len(got) == 5
        assert any("damaged" in n for n in got.notices)


def test_page_rows_are_get_many_and_code_refs(tmp_path: Path, paths: _Paths) -> None:
    """The page's one statement (Store.page_rows) reads what get_many and code_refs read,
    and searches of memories with code references agree on both paths."""
    with cortex.open(tmp_path / "kw.db", embedder=None, keyword_index="on") as engine:
        ids = engine.add_many(
            {"content": f"deploy {n}: see auth/middleware.ts and `cache.get` in src/x.py:{n}"}
            if n % 3 == 0
            else {"content": f"deploy note {n} without references"}
            for n in range(60)
        )
        store = engine._store
        memories, refs = store.page_rows(ids[:25])
        assert memories == store.get_many(ids[:25])
        assert refs == store.code_refs(ids[:25]) and len(refs) == 9
        assert [r.kind for r in refs[ids[0]]] == [r.kind for r in store.code_refs([ids[0]])[ids[0]]]
        opts = cortex.Options(mode="keyword", record=False, now=NOW, limit=30)
        engine.search("warm", opts)  # builds the in-memory index (the first search waits)
        for q in ("deploy", "deploy references", "middleware note"):
            fast, slow = paths.both(engine, q, opts)
            assert fast == slow
        assert paths.native == 3


def test_steady_probes_the_sparse_tables_once(tmp_path: Path) -> None:
    """Within Store.steady, empty() answers as its first probe saw the tables (another
    connection's write is seen after it, as before)."""
    import sqlite3

    with cortex.open(tmp_path / "kw.db", embedder=None, keyword_index="off") as engine:
        (first,) = engine.add_many([{"content": "a note"}])
        store = engine._store
        other = sqlite3.connect(tmp_path / "kw.db")
        with store.steady():
            assert store.empty("facts")
            with other:
                other.execute(
                    "INSERT INTO facts (memory_id, type, content, confidence, decay_rate,"
                    " last_reinforced, created_at) VALUES (?, 'kv', 'x', 1.0, 0.0, 0.0, 0.0)",
                    (first,),
                )
            assert store.empty("facts")
        assert not store.empty("facts")
        other.close()


def _leg(leg: Any) -> tuple[Any, ...]:
    """What the pipeline reads of a keyword leg: its hits, notices, expression, terms,
    tier, and of its state what rescoring, shares and suggestions read."""
    state = leg.state
    return (
        [(h.memory_id, h.score, h.raw, h.info) for h in leg.hits],
        leg.notices, leg.rewritten, leg.terms, leg.tier,
        state.tier, state.expression, state.rewritten, state.terms, state.final, state.bound,
        state.rescore_table, state.rescore_expression, state.held, state.weights,
        state.scope.projects if state.scope is not None else None,
    )  # fmt: skip


@pytest.mark.parametrize("seed", [4, 5])
def test_hybrid_keyword_leg_is_keyword_searchs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """A hybrid search's keyword leg over the in-memory index (KeywordIndexer.hits: one
    native call that searches, filters by the kept columns and calibrates) is the leg
    keyword.search gives, hit for hit and score for score, before and after writes; the
    first search of a query stops at columns not kept yet, and the call after keeping
    them answers from the same search (KeywordIndex's pending tier)."""
    from cortex.search.plan import plan
    from cortex.search.sqlite import KeywordRetriever

    rng = random.Random(seed)
    with _store(tmp_path / "kw.db", seed) as engine:
        retriever = engine._pipeline._keyword
        assert isinstance(retriever, KeywordRetriever)
        plain = KeywordRetriever._plain
        native = 0
        for n in range(150):
            query, opts = _query(rng), _options(rng).replace(mode="hybrid")
            if n == 75:  # writes between: the index and the kept columns move on
                engine.add("deploy cluster kafka billing", project="alpha", created_at=NOW)
                ids = [r.memory.id for r in engine.search("deploy cluster", opts)]
                if len(ids) >= 2:
                    engine.supersede(ids[0], ids[1])
            if rng.random() < 0.5:  # the kept columns dropped: the first call misses
                retriever._native._forget_ranks(None)
            p = plan(query, opts)
            allowed = engine.store.allowed_ids(opts)
            fast = plain(retriever, p, opts, allowed)
            monkeypatch.setattr(KeywordRetriever, "_plain", lambda *a: None)
            general = retriever.retrieve(p, opts, allowed)
            monkeypatch.setattr(KeywordRetriever, "_plain", plain)
            if fast is None:  # not plain text, or no plain-tier hit: keyword.search's own
                assert general.tier != "fts" or not general.hits
                continue
            native += 1
            assert _leg(fast) == _leg(general), (n, query, opts)
        assert native >= 60, native


def test_a_pinned_search_checks_the_change_log_once(tmp_path: Path) -> None:
    """KeywordIndexer.pinned: the lookups of one search read the change log's position
    once; a write committed meanwhile is read by the next search (outside the scope)."""
    with _store(tmp_path / "kw.db", 9) as engine:
        indexer = engine.keyword_index
        seen: list[str] = []
        engine.store.conn.set_trace_callback(seen.append)

        def checks() -> int:  # the check's first statement (the log's end)
            return sum(s == "SELECT COALESCE(MAX(seq), 0) FROM memory_changes" for s in seen)

        def found(word: str) -> set[int]:
            out = indexer.search([word], 500, require_all=False)
            assert out is not None
            return set(out[0].tolist())

        before = found("deploy")
        seen.clear()
        with indexer.pinned():
            assert found("deploy") == before
            assert found("kafka") and indexer.holding(["deploy", "zyxw"], sorted(before))
            assert checks() == 1
            new = engine.add("deploy deploy zebra", created_at=NOW)
            assert new not in found("deploy")  # the position the scope read first
            with indexer.pinned():  # nested: the outer scope's position still
                assert new not in found("deploy")
        assert checks() == 1
        assert new in found("deploy")  # out of the scope: brought up to the log
        assert checks() == 2
        found("kafka")
        assert checks() == 3  # unpinned: every lookup checks
