"""Issue 12, items 7-9: lean answers for agents, similar memories, suggestions, Engine.context,
threads; through the API, the CLI and the real MCP server."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from mcp import Client, StdioServerParameters

import cortex
from cortex.agent import TEXT_LIMIT, compact_json, estimate_tokens, lean_search, short_date

from .test_mcp import TIMEOUT, Tools

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
DAY = 86_400.0

#: Two projects with overlapping words (a wall to hold), sessions, a long document.
NOTES: list[dict[str, Any]] = [
    {"content": "Decided to keep blue-green deploys for hydra: the new build goes to the idle "
                "color, smoke tests run against it, then the load balancer flips.",
     "project": "hydra", "category": "decision", "session": "s-deploy"},
    {"content": "Rollback is flipping the load balancer back to the previous color.",
     "project": "hydra", "category": "runbook", "session": "s-deploy"},
    {"content": "The smoke tests take four minutes; they hit the health endpoint and login.",
     "project": "hydra", "category": "fact", "session": "s-deploy"},
    {"content": "Postgres connection pooling goes through pgbouncer in transaction mode.",
     "project": "hydra", "category": "fact", "session": "s-db"},
    {"content": "Auth tokens expire after fifteen minutes; the refresh uses the rotating key.",
     "project": "hydra", "category": "fact", "session": "s-auth"},
    {"content": "The auth bug was caused by incorrect token refresh logic in the middleware.",
     "project": "hydra", "category": "lesson", "session": "s-auth"},
    {"content": "Atlas deploys to a single region; blue green was judged too costly.",
     "project": "atlas", "category": "decision", "session": "s-atlas"},
    {"content": "Atlas map tiles are served from mbtiles files behind a CDN.",
     "project": "atlas", "category": "fact", "session": "s-atlas"},
    {"content": "Atlas kubernetes ingress uses nginx with a wildcard certificate.",
     "project": "atlas", "category": "fact", "session": "s-atlas"},
]  # fmt: skip

LONG = (
    "Incident review of the March outage. "
    * 3
    + "The root cause was a pgbouncer pool exhausted by a leaked transaction in the billing "
    "worker; the fix was a statement timeout and an alert on waiting clients. " * 3
)


def _build(engine: cortex.Engine) -> dict[str, int]:
    records = [
        {**n, "created_at": NOW.timestamp() - (len(NOTES) - i) * DAY} for i, n in enumerate(NOTES)
    ]
    ids = engine.add_many(records)
    long_id = engine.add(LONG, project="hydra", category="incident", created_at=NOW.timestamp())
    named = {
        "bluegreen": ids[0],
        "rollback": ids[1],
        "smoke": ids[2],
        "pgbouncer": ids[3],
        "tokens": ids[4],
        "authbug": ids[5],
        "atlas_deploy": ids[6],
        "mbtiles": ids[7],
        "ingress": ids[8],
        "long": long_id,
    }
    return named


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, int]]]:
    db = tmp_path_factory.mktemp("agent") / "agent.db"
    with cortex.open(db) as engine:
        named = _build(engine)
    yield db, named


@pytest.fixture
def engine(store: tuple[Path, dict[str, int]]) -> Iterator[cortex.Engine]:
    with cortex.open(store[0]) as e:
        yield e


@pytest.fixture
def ids(store: tuple[Path, dict[str, int]]) -> dict[str, int]:
    return store[1]


@pytest.fixture(scope="module")
def tools(store: tuple[Path, dict[str, int]]) -> Iterator[Tools]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cortex.mcp", "--db", str(store[0])],
        env=dict(os.environ),
    )
    with start_blocking_portal() as portal:
        client = Client(params, read_timeout_seconds=TIMEOUT)
        with portal.wrap_async_context_manager(client):
            yield Tools(portal, client)


def _text(result: Any) -> str:
    return "".join(c.text for c in result.content if c.type == "text")


# --------------------------------------------------------------------------- lean answers


def test_lean_result_carries_what_an_agent_reads(
    engine: cortex.Engine, ids: dict[str, int]
) -> None:
    results = engine.search("pgbouncer", now=NOW, record=False)
    lean = lean_search(results)
    assert lean["status"] == "ok" and lean["total_results"] == results.total
    first = lean["results"][0]
    assert first["id"] == ids["pgbouncer"]
    assert first["text"] == NOTES[3]["content"]
    assert first["project"] == "hydra" and first["source"] == "session s-db"
    assert first["date"] == short_date(results[0].memory.to_dict()["created_at"])
    assert "pgbouncer" in first["why"]
    assert set(first) <= {"id", "text", "snippet", "date", "project", "source", "score", "why"}
    # the long incident note is given as the snippet around the match, not whole
    long = next(r for r in lean["results"] if r["id"] == ids["long"])
    assert len(LONG) > TEXT_LIMIT and "text" not in long
    assert "pgbouncer" in long["snippet"] and len(long["snippet"]) < len(LONG) // 2
    assert "<mark>" not in long["snippet"]


def test_lean_answer_is_three_times_fewer_tokens(engine: cortex.Engine) -> None:
    for query in ("blue green deploy", "auth token refresh", "pgbouncer"):
        results = engine.search(query, now=NOW, record=False)
        assert results
        before = estimate_tokens(json.dumps(results.to_dict(), ensure_ascii=False))
        after = estimate_tokens(compact_json(lean_search(results)))
        assert before >= 3 * after, (query, before, after)


def test_no_match_status_and_verbose_is_the_full_record(engine: cortex.Engine) -> None:
    nothing = engine.search("zeppelin quasar", mode="keyword", now=NOW, record=False)
    assert lean_search(nothing)["status"] == "no_match"
    assert lean_search(nothing)["results"] == []
    results = engine.search("rollback", now=NOW, record=False)
    full = lean_search(results, verbose=True)
    assert full == {"status": "ok", "total_results": results.total, **results.to_dict()}
    explained = lean_search(engine.search("rollback", now=NOW, record=False, explain=True),
                            explain=True)  # fmt: skip
    assert all("explain" in r for r in explained["results"])
    assert all("explain" not in r for r in lean_search(results)["results"])


@pytest.mark.timeout(120)
def test_mcp_search_is_lean_by_default_and_null_means_default(
    tools: Tools, ids: dict[str, int]
) -> None:
    answer = tools.call("memory_search", {"query": "pgbouncer", "record": False})
    assert not answer.is_error, _text(answer)
    data = answer.structured_content
    assert data["status"] == "ok" and data["results"][0]["id"] == ids["pgbouncer"]
    assert "memory" not in data["results"][0] and "bm25_score" not in data["results"][0]
    assert json.loads(_text(answer)) == data
    assert ", " not in _text(answer).replace(", the", "")[:20]  # compact separators
    # null for every optional argument: the defaults, not an error
    nulls = tools.call(
        "memory_search",
        {"query": "pgbouncer", "record": False, "limit": None, "alpha": None, "mode": None,
         "project": None, "explain": None, "verbose": None},
    )  # fmt: skip
    assert not nulls.is_error, _text(nulls)
    assert [r["id"] for r in nulls.structured_content["results"]] == [
        r["id"] for r in data["results"]
    ]
    explained = tools.call(
        "memory_search", {"query": "pgbouncer", "record": False, "explain": True}
    )
    assert "explain" in explained.structured_content["results"][0]
    verbose = tools.call("memory_search", {"query": "pgbouncer", "record": False, "verbose": True})
    assert verbose.structured_content["results"][0]["memory"]["id"] == ids["pgbouncer"]
    bad = tools.call("memory_search", {"query": "pgbouncer", "verbose": "yes"})
    assert bad.is_error and "verbose" in _text(bad)
