"""Hostile requests through the HTTP API and the CLI (session 11's fuzzing).

A property: any JSON object, of any keys the endpoints know or not and values of every
JSON type at their extremes, posted to search, llm-search and add with a token limited to
one project, answers 2xx or 4xx with a JSON error, never 5xx, and never shows a memory of
the other project. Two cases it found, each a 500 or an "internal error" before the fix: a
JSON integer of more digits than Python converts (4300) in an HTTP body, and in the CLI's
``--metadata`` (that and a too-deep nesting were reported as bugs, exit 70).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

import cortex
from cortex.server import create_app

from .conftest import db_digest, run_cli

TOKEN = "alpha-only-token-0123456789abcdef"
SECRET = "zanzibar"
SEARCH = ["context", "explain", "mode", "query", "sort", "strategies", "bogus"]
FILTERS = [
    "category", "code", "dateRange", "factType", "hasCode", "includeSuperseded",
    "minConfidence", "minSalience", "patterns", "projects", "scope", "sector", "session",
    "sourcePrefix", "tier",
]  # fmt: skip
OPTIONS = [
    "alpha", "approximate", "category", "context", "created_since", "created_until",
    "cursor", "explain", "fact_type", "fusion", "half_life_days", "include_documents",
    "include_facts", "include_superseded", "lens", "limit", "min_confidence",
    "min_salience", "min_score", "min_similarity", "mode", "now", "nprobe", "offset",
    "order", "order_by", "recency_weight", "reinforce", "rrf_k", "salience_weight", "scope",
    "sector", "sector_weights", "session", "session_id", "source_prefix", "thread",
    "thread_tokens", "time_filter", "token_budget", "project",
]  # fmt: skip
LLM = ["context", "format", "max_tokens", "prompt"]
ADD = [
    "category", "confidence", "content", "created_at", "metadata", "project", "salience",
    "scope", "sector", "session", "source_path", "tier",
]  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(
        [
            "beta",
            "deploy",
            "NOT deploy",
            '"beta deploy"',
            "9999-12-31",
            "0001-01-01",
            "2026-02-30",
            "\u202e",
            "数据库🚀",
            "content:beta",
            "*",
            "a" * 3000,
            "keyword",
            "semantic",
            "recency",
            "compact",
        ]
    ),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["since", "until", "from", "to", "a"]), inner, max_size=2),
    ),
    max_leaves=4,
)


def _fields(keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(keys), VALUES, max_size=2)


SEARCH_BODIES = st.builds(
    lambda top, filters, options, page: {
        **top,
        **({"filters": filters} if filters is not None else {}),
        **({"options": options} if options is not None else {}),
        **({"pagination": page} if page is not None else {}),
    },
    _fields(SEARCH),
    st.none() | _fields(FILTERS),
    st.none() | _fields(OPTIONS),
    st.none() | _fields(["limit", "offset", "cursor"]),
)
BODIES = {
    "/api/memories/search": SEARCH_BODIES,
    "/api/memories/llm-search": _fields(LLM),
    "/api/memories": _fields(ADD),
}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, embedder) -> Iterator[TestClient]:
    db = Path(tmp_path_factory.mktemp("http")) / "h.db"
    with cortex.open(db, embedder=embedder) as e:
        e.add_many([{"content": f"alpha deploy note {i}", "project": "alpha"} for i in range(15)])
        e.add_many([{"content": f"beta deploy {SECRET} {i}", "project": "beta"} for i in range(15)])
        app = create_app(e, tokens={TOKEN: ["alpha"]}, rate_limit=None)
        with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as c:
            yield c


def _post(client: TestClient, path: str, body: bytes) -> Any:
    return client.post(
        path,
        content=body,
        headers={"authorization": f"Bearer {TOKEN}", "content-type": "application/json"},
    )


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    path_body=st.sampled_from(sorted(BODIES)).flatmap(
        lambda path: st.tuples(st.just(path), BODIES[path])
    ),
    query=st.sampled_from([None, "deploy", SECRET, "beta deploy", "deploy NOT alpha"]),
)
def test_any_json_body_is_answered_within_the_wall(
    client: TestClient, path_body: tuple[str, dict[str, Any]], query: str | None
) -> None:
    path, body = path_body
    if query is not None and "query" not in body and path.endswith("/search"):
        body = {**body, "query": query}
    if query is not None and "prompt" not in body and path.endswith("llm-search"):
        body = {**body, "prompt": query}
    r = _post(client, path, json.dumps(body).encode())
    assert r.status_code < 500, (body, r.text)
    answer = r.json()
    if r.status_code >= 400:
        assert isinstance(answer.get("error"), str) and answer["error"], answer
    # a memory of the other project: its text ("... zanzibar 3") or its id
    assert not re.search(SECRET + r" \d", r.text), (body, r.text[:500])


def test_an_integer_of_too_many_digits_is_a_400(client: TestClient, tmp_path: Path) -> None:
    for body in (
        b'{"query": "deploy", "limit": 1' + b"0" * 5000 + b"}",
        b'{"content": "x", "salience": 1' + b"0" * 5000 + b"}",
    ):
        for path in ("/api/memories/search", "/api/memories"):
            r = _post(client, path, body)
            assert r.status_code == 400, r.text
            assert "digits" in r.json()["error"]


def test_cli_metadata_beyond_what_json_reads_is_a_usage_error(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    run_cli("--db", str(db), "add", "first")
    before = db_digest(db)
    for metadata, says in (
        ('{"a": 1' + "0" * 5000 + "}", "digits"),
        ('{"a": ' + "[" * 20000 + "]" * 20000 + "}", "nested too deeply"),
    ):
        out = run_cli("--db", str(db), "add", "x", "--metadata", metadata)
        assert out.code == 2, out
        assert says in out.err and "internal error" not in out.err
        assert len(out.err.strip().splitlines()) == 1
    assert db_digest(db) == before
