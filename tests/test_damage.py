"""Damage to the derived vector index: detected (rebuilt, then exact) or a typed error,
never a wrong result; and rebuilds that concurrent searchers never notice.

The vector index beside the database is derived from the embeddings in SQLite. Each
kind of damage below is done to a copy of a synced database's files, which is then
opened the way a user's next command would open it, writable and read-only. Every
semantic search must then return exactly what an exact numpy scan over the SQLite
embeddings of the live memories returns (same ids in the same order, same cosines), or
raise IndexFormatError whose message says the fix: never a wrong id or score, never a
memory silently missing, never a raw exception, a hang or a MemoryError.

The race: a real process searches in a loop (opening the database afresh every few
searches, as CLI commands do) while another real process rebuilds the index over and
over and adds memories now and then; every search must equal the exact answer of the
database before or after it, with no error at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sqlite3
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import cortex
from cortex.errors import IndexFormatError
from cortex.semantic import read_vectors, vectors_dir
from cortex.vectors import VectorIndex

from .words import OPS_WORDS

SEED = 1_414
K = 10
WORDS = [
    *OPS_WORDS,
    "snapshot",
    "backup",
    "schema",
    "replica",
    "shard",
    "vacuum",
    "compaction",
    "tracing",
    "alert",
    "pager",
]
QUERIES = ["how do we roll back a release", "database index rebuild", "token budget alert"]
ID_DTYPE = np.dtype([("id", "<i8"), ("flags", "<u8")])
HEADER = 4096
SIDE = 64


# ------------------------------------------------------------------ the reference


def truth(db: Path, model: str, dim: int) -> dict[int, np.ndarray]:
    """The stored row of every live memory with an embedding of `model` whose row in the
    vector file matches the checksum SQLite holds (read straight from the files:
    cortex.semantic.read_vectors): the database's vectors."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        live = {
            int(m)
            for (m,) in conn.execute(
                "SELECT e.memory_id FROM embeddings e JOIN memories m ON m.id = e.memory_id"
                " WHERE e.model_id = ? AND m.deleted_at IS NULL",
                (model,),
            )
        }
        vecs = read_vectors(conn, db, model, dim)
    finally:
        conn.close()
    return {i: v for i, v in vecs.items() if i in live}


def exact(db: Path, model: str, query: np.ndarray, k: int) -> tuple[list[int], np.ndarray]:
    """Top-k by score over the stored vectors of live memories (`truth`), in numpy
    (float64): the stored f16 row (unit to within its rounding) against the unit query,
    ties to the lower memory id: the answer every search must give."""
    vecs = truth(db, model, len(query))
    ids = np.array(sorted(vecs), dtype=np.int64)
    mat = np.array([vecs[int(i)] for i in ids], dtype=np.float64).reshape(len(ids), len(query))
    q = query.astype(np.float64)
    scores = (mat @ q) / np.linalg.norm(q)
    order = np.lexsort((ids, -scores))[:k]
    return ids[order].tolist(), scores[order]


def assert_exact(engine: cortex.Engine, db: Path, queries: list[np.ndarray]) -> None:
    semantic = engine._semantic
    for q in queries:
        ids, scores = semantic.verified_search(q, K)
        want_ids, want_scores = exact(db, semantic.model_id, q, K)
        assert ids.tolist() == want_ids
        np.testing.assert_allclose(scores, want_scores, atol=1e-5)


# ------------------------------------------------------------------ the database


