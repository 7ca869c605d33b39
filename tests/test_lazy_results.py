"""Fields of Results computed when first read (Pipeline.search defers the next page's
cursor: a hash of the options that most callers never read)."""

from __future__ import annotations

from pathlib import Path

import cortex


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
