"""`cortex mcp` end to end: the SDK's own client drives `python -m cortex.mcp` over a real
stdio pipe, and the API, `cortex search --json` and `memory_search` give one answer."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, Tool

import cortex
from cortex.agent import lean_search
from cortex.errors import CortexError

from .conftest import db_digest

TOOLS = {
    "memory_search",
    "memory_add",
    "memory_timeline",
    "memory_get",
    "memory_reinforce",
    "memory_documents",
    "memory_similar",
    "memory_context",
}
#: Seconds any one exchange with the server may take (the first search loads the model).
TIMEOUT = 60

# Dated a year back: the recency boost then moves by < 1e-10 a minute, so even the
# comparison that leaves it on holds to 1e-6 however slow the machine.
DAY = 86_400.0
EPOCH = datetime(2025, 3, 1, tzinfo=UTC).timestamp()

MEMORIES: list[dict[str, Any]] = [
    {"content": "We deploy with a blue-green switch; a rollback is one command.",
     "project": "hydra", "category": "decision", "scope": "project:hydra/ops"},
    {"content": "Deployment process: build the wheel in CI, tag, roll out to staging first.",
     "project": "hydra", "category": "process", "scope": "project:hydra/ops",
     "session": "s-hydra-1"},
    {"content": "Staging deploys are automatic on every merge to main.",
     "project": "hydra", "category": "process", "scope": "project:hydra/ci"},
    {"content": "Rollback drill: restore the database snapshot, then redeploy the previous tag.",
     "project": "hydra", "category": "runbook", "scope": "project:hydra/ops"},
    {"content": "Auth tokens expire after 15 minutes; refresh with the rotating key.",
     "project": "hydra", "category": "fact", "scope": "project:hydra/api"},
    {"content": "Authentication moved to OIDC in March; the old session cookies are gone.",
     "project": "hydra", "category": "decision", "scope": "project:hydra/api"},
    {"content": "The release checklist lives in RELEASE.md and is reviewed before each tag.",
     "project": "atlas", "category": "process", "scope": "project:atlas"},
    {"content": "Database migrations run before the release, never after it.",
     "project": "atlas", "category": "lesson", "scope": "project:atlas/db"},
    {"content": "Atlas deploys to a single region; blue green was judged too costly.",
     "project": "atlas", "category": "decision", "scope": "project:atlas/ops"},
    {"content": "数据库索引需要定期重建，否则查询会变慢。",
     "project": "atlas", "category": "lesson", "scope": "project:atlas/db"},
    {"content": "部署流程：先在预发布环境验证，再切换生产流量。",
     "project": "hydra", "category": "process", "scope": "project:hydra/ops"},
    {"content": "Docker 部署 uses the slim base image to keep pulls fast.",
     "project": "hydra", "category": "fact", "scope": "project:hydra/ops"},
    {"content": "Token budgets keep recall prompts short: prefer snippets to whole notes.",
     "category": "lesson"},
    {"content": "Weekly review: what did we learn, what do we stop doing.",
     "category": "habit", "session": "s-free-1"},
]  # fmt: skip

#: (query, options): FTS5 syntax, CJK, filters, a malformed query, a filter-only listing,
#: explain and a token budget; several run in the default (hybrid when a model is
#: installed) mode. `record=False` keeps the database, and so every score, unchanged.
CASES: list[tuple[str | None, dict[str, Any]]] = [
    ("how do we roll back a release", {"limit": 5}),
    ("deploy*", {"mode": "keyword"}),
    ('"blue green"', {"mode": "keyword"}),
    ("deploy NOT staging", {"mode": "keyword", "project": "hydra"}),
    ("NEAR(restore snapshot)", {"mode": "keyword"}),
    ("数据库 索引", {"mode": "keyword"}),
    ("Docker 部署", {}),
    ('"unbalanced quote', {"mode": "keyword"}),
    (
        "auth OR tokens",
        {"mode": "keyword", "scope": "project:hydra*", "explain": True, "token_budget": 40},
    ),
    (None, {"project": "atlas", "order_by": "recency", "limit": 3}),
    ("deploy", {"fusion": "linear", "alpha": 0.3, "min_score": 0.0001}),
]
# Clock-free: the recency boost and the decay of dated notes move with time between runs.
SAME = {"record": False, "recency_weight": 0, "half_life_days": 0}


# --------------------------------------------------------------------------- helpers


def _build(db: Path) -> None:
    with cortex.open(db) as engine:
        records = [{**m, "created_at": EPOCH + n * DAY} for n, m in enumerate(MEMORIES)]
        ids = engine.add_many(records)
        engine.supersede(ids[2], ids[1])  # the automatic-staging note was replaced
        # decay_rate 0: a decaying fact would move the score with the clock between runs
        engine.add_fact(ids[4], "ttl", "tokens live 15 minutes", confidence=0.9, decay_rate=0.0)


@pytest.fixture(scope="module")
def shared_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("mcp") / "memories.db"
    _build(db)
    return db


def _server(db: Path) -> StdioServerParameters:
    # The server sees the test's environment, so it finds the same model as the API here.
    return StdioServerParameters(
        command=sys.executable, args=["-m", "cortex.mcp", "--db", str(db)], env=dict(os.environ)
    )


class Tools:
    """Synchronous calls into one MCP client session that lives in a portal thread."""

    def __init__(self, portal: BlockingPortal, client: Client) -> None:
        self.portal = portal
        self.client = client

    def call(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        return self.portal.call(self.client.call_tool, name, arguments)

    def list(self) -> list[Tool]:
        return self.portal.call(self.client.list_tools).tools


@pytest.fixture(scope="module")
def tools(shared_db: Path) -> Iterator[Tools]:
    """One `python -m cortex.mcp` for the module, as a client keeps one server for a session:
    every test after the bad-argument battery also shows the server still answers."""
    with start_blocking_portal() as portal:
        client = Client(_server(shared_db), read_timeout_seconds=TIMEOUT)
        with portal.wrap_async_context_manager(client):
            yield Tools(portal, client)


def _cli_search(db: Path, query: str | None, options: Mapping[str, Any]) -> subprocess.Popen[str]:
    """Start `cortex search --json` with `options` as flags (the installed console script)."""
    exe = Path(sys.executable).with_name("cortex")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "cortex.cli"]
    args = [*command, "--db", str(db), "search"]
    if query is not None:
        args += ["--", query] if query.startswith("-") else [query]
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag if value else "--no-" + flag[2:])
        else:
            args += [flag, str(value)]
    args.append("--json")
    env = {**os.environ, "CORTEX_NO_PROGRESS": "1"}
    return subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def _same(a: Any, b: Any, tolerance: float, where: str = "") -> None:
    """Equal, floats within `tolerance` (absolute): one answer, field by field."""
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, int | float) and isinstance(b, int | float), where
        assert math.isclose(a, b, rel_tol=0.0, abs_tol=tolerance), f"{where}: {a} != {b}"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: {a.keys()} {b}"
        for key in a:
            if key == "next_cursor":
                # opaque, and it carries the clock of its search: present in both or neither
                assert (a[key] is None) == (b[key] is None), f"{where}.{key}"
                continue
            _same(a[key], b[key], tolerance, f"{where}.{key}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: {a} != {b}"
        for n, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, tolerance, f"{where}[{n}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _text(result: Any) -> str:
    return "".join(c.text for c in result.content if c.type == "text")


# --------------------------------------------------------------------------- tests


@pytest.mark.timeout(120)
def test_tools_over_stdio(shared_db: Path, tools: Tools) -> None:
    with cortex.open(shared_db) as engine:
        expected_results = engine.search("rollback", mode="keyword", **SAME)
        expected = expected_results.to_dict()
        default_mode = engine.search("rollback drill", **SAME).mode

    listed = {t.name: t for t in tools.list()}
    assert set(listed) == TOOLS
    search_args = listed["memory_search"].input_schema["properties"]
    assert {"query", "mode", "limit", "project", "scope", "category", "session", "token_budget",
            "include_superseded", "explain", "fusion", "alpha", "min_score", "record",
            "recency_weight"} <= set(search_args)  # fmt: skip
    assert search_args["mode"]["enum"] == ["keyword", "semantic", "hybrid"]
    assert listed["memory_add"].input_schema["required"] == ["content"]
    assert listed["memory_get"].input_schema["required"] == ["id"]
    assert listed["memory_timeline"].input_schema["required"] == ["anchor_id"]
    assert all(t.output_schema and t.description for t in listed.values())
    assert listed["memory_get"].annotations.read_only_hint is True

    keyword = tools.call(
        "memory_search", {"query": "rollback", "mode": "keyword", "verbose": True, **SAME}
    )
    assert not keyword.is_error
    full = dict(keyword.structured_content)
    assert full.pop("status") == "ok" and full.pop("total_results") == expected["total"]
    _same(full, expected, 0.0)
    assert json.loads(_text(keyword)) == keyword.structured_content  # text for text-only clients
    lean = tools.call("memory_search", {"query": "rollback", "mode": "keyword", **SAME})
    assert lean.structured_content == lean_search(expected_results)
    assert json.loads(_text(lean)) == lean.structured_content

    added = tools.call(
        "memory_add",
        {"content": "Canary releases go to 5% of traffic for an hour.", "project": "hydra",
         "category": "decision", "session": "s-agent", "metadata": {"source": "standup"},
         "created_at": "2025-03-08T12:00:00Z"},
    )  # fmt: skip
    assert not added.is_error, _text(added)
    memory = added.structured_content
    assert memory["content"].startswith("Canary releases") and memory["project"] == "hydra"
    assert memory["metadata"] == {"source": "standup"}
    assert memory["created_at"] == "2025-03-08T12:00:00Z"
    fetched = tools.call("memory_get", {"id": memory["id"]})
    assert not fetched.is_error and fetched.structured_content == memory

    canary = tools.call(
        "memory_search", {"query": "canary releases", "mode": "keyword", "project": "hydra"}
    ).structured_content
    assert [r["id"] for r in canary["results"]] == [memory["id"]]
    assert canary["results"][0]["source"] == "session s-agent"
    assert canary["results"][0]["text"] == memory["content"]

    default = tools.call(
        "memory_search", {"query": "rollback drill", "verbose": True, **SAME}
    ).structured_content
    assert default["mode"] == default_mode  # hybrid when the model is installed, as in the API
    assert default["results"], default

    timeline = tools.call(
        "memory_timeline", {"anchor_id": memory["id"], "before": 2, "after": 1}
    ).structured_content
    assert timeline["anchor"]["id"] == memory["id"]
    assert len(timeline["before"]) == 2 and len(timeline["after"]) == 1
    assert "s-agent" in timeline["sessions"]

    with cortex.open(shared_db) as engine:
        assert timeline == engine.timeline(memory["id"], before=2, after=1).to_dict()
        assert engine.get(memory["id"]).content == memory["content"]
        # memory_search records its recall like the API (record defaults to true);
        # record=false leaves no trace.
        logged = {q for (q,) in engine.store.query("SELECT DISTINCT query FROM recall_log")}
        assert logged == {"canary releases"}
        assert engine.get(memory["id"]).access_count == 1


#: (tool, arguments, the same call through the API — or, when the API has no twin, words
#: the message must hold).
BAD: list[tuple[str, dict[str, Any], Callable[[cortex.Engine], Any] | tuple[str, ...]]] = [
    ("memory_search", {"query": "deploy", "mode": "fuzzy"},
     lambda e: e.search("deploy", mode="fuzzy")),
    ("memory_search", {"query": "deploy", "limit": -1}, lambda e: e.search("deploy", limit=-1)),
    ("memory_search", {"query": "deploy", "limit": 0}, lambda e: e.search("deploy", limit=0)),
    ("memory_search", {"query": "deploy", "limit": 10**9},
     lambda e: e.search("deploy", limit=10**9)),
    ("memory_search", {"query": "deploy", "limit": "ten"},
     lambda e: e.search("deploy", limit="ten")),
    ("memory_search", {"query": "deploy", "alpha": 2}, lambda e: e.search("deploy", alpha=2)),
    ("memory_search", {"query": "deploy", "recency_weight": -1},
     lambda e: e.search("deploy", recency_weight=-1)),
    ("memory_search", {"query": "deploy", "include_superseded": "yes"},
     lambda e: e.search("deploy", include_superseded="yes")),
    ("memory_search", {"query": "deploy", "fusion": "max"},
     lambda e: e.search("deploy", fusion="max")),
    ("memory_search", {"query": "deploy", "token_budget": 0},
     lambda e: e.search("deploy", token_budget=0)),
    ("memory_search", {"query": "deploy", "project": 7}, lambda e: e.search("deploy", project=7)),
    ("memory_search", {"query": 42}, lambda e: e.search(42)),
    ("memory_search", {"query": "deploy", "projct": "hydra"}, ("'projct'", "project")),
    ("memory_get", {"id": 10**6}, lambda e: e.get(10**6)),
    ("memory_get", {"id": "1"}, lambda e: e.get("1")),
    ("memory_get", {}, ("memory_get", "'id'")),
    ("memory_add", {"content": ""}, lambda e: e.add("")),
    ("memory_add", {"content": "a\x00b"}, lambda e: e.add("a\x00b")),
    ("memory_add", {"content": "fine", "confidence": 1.5},
     lambda e: e.add("fine", confidence=1.5)),
    ("memory_add", {"content": "fine", "metadata": "not an object"},
     lambda e: e.add("fine", metadata="not an object")),
    ("memory_add", {"content": "fine", "created_at": "last tuesday"}, ("created_at", "ISO 8601")),
    ("memory_add", {"content": None}, ("'content'",)),
    ("memory_timeline", {"anchor_id": 10**6}, lambda e: e.timeline(10**6)),
    ("memory_timeline", {"anchor_id": 1, "before": -1}, lambda e: e.timeline(1, before=-1)),
    ("memory_delete", {"id": 1}, ("memory_delete",)),
]  # fmt: skip


@pytest.mark.timeout(120)
def test_bad_arguments_are_tool_errors_and_the_server_lives_on(
    shared_db: Path, tools: Tools
) -> None:
    expected: dict[int, str] = {}
    with cortex.open(shared_db) as engine:
        for n, (_, _, api) in enumerate(BAD):
            if callable(api):
                with pytest.raises(CortexError) as caught:
                    api(engine)
                expected[n] = str(caught.value)
    before = db_digest(shared_db)

    answers = [tools.call(tool, args) for tool, args, _ in BAD]

    for n, ((tool, args, api), answer) in enumerate(zip(BAD, answers, strict=True)):
        message = _text(answer)
        assert answer.is_error, (tool, args, message)
        assert message and "\n" not in message and "Traceback" not in message, message
        if n in expected:  # the API's own message, word for word
            assert message == expected[n], (tool, args)
        else:
            assert all(word in message for word in api), (tool, args, message)
    after = tools.call("memory_search", {"query": "rollback", **SAME})
    assert not after.is_error and after.structured_content["results"]
    assert db_digest(shared_db) == before  # nothing a refused call did reached the database


@pytest.mark.timeout(120)
def test_one_answer_everywhere(shared_db: Path, tools: Tools) -> None:
    """The API, `cortex search --json` and `memory_search`: same ids, order, scores and
    every other field, for the same query and options."""
    runs = [(q, {**options, **SAME}) for q, options in CASES]
    # The leave-the-recency-boost-on case: it moves with the clock, so 1e-6 below.
    runs.append(("rollback", {"mode": "keyword", "record": False}))
    cli = [_cli_search(shared_db, q, options) for q, options in runs]

    mcp_answers = [
        tools.call(
            "memory_search",
            {**({"query": q} if q is not None else {}), **options, "verbose": True},
        )
        for q, options in runs
    ]
    with cortex.open(shared_db) as engine:
        api_answers = [engine.search(q, **options).to_dict() for q, options in runs]

    modes = set()
    for n, ((q, options), api, tool, proc) in enumerate(
        zip(runs, api_answers, mcp_answers, cli, strict=True)
    ):
        out, err = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 0, (q, err)
        assert not tool.is_error, (q, _text(tool))
        tolerance = 1e-9 if options.get("recency_weight") == 0 else 1e-6
        where = f"case {n} {q!r} {options}"
        verbose = dict(tool.structured_content)
        assert verbose.pop("status") == ("ok" if api["results"] else "no_match"), where
        assert verbose.pop("total_results") == api["total"], where
        for name, answer in (("cli", json.loads(out)), ("mcp", verbose)):
            ids = [r["id"] for r in answer["results"]]
            assert ids == [r["id"] for r in api["results"]], f"{name} {where}"
            _same(answer, api, tolerance, f"{name} {where}")
        modes.add(api["mode"])
    assert sum(1 for a in api_answers if a["results"]) >= 10  # the cases do find things
    assert "keyword" in modes and "filter" in modes
    assert api_answers[0]["mode"] == "hybrid" or api_answers[0]["notices"]


@pytest.mark.timeout(180)
def test_memory_reinforce_is_the_one_way_reading_changes_the_ranking(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    with cortex.open(db, embedder=None) as engine:
        a = engine.add("the canary release takes an hour", project="hydra", salience=0.5)
        b = engine.add("the canary sings at dawn", project="zoo", salience=0.5)
    with start_blocking_portal() as portal:
        client = Client(_server(db), read_timeout_seconds=TIMEOUT)
        with portal.wrap_async_context_manager(client):
            tools = Tools(portal, client)
            searched = tools.call("memory_search", {"query": "canary", "mode": "keyword"})
            assert not searched.is_error
            done = tools.call("memory_reinforce", {"ids": [a]})
            assert not done.is_error, _text(done)
            assert done.structured_content == {"reinforced": [{"id": a, "salience": 0.52}]}
            walled = tools.call("memory_reinforce", {"ids": [b], "project": "hydra"})
            assert walled.is_error and f"no memory with id {b}" in _text(walled)
            bad = tools.call("memory_reinforce", {"ids": []})
            assert bad.is_error and "ids" in _text(bad)
    with cortex.open(db, embedder=None) as engine:
        assert engine.get(a).salience == 0.52  # the search itself added nothing
        assert engine.get(b).salience == 0.5
