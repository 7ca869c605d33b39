"""Scores after retrieval: boosts, confidence decay, thresholds, order, limit and budget.

Pure functions over plain values, so that every part of a score can be tested alone and
shown by ``explain``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "Candidate",
    "effective_confidence",
    "estimate_tokens",
    "fact_confidence",
    "recency_factor",
]

DAY = 86_400.0


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
    created_at: float
    confidence: float
    bm25: float = 0.0
    semantic: float = 0.0
    base: float = 0.0  # the retriever's (or fusion's) score before boosts
    recency: float = 1.0
    effective_confidence: float = 1.0
    score: float = 0.0
    match_type: str | None = None

    def explain(self) -> dict[str, float]:
        """Every factor of `score`: ``score = base * recency * effective_confidence``."""
        return {
            "bm25": self.bm25,
            "semantic": self.semantic,
            "base": self.base,
            "recency_boost": self.recency,
            "effective_confidence": self.effective_confidence,
            "score": self.score,
        }
