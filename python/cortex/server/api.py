"""Seed 003's request and response shapes, mapped onto cortex's own API (no HTTP here).

Every endpoint is a thin layer: its JSON body becomes the keyword arguments of one
:class:`cortex.Options` (or of ``Engine.add`` / ``Engine.context``), cortex validates the
values, and the answer is the API's own ``to_dict()`` with seed 003's envelope around it.
So a search over HTTP returns, in ``results``, what ``cortex search --json`` prints for the
same query and options.

Names follow the seed where the seed names a field (``filters.dateRange``,
``pagination.hasMore``, ``aggregations.totalCount``) and cortex's snake_case elsewhere
(the ``options`` object takes :class:`~cortex.Options` field names as they are).

The search pipeline is being extended (issue 12: offsets and cursors, context chunks,
time interpretation, several projects at once). A request field that needs such an
:class:`~cortex.Options` field is mapped onto it as soon as ``Options`` has it
(``dataclasses.fields``); until then it is answered with 400 "not supported yet", except
``pagination.offset`` / ``cursor``, which the server emulates meanwhile (see
:func:`plan_page`). New ``Results`` attributes (``interpretation``, ``aggregations``,
``has_more``, ``next_cursor``) flow through ``Results.to_dict()`` into the answer.
"""

from __future__ import annotations

import base64
import collections.abc
import dataclasses
import json
import math
import re
import types
import typing
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cortex.errors import CortexError
from cortex.options import MAX_LIMIT, Options

__all__ = [
    "SERVER_OWNED",
    "ApiError",
    "Capabilities",
    "SearchPlan",
    "add_arguments",
    "decorate_result",
    "fallback_aggregations",
    "parse_json",
    "plan_search",
    "seed_aggregations",
]


class ApiError(Exception):
    """A request the server refuses: an HTTP status and a one-line message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def not_supported(what: str) -> ApiError:
    return ApiError(400, f"{what} is not supported yet by this version of cortex")


def unknown_fields(where: str, given: Mapping[str, Any], known: Sequence[str]) -> None:
    """422 naming the first unknown field (a misspelt filter must not widen a search)."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ApiError(
            422,
            f"unknown field {unknown[0]!r} in {where}; its fields are {', '.join(sorted(known))}",
        )


def _no_constant(name: str) -> Any:
    raise ApiError(400, f"{name} is not JSON: send numbers as finite values")


def parse_json(body: bytes) -> Any:
    """The JSON value of a request body; NaN and Infinity are refused (they are not JSON)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "the body is not UTF-8 text") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ApiError(400, f"the body is not JSON: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise ApiError(400, "the body is nested too deeply") from None
    except ValueError as exc:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise ApiError(
            400, f"the body is not JSON this server reads: {str(exc).split(';')[0]}"
        ) from None


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ApiError(400, f"{where} must be a JSON object, not {_json_type(value)}")
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ApiError(400, f"{where} must be true or false, not {_json_type(value)}")
    return value


def _int(value: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"{where} must be an integer, not {_json_type(value)}")
    if not lo <= value <= hi:
        raise ApiError(400, f"{where} must be between {lo} and {hi}, not {value}")
    return value


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ApiError(400, f"{where} must be a string, not {_json_type(value)}")
    return value


# --------------------------------------------------------------------------- capabilities


@dataclass(frozen=True, slots=True)
class Capabilities:
    """Which of issue 12's Options fields this cortex has (read once from the dataclass)."""

    fields: frozenset[str]
    #: the Options field that takes a list of projects, if any ("projects", or a "project"
    #: whose type admits a sequence)
    projects_field: str | None

    @classmethod
    def of(cls, options: type[Options] = Options) -> Capabilities:
        names = frozenset(f.name for f in dataclasses.fields(options))
        field = None
        if "projects" in names:
            field = "projects"
        elif "project" in names and _admits_sequence(typing.get_type_hints(options)["project"]):
            field = "project"
        return cls(names, field)

    def has(self, name: str) -> bool:
        return name in self.fields

    def to_dict(self) -> dict[str, Any]:
        return {
            "offset": self.has("offset"),
            "cursor": self.has("cursor"),
            "context": self.has("context"),
            "order": self.has("order"),
            "multi_project": self.projects_field is not None,
        }


