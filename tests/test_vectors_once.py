"""Each vector stored once (issue 16, item 3): the vector file is the source of truth and
SQLite holds a checksum of each row (cortex.semantic, "the vector file"). Real SQLite,
the real model, the real extension, real processes killed with SIGKILL.

- A writer killed between syncing its rows to the file and committing the transaction
  that counts them: nothing of that write is visible, the rows it left are taken back by
  the next writer, and a supplied vector that write was replacing survives.
- The vector file deleted: the model's vectors are embedded again, supplied ones are
  reported (a typed warning, `stats()`), and their memories are still found by keyword.
- Bytes of the file flipped: a search never returns a wrong id or score.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import cortex
from cortex.errors import IndexFormatError, VectorsLostWarning
from cortex.semantic import row_checksums, vectors_dir
from cortex.vectors import VectorIndex

from .conftest import run_cli
from .vector_truth import stored_vectors

TEXTS = [
    "we deploy with a blue-green switch behind the load balancer",
    "alice drinks green tea every morning before standup",
    "the billing service retries failed charges three times",
    "postgres vacuum runs nightly at two in the morning",
    "the mobile app caches thumbnails for a week",
    "bob prefers tabs over spaces in the Go code",
]
SUPPLIED = [
    "zebra crossing near the old harbour",
    "quarterly okr review in the big room",
    "kettle descaling schedule for the office",
]


def _meta(db: Path) -> tuple[int, int]:
    conn = sqlite3.connect(db)
    try:
        (value,) = conn.execute("SELECT value FROM meta WHERE key LIKE 'vectors:%'").fetchone()
    finally:
        conn.close()
    data = json.loads(value)
    return int(data["gen"]), int(data["rows"])


def _header_count(path: Path) -> int:
    with open(path, "rb") as f:
        f.seek(512)
        return int.from_bytes(f.read(8), "little")


def _random_rows(n: int, seed: int, dim: int = 384) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


KILLED_WRITER = textwrap.dedent(
    r"""
    import os, signal, sys
    import numpy as np
    import cortex
    from cortex.semantic import Semantic

    db, what = sys.argv[1], sys.argv[2]
    real = Semantic._append

    def append_then_die(self, *args):
        real(self, *args)  # rows synced to the file...
        print("appended", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # ...and the transaction never commits

    with cortex.open(db) as engine:
        Semantic._append = append_then_die
        if what == "add":
            rows = np.random.default_rng(9).standard_normal((4, 384)).astype(np.float32)
            engine.add_many([{"content": f"never committed {i}"} for i in range(4)], vectors=rows)
        else:  # a new text for memory 7, whose vector a caller supplied
            engine.update(int(what), content="a new text the model embeds")
    print("survived", flush=True)
    """
)


def _kill_writer(db: Path, what: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(db), what],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert proc.stdout.split() == ["appended"], proc.stdout


def _base(db: Path, embedder) -> tuple[list[int], list[int], np.ndarray]:  # type: ignore[no-untyped-def]
    with cortex.open(db, embedder=embedder) as engine:
        made = engine.add_many([{"content": t} for t in TEXTS])
        rows = _random_rows(len(SUPPLIED), 3)
        given = engine.add_many([{"content": t} for t in SUPPLIED], vectors=rows)
        engine.search("warm up", mode="semantic", record=False)
    return made, given, rows


def _exact_top(db: Path, model: str, q: np.ndarray, k: int) -> list[tuple[int, float]]:
    vecs = stored_vectors(db, model)
    conn = sqlite3.connect(db)
    try:
        live = {m for (m,) in conn.execute("SELECT id FROM memories WHERE deleted_at IS NULL")}
    finally:
        conn.close()
    ids = np.array(sorted(i for i in vecs if i in live), dtype=np.int64)
    mat = np.array([vecs[int(i)] for i in ids], dtype=np.float64).reshape(len(ids), -1)
    scores = mat @ q.astype(np.float64) / np.linalg.norm(q)
    order = np.lexsort((ids, -scores))[:k]
    return [(int(ids[o]), float(scores[o])) for o in order]


@pytest.mark.timeout(300)
def test_a_writer_killed_between_the_file_and_the_commit_leaves_nothing_behind(
    tmp_path: Path, embedder
) -> None:
    db = tmp_path / "k.db"
    made, given, rows = _base(db, embedder)
    gen, committed = _meta(db)
    path = next(vectors_dir(db).glob(f"*.{gen}.vectors"))
    q = embedder.embed("what does alice drink")

    _kill_writer(db, "add")
    assert _meta(db) == (gen, committed)  # SQLite never counted them...
    assert _header_count(path) == committed + 4  # ...though they reached the file
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT COUNT(*) FROM memories").fetchone() == (len(made) + 3,)
    finally:
        conn.close()
    for read_only in (True, False):
        with cortex.open(db, embedder=embedder, read_only=read_only) as engine:
            ids, scores = engine._semantic.verified_search(q, 20)
            got = list(zip(ids.tolist(), scores.tolist(), strict=True))
            want = _exact_top(db, engine.model_id, q, 20)
            assert [i for i, _ in got] == [i for i, _ in want]
            np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-5)
            assert len(engine._semantic.index()) == len(made) + len(given)
    # the next writer takes the rows back: the file holds exactly what SQLite counts
    with cortex.open(db, embedder=embedder) as engine:
        (extra,) = engine.add_many([{"content": "one more"}], vectors=_random_rows(1, 5))
        gen2, rows2 = _meta(db)
        assert (gen2, rows2) == (gen, committed + 1)
        assert _header_count(path) == rows2
        with VectorIndex.open(path) as index:
            ids, live = index.ids_and_live()
            assert ids.tolist()[-1] == extra and int(live.sum()) == len(made) + 4
        assert (
            stored_vectors(db, engine.model_id)[extra].tobytes()
            == (_random_rows(1, 5)[0] / np.linalg.norm(_random_rows(1, 5)[0]))
            .astype("<f2")
            .tobytes()
        )

    # A killed update of a memory whose vector a caller supplied: the append masked
    # its row (superseded) before the kill; that row is still the truth and survives.
    target = given[1]
    before = stored_vectors(db, embedder.model_id)[target]
    _kill_writer(db, str(target))
    with cortex.open(db, embedder=embedder) as engine:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing is lost
            ids, _ = engine._semantic.verified_search(rows[1], 3)
        assert ids.tolist()[0] == target
        assert engine.stats()["vectors_lost"] == {}
        assert engine.get(target).content == SUPPLIED[1]
    assert stored_vectors(db, embedder.model_id)[target].tobytes() == before.tobytes()


@pytest.mark.timeout(300)
def test_a_deleted_vector_file_reembeds_the_models_and_reports_the_supplied(
    tmp_path: Path, embedder
) -> None:
    db = tmp_path / "d.db"
    made, given, rows = _base(db, embedder)
    model = embedder.model_id
    before = stored_vectors(db, model)
    shutil.rmtree(vectors_dir(db))

    with cortex.open(db, embedder=embedder, read_only=True) as engine:
        with pytest.raises(IndexFormatError, match=r"reindex|writable"):
            engine.search("tea in the morning", mode="semantic", record=False)
        hits = engine.search("kettle descaling", mode="keyword", record=False)
        assert [h.memory.id for h in hits] == [given[2]]

    with cortex.open(db, embedder=embedder) as engine:
        with pytest.warns(VectorsLostWarning, match="3 vector"):
            hits = engine.search("what does alice drink", mode="semantic", record=False)
        assert hits[0].memory.id == made[1]
        assert engine.stats()["vectors_lost"] == {model: 3}
        after = stored_vectors(db, model)
        assert sorted(after) == sorted(made)  # the model's, embedded again
        for i in made:  # the same model on the same text: the same vector (f16)
            np.testing.assert_allclose(
                after[i].astype(np.float32), before[i].astype(np.float32), atol=2e-3
            )
        # a supplied vector is never returned again, nor silently replaced
        found, _ = engine._semantic.verified_search(rows[0], 20)
        assert not set(found.tolist()) & set(given)
        assert engine.reindex()["embedded"] == 0
        assert engine.stats()["vectors_lost"] == {model: 3}
        # still found by keyword, and by a hybrid search's keyword leg
        for text, i in zip(SUPPLIED, given, strict=True):
            assert [h.memory.id for h in engine.search(text, mode="keyword")][:1] == [i]
            assert i in [h.memory.id for h in engine.search(text, mode="hybrid")]
    out = run_cli("stats", "--db", str(db))
    assert "vectors lost: 3" in out.out, out.out + out.err


@pytest.mark.timeout(600)
def test_flipped_bytes_in_the_vector_file_never_give_a_wrong_score(
    tmp_path: Path, embedder
) -> None:
    base = tmp_path / "base"
    base.mkdir()
    db0 = base / "f.db"
    made, _given, rows = _base(db0, embedder)
    gen, committed = _meta(db0)
    path0 = next(vectors_dir(db0).glob(f"*.{gen}.vectors"))
    model = embedder.model_id
    truth0 = stored_vectors(db0, model)
    queries = [embedder.embed("what does alice drink"), rows[0], rows[2]]
    rng = random.Random(16)
    for trial in range(12):
        work = tmp_path / f"t{trial}"
        shutil.copytree(base, work)
        db = work / "f.db"
        path = vectors_dir(db) / path0.name
        at = 4096 + rng.randrange(committed * 384 * 2)
        with open(path, "r+b") as f:
            f.seek(at)
            old = f.read(1)
            f.seek(at)
            f.write(bytes([old[0] ^ (1 << rng.randrange(8))]))
        for read_only in (True, False):
            with cortex.open(db, embedder=embedder, read_only=read_only) as engine:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", VectorsLostWarning)
                    try:
                        got = [engine._semantic.verified_search(q, 6) for q in queries]
                    except IndexFormatError:
                        assert read_only  # a writable database repairs instead
                        continue
                lost = engine.stats()["vectors_lost"].get(model, 0)
            now = stored_vectors(db, model)
            for (ids, scores), q in zip(got, queries, strict=True):
                for i, s in zip(ids.tolist(), scores.tolist(), strict=True):
                    row = now[i].astype(np.float64)  # the database's vector of i
                    assert abs(row @ q / np.linalg.norm(q) - s) < 1e-5, (trial, i)
                    if i in truth0 and i not in made:  # a supplied vector is never altered
                        assert now[i].tobytes() == truth0[i].tobytes()
                want = _exact_top(db, model, q, 6)
                assert ids.tolist() == [i for i, _ in want]
            # at most the one damaged supplied row is lost, and only if it was supplied
            row_hit = (at - 4096) // (384 * 2)
            assert lost in (0, 1) and (lost == 0 or row_hit >= len(made))
    assert row_checksums(np.stack([truth0[i] for i in made])).all()


def test_rows_are_found_by_id_after_an_older_memory_is_embedded_again(
    tmp_path: Path, embedder
) -> None:  # type: ignore[no-untyped-def]
    """The id -> row lookup of the page check and `stored_rows` (sorted ids, binary
    search) takes the newest live row of a memory, also when its new row is appended
    after rows of larger ids, and finds nothing for an id with no row."""
    db = tmp_path / "rows.db"
    with cortex.open(db, embedder=embedder) as engine:
        ids = engine.add_many([{"content": t} for t in TEXTS])
        engine.search("warm up", mode="semantic", record=False)
        semantic = engine._semantic
        model = semantic.model_id
        asked = np.asarray([*ids, 10**9], dtype=np.int64)
        before = semantic.stored_rows(asked)
        engine.update(ids[0], content="the office kettle is descaled every friday")
        engine.search("kettle", mode="semantic", record=False)
        after = semantic.stored_rows(asked)
    truth = stored_vectors(db, model)
    assert sorted(before) == sorted(after) == sorted(ids)  # not the unknown id
    assert not np.array_equal(before[ids[0]], after[ids[0]])  # the new row, not the masked one
    for i in ids:
        assert np.array_equal(after[i].astype(np.float32), truth[i].astype(np.float32))
