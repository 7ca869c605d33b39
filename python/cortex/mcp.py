"""`cortex mcp`: the memory tools an AI agent calls, served over stdio with the MCP SDK.

Four tools — ``memory_search``, ``memory_add``, ``memory_timeline``, ``memory_get`` — over
one :class:`~cortex.Engine` opened for the server's life. Each answer's structured content
is exactly what the Python API returns (``Results.to_dict()``, ``Memory.to_dict()``,
``Timeline.to_dict()``), the same JSON ``cortex search --json`` prints, so an agent, a
script and a person at the command line read the same ids, order and scores.

Arguments are the API's keyword arguments and reach cortex as the client sent them: an
argument left out takes the API's default, one sent (``null`` included, as None) is
validated by cortex itself. So a bad one comes back as a tool error (``isError``) carrying
the one-line message the API raises, word for word, and the server goes on serving.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NotRequired

try:
    import anyio
    import mcp_types
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage
    from mcp.types import CallToolResult, TextContent, ToolAnnotations
    from pydantic import Field, PlainValidator, WithJsonSchema
    from typing_extensions import TypedDict
except ImportError as _missing:  # the `mcp` extra is not installed
    if __name__ == "__main__":  # `python -m cortex.mcp`: the one line `cortex mcp` prints
        from cortex.cli import mcp_sdk_missing

        print(f"cortex: error: {mcp_sdk_missing(_missing)}", file=sys.stderr)
        sys.exit(1)
    raise

import cortex
from cortex import lenses, validate
from cortex.agent import compact_json, lean_search
from cortex.errors import CortexError, InvalidOptionError, NotFoundError
from cortex.options import option_specs
from cortex.paths import db_location, default_db

__all__ = ["build_server", "main", "serve"]

# --------------------------------------------------------------------------- answers
# The shapes of the structured content, published as each tool's output schema. They
# mirror the `to_dict()` methods of cortex.result and cortex.recall (the SDK checks every
# answer against them, so a drift fails loudly in the tests rather than at a client).


class SessionData(TypedDict):
    id: str
    project: str | None
    started_at: str | None
    ended_at: str | None
    summary: str | None


class SupersededByData(TypedDict):
    id: int
    content: str
    created_at: str | None


class MemoryData(TypedDict):
    id: int
    content: str
    project: str | None
    source_path: str | None
    chunk_index: int | None
    sector: str | None
    tier: str | None
    scope: str | None
    category: str | None
    salience: float
    confidence: float
    created_at: str | None
    updated_at: str | None
    valid_until: str | None
    superseded_by: int | None
    deleted_at: str | None
    last_accessed: str | None
    access_count: int
    metadata: dict[str, Any]


class ReinforcedData(TypedDict):
    id: int
    salience: float


class ReinforceData(TypedDict):
    reinforced: list[ReinforcedData]


class FactData(TypedDict):
    id: int
    memory_id: int
    type: str
    content: str
    confidence: float
    decay_rate: float
    last_reinforced: str | None
    effective_confidence: float


class DocumentData(TypedDict):
    id: int
    source_path: str
    project: str | None
    title: str
    chunks: int
    created_at: str | None
    updated_at: str | None
    score: float
    snippet: str
    content: NotRequired[str]


class DocumentsData(TypedDict):
    """Imported files as whole documents, best first."""

    documents: list[DocumentData]


class ResultData(TypedDict):
    id: int
    score: float
    bm25_score: float
    semantic_score: float
    effective_confidence: float
    match_type: str
    snippet: str
    source_session: SessionData | None
    is_superseded: bool
    superseded_by: SupersededByData | None
    related_memory_count: int
    memory: MemoryData
    facts: list[FactData]
    explain: NotRequired[dict[str, float]]
    related: NotRequired[dict[str, Any]]  # {"code": [{"ref", "kind", "line"?}]}
    context: NotRequired[dict[str, list[dict[str, Any]]]]
    thread: NotRequired[list[dict[str, Any]]]


class ContextData(TypedDict):
    id: int
    text: str


class LeanResultData(TypedDict):
    """One result as an agent reads it (cortex.agent.lean_result)."""

    id: int
    text: NotRequired[str]
    snippet: NotRequired[str]
    date: NotRequired[str]
    project: NotRequired[str]
    source: NotRequired[str]
    score: float
    why: str
    context: NotRequired[dict[str, list[ContextData]]]
    thread: NotRequired[list[ContextData]]
    explain: NotRequired[dict[str, float]]


class SearchData(TypedDict):
    """Results, best first: lean by default (cortex.agent.lean_search), the full record of
    the search with verbose (mode, hidden, aggregations, every score part)."""

    status: str
    total_results: int
    has_more: NotRequired[bool]
    next_cursor: NotRequired[str | None]
    notices: NotRequired[list[str]]
    interpretation: NotRequired[dict[str, Any] | None]
    suggestions: NotRequired[list[str]]
    query: NotRequired[str | None]
    mode: NotRequired[str]
    rewritten: NotRequired[str | None]
    hidden: NotRequired[int]
    total: NotRequired[int]
    aggregations: NotRequired[dict[str, Any] | None]
    # verbose: each result is Result.to_dict() (ResultData), published as a plain object:
    # its schema would cost every agent ~1,200 tokens in tools/list for an opt-in shape
    results: list[LeanResultData | dict[str, Any]]
    total_found: NotRequired[int]
    total_returned: NotRequired[int]
    token_estimate: NotRequired[int]
    documents: NotRequired[list[DocumentData]]


class ContextAnswerData(TypedDict):
    """Engine.context for an agent: the memories to read as one text within the budget."""

    status: str
    confidence: float
    scope: str
    total_found: int
    total_returned: int
    token_estimate: int
    text: str
    ids: list[int]
    suggestions: NotRequired[list[str]]
    notices: NotRequired[list[str]]
    memories: NotRequired[list[dict[str, Any]]]


class TimelineData(TypedDict):
    """The memories of the anchor's project just before and after it, oldest first."""

    anchor: MemoryData
    before: list[MemoryData]
    after: list[MemoryData]
    sessions: dict[str, SessionData]


