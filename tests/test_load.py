"""Load, short: three searcher processes search while one process adds and imports.

The writer makes a fixed number of writes and the searchers search until it is done (and
at least a fixed number of times), so nothing here depends on the machine's speed or load.
No error of any kind — "database is locked" above all — reaches a caller in any process,
and every write the writer saw acknowledged is searchable afterwards: by keyword (its
unique token, exactly once, with the id `add_many` returned) and by meaning (its vector is
in the index). The same harness runs for 60 s in ``benches/bench_load.py``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import cortex

from .conftest import ROOT

SEARCHERS = 3
WRITES = 6  # every third an import, the others add_many: 36 memories
MIN_SEARCHES = 12  # per searcher, each mode four times


def _bench():
    spec = importlib.util.spec_from_file_location("bench_load", ROOT / "benches" / "bench_load.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_load"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(900)  # a guard against a hang only (the harness has its own)
def test_searchers_and_a_writer_in_separate_processes(tmp_path: Path, embedder) -> None:
    bench = _bench()
    db = tmp_path / "load.db"
    report = bench.run(db, SEARCHERS, 0.0, writes=WRITES, min_searches=MIN_SEARCHES, verify=False)

    assert report.errors == [], report.errors[:10]
    # every searcher searched (from before the first write until after the last) and found
    assert len(report.searches_each) == SEARCHERS, report
    assert min(report.searches_each) >= MIN_SEARCHES, report.searches_each
    assert min(report.found_each) > 0, report.found_each
    # every write was acknowledged, imports and add_many both
    assert report.writes == WRITES, report.writes
    assert sum(r["ids"] is None for r in report.acked) == WRITES // 3, report.acked
    assert report.memories_written == 6 * WRITES

    acked = [
        (memory_id, token)
        for record in report.acked
        for memory_id, token in zip(
            record["ids"] or [None] * len(record["tokens"]), record["tokens"], strict=True
        )
    ]
    with cortex.open(db, embedder=embedder) as engine:
        lost = []
        for memory_id, token in acked:
            hits = engine.search(token, mode="keyword", record=False, min_confidence=0.0)
            got = [r.memory.id for r in hits]
            if len(got) != 1 or (memory_id is not None and got != [memory_id]):
                lost.append((token, memory_id, got))
        assert lost == [], lost[:10]
        stats = engine.stats()
        assert stats["memories"] == bench.SEED_MEMORIES + len(acked)
        assert list(stats["embeddings"].values()) == [stats["memories"]]
        # The vector index (synced by whichever process came first) holds the last write.
        last_id, last_token = next((i, t) for i, t in reversed(acked) if i is not None)
        content = engine.get(last_id).content
        top = engine.search(content, mode="semantic", limit=1, record=False)
        assert [r.memory.id for r in top] == [last_id], last_token
    integrity = cortex.open(db, read_only=True, embedder=None)
    try:
        assert integrity.store.query("PRAGMA integrity_check") == [("ok",)]
    finally:
        integrity.close()
