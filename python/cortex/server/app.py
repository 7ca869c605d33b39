"""The ASGI app: routes, the security gates in front of them, and the page.

Each endpoint reads its JSON body (bounded), maps it with :mod:`cortex.server.api`, runs
the Engine call in Starlette's thread pool (the Engine is thread-safe: one SQLite
connection per thread; the model and the vector scan release the GIL), and answers JSON.
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

import cortex
from cortex import recall
from cortex.errors import CortexError, NotFoundError, StorageError
from cortex.server import api
from cortex.server.api import ApiError
from cortex.server.openapi import docs_html, openapi_document
from cortex.server.security import (
    LOOPBACK_NAMES,
    Access,
    RateLimiter,
    TokenTable,
    host_allowed,
)

__all__ = ["DEFAULT_BODY_LIMIT", "DEFAULT_RATE", "create_app"]

log = logging.getLogger("cortex.server")

#: Largest request body accepted (a memory of 1 MB is already a book chapter).
DEFAULT_BODY_LIMIT = 1_000_000
#: Requests a second per client, on average (bursts of as many are allowed).
DEFAULT_RATE = 50.0
#: Headers of every answer: no sniffing, no referrer, the page only from this origin.
_SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}
_PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_MAX_ID = 2**63 - 1


def error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The one error shape: ``{"error": "<one line>"}``."""
    line = " ".join(message.split()) or "error"
    return JSONResponse({"error": line}, status_code=status, headers=dict(headers or {}))


def _encode_json(data: Any) -> bytes:
    """The UTF-8 JSON of an answer (the standard library's; orjson's when installed)."""
    return json.dumps(data, ensure_ascii=False, allow_nan=False, default=str).encode()


try:  # orjson writes a search's answer in ~1/6 of json's time (0.04 vs 0.25 ms for 17 kB)
    import orjson

    # Same output as json.dumps above, parsed: dates and dataclasses through `str` as
    # there, integer keys as strings. (A NaN would be null rather than a refusal.)
    _ORJSON_OPTIONS = (
        orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
    )

    def _encode_json(data: Any) -> bytes:
        try:
            return orjson.dumps(data, default=str, option=_ORJSON_OPTIONS)
        except (TypeError, orjson.JSONEncodeError):  # e.g. an integer beyond 64 bits
            return json.dumps(data, ensure_ascii=False, allow_nan=False, default=str).encode()

except ImportError:  # pragma: no cover - orjson is optional
    pass


def _json(data: Any, status: int = 200, background: BackgroundTask | None = None) -> Response:
    return Response(
        _encode_json(data), status_code=status, media_type="application/json", background=background
    )