# --------------------------------------------------------------------------- arguments


def _as_given(value: object) -> object:
    return value


class _Omitted:
    """The value of a parameter the client left out (it then takes the API's default)."""

    def __repr__(self) -> str:
        return "<omitted>"


_OMITTED: Any = _Omitted()

#: The default of every optional parameter. A factory, so that the published schema shows
#: no default (the descriptions say what it is) and `null` stays distinct from "left out".
_OPTIONAL: Any = Field(default_factory=lambda: _OMITTED)

#: Hands a value to the tool unconverted: cortex, not pydantic, validates arguments, so the
#: caller reads cortex's one-line message rather than a pydantic report, and the API and
#: the MCP tool accept and refuse exactly the same values.
_GIVEN = PlainValidator(_as_given)

if TYPE_CHECKING:  # what a tool body works with: the value sent, None, or _OMITTED
    Text = str | None
    Integer = int | None
    Number = float | None
    Flag = bool | None
    Object = dict[str, Any] | None
    Items = list[Any] | None
else:
    # At run time a text parameter is annotated with exactly `str`: that spares it the
    # SDK's JSON-decoding of string arguments, which for `str | None` would turn the query
    # "null" into None (no query at all) and a project named "[1]" into a list.
    Text = Annotated[str, _GIVEN]
    Integer = Annotated[int, _GIVEN]
    Number = Annotated[float, _GIVEN]
    Flag = Annotated[bool, _GIVEN]
    Object = Annotated[dict[str, Any], _GIVEN]
    Items = Annotated[list[Any], _GIVEN]


def _doc(kind: str | list[str], description: str, **extra: Any) -> WithJsonSchema:
    """The published JSON schema of one parameter: its type, what it does, its domain."""
    return WithJsonSchema({"type": kind, "description": description, **extra})


#: The query of memory_search; its other arguments come from Options (_option_parameters).
_QUERY = inspect.Parameter(
    "query",
    inspect.Parameter.KEYWORD_ONLY,
    default=_OPTIONAL,
    annotation=Annotated[
        Text,
        _doc(
            "string",
            'What to look for: words, or FTS5 syntax (deploy*, "blue green", a OR b, '
            "a NOT b, NEAR(a b)). Leave it out to list the memories that pass the "
            "filters, newest first.",
        ),
    ],
)