@dataclass
class Base:
    folder: Path
    db: Path
    vectors: Path  # the main vector file (its siblings share the stem)
    model: str
    queries: list[np.ndarray]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, embedder) -> Base:
    """160 memories, 5 of them edited (their first rows are masked: superseded) and 5
    deleted (masked), index synced."""
    folder = tmp_path_factory.mktemp("damage-base")
    db = folder / "m.db"
    rng = random.Random(SEED)
    with cortex.open(db, embedder=embedder) as engine:
        ids = engine.add_many(
            {"content": f"note {i}: " + " ".join(rng.sample(WORDS, 8))} for i in range(160)
        )
        for i in ids[:5]:
            engine.update(i, content=f"edited {i}: " + " ".join(rng.sample(WORDS, 6)))
        for i in ids[5:10]:
            engine.delete(i)
        engine.search("warm up", mode="semantic", record=False)  # synced
        vectors = engine._semantic.index_path()
        model = engine._semantic.model_id
    # An index this small has no int8 copy (written from QUANTIZED_MIN_ROWS rows on):
    # make it, so that the damage below reaches one (the writer keeps it in step).
    with VectorIndex.open(vectors, writable=True) as vi:
        vi.rebuild_quantized()
        assert vi.quantized_rows == vi.rows
    queries = [np.asarray(embedder.embed_query(q), dtype=np.float32) for q in QUERIES]
    return Base(folder, db, vectors, model, queries)


