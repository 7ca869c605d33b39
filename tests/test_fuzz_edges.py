"""Adversarial cases found by fuzzing (session 11): each failed before its fix.

- a page cursor whose clock was edited past the calendar raised a raw OverflowError /
  ValueError from the search instead of the cursor's InvalidOptionError;
- a memory's created_at read back as a datetime rounds to the microsecond, and the
  timeline compared the stored float with that rounded value: a memory showed up among
  the memories *before itself*; an update of any other field moved created_at by up to
  a microsecond;
- a saved keyword index file of a copy of the database that had since diverged (the same
  log positions, other texts) passed every check and answered with the other copy's
  memories.
"""

from __future__ import annotations

import base64
import json
import random
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

import cortex
from cortex import keyword_index
from cortex.errors import InvalidOptionError


def _cursor_with(cursor: str, **fields: object) -> str:
    raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    raw.update(fields)
    return base64.urlsafe_b64encode(json.dumps(raw).encode()).decode().rstrip("=")


def test_a_cursor_with_a_clock_off_the_calendar_is_a_typed_error(tmp_path: Path) -> None:
    with cortex.open(tmp_path / "c.db", embedder=None) as e:
        e.add_many([{"content": f"deploy note {i}", "project": "a"} for i in range(12)])
        first = e.search("deploy", project="a", limit=5, record=False)
        assert first.next_cursor
        for now in (1e20, -1e20, 253402300800.0, -62135596801.0):
            with pytest.raises(InvalidOptionError, match="cursor is damaged"):
                e.search(
                    "deploy", project="a", limit=5, record=False,
                    cursor=_cursor_with(first.next_cursor, n=now),
                )  # fmt: skip
        # the ends of the calendar themselves are clocks a search can run with
        for now in (datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 0, tzinfo=UTC)):
            got = e.search(
                "deploy", project="a", limit=5, record=False,
                cursor=_cursor_with(first.next_cursor, n=now.timestamp()),
            )  # fmt: skip
            assert {r.memory.project for r in got} == {"a"}
            assert not {r.memory.id for r in got} & {r.memory.id for r in first}


def _exact_created(db: Path, memory_id: int) -> float:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT created_at FROM memories WHERE id = ?", (memory_id,))
        return float(row.fetchone()[0])


def test_a_memory_is_never_its_own_neighbour_in_time(any_engine: cortex.Engine) -> None:
    e = any_engine
    # created_at values whose microsecond rounding lies after the stored float
    rng = random.Random(3)
    base = 1_795_732_355.0
    ids = e.add_many(
        [
            {"content": f"note {i} {rng.random()}", "project": "p",
             "created_at": base + i + 0.3077265 + rng.random() * 1e-6}
            for i in range(20)
        ]
    )  # fmt: skip
    for memory_id in ids:
        tl = e.timeline(memory_id, before=30, after=30)
        around = [m.id for m in (*tl.before, *tl.after)]
        assert memory_id not in around
        assert sorted(around) == sorted(set(ids) - {memory_id})
        assert [m.id for m in tl.before] == sorted(i for i in ids if i < memory_id)


def test_an_update_leaves_created_at_as_stored(tmp_path: Path) -> None:
    db = tmp_path / "u.db"
    with cortex.open(db, embedder=None) as e:
        memory_id = e.add("a note", created_at=1_795_732_355.307_726_5)
        before = _exact_created(db, memory_id)
        e.update(memory_id, salience=0.9)
        e.update(memory_id, content="a note, rewritten")
        assert _exact_created(db, memory_id) == before
        e.update(memory_id, created_at=1_700_000_000.0)
        assert _exact_created(db, memory_id) == 1_700_000_000.0


W = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]