def _admits_sequence(hint: Any) -> bool:
    args = (
        typing.get_args(hint)
        if typing.get_origin(hint) in (typing.Union, types.UnionType)
        else (hint,)
    )
    seqs = (list, tuple, collections.abc.Sequence, collections.abc.Collection, frozenset, set)
    return any(typing.get_origin(a) in seqs or a in seqs for a in args)


#: Options fields the server sets itself and a request may not: every search is recorded
#: (the audit trail of seed 003's security section) under the client's name.
SERVER_OWNED = {
    "record": "the server records every search (the audit log); record cannot be turned off",
    "recorded_as": "the server records each search under the client's name",
    "project": "name projects in filters.projects",
    "projects": "name projects in filters.projects",
}

# --------------------------------------------------------------------------- search

SEARCH_FIELDS = (
    "query",
    "strategies",
    "mode",
    "filters",
    "context",
    "pagination",
    "sort",
    "explain",
    "options",
)
FILTER_FIELDS = (
    "projects",
    "dateRange",
    "category",
    "session",
    "sector",
    "tier",
    "scope",
    "sourcePrefix",
    "minConfidence",
    "minSalience",
    "includeSuperseded",
    "hasCode",
    "code",
    "factType",
    "patterns",
)
CONTEXT_FIELDS = ("expandChunks", "chunks", "thread", "includeRelated", "maxContextSize")
PAGINATION_FIELDS = ("limit", "offset", "cursor")
SORT_FIELDS = ("by", "order")
STRATEGIES = ("keyword", "semantic", "hybrid", "temporal", "pattern", "code", "conversational")
#: Filters that are one Options field each, with the same meaning.
_SIMPLE_FILTERS = {
    "category": "category",
    "session": "session",
    "sector": "sector",
    "tier": "tier",
    "scope": "scope",
    "sourcePrefix": "source_prefix",
    "minConfidence": "min_confidence",
    "minSalience": "min_salience",
    "includeSuperseded": "include_superseded",
    "factType": "fact_type",
}
DEFAULT_PAGE = 20


@dataclass(slots=True)
class SearchPlan:
    """A search request mapped onto the API: the query, the Options keyword arguments,
    the projects it may see, and how to page (``offset`` emulated when Options has none)."""

    query: str | None
    options: dict[str, Any]
    limit: int
    offset: int
    emulate_offset: bool


def _mode(body: Mapping[str, Any]) -> str | None:
    if "mode" in body and "strategies" in body:
        raise ApiError(400, "give either mode or strategies, not both")
    if "mode" in body:
        return _str(body["mode"], "mode")
    if "strategies" not in body:
        return None
    strategies = body["strategies"]
    if not isinstance(strategies, list) or not all(isinstance(s, str) for s in strategies):
        raise ApiError(400, "strategies must be an array of strings")
    given = {s.strip().lower() for s in strategies}
    unknown = sorted(given - set(STRATEGIES))
    if unknown:
        raise ApiError(
            400, f"unknown strategy {unknown[0]!r}; strategies are {', '.join(STRATEGIES)}"
        )
    later = sorted(given - {"keyword", "semantic", "hybrid"})
    if later:
        raise not_supported(f"the {later[0]!r} strategy")
    if not given or "hybrid" in given or given == {"keyword", "semantic"}:
        return "hybrid"
    return str(given.pop())