class _Gate:
    """Pure ASGI middleware in front of everything: the access log (method, path, status,
    milliseconds: never a body, a query string or memory text) and the security headers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_with_headers(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                for k, v in _SECURITY_HEADERS.items():
                    if k.encode() not in names:
                        headers.append((k.encode(), v.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            client = scope.get("client") or ("-", 0)
            log.info(
                "%s %s %s %d %.1fms",
                client[0],
                scope.get("method", "-"),
                scope.get("path", "-"),
                status,
                (time.perf_counter() - started) * 1000,
            )


class Server:
    """The endpoints of one Engine, and the rules every request passes."""

    def __init__(
        self,
        engine: cortex.Engine,
        *,
        tokens: TokenTable,
        projects: frozenset[str] | None,
        rate_limit: float | None,
        body_limit: int,
        trusted_hosts: Sequence[str],
    ) -> None:
        self.engine = engine
        self.tokens = tokens
        self.projects = projects
        self.limiter = RateLimiter(rate_limit) if rate_limit else None
        self.body_limit = body_limit
        self.trusted_hosts = tuple(trusted_hosts)
        self.caps = api.Capabilities.of()
        self.started = time.time()

    # ------------------------------------------------------------------ gates

    def access(self, request: Request) -> Access | Response:
        """Who is asking and what they may see, or the refusal."""
        client = request.client.host if request.client else "-"
        if not self.tokens and not host_allowed(request.headers.get("host"), self.trusted_hosts):
            # No token: only pages served from this machine's own names may call. A page
            # of another site whose DNS name now points here (DNS rebinding) is refused.
            return error(403, "this host name is not served; use http://127.0.0.1 or localhost")
        projects = self.projects
        label = client
        if self.tokens:
            header = request.headers.get("authorization", "")
            scheme, _, presented = header.partition(" ")
            if scheme.lower() != "bearer" or not presented.strip():
                return error(
                    401,
                    "this server needs a token: send the header Authorization: Bearer <token>",
                    {"www-authenticate": "Bearer"},
                )
            found = self.tokens.match(presented.strip())
            if found is None:
                return error(401, "the token is not accepted", {"www-authenticate": "Bearer"})
            walls, name = found
            if walls is not None:
                projects = walls if projects is None else projects & walls
            label = f"{client}:{name}"
        if self.limiter is not None:
            wait = self.limiter.take(label)
            if wait > 0:
                return error(
                    429,
                    f"too many requests; retry in {wait:.2f} s",
                    {"retry-after": str(max(1, round(wait + 0.5)))},
                )
        return Access(projects, label)

    async def body(self, request: Request) -> Any:
        """The request's JSON, read up to the body limit (413 beyond it, even chunked)."""
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            # Also what keeps a page of another site from posting (a cross-site form or
            # fetch with text/plain needs no CORS preflight; application/json does).
            raise ApiError(415, "send the body as JSON with Content-Type: application/json")
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.body_limit:
            raise ApiError(413, f"the body is larger than {self.body_limit} bytes")
        chunks = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.body_limit:
                raise ApiError(413, f"the body is larger than {self.body_limit} bytes")
            chunks.append(chunk)
        return api.parse_json(b"".join(chunks))

    def guard(
        self, handler: Callable[[Request, Access], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """Wrap an endpoint: the gates first, then ApiError/CortexError as 4xx JSON."""

        async def endpoint(request: Request) -> Response:
            who = self.access(request)
            if isinstance(who, Response):
                return who
            try:
                return await handler(request, who)
            except ApiError as exc:
                return error(exc.status, exc.message)
            except NotFoundError as exc:
                return error(404, str(exc))
            except StorageError as exc:
                return error(503, str(exc))
            except CortexError as exc:
                return error(400, str(exc))
            except Exception as exc:  # a bug: never its text (it may hold memory text)
                log.error("internal error in %s: %s", request.url.path, type(exc).__name__)
                return error(500, "internal error; the server log names it")

        return endpoint

    @staticmethod
    def lens(who: Access) -> str:
        return f"http:{who.client}"

    def visible(self, memory: cortex.Memory, who: Access) -> cortex.Memory:
        """The memory if the client may see it; a memory behind the wall is "not found",
        with the same message as a missing one, so ids do not reveal other projects."""
        if not who.admits(memory.project):
            raise NotFoundError(f"no memory with id {memory.id}")
        return memory

    # ------------------------------------------------------------------ endpoints

    async def search(self, request: Request, who: Access) -> Response:
        plan = api.plan_search(await self.body(request), self.caps, who.projects)
        data = await run_in_threadpool(self._search, plan, who)
        return _json(data, background=BackgroundTask(self.settle))

    async def settle(self) -> None:
        """After the answer is sent: wait for its recall rows to be written (the Engine's
        recorder writes them on its own thread; a request completes when they are in the
        log). The recorder wakes the loop: no thread of the pool waits for it."""
        when = getattr(self.engine, "when_recalls_written", None)
        if when is None:
            return
        loop = asyncio.get_running_loop()
        written = asyncio.Event()
        when(lambda: loop.call_soon_threadsafe(written.set))
        await written.wait()

    def _search(self, plan: api.SearchPlan, who: Access) -> dict[str, Any]:
        kw = {**plan.options, "recorded_as": self.lens(who), "record": True}
        if not plan.emulate_offset:
            results = self.engine.search(plan.query, api.build_options(kw))
            data = results.to_dict()
            has_more = getattr(results, "has_more", None)
            next_cursor = getattr(results, "next_cursor", None)
        else:
            # Options has no offset yet: rank offset + limit + 1 without recording, keep
            # the page, and record exactly the page (what the engine would record).
            kw["limit"] = plan.offset + plan.limit + 1
            opts = api.build_options({**kw, "record": False})
            results = self.engine.search(plan.query, opts)
            data = results.to_dict()
            page = data["results"][plan.offset : plan.offset + plan.limit]
            has_more = len(data["results"]) > plan.offset + plan.limit
            next_cursor = api.encode_cursor(plan.offset + plan.limit) if has_more else None
            data["results"] = page
            notices = list(data.get("notices") or [])
            self._record(page, results.query, opts, notices)
            data["notices"] = notices
        rows = [api.decorate_result(r) for r in data.pop("results")]
        aggregations = data.pop("aggregations", None)
        out = {
            **data,
            "interpretation": api.interpretation(data, plan.query),
            "results": rows,
            "aggregations": api.seed_aggregations(aggregations)
            if isinstance(aggregations, Mapping)
            else api.fallback_aggregations(rows),
            "pagination": {
                "limit": plan.limit,
                "offset": plan.offset,
                "returned": len(rows),
                "hasMore": bool(has_more) if has_more is not None else None,
                "nextCursor": next_cursor,
            },
        }
        return out

    def _record(
        self,
        page: list[dict[str, Any]],
        query: str | None,
        opts: cortex.Options,
        notices: list[str],
    ) -> None:
        store = self.engine.store
        if not page or store.read_only:
            return
        rows = [
            (r["id"], r["facts"][0]["id"] if r.get("facts") else None, r["score"]) for r in page
        ]
        try:
            recall.record_recall(
                store,
                rows,
                query=query,
                session_id=opts.session_id,
                lens=opts.recorded_as if opts.recorded_as else opts.lens,
                reinforce=opts.reinforce,
            )
        except StorageError as exc:
            notices.append(f"recall not recorded: {exc}")

    async def llm_search(self, request: Request, who: Access) -> Response:
        plan = api.plan_llm(await self.body(request), who.projects)
        data = await run_in_threadpool(self._llm, plan, who)
        return _json(data, background=BackgroundTask(self.settle))

    def _llm(self, plan: api.LlmPlan, who: Access) -> dict[str, Any]:
        context = getattr(self.engine, "context", None)
        if callable(context):
            # Engine.context: the project is the wall; the client's lens is a label of the
            # client, not a saved lens of the database, so it is not passed as Options(lens=).
            answer = context(
                plan.prompt,
                max_tokens=plan.max_tokens,
                format=plan.format,
                project=plan.project,
                task=plan.task,
                language=plan.language,
            )
            data: dict[str, Any] = answer.to_dict()
            data["basis"] = "context"
            return api.prune(data, who.projects) if who.projects is not None else data
        opts = api.build_options(
            {
                "token_budget": plan.max_tokens,
                "project": plan.project,
                "recorded_as": self.lens(who),
                "limit": 50,
            }
        )
        results = self.engine.search(plan.prompt, opts)
        return api.pack_for_llm(results.to_dict(), plan)

    async def add(self, request: Request, who: Access) -> Response:
        kw = api.add_arguments(await self.body(request), who.projects)
        memory = await run_in_threadpool(self._add, kw)
        return _json(memory, status=201)

    def _add(self, kw: dict[str, Any]) -> dict[str, Any]:
        memory_id = self.engine.add(kw.pop("content"), **kw)
        return self.engine.get(memory_id).to_dict()

    @staticmethod
    def memory_id(request: Request) -> int:
        raw = request.path_params["memory_id"]
        if not raw.isascii() or not raw.isdigit() or len(raw) > 19 or int(raw) > _MAX_ID:
            raise ApiError(400, f"a memory id is a positive integer, not {raw[:40]!r}")
        return int(raw)

    @staticmethod
    def query_params(request: Request, known: Mapping[str, tuple[int, int, int]]) -> dict[str, int]:
        api.unknown_fields("the query string", dict(request.query_params), list(known))
        out = {}
        for name, (default, lo, hi) in known.items():
            raw = request.query_params.get(name)
            if raw is None:
                out[name] = default
            elif not raw.isascii() or not raw.isdigit() or not lo <= int(raw) <= hi:
                raise ApiError(400, f"{name} must be an integer between {lo} and {hi}")
            else:
                out[name] = int(raw)
        return out

    async def get(self, request: Request, who: Access) -> Response:
        memory_id = self.memory_id(request)
        self.query_params(request, {})
        memory = await run_in_threadpool(self.engine.get, memory_id)
        return _json(self.visible(memory, who).to_dict())

    async def timeline(self, request: Request, who: Access) -> Response:
        memory_id = self.memory_id(request)
        params = self.query_params(request, {"before": (5, 0, 100), "after": (5, 0, 100)})
        tl = await run_in_threadpool(
            self.engine.timeline, memory_id, params["before"], params["after"]
        )
        self.visible(tl.anchor, who)  # the rest of a timeline is the anchor's project
        data = tl.to_dict()
        if who.projects is not None:
            data["sessions"] = {
                k: s for k, s in data["sessions"].items() if s["project"] in (None, *who.projects)
            }
        return _json(data)

    async def projects_list(self, request: Request, who: Access) -> Response:
        stats = await run_in_threadpool(self.engine.stats)
        counts = {p: n for p, n in stats["projects"].items() if who.admits(p)}
        if who.projects is not None:
            for name in who.projects:
                counts.setdefault(name, 0)
        return _json({"projects": counts})

    async def health(self, request: Request, who: Access) -> Response:
        return _json(
            {
                "status": "ok",
                "version": cortex.__version__,
                "uptime_s": round(time.time() - self.started, 1),
                # not `engine.store`: it waits for queued recall rows (on the event loop)
                "read_only": self.engine.read_only,
                "projects": sorted(who.projects) if who.projects is not None else None,
                "capabilities": self.caps.to_dict(),
            }
        )


def _static_text(name: str) -> str:
    return resources.files("cortex.server").joinpath("static", name).read_text("utf-8")


def create_app(
    engine: cortex.Engine,
    *,
    token: str | None = None,
    tokens: Mapping[str, Sequence[str] | None] | None = None,
    projects: Sequence[str] | None = None,
    rate_limit: float | None = DEFAULT_RATE,
    body_limit: int = DEFAULT_BODY_LIMIT,
    cors_origins: Sequence[str] = (),
    trusted_hosts: Sequence[str] = (),
) -> Starlette:
    """The ASGI app serving `engine` (which the caller opens and closes).

    `token` (or several in `tokens`, each limited to a list of projects or None) makes
    every ``/api/`` request carry ``Authorization: Bearer <token>``; `projects` confines the
    whole server to those projects (a token's list narrows it further). `rate_limit` is
    requests a second per client (None: no limit); `body_limit` the largest body in bytes;
    `cors_origins` the origins whose pages may call the API (none by default).
    `trusted_hosts`: Host header names served without a token besides the loopback ones.
    """
    table = {**({token: None} if token else {}), **(tokens or {})}
    server = Server(
        engine,
        tokens=TokenTable(table),
        projects=frozenset(projects) if projects is not None else None,
        rate_limit=rate_limit,
        body_limit=body_limit,
        trusted_hosts=(*LOOPBACK_NAMES, *trusted_hosts),
    )
    g = server.guard
    index = _static_text("index.html")
    spec = openapi_document()
    docs = docs_html(spec)
    page_headers = {"content-security-policy": _PAGE_CSP, "cache-control": "no-store"}

    async def page(request: Request) -> Response:
        return HTMLResponse(index, headers=page_headers)

    async def docs_page(request: Request) -> Response:
        return HTMLResponse(docs, headers=page_headers)

    async def openapi(request: Request) -> Response:
        return _json(spec)

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        detail = getattr(exc, "detail", None) or "not found"
        if status == 405:
            return error(405, f"{request.method} is not allowed on {html.escape(request.url.path)}")
        return error(status, str(detail))

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/docs", docs_page, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/api/health", g(server.health), methods=["GET"]),
        Route("/api/projects", g(server.projects_list), methods=["GET"]),
        Route("/api/memories/search", g(server.search), methods=["POST"]),
        Route("/api/memories/llm-search", g(server.llm_search), methods=["POST"]),
        Route("/api/memories", g(server.add), methods=["POST"]),
        Route("/api/memories/{memory_id}", g(server.get), methods=["GET"]),
        Route("/api/memories/{memory_id}/timeline", g(server.timeline), methods=["GET"]),
        Mount(
            "/static",
            app=StaticFiles(packages=[("cortex.server", "static")], follow_symlink=False),
            name="static",
        ),
    ]
    middleware = [Middleware(_Gate)]
    if cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["authorization", "content-type"],
                max_age=600,
            )
        )
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={404: not_found, 405: not_found},
    )
    app.state.server = server
    return app
