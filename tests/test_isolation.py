"""Isolation, as a property: with a `project` filter, no mode, query or option combination
ever returns — or shows inside an answer — a memory of another project.

Every memory holds a unique token (``m0042q``) and the store maps each token to its
project, so a check reads the whole serialised answer (results, snippets, superseding
memories) and not only ``result.memory.project``. Cases come from a seeded
``random.Random``: words drawn from the stored texts (other projects' unique tokens
among them), FTS5 syntax, CJK, prefixes, phrases, malformed and empty queries, ``None``;
and every option that changes which candidates are fetched, fused, boosted or cut.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters

import cortex

SEED = 20_260_107
API_CASES = 300
CLI_CASES = 4
MCP_CASES = 40

#: Projects chosen to trip a careless filter: a prefix of another, a case twin, LIKE
#: wildcards, the empty string; plus memories with no project at all (None).
PROJECTS: list[str | None] = ["alpha", "beta", "alpha-2", "Alpha", "al%", "a_pha", "", None]
#: Filters tried: every stored project but None, and some that hold nothing.
FILTERS = [p for p in PROJECTS if p is not None] + ["ALPHA", "gamma", "alpha*", "al"]
WORDS = [
    "deploy",
    "deployment",
    "release",
    "rollback",
    "staging",
    "canary",
    "database",
    "index",
    "migration",
    "token",
    "auth",
    "session",
    "cache",
    "latency",
    "incident",
    "review",
    "checklist",
    "docker",
    "kubernetes",
    "queue",
    "retry",
    "budget",
    "memory",
    "search",
    "ranking",
    "vector",
    "embedding",
    "snapshot",
    "backup",
    "region",
    "traffic",
]
CJK = ["数据库", "索引", "部署", "流程", "缓存", "发布", "回滚", "配置"]
CATEGORIES = ["decision", "process", "lesson", "fact"]
SESSIONS = ["s-shared-1", "s-shared-2", "s-solo"]
NOT_IN_MCP = {"min_similarity", "rrf_k", "min_salience"}
TOKEN = re.compile(r"m\d{4}q")


def _token(n: int) -> str:
    return f"m{n:04d}q"


def _build(engine: cortex.Engine, rng: random.Random) -> dict[str, str | None]:
    """About 30 memories a project over shared words, scopes that name *other* projects,
    sessions shared across projects, facts, supersession within a project; returns the
    project of each unique token."""
    owner: dict[str, str | None] = {}
    records: list[dict[str, Any]] = []
    for n in range(len(PROJECTS) * 30):
        project = PROJECTS[n % len(PROJECTS)]
        words = rng.sample(WORDS, rng.randint(4, 9))
        if rng.random() < 0.25:
            words += rng.sample(CJK, 2)
        token = _token(n)
        owner[token] = project
        other = rng.choice([p for p in PROJECTS if p is not None])
        records.append(
            {
                "content": f"{' '.join(words)} {token}.",
                "project": project,
                # Scopes deliberately name another project: a scope filter must never
                # widen a project filter.
                "scope": rng.choice([f"project:{other}", f"project:{other}/ops", None]),
                "category": rng.choice([*CATEGORIES, None]),
                "session": rng.choice([*SESSIONS, None]),
                "source_path": rng.choice(["/notes/shared.md", f"/notes/{project}.md", None]),
                "confidence": rng.choice([1.0, 0.8, 0.3, 0.05]),
                "salience": rng.choice([0.5, 0.9, 0.1]),
                "created_at": 1_700_000_000 + rng.randint(0, 400) * 86_400,
            }
        )
    ids = engine.add_many(records)
    by_project: dict[str | None, list[int]] = {}
    for memory_id, record in zip(ids, records, strict=True):
        by_project.setdefault(record["project"], []).append(memory_id)
    for members in by_project.values():
        for old, new in zip(members[:8:2], members[1:8:2], strict=True):
            engine.supersede(old, new)  # within the project only (see the test below)
    for memory_id in rng.sample(ids, 30):
        engine.add_fact(memory_id, "note", "a fact", confidence=rng.choice([0.9, 0.2]))
    return owner


def _query(rng: random.Random, owner: dict[str, str | None]) -> str | None:
    w = lambda: rng.choice(WORDS)  # noqa: E731
    tok = lambda: rng.choice(list(owner))  # noqa: E731
    shapes = [
        lambda: w(),
        lambda: f"{w()} {w()}",
        lambda: f"{w()} {w()} {w()} {tok()}",
        lambda: tok(),  # another project's unique token, most of the time
        lambda: f"{w()} OR {tok()}",
        lambda: f"{w()} NOT {w()}",
        lambda: f'"{w()} {w()}"',
        lambda: f"{w()[:4]}*",
        lambda: f"{tok()[:3]}*",
        lambda: f"NEAR({w()} {w()})",
        lambda: f"({w()} OR {w()}) AND {w()}",
        lambda: f"content:{w()}",
        lambda: f'"{w()} unbalanced',
        lambda: f"{w()} (",
        lambda: rng.choice(CJK),
        lambda: f"{rng.choice(CJK)} {rng.choice(CJK)}",
        lambda: f"{rng.choice(CJK)[:1]}",
        lambda: f"{w()} {rng.choice(CJK)}",
        lambda: rng.choice(["", "   ", "NOT", "*", "%", "_", "' OR 1=1 --"]),
        lambda: None,
        lambda: "how do we roll back a bad release",
    ]
    return rng.choice(shapes)()


def _options(rng: random.Random, project: str) -> dict[str, Any]:
    opts: dict[str, Any] = {
        "project": project,
        "mode": rng.choice(["keyword", "semantic", "hybrid", "hybrid"]),
        "fusion": rng.choice(["linear", "rrf"]),
        "alpha": rng.choice([0.0, 0.3, 0.5, 1.0]),
        "limit": rng.choice([1, 3, 20, 200, 10_000]),
        "order_by": rng.choice(["relevance", "recency", "confidence"]),
        "include_superseded": rng.random() < 0.5,
        "record": rng.random() < 0.3,
        "explain": rng.random() < 0.2,
    }
    maybe: dict[str, list[Any]] = {
        "scope": ["project:alpha", "project:beta*", "project:*", "project:al%*", "*", ""],
        "token_budget": [1, 8, 60, 5000],
        "min_score": [0.0, 0.05, 0.3],
        "min_confidence": [0.0, 0.2, 0.9],
        "min_similarity": [-1.0, 0.0, 0.5],
        "recency_weight": [0.0, 2.0],
        "category": CATEGORIES,
        "session": SESSIONS,
        "source_prefix": ["/notes/", "/notes/beta", "/notes/shared"],
        "min_salience": [0.0, 0.5],
        "rrf_k": [1.0, 60.0],
    }
    for name, values in maybe.items():
        if rng.random() < 0.25:
            opts[name] = rng.choice(values)
    return opts


def _cases(owner: dict[str, str | None], n: int, seed: int) -> list[tuple[Any, dict[str, Any]]]:
    rng = random.Random(seed)
    return [(_query(rng, owner), _options(rng, rng.choice(FILTERS))) for _ in range(n)]


def _leaks(
    answer: dict[str, Any], project: str, owner: dict[str, str | None], query: Any = None
) -> list[str]:
    """Every trace of another project in one serialised answer (the full record or the
    lean MCP shape, which names no project of a memory without one)."""
    found = []
    for r in answer["results"]:
        got = r["memory"]["project"] if "memory" in r else r.get("project")
        if got != project:
            found.append(f"result {r['id']} of project {got!r}")
    # The results only: `query`, `rewritten` and `notices` echo what the caller sent.
    for token in TOKEN.findall(json.dumps(answer["results"], ensure_ascii=False)):
        if owner.get(token, project) != project:
            found.append(f"text of {token} (project {owner[token]!r})")
    # Suggestions repeat the query's words; any other token must be the project's own.
    asked = set(TOKEN.findall(str(query or "").lower()))
    for token in TOKEN.findall(json.dumps(answer.get("suggestions", []))):
        if token not in asked and owner.get(token, project) != project:
            found.append(f"suggestion of {token} (project {owner[token]!r})")
    return found


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder) -> tuple[Path, dict]:
    db = tmp_path_factory.mktemp("isolation") / "memories.db"
    with cortex.open(db, embedder=embedder) as engine:
        owner = _build(engine, random.Random(SEED))
    return db, owner


@pytest.mark.timeout(120)
def test_no_option_or_query_crosses_a_project_api(store, embedder) -> None:
    db, owner = store
    found_any = 0
    modes: set[str] = set()
    with cortex.open(db, embedder=embedder) as engine:
        for n, (query, opts) in enumerate(_cases(owner, API_CASES, SEED)):
            answer = engine.search(query, **opts).to_dict()  # every combination is valid
            leaks = _leaks(answer, opts["project"], owner, query)
            assert not leaks, f"case {n}: {query!r} {opts}: {leaks}"
            found_any += bool(answer["results"])
            modes.add(answer["mode"])
    # The property means something only if the cases do find things, in every mode.
    assert found_any >= API_CASES // 5, found_any
    assert {"keyword", "semantic", "hybrid", "filter"} <= modes, modes


@pytest.mark.timeout(60)
def test_every_project_is_found_under_its_own_filter(store, embedder) -> None:
    """The wall is not just "return nothing": each project's own unique tokens are found."""
    db, owner = store
    with cortex.open(db, embedder=embedder) as engine:
        for project in [p for p in PROJECTS if p is not None]:
            token = next(t for t, p in owner.items() if p == project)
            results = engine.search(
                token,
                project=project,
                mode="keyword",
                include_superseded=True,
                min_confidence=0.0,
                min_score=0.0,  # the wall, not the floor: a low-confidence memory counts too
                record=False,
            )
            assert [r.memory.project for r in results] == [project], (project, token)


