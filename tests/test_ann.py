"""The opt-in approximate vector index (cortex.ann, rust/kernels/ann.rs): exact at every
list, exact scores always, stale/damaged files never trusted, later rows and filters
honoured, and never used unless asked."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import cortex
from cortex import ann
from cortex.errors import IndexFormatError, InvalidOptionError
from cortex.vectors import VectorIndex

from .conftest import run_cli

DIM = 64


def clustered(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, DIM)).astype(np.float32)
    x = centres[rng.integers(0, 40, n)] + 0.4 * rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture
def index(tmp_path: Path) -> VectorIndex:
    ix = VectorIndex.create(tmp_path / "vectors", DIM, "test-model")
    ix.append(np.arange(1, 3001), clustered(3000))
    yield ix
    ix.close()


def queries(n: int = 30, seed: int = 1) -> np.ndarray:
    return clustered(n, seed) + 0.05


def test_every_list_probed_gives_the_exact_answer(index: VectorIndex) -> None:
    built = ann.build(index, nlist=32)
    assert built["nlist"] == 32 and built["rows"] == 3000
    for q in queries():
        ids, scores, info = ann.search(index, q, 10, nprobe=32)
        exact_ids, exact_scores = index.search(q, 10)
        assert ids.tolist() == exact_ids.tolist()
        assert scores.tolist() == exact_scores.tolist()
        assert info["approximate"] is False and info["rows_scored"] == 3000


def test_few_lists_are_approximate_and_say_so_with_exact_scores(index: VectorIndex) -> None:
    ann.build(index, nlist=32)
    rows = {i: v for i, v in zip(range(1, 3001), clustered(3000), strict=True)}
    recalls = []
    for q in queries():
        ids, scores, info = ann.search(index, q, 10, nprobe=1)
        assert info["approximate"] is True and info["nprobe"] == 1 and info["nlist"] == 32
        assert info["rows_scored"] < 3000
        exact_ids, _ = index.search(q, 10)
        recalls.append(len(set(ids.tolist()) & set(exact_ids.tolist())) / 10)
        # every score is the exact cosine of the row returned (f16 rounding of the row)
        qn = q / np.linalg.norm(q)
        for i, s in zip(ids.tolist(), scores.tolist(), strict=True):
            assert abs(float(rows[i] @ qn) - s) < 2e-3
    # one list of 32 is a real approximation: some queries lose neighbours, most keep many
    assert min(recalls) < 1.0
    assert np.mean(recalls) > 0.3


def test_not_used_unless_built_and_stale_index_ignored(tmp_path: Path) -> None:
    path = tmp_path / "vectors"
    ix = VectorIndex.create(path, DIM, "test-model")
    ix.append(np.arange(1, 3001), clustered(3000))
    q = queries(1)[0]
    ids, _, info = ann.search(ix, q, 10, nprobe=1)
    assert info["approximate"] is False and "no approximate index" in info["reason"]
    ann.build(ix, nlist=16)
    assert ann.open_for(ix) is not None
    ix.close()
    # the vector file is rebuilt (a new uuid): the old approximate index is stale
    ix = VectorIndex.create(path, DIM, "test-model")
    ix.append(np.arange(1, 3001), clustered(3000, seed=5))
    assert ann.open_for(ix) is None
    ids, _, info = ann.search(ix, q, 10, nprobe=1)
    assert info["approximate"] is False and "stale" in info["reason"]
    exact_ids, _ = ix.search(q, 10)
    assert ids.tolist() == exact_ids.tolist()
    ann.build(ix, nlist=16)  # rebuilt: used again
    assert ann.search(ix, q, 10, nprobe=1)[2]["approximate"] is True
    ix.close()


def test_rows_added_after_the_build_are_found_and_masked_rows_never(tmp_path: Path) -> None:
    ix = VectorIndex.create(
        tmp_path / "vectors",
        DIM,
        "test-model",
    )
    x = clustered(3000)
    ix.close()
    ix = VectorIndex.open(tmp_path / "vectors", writable=True)
    ix.append(np.arange(1, 3001), x)
    ann.build(ix, nlist=32)
    rng = np.random.default_rng(9)
    late = rng.standard_normal((50, DIM)).astype(np.float32)
    ix.append(np.arange(5001, 5051), late)
    for j in (0, 17, 49):
        ids, scores, info = ann.search(ix, late[j], 5, nprobe=1)
        assert info["tail"] == 50 and info["approximate"] is True
        assert ids[0] == 5001 + j and abs(scores[0] - 1.0) < 1e-3
    # a deleted (masked) row is never returned, and a superseded one only as its new row
    q = x[10]
    assert ann.search(ix, q, 1, nprobe=1)[0][0] == 11
    ix.mask([11])
    ids, _, _ = ann.search(ix, q, 10, nprobe=32)
    assert 11 not in ids.tolist()
    ix.append(np.array([12]), -x[11:12])  # memory 12 superseded by its opposite
    ids, scores, _ = ann.search(ix, x[11], 10, nprobe=32)
    assert 12 not in ids.tolist()
    ix.close()


def test_allowed_rows_are_the_only_ones_returned(index: VectorIndex) -> None:
    ann.build(index, nlist=32)
    odd = np.arange(1, 3001, 2)
    few = np.array([7, 300, 1999, 2500])
    for q in queries(10):
        ids, _, info = ann.search(index, q, 10, nprobe=4, allowed=odd)
        assert ids.size == 10 and all(i % 2 == 1 for i in ids.tolist())
        assert info["approximate"] is True
        # fewer allowed rows than the probed lists hold: searched exactly
        ids, scores, info = ann.search(index, q, 10, nprobe=4, allowed=few)
        exact_ids, exact_scores = index.search(q, 10, allowed=few)
        assert info["approximate"] is False
        assert ids.tolist() == exact_ids.tolist() and scores.tolist() == exact_scores.tolist()


@pytest.mark.parametrize("damage", ["flip", "truncate", "header"])
def test_a_damaged_file_is_detected_never_trusted(index: VectorIndex, damage: str) -> None:
    ann.build(index, nlist=32)
    path = ann.ann_path(index.path)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x10
    elif damage == "truncate":
        data = data[: len(data) - 100]
    else:
        data[13] ^= 1  # the dimension field
    path.write_bytes(bytes(data))
    with pytest.raises(IndexFormatError):
        ann.open_for(index)
    q = queries(1)[0]
    ids, _, info = ann.search(index, q, 10, nprobe=1)
    assert info["approximate"] is False and "damaged" in info["reason"]
    assert ids.tolist() == index.search(q, 10)[0].tolist()


def test_bad_arguments_are_typed_errors(index: VectorIndex) -> None:
    ann.build(index, nlist=16)
    with pytest.raises(InvalidOptionError):
        ann.search(index, queries(1)[0], 10, nprobe=0)
    with pytest.raises(InvalidOptionError):
        ann.build(index, nlist=0)
    with pytest.raises(InvalidOptionError):
        cortex.Options(nprobe=8)  # nprobe without approximate is refused, not ignored


TOPICS = [
    "database backups",
    "deploying to production",
    "cats and keyboards",
    "JWT authentication",
    "schema migrations",
    "coffee brewing",
    "rust compilers",
    "vector search",
    "hiking trails",
    "tax returns",
]


@pytest.fixture
def store(tmp_path: Path, embedder) -> cortex.Engine:
    texts = [f"note {i}: about {TOPICS[i % len(TOPICS)]}, detail {i * 7 % 13}" for i in range(300)]
    vecs = embedder.embed_batch(texts)
    engine = cortex.open(tmp_path / "ann.db", embedder=embedder)
    engine.add_many(
        [{"content": t, "project": "a" if i % 2 else "b"} for i, t in enumerate(texts)],
        vectors=vecs,
    )
    yield engine
    engine.close()


def test_engine_search_is_exact_unless_asked(store: cortex.Engine) -> None:
    opts = cortex.Options(mode="semantic", record=False, min_score=0.0)
    exact = store.search("backups of the database", opts)
    assert exact.approximate is None and "approximate" not in exact.to_dict()
    # asked before any build: exact, and the answer says why
    asked = store.search("backups of the database", opts.replace(approximate=True))
    assert asked.approximate is not None and asked.approximate["approximate"] is False
    assert any("exact search ran" in n for n in asked.notices)
    built = store.build_approximate_index(nlist=16)
    assert built["rows"] == 300
    again = store.search("backups of the database", opts)
    assert again.approximate is None  # built, still not used unless asked
    assert [r.memory.id for r in again] == [r.memory.id for r in exact]
    approx = store.search("backups of the database", opts.replace(approximate=True, nprobe=2))
    info = approx.approximate
    assert info is not None and info["approximate"] is True and info["nprobe"] == 2
    assert info["rows_scored"] < 300
    assert any("approximate vector search" in n for n in approx.notices)
    assert approx.to_dict()["approximate"]["nlist"] == 16
    # every list probed: the same answer as the exact search
    full = store.search("backups of the database", opts.replace(approximate=True, nprobe=16))
    assert [r.memory.id for r in full] == [r.memory.id for r in exact]


def test_the_project_wall_holds_in_approximate_search(store: cortex.Engine) -> None:
    store.build_approximate_index(nlist=16)
    for q in ("coffee", "deploying code", "hiking"):
        res = store.search(
            q, mode="semantic", record=False, min_score=0.0, project="a", approximate=True, nprobe=3
        )
        assert res and all(r.memory.project == "a" for r in res)
        assert res.approximate is not None


def test_cli_builds_and_searches_approximately(tmp_path: Path, embedder) -> None:
    db = tmp_path / "cli.db"
    with cortex.open(db, embedder=embedder) as engine:
        texts = [f"memo {i} on {TOPICS[i % len(TOPICS)]}" for i in range(60)]
        engine.add_many([{"content": t} for t in texts], vectors=embedder.embed_batch(texts))
    built = run_cli("--db", str(db), "index", "build", "--approximate", "--nlist", "8", "--json")
    assert built.code == 0, built.err
    assert json.loads(built.out)["nlist"] == 8
    res = run_cli(
        "--db",
        str(db),
        "search",
        "coffee brewing",
        "--approximate",
        "--nprobe",
        "2",
        "--mode",
        "semantic",
        "--json",
    )
    assert res.code == 0, res.err
    out = json.loads(res.out)
    assert out["approximate"]["approximate"] is True and out["approximate"]["nprobe"] == 2
    plain = run_cli("--db", str(db), "search", "coffee brewing", "--mode", "semantic", "--json")
    assert "approximate" not in json.loads(plain.out)


def test_reindex_rebuilds_an_approximate_index_it_made_stale(store: cortex.Engine) -> None:
    store.build_approximate_index(nlist=16)
    index = store._semantic.index()
    before = ann.open_for(index)
    assert before is not None
    done = store.reindex()  # a new vector file (another uuid): the old .ivf would be stale
    assert done["approximate"]["nlist"] == 16 and done["approximate"]["rows"] == 300
    index = store._semantic.index()
    after = ann.open_for(index)
    assert after is not None and after.uuid == index.uuid != before.uuid
