"""What a search returns: memories, their facts, and results with every part of their score."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from cortex.ranking import estimate_tokens

__all__ = ["Fact", "MatchType", "Memory", "Result", "Results"]


def from_epoch(value: float | None) -> datetime | None:
    """The UTC datetime of a stored epoch-seconds value."""
    return None if value is None else datetime.fromtimestamp(value, tz=UTC)


def iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


class MatchType(StrEnum):
    """Which retriever found a result."""

    BM25 = "bm25"
    SEMANTIC = "semantic"
    HYBRID = "hybrid"
    FILTER = "filter"  # a query without text: the memory passed the filters, nothing ranked it


@dataclass(frozen=True, slots=True)
class Memory:
    """One stored memory. Timestamps are timezone-aware UTC datetimes."""

    id: int
    content: str
    project: str | None = None
    source_path: str | None = None
    chunk_index: int | None = None
    sector: str | None = None
    tier: str | None = None
    scope: str | None = None
    category: str | None = None
    salience: float = 0.5
    confidence: float = 1.0
    created_at: datetime | None = None
    updated_at: datetime | None = None
    valid_until: datetime | None = None
    superseded_by: int | None = None
    deleted_at: datetime | None = None
    last_accessed: datetime | None = None
    access_count: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "content": self.content,
            "project": self.project,
            "source_path": self.source_path,
            "chunk_index": self.chunk_index,
            "sector": self.sector,
            "tier": self.tier,
            "scope": self.scope,
            "category": self.category,
            # rounded for reading: sums of reinforcements stored before they were rounded
            "salience": round(self.salience, 6),
            "confidence": round(self.confidence, 6),
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
            "valid_until": iso(self.valid_until),
            "superseded_by": self.superseded_by,
            "deleted_at": iso(self.deleted_at),
            "last_accessed": iso(self.last_accessed),
            "access_count": self.access_count,
            "metadata": self.metadata,
        }


@dataclass(frozen=True, slots=True)
class Fact:
    """A fact extracted from a memory; its confidence decays from `last_reinforced` on."""

    id: int
    memory_id: int
    type: str
    content: str
    confidence: float
    decay_rate: float
    last_reinforced: datetime
    effective_confidence: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "memory_id": self.memory_id,
            "type": self.type,
            "content": self.content,
            "confidence": self.confidence,
            "decay_rate": self.decay_rate,
            "last_reinforced": iso(self.last_reinforced),
            "effective_confidence": self.effective_confidence,
        }


def _memory_maker() -> Callable[[tuple[Any, ...]], Memory]:
    """What `memory_of` runs: one slot store per field, unrolled (generated once, the way
    dataclasses generate __init__; a loop over the fields costs ~0.8 us more a memory)."""
    names = Memory.__slots__
    scope: dict[str, Any] = {"new": object.__new__, "Memory": Memory}
    lines = ["def make(values):", "    memory = new(Memory)"]
    for k, name in enumerate(names):
        scope[f"set_{k}"] = getattr(Memory, name).__set__
        lines.append(f"    set_{k}(memory, values[{k}])")
    lines.append("    return memory")
    exec("\n".join(lines), scope)  # fixed text, built from Memory's own fields
    return scope["make"]  # type: ignore[no-any-return]


_make_memory = _memory_maker()
_FIELDS = len(Memory.__slots__)


def memory_of(values: tuple[Any, ...]) -> Memory:
    """The Memory of `values`, every field in field order: what ``Memory(*values)`` makes,
    stored through the slots (a frozen dataclass's __init__ calls object.__setattr__ per
    field: ~4 us a memory, against ~2; a search's page builds 20)."""
    if len(values) != _FIELDS:
        raise ValueError(f"a Memory has {_FIELDS} fields, not {len(values)}")
    return _make_memory(values)


_new = object.__new__


class _Snippet:
    """Result.snippet: given as a string, or as what makes it when it is first read (the
    pipeline's: marking the query's terms costs ~5 us a result, which a caller reading
    only ids and scores need not pay). A data descriptor, so the frozen dataclass's own
    __init__ stores through it."""

    def __get__(self, obj: Any, owner: Any = None) -> str:
        if obj is None:
            return ""  # the field's default
        value = obj.__dict__["_snippet"]
        if not isinstance(value, str):
            value = obj.__dict__["_snippet"] = value()
        return value  # type: ignore[no-any-return]

    def __set__(self, obj: Any, value: str | Callable[[], str]) -> None:
        obj.__dict__["_snippet"] = value


@dataclass(frozen=True)
class Result:
    """One search result (seed 002's Result): the memory and every part of its score.

    `score` is the final score after fusion and boosts, the one results are ranked by.
    `bm25_score` is the keyword score mapped to [0, 1) (0 when keyword search did not find
    the memory); `semantic_score` the cosine similarity (0 when semantic search did not).
    `snippet` is made when first read.
    """

    memory: Memory
    score: float
    bm25_score: float = 0.0
    semantic_score: float = 0.0
    effective_confidence: float = 1.0
    snippet: _Snippet = _Snippet()  # reads as str
    match_type: MatchType = MatchType.BM25
    facts: tuple[Fact, ...] = ()
    source_session: Any = None  # cortex.recall.SessionInfo of the session that created it
    is_superseded: bool = False
    superseded_by: Any = None  # cortex.recall.SupersededBy
    related_memory_count: int = 0
    explain: dict[str, float] | None = None
    context: dict[str, list[dict[str, Any]]] | None = None
    related: dict[str, Any] | None = None  # {"code": [{"ref", "kind", "line"?}, ...]}
    thread: list[dict[str, Any]] | None = None

    @classmethod
    def of(
        cls,
        memory: Memory,
        score: float,
        bm25_score: float,
        semantic_score: float,
        effective_confidence: float,
        snippet: str | Callable[[], str],
        match_type: MatchType,
        facts: tuple[Fact, ...],
        source_session: Any,
        is_superseded: bool,
        superseded_by: Any,
        related_memory_count: int,
        explain: dict[str, float] | None,
        context: dict[str, list[dict[str, Any]]] | None,
        related: dict[str, Any] | None,
        thread: list[dict[str, Any]] | None,
    ) -> Result:
        """What ``Result(...)`` makes of every field (in field order), without the frozen
        dataclass's __init__ (one object.__setattr__ per field: 4.6 us a result against
        1.2 for one update of its __dict__; a search's page builds 20)."""
        result = _new(cls)
        result.__dict__.update(
            memory=memory, score=score, bm25_score=bm25_score, semantic_score=semantic_score,
            effective_confidence=effective_confidence, _snippet=snippet, match_type=match_type,
            facts=facts, source_session=source_session, is_superseded=is_superseded,
            superseded_by=superseded_by, related_memory_count=related_memory_count,
            explain=explain, context=context, related=related, thread=thread,
        )  # fmt: skip
        return result

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.memory.id,
            "score": self.score,
            "bm25_score": self.bm25_score,
            "semantic_score": self.semantic_score,
            "effective_confidence": self.effective_confidence,
            "match_type": str(self.match_type),
            "snippet": self.snippet,
            "source_session": self.source_session.to_dict() if self.source_session else None,
            "is_superseded": self.is_superseded,
            "superseded_by": self.superseded_by.to_dict() if self.superseded_by else None,
            "related_memory_count": self.related_memory_count,
            "memory": self.memory.to_dict(),
            "facts": [f.to_dict() for f in self.facts],
        }
        if self.explain is not None:
            out["explain"] = self.explain
        if self.context is not None:
            out["context"] = self.context
        if self.related is not None:
            out["related"] = self.related
        if self.thread is not None:
            out["thread"] = self.thread
        return out


