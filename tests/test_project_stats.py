"""A project is a wall for ranking too (issue 14, section 4): a project-filtered search
ranks with the BM25 statistics (N, avgdl, df) and the semantic calibration of the searched
projects alone, so that what other projects hold never changes its ids or scores. Held in
the FTS5 path (keyword_index="off"), the in-memory index ("on") and hybrid search (the
real model); the per-project totals kept by triggers are checked against a recount after
every kind of write, a migration and a reindex."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cortex
from cortex._native import KeywordIndex
from cortex.filters import projects_of
from cortex.options import Options
from cortex.store import (
    _SCHEMA_KEYWORD_TOTALS,
    EXACT_TOKENIZER,
    MIGRATIONS,
    SCHEMA_VERSION,
    STEMMED_TOKENIZER,
    _statements,
    _varint,
)

NOW = datetime(2026, 6, 1, tzinfo=UTC)
CREATED = 1.75e9
A_TEXTS = [
    "the quokka is happy on the island",
    "ferry to the island leaves at noon",
    "a quokka selfie with a quokka",
    "rottnest island holds many small animals",
]


def _open(path: Path, policy: str, embedder: object = None) -> cortex.Engine:
    return cortex.open(path, embedder=embedder, keyword_index=policy)


def _add_b(engine: cortex.Engine, n: int = 200) -> None:
    engine.add_many(
        [
            {"content": f"quokka note {i} from project b", "project": "B", "created_at": CREATED}
            for i in range(n)
        ]
    )


def _seen(engine: cortex.Engine, query: str, **kw: object) -> list[tuple[str, float, float]]:
    results = engine.search(query, now=NOW, limit=20, **kw)  # type: ignore[arg-type]
    return [(r.memory.content, r.bm25_score, r.score) for r in results]


def _totals(engine: cortex.Engine) -> dict[str, tuple[int, int]]:
    return {
        p: (int(d), int(t))
        for p, d, t in engine.store.query("SELECT project, docs, tokens FROM keyword_totals")
        if d
    }


def _recount(engine: cortex.Engine) -> dict[str, tuple[int, int]]:
    """Per project (NUL for none): live memories and their tokens, counted from scratch
    with the tokenizer FTS5 uses (the native twin, held to FTS5 by test_keyword_native)."""
    out: dict[str, tuple[int, int]] = {}
    for project, content in engine.store.query(
        "SELECT ifnull(project_id, char(0)), content FROM memories WHERE deleted_at IS NULL"
    ):
        docs, tokens = out.get(project, (0, 0))
        out[project] = (docs + 1, tokens + len(KeywordIndex.tokenize(content)))
    return out


def _check_totals(engine: cortex.Engine) -> None:
    assert _totals(engine) == _recount(engine)
    # memories.tokens of every live memory is FTS5's own size record of it
    for memory_id, tokens, size in engine.store.query(
        "SELECT m.id, m.tokens, d.sz FROM memories m JOIN memories_fts_docsize d ON d.id = m.id"
        " WHERE m.deleted_at IS NULL"
    ):
        assert tokens == _varint(size), memory_id


# ---------------------------------------------------------------- the example


@pytest.mark.parametrize("policy", ["off", "on"])
def test_other_projects_do_not_change_a_projects_keyword_scores(
    tmp_path: Path, policy: str
) -> None:
    with _open(tmp_path / "m.db", policy) as e:
        for text in A_TEXTS:
            e.add(text, project="A", created_at=CREATED)
        before = _seen(e, "quokka", mode="keyword", project="A")
        unscoped = _seen(e, "quokka", mode="keyword")
        _add_b(e)
        after = _seen(e, "quokka", mode="keyword", project="A")
        # The global statistics did move (so the check below can fail)...
        assert _seen(e, "quokka", mode="keyword")[0][1] != unscoped[0][1]
    # ... but not project A's ranking: same memories, same BM25, same score.
    assert [c for c, _, _ in before] == [A_TEXTS[2], A_TEXTS[0]]
    assert before[0][1] > 0.2
    assert after == before


@pytest.mark.parametrize("policy", ["off", "on"])
def test_several_projects_rank_with_their_statistics_together(tmp_path: Path, policy: str) -> None:
    c_texts = ["a ferry quokka on the island", "selfie island noon"]
    with _open(tmp_path / "alone.db", policy) as alone:
        for text in A_TEXTS:
            alone.add(text, project="A", created_at=CREATED)
        for text in c_texts:
            alone.add(text, project="C", created_at=CREATED)
        want = {q: _seen(alone, q, mode="keyword", project=["C", "A"]) for q in ("quokka", "isl*")}
    with _open(tmp_path / "mixed.db", policy) as mixed:
        for text in A_TEXTS:
            mixed.add(text, project="A", created_at=CREATED)
        _add_b(mixed, 100)
        for text in c_texts:
            mixed.add(text, project="C", created_at=CREATED)
        got = {q: _seen(mixed, q, mode="keyword", project=["A", "C", "A"]) for q in want}
        one = _seen(mixed, "quokka", mode="keyword", project="A")
    assert got == want
    assert {c for c, _, _ in want["quokka"]} == {A_TEXTS[0], A_TEXTS[2], c_texts[0]}
    # A alone has other statistics than A and C together.
    assert (
        dict((c, s) for c, s, _ in one)[A_TEXTS[0]]
        != dict((c, s) for c, s, _ in want["quokka"])[A_TEXTS[0]]
    )


def test_the_fts5_path_and_the_in_memory_index_score_a_project_alike(tmp_path: Path) -> None:
    got = {}
    for policy in ("off", "on"):
        with _open(tmp_path / f"{policy}.db", policy) as e:
            for text in A_TEXTS:
                e.add(text, project="A", created_at=CREATED)
            _add_b(e, 50)
            got[policy] = [
                _seen(e, q, mode="keyword", project="A")
                for q in ("quokka", "quokka island", "island animals selfie")
            ]
            if policy == "on":
                assert e.keyword_index.ready()
    assert got["on"] == got["off"]
    assert all(got["off"])


def test_alone_in_its_store_a_project_scores_as_fts5_does(tmp_path: Path) -> None:
    with _open(tmp_path / "m.db", "off") as e:
        for text in A_TEXTS:
            e.add(text, project="A", created_at=CREATED)
        for query in (
            "quokka", "island OR ferry", '"quokka" NOT selfie', "isl*", "^quokka",
            '"quokka is"', "content:island", "quokka island",
        ):  # fmt: skip
            assert _seen(e, query, mode="keyword", project="A") == _seen(
                e, query, mode="keyword"
            ), query


def test_cjk_trigram_ranking_of_a_project_ignores_other_projects(tmp_path: Path) -> None:
    texts = ["东京大学的研究人员发现了新的蛋白质", "东京的天气很好", "蛋白质研究 protein 东京大学"]
    with _open(tmp_path / "m.db", "off") as e:
        for text in texts:
            e.add(text, project="A", created_at=CREATED)
        alone = _seen(e, "东京大学 蛋白质", mode="keyword")
        before = _seen(e, "东京大学 蛋白质", mode="keyword", project="A")
        e.add_many([{"content": f"东京大学 {i} 的蛋白质", "project": "B"} for i in range(50)])
        after = _seen(e, "东京大学 蛋白质", mode="keyword", project="A")
        moved = _seen(e, "东京大学 蛋白质", mode="keyword")
    assert before == alone and len(before) == 2
    assert after == before
    # unscoped, the table's statistics moved: A's memories rank otherwise or not at all
    assert [(c, s) for c, s, _ in moved if c in texts] != [(c, s) for c, s, _ in before]


def test_hybrid_ranking_of_a_project_ignores_other_projects(tmp_path: Path, embedder) -> None:
    with _open(tmp_path / "m.db", "off", embedder) as e:
        for text in A_TEXTS:
            e.add(text, project="A", created_at=CREATED)
        before = _seen(e, "quokka", mode="hybrid", project="A")
        _add_b(e)
        after = _seen(e, "quokka", mode="hybrid", project="A")
    assert A_TEXTS[0] in [c for c, _, _ in before]
    assert after == before


# ---------------------------------------------------------------- the property

WORDS = ["quokka", "island", "ferry", "noon", "selfie", "animals", "small", "boat", "sand"]
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)
queries = st.one_of(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
    st.sampled_from(WORDS).map(lambda w: w[:3] + "*"),
    st.tuples(st.sampled_from(WORDS), st.sampled_from(WORDS)).map(lambda t: f"{t[0]} OR {t[1]}"),
    st.tuples(st.sampled_from(WORDS), st.sampled_from(WORDS)).map(lambda t: f"{t[0]} NOT {t[1]}"),
    st.tuples(st.sampled_from(WORDS), st.sampled_from(WORDS)).map(lambda t: f'"{t[0]} {t[1]}"'),
    st.sampled_from(WORDS).map(lambda w: f"^{w}"),
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    a=st.lists(texts, min_size=1, max_size=12),
    others=st.lists(st.tuples(st.sampled_from(["B", "C"]), texts, st.integers(0, 12)), max_size=25),
    query=queries,
    policy=st.sampled_from(["off", "on"]),
)
def test_a_project_filtered_search_ranks_the_same_whatever_other_projects_hold(
    tmp_path_factory: pytest.TempPathFactory,
    a: list[str],
    others: list[tuple[str, str, int]],
    query: str,
    policy: str,
) -> None:
    base = tmp_path_factory.mktemp("prop")
    # A's memories numbered so that equal contents stay apart; the others interleaved.
    mine = [f"{text} a{i}" for i, text in enumerate(a)]
    with _open(base / "alone.db", policy) as alone:
        alone.add_many([{"content": t, "project": "A", "created_at": CREATED} for t in mine])
        want = _seen(alone, query, mode="keyword", project="A")
    records: list[dict[str, object]] = [
        {"content": t, "project": "A", "created_at": CREATED} for t in mine
    ]
    for project, text, at in sorted(others, key=lambda o: -o[2]):
        records.insert(min(at, len(records)), {"content": text, "project": project})
    with _open(base / "mixed.db", policy) as mixed:
        mixed.add_many(records)
        got = _seen(mixed, query, mode="keyword", project="A")
        _check_totals(mixed)
    assert got == want


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    a=st.lists(texts, min_size=1, max_size=6),
    others=st.lists(st.tuples(texts, st.integers(0, 6)), min_size=1, max_size=12),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
)
def test_a_project_filtered_hybrid_search_ranks_the_same_whatever_other_projects_hold(
    tmp_path_factory: pytest.TempPathFactory,
    embedder: object,
    a: list[str],
    others: list[tuple[str, int]],
    query: str,
) -> None:
    base = tmp_path_factory.mktemp("hybrid")
    mine = [f"{text} a{i}" for i, text in enumerate(a)]
    records: list[dict[str, object]] = [
        {"content": t, "project": "A", "created_at": CREATED} for t in mine
    ]
    # One add each: a text embedded in a batch of other lengths (padding) differs in the
    # last bits, which is not what this property is about.
    with _open(base / "alone.db", "off", embedder) as alone:
        for record in records:
            alone.add(**record)  # type: ignore[arg-type]
        want = _seen(alone, query, mode="hybrid", project="A")
    for text, at in sorted(others, key=lambda o: -o[1]):
        records.insert(min(at, len(records)), {"content": text, "project": "B"})
    with _open(base / "mixed.db", "off", embedder) as mixed:
        for record in records:
            mixed.add(**record)  # type: ignore[arg-type]
        got = _seen(mixed, query, mode="hybrid", project="A")
    assert got == want


# ---------------------------------------------------------------- totals stay right


def test_every_kind_of_write_keeps_the_totals_right(tmp_path: Path) -> None:
    with _open(tmp_path / "m.db", "on") as e:
        ids = [e.add(t, project="A") for t in A_TEXTS]
        nameless = e.add("a memory without any project")
        e.add_many([{"content": f"bulk {i} quokka", "project": "B"} for i in range(30)])
        _check_totals(e)
        e.update(ids[0], content="a much longer text about the quokka and its island life")
        _check_totals(e)
        e.update(ids[1], project="B")  # a project move
        _check_totals(e)
        e.update(nameless, project="C", content="now in C")
        _check_totals(e)
        e.delete(ids[2])
        _check_totals(e)
        with e.store.transaction() as tx:  # what another tool might do
            tx.execute("UPDATE memories SET deleted_at = NULL WHERE id = ?", (ids[2],))
            tx.execute("DELETE FROM memories WHERE id = ?", (ids[3],))
            tx.execute("UPDATE memories SET project_id = NULL WHERE project_id = 'B'")
        _check_totals(e)
        # The in-memory index follows the moves too (the change log records them).
        scoped = e.search("quokka", mode="keyword", project="C", now=NOW)
        assert [r.memory.id for r in scoped] == []
        assert e.keyword_index.df(["quokka"], ("A",)) == (2, [2])
        assert e.keyword_index.df(["quokka"], (chr(0),))[0] == 30 + 1
        assert not list(e.search("quokka", mode="keyword", project="B"))


def test_reindex_rebuilds_the_totals(engine: cortex.Engine) -> None:
    for text in A_TEXTS:
        engine.add(text, project="A")
    _add_b(engine, 20)
    want = _totals(engine)
    with engine.store.transaction() as tx:
        tx.execute("UPDATE keyword_totals SET docs = docs + 7, tokens = 3")
        tx.execute("UPDATE memories SET tokens = 0")
    assert _totals(engine) != want
    engine.reindex()
    assert _totals(engine) == want
    _check_totals(engine)


def test_a_database_from_before_the_totals_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    before = MIGRATIONS.index(_SCHEMA_KEYWORD_TOTALS)
    for script in MIGRATIONS[:before]:
        script = script.replace("{stemmed}", STEMMED_TOKENIZER).replace("{exact}", EXACT_TOKENIZER)
        for statement in _statements(script):
            conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(before),))
    rows = [(t, "A") for t in A_TEXTS] + [(f"quokka b{i}", "B") for i in range(40)]
    for text, project in [*rows, ("gone quokka", "A"), ("no project", None)]:
        conn.execute(
            "INSERT INTO memories (content, project_id, content_hash, created_at, updated_at)"
            " VALUES (?, ?, 'h', ?, ?)",
            (text, project, CREATED, CREATED),
        )
    conn.execute("UPDATE memories SET deleted_at = 1 WHERE content = 'gone quokka'")
    conn.commit()
    conn.close()
    with _open(path, "off") as e:
        assert e.store.schema_version() == SCHEMA_VERSION == len(MIGRATIONS)
        _check_totals(e)
        assert _totals(e)["A"][0] == len(A_TEXTS)
        migrated = _seen(e, "quokka island", mode="keyword", project="A")
    with _open(tmp_path / "fresh.db", "off") as fresh:
        for text in A_TEXTS:
            fresh.add(text, project="A", created_at=CREATED)
        assert migrated == _seen(fresh, "quokka island", mode="keyword", project="A")
        assert migrated


def test_projects_of_reads_a_name_a_list_or_nothing() -> None:
    assert projects_of(Options()) is None
    assert projects_of(Options(project="A")) == ("A",)
    assert projects_of(type("O", (), {"project": ["b", "a", "b"]})()) == ("a", "b")
