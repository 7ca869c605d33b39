"""The OpenAPI 3.1 document of the HTTP API, written out, and a plain page that shows it.

Written by hand rather than generated from a framework's models: the endpoints take
seed 003's shapes, which are not the API's dataclasses, and writing them down once is
shorter than teaching a generator. The ``options`` object is generated from
:class:`cortex.Options`, so a field added there is documented here at once.
``tests/test_server.py`` checks that every route is documented and every documented
route exists.
"""

from __future__ import annotations

import dataclasses
import html
import json
import typing
from datetime import datetime
from typing import Any

import cortex
from cortex.options import MAX_LIMIT, Options
from cortex.server.api import FORMATS, SERVER_OWNED, STRATEGIES

__all__ = ["docs_html", "openapi_document"]

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string", "description": "one line: what and the fix"}},
}


def _errors(*codes: int) -> dict[str, Any]:
    meaning = {
        400: "malformed JSON or a bad value (cortex's own message)",
        401: "a token is needed, or the one sent is not accepted",
        403: "a project outside this client's, or a host name not served",
        404: "no such memory (or one behind the project wall)",
        413: "the body is larger than the limit",
        415: "the body is not sent as application/json",
        422: "an unknown field",
        429: "rate limited (Retry-After says when to retry)",
    }
    return {
        str(c): {
            "description": meaning[c],
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
        for c in codes
    }


def _json_schema(hint: Any) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if origin is not None and len(args) == 1 and type(None) in typing.get_args(hint):
        return {**_json_schema(args[0]), "nullable": True}
    if hint is bool:
        return {"type": "boolean"}
    if hint is int:
        return {"type": "integer"}
    if hint is float:
        return {"type": "number"}
    if hint is datetime:
        return {"type": "string", "format": "date-time"}
    if isinstance(hint, type) and issubclass(hint, str):
        members = getattr(hint, "__members__", None)
        values = [str(m) for m in members.values()] if members else None
        return {"type": "string", **({"enum": values} if values else {})}
    if origin in (list, tuple) or (args and origin is not None and not isinstance(origin, type)):
        return {}
    return {"type": "object"} if origin is not None else {}


def _options_schema() -> dict[str, Any]:
    hints = typing.get_type_hints(Options)
    defaults = Options()
    props = {}
    for f in dataclasses.fields(Options):
        if f.name in SERVER_OWNED or f.name in ("limit", "offset", "cursor"):
            continue
        schema = _json_schema(hints[f.name])
        default = getattr(defaults, f.name)
        if isinstance(default, bool | int | float | str) or default is None:
            schema["default"] = str(default) if isinstance(default, str) else default
        props[f.name] = schema
    return {
        "type": "object",
        "additionalProperties": False,
        "description": "Any cortex.Options field, as the Python API takes it (see the "
        "README); record, recorded_as and project are set by the server.",
        "properties": props,
    }


def openapi_document() -> dict[str, Any]:
    memory_ref = {"$ref": "#/components/schemas/Memory"}
    search_request = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "query": {
                "type": ["string", "null"],
                "description": "words or FTS5 syntax; null lists by filters",
            },
            "mode": {"type": "string", "enum": ["keyword", "semantic", "hybrid"]},
            "strategies": {
                "type": "array",
                "items": {"type": "string", "enum": list(STRATEGIES)},
                "description": "seed 003's name for the mode; keyword, semantic or both",
            },
            "filters": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "projects": {"type": "array", "items": {"type": "string"}},
                    "dateRange": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "start": {"type": "string", "format": "date-time"},
                            "end": {"type": "string", "format": "date-time"},
                        },
                    },
                    **{
                        k: {"type": "string"}
                        for k in ("category", "session", "sector", "tier", "scope", "sourcePrefix")
                    },
                    "minConfidence": {"type": "number"},
                    "minSalience": {"type": "number"},
                    "includeSuperseded": {"type": "boolean"},
                    "hasCode": {"type": "boolean"},
                    "code": {"type": "string"},
                    "factType": {"type": "string"},
                    "patterns": {"type": "array", "items": {"type": "string"}},
                },
            },
            "context": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "expandChunks": {"type": "boolean"},
                    "chunks": {"type": "integer", "minimum": 0, "maximum": 50},
                    "thread": {"type": "boolean"},
                    "includeRelated": {"type": "boolean"},
                    "maxContextSize": {"type": "integer", "minimum": 1},
                },
            },
            "pagination": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 20},
                    "offset": {"type": "integer", "minimum": 0},
                    "cursor": {"type": "string"},
                },
            },
            "sort": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "by": {"type": "string", "enum": ["relevance", "recency", "confidence"]},
                    "order": {"type": "string", "enum": ["asc", "desc"]},
                },
            },
            "explain": {"type": "boolean"},
            "options": {"$ref": "#/components/schemas/Options"},
        },
        "example": {
            "query": "how do we ship a release",
            "filters": {"dateRange": {"start": "2026-01-01"}},
            "pagination": {"limit": 10},
        },
    }
    search_response = {
        "type": "object",
        "properties": {
            "query": {"type": ["string", "null"]},
            "mode": {"type": "string"},
            "rewritten": {"type": ["string", "null"]},
            "notices": {"type": "array", "items": {"type": "string"}},
            "hidden": {"type": "integer"},
            "interpretation": {"type": "object"},
            "results": {
                "type": "array",
                "description": "cortex's Result.to_dict() (as `cortex search --json`), plus "
                "highlights, score_parts, context and related",
                "items": {"type": "object", "properties": {"memory": memory_ref}},
            },
            "aggregations": {"type": "object"},
            "pagination": {
                "type": "object",
                "properties": {
                    "limit": {"type": "integer"},
                    "offset": {"type": "integer"},
                    "returned": {"type": "integer"},
                    "hasMore": {"type": ["boolean", "null"]},
                    "nextCursor": {"type": ["string", "null"]},
                },
            },
        },
    }
    add_request = {
        "type": "object",
        "required": ["content"],
        "additionalProperties": False,
        "properties": {
            "content": {"type": "string"},
            **{
                k: {"type": ["string", "null"]}
                for k in ("project", "session", "sector", "tier", "scope", "category")
            },
            "salience": {"type": "number", "minimum": 0, "maximum": 1},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "created_at": {"type": ["string", "number"], "description": "ISO 8601 or epoch s"},
            "metadata": {"type": "object"},
            "source_path": {"type": ["string", "null"]},
        },
        "example": {"content": "We deploy with a blue-green switch", "project": "hydra"},
    }
    llm_request = {
        "type": "object",
        "required": ["prompt"],
        "additionalProperties": False,
        "properties": {
            "prompt": {"type": "string"},
            "context": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "current_file": {"type": "string"},
                    "current_project": {"type": "string"},
                    "recent_queries": {"type": "array", "items": {"type": "string"}},
                    "task": {"type": "string"},
                    "language": {"type": "string"},
                },
            },
            "format": {"type": "string", "enum": list(FORMATS), "default": "detailed"},
            "max_tokens": {"type": "integer", "minimum": 1, "default": 2000},
        },
        "example": {"prompt": "how do we ship a release?", "max_tokens": 500},
    }
    memory_id = {
        "name": "memory_id",
        "in": "path",
        "required": True,
        "schema": {"type": "integer", "minimum": 1},
    }

    def body(schema: dict[str, Any]) -> dict[str, Any]:
        return {"required": True, "content": {"application/json": {"schema": schema}}}

    def ok(description: str, schema: dict[str, Any], code: str = "200") -> dict[str, Any]:
        return {
            code: {"description": description, "content": {"application/json": {"schema": schema}}}
        }

    gates = (401, 403, 429)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "cortex",
            "version": cortex.__version__,
            "description": "Local-first memory search: seed 003's HTTP API over one cortex "
            'database. Errors are {"error": "<one line>"} with a 4xx status. With a token, '
            "send Authorization: Bearer <token>.",
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": _ERROR,
                "Options": _options_schema(),
                "Memory": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer"},
                        "content": {"type": "string"},
                        "project": {"type": ["string", "null"]},
                        "source_path": {"type": ["string", "null"]},
                        "chunk_index": {"type": ["integer", "null"]},
                        "created_at": {"type": ["string", "null"]},
                    },
                },
            },
        },
        "security": [{}, {"bearer": []}],
        "paths": {
            "/api/memories/search": {
                "post": {
                    "summary": "Search the memories (seed 003's MemorySearchRequest)",
                    "requestBody": body(search_request),
                    "responses": {
                        **ok("results, best first, with the search's envelope", search_response),
                        **_errors(400, 413, 415, 422, *gates),
                    },
                }
            },
            "/api/memories/llm-search": {
                "post": {
                    "summary": "The memories an agent should read, packed into max_tokens",
                    "requestBody": body(llm_request),
                    "responses": {
                        **ok(
                            "answer, memories, suggestions, a calibrated confidence, the"
                            " scope pattern, text packed into max_tokens (Engine.context)",
                            {"type": "object"},
                        ),
                        **_errors(400, 413, 415, 422, *gates),
                    },
                }
            },
            "/api/memories": {
                "post": {
                    "summary": "Store one memory",
                    "requestBody": body(add_request),
                    "responses": {
                        **ok("the memory as stored", memory_ref, "201"),
                        **_errors(400, 413, 415, 422, *gates),
                    },
                }
            },
            "/api/memories/{memory_id}": {
                "get": {
                    "summary": "One memory in full",
                    "parameters": [memory_id],
                    "responses": {**ok("the memory", memory_ref), **_errors(400, 404, *gates)},
                }
            },
            "/api/memories/{memory_id}/timeline": {
                "get": {
                    "summary": "The memories of its project just before and after it",
                    "parameters": [
                        memory_id,
                        *(
                            {
                                "name": n,
                                "in": "query",
                                "schema": {"type": "integer", "minimum": 0, "maximum": 100},
                            }
                            for n in ("before", "after")
                        ),
                    ],
                    "responses": {
                        **ok("anchor, before, after, sessions", {"type": "object"}),
                        **_errors(400, 404, 422, *gates),
                    },
                }
            },
            "/api/projects": {
                "get": {
                    "summary": "The projects this client may search, with memory counts",
                    "responses": {**ok("projects", {"type": "object"}), **_errors(*gates)},
                }
            },
            "/api/health": {
                "get": {
                    "summary": "Liveness, version and what this server supports",
                    "responses": {**ok("status", {"type": "object"}), **_errors(*gates)},
                }
            },
        },
    }


