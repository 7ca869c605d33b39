"""The vector index API: the three backends agree, filters, masks, errors."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from cortex import _native
from cortex.errors import CortexError, InvalidOptionError, StorageError
from cortex.vectors import VectorIndex

BACKENDS = ("native", "numpy", "python")


def unit_rows(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture
def index(tmp_path):
    """600 rows of 32-d, memory ids 1000, 1003, 1006, ..."""
    vi = VectorIndex.create(tmp_path / "v.cvx", 32, "test-model")
    ids = np.arange(600, dtype=np.int64) * 3 + 1000
    vi.append(ids, unit_rows(600, 32, 1))
    yield vi
    vi.close()


def assert_same(a, b, atol=2e-5):
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_allclose(a[1], b[1], atol=atol)


def test_backends_agree_with_a_brute_force_reference(index):
    rows = unit_rows(600, 32, 1)
    ids = np.arange(600) * 3 + 1000
    for seed in range(5):
        q = unit_rows(1, 32, 100 + seed)[0]
        want = np.argsort(-(rows.astype(np.float64) @ q), kind="stable")[:10]
        results = [index.search(q, 10, backend=b) for b in BACKENDS]
        for r in results:
            np.testing.assert_array_equal(r[0], ids[want])
            assert r[0].dtype == np.int64 and r[1].dtype == np.float32
            assert np.all(np.diff(r[1]) <= 0)
        assert_same(results[0], results[1])
        assert_same(results[0], results[2])


def test_unnormalised_input_is_normalised_so_scores_are_cosines(tmp_path):
    vi = VectorIndex.create(tmp_path / "v.cvx", 4, "m")
    vi.append([1, 2], np.array([[3, 0, 0, 0], [0, 0, 5, 5]], dtype=np.float32))
    for b in BACKENDS:
        ids, scores = vi.search(np.array([10, 0, 10, 0], dtype=np.float32), 2, backend=b)
        np.testing.assert_array_equal(ids, [1, 2])
        # rows are stored as f16: 1/sqrt(2) rounds to 0.70703125
        half = np.float32(np.float16(np.sqrt(0.5)))
        np.testing.assert_allclose(scores, [np.sqrt(0.5), half * np.sqrt(0.5)], atol=1e-6)


def test_search_batch_equals_single_searches_on_every_backend(index):
    qs = unit_rows(7, 32, 9)
    single = [index.search(q, 5) for q in qs]
    for b in BACKENDS:
        ids, scores = index.search_batch(qs, 5, backend=b)
        assert ids.shape == (7, 5) and scores.shape == (7, 5)
        for j in range(7):
            assert_same((ids[j], scores[j]), single[j])


def test_allowed_restricts_results_to_those_memory_ids(index):
    allowed = np.array([1000, 1003, 1300, 2000, 2797, 5], dtype=np.int64)  # 5 is unknown
    q = unit_rows(1, 32, 5)[0]
    results = [index.search(q, 3, allowed=allowed, backend=b) for b in BACKENDS]
    assert set(results[0][0]) <= set(allowed.tolist())
    assert len(results[0][0]) == 3
    assert_same(results[0], results[1])
    assert_same(results[0], results[2])
    # Order of `allowed` does not matter; an empty one admits nothing.
    assert_same(index.search(q, 3, allowed=allowed[::-1].copy()), results[0])
    for b in BACKENDS:
        assert len(index.search(q, 3, allowed=np.array([], dtype=np.int64), backend=b)[0]) == 0


def test_masked_and_superseded_rows_are_never_returned(index):
    q = unit_rows(1, 32, 5)[0]
    best = index.search(q, 3)[0]
    assert index.mask(best[:2]) == 2
    assert index.mask(best[:2]) == 0, "masking twice is a no-op"
    assert len(index) == 598 and index.rows == 600
    for b in BACKENDS:
        ids, _ = index.search(q, 3, backend=b)
        assert best[0] not in ids and best[1] not in ids
        assert ids[0] == best[2]
    # Re-appending an id masks its old row: the id is found by its new vector.
    index.append([best[2]], -q.reshape(1, -1).copy())
    assert len(index) == 598
    for b in BACKENDS:
        ids, scores = index.search(q, 600, backend=b)
        # -1 to within the f16 rounding of the stored row (2^-11 relative a value)
        assert ids[-1] == best[2] and scores[-1] == pytest.approx(-1.0, abs=2.0**-11)
        assert len(ids) == 598 and len(set(ids.tolist())) == 598


def test_ties_go_to_the_lower_row_on_every_backend(tmp_path):
    vi = VectorIndex.create(tmp_path / "v.cvx", 16, "m")
    base = unit_rows(3, 16, 2)
    rows = np.concatenate([base[[1]], base[[0]], base[[1]], base[[2]], base[[1]]])
    vi.append([50, 40, 30, 20, 10], rows)
    for b in BACKENDS:
        ids, scores = vi.search(base[1].copy(), 3, backend=b)
        np.testing.assert_array_equal(ids, [50, 30, 10])
        assert scores[0] == scores[1] == scores[2]


def test_k_larger_than_the_index_returns_every_live_row(index):
    q = unit_rows(1, 32, 3)[0]
    for b in BACKENDS:
        ids, _ = index.search(q, 10_000, backend=b)
        assert len(ids) == 600 and len(set(ids.tolist())) == 600
    ids, _ = index.search_batch(unit_rows(2, 32, 4), 10_000)
    assert ids.shape == (2, 600)


def test_an_empty_index_returns_empty_results(tmp_path):
    vi = VectorIndex.create(tmp_path / "v.cvx", 8, "m")
    q = unit_rows(1, 8, 1)[0]
    for b in BACKENDS:
        ids, scores = vi.search(q, 5, backend=b)
        assert ids.shape == (0,) and scores.shape == (0,)
    assert vi.search_batch(unit_rows(3, 8, 1), 5)[0].shape == (3, 0)
    assert len(vi) == 0


def test_thread_counts_and_the_quantized_path_give_the_exact_answer(tmp_path):
    vi = VectorIndex.create(tmp_path / "v.cvx", 48, "m")
    vi.append(np.arange(50_000), unit_rows(50_000, 48, 7))
    assert vi.quantized_rows == 50_000
    for q in unit_rows(4, 48, 8):
        exact = vi.search(q, 10, quantized=False, threads=1)
        assert_same(vi.search(q, 10, quantized=False, threads=2), exact, atol=0)
        assert_same(vi.search(q, 10, quantized=True, threads=2), exact, atol=0)
        assert_same(vi.search(q, 10), exact, atol=0)  # automatic: quantized at 50k rows
        assert_same(vi.search(q, 10, backend="numpy"), exact)
    qs = unit_rows(5, 48, 9)
    b_exact = vi.search_batch(qs, 10, quantized=False)
    b_quant = vi.search_batch(qs, 10, quantized=True)
    np.testing.assert_array_equal(b_exact[0], b_quant[0])
    np.testing.assert_array_equal(b_exact[1], b_quant[1])


def test_the_screen_at_384_dimensions_and_the_hybrid_k_matches_the_plain_scan(tmp_path):
    """The single-query screen (int8 scores and their bounds from one kernel, survivors
    rescored four at a time) answers the plain f16 scan's ids, scores and order bit for
    bit at the model's 384 dimensions, at k = 10 and at the hybrid leg's k = 132 (and
    133: a last group of survivors short of four), on one thread or two, with masked
    rows, duplicates and a row count that is not a multiple of four."""
    dim, n = 384, 40_003
    rows = unit_rows(n, dim, 21)
    rows[5::997] = rows[3]  # duplicates: equal scores, lower row first
    vi = VectorIndex.create(tmp_path / "v.cvx", dim, "m")
    vi.append(np.arange(n) * 3 + 1, rows)
    vi.mask(np.arange(0, n, 13) * 3 + 1)
    assert vi.quantized_rows == n
    for q in [rows[3].copy(), *unit_rows(3, dim, 22)]:
        for k in (10, 132, 133):
            want = vi.search(q, k, quantized=False, threads=1)
            assert len(want[0]) == k
            for threads in (1, 2):
                assert_same(vi.search(q, k, quantized=False, threads=threads), want, atol=0)
                assert_same(vi.search(q, k, quantized=True, threads=threads), want, atol=0)


_SCREEN_IN_A_CHILD = """
import sys
import numpy as np
from cortex import _native
from cortex.vectors import VectorIndex

