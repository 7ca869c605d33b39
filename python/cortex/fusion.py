"""Rank fusion: Reciprocal Rank Fusion (seed 002) and linear fusion (seed 001).

Each function takes ranked lists of memory ids (best first) and returns a
:class:`Fused`: the fused order, the fused scores, and for every fused id its
rank and its score in each input list, so the caller can explain a result or
keep the keyword and semantic scores.

- ``rrf``: ``score(d) = sum_i w_i / (k + rank_i(d))``, rank starting at 1,
  ``k = 60`` by default; a list that does not hold ``d`` adds nothing.
- ``linear``: each list's scores are min-max normalised to [0, 1]
  (``(s - min) / (max - min)``; a list whose scores are all equal maps to 1.0),
  then ``score(d) = sum_i w_i * norm_i(d)``; absent adds nothing. With seed 001's
  weights ``(0.7, 0.3)`` for (vector, keyword) this is its hybrid score. BM25 is
  "lower is better" in SQLite: pass keyword scores already mapped to higher-is-better.

Ties (equal fused score) go to the id with the best rank in any list, then to
the earlier list holding that rank, then to the lower id: deterministic and
independent of hashing. A repeated id within one list keeps its first rank.
The native kernels and the pure-Python twins here accumulate in float64 in
list order and return identical results (tests hold them to it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from cortex._lazy import LazyModule
from cortex.errors import InvalidOptionError

if TYPE_CHECKING:
    import numpy as np
else:  # imported when a vector is first touched (start-up of keyword-only commands)
    np = LazyModule("numpy")

try:
    from cortex import _native
except ImportError:  # pragma: no cover - only without the compiled extension
    _native = None  # type: ignore[assignment]

__all__ = ["Fused", "linear", "rrf"]


@dataclass(frozen=True)
class Fused:
    """A fused ranking.

    ``ids`` (n,) int64, best first; ``scores`` (n,) float64; ``ranks`` (lists, n)
    int64, the 1-based rank of ``ids[j]`` in list ``i`` or -1 when absent;
    ``input_scores`` (lists, n) float64, its score in list ``i`` or NaN when
    absent (or when no scores were given to ``rrf``).
    """

    ids: np.ndarray
    scores: np.ndarray
    ranks: np.ndarray
    input_scores: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


def _ids_list(x: Any) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1:
        raise InvalidOptionError(f"each id list must be 1-d, got shape {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"ids must be integers, got {a.dtype}; use np.asarray(ids, np.int64)")
    return np.ascontiguousarray(a, dtype=np.int64)


def _score_list(x: Any) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 1:
        raise InvalidOptionError(f"each score list must be 1-d, got shape {a.shape}")
    return np.ascontiguousarray(a, dtype=np.float64)


def _check_weights(weights: Sequence[float], n: int) -> list[float]:
    w = [float(x) for x in weights]
    if len(w) != n:
        raise InvalidOptionError(f"got {n} lists but {len(w)} weights; pass one weight per list")
    for x in w:
        if not np.isfinite(x) or x < 0:
            raise InvalidOptionError(f"weights must be finite and >= 0, got {x}")
    return w


def _check_scores(lists: list[np.ndarray], scores: list[np.ndarray], finite: bool) -> None:
    if len(scores) != len(lists):
        raise InvalidOptionError(
            f"got {len(lists)} id lists but {len(scores)} score lists; "
            "pass one score list per id list"
        )
    for i, (ids, s) in enumerate(zip(lists, scores, strict=True)):
        if len(ids) != len(s):
            raise InvalidOptionError(
                f"list {i} has {len(ids)} ids but {len(s)} scores; they must be the same length"
            )
        if finite and not np.isfinite(s).all():
            raise InvalidOptionError(f"list {i} has a NaN or infinite score")


def _from_native(d: dict[str, np.ndarray]) -> Fused:
    return Fused(d["ids"], d["scores"], d["ranks"], d["input_scores"])


def rrf(
    lists: Sequence[Any],
    weights: Sequence[float],
    k: float = 60.0,
    *,
    scores: Sequence[Any] | None = None,
    backend: Literal["native", "python"] = "native",
) -> Fused:
    """Reciprocal Rank Fusion of ranked id lists (best first), one weight per list.

    ``scores`` (optional, one float list per id list) are carried through into
    ``Fused.input_scores``; they do not change the fused order.
    """
    id_lists = [_ids_list(x) for x in lists]
    w = _check_weights(weights, len(id_lists))
    k = float(k)
    if not np.isfinite(k) or k < 0:
        raise InvalidOptionError(f"k must be finite and >= 0 (default 60), got {k}")
    score_lists = None if scores is None else [_score_list(s) for s in scores]
    if score_lists is not None:
        _check_scores(id_lists, score_lists, finite=False)
    if backend == "native" and _native is not None:
        return _from_native(_native.rrf(id_lists, w, k, score_lists))
    if backend not in ("native", "python"):
        raise InvalidOptionError(f"backend must be 'native' or 'python', got {backend!r}")
    return _fuse_python(id_lists, score_lists, w, lambda wi, rank, _norm: wi / (k + rank))


def linear(
    lists_ids: Sequence[Any],
    lists_scores: Sequence[Any],
    weights: Sequence[float],
    *,
    backend: Literal["native", "python"] = "native",
) -> Fused:
    """Linear fusion of min-max normalised scores (higher is better in every list)."""
    id_lists = [_ids_list(x) for x in lists_ids]
    score_lists = [_score_list(s) for s in lists_scores]
    w = _check_weights(weights, len(id_lists))
    _check_scores(id_lists, score_lists, finite=True)
    if backend == "native" and _native is not None:
        return _from_native(_native.linear(id_lists, score_lists, w))
    if backend not in ("native", "python"):
        raise InvalidOptionError(f"backend must be 'native' or 'python', got {backend!r}")
    return _fuse_python(id_lists, score_lists, w, lambda wi, _rank, norm: wi * norm)


def _minmax(s: list[float]) -> list[float]:
    if not s:
        return []
    lo, hi = min(s), max(s)
    span = hi - lo
    return [(v - lo) / span if span > 0 else 1.0 for v in s]


def _fuse_python(
    id_lists: list[np.ndarray],
    score_lists: list[np.ndarray] | None,
    weights: list[float],
    term: Any,
) -> Fused:
    """The pure-Python twin of rust/kernels/fusion.rs (same order of operations)."""
    order: list[int] = []
    seen: set[int] = set()
    rank: list[dict[int, int]] = []
    raw: list[dict[int, float]] = []
    norm: list[dict[int, float]] = []
    for li, ids in enumerate(id_lists):
        ids_l = ids.tolist()
        s_l = score_lists[li].tolist() if score_lists is not None else None
        n_l = _minmax(s_l) if s_l is not None else None
        r_map: dict[int, int] = {}
        s_map: dict[int, float] = {}
        m_map: dict[int, float] = {}
        for pos, memory_id in enumerate(ids_l):
            if memory_id not in seen:
                seen.add(memory_id)
                order.append(memory_id)
            if memory_id not in r_map:
                r_map[memory_id] = pos + 1
                if s_l is not None and n_l is not None:
                    s_map[memory_id] = s_l[pos]
                    m_map[memory_id] = n_l[pos]
        rank.append(r_map)
        raw.append(s_map)
        norm.append(m_map)

    def fused(memory_id: int) -> float:
        total = 0.0
        for li, wi in enumerate(weights):
            r = rank[li].get(memory_id)
            if r is not None:
                total += term(wi, float(r), norm[li].get(memory_id, 0.0))
        return total

    def key(memory_id: int) -> tuple[float, int, int, int]:
        best_rank, best_list = 2**63 - 1, 2**63 - 1
        for li in range(len(id_lists)):
            r = rank[li].get(memory_id)
            if r is not None and r < best_rank:
                best_rank, best_list = r, li
        return (-fused(memory_id), best_rank, best_list, memory_id)

    ranked = sorted(order, key=key)
    n, nl = len(ranked), len(id_lists)
    ranks = np.full((nl, n), -1, dtype=np.int64)
    inputs = np.full((nl, n), np.nan, dtype=np.float64)
    for j, memory_id in enumerate(ranked):
        for li in range(nl):
            if memory_id in rank[li]:
                ranks[li, j] = rank[li][memory_id]
            if memory_id in raw[li]:
                inputs[li, j] = raw[li][memory_id]
    return Fused(
        ids=np.array(ranked, dtype=np.int64),
        scores=np.array([fused(i) for i in ranked], dtype=np.float64),
        ranks=ranks,
        input_scores=inputs,
    )