def test_the_keyword_file_of_a_diverged_copy_is_never_used(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(keyword_index, "AUTO_MIN", 50)
    rng = random.Random(1)
    a_db, b_db = tmp_path / "a.db", tmp_path / "b.db"
    with cortex.open(a_db, embedder=None, keyword_index="on") as a:
        a.add_many([{"content": " ".join(rng.choice(W) for _ in range(6))} for _ in range(100)])
        a.search("alpha", mode="keyword", record=False)  # built and saved
    shutil.copy(a_db, b_db)  # the copy carries the stamp of a's file: a's file suits it
    shutil.copytree(tmp_path / "a.db-index", tmp_path / "b.db-index")
    with cortex.open(b_db, embedder=None, keyword_index="on") as b:
        assert [r.memory.id for r in b.search("alpha bravo", mode="keyword", record=False)]
    # now both diverge by the same number of changes, and a saves its index again
    with cortex.open(a_db, embedder=None, keyword_index="on") as a:
        a.add("zulu yankee xray", project="p")
        a.search("alpha", mode="keyword", record=False)
        assert a.keyword_index.persist()
    with cortex.open(b_db, embedder=None, keyword_index="off") as b:
        b.add("kilo lima mike", project="p")
    shutil.copy(tmp_path / "a.db-index" / keyword_index.FILE_NAME,
                tmp_path / "b.db-index" / keyword_index.FILE_NAME)  # fmt: skip
    with (
        cortex.open(b_db, embedder=None, keyword_index="on") as native,
        cortex.open(b_db, embedder=None, keyword_index="off") as fts,
    ):
        for q in ("zulu", "zulu yankee", "kilo", "kilo lima", "alpha"):
            got = native.search(q, mode="keyword", record=False, limit=50)
            want = fts.search(q, mode="keyword", record=False, limit=50)
            assert [r.memory.id for r in got] == [r.memory.id for r in want], q
        assert native.keyword_index.ready()
    with cortex.open(b_db, embedder=None) as b:
        assert not b.search("zulu", mode="keyword", record=False)


def test_a_keyword_file_saved_before_stamps_is_still_loaded_and_stamped_later(
    tmp_path: Path, monkeypatch
) -> None:
    """A database whose saved file no stamp names (saved by an older cortex) keeps using it
    on the other checks: an upgrade must not drop the file the CLI's searches load. The
    next save stamps it."""
    monkeypatch.setattr(keyword_index, "AUTO_MIN", 50)
    monkeypatch.setattr(keyword_index, "SAVED_MIN", 50)
    rng = random.Random(2)
    db = tmp_path / "old.db"
    with cortex.open(db, embedder=None, keyword_index="on") as e:
        e.add_many([{"content": " ".join(rng.choice(W) for _ in range(6))} for _ in range(100)])
        assert e.keyword_index.persist()
    conn = sqlite3.connect(db)  # as an older cortex left it: no stamp
    with conn:
        conn.execute("DELETE FROM meta WHERE key = ?", (keyword_index.STAMP_KEY,))
    conn.close()
    loads: list[object] = []
    real = keyword_index.KeywordIndexer._load

    def counted(self: keyword_index.KeywordIndexer, *a: object, **k: object) -> object:
        got = real(self, *a, **k)
        loads.append(got)
        return got

    monkeypatch.setattr(keyword_index.KeywordIndexer, "_load", counted)
    with cortex.open(db, embedder=None, keyword_index="saved") as e:
        assert e.search("alpha", mode="keyword", record=False)
    assert loads and loads[-1] is not None  # the unstamped file was loaded, not rebuilt
    with cortex.open(db, embedder=None, keyword_index="on") as e:
        e.add("zulu yankee", project="p")
        e.search("zulu", mode="keyword", record=False)
        assert e.keyword_index.persist()
        stamp = e._store.query("SELECT value FROM meta WHERE key = ?", (keyword_index.STAMP_KEY,))
    assert stamp and stamp[0][0] == (tmp_path / "old.db-index" / keyword_index.FILE_NAME
                                     ).read_bytes()[-8:].hex()  # fmt: skip


def test_a_k_past_any_integer_returns_every_row(tmp_path: Path) -> None:
    """k is "at most k": past 2**63 it raised OverflowError from the extension."""
    import numpy as np

    from cortex.vectors import VectorIndex

    index = VectorIndex.create(tmp_path / "v.cvx", 8, "m")
    rows = np.random.default_rng(0).standard_normal((10, 8)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    index.append(np.arange(10, dtype=np.int64), rows)
    for backend in ("native", "numpy", "python"):
        for k in (2**63, 10**30):
            ids, _ = index.search(rows[0], k, backend=backend)  # type: ignore[arg-type]
            assert sorted(ids.tolist()) == list(range(10))
            assert ids[0] == 0


def test_reinforce_takes_ids_in_range_only(tmp_path: Path) -> None:
    """An id past SQLite's integers raised OverflowError from the driver."""
    with cortex.open(tmp_path / "r.db", embedder=None) as e:
        memory_id = e.add("a note")
        for bad in (2**70, 0, -1, True, 1.0):
            with pytest.raises(InvalidOptionError, match="memory id"):
                e.reinforce([bad, memory_id])  # type: ignore[list-item]
        assert e.get(memory_id).salience == 0.5  # nothing half-done
        e.reinforce([memory_id])
        assert e.get(memory_id).salience == pytest.approx(0.52)