vi = VectorIndex.open(sys.argv[1])
qs = np.load(sys.argv[2])
out = {"kernel": np.array(_native.int8_kernel())}
for i, q in enumerate(qs):
    for k in (10, 132):
        for threads in (1, 2):
            ids, scores = vi.search(q, k, quantized=True, threads=threads)
            out[f"{i}-{k}-{threads}-ids"] = ids
            out[f"{i}-{k}-{threads}-scores"] = scores
np.savez(sys.argv[3], **out)
"""


def test_the_screen_answers_the_same_with_every_int8_kernel(tmp_path):
    """The screen of one query runs the AVX-VNNI kernel with queries at all 127 int8
    levels where the CPU has it, and plain AVX2 elsewhere (or with CORTEX_SIMD=avx2, in
    a child process here) with the most levels its 16-bit sums allow for that query (43
    to 127: spiky and one-hot queries below take more than uniform ones): different
    int8 scores and intervals, the same answer, the plain f16 scan's ids, scores and
    order, on near-ties, exact duplicates and masked rows, one thread or two."""
    import subprocess
    import sys

    dim, n = 384, 20_001
    rng = np.random.default_rng(31)
    rows = unit_rows(n, dim, 30)
    near = unit_rows(1, dim, 32)[0] + 3e-3 * rng.standard_normal((2_001, dim)).astype(np.float32)
    rows[::10] = near / np.linalg.norm(near, axis=1, keepdims=True)
    rows[7::1_000] = rows[0]
    vi = VectorIndex.create(tmp_path / "v.cvx", dim, "m")
    vi.append(np.arange(n) * 2 + 5, rows)
    vi.mask(np.arange(0, n, 17) * 2 + 5)
    vi.close()
    spiky = unit_rows(1, dim, 34)[0]
    spiky[::7] *= 8.0
    hot = rows[3] + np.eye(dim, dtype=np.float32)[5]
    qs = np.vstack([rows[0], unit_rows(1, dim, 32)[0], unit_rows(2, dim, 33), spiky, hot])
    qs = (qs / np.linalg.norm(qs, axis=1, keepdims=True)).astype(np.float32)
    np.save(tmp_path / "q.npy", qs)
    env = {**os.environ, "CORTEX_SIMD": "avx2"}
    subprocess.run(
        [
            sys.executable,
            "-c",
            _SCREEN_IN_A_CHILD,
            str(tmp_path / "v.cvx"),
            str(tmp_path / "q.npy"),
            str(tmp_path / "avx2.npz"),
        ],
        check=True,
        env=env,
    )
    child = np.load(tmp_path / "avx2.npz")
    if _native.simd_level() != "scalar":
        assert str(child["kernel"]) != "avx-vnni"
    vi = VectorIndex.open(tmp_path / "v.cvx")
    for i, q in enumerate(qs):
        for k in (10, 132):
            want = vi.search(q, k, quantized=False, threads=1)
            assert len(want[0]) == k
            for threads in (1, 2):
                got = vi.search(q, k, quantized=True, threads=threads)
                assert_same(got, want, atol=0)
                other = (child[f"{i}-{k}-{threads}-ids"], child[f"{i}-{k}-{threads}-scores"])
                assert_same(other, want, atol=0)


def test_subsets_scan_the_same_on_every_thread_count_and_path(tmp_path):
    """A filtered search (the calibration sample, the rescoring of the other leg's ids,
    an allowed set) answers the same ids and scores bit for bit on one thread or two,
    through the int8 screen or the plain subset scan, whether k covers the subset or
    not (k >= the subset scores every row without screening)."""
    vi = VectorIndex.create(tmp_path / "v.cvx", 48, "m")
    vi.append(np.arange(60_000) * 2 + 7, unit_rows(60_000, 48, 11))
    rng = np.random.default_rng(3)
    for size in (50, 2048, 20_000):  # 20,000 rows split over two threads
        allowed = np.sort(rng.choice(60_000, size, replace=False)) * 2 + 7
        for q in unit_rows(3, 48, size):
            for k in (10, size, size + 5):
                want = vi.search(q, k, allowed=allowed, quantized=False, threads=1)
                assert len(want[0]) == min(k, size)
                for threads in (1, 2):
                    for quantized in (None, True, False):
                        got = vi.search(q, k, allowed=allowed, quantized=quantized, threads=threads)
                        assert_same(got, want, atol=0)


def test_the_int8_screen_is_exact_on_near_ties_duplicates_and_filters(tmp_path):
    """quantized=True returns the f32 scan's ids and scores bit for bit, also where the
    int8 scores cannot tell rows apart (near-duplicates, exact duplicates, masked rows)."""
    dim, n = 64, 30_000
    rng = np.random.default_rng(11)
    base = unit_rows(1, dim, 3)[0]
    rows = base + 1e-4 * rng.standard_normal((n, dim)).astype(np.float32)
    rows[::7] = rows[0]  # exact duplicates: equal scores, lower row first
    vi = VectorIndex.create(tmp_path / "v.cvx", dim, "m")
    vi.append(np.arange(n), rows.astype(np.float32))
    vi.mask(np.arange(0, n, 11))
    allowed = rng.choice(n, size=400, replace=False)
    for q in [base, *unit_rows(3, dim, 5)]:
        q = np.ascontiguousarray(q, dtype=np.float32)
        for k in (1, 10, 500):
            want = vi.search(q, k, quantized=False)
            assert_same(vi.search(q, k, quantized=True), want, atol=0)
            want_f = vi.search(q, k, quantized=False, allowed=allowed)
            assert_same(vi.search(q, k, quantized=True, allowed=allowed), want_f, atol=0)
    qs = np.ascontiguousarray(np.vstack([base, unit_rows(4, dim, 6)]), dtype=np.float32)
    b_exact = vi.search_batch(qs, 20, quantized=False)
    b_quant = vi.search_batch(qs, 20, quantized=True)
    np.testing.assert_array_equal(b_exact[0], b_quant[0])
    np.testing.assert_array_equal(b_exact[1], b_quant[1])


def test_cortex_threads_sets_the_default(monkeypatch):
    monkeypatch.setenv("CORTEX_THREADS", "1")
    assert _native.default_threads() == 1
    monkeypatch.setenv("CORTEX_THREADS", "not a number")
    assert _native.default_threads() == (os.cpu_count() or 1)
    assert _native.simd_level() in ("avx2+fma+f16c", "neon", "scalar")
    assert _native.int8_kernel() in ("avx-vnni", _native.simd_level())


def test_a_reader_sees_appends_after_refresh(tmp_path):
    p = tmp_path / "v.cvx"
    w = VectorIndex.create(p, 8, "m")
    w.append([1, 2], unit_rows(2, 8, 1))
    r = VectorIndex.open(p)
    assert (len(r), r.dim, r.model_id) == (2, 8, "m")
    w.append([3], unit_rows(1, 8, 2))
    q = unit_rows(1, 8, 2)[0]
    for b in BACKENDS:
        assert 3 not in r.search(q, 5, backend=b)[0]
    r.refresh()
    for b in BACKENDS:
        assert r.search(q, 5, backend=b)[0][0] == 3
    w.mask([3])
    assert 3 not in r.search(q, 5)[0], "masks are visible without refresh"


def test_wrong_arguments_raise_typed_errors_with_the_fix(index):
    q = unit_rows(1, 32, 1)[0]
    for b in BACKENDS:
        with pytest.raises(TypeError, match="ascontiguousarray"):
            index.search(q.astype(np.float64), 5, backend=b)
        with pytest.raises(TypeError, match="numpy float32 array"):
            index.search(q.tolist(), 5, backend=b)
        with pytest.raises(ValueError, match=r"C-contiguous.*ascontiguousarray"):
            index.search(np.repeat(q, 2)[::2], 5, backend=b)
        with pytest.raises(InvalidOptionError, match="dimension 31"):
            index.search(q[:31].copy(), 5, backend=b)
        bad = q.copy()
        bad[3] = np.nan
        with pytest.raises(InvalidOptionError, match="NaN"):
            index.search(bad, 5, backend=b)
        with pytest.raises(InvalidOptionError, match="zero length"):
            index.search(np.zeros(32, np.float32), 5, backend=b)
        for k in (0, -1):
            with pytest.raises(InvalidOptionError, match="k must be >= 1"):
                index.search(q, k, backend=b)
        with pytest.raises(InvalidOptionError, match="2 dimension"):
            index.search_batch(q, 5, backend=b)
    with pytest.raises(TypeError):
        index.search(q, 2.5)
    with pytest.raises(InvalidOptionError, match="backend"):
        index.search(q, 5, backend="faiss")  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError, match="threads"):
        index.search(q, 5, threads=0)


def test_the_native_layer_validates_on_its_own(index):
    """Direct callers of cortex._native get the same typed errors."""
    native = index._index
    q = unit_rows(1, 32, 1)[0]
    with pytest.raises(TypeError, match="ascontiguousarray"):
        native.search(q.astype(np.float64), 5)
    with pytest.raises(ValueError, match="C-contiguous"):
        native.search(np.repeat(q, 2)[::2], 5)
    with pytest.raises(InvalidOptionError, match="dimension"):
        native.search(q[:5].copy(), 5)
    with pytest.raises(InvalidOptionError, match="NaN"):
        native.search(np.full(32, np.inf, np.float32), 5)
    with pytest.raises(InvalidOptionError, match="k must be"):
        native.search(q, 0)
    with pytest.raises(InvalidOptionError, match="appears twice"):
        native.append(np.array([1, 1]), unit_rows(2, 32, 1))


def test_append_validates_its_rows(index):
    with pytest.raises(InvalidOptionError, match="NaN or infinite"):
        index.append([1], np.full((1, 32), np.inf, np.float32))
    with pytest.raises(InvalidOptionError, match="zero length"):
        index.append([1], np.zeros((1, 32), np.float32))
    with pytest.raises(InvalidOptionError, match="dimension 16"):
        index.append([1], unit_rows(1, 16, 1))
    with pytest.raises(InvalidOptionError, match="2 ids for 1 vectors"):
        index.append([1, 2], unit_rows(1, 32, 1))
    with pytest.raises(TypeError, match="integers"):
        index.append([1.5], unit_rows(1, 32, 1))
    with pytest.raises(TypeError, match="float32"):
        index.append([1], unit_rows(1, 32, 1).astype(np.float64))
    assert index.rows == 600, "nothing was written by a refused append"


def test_one_writer_at_a_time_and_readers_cannot_write(tmp_path):
    p = tmp_path / "v.cvx"
    w = VectorIndex.create(p, 8, "m")
    with pytest.raises(StorageError, match="one writer"):
        VectorIndex.open(p, writable=True)
    r = VectorIndex.open(p)
    with pytest.raises(CortexError, match="read-only"):
        r.append([1], unit_rows(1, 8, 1))
    with pytest.raises(CortexError, match="read-only"):
        r.mask([1])
    w.close()
    VectorIndex.open(p, writable=True).close()


def test_closed_index_and_missing_file(tmp_path):
    with pytest.raises(StorageError, match="no vector index"):
        VectorIndex.open(tmp_path / "nope.cvx")
    vi = VectorIndex.create(tmp_path / "v.cvx", 8, "m")
    vi.close()
    vi.close()
    with pytest.raises(CortexError, match="closed"):
        vi.search(unit_rows(1, 8, 1)[0], 1)


def test_python_only_mode_reads_the_file_without_the_extension(index, monkeypatch):
    import cortex.vectors as vectors

    q = unit_rows(1, 32, 4)[0]
    want = index.search(q, 5)
    monkeypatch.setattr(vectors, "_native", None)
    ro = VectorIndex.open(index.path)
    assert (len(ro), ro.dim, ro.model_id) == (600, 32, "test-model")
    assert_same(ro.search(q, 5, backend="numpy"), want)
    assert_same(ro.search(q, 5, backend="python"), want)
    with pytest.raises(CortexError, match="not importable"):
        ro.search(q, 5)


@pytest.mark.timeout(60)
def test_concurrent_searches_from_threads_agree(index):
    """Four threads search while the writer appends: bounded by work (a fixed number of
    searches; the append happens when every thread is halfway), never by a clock."""
    qs = unit_rows(8, 32, 11)
    want = [index.search(q, 5) for q in qs]
    extra = unit_rows(1, 32, 12)
    assert all(99_999 not in index.search(q, 5)[0] for q in qs)  # holds before and after
    errors: list[BaseException] = []
    halfway = threading.Barrier(5)  # four searchers and the writer

    def work():
        try:
            for i in range(20):
                if i == 10:
                    halfway.wait()
                for q, w in zip(qs, want, strict=True):
                    assert_same(index.search(q, 5), w, atol=0)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
            halfway.abort()  # nobody waits for a thread that has failed

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        halfway.wait()
    except threading.BrokenBarrierError:  # pragma: no cover - a thread failed: see below
        pass
    else:
        index.append([99_999], extra)  # a writer between searches
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert index.rows == 601
    assert index.search(extra[0], 1)[0].tolist() == [99_999]
