"""The user-facing surfaces on a PostgreSQL URL: the CLI (`--db postgresql://…` and
CORTEX_DB), the MCP server (`cortex mcp --db postgresql://…`, over stdio) and the HTTP API
(`create_app` on an Engine opened on the URL), against the real test server."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from anyio.from_thread import start_blocking_portal
from mcp import Client, StdioServerParameters
from starlette.testclient import TestClient

import cortex
from cortex.server import create_app
from tests.conftest import run_cli


def test_cli_on_a_url_and_on_cortex_db(pg_url: str) -> None:
    added = run_cli("--db", pg_url, "add", "we deploy the api with blue-green", "--project", "ops")
    assert added.code == 0, added.err
    env = {"CORTEX_DB": pg_url}
    assert run_cli("add", "the cache is redis 7", "--project", "ops", env=env).code == 0
    found = run_cli("search", "blue-green deploy", "--json", env=env)
    assert found.code == 0, found.err
    results = json.loads(found.out)["results"]
    assert results and results[0]["memory"]["content"].startswith("we deploy")
    stats = run_cli("--db", pg_url, "stats", "--json")
    assert stats.code == 0, stats.err
    data = json.loads(stats.out)
    assert data["backend"] == "postgres" and data["memories"] == 2
    # a URL's password never shows, and a wrong one is one line, not a traceback
    bad = pg_url.replace("postgres@", "postgres:hunter2@").replace("/cortex_test", "/missing_db")
    failed = run_cli("--db", bad, "search", "x")
    assert failed.code == 1 and "hunter2" not in failed.err
    assert "Traceback" not in failed.err


def test_mcp_server_on_a_url(pg_url: str) -> None:
    with cortex.open(pg_url) as engine:
        engine.add("Rollback drill: restore the snapshot, then redeploy", project="hydra")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cortex.mcp", "--db", pg_url],
        env=dict(os.environ),
    )
    with start_blocking_portal() as portal:
        client = Client(params, read_timeout_seconds=60)
        with portal.wrap_async_context_manager(client):
            answer: Any = portal.call(
                client.call_tool, "memory_search", {"query": "rollback snapshot"}
            )
            assert not answer.is_error, answer
            hits = answer.structured_content["results"]
            assert hits and "Rollback drill" in json.dumps(hits[0])
            added: Any = portal.call(
                client.call_tool, "memory_add", {"content": "the drill runs monthly"}
            )
            assert not added.is_error, added
    with cortex.open(pg_url) as engine:
        assert engine.stats()["memories"] == 2


def test_http_api_on_a_url(pg_engine: cortex.Engine) -> None:
    with TestClient(create_app(pg_engine, rate_limit=None), base_url="http://127.0.0.1") as c:
        r = c.post(
            "/api/memories",
            json={"content": "Gamma ships on Fridays after the smoke test", "project": "gamma"},
        )
        assert r.status_code == 201, r.text
        added = r.json()
        assert c.get(f"/api/memories/{added['id']}").json()["content"].startswith("Gamma")
        found = c.post(
            "/api/memories/search",
            json={"query": "Fridays smoke test", "filters": {"projects": ["gamma"]}},
        )
        assert found.status_code == 200, found.text
        assert [x["id"] for x in found.json()["results"]] == [added["id"]]
        tl = c.get(f"/api/memories/{added['id']}/timeline")
        assert tl.status_code == 200 and tl.json()["anchor"]["id"] == added["id"]
        assert c.get("/api/projects").json()["projects"] == {"gamma": 1}
