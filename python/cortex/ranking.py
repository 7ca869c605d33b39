"""Scores after retrieval: boosts, confidence decay, thresholds, order, limit and budget.

Pure functions over plain values, so that every part of a score can be tested alone and
shown by ``explain``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = [
    "DEFAULT_FACT_DECAY",
    "FACT_DECAY_RATES",
    "RANK_COLUMNS",
    "SECTOR_WEIGHTS",
    "Candidate",
    "RankInfo",
    "effective_confidence",
    "estimate_tokens",
    "fact_confidence",
    "is_dated",
    "recency_factor",
    "salience_factor",
    "temporal_decay",
]

DAY = 86_400.0
LN2 = math.log(2.0)

#: What ranking needs of a memory, selected by every retriever in its own statement.
RANK_COLUMNS = (
    "m.created_at, m.confidence, m.salience, m.sector, m.source_path,"
    " m.superseded_by IS NOT NULL, m.project_id, m.category"
)

#: Seed 000's sector weights: insights and facts up, events down. A memory without a
#: sector (or of another sector) keeps 1.0.
SECTOR_WEIGHTS: dict[str, float] = {
    "reflective": 1.2,
    "semantic": 1.1,
    "procedural": 1.0,
    "emotional": 0.9,
    "episodic": 0.8,
}

#: Default daily decay rates of fact confidence by fact type (used when a fact is added
#: without a rate): identities do not fade, states and times fade within weeks.
FACT_DECAY_RATES: dict[str, float] = {
    "identity": 0.0,
    "config": 0.002,
    "rule": 0.002,
    "preference": 0.003,
    "relationship": 0.003,
    "decision": 0.005,
    "location": 0.005,
    "kv": 0.005,
    "state": 0.02,
    "temporal": 0.05,
}
DEFAULT_FACT_DECAY = 0.01

_DATED = re.compile(r"(?:^|[/\\])(\d{4})-(\d{2})-(\d{2})\.(?:md|markdown)$")


class RankInfo(NamedTuple):
    """The columns of RANK_COLUMNS, in that order. A named tuple: every search builds one
    per candidate (100+), and a tuple is built in a fifth of a frozen dataclass's time."""

    created_at: float
    confidence: float
    salience: float
    sector: str | None
    source_path: str | None
    superseded: bool = False
    project: str | None = None
    category: str | None = None


def is_dated(source_path: str | None) -> bool:
    """Whether a memory comes from a dated note (``2026-11-18.md`` in any folder)."""
    return bool(source_path) and _DATED.search(source_path) is not None  # type: ignore[arg-type]


def temporal_decay(created_at: float, now: float, half_life_days: float) -> float:
    """Seed 001's ``exp(-ln2 / half_life * age_days)`` (1.0 when the half-life is 0)."""
    if half_life_days <= 0:
        return 1.0
    age = max(0.0, (now - created_at) / DAY)
    return math.exp(-LN2 / half_life_days * age)


def salience_factor(salience: float, weight: float) -> float:
    """``1 + w * (salience - 0.5)``: neutral at the default salience 0.5."""
    return 1.0 + weight * (salience - 0.5)


def recency_factor(created_at: float, now: float, weight: float) -> float:
    """Seed 002's recency boost ``1 + w / (1 + days)``; a future date counts as today."""
    days = max(0.0, (now - created_at) / DAY)
    return 1.0 + weight / (1.0 + days)


def fact_confidence(
    confidence: float, decay_rate: float, last_reinforced: float, now: float
) -> float:
    """Seed 002's ``c * exp(-rate * days_since_reinforced)``."""
    days = max(0.0, (now - last_reinforced) / DAY)
    return confidence * math.exp(-decay_rate * days)


def effective_confidence(
    memory_confidence: float, facts: Sequence[tuple[float, float, float]], now: float
) -> float:
    """The mean decayed confidence of a memory's facts ``(confidence, rate, reinforced)``;
    a memory without facts keeps its own stored confidence (1.0 unless it was given one)."""
    if not facts:
        return memory_confidence
    return sum(fact_confidence(c, r, t, now) for c, r, t in facts) / len(facts)


def estimate_tokens(text: str) -> int:
    """Seed 004's estimate: 1.3 tokens a word plus 10 for the framing of a result."""
    return int(len(text.split()) * 1.3 + 10)


@dataclass(slots=True)
class Candidate:
    """A memory on its way through the pipeline, with every part of its score."""

    memory_id: int
    info: RankInfo
    bm25: float = 0.0  # the calibrated keyword score, [0, 1)
    semantic: float = 0.0  # the calibrated semantic score, [0, 1]
    base: float = 0.0  # the retriever's (or fusion's) score before boosts
    # base with only the semantic evidence that stands out of its crowd (pipeline.
    # STANDOUT_GAP; None: the same as base): a search none of whose candidates reaches
    # min_score by it returns nothing
    standout_base: float | None = None
    bm25_raw: float = 0.0  # -bm25() (0: no keyword match)
    cosine: float | None = None  # cosine similarity (None: not scored)
    superseded: float = 1.0
    timeframe: float = 1.0  # the boost of a soft time window
    neighbour: float = 0.0  # the best fused score of an adjacent chunk or turn
    code: float = 0.0  # evidence from a file the query names and the memory references
    # what the relevance counts when the query names something no memory holds
    # (pipeline.unknown_name_factor; 1: it names nothing unknown)
    unknown_name: float = 1.0
    # the query's rare words no memory holds are what its best match ignores: the search
    # does not answer (pipeline.RARE_IGNORED_SHARE)
    ignored: bool = False
    facts: tuple[tuple[Any, ...], ...] = ()  # rows of the memory's facts, read once
    recency: float = 1.0
    decay: float = 1.0
    salience: float = 1.0
    sector: float = 1.0
    effective_confidence: float = 1.0
    score: float = 0.0
    match_type: str | None = None

    @property
    def created_at(self) -> float:
        return self.info.created_at

    @property
    def answer_base(self) -> float:
        """`standout_base` when set, else `base`: what decides whether a search answers."""
        return self.base if self.standout_base is None else self.standout_base

    def explain(self) -> dict[str, float]:
        """Every factor of `score`: ``score = base * recency * temporal_decay * salience *
        sector * effective_confidence * superseded``; `bm25` and `semantic` are the
        calibrated scores `base` fuses, `bm25_raw` and `cosine` what they calibrate."""
        return {
            "bm25_raw": self.bm25_raw,
            "cosine": self.cosine if self.cosine is not None else 0.0,
            "bm25": self.bm25,
            "semantic": self.semantic,
            "base": self.base,
            "standout_base": self.answer_base,
            "recency_boost": self.recency,
            "temporal_decay": self.decay,
            "salience_boost": self.salience,
            "sector_weight": self.sector,
            "effective_confidence": self.effective_confidence,
            "superseded": self.superseded,
            "timeframe": self.timeframe,
            "neighbour": self.neighbour,
            "code": self.code,
            "unknown_name": self.unknown_name,
            "ignored": 1.0 if self.ignored else 0.0,
            "score": self.score,
        }