def docs_html(spec: dict[str, Any]) -> str:
    """The document as one plain HTML page: each endpoint, its body and its answers, with
    a form to send a request (static/docs.js, no external script)."""
    e = html.escape
    parts = []
    for path, methods in spec["paths"].items():
        for method, op in methods.items():
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            schema = body.get("schema", {})
            example = schema.get("example")
            codes = ", ".join(
                f"<code>{e(c)}</code> {e(r['description'])}" for c, r in op["responses"].items()
            )
            params = ", ".join(e(p["name"]) for p in op.get("parameters", []))
            try_it = (
                f'<form class="try" data-method="{e(method.upper())}" data-path="{e(path)}">'
                f"<label>Request to <code>{e(method.upper())} {e(path)}</code>"
                + (
                    f'<textarea name="body" rows="4" spellcheck="false">'
                    f"{e(json.dumps(example, indent=1)) if example else '{}'}</textarea>"
                    if method == "post"
                    else f'<input name="path" value="{e(path.replace("{memory_id}", "1"))}">'
                )
                + '</label><button type="submit">Send</button>'
                '<pre class="out" aria-live="polite"></pre></form>'
            )
            parts.append(
                f'<section id="{e(method)}-{e(path)}"><h2><code>{e(method.upper())} '
                f"{e(path)}</code></h2><p>{e(op['summary'])}</p>"
                + (f"<p>Parameters: {params}</p>" if params else "")
                + (
                    "<details><summary>Request body schema</summary><pre>"
                    f"{e(json.dumps(schema, indent=2))}</pre></details>"
                    if schema
                    else ""
                )
                + f"<p>Answers: {codes}</p>{try_it}</section>"
            )
    options = json.dumps(spec["components"]["schemas"]["Options"], indent=2)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>cortex API {e(spec['info']['version'])}</title>"
        '<link rel="icon" href="data:,"><link rel="stylesheet" href="/static/style.css">'
        '</head><body class="docs">'
        '<header class="topbar"><h1>cortex HTTP API</h1>'
        '<nav><a href="/">Search</a> · <a href="/openapi.json">openapi.json</a></nav></header>'
        f"<main><p>{e(spec['info']['description'])}</p>"
        '<label class="token">Token (if the server needs one) '
        '<input id="token" type="password" autocomplete="off"></label>'
        + "".join(parts)
        + "<section><h2>The <code>options</code> object</h2><pre>"
        + e(options)
        + '</pre></section></main><script src="/static/docs.js"></script></body></html>'
    )
