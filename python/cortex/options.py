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

__all__ = ["MAX_LIMIT", "Fusion", "Mode", "Options", "Order", "OrderBy", "TimeFilter"]

#: The deepest result a page may start at.
MAX_OFFSET = 100_000
#: The most neighbouring chunks a result carries on each side.
MAX_CONTEXT = 20

#: The largest `limit` a search accepts; a bigger page is a scan, not a search.
MAX_LIMIT = 10_000
#: The default minimum final score in every mode. Scores are calibrated (cortex.search.hits:
#: the same number means the same in every query, mode and store size), so one floor
#: holds everywhere; chosen on the tune split of the agent evaluation set for abstention
#: (eval/README.md). RRF's rank-based scores take no floor.
DEFAULT_MIN_SCORE = 0.2


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


class TimeFilter(StrEnum):
    """What the time words of a query do (cortex.interpret reads them): `hard` searches
    only the window they name, `soft` boosts the memories inside it, `auto` filters hard
    and falls back to soft when the window holds no match (and uses soft for vague words
    like "recently"), `off` searches the words as words."""

    AUTO = "auto"
    HARD = "hard"
    SOFT = "soft"
    OFF = "off"


class Order(StrEnum):
    """The direction of `order_by`: best / newest / most trusted first (desc) or last."""

    DESC = "desc"
    ASC = "asc"


class Fusion(StrEnum):
    """How keyword and semantic candidates are fused in hybrid mode (cortex.search.hits)."""

    RRF = "rrf"
    LINEAR = "linear"
    EVIDENCE = "evidence"


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

    `record` writes, after the ranking is fixed, a recall_log row per result and the access
    count; later rankings do not change unless `reinforce` (seed 000: 0.02) is given, which
    adds it to each returned memory's salience (or call ``Engine.reinforce``). A listing
    without text records nothing; a read-only engine never records. `explain` fills
    ``Result.explain`` with every part of each score.

    `now` is the clock of the search (default: the time it runs): recency, decay and time
    words are measured from it, so a result can be reproduced. `time_filter` says what the
    time words of a query do ("last Tuesday", "昨天"; see :class:`TimeFilter`); an explicit
    `created_since` / `created_until` always wins.

    Pages: `offset` skips that many results; `cursor` (``Results.next_cursor`` of the page
    before) continues a search where it stopped, with the same clock and candidate pool,
    so that following cursors returns every match exactly once while nothing is written.
    `order` reverses `order_by` ("asc": oldest / least relevant first). `context` attaches
    to each result up to that many neighbouring chunks before and after it (its file's
    chunks, or its session's memories in time order).
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
    min_similarity: float | None = None
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
    reinforce: float = 0.0
    explain: bool = False
    now: datetime | None = None
    time_filter: TimeFilter = TimeFilter.AUTO

    offset: int = 0
    cursor: str | None = None
    order: Order = Order.DESC
    context: int = 0

    def __post_init__(self) -> None:
        s = object.__setattr__
        s(self, "mode", _enum(Mode, "mode", self.mode))
        s(self, "fusion", _enum(Fusion, "fusion", self.fusion))
        s(self, "order_by", _enum(OrderBy, "order_by", self.order_by))
        s(self, "time_filter", _enum(TimeFilter, "time_filter", self.time_filter))
        s(self, "order", _enum(Order, "order", self.order))
        for name, top in (("offset", MAX_OFFSET), ("context", MAX_CONTEXT)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
                raise InvalidOptionError(
                    f"{name} must be an integer from 0 to {top}, not {value!r}"
                )
        if self.cursor is not None and (
            not isinstance(self.cursor, str) or not 0 < len(self.cursor) <= 1000
        ):
            raise InvalidOptionError(
                f"cursor must be the next_cursor string of an earlier page, not {self.cursor!r}"[
                    :200
                ]
            )
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
        s(
            self,
            "min_similarity",
            _number("min_similarity", self.min_similarity, lo=-1.0, hi=1.0, optional=True),
        )
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
        s(self, "now", _when("now", self.now))
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
        """The minimum final score for a search that ran in `mode`: `min_score` if set,
        else DEFAULT_MIN_SCORE in every mode but hybrid with RRF (rank-based scores)."""
        if self.min_score is not None:
            return self.min_score
        if mode is Mode.HYBRID and self.fusion is Fusion.RRF:
            return 0.0
        return DEFAULT_MIN_SCORE

    def replace(self, **changes: object) -> Options:
        """A copy with some fields changed (validated like a new object)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]