class Results(list[Result]):
    """The results of one search, best first: a ``list[Result]`` that also says how it ran.

    `mode` is the mode that actually ran (hybrid degrades to keyword without an embedder);
    `rewritten` is the keyword query that ran when the one given was not valid FTS5;
    `notices` are the sentences a user should read (a fallback taken, a degraded mode);
    `hidden` counts candidates that matched but fell below the minimum score or confidence;
    `interpretation` says what the query was understood to say (its time window and how it
    was applied, the text searched, intent, topics; see cortex.interpret). `total` counts
    the matches that passed the thresholds (before the page was cut); `has_more` and
    `next_cursor` lead to the next page; `aggregations` count the matches by project,
    category, session and over time. `suggestions` are follow-up queries offered when the
    search found little (a word corrected from the store's vocabulary, a related term;
    see cortex.suggest).
    """

    __slots__ = (
        "_aggregations",
        "_aggregations_of",
        "_cursor_of",
        "_held",
        "_next_cursor",
        "approximate",
        "documents",
        "has_more",
        "hidden",
        "interpretation",
        "mode",
        "notices",
        "query",
        "rewritten",
        "suggestions",
        "total",
    )

    def __init__(
        self,
        results: list[Result] | tuple[Result, ...] = (),
        *,
        query: str | None = None,
        mode: str = "keyword",
        rewritten: str | None = None,
        notices: tuple[str, ...] = (),
        hidden: int = 0,
        interpretation: dict[str, Any] | None = None,
        total: int | None = None,
        has_more: bool = False,
        next_cursor: str | None = None,
        aggregations: dict[str, Any] | None = None,
        suggestions: tuple[str, ...] = (),
    ) -> None:
        super().__init__(results)
        self.suggestions = suggestions
        self.interpretation = interpretation
        self.total = len(results) if total is None else total
        self.has_more = has_more
        self._next_cursor = next_cursor
        # what makes next_cursor when it is first read (a hash of the options: ~0.1 ms,
        # which a caller that reads only the results need not pay)
        self._cursor_of: Callable[[], str] | None = None
        self._aggregations = aggregations
        # what counts them when first read (the pipeline's: ~40 us over 100 matches)
        self._aggregations_of: Callable[[], dict[str, Any]] | None = None
        self.query = query
        self.mode = mode
        self.rewritten = rewritten
        self.notices = notices
        self.hidden = hidden
        self.documents: list[Any] | None = None
        # how an approximate vector search ran (cortex.ann), None when the search was exact
        self.approximate: dict[str, Any] | None = None
        # words of the query some memory under its filters is known to hold (the
        # keyword search matched them all together): suggestions skip looking them up
        self._held: tuple[str, ...] = ()

    @property
    def aggregations(self) -> dict[str, Any] | None:
        """Counts of the matches (see the class docstring), made when first read."""
        if self._aggregations_of is not None:
            self._aggregations, self._aggregations_of = self._aggregations_of(), None
        return self._aggregations

    @aggregations.setter
    def aggregations(self, value: dict[str, Any] | None) -> None:
        self._aggregations, self._aggregations_of = value, None

    @property
    def next_cursor(self) -> str | None:
        """The cursor of the next page (``Options(cursor=...)``), None when there is none."""
        if self._cursor_of is not None:
            self._next_cursor, self._cursor_of = self._cursor_of(), None
        return self._next_cursor

    @next_cursor.setter
    def next_cursor(self, value: str | None) -> None:
        self._next_cursor, self._cursor_of = value, None

    @property
    def total_found(self) -> int:
        """Seed 004: the matches that passed the thresholds, before the page was cut."""
        return self.total

    @property
    def total_returned(self) -> int:
        """Seed 004: the results in this page."""
        return len(self)

    @property
    def token_estimate(self) -> int:
        """Seed 004: the estimated tokens of the returned memories' text (1.3 a word plus
        10 a result, as ``token_budget`` counts them)."""
        return sum(estimate_tokens(r.memory.content) for r in self)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "query": self.query,
            "mode": self.mode,
            "rewritten": self.rewritten,
            "notices": list(self.notices),
            "hidden": self.hidden,
            "interpretation": self.interpretation,
            "total": self.total,
            "total_found": self.total_found,
            "total_returned": self.total_returned,
            "token_estimate": self.token_estimate,
            "has_more": self.has_more,
            "next_cursor": self.next_cursor,
            "aggregations": self.aggregations,
            "suggestions": list(self.suggestions),
            "results": [r.to_dict() for r in self],
        }
        if self.documents is not None:
            out["documents"] = [d.to_dict() for d in self.documents]
        if self.approximate is not None:
            out["approximate"] = self.approximate
        return out