def plan_search(
    body: Any,
    caps: Capabilities,
    allowed: frozenset[str] | None,
) -> SearchPlan:
    """Map a seed 003 search request onto Options keyword arguments (validated later by
    Options itself, whose messages are passed on), and enforce the project wall."""
    body = _object(body, "the request")
    unknown_fields("the request", body, SEARCH_FIELDS)
    query = body.get("query")
    if query is not None and not isinstance(query, str):
        raise ApiError(400, f"query must be a string or null, not {_json_type(query)}")
    kw: dict[str, Any] = {}

    def put(name: str, value: Any, where: str) -> None:
        if name in kw:
            raise ApiError(400, f"{where} repeats an option given elsewhere in the request")
        kw[name] = value

    mode = _mode(body)
    if mode is not None:
        put("mode", mode, "mode")
    if "explain" in body:
        put("explain", _bool(body["explain"], "explain"), "explain")

    filters = _object(body.get("filters") or {}, "filters")
    unknown_fields("filters", filters, FILTER_FIELDS)
    for name, field in _SIMPLE_FILTERS.items():
        if filters.get(name) is not None:
            put(field, filters[name], f"filters.{name}")
    if filters.get("hasCode") is not None:
        has_code = _bool(filters["hasCode"], "filters.hasCode")
        if caps.has("has_code"):
            put("has_code", has_code, "filters.hasCode")
        elif caps.has("code") and has_code:
            put("code", "*", "filters.hasCode")  # any code reference (cortex.code)
        else:
            raise not_supported("filters.hasCode" + ("" if has_code else " false"))
    if filters.get("code") is not None:
        if not caps.has("code"):
            raise not_supported("filters.code")
        put("code", _str(filters["code"], "filters.code"), "filters.code")
    if filters.get("patterns"):
        raise not_supported("filters.patterns")
    dates = _object(filters.get("dateRange") or {}, "filters.dateRange")
    unknown_fields("filters.dateRange", dates, ("start", "end"))
    for key, field in (("start", "created_since"), ("end", "created_until")):
        if dates.get(key) is not None:
            put(field, _str(dates[key], f"filters.dateRange.{key}"), f"filters.dateRange.{key}")
    requested = filters.get("projects")
    if requested is not None and (
        not isinstance(requested, list) or not all(isinstance(p, str) for p in requested)
    ):
        raise ApiError(400, "filters.projects must be an array of project names")

    context = _object(body.get("context") or {}, "context")
    unknown_fields("context", context, CONTEXT_FIELDS)
    if context.get("expandChunks"):
        _bool(context["expandChunks"], "context.expandChunks")
        if not caps.has("context"):
            raise not_supported("context.expandChunks")
        chunks = _int(context.get("chunks", 1), "context.chunks", 0, 50)
        put("context", chunks, "context.expandChunks")
    elif context.get("chunks") is not None:
        raise ApiError(400, "context.chunks needs context.expandChunks: true")
    if context.get("thread"):
        _bool(context["thread"], "context.thread")
        if not caps.has("thread"):
            raise not_supported("context.thread")
        put("thread", True, "context.thread")
    if context.get("maxContextSize") is not None:
        # the token budget of each result's conversation thread (Options.thread_tokens)
        size = _int(context["maxContextSize"], "context.maxContextSize", 1, 100_000)
        if not caps.has("thread_tokens"):
            raise not_supported("context.maxContextSize")
        put("thread_tokens", size, "context.maxContextSize")
    if context.get("includeRelated") is not None:
        _bool(context["includeRelated"], "context.includeRelated")  # always included

    sort = _object(body.get("sort") or {}, "sort")
    unknown_fields("sort", sort, SORT_FIELDS)
    if sort.get("by") is not None:
        by = _str(sort["by"], "sort.by")
        if by == "pattern_strength":
            raise not_supported("sort.by 'pattern_strength'")
        put("order_by", by, "sort.by")
    if sort.get("order") is not None:
        order = _str(sort["order"], "sort.order").strip().lower()
        if order not in ("asc", "desc"):
            raise ApiError(400, f"sort.order must be 'asc' or 'desc', not {order!r}")
        if caps.has("order"):
            put("order", order, "sort.order")
        elif order == "asc":
            raise not_supported("sort.order 'asc'")

    options = _object(body.get("options") or {}, "options")
    settable = sorted(caps.fields - set(SERVER_OWNED))
    for name in options:
        if name in SERVER_OWNED and name in caps.fields:
            raise ApiError(400, f"options.{name} cannot be set over HTTP: {SERVER_OWNED[name]}")
    unknown_fields("options", options, settable)
    for name, value in options.items():
        if name in ("limit", "offset", "cursor"):
            raise ApiError(400, f"options.{name}: page with pagination.{name}")
        put(name, value, f"options.{name}")

    page = _object(body.get("pagination") or {}, "pagination")
    unknown_fields("pagination", page, PAGINATION_FIELDS)
    limit = _int(page.get("limit", DEFAULT_PAGE), "pagination.limit", 1, MAX_LIMIT)
    offset = _int(page.get("offset", 0), "pagination.offset", 0, MAX_LIMIT)
    cursor = page.get("cursor")
    emulate = not caps.has("offset")
    if cursor is not None:
        cursor = _str(cursor, "pagination.cursor")
        if "offset" in page:
            raise ApiError(400, "give pagination.offset or pagination.cursor, not both")
        if caps.has("cursor"):
            put("cursor", cursor, "pagination.cursor")
        else:
            offset = decode_cursor(cursor)
    if emulate and offset + limit + 1 > MAX_LIMIT:
        raise ApiError(400, f"pagination.offset + limit must stay below {MAX_LIMIT}")
    if not emulate:
        put("offset", offset, "pagination.offset")
    put("limit", limit, "pagination.limit")

    _wall(kw, requested, allowed, caps)
    return SearchPlan(query, kw, limit, offset, emulate)