@pytest.mark.timeout(60)
def test_superseding_memory_of_another_project_is_not_shown(tmp_path: Path, embedder) -> None:
    """A memory superseded by one of another project: a search filtered to the old one's
    project may return it (it is that project's), but must not show the other project's
    text as its ``superseded_by`` snippet."""
    with cortex.open(tmp_path / "m.db", embedder=embedder) as engine:
        old = engine.add("rollback plan m0001q for the payments service", project="alpha")
        new = engine.add("secret beta rollback plan m0002q replaces it", project="beta")
        engine.supersede(old, new)
        owner = {"m0001q": "alpha", "m0002q": "beta"}
        for mode in ("keyword", "semantic", "hybrid"):
            answer = engine.search(
                "rollback plan", project="alpha", mode=mode, include_superseded=True, record=False
            ).to_dict()
            assert [r["id"] for r in answer["results"]] == [old], mode
            assert not _leaks(answer, "alpha", owner), (mode, answer["results"][0])


# ----------------------------------------------------------------- CLI and MCP samples


def _cli_args(db: Path, query: str | None, opts: dict[str, Any]) -> list[str]:
    exe = Path(sys.executable).with_name("cortex")
    args = [str(exe)] if exe.exists() else [sys.executable, "-m", "cortex.cli"]
    args += ["--db", str(db), "search"]
    for name, value in opts.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag if value else "--no-" + flag[2:])
        else:
            args.append(f"{flag}={value}")  # `=`: values such as "-1.0" or "" stay values
    args.append("--json")
    return [*args, "--", query] if query is not None else args


