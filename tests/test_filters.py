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


# --------------------------------------------------------------------------- code references

EXTRACTION = [
    ("The bug was in auth/middleware.ts", [("auth/middleware.ts", "file", None)]),
    ("see src/x.py:12 for the check", [("src/x.py", "file", 12)]),
    ("crash at src/db/pool.py:88:4", [("src/db/pool.py", "file", 88)]),
    ("`auth/middleware.ts` rejects tokens", [("auth/middleware.ts", "file", None)]),
    ("fixed in ./scripts/deploy.sh#L40", [("./scripts/deploy.sh", "file", 40)]),
    ("edited C:\\repo\\main.go", [("C:\\repo\\main.go", "file", None)]),
    (
        "bumped the Dockerfile and Makefile",
        [("Dockerfile", "file", None), ("Makefile", "file", None)],
    ),
    ("config lives in settings.toml", [("settings.toml", "file", None)]),
    ("call os.path.join() there", [("os.path.join", "symbol", None)]),
    ("auth.verify_token skipped the expiry", [("auth.verify_token", "symbol", None)]),
    ("`verify_token` skipped the expiry", [("verify_token", "symbol", None)]),
    ("`AuthService.login()` throws", [("AuthService.login", "symbol", None)]),
    ("`useEffect` runs twice", [("useEffect", "symbol", None)]),
    ("crate::auth::verify panics", [("crate::auth::verify", "symbol", None)]),
    ("read docs.python.org first", []),
    ("see https://github.com/org/repo/blob/main/app.py", []),
    ("we use Node.js and Vue.js", []),
    ("e.g. the cache, i.e. redis", []),
    ("version 1.2.3 shipped", []),
    ("`npm run build` failed", []),
    ("plain prose with no code at all.", []),
    ("It ended.Then it started", []),
    (
        "`auth/middleware.ts` calls auth.verify_token in auth/middleware.ts:30",
        [("auth/middleware.ts", "file", None), ("auth.verify_token", "symbol", None)],
    ),
    (
        "tests in tests/test_filters.py and web/App.tsx",
        [
            ("tests/test_filters.py", "file", None),
            ("web/App.tsx", "file", None),
        ],
    ),
    ("J.R.R. Tolkien wrote it", []),
]


@pytest.mark.parametrize(("text", "expected"), EXTRACTION)
def test_code_extraction(text: str, expected: list[tuple[str, str, int | None]]) -> None:
    from cortex.code import extract

    assert [(r.ref, r.kind, r.line) for r in extract(text)] == expected


def test_code_keys_match_suffixes_and_prefixes(engine: cortex.Engine) -> None:
    a = engine.add("the token check in src/auth/middleware.ts skips expiry")
    b = engine.add("`verify_token` is called from auth/session.py")
    c = engine.add("nothing about code here; auth and middleware in prose")
    d = engine.add("AuthService.verify_token returns early")

    def ids(**kw: Any) -> set[int]:
        return {r.memory.id for r in engine.search(None, **kw)}

    assert ids(code="src/auth/middleware.ts") == {a}
    assert ids(code="auth/middleware.ts") == {a}  # a path ends the longer one
    assert ids(code="middleware.ts") == {a}
    assert ids(code="AUTH/MIDDLEWARE.TS") == {a}  # keys are lower-cased
    assert ids(code="ware.ts") == set()  # a suffix is a whole segment
    assert ids(code="auth/*") == {a, b}  # a folder, at the start or inside a path
    assert ids(code="verify_token") == {b, d}  # itself and a dotted name it ends
    assert ids(code="*") == {a, b, d}
    assert c not in ids(code="auth/*")
    found = engine.search("token", code="auth/*", mode="keyword")
    assert {r.memory.id for r in found} <= {a, b}
    with pytest.raises(InvalidOptionError, match="code is empty"):
        Options(code="  ")


def test_results_carry_their_code_references(engine: cortex.Engine) -> None:
    engine.add("`pool.acquire()` hangs in src/db/pool.py:88 under load")
    [result] = engine.search("hangs under load", mode="keyword")
    assert result.related == {
        "code": [
            {"ref": "pool.acquire", "kind": "symbol"},
            {"ref": "src/db/pool.py", "kind": "file", "line": 88},
        ]
    }
    assert result.to_dict()["related"]["code"][1]["line"] == 88


def test_update_rewrites_code_references(engine: cortex.Engine) -> None:
    memory_id = engine.add("bug in api/routes.py")
    engine.update(memory_id, content="bug in api/handlers.py")
    assert not engine.search(None, code="api/routes.py")
    assert [r.memory.id for r in engine.search(None, code="api/handlers.py")] == [memory_id]


def test_a_query_naming_a_file_finds_the_memories_that_reference_it(
    engine: cortex.Engine,
) -> None:
    target = engine.add("Rejected expired sessions: the fix was in `auth/middleware.ts`.")
    engine.add("The release checklist covers staging and canary deploys.")
    engine.add("Lunch order for the team offsite.")
    for mode in ("hybrid", "keyword", "semantic"):
        results = engine.search("what changed in auth/middleware.ts?", mode=mode, explain=True)
        assert results and results[0].memory.id == target, mode
        assert results[0].explain is not None and results[0].explain["code"] > 0


def test_reindex_rebuilds_memory_code(engine: cortex.Engine) -> None:
    a = engine.add("see src/app/main.py")
    engine.add("and lib/util.rs")
    with engine.store.transaction() as tx:
        tx.execute("DELETE FROM memory_code")
    assert not engine.search(None, code="main.py")
    done = engine.reindex()
    assert done["code_refs"] == 2
    assert [r.memory.id for r in engine.search(None, code="main.py")] == [a]


def test_migration_backfills_code_references_of_an_old_database(db_path: Path) -> None:
    import sqlite3

    from cortex import store as store_module

    version = store_module.MIGRATIONS.index(store_module._SCHEMA_CODE_REFS)
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    for script in store_module.MIGRATIONS[:version]:
        conn.executescript(
            script.replace("{stemmed}", store_module.STEMMED_TOKENIZER).replace(
                "{exact}", store_module.EXACT_TOKENIZER
            )
        )
    conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(version),))
    conn.executemany(
        "INSERT INTO memories (content, content_hash, created_at, updated_at, deleted_at)"
        " VALUES (?, 'h', 1.7e9, 1.7e9, ?)",
        [("old note about web/server.go", None), ("deleted: web/old.go", 1.8e9), ("prose", None)],
    )
    conn.commit()
    conn.close()
    with cortex.open(db_path, embedder=None) as engine:
        assert engine.store.schema_version() == len(store_module.MIGRATIONS)
        assert [r.memory.content for r in engine.search(None, code="web/*")] == [
            "old note about web/server.go"
        ]
        rows = engine.store.query("SELECT ref, kind FROM memory_code")
        assert rows == [("web/server.go", "file")]


def test_code_filter_is_refused_on_postgresql_filters() -> None:
    from cortex.pg import filters as pg_filters

    with pytest.raises(InvalidOptionError, match="SQLite-only"):
        pg_filters.where(Options(code="a.py"))