def _wall(
    kw: dict[str, Any],
    requested: list[str] | None,
    allowed: frozenset[str] | None,
    caps: Capabilities,
) -> None:
    """The project filter: the projects asked for, all within the client's allowed ones;
    without any, the allowed ones (every project for an unrestricted client)."""
    if requested is not None:
        if not requested:
            raise ApiError(400, "filters.projects is empty; leave it out to search every project")
        for name in requested:
            if allowed is not None and name not in allowed:
                raise ApiError(403, f"project {name!r} is not open to this client")
        projects: list[str] | None = list(dict.fromkeys(requested))
    else:
        projects = sorted(allowed) if allowed is not None else None
    if projects is None:
        return
    if len(projects) == 1 and caps.projects_field != "projects":
        kw["project"] = projects[0]
    elif caps.projects_field is not None:
        kw[caps.projects_field] = projects
    else:
        # Decided: until Options filters several projects at once, a client limited to
        # several projects names one per search (a per-project merge would need its own
        # ranking, paging and aggregations, all different from the API's).
        raise ApiError(
            400,
            "searching several projects at once is not supported yet: name one of "
            f"{', '.join(projects)} in filters.projects",
        )


def decode_cursor(cursor: str) -> int:
    """The offset an emulated cursor stands for (a cursor is opaque to clients)."""
    try:
        raw = base64.urlsafe_b64decode(cursor.encode("ascii") + b"==")
        data = json.loads(raw)
        offset = data["o"]
    except (ValueError, KeyError, TypeError, UnicodeEncodeError):
        raise ApiError(400, "pagination.cursor is not a cursor this server gave") from None
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= MAX_LIMIT:
        raise ApiError(400, "pagination.cursor is not a cursor this server gave")
    return offset


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode().rstrip("=")


def build_options(kw: Mapping[str, Any]) -> Options:
    """Options from the mapped arguments; a bad value is a 400 with cortex's own message."""
    try:
        return Options(**kw)
    except CortexError as exc:
        raise ApiError(400, str(exc)) from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise ApiError(400, f"bad option: {exc}") from None


# --------------------------------------------------------------------------- answers

_MARK = re.compile(r"<mark>(.*?)</mark>", re.S)


def decorate_result(result: dict[str, Any]) -> dict[str, Any]:
    """Seed 003's per-result groups beside the API's own fields (which stay as they are,
    so ``results`` equals ``cortex search --json``); a group the engine already gives wins."""
    snippet = result.get("snippet") or ""
    words = sorted({m.strip().lower() for m in _MARK.findall(snippet) if m.strip()})
    result.setdefault(
        "highlights",
        {"content_snippets": [snippet] if snippet else [], "matched_keywords": words},
    )
    result.setdefault(
        "score_parts",
        {
            "relevance": result.get("score"),
            "keyword": result.get("bm25_score"),
            "semantic": result.get("semantic_score"),
            "confidence": result.get("effective_confidence"),
            "method": result.get("match_type"),
        },
    )
    around = result.get("context")
    before = around.get("before", []) if isinstance(around, Mapping) else []
    after = around.get("after", []) if isinstance(around, Mapping) else []
    result["context"] = {
        "previous_chunk": before[-1] if before else None,
        "next_chunk": after[0] if after else None,
        "before": before,
        "after": after,
        "session_info": result.get("source_session"),
        "conversation_thread": result.get("thread"),
    }
    result.setdefault(
        "related",
        {
            "count": result.get("related_memory_count", 0),
            "code_entities": [],
            "patterns": [],
            "similar_memories": [],
        },
    )
    return result


