"""Issue 12, items 5 and 6: the filters users ask for. Several projects at once (the wall
holds for every name not listed), listing by filters with "" or None, code references
(extraction, the table, the filter, related.code, a query naming a file), the fact-type
facet, lenses, documents and seed 004's totals."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest

import cortex
from cortex import filters
from cortex.errors import InvalidOptionError
from cortex.options import Options
from tests.test_isolation import FILTERS, TOKEN, _build, _options, _query

# --------------------------------------------------------------------------- projects


def test_project_accepts_one_name_or_several() -> None:
    assert Options(project="a").project == "a"
    assert Options(project=["a"]).project == "a"
    assert Options(project=["a", "b", "a"]).project == ("a", "b")
    assert Options(project=("b", "a")).project == ("b", "a")
    assert filters.project_ids(Options()) is None
    assert filters.project_ids(Options(project="a")) == ("a",)
    assert filters.project_ids(Options(project=["a", "b"])) == ("a", "b")
    with pytest.raises(InvalidOptionError, match="empty list"):
        Options(project=[])
    with pytest.raises(InvalidOptionError, match="strings"):
        Options(project=["a", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidOptionError, match="name or a list"):
        Options(project=7)  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError, match="NUL"):
        Options(project=["a", "b\x00"])


def _leaks(answer: dict[str, Any], allowed: set[str], owner: dict[str, str | None]) -> list[str]:
    found = []
    for r in answer["results"]:
        if r["memory"]["project"] not in allowed:
            found.append(f"result {r['id']} of project {r['memory']['project']!r}")
        session = r.get("source_session")
        if session and session.get("project") not in allowed:
            found.append(f"session of {r['id']} in {session.get('project')!r}")
    for token in TOKEN.findall(json.dumps(answer["results"], ensure_ascii=False)):
        if owner.get(token) not in allowed:
            found.append(f"text of {token} (project {owner[token]!r})")
    aggs = answer.get("aggregations") or {}
    outside = set(aggs.get("by_project", {})) - allowed
    if outside:
        found.append(f"aggregations count projects {sorted(outside)}")
    return found


def test_the_wall_holds_for_every_project_not_listed(engine: cortex.Engine) -> None:
    """A property over seeded random queries and options: with `project` a list, no
    result, text, session or count of a project not in it ever shows."""
    rng = random.Random(20_261_126)
    owner = _build(engine, rng)
    names = [f for f in FILTERS]
    checked = 0
    for _ in range(120):
        query = _query(rng, owner)
        chosen = rng.sample(names, rng.randint(2, 4))
        kw = _options(rng, chosen[0])
        kw["project"] = chosen
        kw["context"] = rng.choice([0, 0, 2])
        answer = engine.search(query, Options(**kw)).to_dict()
        leaks = _leaks(answer, set(chosen), owner)
        assert not leaks, (query, kw, leaks[:3])
        checked += len(answer["results"])
    assert checked > 200  # the property saw results, not only empty answers


def test_several_projects_find_what_each_alone_finds(engine: cortex.Engine) -> None:
    for project in ("alpha", "beta", "gamma"):
        engine.add(f"deploy notes for {project}", project=project)
    alone = {
        p: {r.memory.id for r in engine.search("deploy", project=p, record=False)}
        for p in ("alpha", "beta")
    }
    both = engine.search("deploy", project=["alpha", "beta"], record=False)
    assert {r.memory.id for r in both} == alone["alpha"] | alone["beta"]
    assert {r.memory.project for r in both} == {"alpha", "beta"}
    assert both.aggregations is not None
    assert set(both.aggregations["by_project"]) == {"alpha", "beta"}


@pytest.mark.parametrize("query", ["", None, "   "])
def test_empty_and_none_queries_list_by_filters(engine: cortex.Engine, query: str | None) -> None:
    ids = [engine.add(f"note {i}", project="p", created_at=1_700_000_000 + i) for i in range(3)]
    engine.add("elsewhere", project="q")
    results = engine.search(query, project="p")
    assert [r.memory.id for r in results] == ids[::-1]  # newest first
    assert results.mode == "filter"


def _call(server: Any, name: str, args: dict[str, Any]) -> tuple[bool, Any]:
    result = asyncio.run(server.call_tool(name, args))
    text = result.content[0].text
    return bool(result.is_error), (text if result.is_error else json.loads(text))


def test_mcp_server_of_several_projects_searches_all_of_them(engine: cortex.Engine) -> None:
    from cortex.mcp import build_server

    for project in ("a", "b", "c"):
        engine.add(f"rollback plan of {project}", project=project)
    server = build_server(engine, projects=["a", "b"])
    error, found = _call(server, "memory_search", {"query": "rollback"})
    assert not error and {r["memory"]["project"] for r in found["results"]} == {"a", "b"}
    error, found = _call(server, "memory_search", {"query": "rollback", "project": ["b"]})
    assert not error and {r["memory"]["project"] for r in found["results"]} == {"b"}
    error, text = _call(server, "memory_search", {"query": "rollback", "project": ["a", "c"]})
    assert error and "not served" in text


def test_cli_repeats_project(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    db = str(tmp_path / "cli.db")
    for project in ("a", "b", "c"):
        assert run_cli("--db", db, "add", f"canary note {project}", "--project", project).code == 0
    run = run_cli(
        "--db", db, "search", "canary", "--project", "a", "--project", "c", "--json",
        "--mode", "keyword",
    )  # fmt: skip
    assert run.code == 0, run.err
    data = json.loads(run.out)
    assert {r["memory"]["project"] for r in data["results"]} == {"a", "c"}
