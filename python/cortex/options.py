"""Search options: one frozen, keyword-only dataclass whose defaults are the documented defaults.

The defaults are those of the Go engine's ``DefaultOptions()`` (seed 002): hybrid mode, limit
20, minimum effective confidence 0.1, alpha 0.5, recency weight 0.1, facts included. Every
field is validated when the object is built, so a bad value fails where it was written, with
an :class:`~cortex.errors.InvalidOptionError` that names the field and the fix.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from types import MappingProxyType

from cortex import validate
from cortex.errors import InvalidOptionError

__all__ = ["MAX_LIMIT", "Fusion", "Mode", "Options", "OrderBy"]

#: The largest `limit` a search accepts; a bigger page is a scan, not a search.
MAX_LIMIT = 10_000
#: The default minimum score of hybrid search: on SciFact's train split no relevant
#: top-10 result of the default fusion scored below 0.2 (benches/tune_fusion.py).
HYBRID_MIN_SCORE = 0.1


class Mode(StrEnum):
    """How a query is matched: by keyword (BM25), by meaning (embeddings), or both fused."""

    KEYWORD = "keyword"
    SEMANTIC = "semantic"
    HYBRID = "hybrid"


class OrderBy(StrEnum):
    """The order of the returned results."""

    RELEVANCE = "relevance"
    RECENCY = "recency"
    CONFIDENCE = "confidence"


class Fusion(StrEnum):
    """How keyword and semantic candidates are fused in hybrid mode."""

    RRF = "rrf"
    LINEAR = "linear"


def _enum(cls: type[StrEnum], name: str, value: object) -> StrEnum:
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        try:
            return cls(value.strip().lower())
        except ValueError:
            pass
    choices = ", ".join(repr(m.value) for m in cls)  # type: ignore[attr-defined]
    raise InvalidOptionError(f"{name} must be one of {choices}, not {value!r}")


def _number(
    name: str,
    value: object,
    *,
    lo: float | None = None,
    hi: float | None = None,
    optional: bool = False,
) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidOptionError(f"{name} must be a number, not {value!r}")
    try:
        v = float(value)
    except OverflowError:  # an int beyond float (10**400): refused, never raised raw
        raise InvalidOptionError(f"{name} is too large a number") from None
    if not math.isfinite(v):
        raise InvalidOptionError(f"{name} must be a finite number, not {value!r}")
    if lo is not None and v < lo:
        raise InvalidOptionError(f"{name} must be >= {lo}, not {value!r}")
    if hi is not None and v > hi:
        raise InvalidOptionError(f"{name} must be <= {hi}, not {value!r}")
    return v


def _text(name: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidOptionError(f"{name} must be a string, not {type(value).__name__}")
    if "\x00" in value:
        raise InvalidOptionError(f"{name} must not contain NUL bytes")
    return validate.check_text(name, value)  # lone surrogates: typed, not UnicodeEncodeError


def _when(name: str, value: object) -> datetime | None:
    moment = _moment(name, value)
    if moment is not None:
        try:  # year 1 with a positive offset has no epoch seconds: typed, not OverflowError
            moment.timestamp()
        except (OverflowError, ValueError, OSError):
            raise InvalidOptionError(f"{name} {value!r} is out of range") from None
    return moment


def _moment(name: str, value: object) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidOptionError(
                f"{name} must be an ISO 8601 date or datetime such as 2026-01-31, not {value!r}"
            ) from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    raise InvalidOptionError(f"{name} must be a datetime or an ISO 8601 string, not {value!r}")


@dataclass(frozen=True, kw_only=True, slots=True)
class Options:
    """What to search for and how. Build with keywords; every field has its documented default.

    Filters narrow the memories a search may return; a `project` filter is a wall: no result
    ever comes from another project when one is given. `scope` and `source_prefix` match by
    prefix when `scope` ends with ``*`` (``"project:hydra*"``) and always for `source_prefix`.

    Boosts multiply the retriever's score: recency ``1 + recency_weight / (1 + days)``;
    temporal decay ``exp(-ln2 / half_life_days * age)`` for memories of dated notes
    (``YYYY-MM-DD.md``; 0 turns it off); salience ``1 + salience_weight * (salience - 0.5)``;
    the sector's weight (``sector_weights``, default seed 000's; ``{}`` turns it off); and
    the effective confidence. `min_score` applies after all of them.

    `record` writes, after the ranking is fixed, a recall_log row per result, the access
    count, and reinforces each returned memory's salience by `reinforce` (seed 000: 0.02);
    a read-only engine never records. `explain` fills ``Result.explain`` with every part
    of each score.
    """

    mode: Mode = Mode.HYBRID
    limit: int = 20
    min_confidence: float = 0.1
    alpha: float = 0.5
    recency_weight: float = 0.1
    include_facts: bool = True
    session_id: str | None = None
    lens: str | None = None

    fusion: Fusion = Fusion.LINEAR
    rrf_k: float = 60.0
    min_score: float | None = None
    min_similarity: float = 0.3
    order_by: OrderBy = OrderBy.RELEVANCE
    token_budget: int | None = None

    project: str | None = None
    session: str | None = None
    sector: str | None = None
    tier: str | None = None
    scope: str | None = None
    category: str | None = None
    source_prefix: str | None = None
    min_salience: float | None = None
    created_since: datetime | None = None
    created_until: datetime | None = None
    include_superseded: bool = False

    half_life_days: float = 30.0
    salience_weight: float = 0.2
    sector_weights: Mapping[str, float] | None = None

    record: bool = True
    reinforce: float = 0.02
    explain: bool = False

    def __post_init__(self) -> None:
        s = object.__setattr__
        s(self, "mode", _enum(Mode, "mode", self.mode))
        s(self, "fusion", _enum(Fusion, "fusion", self.fusion))
        s(self, "order_by", _enum(OrderBy, "order_by", self.order_by))
        if isinstance(self.limit, bool) or not isinstance(self.limit, int):
            raise InvalidOptionError(f"limit must be an integer, not {self.limit!r}")
        if not 1 <= self.limit <= MAX_LIMIT:
            raise InvalidOptionError(f"limit must be between 1 and {MAX_LIMIT}, not {self.limit}")
        if self.token_budget is not None and (
            isinstance(self.token_budget, bool)
            or not isinstance(self.token_budget, int)
            or self.token_budget < 1
        ):
            raise InvalidOptionError(
                f"token_budget must be a positive integer or None, not {self.token_budget!r}"
            )
        s(self, "min_confidence", _number("min_confidence", self.min_confidence, lo=0.0, hi=1.0))
        s(self, "alpha", _number("alpha", self.alpha, lo=0.0, hi=1.0))
        s(self, "recency_weight", _number("recency_weight", self.recency_weight, lo=0.0))
        s(self, "rrf_k", _number("rrf_k", self.rrf_k, lo=0.0))
        s(self, "min_score", _number("min_score", self.min_score, lo=0.0, optional=True))
        s(self, "min_similarity", _number("min_similarity", self.min_similarity, lo=-1.0, hi=1.0))
        s(
            self,
            "min_salience",
            _number("min_salience", self.min_salience, lo=0.0, hi=1.0, optional=True),
        )
        for name in (
            "session_id",
            "lens",
            "project",
            "session",
            "sector",
            "tier",
            "scope",
            "category",
            "source_prefix",
        ):
            s(self, name, _text(name, getattr(self, name)))
        s(self, "created_since", _when("created_since", self.created_since))
        s(self, "created_until", _when("created_until", self.created_until))
        s(self, "reinforce", _number("reinforce", self.reinforce, lo=0.0, hi=1.0))
        s(self, "half_life_days", _number("half_life_days", self.half_life_days, lo=0.0))
        s(self, "salience_weight", _number("salience_weight", self.salience_weight, lo=0.0, hi=2.0))
        if self.sector_weights is not None:
            if not isinstance(self.sector_weights, Mapping):
                raise InvalidOptionError("sector_weights must be a mapping of sector -> weight")
            s(
                self,
                "sector_weights",
                MappingProxyType(
                    {
                        str(k): float(_number(f"sector_weights[{k!r}]", v, lo=0.0))  # type: ignore[arg-type]
                        for k, v in self.sector_weights.items()
                    }
                ),
            )
        for name in ("include_facts", "include_superseded", "record", "explain"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidOptionError(f"{name} must be True or False")

    def threshold(self, mode: Mode) -> float:
        """The minimum final score for a search that ran in `mode`: `min_score` if set, else
        0.1 for hybrid with linear fusion (its scores are absolute, see README), and 0 for
        RRF (rank-based scores), keyword and semantic (whose own floors are a match at all
        and `min_similarity`)."""
        if self.min_score is not None:
            return self.min_score
        # RRF scores are rank-based (at most ~0.033 with k = 60): no absolute floor applies.
        linear = mode is Mode.HYBRID and self.fusion is Fusion.LINEAR
        return HYBRID_MIN_SCORE if linear else 0.0

    def replace(self, **changes: object) -> Options:
        """A copy with some fields changed (validated like a new object)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]