def seed_aggregations(agg: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's aggregations (every match, ``Results.aggregations``) in seed 003's
    shape."""
    return {
        "basis": "matches",
        "totalCount": agg.get("total"),
        "projectDistribution": agg.get("by_project", {}),
        "categoryDistribution": agg.get("by_category", {}),
        "sessionDistribution": agg.get("by_session", {}),
        "timeDistribution": agg.get("over_time", {"unit": "day", "buckets": []}),
        "patternSummary": None,
    }


def fallback_aggregations(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Distributions over the results returned, until the engine counts every match
    (``basis`` says which: ``"page"`` here)."""
    projects: Counter[str] = Counter()
    days: Counter[str] = Counter()
    for r in results:
        memory = r.get("memory") or {}
        projects[memory.get("project") or ""] += 1
        created = memory.get("created_at")
        if isinstance(created, str):
            days[created[:10]] += 1
    return {
        "basis": "page",
        "totalCount": None,
        "projectDistribution": dict(projects.most_common()),
        "timeDistribution": {
            "unit": "day",
            "buckets": [{"start": d, "count": n} for d, n in sorted(days.items())],
        },
        "patternSummary": None,
    }


def interpretation(data: Mapping[str, Any], query: str | None) -> dict[str, Any]:
    """What the engine understood (issue 12), or what this version can say: the mode."""
    given = data.get("interpretation")
    out = dict(given) if isinstance(given, Mapping) else {}
    out.setdefault("intent", None)
    out.setdefault("strategies", [data.get("mode")])
    out.setdefault("timeframe", None)
    out.setdefault("topics", [])
    out.setdefault("searched", query)
    return out


# --------------------------------------------------------------------------- add, llm

ADD_FIELDS = (
    "content",
    "project",
    "session",
    "sector",
    "tier",
    "scope",
    "category",
    "salience",
    "confidence",
    "created_at",
    "metadata",
    "source_path",
)


def add_arguments(body: Any, allowed: frozenset[str] | None) -> dict[str, Any]:
    """``Engine.add`` keyword arguments of a POST /api/memories body (cortex checks values)."""
    body = _object(body, "the request")
    unknown_fields("the request", body, ADD_FIELDS)
    if "content" not in body:
        raise ApiError(400, "content is required: the memory's text")
    kw = {k: v for k, v in body.items() if v is not None or k == "content"}
    for name in ("content", "project", "session", "sector", "tier", "scope", "category"):
        if name in kw:
            _str(kw[name], name)
    if not kw["content"].strip():
        raise ApiError(400, "content is empty: a memory needs some text")
    if "metadata" in kw:
        _object(kw["metadata"], "metadata")
    for name in ("salience", "confidence"):
        if name in kw and (
            isinstance(kw[name], bool)
            or not isinstance(kw[name], int | float)
            or not math.isfinite(float(kw[name]))
            or not 0.0 <= float(kw[name]) <= 1.0
        ):
            raise ApiError(400, f"{name} must be a number between 0 and 1")
    if "created_at" in kw:
        kw["created_at"] = _when("created_at", kw["created_at"])
    project = kw.get("project")
    if allowed is not None:
        if project is None:
            if len(allowed) != 1:
                raise ApiError(400, f"name the project: one of {', '.join(sorted(allowed))}")
            kw["project"] = next(iter(allowed))
        elif project not in allowed:
            raise ApiError(403, f"project {project!r} is not open to this client")
    return kw


def _when(name: str, value: Any) -> datetime | float:
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ApiError(
                400, f"{name} must be an ISO 8601 date such as 2026-01-31 or epoch seconds"
            ) from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ApiError(400, f"{name} must be an ISO 8601 date or epoch seconds")
    if not math.isfinite(float(value)) or not 0 <= value < 253402300800:  # year 10000
        raise ApiError(400, f"{name} is out of range")
    return float(value)


LLM_FIELDS = ("prompt", "context", "format", "max_tokens")
LLM_CONTEXT_FIELDS = ("current_file", "current_project", "recent_queries", "task", "language")
FORMATS = ("detailed", "summary", "checklist")


@dataclass(slots=True)
class LlmPlan:
    prompt: str
    format: str
    max_tokens: int
    project: str | None
    current_file: str | None
    recent_queries: list[str]
    task: str | None = None
    language: str | None = None


def plan_llm(body: Any, allowed: frozenset[str] | None) -> LlmPlan:
    body = _object(body, "the request")
    unknown_fields("the request", body, LLM_FIELDS)
    if "prompt" not in body:
        raise ApiError(400, "prompt is required: the question or the context need")
    prompt = _str(body["prompt"], "prompt")
    fmt = _str(body.get("format", "detailed"), "format")
    if fmt not in FORMATS:
        raise ApiError(400, f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    max_tokens = _int(body.get("max_tokens", 2000), "max_tokens", 1, 200_000)
    ctx = _object(body.get("context") or {}, "context")
    unknown_fields("context", ctx, LLM_CONTEXT_FIELDS)
    project = ctx.get("current_project")
    if project is not None:
        project = _str(project, "context.current_project")
        if allowed is not None and project not in allowed:
            raise ApiError(403, f"project {project!r} is not open to this client")
    elif allowed is not None:
        if len(allowed) != 1:
            raise ApiError(
                400, f"name context.current_project: one of {', '.join(sorted(allowed))}"
            )
        project = next(iter(allowed))
    current_file = ctx.get("current_file")
    if current_file is not None:
        current_file = _str(current_file, "context.current_file")
    recent = ctx.get("recent_queries") or []
    if not isinstance(recent, list) or not all(isinstance(q, str) for q in recent):
        raise ApiError(400, "context.recent_queries must be an array of strings")
    task = _str(ctx["task"], "context.task") if ctx.get("task") is not None else None
    language = (
        _str(ctx["language"], "context.language") if ctx.get("language") is not None else None
    )
    return LlmPlan(prompt, fmt, max_tokens, project, current_file, recent, task, language)


def strip_marks(text: str) -> str:
    return text.replace("<mark>", "").replace("</mark>", "")


def pack_for_llm(data: Mapping[str, Any], plan: LlmPlan) -> dict[str, Any]:
    """The fallback answer of the LLM endpoint, before ``Engine.context``: the best
    memories the search packed into ``max_tokens`` (its ``token_budget``)."""
    results = data.get("results") or []
    memories = []
    for r in results:
        m = r["memory"]
        text = m["content"] if plan.format == "detailed" else strip_marks(r.get("snippet") or "")
        memories.append(
            {
                "id": m["id"],
                "content": text,
                "project": m.get("project"),
                "created_at": m.get("created_at"),
                "source_path": m.get("source_path"),
                "chunk_index": m.get("chunk_index"),
                "score": r["score"],
                "match_type": r.get("match_type"),
            }
        )
    answer = None
    if plan.format == "checklist" and memories:
        answer = "\n".join(f"- {' '.join(m['content'].split())}" for m in memories)
    return {
        "answer": answer,
        "memories": memories,
        "suggestions": [],
        # Until Engine.context calibrates one, the best result's score (linear hybrid
        # scores are absolute: cosine and a fixed BM25 map), 0 when nothing matched.
        "confidence": round(min(1.0, max(0.0, float(results[0]["score"]))), 4) if results else 0.0,
        "format": plan.format,
        "notices": list(data.get("notices") or []),
        "basis": "search",
    }


def outside_wall(value: Any, allowed: frozenset[str]) -> bool:
    """Whether an answer item belongs to a project outside `allowed`."""
    if not isinstance(value, Mapping):
        return False
    for holder in (value, value.get("memory")):
        if isinstance(holder, Mapping) and "project" in holder:
            project = holder["project"]
            if project not in allowed:
                return True
    return False


def prune(value: Any, allowed: frozenset[str]) -> Any:
    """`value` without any list item of another project (a wall behind the engine's own)."""
    if isinstance(value, list):
        return [prune(v, allowed) for v in value if not outside_wall(v, allowed)]
    if isinstance(value, dict):
        return {k: prune(v, allowed) for k, v in value.items()}
    return value