#: memory_search's one argument that is not an Options field: the answer's shape.
_VERBOSE = inspect.Parameter(
    "verbose",
    inspect.Parameter.KEYWORD_ONLY,
    default=_OPTIONAL,
    annotation=Annotated[
        Flag,
        _doc(
            "boolean",
            "Return the full record of each result and of the search (every score part, "
            "all memory fields, session, facts, aggregations) instead of the lean answer "
            "(default false).",
        ),
    ],
)

#: The run-time type of an argument by its JSON kind: it decides whether the SDK JSON-decodes
#: a string argument first (never for a text argument, see Text above).
_BASE: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict[str, Any],
    "array": list[Any],
}


def _option_parameters() -> list[inspect.Parameter]:
    """One memory_search argument per Options field published to MCP (``mcp=True`` in
    its :func:`~cortex.options.option`), with the schema the field declares."""
    params = []
    for spec in option_specs():
        if not spec.mcp:
            continue
        base = str if "string" in spec.kinds else _BASE[spec.kinds[0]]
        params.append(
            inspect.Parameter(
                spec.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=_OPTIONAL,
                annotation=Annotated[base, _GIVEN, WithJsonSchema(spec.json_schema())],
            )
        )
    return params


def _given(**values: Any) -> dict[str, Any]:
    """The arguments the client sent, as the API's keyword arguments.

    A JSON null means the argument's default, as if it were left out: models fill every
    optional argument of a schema with null when they have nothing to say about it.
    """
    return {
        name: value for name, value in values.items() if value is not _OMITTED and value is not None
    }


def results_explained(changes: Mapping[str, Any]) -> bool:
    """Whether the search was asked to explain its scores (then the lean answer shows them)."""
    return changes.get("explain") is True


def _when(name: str, value: object) -> object:
    """An ISO 8601 date over JSON becomes the datetime the API takes; cortex checks the rest."""
    if value is _OMITTED or not isinstance(value, str):
        return value
    try:
        return datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidOptionError(
            f"{name} must be an ISO 8601 date such as 2026-01-31 or epoch seconds, not {value!r}"
        ) from None


# --------------------------------------------------------------------------- results


def _answer(data: Mapping[str, Any]) -> CallToolResult:
    """Structured content, and the same JSON as text for clients that read only text
    (compact: the spaces of the default separators are tokens the agent pays for)."""
    text = compact_json(data)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


def _refusal(message: str) -> CallToolResult:
    """A tool error: the model reads `message` and can correct its call."""
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def _run(work: Callable[[], Mapping[str, Any]]) -> CallToolResult:
    """Run one tool body; a deliberate cortex error becomes a tool error with its message.

    Anything else is a bug: it propagates, the SDK logs its traceback on stderr and answers
    "Error executing tool ..." (still a tool error, still a live server).
    """
    try:
        return _answer(work())
    except CortexError as exc:
        return _refusal(str(exc))


# --------------------------------------------------------------------------- transport


class _CheckedLines:
    """stdin's lines for the SDK's stdio reader, with the ones it cannot parse answered.

    The SDK drops a line its JSON parser refuses (a lone-surrogate escape such as
    ``"\\ud800"``, nesting deeper than its limit of 255) without a reply, so the client
    waits forever for that request. Each line is parsed here with the same parser first;
    a line it refuses gets a JSON-RPC error reply (-32700 parse error, -32600 for JSON
    that is not a JSON-RPC message) with the request's id when Python's own parser can
    still find it, and never reaches the SDK. The server goes on with the next line.
    """

    def __init__(self, source: Any) -> None:
        self._source = source
        self._reply: Any = None
        self._ready = anyio.Event()

    def attach(self, write_stream: Any) -> None:
        self._reply = write_stream
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self._source:
            if not line.strip():
                continue
            try:
                mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except Exception as exc:  # pydantic's ValidationError: the line is answered here
                await self._ready.wait()
                await self._reply.send(SessionMessage(_parse_error(line, exc)))
                continue
            yield line


def _parse_error(line: str, exc: Exception) -> Any:
    """The JSON-RPC error answering a line the SDK cannot take."""
    kinds = {e.get("type") for e in getattr(exc, "errors", lambda: [])()}
    request_id: int | str | None = None
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        rid = data.get("id")
        if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)):
            request_id = rid
    if "json_invalid" in kinds:
        code, message = (
            mcp_types.PARSE_ERROR,
            (
                "Parse error: the request is not JSON this server can read (a lone surrogate "
                "escape such as \\ud800, nesting deeper than 255 levels, or an integer of"
                " more than 4300 digits)"
            ),
        )
    else:
        code, message = mcp_types.INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 message"
    return mcp_types.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=mcp_types.ErrorData(code=code, message=message)
    )


