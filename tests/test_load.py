"""Load, short: three searcher processes search while one process adds and imports.

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

SECONDS = 5.0
SEARCHERS = 3


def _bench():
    spec = importlib.util.spec_from_file_location("bench_load", ROOT / "benches" / "bench_load.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_load"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(120)  # each child also has a timeout (seconds + 120) in the harness
def test_searchers_and_a_writer_in_separate_processes(tmp_path: Path, embedder) -> None:
    bench = _bench()
    db = tmp_path / "load.db"
    report = bench.run(db, SEARCHERS, SECONDS, verify=False)

    assert report.errors == [], report.errors[:10]
    assert report.searches >= 10 * SEARCHERS, report  # they did search, all the while
    assert report.writes >= 3 and any(r["ids"] is None for r in report.acked), report.writes

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
