"""Rank fusion: the native kernels and their pure-Python twins agree exactly."""

from __future__ import annotations

import numpy as np
import pytest

from cortex.errors import InvalidOptionError
from cortex.fusion import Fused, linear, rrf


def assert_fused_equal(a: Fused, b: Fused) -> None:
    np.testing.assert_array_equal(a.ids, b.ids)
    np.testing.assert_array_equal(a.scores, b.scores)  # same bits: same order of operations
    np.testing.assert_array_equal(a.ranks, b.ranks)
    np.testing.assert_array_equal(a.input_scores, b.input_scores)  # NaN == NaN here


def random_lists(rng: np.random.Generator, n_lists: int):
    lists, scores = [], []
    for _ in range(n_lists):
        n = int(rng.integers(0, 30))
        ids = rng.integers(0, 40, size=n)  # overlaps and repeats on purpose
        lists.append(ids.astype(np.int64))
        scores.append(np.round(rng.standard_normal(n), 1))  # rounding makes score ties
    return lists, scores


def test_rrf_is_the_seed_002_formula():
    f = rrf([[10, 20, 30], [30, 40]], [0.5, 0.5], k=60)
    assert f.ids.tolist() == [30, 10, 20, 40]
    assert f.scores[0] == pytest.approx(0.5 / 63 + 0.5 / 61)
    assert f.scores[1] == pytest.approx(0.5 / 61)
    assert f.ranks.tolist() == [[3, 1, 2, -1], [1, -1, -1, 2]]
    assert np.isnan(f.input_scores).all()
    assert len(f) == 4


def test_rrf_ties_break_by_best_rank_then_list_then_id():
    # 1 and 2 both rank 1 once with equal weights: list 0 wins; 3 and 4 tie at rank 2.
    f = rrf([[1, 4], [2, 3]], [1.0, 1.0])
    assert f.ids.tolist() == [1, 2, 4, 3]


def test_rrf_keeps_input_scores_and_alpha_zero_silences_a_list():
    f = rrf([[1, 2], [3, 1]], [1.0, 0.0], scores=[[0.9, 0.8], [7.0, 5.0]])
    assert f.ids.tolist() == [1, 2, 3]
    assert f.scores[2] == 0.0
    assert f.input_scores[1].tolist()[0] == 5.0 and f.input_scores[1].tolist()[2] == 7.0
    assert np.isnan(f.input_scores[1][1])


def test_linear_is_min_max_weighted():
    f = linear([[1, 2, 3], [3, 1]], [[0.9, 0.5, 0.1], [10.0, 5.0]], [0.7, 0.3])
    assert f.ids.tolist() == [1, 2, 3]
    np.testing.assert_allclose(f.scores, [0.7, 0.35, 0.3])
    assert f.input_scores[1].tolist()[2] == 10.0
    # a list of one (or all equal scores) counts fully
    g = linear([[5]], [[0.2]], [1.0])
    assert g.scores.tolist() == [1.0]


@pytest.mark.parametrize("seed", range(40))
def test_native_and_python_agree_on_random_lists(seed):
    rng = np.random.default_rng(seed)
    n_lists = int(rng.integers(1, 4))
    lists, scores = random_lists(rng, n_lists)
    weights = [float(w) for w in rng.choice([0.0, 0.3, 0.5, 1.0], size=n_lists)]
    k = float(rng.choice([0.0, 1.0, 60.0]))
    assert_fused_equal(
        rrf(lists, weights, k, scores=scores, backend="native"),
        rrf(lists, weights, k, scores=scores, backend="python"),
    )
    assert_fused_equal(
        linear(lists, scores, weights, backend="native"),
        linear(lists, scores, weights, backend="python"),
    )


def test_empty_inputs():
    for backend in ("native", "python"):
        f = rrf([], [], backend=backend)
        assert f.ids.shape == (0,) and f.ranks.shape == (0, 0)
        g = linear([[]], [[]], [1.0], backend=backend)
        assert g.ids.shape == (0,) and g.ranks.shape == (1, 0)


@pytest.mark.parametrize("backend", ["native", "python"])
def test_bad_arguments_raise(backend):
    with pytest.raises(InvalidOptionError, match="weights"):
        rrf([[1]], [float("nan")], backend=backend)
    with pytest.raises(InvalidOptionError, match="one weight per list"):
        rrf([[1]], [1.0, 1.0], backend=backend)
    with pytest.raises(InvalidOptionError, match="k must be"):
        rrf([[1]], [1.0], k=-1, backend=backend)
    with pytest.raises(InvalidOptionError, match="NaN or infinite"):
        linear([[1]], [[float("inf")]], [1.0], backend=backend)
    with pytest.raises(InvalidOptionError, match="same length"):
        linear([[1, 2]], [[0.5]], [1.0], backend=backend)
    with pytest.raises(TypeError, match="integers"):
        rrf([[1.5]], [1.0], backend=backend)
    with pytest.raises(ValueError):
        rrf([[1]], [1.0], backend="gpu")  # type: ignore[arg-type]