@dataclass
class Ctx:
    """A copy of the base database, and what the damage functions need to aim."""

    db: Path
    vec: Path
    base: Base

    def side(self, suffix: str) -> Path:
        return Path(f"{self.vec}{suffix}")

    @property
    def state(self) -> Path:
        return self.side(".state")

    @property
    def dim(self) -> int:
        return len(self.base.queries[0])

    def records(self) -> np.ndarray:
        return np.fromfile(self.side(".ids"), dtype=ID_DTYPE, offset=SIDE)

    def row_of(self, memory_id: int) -> int:
        rec = self.records()
        return int(np.flatnonzero((rec["id"] == memory_id) & ((rec["flags"] & 1) == 0))[0])

    def best(self, query: int = 0, rank: int = 0) -> int:
        """The memory id ranked `rank` for query `query` (exactly, from SQLite)."""
        return exact(self.db, self.base.model, self.base.queries[query], rank + 1)[0][rank]

    def best_row(self, rank: int = 0) -> int:
        return self.row_of(self.best(0, rank))

    def masked_row(self) -> int:
        return int(np.flatnonzero(self.records()["flags"] & 1)[0])

    def write(self, path: Path, offset: int, data: bytes) -> None:
        with open(path, "r+b") as f:
            f.seek(offset)
            f.write(data)

    def read(self, path: Path, offset: int, n: int) -> bytes:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(n)

    def row_at(self, row: int) -> int:
        return HEADER + row * self.dim * 2  # f16 rows

    def q8_at(self, row: int) -> int:
        return SIDE + row * ((self.dim + 12 + 31) // 32 * 32)

    def state_json(self) -> dict:
        return json.loads(self.state.read_text())

    def set_state(self, **changes: object) -> None:
        self.state.write_text(json.dumps({**self.state_json(), **changes}))


def _copy(base: Base, dest: Path) -> Ctx:
    """The database with its WAL and its folders (`<db>-vectors/`, `<db>-index/`) copied
    to `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    for path in base.folder.iterdir():
        if path.name.startswith(base.db.name) and path.is_file():
            shutil.copy(path, dest / path.name)
        elif path.name.startswith(base.db.name) and path.is_dir():
            shutil.copytree(path, dest / path.name)
    db = dest / base.db.name
    return Ctx(db, vectors_dir(db) / base.vectors.name, base)


# ------------------------------------------------------------------ the damage


def _flip_sign(c: Ctx) -> None:
    at = c.row_at(c.best_row())
    row = np.frombuffer(c.read(c.vec, at, c.dim * 2), dtype="<f2")
    c.write(c.vec, at, (-row).astype("<f2").tobytes())


def _overwrite_with(c: Ctx, other: int) -> None:
    src = c.read(c.vec, c.row_at(other), c.dim * 2)
    c.write(c.vec, c.row_at(c.best_row()), src)


def _unit_row(c: Ctx, seed: int) -> bytes:
    v = np.random.default_rng(seed).standard_normal(c.dim).astype(np.float32)
    return (v / np.linalg.norm(v)).astype("<f2").tobytes()


def _swap_ids(c: Ctx, a: int, b: int) -> None:
    rec = c.records()
    ia, ib = int(rec["id"][a]), int(rec["id"][b])
    c.write(c.side(".ids"), SIDE + a * 16, struct.pack("<q", ib))
    c.write(c.side(".ids"), SIDE + b * 16, struct.pack("<q", ia))


def _set_flag(c: Ctx, row: int, flags: int) -> None:
    c.write(c.side(".ids"), SIDE + row * 16 + 8, struct.pack("<Q", flags))


def _scribble(c: Ctx, path: Path, offset: int, n: int, seed: int = 7) -> None:
    c.write(path, offset, random.Random(seed).randbytes(n))


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)


def _extend(path: Path, n: int) -> None:
    with open(path, "ab") as f:
        f.write(random.Random(n).randbytes(n))


def _replace_with_dir(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.mkdir()


def _replace_with_fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path)


def _replace_with_zero(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.symlink_to("/dev/zero")


def _count(c: Ctx, n: int) -> None:
    c.write(c.vec, 512, struct.pack("<QQ", n, ~n & 0xFFFFFFFFFFFFFFFF))


def _rows(c: Ctx) -> int:
    conn = sqlite3.connect(c.db)
    try:
        (value,) = conn.execute("SELECT value FROM meta WHERE key LIKE 'vectors:%'").fetchone()
    finally:
        conn.close()
    return int(json.loads(value)["rows"])


def _q8_byte(c: Ctx, row: int, col: int, value: int) -> None:
    c.write(c.side(".q8"), c.q8_at(row) + col, bytes([value]))


def _q8_field(c: Ctx, row: int, field: int, value: float) -> None:
    c.write(c.side(".q8"), c.q8_at(row) + c.dim + 4 * field, struct.pack("<f", value))


def _other_index(c: Ctx) -> None:
    """The files (and state) of another database's index of the same model: each file
    intact and consistent with the others, but not this database's rows."""
    other = c.db.parent / "other"
    other.mkdir()
    odb = other / c.db.name
    rng = random.Random(99)
    with cortex.open(odb, embedder=_EMBEDDER[0]) as engine:
        engine.add_many({"content": " ".join(rng.sample(WORDS, 5))} for _ in range(155))
        engine.search("warm up", mode="semantic", record=False)
    for path in vectors_dir(odb).iterdir():
        if ".vectors" in path.name:
            shutil.copy(path, vectors_dir(c.db) / path.name)


_EMBEDDER: list = []  # the session's model, for damage that needs to build an index


DAMAGE: dict[str, Callable[[Ctx], None]] = {
    # the f16 rows (header intact)
    "best row sign-flipped": _flip_sign,
    "best row overwritten by another row": lambda c: _overwrite_with(c, c.best_row(5)),
    "best row overwritten by a valid unit vector": lambda c: c.write(
        c.vec, c.row_at(c.best_row()), _unit_row(c, 1)
    ),
    "a low row overwritten by a copy of the query": lambda c: c.write(
        c.vec, c.row_at(c.best_row(K + 20)), c.base.queries[0].astype("<f2").tobytes()
    ),
    "4 bytes changed inside the best row": lambda c: c.write(
        c.vec, c.row_at(c.best_row()) + 4 * (c.dim // 2), b"\x11\x22\x33\x44"
    ),
    "one low bit flipped in the best row": lambda c: c.write(
        c.vec,
        c.row_at(c.best_row()) + 40,
        bytes([c.read(c.vec, c.row_at(c.best_row()) + 40, 1)[0] ^ 1]),
    ),
    "best row zeroed": lambda c: c.write(c.vec, c.row_at(c.best_row()), bytes(c.dim * 2)),
    "NaN in the best row": lambda c: c.write(
        c.vec, c.row_at(c.best_row()) + 8, struct.pack("<e", float("nan"))
    ),
    "all rows scribbled": lambda c: _scribble(c, c.vec, HEADER, c.vec.stat().st_size - HEADER),
    # the main file as a whole
    "vectors truncated to half": lambda c: _truncate(c.vec, c.vec.stat().st_size // 2),
    "vectors truncated to 100 bytes": lambda c: _truncate(c.vec, 100),
    "vectors emptied": lambda c: _truncate(c.vec, 0),
    "vectors extended with junk": lambda c: _extend(c.vec, 1 << 20),
    "vectors deleted": lambda c: c.vec.unlink(),
    "vectors replaced by a directory": lambda c: _replace_with_dir(c.vec),
    "vectors replaced by a FIFO": lambda c: _replace_with_fifo(c.vec),
    "vectors a symlink to /dev/zero": lambda c: _replace_with_zero(c.vec),
    # header fields
    "header magic": lambda c: c.write(c.vec, 0, b"NOTCTX\x00\x01"),
    "header version": lambda c: c.write(c.vec, 8, struct.pack("<I", 3)),
    "header dim": lambda c: c.write(c.vec, 16, struct.pack("<I", 383)),
    "header uuid": lambda c: c.write(c.vec, 24, b"\x00" * 16),
    "header model id": lambda c: c.write(c.vec, 44, b"X"),
    "header checksum": lambda c: c.write(c.vec, 504, b"\xff" * 8),
    "row count torn": lambda c: c.write(c.vec, 512, b"\x01" * 16),
    "row count one lower, consistently": lambda c: _count(c, _rows(c) - 1),
    "row count two higher, consistently": lambda c: _count(c, _rows(c) + 2),
    # the id map
    "two ids swapped (best and another)": lambda c: _swap_ids(c, c.best_row(), c.best_row(7)),
    "two ids swapped (best and a masked row)": lambda c: _swap_ids(c, c.best_row(), c.masked_row()),
    "an id changed to an unknown memory": lambda c: c.write(
        c.side(".ids"), SIDE + c.best_row() * 16, struct.pack("<q", 10**9)
    ),
    "an id changed to another memory's": lambda c: c.write(
        c.side(".ids"), SIDE + c.best_row(3) * 16, struct.pack("<q", c.best(0, 0))
    ),
    "mask flag set on the best row": lambda c: _set_flag(c, c.best_row(), 1),
    "mask flag set on a low row": lambda c: _set_flag(c, c.best_row(K + 30), 1),
    "mask flag cleared on a superseded row": lambda c: _set_flag(c, c.masked_row(), 0),
    "ids truncated": lambda c: _truncate(c.side(".ids"), SIDE + 16 * 20),
    "ids extended with junk": lambda c: _extend(c.side(".ids"), 4096),
    "ids header scribbled": lambda c: _scribble(c, c.side(".ids"), 0, SIDE),
    "ids deleted": lambda c: c.side(".ids").unlink(),
    # the int8 copy
    "q8 records scribbled": lambda c: _scribble(
        c, c.side(".q8"), SIDE, c.side(".q8").stat().st_size - SIDE
    ),
    "q8 one byte of the best record": lambda c: _q8_byte(c, c.best_row(), 3, 1),
    "q8 a byte above the 7-bit range": lambda c: _q8_byte(c, c.best_row(), 3, 250),
    "q8 scale of the best record zeroed": lambda c: _q8_field(c, c.best_row(), 0, 0.0),
    "q8 error bound of the best record zeroed": lambda c: _q8_field(c, c.best_row(), 1, 0.0),
    "q8 row norm of the best record zeroed": lambda c: _q8_field(c, c.best_row(), 2, 0.0),
    "q8 truncated": lambda c: _truncate(c.side(".q8"), c.side(".q8").stat().st_size // 2),
    "q8 header scribbled": lambda c: _scribble(c, c.side(".q8"), 0, SIDE),
    "q8 deleted": lambda c: c.side(".q8").unlink(),
    # the checksums
    "checksums scribbled": lambda c: _scribble(c, c.side(".sum"), SIDE, 16),
    "checksum slot zeroed": lambda c: c.write(c.side(".sum"), SIDE, bytes(16)),
    "checksums truncated": lambda c: _truncate(c.side(".sum"), SIDE),
    "checksums deleted": lambda c: c.side(".sum").unlink(),
    # the state
    "state generation ahead": lambda c: c.set_state(gen=c.state_json()["gen"] + 1000),
    "state deletion time behind (0)": lambda c: c.set_state(deleted=0),
    "state deletion time ahead": lambda c: c.set_state(deleted=4e9),
    "state uuid of other files": lambda c: c.set_state(uuid="0" * 32),
    "state fields of the wrong type": lambda c: c.set_state(gen="12", deleted=None),
    "state garbage": lambda c: c.state.write_bytes(b"\x00{not json"),
    "state empty": lambda c: c.state.write_bytes(b""),
    "state 8 MB": lambda c: c.state.write_bytes(b" " * (8 << 20) + b"{}"),
    "state deeply nested": lambda c: c.state.write_bytes(b"[" * 100_000),
    "state deleted": lambda c: c.state.unlink(),
    "state a directory": lambda c: _replace_with_dir(c.state),
    "state a FIFO": lambda c: _replace_with_fifo(c.state),
    "state a symlink to /dev/zero": lambda c: _replace_with_zero(c.state),
    # the lock
    "lock a directory": lambda c: _replace_with_dir(c.side(".lock")),
    "lock a FIFO": lambda c: _replace_with_fifo(c.side(".lock")),
    "lock a symlink to /dev/zero": lambda c: _replace_with_zero(c.side(".lock")),
    # whole files of another index
    "every file of another database's index": _other_index,
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read-only"])
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damage_is_detected_never_wrong(
    tmp_path: Path, base: Base, embedder, damage: str, read_only: bool
) -> None:
    _EMBEDDER[:] = [embedder]
    ctx = _copy(base, tmp_path)
    DAMAGE[damage](ctx)
    with cortex.open(ctx.db, embedder=embedder, read_only=read_only) as engine:
        try:
            assert_exact(engine, ctx.db, base.queries)
            public = engine.search(QUERIES[0], mode="semantic", limit=5, record=False)
        except IndexFormatError as exc:
            # Only a read-only database may refuse, and it must say what to do.
            assert read_only, f"a writable database refused instead of rebuilding: {exc}"
            assert "reindex" in str(exc) or "writable" in str(exc), str(exc)
            return
    assert [r.memory.id for r in public] == exact(ctx.db, base.model, base.queries[0], 5)[0]
    if not read_only:
        # Repaired for good: the next open is exact without a rebuild, and left no litter.
        with cortex.open(ctx.db, embedder=embedder) as engine:
            uuid = engine._semantic.index().uuid
            assert_exact(engine, ctx.db, base.queries)
            assert engine._semantic.index().uuid == uuid
        assert not [p.name for p in tmp_path.iterdir() if ".tmp" in p.name]


def test_every_kind_of_damage_counts(base: Base) -> None:
    """The battery is at least the 40 kinds the issue asks for."""
    assert len(DAMAGE) >= 40, len(DAMAGE)


def test_the_damage_matters_without_the_checks(tmp_path: Path, base: Base, embedder) -> None:
    """The battery has teeth: the raw index, opened before the damage (so that opening's
    own check of the last block does not see it), answers wrong."""
    from cortex.vectors import VectorIndex

    wrong = 0
    for damage in (
        "best row sign-flipped",
        "two ids swapped (best and another)",
        "mask flag set on the best row",
    ):
        ctx = _copy(base, tmp_path / damage.replace(" ", "-"))
        want = exact(ctx.db, base.model, base.queries[0], K)[0]
        with VectorIndex.open(ctx.vec) as index:
            DAMAGE[damage](ctx)
            ids, _ = index.search(base.queries[0], K)
        wrong += ids.tolist() != want
    assert wrong == 3


def test_rebuild_litter_is_cleaned(tmp_path: Path, base: Base, embedder) -> None:
    ctx = _copy(base, tmp_path)
    litter = [
        Path(f"{ctx.vec}.tmp4242"),
        Path(f"{ctx.vec}.tmp4242.ids"),
        Path(f"{ctx.vec}.tmp4242.q8.tmp4242"),
        Path(f"{ctx.vec}.ids.tmp77"),
        Path(f"{ctx.vec}.q8.tmp77"),
        Path(f"{ctx.vec}.state.tmp9"),
    ]
    for path in litter:
        path.write_bytes(b"left by a killed rebuild")
    with cortex.open(ctx.db, embedder=embedder) as engine:
        engine.add("one more memory about canary releases")
        engine.search("canary", mode="semantic", record=False)  # a sync: litter cleaned
        assert_exact(engine, ctx.db, base.queries)
    assert [p for p in litter if p.exists()] == []
    assert ctx.vec.exists() and ctx.state.exists()


def test_damage_under_an_open_engine_is_found_by_the_periodic_check(
    tmp_path: Path, base: Base, embedder
) -> None:
    """A row hidden by damage while a process holds the index (the best row sign-flipped:
    it drops out, so no returned row is wrong) is found by the next full check, which a
    long-lived process runs periodically (here: due at once)."""
    ctx = _copy(base, tmp_path)
    with cortex.open(ctx.db, embedder=embedder) as engine:
        assert_exact(engine, ctx.db, base.queries)
        _flip_sign(ctx)
        engine._semantic._recheck_at = 0.0  # the period has passed
        assert_exact(engine, ctx.db, base.queries)


def test_a_passed_check_is_trusted_only_for_the_very_same_files(
    tmp_path: Path, base: Base, embedder
) -> None:
    """A full check that passed is recorded (`.checked`) and a fresh process opening the
    same, untouched files skips it (the first search of a 1M store); damage written after
    it changes the files' times, so the next process checks in full and finds it."""
    from cortex.vectors import VectorIndex

    ctx = _copy(base, tmp_path)
    marker = ctx.side(".checked")
    calls: list[int] = []
    real_verify = VectorIndex.verify

    def counted(self: VectorIndex, from_row: int = 0) -> None:
        calls.append(from_row)
        real_verify(self, from_row)

    VectorIndex.verify = counted  # type: ignore[method-assign]
    try:
        with cortex.open(ctx.db, embedder=embedder) as engine:
            assert_exact(engine, ctx.db, base.queries)
        assert calls == [0] and marker.exists()
        with cortex.open(ctx.db, embedder=embedder) as engine:  # same files: trusted
            assert_exact(engine, ctx.db, base.queries)
        assert calls == [0]
        _flip_sign(ctx)  # hides the best row: only a full check can see it
        with cortex.open(ctx.db, embedder=embedder) as engine:
            assert_exact(engine, ctx.db, base.queries)  # found, rebuilt, exact
        assert calls[:2] == [0, 0]
        # a read-only process trusts a record too, but never writes one
        with cortex.open(ctx.db, embedder=embedder) as engine:
            marker = Path(f"{engine._semantic.index_path()}.checked")
        marker.unlink()
        with cortex.open(ctx.db, embedder=embedder, read_only=True) as engine:
            assert_exact(engine, ctx.db, base.queries)
        assert not marker.exists()
    finally:
        VectorIndex.verify = real_verify  # type: ignore[method-assign]


def test_damage_under_an_open_engine_never_returns_a_wrong_row(
    tmp_path: Path, base: Base, embedder
) -> None:
    """Damage while a process holds the index: every returned row is still checked
    against SQLite, so a row made to look better is caught at the search."""
    ctx = _copy(base, tmp_path)
    with cortex.open(ctx.db, embedder=embedder) as engine:
        assert_exact(engine, ctx.db, base.queries)
        # A low row now holds the query itself: it would come first with score 1.0.
        ctx.write(
            ctx.vec, ctx.row_at(ctx.best_row(K + 20)), base.queries[0].astype("<f2").tobytes()
        )
        assert_exact(engine, ctx.db, base.queries)


# ------------------------------------------------------------------ the int8 screen at scale


class HashEmbedder:
    """A deterministic stand-in for the model (unit tests only): enough vectors for the
    int8 screen (>= 20,000 rows) without embedding 20,000 texts."""

    model_id = "test/hash-embedder-48"
    dim = 48

    def embed(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        return v / np.linalg.norm(v)

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.embed(t) for t in texts])


@pytest.mark.timeout(300)
def test_scribbled_q8_under_the_int8_screen_is_detected(tmp_path: Path) -> None:
    from cortex.vectors import QUANTIZED_MIN_ROWS, VectorIndex

    db = tmp_path / "big.db"
    fake = HashEmbedder()
    with cortex.open(db, embedder=fake, keyword_index="off") as engine:
        engine.add_many({"content": f"memory number {i}"} for i in range(QUANTIZED_MIN_ROWS + 500))
        engine.search("warm up", mode="semantic", record=False)
        vec = engine._semantic.index_path()
    rng = np.random.default_rng(SEED)
    queries = [fake.embed(f"query {i}") for i in range(30)]
    # Damage every int8 record but keep the header: the screen now rules rows out on
    # bounds that are not true.
    q8 = Path(f"{vec}.q8")
    size = q8.stat().st_size
    with open(q8, "r+b") as f:
        f.seek(SIDE)
        f.write(rng.integers(0, 128, size - SIDE, dtype=np.uint8).tobytes())
    with VectorIndex.open(vec) as raw:
        assert raw.quantized_rows >= QUANTIZED_MIN_ROWS  # the screen is in use
        wrong = sum(
            raw.search(q, K)[0].tolist() != exact(db, fake.model_id, q, K)[0] for q in queries
        )
    assert wrong > 0  # the damage matters
    with cortex.open(db, embedder=fake, keyword_index="off") as engine:
        for q in queries:
            ids, scores = engine._semantic.verified_search(q, K)
            want_ids, want_scores = exact(db, fake.model_id, q, K)
            assert ids.tolist() == want_ids
            np.testing.assert_allclose(scores, want_scores, atol=1e-5)
        assert engine._semantic.index().quantized_rows >= QUANTIZED_MIN_ROWS  # rebuilt


# ------------------------------------------------------------------ rebuild races

SEARCHER = textwrap.dedent(
    r"""
    import json, sqlite3, sys
    import numpy as np
    import cortex
    from cortex.embed import load_default_embedder

    db, queries, rounds = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    read_only = sys.argv[4] == "ro"
    embedder = load_default_embedder()
    qs = [np.asarray(embedder.embed(q), dtype=np.float32) for q in queries]

    from pathlib import Path
    from cortex.semantic import read_vectors

    def exact(model, q, k):
        for _ in range(50):  # a compaction may be switching files under this read
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            live = {m for (m,) in conn.execute(
                "SELECT e.memory_id FROM embeddings e JOIN memories m ON m.id = e.memory_id"
                " WHERE e.model_id = ? AND m.deleted_at IS NULL", (model,))}
            vecs = read_vectors(conn, Path(db), model, len(q))
            conn.close()
            if live <= set(vecs):
                break
        ids = np.array(sorted(live), dtype=np.int64)
        mat = np.array([vecs[int(i)] for i in ids], dtype=np.float64)
        s = (mat @ q.astype(np.float64)) / np.linalg.norm(q)
        o = np.lexsort((ids, -s))[:k]
        return ids[o].tolist()

    done = wrong = errors = 0
    messages = []
    engine = None
    print("ready", flush=True)
    while done < rounds:
        if done % 10 == 0:
            if engine is not None:
                engine.close()
            engine = cortex.open(db, embedder=embedder, read_only=read_only)
        q = qs[done % len(qs)]
        model = engine._semantic.model_id
        try:
            before = exact(model, q, 10)
            ids, _ = engine._semantic.verified_search(q, 10)
            after = exact(model, q, 10)
            if ids.tolist() not in (before, after):
                wrong += 1
                messages.append(f"wrong: {ids.tolist()} vs {before}")
            if done % 5 == 0:
                engine.search(queries[done % len(queries)], mode="semantic", record=False)
        except Exception as exc:
            errors += 1
            messages.append(f"{type(exc).__name__}: {exc}")
        done += 1
    engine.close()
    report = {"searches": done, "wrong": wrong, "errors": errors, "messages": messages[:5]}
    print(json.dumps(report))
    """
)

REBUILDER = textwrap.dedent(
    r"""
    import json, sys, time
    import cortex
    from cortex.embed import load_default_embedder

    db, stop = sys.argv[1], sys.argv[2]
    embedder = load_default_embedder()
    rebuilds = added = 0
    with cortex.open(db, embedder=embedder) as engine:
        import os
        while not os.path.exists(stop):
            engine.reindex()
            rebuilds += 1
            if rebuilds % 7 == 0:
                engine.add(f"added during the race, number {rebuilds}, about rollback")
                added += 1
    print(json.dumps({"rebuilds": rebuilds, "added": added}))
    """
)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", ["rw", "ro"], ids=["writable-searcher", "read-only-searcher"])
def test_rebuilds_are_invisible_to_a_concurrent_searcher(
    tmp_path: Path, base: Base, mode: str
) -> None:
    ctx = _copy(base, tmp_path)
    stop = tmp_path / "stop"
    env = {**os.environ, "CORTEX_THREADS": "1", "CORTEX_NO_PROGRESS": "1"}
    searcher = subprocess.Popen(
        [sys.executable, "-c", SEARCHER, str(ctx.db), json.dumps(QUERIES), "220", mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    rebuilder = subprocess.Popen(
        [sys.executable, "-c", REBUILDER, str(ctx.db), str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        out, err = searcher.communicate(timeout=500)
    finally:
        stop.touch()
        rout, rerr = rebuilder.communicate(timeout=120)
        if searcher.poll() is None:
            searcher.kill()
    assert searcher.returncode == 0, err[-3000:]
    assert rebuilder.returncode == 0, rerr[-3000:]
    report = json.loads(out.splitlines()[-1])
    rebuilt = json.loads(rout.splitlines()[-1])
    print(f"race ({mode}): {report}, {rebuilt}")
    assert report["searches"] >= 200
    assert (report["errors"], report["wrong"]) == (0, 0), report["messages"]
    assert rebuilt["rebuilds"] >= 20, rebuilt  # the races did happen


@pytest.mark.parametrize("mode", ["semantic", "hybrid"])
def test_damage_under_an_open_engine_never_reaches_a_page(
    tmp_path: Path, base: Base, embedder, mode: str
) -> None:
    """The search pipeline checks the semantic rows of the page it answers against
    SQLite (not every candidate it ranks): a row made to look better under an open
    engine reaches the page, is caught there, the index is rebuilt and the search runs
    again, answering what the undamaged database answers (ids and scores)."""
    from datetime import UTC, datetime

    now = datetime(2026, 11, 26, 12, tzinfo=UTC)
    clean = _copy(base, tmp_path / "clean")
    with cortex.open(clean.db, embedder=embedder) as engine:
        want = engine.search(QUERIES[0], mode=mode, limit=5, record=False, now=now)
    ctx = _copy(base, tmp_path / "damaged")
    with cortex.open(ctx.db, embedder=embedder) as engine:
        before = engine.search(QUERIES[0], mode=mode, limit=5, record=False, now=now)
        uuid = engine._semantic.index().uuid
        # A low row now holds the query itself: cosine 1.0, it would come first.
        ctx.write(
            ctx.vec, ctx.row_at(ctx.best_row(K + 20)), base.queries[0].astype("<f2").tobytes()
        )
        got = engine.search(QUERIES[0], mode=mode, limit=5, record=False, now=now)
        assert engine._semantic.index().uuid != uuid  # caught on the page, rebuilt
    answer = [(r.memory.id, r.score) for r in want]
    assert [(r.memory.id, r.score) for r in before] == answer
    assert [(r.memory.id, r.score) for r in got] == answer


def test_damage_under_a_read_only_engine_is_refused_at_the_page(
    tmp_path: Path, base: Base, embedder
) -> None:
    """Read-only, the same damage cannot be repaired: the search refuses (and says how to
    fix it) rather than answer the wrong row."""
    ctx = _copy(base, tmp_path)
    with cortex.open(ctx.db, embedder=embedder, read_only=True) as engine:
        engine.search(QUERIES[0], mode="semantic", limit=5, record=False)
        ctx.write(
            ctx.vec, ctx.row_at(ctx.best_row(K + 20)), base.queries[0].astype("<f2").tobytes()
        )
        with pytest.raises(IndexFormatError, match="reindex"):
            engine.search(QUERIES[0], mode="semantic", limit=5, record=False)
