"""The ranking columns the in-memory keyword index keeps (KeywordIndexer.rank_info): a
keyword search answers exactly what the reference path answers (FTS5 and the columns read
from SQLite, `keyword_index="off"`) through every write that changes them, and the
project wall holds in them."""

from __future__ import annotations

import random
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import cortex
from cortex.store import RANK_LOG

WORDS = ("deploy", "server", "database", "latency", "cache", "vector", "token", "retry")
NOW = datetime(2026, 11, 26, tzinfo=UTC)
QUERIES = (
    "deploy server",
    "cache latency",
    "vector token retry",
    "database",
    "retry deploy",
    "deploy cache databse",  # corrected, beside words the OR tier holds
    "latency retyr vectr",
)


def _fill(engine: cortex.Engine, n: int = 300) -> list[int]:
    rng = random.Random(7)
    items = [
        {
            "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) + f" n{i}",
            "project": rng.choice(["a", "b", None]),
            "salience": round(rng.random(), 3),
            "confidence": round(0.5 + rng.random() / 2, 3),
        }
        for i in range(n)
    ]
    return list(engine.add_many(items))


def _answers(engine: cortex.Engine, **changes: Any) -> list[Any]:
    opts = cortex.Options(mode="keyword", limit=15, record=False, now=NOW, **changes)
    out = []
    for q in QUERIES:
        found = engine.search(q, opts)
        out.append(
            (
                [(r.memory.id, r.score, r.bm25_score) for r in found],
                found.total,
                found.hidden,
                found.aggregations,
                found.suggestions,
                found.notices,
            )
        )
    return out


def _same(fast: cortex.Engine, reference: cortex.Engine) -> None:
    for changes in (
        {},
        {"project": "a"},
        {"project": ["a", "b"]},
        {"include_superseded": True},
        {"project": "b", "include_superseded": True},
        {"category": "rule"},
    ):
        assert _answers(fast, **changes) == _answers(reference, **changes), changes


def test_kept_columns_follow_every_write(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with cortex.open(db, embedder=None, keyword_index="on") as fast:
        ids = _fill(fast)
        assert fast.store.logs_ranks
        with cortex.open(db, embedder=None, keyword_index="off") as reference:
            _same(fast, reference)
            index = fast.keyword_index
            assert index._ranks, "the searches kept ranking columns"
            # each write below changes a column ranking or filtering reads
            fast.supersede(ids[0], ids[1])
            _same(fast, reference)
            fast.update(ids[2], salience=1.0, confidence=0.1, category="rule")
            fast.update(ids[3], project="b")
            _same(fast, reference)
            fast.reinforce(ids[4:40], 0.5)
            fast.delete(ids[5])
            fast.update(ids[6], created_at=datetime(2020, 1, 1, tzinfo=UTC))
            _same(fast, reference)
            # another connection's write (another process) is seen through the log
            conn = sqlite3.connect(db)
            with conn:
                conn.execute("UPDATE memories SET salience = 0.0 WHERE id <= ?", (ids[60],))
                conn.execute("UPDATE memories SET superseded_by = ? WHERE id = ?", (ids[8], ids[9]))
            conn.close()
            _same(fast, reference)
            # a ranking column damaged under the open engines: skipped and named by both
            hit = fast.search("deploy", mode="keyword", limit=1, record=False)[0].memory.id
            conn = sqlite3.connect(db)
            with conn:
                conn.execute("UPDATE memories SET created_at = 'soon' WHERE id = ?", (hit,))
            conn.close()
            damaged = fast.search("deploy", mode="keyword", limit=50, record=False, now=NOW)
            assert hit not in {r.memory.id for r in damaged}
            assert any(f"memory {hit}" in n for n in damaged.notices)
            _same(fast, reference)


def test_project_wall_holds_in_the_kept_columns(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    with cortex.open(db, embedder=None, keyword_index="on") as engine:
        engine.add_many([{"content": f"deploy cache note {i}", "project": "a"} for i in range(20)])
        engine.add_many([{"content": f"deploy cache note {i}", "project": "b"} for i in range(20)])
        everything = engine.search("deploy cache", mode="keyword", limit=50, record=False)
        assert {r.memory.project for r in everything} == {"a", "b"}  # both kept now
        walled = engine.search("deploy cache", mode="keyword", limit=50, record=False, project="a")
        assert len(walled) == 20 and {r.memory.project for r in walled} == {"a"}
        assert walled.aggregations is not None and walled.aggregations["by_project"] == {"a": 20}


def test_a_file_without_the_trigger_reads_the_columns_from_sqlite(tmp_path: Path) -> None:
    """Opened read-only, a file an older cortex wrote (no RANK_LOG trigger) cannot say when
    the columns change: every search reads them from SQLite, and answers the same."""
    db = tmp_path / "old.db"
    with cortex.open(db, embedder=None, keyword_index="off") as engine:
        _fill(engine, 60)
    conn = sqlite3.connect(db)
    conn.execute(f"DROP TRIGGER {RANK_LOG}")
    conn.commit()
    conn.close()
    with cortex.open(db, embedder=None, keyword_index="on", read_only=True) as old:
        assert not old.store.logs_ranks
        first = _answers(old)
        assert not old.keyword_index._ranks
        with cortex.open(db, embedder=None, keyword_index="off", read_only=True) as reference:
            assert first == _answers(reference)
    with cortex.open(db, embedder=None, keyword_index="on") as upgraded:  # writable: made
        assert upgraded.store.logs_ranks
