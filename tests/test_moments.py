"""VectorIndex.moments, the semantic calibration's statistics in one native call: the
numbers numpy gives over `search`'s scores of the same memories, to the bit, while the
index changes under the copy of the rows it keeps."""

from __future__ import annotations

import numpy as np
import pytest

from cortex.vectors import VectorIndex


def _rows(n: int, dim: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _numpy(index: VectorIndex, q: np.ndarray, allowed: np.ndarray) -> tuple[int, float, float]:
    """What SemanticRetriever._stats computed before moments: numpy over the scores."""
    _, scores = index.search(q, max(1, len(allowed)), allowed=allowed)
    s = scores.astype(np.float64)
    if len(s) == 0:
        return (0, 0.0, 0.0)
    return (len(s), float(s.mean()), float(s.std()))


@pytest.fixture
def index(tmp_path):  # type: ignore[no-untyped-def]
    vi = VectorIndex.create(tmp_path / "v.cvx", 48, "m")
    vi.append(np.arange(3000, dtype=np.int64) * 2 + 7, _rows(3000, 48, 1))
    yield vi
    vi.close()


@pytest.mark.parametrize("size", [1, 5, 8, 100, 128, 129, 777, 2048])
def test_moments_are_numpys_to_the_bit(index: VectorIndex, size: int) -> None:
    rng = np.random.default_rng(size)
    ids = np.sort(rng.choice(np.arange(3000) * 2 + 7, size, replace=False)).astype(np.int64)
    for q in _rows(20, 48, size + 1):
        assert index.moments(q, ids) == _numpy(index, q, ids)
    # any order, ids the index does not hold, none at all
    mixed = np.concatenate([rng.permutation(ids), [1, 10**9]]).astype(np.int64)
    q = _rows(1, 48, 99)[0]
    assert index.moments(q, mixed) == _numpy(index, q, mixed)
    assert index.moments(q, np.array([1, 3], dtype=np.int64)) == (0, 0.0, 0.0)


def test_the_kept_copy_follows_deletions_and_appends(index: VectorIndex) -> None:
    sample = np.arange(0, 3000, 3, dtype=np.int64) * 2 + 7
    q = _rows(1, 48, 5)[0]
    first = index.moments(q, sample)
    assert first == _numpy(index, q, sample)
    assert index.mask(sample[:100]) == 100  # deleted: the copy holds them, not live
    after = index.moments(q, sample)
    assert after == _numpy(index, q, sample) and after is not None and after[0] == first[0] - 100
    new_ids = np.arange(10_000, 10_040, dtype=np.int64)
    index.append(new_ids, _rows(40, 48, 6))  # the file grew: the copy is read again
    grown = np.concatenate([sample, new_ids])
    assert index.moments(q, grown) == _numpy(index, q, grown)
    assert index.moments(q, sample) == after


def test_an_updated_memory_is_counted_once(index: VectorIndex) -> None:
    """Re-appending an id (an updated memory) masks its old row, which stays in the file
    until a compaction: the sample counts the live row only, as `search` does, and its
    copy stays in use (a sample of 2,048 memories nearly always holds an edited one)."""
    q = _rows(1, 48, 8)[0]
    ids = np.array([7, 9, 11], dtype=np.int64)
    index.append(np.array([9], dtype=np.int64), _rows(1, 48, 9))
    assert index.moments(q, ids) == _numpy(index, q, ids)
    assert index.moments(q, ids)[0] == 3
    assert index.moments(q, ids[::2]) == _numpy(index, q, ids[::2])


def test_several_samples_in_turn(index: VectorIndex) -> None:
    """More sets than the copies kept (a store's sample and several projects'), asked in
    turn: every answer is numpy's."""
    rng = np.random.default_rng(3)
    sets = [
        np.sort(rng.choice(np.arange(3000) * 2 + 7, 300 + 50 * j, replace=False)).astype(np.int64)
        for j in range(6)
    ]
    for q in _rows(4, 48, 12):
        for ids in sets + sets[::-1]:
            assert index.moments(q, ids) == _numpy(index, q, ids)