@pytest.mark.timeout(120)
def test_no_leak_through_the_cli(store) -> None:
    db, owner = store
    cases = _cases(owner, CLI_CASES, SEED + 1)
    env = {**os.environ, "CORTEX_NO_PROGRESS": "1"}
    procs = []
    for query, opts in cases:  # two at a time: the machine is shared
        procs.append(
            subprocess.Popen(
                _cli_args(db, query, opts),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
        )
        if len(procs) % 2 == 0:
            procs[-2].wait(timeout=60)
    found = 0
    for (query, opts), proc in zip(cases, procs, strict=True):
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, (query, opts, err)
        answer = json.loads(out)
        assert not _leaks(answer, opts["project"], owner, query), (query, opts)
        found += bool(answer["results"])
    assert found >= 1


@pytest.fixture(scope="module")
def mcp_client(store) -> Iterator[tuple[BlockingPortal, Client]]:
    db, _ = store
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "cortex.mcp", "--db", str(db)], env=dict(os.environ)
    )
    with start_blocking_portal() as portal:
        client = Client(params, read_timeout_seconds=60)
        with portal.wrap_async_context_manager(client):
            yield portal, client


@pytest.mark.timeout(120)
def test_no_leak_through_mcp(store, mcp_client) -> None:
    _db, owner = store
    portal, client = mcp_client
    found = 0
    for n, (query, opts) in enumerate(_cases(owner, MCP_CASES, SEED + 2)):
        # memory_search has no min_similarity, rrf_k or min_salience argument.
        opts = {k: v for k, v in opts.items() if k not in NOT_IN_MCP}
        args = {**opts, **({"query": query} if query is not None else {})}
        answer = portal.call(client.call_tool, "memory_search", args)
        text = "".join(c.text for c in answer.content if c.type == "text")
        assert not answer.is_error, (n, args, text)
        assert not _leaks(answer.structured_content, opts["project"], owner, query), (n, args)
        found += bool(answer.structured_content["results"])
    assert found >= MCP_CASES // 5


@pytest.mark.timeout(120)
def test_no_leak_through_context_or_similar(store, embedder) -> None:
    """Engine.context and Engine.similar hold the same wall: every memory, every token of
    the packed text and every suggestion is the project's own."""
    db, owner = store
    found = 0
    with cortex.open(db, embedder=embedder) as engine:
        for n, (query, opts) in enumerate(_cases(owner, API_CASES // 4, SEED + 3)):
            if not isinstance(query, str):
                continue
            project = opts.pop("project")
            opts.pop("limit", None)
            fmt = ("detailed", "summary", "checklist")[n % 3]
            answer = engine.context(query, project=project, format=fmt, max_tokens=400, **opts)
            data = answer.to_dict()
            leaks = _leaks({"results": data["memories"], "suggestions": data["suggestions"]},
                           project, owner, query)  # fmt: skip
            leaks += [t for t in TOKEN.findall(answer.text) if owner.get(t, project) != project]
            assert not leaks, f"case {n}: {query!r} {project!r} {opts}: {leaks}"
            found += bool(answer.memories)
            for m in data["memories"][:2]:
                near = engine.similar(m["id"], 20)
                assert {r.memory.project for r in near} <= {project}, (n, m["id"])
    assert found >= 10, found


@pytest.fixture
def engine(any_engine: cortex.Engine) -> cortex.Engine:
    """This module's behaviour on both backends (SQLite and PostgreSQL)."""
    return any_engine
