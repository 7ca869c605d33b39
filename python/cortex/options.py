"""Search options: one frozen, keyword-only dataclass whose defaults are the documented defaults.

The defaults are those of the Go engine's ``DefaultOptions()`` (seed 002): hybrid mode, limit
20, minimum effective confidence 0.1, alpha 0.5, recency weight 0.1, facts included. Every
field is validated when the object is built, so a bad value fails where it was written, with
an :class:`~cortex.errors.InvalidOptionError` that names the field and the fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin, get_type_hints

from cortex import validate
from cortex.errors import InvalidOptionError

__all__ = [
    "MAX_LIMIT",
    "Fusion",
    "FusionArg",
    "Mode",
    "ModeArg",
    "OptionSpec",
    "Options",
    "Order",
    "OrderArg",
    "OrderBy",
    "OrderByArg",
    "TimeFilter",
    "TimeFilterArg",
    "option",
    "option_specs",
]

#: The largest `limit` a search accepts; a bigger page is a scan, not a search.
MAX_LIMIT = 10_000
#: The deepest result a page may start at.
MAX_OFFSET = 100_000
#: The most neighbouring chunks a result carries on each side.
MAX_CONTEXT = 20
#: The largest token budget of one result's session thread.
MAX_THREAD_TOKENS = 100_000

#: The default minimum final score in every mode. Scores are calibrated (cortex.search.hits:
#: the same number means the same in every query, mode and store size), so one floor
#: holds everywhere; chosen on the tune split of the agent evaluation set for abstention
#: (eval/README.md). RRF's rank-based scores take no floor.
DEFAULT_MIN_SCORE = 0.45


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
    """How keyword and semantic candidates are fused in hybrid mode (cortex.search.hits)."""

    RRF = "rrf"
    LINEAR = "linear"
    EVIDENCE = "evidence"


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


#: What the enum fields accept: the member or its value as a plain string, so that
#: ``Options(mode="keyword")`` type-checks; ``__post_init__`` turns either into the member.
ModeArg = Mode | Literal["keyword", "semantic", "hybrid"]
FusionArg = Fusion | Literal["rrf", "linear", "evidence"]
TimeFilterArg = TimeFilter | Literal["auto", "hard", "soft", "off"]
OrderArg = Order | Literal["desc", "asc"]
OrderByArg = OrderBy | Literal["relevance", "recency", "confidence"]


def option(
    default: Any,
    help: str,
    *,
    default_text: str | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    cli: bool = True,
    mcp: bool = True,
) -> Any:
    """Declare one field of :class:`Options` with what its interfaces publish about it.

    ``name: Type = option(default, "what it does")``: the CLI's ``--name`` flag and the
    MCP ``memory_search`` argument are generated from it (:func:`option_specs`), with
    `help` as their description and the default shown beside it (`default_text` when the
    value alone would mislead, as for ``min_score=None``). `minimum`/`maximum` are
    published in the MCP schema (``__post_init__`` still does the checking). `mcp=False`
    keeps a tuning knob out of the agents' tool schema (every argument costs them tokens);
    `cli=False` keeps it off the command line.
    """
    meta = {
        "help": help,
        "default_text": default_text,
        "minimum": minimum,
        "maximum": maximum,
        "cli": cli,
        "mcp": mcp,
    }
    return dataclasses.field(default=default, metadata=meta)


def _enum(cls: type[StrEnum], name: str, value: object) -> StrEnum:
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        try:
            return cls(value.strip().lower())
        except ValueError:
            pass
    choices = ", ".join(repr(m.value) for m in cls)
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


def _projects(value: object) -> str | tuple[str, ...] | None:
    """`project` as one name (a str) or several (a tuple without repeats, in order)."""
    if value is None or isinstance(value, str):
        return _text("project", value)
    if not isinstance(value, Sequence) or isinstance(value, bytes | bytearray):
        raise InvalidOptionError(
            f"project must be a name or a list of names, not {type(value).__name__}"
        )
    names = [_text("project", v) if isinstance(v, str) else v for v in value]
    for name in names:
        if not isinstance(name, str):
            raise InvalidOptionError(f"project names must be strings, not {name!r}"[:200])
    unique = tuple(dict.fromkeys(names))
    if not unique:
        raise InvalidOptionError("project is an empty list; leave it out to search every project")
    return unique[0] if len(unique) == 1 else unique  # type: ignore[return-value]


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
    ever comes from another project when one is given (or several: ``project=["a", "b"]``,
    every project not named stays walled off; :func:`cortex.filters.project_ids` reads it).
    `scope` and `source_prefix` match by prefix when `scope` ends with ``*``
    (``"project:hydra*"``) and always for `source_prefix`. `code` keeps the memories that
    reference a file or code name (cortex.code), `fact_type` those holding a fact of that
    type. `lens` applies a saved lens (cortex.lenses): its options, where this object
    leaves the default. `include_documents` adds the imported files that match as whole
    documents (``Results.documents``, cortex.documents).

    Boosts multiply the retriever's score: recency ``1 + recency_weight / (1 + days)``;
    temporal decay ``exp(-ln2 / half_life_days * age)`` for memories of dated notes
    (``YYYY-MM-DD.md``; 0 turns it off); salience ``1 + salience_weight * (salience - 0.5)``;
    the sector's weight (``sector_weights``, default seed 000's; ``{}`` turns it off); and
    the effective confidence. `min_score` applies after all of them.

    `record` writes, after the ranking is fixed, a recall_log row per result and the access
    count (on the Engine's writer thread, after the answer: ``Engine.flush_recalls``);
    later rankings do not change unless `reinforce` (seed 000: 0.02) is given, which
    adds it to each returned memory's salience before the search returns (or call
    ``Engine.reinforce``). A listing without text records nothing; a read-only engine
    never records. `explain` fills
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
    chunks, or its session's memories in time order). `thread` attaches each result's
    session thread: the other turns of the session it was created in, the nearest in time
    first while they fit `thread_tokens`, in time order.
    """

    mode: ModeArg = option(
        Mode.HYBRID,
        "keyword (BM25), semantic (embeddings) or hybrid (both fused; keyword only when"
        " no model is installed)",
    )
    limit: int = option(20, "how many results at most", minimum=1, maximum=MAX_LIMIT)
    min_confidence: float = option(
        0.1, "leave out memories whose effective confidence is lower", minimum=0, maximum=1
    )
    alpha: float = option(
        0.3,
        "hybrid weight of semantic against keyword: 0 keyword only, 1 semantic only"
        " (0.3 measured best on SciFact's train split and the agent set's tune split)",
        minimum=0,
        maximum=1,
    )
    recency_weight: float = option(
        0.1, "recency boost w in 1 + w / (1 + age in days); 0 turns it off", minimum=0
    )
    include_facts: bool = option(True, "attach each memory's facts", mcp=False)
    session_id: str | None = option(None, "the session this search is recorded under")
    lens: str | None = option(
        None,
        "apply this saved lens (a named set of filters and boosts: cortex lens save);"
        " options given explicitly win over the lens's",
    )
    recorded_as: str | None = option(
        None,
        "the name the recall log records this search under (a client, an agent); the"
        " lens name when not given",
        mcp=False,
    )

    fusion: FusionArg = option(
        Fusion.EVIDENCE,
        "how hybrid mode fuses the two scores: evidence (either leg's strong evidence stands,"
        " agreement adds), linear (a weighted sum) or rrf (ranks)",
    )
    rrf_k: float = option(60.0, "the k of reciprocal rank fusion", minimum=0, mcp=False)
    min_score: float | None = option(
        None,
        "leave out results whose relevance (the fused score, before boosts) is lower",
        minimum=0,
        default_text=f"{DEFAULT_MIN_SCORE:g}, in every mode (0 for hybrid with rrf fusion)",
    )
    min_similarity: float | None = option(
        None,
        "leave out semantic matches whose raw cosine similarity is lower",
        minimum=-1,
        maximum=1,
        mcp=False,
    )
    approximate: bool = option(
        False,
        "search vectors through the approximate index (cortex index build --approximate):"
        " faster at 1M rows, may miss near memories; results say so (Results.approximate)",
        mcp=False,
    )
    nprobe: int | None = option(
        None,
        "lists the approximate search probes (more: slower, higher recall); needs approximate",
        default_text="256 (every list of a small index)",
        minimum=1,
        mcp=False,
    )
    order_by: OrderByArg = option(OrderBy.RELEVANCE, "relevance, recency or confidence")
    token_budget: int | None = option(
        None, "stop adding results once their estimated tokens would pass this", minimum=1
    )

    project: str | Sequence[str] | None = option(
        None,
        "only these projects' memories: one name, or several (a list; repeat --project);"
        " every project not named stays walled off",
    )
    session: str | None = option(None, "only memories linked to this session")
    sector: str | None = option(None, "only this sector")
    tier: str | None = option(None, "only this tier")
    scope: str | None = option(
        None, "only this scope; a trailing * matches a prefix (project:hydra*)"
    )
    category: str | None = option(None, "only this category")
    source_prefix: str | None = option(None, "only memories whose source path starts with this")
    code: str | None = option(
        None,
        "only memories that reference this file or code name (auth/middleware.ts,"
        " verify_token); a trailing * matches a folder or prefix (auth/*)",
    )
    fact_type: str | None = option(
        None, "only memories that hold a fact of this type (decision, preference, ...)"
    )
    min_salience: float | None = option(
        None, "leave out memories whose salience is lower", minimum=0, maximum=1, mcp=False
    )
    created_since: datetime | None = option(
        None, "only memories created at or after this ISO 8601 date"
    )
    created_until: datetime | None = option(
        None, "only memories created at or before this ISO 8601 date"
    )
    include_superseded: bool = option(False, "include memories that a newer one superseded")

    half_life_days: float = option(
        30.0,
        "half-life in days of the decay of memories from dated notes (YYYY-MM-DD.md);"
        " 0 turns it off",
        minimum=0,
    )
    salience_weight: float = option(
        0.2, "salience boost w in 1 + w * (salience - 0.5)", minimum=0, maximum=2, mcp=False
    )
    sector_weights: Mapping[str, float] | None = option(
        None,
        'sector weights as a JSON object, e.g. {"episodic": 0.8}; {} turns them off',
        default_text="seed 000's: reflective 1.2, semantic 1.1, procedural 1.0,"
        " emotional 0.9, episodic 0.8",
        mcp=False,
    )

    record: bool = option(
        True,
        "log the recall, count the access and reinforce the returned memories;"
        " false leaves the database untouched",
    )
    reinforce: float = option(
        0.0,
        "salience added to each returned memory when recorded (seed 000: 0.02); by default"
        " reading does not change later rankings",
        minimum=0,
        maximum=1,
        mcp=False,
    )
    explain: bool = option(False, "add every part of each score to the results")
    now: datetime | None = option(
        None,
        "the clock of the search (ISO 8601): recency and time words are read from it",
        default_text="the time it runs",
        mcp=False,
    )
    time_filter: TimeFilterArg = option(
        TimeFilter.AUTO,
        "what time words in the query do: auto (a window, widened to a boost when it holds"
        " nothing), hard, soft or off",
    )

    offset: int = option(
        0, "skip this many results (a page further)", minimum=0, maximum=MAX_OFFSET
    )
    cursor: str | None = option(None, "continue from the next_cursor of the page before")
    order: OrderArg = option(Order.DESC, "desc (best, newest first) or asc")
    context: int = option(
        0, "attach up to this many neighbouring chunks before and after each result",
        minimum=0, maximum=MAX_CONTEXT,
    )  # fmt: skip
    include_documents: bool = option(
        False,
        "also search the imported files as whole documents (Results.documents, best first)",
    )
    thread: bool = option(
        False, "attach to each result its session's other turns, nearest first, within"
        " thread_tokens",
    )  # fmt: skip
    thread_tokens: int = option(
        500, "the token budget of each result's thread (characters / 4)",
        minimum=1, maximum=MAX_THREAD_TOKENS,
    )  # fmt: skip

    if not TYPE_CHECKING:  # hidden from type checkers, which check the generated __init__

        def __new__(cls, *args: Any, **kwargs: Any) -> Options:
            # A misspelt keyword would be a TypeError from the generated __init__; name the
            # closest field instead, as the MCP server does for a misspelt argument.
            for name in kwargs:
                if name not in _FIELD_NAMES:
                    raise InvalidOptionError(unknown_option(name))
            return object.__new__(cls)  # not super(): slots=True rebuilt the class

    def __post_init__(self) -> None:
        s = object.__setattr__
        s(self, "mode", _enum(Mode, "mode", self.mode))
        s(self, "fusion", _enum(Fusion, "fusion", self.fusion))
        s(self, "order_by", _enum(OrderBy, "order_by", self.order_by))
        s(self, "time_filter", _enum(TimeFilter, "time_filter", self.time_filter))
        s(self, "order", _enum(Order, "order", self.order))
        for name, bottom, top in (
            ("offset", 0, MAX_OFFSET),
            ("context", 0, MAX_CONTEXT),
            ("thread_tokens", 1, MAX_THREAD_TOKENS),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not bottom <= value <= top:
                raise InvalidOptionError(
                    f"{name} must be an integer from {bottom} to {top}, not {value!r}"
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
        if self.nprobe is not None:
            if isinstance(self.nprobe, bool) or not isinstance(self.nprobe, int) or self.nprobe < 1:
                raise InvalidOptionError(
                    f"nprobe must be a positive integer or None, not {self.nprobe!r}"
                )
            if self.approximate is not True:
                raise InvalidOptionError(
                    "nprobe applies to approximate search: pass approximate=True too"
                )
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
        s(self, "project", _projects(self.project))
        for name in (
            "session_id",
            "lens",
            "recorded_as",
            "fact_type",
            "session",
            "sector",
            "tier",
            "scope",
            "category",
            "source_prefix",
            "code",
        ):
            s(self, name, _text(name, getattr(self, name)))
        if self.code is not None and not self.code.strip():
            raise InvalidOptionError("code is empty; name a file or code name, or leave it out")
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
        for name in (
            "include_facts",
            "include_superseded",
            "record",
            "explain",
            "include_documents",
            "thread",
            "approximate",
        ):
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


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(Options))


def unknown_option(name: str, valid: Sequence[str] | None = None) -> str:
    """The message for an option that does not exist: the closest valid name, and all."""
    names = sorted(valid if valid is not None else _FIELD_NAMES)
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown option {name!r}{hint} (the options are {', '.join(names)})"


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One field of :class:`Options` as an interface publishes it (see :func:`option`).

    `kinds` are JSON schema types ("string", "integer", "number", "boolean", "object",
    "array"; several for a union such as ``str | list[str]``), `choices` the values of
    an enum field, `items` the kind of an array's elements.
    """

    name: str
    help: str
    default: Any
    default_text: str
    kinds: tuple[str, ...]
    choices: tuple[str, ...] | None
    items: str | None
    nullable: bool
    minimum: float | None
    maximum: float | None
    cli: bool
    mcp: bool

    def described(self) -> str:
        """`help` with its default, as a sentence: "how many results at most (default 20)"."""
        return f"{self.help} (default: {self.default_text})"

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema of this option as an argument of a tool."""
        schema: dict[str, Any] = {
            "type": self.kinds[0] if len(self.kinds) == 1 else list(self.kinds)
        }
        # An agent pays per token: "(default: none)" on every filter says nothing it needs.
        text = (
            self.described()
            if self.default is not None or self.default_text != "none"
            else self.help
        )
        schema["description"] = text[0].upper() + text[1:] + "."
        if self.choices:
            schema["enum"] = list(self.choices)
        if self.items:
            schema["items"] = {"type": self.items}
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        return schema


_KINDS: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    datetime: "string",
}


