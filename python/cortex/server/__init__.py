"""`cortex serve`: seed 003's HTTP API and a search page over one cortex database.

Built on Starlette, served by uvicorn. Starlette because the server is a thin layer: a
dozen routes that map JSON onto :class:`cortex.Options` and return the API's own
``to_dict()``. It is small, plain ASGI, has a TestClient that drives the app in-process
for the tests, serves the page's static files, and offers ``run_in_threadpool`` so the
Engine's blocking calls never stall the event loop. FastAPI would add pydantic models for
shapes cortex already validates itself (its messages are what a client should read, as in
the MCP server), and generate an OpenAPI document for models we would not otherwise write;
the document is written out in :mod:`cortex.server.openapi` instead.

Secure by default:

- bound to 127.0.0.1 unless told otherwise; any other address needs a token
  (``--token`` or ``$CORTEX_TOKEN``), sent as ``Authorization: Bearer <token>`` and
  compared in constant time. Without a token, only requests whose Host header is a
  loopback name are answered (no DNS rebinding), and every POST must be
  ``application/json`` (so a page of another site cannot post without CORS's consent);
- a server (``projects``) or a token (``tokens={token: [projects]}``) is confined to
  projects: a search naming another project is refused (403), a memory of another project
  is "not found" (404), and a search without a project filter searches only the allowed
  ones (until cortex filters several projects at once, a client allowed several names one
  per search: 400 otherwise);
- bodies over 1 MB are refused (413), each client (address, or address and token) has a
  token bucket (50 requests/s by default, 429 beyond), CORS is off unless origins are
  given;
- every search is recorded in the recall log with its client (``Options.recorded_as``,
  stored in its `lens` column): ``"http:<address>"``
  or ``"http:<address>:token-<first 8 hex of the token's SHA-256>"``; the token itself
  is never written anywhere;
- the access log holds method, path, status and milliseconds: no query string, no body,
  no memory text.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path

import cortex
from cortex.errors import CortexError, InvalidOptionError
from cortex.paths import db_location
from cortex.server.app import DEFAULT_BODY_LIMIT, DEFAULT_RATE, create_app
from cortex.server.security import is_loopback, parse_rate

__all__ = ["DEFAULT_BODY_LIMIT", "DEFAULT_PORT", "DEFAULT_RATE", "create_app", "serve"]

DEFAULT_PORT = 8765


def serve(
    db: str | os.PathLike[str],
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    *,
    token: str | None = None,
    projects: Sequence[str] | None = None,
    cors_origins: Sequence[str] = (),
    rate_limit: str | float | None = DEFAULT_RATE,
    body_limit: int = DEFAULT_BODY_LIMIT,
    log_level: str = "info",
) -> None:
    """Open `db` once (the model loads before the first request) and serve it until
    interrupted. A non-loopback `host` without a `token` is refused: it would give the
    memories to anyone who can reach the port."""
    import uvicorn

    if not is_loopback(host) and not token:
        raise CortexError(
            f"binding to {host} exposes the memories beyond this machine; give a token with "
            "--token or $CORTEX_TOKEN (or bind to 127.0.0.1)"
        )
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise InvalidOptionError(f"port must be an integer in [0, 65535], not {port!r}")
    rate = parse_rate(rate_limit) if isinstance(rate_limit, str) else rate_limit
    where = db_location(db)
    path: Path | str = where
    if isinstance(where, str):  # a server's database (postgresql://): its grants decide
        engine = cortex.open(where)
        path = engine.store.path  # the URL without its password: what the log shows
    else:
        engine = cortex.open(where, read_only=where.exists() and not os.access(where, os.W_OK))
    try:
        # Load the model (and open the vector index) now, not in the first user's search.
        engine.search("warm up", cortex.Options(record=False, limit=1))
        app = create_app(
            engine,
            token=token,
            projects=projects,
            rate_limit=rate,
            body_limit=body_limit,
            cors_origins=cors_origins,
            trusted_hosts=(host,),  # e.g. 127.0.0.2, also a loopback address
        )
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        logging.getLogger("cortex.server").setLevel(log_level.upper())
        shown = f"[{host}]" if ":" in host else host
        logging.getLogger("cortex.server").info(
            "serving %s on http://%s:%d/ (token: %s, projects: %s)",
            path,
            shown,
            port,
            "required" if token else "none",
            ", ".join(projects) if projects else "all",
        )
        # uvicorn finishes the requests in flight on SIGTERM, then raises the signal again
        # through the handler it found: make that an orderly exit (status 0, the engine
        # closed) rather than the default handler's kill.
        with _exit_on_sigterm():
            uvicorn.run(
                app,
                host=host,
                port=port,
                access_log=False,  # ours logs no query strings (see cortex.server.app._Gate)
                log_level="warning",
                server_header=False,
            )
    finally:
        engine.close()


@contextlib.contextmanager
def _exit_on_sigterm() -> Iterator[None]:
    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: leave signals to whoever owns them
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
