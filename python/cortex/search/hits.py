"""What retrievers return, the protocol they implement, and how their scores are calibrated.

A retriever (the keyword leg, the semantic leg; one pair per storage backend) takes a
:class:`~cortex.search.plan.Plan` and the options and returns a :class:`Leg`: hits best
first, each with a *calibrated* score in [0, 1] beside the retriever's raw measure.
Calibrated means the same number means the same thing in every query, mode and store
size, so that one ``min_score`` holds everywhere and fusion adds like with like:

- **keyword**: BM25 divided by the most the query's terms can give a document that holds
  each of them once at average length (the sum of the terms' IDFs, exactly as FTS5
  weighs them). That ratio is the IDF-weighted share of the query a memory holds, with
  BM25's term-frequency saturation and length normalisation; it does not depend on how
  many memories the store holds, and it survives FTS5's IDF clamp (a term found in over
  half of a small store weighs 1e-6 in both the score and the bound). Mapped to [0, 1)
  by ``1 - exp(-KEYWORD_SLOPE * ratio)``.
- **semantic**: the cosine as a z-score against the query's own similarity distribution
  over the store (the mean and spread of its cosine with every memory, or a fixed
  sample of them), shrunk towards the model's typical distribution in small stores, then
  a logistic. A paraphrase at cosine 0.2 stands out in a store where the query's mean
  similarity is 0.05; an unrelated note at 0.21 in a store of near neighbours does not.

Both constants were chosen on the tune split of the agent evaluation set and checked on
SciFact's train split (eval/README.md, benches/tune_fusion.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cortex.options import Options
from cortex.ranking import RankInfo
from cortex.search.plan import Plan

__all__ = [
    "KEYWORD_SLOPE",
    "SEMANTIC_MID",
    "SEMANTIC_SLOPE",
    "Hit",
    "KeywordRetriever",
    "Leg",
    "Retriever",
    "combine",
    "keyword_score",
    "keyword_scores",
    "semantic_score",
    "semantic_scores",
]

#: ``1 - exp(-KEYWORD_SLOPE * ratio)``: a memory holding every query term once at average
#: length (ratio 1) scores 0.80; half the query's weight 0.55.
KEYWORD_SLOPE = 1.6
#: The semantic logistic's midpoint (z-score that maps to 0.5) and slope.
SEMANTIC_MID = 2.0
SEMANTIC_SLOPE = 1.0
#: The model's typical query-to-memory cosine distribution (all-MiniLM-L6-v2 on short
#: notes), and how many memories' worth of weight it carries against a store's own.
PRIOR_MEAN, PRIOR_SD, PRIOR_WEIGHT = 0.08, 0.08, 20.0
MIN_SD = 0.03


def keyword_score(ratio: float, slope: float | None = None) -> float:
    """The calibrated keyword score of a BM25/bound `ratio` (>= 0)."""
    return 1.0 - math.exp(-(KEYWORD_SLOPE if slope is None else slope) * max(0.0, ratio))


def semantic_score(
    cosine: float, mean: float, sd: float, mid: float | None = None, slope: float | None = None
) -> float:
    """The calibrated semantic score of `cosine` given the query's distribution."""
    z = (cosine - mean) / max(sd, MIN_SD)
    mid = SEMANTIC_MID if mid is None else mid
    slope = SEMANTIC_SLOPE if slope is None else slope
    return 1.0 / (1.0 + math.exp(-slope * (z - mid)))


def keyword_scores(raws: Sequence[float], bound: float) -> list[float]:
    """keyword_score of each BM25 in `raws` against the query's `bound` (the sum of its
    terms' IDFs; not positive: 0), the same arithmetic without a call per score (the
    native index's rank_page computes the same in Rust, rank::keyword_score)."""
    if bound <= 0:
        return [keyword_score(0.0)] * len(raws)
    exp, slope = math.exp, -KEYWORD_SLOPE
    return [1.0 - exp(slope * max(0.0, r / bound)) for r in raws]


