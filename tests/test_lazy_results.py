"""Fields of Results computed when first read (Pipeline.search defers the next page's
cursor: a hash of the options that most callers never read)."""

from __future__ import annotations

import pickle
from pathlib import Path

import cortex
from cortex import keyword


def test_a_deferred_cursor_reads_the_next_page_after_the_engine_closed(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with cortex.open(db, embedder=None, keyword_index="off") as engine:
        engine.add_many({"content": f"release note {i} about the rollback"} for i in range(7))
        first = engine.search("rollback", mode="keyword", limit=3, record=False)
    cursor = first.next_cursor  # computed now, with the engine closed: needs no store
    assert cursor is not None and first.next_cursor == cursor
    with cortex.open(db, embedder=None, keyword_index="off") as engine:
        opts = cortex.Options(mode="keyword", limit=3, record=False)
        seen = [r.memory.id for r in first]
        page = engine.search("rollback", opts.replace(cursor=cursor))
        while True:
            seen += [r.memory.id for r in page]
            if page.next_cursor is None:
                break
            page = engine.search("rollback", opts.replace(cursor=page.next_cursor))
    assert sorted(seen) == list(range(1, 8))
    last = cortex.Results([], has_more=False)
    assert last.next_cursor is None
    last.next_cursor = "x"
    assert last.next_cursor == "x"


def test_a_snippet_is_made_when_first_read_even_after_the_engine_closed(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with cortex.open(db, embedder=None, keyword_index="off") as engine:
        engine.add_many(
            {"content": f"note {i}: the rollback of release {i} failed"} for i in range(3)
        )
        found = engine.search("rollback", mode="keyword", record=False)
        first = found[0]
        assert not isinstance(vars(first)["_snippet"], str)  # not made by the search
    made = first.snippet  # the engine is closed: it needs no store
    assert made == keyword.text_snippet(first.memory.content, keyword.highlighter(["rollback"]))
    assert "<mark>rollback</mark>" in made
    assert vars(first)["_snippet"] == made and first.snippet is made  # made once
    assert pickle.loads(pickle.dumps(found[1])) == found[1]
    assert found[2].to_dict()["snippet"].count("<mark>") == 1
    given = cortex.Result(memory=first.memory, score=1.0, snippet="as given")
    assert given.snippet == "as given" and cortex.Result(first.memory, 1.0).snippet == ""


def test_aggregations_are_counted_when_first_read_even_after_the_engine_closed(
    tmp_path: Path,
) -> None:
    db = tmp_path / "a.db"
    with cortex.open(db, embedder=None, keyword_index="off") as engine:
        engine.add_many({"content": f"rollback {i}", "project": "ab"[i % 2]} for i in range(9))
        found = engine.search("rollback", mode="keyword", limit=2, record=False)
        assert found._aggregations_of is not None  # not counted by the search
    counted = found.aggregations
    assert counted is not None and found._aggregations_of is None
    assert counted["total"] == found.total == 9 and counted["by_project"] == {"a": 5, "b": 4}
    assert found.aggregations is counted
    found.aggregations = None
    assert found.aggregations is None