# --------------------------------------------------------------------------- server


class _CortexServer(MCPServer):
    """An MCPServer that names unknown and missing arguments in one line.

    The SDK drops unknown arguments silently — a misspelt ``projct`` would search every
    project — and reports a missing one as a multi-line pydantic error.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._signatures: dict[str, tuple[list[str], list[str]]] = {}

    def register(self, fn: Callable[..., Any], annotations: ToolAnnotations) -> None:
        """Add `fn` as a tool named after it, described by its docstring."""
        params = inspect.signature(fn).parameters.values()
        names = [p.name for p in params]
        required = [p.name for p in params if p.default is inspect.Parameter.empty]
        self._signatures[fn.__name__] = (names, required)
        description = " ".join((fn.__doc__ or "").split())
        self.add_tool(fn, description=description, annotations=annotations, structured_output=True)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        signature = self._signatures.get(name)
        if signature is not None:
            names, required = signature
            unknown = sorted(set(arguments) - set(names))
            if unknown:
                return _refusal(
                    f"{name} has no argument {', '.join(map(repr, unknown))}; "
                    f"its arguments are {', '.join(names)}"
                )
            missing = [n for n in required if arguments.get(n) is None]
            if missing:
                return _refusal(f"{name} needs {', '.join(map(repr, missing))}")
        return await super().call_tool(name, arguments, context)

    async def run_stdio_async(self) -> None:
        """The SDK's stdio transport, with every line checked first (see _CheckedLines)."""
        from io import TextIOWrapper

        lines = _CheckedLines(
            anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
        )
        async with stdio_server(stdin=lines) as (read_stream, write_stream):  # type: ignore[arg-type]
            lines.attach(write_stream)
            lowlevel = self._lowlevel_server
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def build_server(engine: cortex.Engine, *, projects: Sequence[str] | None = None) -> MCPServer:
    """The MCP server of `engine`'s memories, not yet running (tests drive it in-process).

    With `projects`, the server is confined to those projects: every tool reads and writes
    only their memories (another project's id is not found), and a tool's `project`
    argument must name one of them (it defaults to the only one when there is one).
    """
    served = tuple(projects) if projects else None
    if served is not None:
        for name in served:
            validate.name("project", name)

    def confine(project: object) -> object:
        """The project a call may touch: the one given, checked against `served`."""
        if served is None:
            return project
        if project is _OMITTED or project is None:
            if len(served) == 1:
                return served[0]
            raise InvalidOptionError(
                f"this server serves the projects {', '.join(map(repr, served))}; "
                "pass project= to say which"
            )
        if project not in served:
            raise InvalidOptionError(
                f"project {project!r} is not served here; this server serves "
                + ", ".join(map(repr, served))
            )
        return project

    def scope(project: object) -> object:
        """The projects a search may see: the ones named (each served), else every
        served one (a search reads; it needs no single project as a write does)."""
        assert served is not None
        if project is _OMITTED or project is None:
            return list(served)
        if isinstance(project, list | tuple):
            for name in project:
                confine(name)
            return project
        return confine(project)

    def fetch(memory_id: object, project: object) -> cortex.Memory:
        """A memory by id, not found unless it belongs to the project (or the served ones)."""
        wanted = project if project is not _OMITTED else None
        if served is not None and wanted is not None:
            confine(wanted)
        memory = engine.get(memory_id, project=wanted)  # type: ignore[arg-type]
        if served is not None and memory.project not in served:
            raise NotFoundError(f"no memory with id {memory_id}")
        return memory

    server = _CortexServer(
        "cortex",
        version=cortex.__version__,
        instructions=(
            "Long-term memory. Call memory_context for what to read before a task (packed "
            "into a token budget, with a confidence), memory_search to look something up "
            '(FTS5 syntax works: deploy*, "blue green", a OR b, a NOT b); store a '
            "durable lesson, decision or fact with memory_add (seed 004's memory_learn); "
            "read one memory in full with memory_get, what happened around it with "
            "memory_timeline, its neighbours by meaning with memory_similar; search "
            "whole imported files with memory_documents."
        ),
        log_level="WARNING",
    )

    def memory_search(**arguments: Any) -> CallToolResult:
        """Search the memories by keyword, meaning or both; best first, each with its id,
        text (or the snippet around the match of a long one; memory_get reads it whole),
        date, project, source, score and why it matched, with total_results and status.
        explain adds every score part, verbose the full record."""
        query = arguments.pop("query", _OMITTED)
        verbose = arguments.pop("verbose", _OMITTED)
        changes = _given(**arguments)
        text = None if query is _OMITTED else query

        def work() -> dict[str, Any]:
            if served is not None:
                wanted = changes.get("project", _OMITTED)
                if (wanted is _OMITTED or wanted is None) and isinstance(changes.get("lens"), str):
                    # a lens's projects narrow the served ones (and must be served)
                    wanted = lenses.get(engine.store, changes["lens"])["options"].get(
                        "project", _OMITTED
                    )
                changes["project"] = scope(wanted)
            full = verbose not in (_OMITTED, None)
            if full and not isinstance(verbose, bool):
                raise InvalidOptionError(f"verbose must be true or false, not {verbose!r}")
            results = engine.search(text, **changes)
            return lean_search(results, explain=results_explained(changes), verbose=full)

        return _run(work)

    # Its arguments are the query and the fields of Options, described where they are
    # declared (options.option): a field added there is an argument here, no edit needed.
    memory_search.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [_QUERY, *_option_parameters(), _VERBOSE],
        return_annotation=Annotated[CallToolResult, SearchData],
    )

    def memory_add(
        content: Annotated[Text, _doc("string", "The memory's text.")],
        project: Annotated[Text, _doc("string", "The project it belongs to.")] = _OPTIONAL,
        session: Annotated[
            Text, _doc("string", "The session it was learned in (linked as 'created').")
        ] = _OPTIONAL,
        scope: Annotated[Text, _doc("string", "A scope, such as project:hydra/api.")] = _OPTIONAL,
        category: Annotated[
            Text, _doc("string", "A category, such as decision, lesson or fact.")
        ] = _OPTIONAL,
        sector: Annotated[Text, _doc("string", "A sector.")] = _OPTIONAL,
        tier: Annotated[Text, _doc("string", "A tier.")] = _OPTIONAL,
        salience: Annotated[
            Number, _doc("number", "How important, 0 to 1 (default 0.5).", minimum=0, maximum=1)
        ] = _OPTIONAL,
        confidence: Annotated[
            Number, _doc("number", "How sure, 0 to 1 (default 1).", minimum=0, maximum=1)
        ] = _OPTIONAL,
        created_at: Annotated[
            Text,
            _doc(
                ["string", "number"],
                "When it was learned: ISO 8601 or epoch seconds (default now).",
            ),
        ] = _OPTIONAL,
        metadata: Annotated[Object, _doc("object", "Any JSON object kept with it.")] = _OPTIONAL,
        source_path: Annotated[Text, _doc("string", "The file it came from.")] = _OPTIONAL,
    ) -> Annotated[CallToolResult, MemoryData]:
        """Store one memory (embedded when a model is installed) and return it as stored.
        This is seed 004's memory_learn: a lesson, decision, preference or correction is
        a memory with a category and a scope (universal, language:X, project:X,
        project:X:task:Y)."""

        def work() -> dict[str, Any]:
            fields = _given(
                project=confine(project),
                session=session,
                scope=scope,
                category=category,
                sector=sector,
                tier=tier,
                salience=salience,
                confidence=confidence,
                created_at=_when("created_at", created_at),
                metadata=metadata,
                source_path=source_path,
            )
            if not isinstance(content, str):
                raise InvalidOptionError("content must be a string: the memory's text")
            return engine.get(engine.add(content, **fields)).to_dict()

        return _run(work)

    def memory_timeline(
        anchor_id: Annotated[Integer, _doc("integer", "The memory to look around.")],
        before: Annotated[
            Integer,
            _doc("integer", "How many earlier memories (default 5).", minimum=0, maximum=1000),
        ] = _OPTIONAL,
        after: Annotated[
            Integer,
            _doc("integer", "How many later memories (default 5).", minimum=0, maximum=1000),
        ] = _OPTIONAL,
        project: Annotated[
            Text, _doc("string", "Only if the anchor belongs to this project.")
        ] = _OPTIONAL,
    ) -> Annotated[CallToolResult, TimelineData]:
        """The memories of the anchor's project just before and after it in time, oldest
        first, with the sessions they belong to."""
        counts = _given(before=before, after=after)

        def work() -> dict[str, Any]:
            anchor = fetch(anchor_id, project)
            return engine.timeline(anchor.id, **counts, project=anchor.project).to_dict()

        return _run(work)

    def memory_get(
        id: Annotated[Integer, _doc("integer", "The memory's id.")],
        project: Annotated[
            Text, _doc("string", "Only if the memory belongs to this project.")
        ] = _OPTIONAL,
    ) -> Annotated[CallToolResult, MemoryData]:
        """One memory in full: content, project, scope, dates, superseded_by, metadata."""
        return _run(lambda: fetch(id, project).to_dict())

    def memory_reinforce(
        ids: Annotated[
            Items,
            _doc(
                "array",
                "Ids of memories that proved useful (from memory_search).",
                items={"type": "integer"},
            ),
        ],
        amount: Annotated[
            Number, _doc("number", "Salience added to each, up to 1 (default 0.02).")
        ] = _OPTIONAL,
        project: Annotated[Text, _doc("string", "Only memories of this project.")] = _OPTIONAL,
    ) -> Annotated[CallToolResult, ReinforceData]:
        """Tell the memory which results helped: their salience grows, so later searches
        rank them higher. Searching alone never changes the ranking."""

        def work() -> dict[str, Any]:
            if not isinstance(ids, list) or not ids:
                raise InvalidOptionError("ids must be a non-empty array of memory ids")
            wanted = [fetch(i, project).id for i in ids]
            engine.reinforce(wanted, **_given(amount=amount))
            return {
                "reinforced": [
                    {"id": i, "salience": engine.get(i).to_dict()["salience"]} for i in wanted
                ]
            }

        return _run(work)

    def memory_documents(
        query: Annotated[
            Text,
            _doc(
                "string",
                "Words to find in whole imported files (their title and all their text);"
                " leave it out for the newest files.",
            ),
        ] = _OPTIONAL,
        project: Annotated[
            Items,
            _doc(
                ["string", "array"],
                "Only these projects' files: a name or a list of names.",
                items={"type": "string"},
            ),
        ] = _OPTIONAL,
        limit: Annotated[
            Integer,
            _doc("integer", "How many files at most (default 10).", minimum=1, maximum=1000),
        ] = _OPTIONAL,
        content: Annotated[
            Flag, _doc("boolean", "Add each file's whole text (default false).")
        ] = _OPTIONAL,
    ) -> Annotated[CallToolResult, DocumentsData]:
        """Search the imported Markdown files as whole documents, apart from their
        chunks: for a question whose words are spread over one long note."""
        text = None if query is _OMITTED else query
        given = _given(project=project, limit=limit, content=content)

        def work() -> dict[str, Any]:
            if served is not None:
                given["project"] = scope(given.get("project", _OMITTED))
            found = engine.search_documents(text, **given)
            return {"documents": [d.to_dict() for d in found]}

        return _run(work)

    def memory_similar(
        id: Annotated[Integer, _doc("integer", "The memory to find neighbours of.")],
        k: Annotated[
            Integer, _doc("integer", "How many (default 10).", minimum=1, maximum=100)
        ] = _OPTIONAL,
        project: Annotated[
            Text, _doc("string", "Only if the memory belongs to this project.")
        ] = _OPTIONAL,
        verbose: Annotated[
            Flag, _doc("boolean", "The full record of each result (default false).")
        ] = _OPTIONAL,
    ) -> Annotated[CallToolResult, SearchData]:
        """The memories nearest to one memory by meaning, best first, from its own project
        only: related notes, earlier decisions on the same subject, duplicates."""

        def work() -> dict[str, Any]:
            anchor = fetch(id, project)
            results = engine.similar(anchor.id, **_given(k=k), project=anchor.project)
            return lean_search(results, verbose=verbose is True)

        return _run(work)

    def memory_context(
        prompt: Annotated[
            Text, _doc("string", "The question or the need, in plain words (time words work).")
        ],
        max_tokens: Annotated[
            Integer,
            _doc("integer", "Budget of the memories' text (default 2000).", minimum=1),
        ] = _OPTIONAL,
        format: Annotated[
            Text,
            _doc(
                "string",
                "detailed (each memory whole, with the chunks around it), summary (each as "
                "its snippet) or checklist (one line each); default detailed.",
                enum=["detailed", "summary", "checklist"],
            ),
        ] = _OPTIONAL,
        project: Annotated[Text, _doc("string", "The current project (a wall).")] = _OPTIONAL,
        task: Annotated[Text, _doc("string", "The current task, for the scope.")] = _OPTIONAL,
        language: Annotated[
            Text, _doc("string", "The current language, for the scope.")
        ] = _OPTIONAL,
        verbose: Annotated[
            Flag, _doc("boolean", "Also each memory as a record (default false).")
        ] = _OPTIONAL,
    ) -> Annotated[CallToolResult, ContextAnswerData]:
        """What to read before answering: the best memories for the prompt packed into
        max_tokens as one text, with a calibrated confidence (0-1: low means memory holds
        nothing on it), follow-up suggestions and the scope pattern."""

        def work() -> dict[str, Any]:
            if not isinstance(prompt, str):
                raise InvalidOptionError("prompt must be a string: the question or the need")
            given = _given(max_tokens=max_tokens, format=format, task=task, language=language)
            wall = scope(project) if served is not None else project
            answer = engine.context(
                prompt,
                project=None if wall is _OMITTED else wall,  # type: ignore[arg-type]
                **given,
            )
            data = answer.to_dict()
            lean: dict[str, Any] = {
                "status": "ok" if answer.memories else "no_match",
                "confidence": data["confidence"],
                "scope": data["scope"],
                "total_found": data["total_found"],
                "total_returned": data["total_returned"],
                "token_estimate": data["token_estimate"],
                "text": data["text"],
                "ids": [m["id"] for m in answer.memories],
            }
            for key in ("suggestions", "notices"):
                if data[key]:
                    lean[key] = data[key]
            if verbose is True:
                lean["memories"] = data["memories"]
            return lean

        return _run(work)

    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    server.register(memory_documents, reads)
    server.register(
        memory_search,
        # Not read-only: a search records its recall unless record=false.
        ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
    )
    server.register(
        memory_add,
        ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    server.register(memory_timeline, reads)
    server.register(memory_get, reads)
    server.register(memory_similar, reads)
    server.register(
        memory_context,
        # Not read-only: its search records the recall, as memory_search does.
        ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
    )
    server.register(
        memory_reinforce,
        ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    return server


def _shown(db: Path | str) -> str:
    """The database as messages show it: a URL without its password."""
    if isinstance(db, str):
        from cortex.pg.db import redact

        return redact(db)
    return str(db)


def serve(
    db_path: Path | str, *, embedder: Any = "auto", projects: Sequence[str] | None = None
) -> None:
    """Open the database at `db_path` (creating it) and serve it over stdio until the
    client closes stdin. One Engine serves every call: the model loads once. With
    `projects`, every tool is confined to those projects' memories."""
    with cortex.open(db_path, embedder=embedder) as engine:
        build_server(engine, projects=projects).run("stdio")


def main(argv: list[str] | None = None) -> int:
    """`cortex mcp [--db PATH]`; returns the exit code (1 and one line for a cortex error)."""
    parser = argparse.ArgumentParser(
        prog="cortex mcp",
        description="Serve the cortex memory tools to an MCP client over stdio.",
    )
    parser.add_argument(
        "--db", help="the database file (default: $CORTEX_DB or the per-user cortex.db)"
    )
    parser.add_argument(
        "--project",
        action="append",
        metavar="NAME",
        help="serve only this project's memories (repeatable)",
    )
    args = parser.parse_args(argv)
    try:
        where = db_location(args.db) if args.db is not None else default_db()
    except CortexError as exc:
        print(f"cortex: error: {exc}", file=sys.stderr)
        return 1
    db = where
    if sys.stdin.isatty():  # a person ran it: say what it waits for (stdout is the protocol's)
        print(
            f"cortex mcp: serving {_shown(db)} over stdio; an MCP client starts this command "
            "(see the README's MCP section). Ctrl-C stops it.",
            file=sys.stderr,
        )
    try:
        serve(db, projects=args.project)
    except CortexError as exc:
        print(f"cortex: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