def semantic_scores(cosines: Sequence[float], mean: float, sd: float) -> list[float]:
    """semantic_score of each of `cosines` (default midpoint and slope), the same
    arithmetic without a call per score."""
    exp, spread = math.exp, max(sd, MIN_SD)
    mid, slope = SEMANTIC_MID, -SEMANTIC_SLOPE
    return [1.0 / (1.0 + exp(slope * ((c - mean) / spread - mid))) for c in cosines]


def combine(keyword: float, semantic: float, alpha: float, fusion: str) -> float:
    """The fused score of a memory scored on both legs (calibrated scores in [0, 1]).

    - ``linear``: ``(1 - alpha) * keyword + alpha * semantic``;
    - ``evidence``: the two scores as independent evidence of relevance, weighted:
      ``1 - (1 - keyword)^(2 (1 - alpha)) * (1 - semantic)^(2 alpha)``. Strong evidence
      from either leg stands on its own (a paraphrase no keyword matches is not halved),
      and agreement adds up.
    """
    if fusion == "evidence":
        k = min(max(keyword, 0.0), 1.0 - 1e-12)
        s = min(max(semantic, 0.0), 1.0 - 1e-12)
        rest: float = (1.0 - k) ** (2.0 * (1.0 - alpha)) * (1.0 - s) ** (2.0 * alpha)
        return 1.0 - rest
    return (1.0 - alpha) * keyword + alpha * semantic


def shrunk_stats(n: int, mean: float, sd: float) -> tuple[float, float]:
    """The mean and spread of a query's cosines over `n` memories, shrunk towards the
    model's prior (a store of three memories says little about what is unusual)."""
    w = n / (n + PRIOR_WEIGHT)
    m = w * mean + (1 - w) * PRIOR_MEAN
    var = w * (sd * sd + (mean - m) ** 2) + (1 - w) * (PRIOR_SD**2 + (PRIOR_MEAN - m) ** 2)
    return m, math.sqrt(max(var, 0.0))


@dataclass(slots=True)
class Hit:
    """One memory a retriever found: its calibrated score, the retriever's raw measure
    (BM25 > 0, cosine), and what ranking needs of the memory."""

    memory_id: int
    score: float
    raw: float
    info: RankInfo


@dataclass(slots=True)
class Leg:
    """What one retriever returned for one search."""

    hits: list[Hit] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    rewritten: str | None = None  # the keyword expression, when not the query as typed
    terms: list[str] = field(default_factory=list)  # what snippets highlight
    tier: str = "none"
    state: Any = None  # the retriever's own, for rescore (the query vector, the expression)
    approximate: dict[str, Any] | None = None  # how an approximate search ran (cortex.ann)


class Retriever(Protocol):
    """One leg of the search pipeline over one storage backend."""

    def retrieve(self, plan: Plan, opts: Options, allowed: Any = None) -> Leg:
        """Up to ``plan.pool`` hits under the filters of `opts`, best first. `allowed`:
        the sorted ids the filters admit, when the store computed them (else None: the
        retriever applies `opts` itself)."""
        ...

    def rescore(
        self, plan: Plan, opts: Options, leg: Leg, ids: Sequence[int]
    ) -> dict[int, tuple[float, float]]:
        """(calibrated score, raw measure) of memories the other leg found and this one
        did not return; a memory it gives nothing is left out. `leg` is this
        retriever's own answer to the same search."""
        ...


class KeywordRetriever(Retriever, Protocol):
    """The keyword leg: a Retriever that can also say which words the store lacks.

    Optionally (looked up with getattr, as `verify` on the semantic leg) it has
    ``share(leg, words) -> float | None``: the part of the query's keyword weight (the sum
    of its terms' IDFs) that `words` carry; the pipeline then discounts a query naming
    something no memory holds by that share (pipeline.unknown_name_factor), else by a flat
    factor; and ``near(words, opts) -> set[str]``: the words a memory holds a near spelling
    of (misspellings, never counted as names: plan.RARE_WORD_RANK). The semantic leg may
    have ``cosines_of(text, ids)``: the cosines of another query text to memories (the
    pipeline's check that a best match reflects the query's rare words, _ignored)."""

    def absent(self, words: Sequence[str], opts: Options, allowed: Any = None) -> list[str]:
        """The `words` that no memory under `opts`'s filters (or in `allowed`) holds."""
        ...