def _kind(hint: Any) -> tuple[str, str | None, tuple[str, ...] | None]:
    """(JSON kind, element kind of an array, enum choices) of one non-None type."""
    origin = get_origin(hint)
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        return "string", None, tuple(str(m) for m in hint)
    if origin is Literal:
        return "string", None, tuple(str(a) for a in get_args(hint))
    if hint in _KINDS:
        return _KINDS[hint], None, None
    if hint in (dict, Mapping) or origin in (dict, Mapping):
        return "object", None, None
    if origin in (list, tuple, Sequence) or hint in (list, tuple):
        args = [a for a in get_args(hint) if a is not Ellipsis]
        return "array", _kind(args[0])[0] if args else "string", None
    raise TypeError(f"Options: no interface type for {hint!r}; extend options._kind")


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, StrEnum):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def option_specs() -> list[OptionSpec]:
    """Every field of :class:`Options`, in declaration order, as the CLI and MCP publish it.

    The one source of truth of both: a field declared with :func:`option` appears as a
    ``cortex search`` flag and a ``memory_search`` argument with no edit elsewhere.
    """
    hints = get_type_hints(Options)
    specs = []
    for f in dataclasses.fields(Options):
        hint = hints[f.name]
        members = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
        nullable = type(None) in members
        kinds: list[str] = []
        items: str | None = None
        choices: tuple[str, ...] | None = None
        for member in members:
            if member is type(None):
                continue
            kind, item, chosen = _kind(member)
            if kind not in kinds:
                kinds.append(kind)
            items = items or item
            choices = choices or chosen
        meta = f.metadata
        default_text = meta.get("default_text") or _show(f.default)
        specs.append(
            OptionSpec(
                name=f.name,
                help=meta.get("help") or f.name.replace("_", " "),
                default=f.default,
                default_text=default_text,
                kinds=tuple(kinds),
                choices=choices,
                items=items,
                nullable=nullable,
                minimum=meta.get("minimum"),
                maximum=meta.get("maximum"),
                cli=meta.get("cli", True),
                mcp=meta.get("mcp", True),
            )
        )
    return specs
