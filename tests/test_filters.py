"""Issue 12, items 5 and 6: the filters users ask for. Several projects at once (the wall
holds for every name not listed), listing by filters with "" or None, code references
(extraction, the table, the filter, related.code, a query naming a file), the fact-type
facet, lenses, documents and seed 004's totals."""

from __future__ import annotations

import asyncio
import json
import random
from datetime import UTC
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


def test_the_wall_holds_for_every_project_not_listed(engine: cortex.Engine, tmp_path: Path) -> None:
    """A property over seeded random queries and options: with `project` a list, no
    result, text, session or count of a project not in it ever shows."""
    rng = random.Random(20_261_126)
    owner = _build(engine, rng)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "shared.md").write_text("# Shared\n\ndeploy release rollback notes\n")
    for project in ["alpha", "beta", "", None]:
        engine.import_path(folder, project=project)
    engine.save_lens("everything", project=[p for p in FILTERS])
    names = [f for f in FILTERS]
    checked = 0
    for _ in range(120):
        query = _query(rng, owner)
        chosen = rng.sample(names, rng.randint(2, 4))
        kw = _options(rng, chosen[0])
        kw["project"] = chosen
        kw["context"] = rng.choice([0, 0, 2])
        if rng.random() < 0.2:
            kw["fact_type"] = "note"
        if rng.random() < 0.2:
            kw["code"] = rng.choice(["*", "notes/*", "shared.md"])
        if rng.random() < 0.2:
            kw["lens"] = "everything"  # a lens naming every project: the explicit list wins
        kw["include_documents"] = rng.random() < 0.3
        answer = engine.search(query, Options(**kw)).to_dict()
        for doc in answer.get("documents") or []:
            assert doc["project"] in chosen, (query, kw, doc)
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
    assert not error and {r["project"] for r in found["results"]} == {"a", "b"}
    error, found = _call(server, "memory_search", {"query": "rollback", "project": ["b"]})
    assert not error and {r["project"] for r in found["results"]} == {"b"}
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
    listed = run_cli("--db", db, "search", "", "--project", "b", "--json")
    assert listed.code == 0, listed.err
    data = json.loads(listed.out)
    assert data["mode"] == "filter" and [r["memory"]["project"] for r in data["results"]] == ["b"]


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
    # in order of first appearance, even where a word before holds a later one's text
    (
        "xMakefile and `x.y` then Makefile",
        [("x.y", "symbol", None), ("Makefile", "file", None)],
    ),
    # words as str.split cuts them: any Unicode space ends one
    ("see\u2003src/a.py\u00a0and\u2028b.rs", [("src/a.py", "file", None), ("b.rs", "file", None)]),
]


@pytest.mark.parametrize(("text", "expected"), EXTRACTION)
def test_code_extraction(text: str, expected: list[tuple[str, str, int | None]]) -> None:
    from cortex.code import extract

    assert [(r.ref, r.kind, r.line) for r in extract(text)] == expected


@pytest.mark.parametrize("name", sorted(__import__("cortex.code").code._BARE_FILES))
def test_every_bare_file_name_is_extracted_in_prose_and_in_a_path(name: str) -> None:
    # extract skips the word loop of text without a dot before a letter, "::" or "file":
    # every bare file name must hold one of them, alone or at the end of a path
    from cortex.code import extract

    assert [(r.ref, r.kind) for r in extract(f"we touched {name} today")] == [(name, "file")]
    assert [r.ref for r in extract(f"see ops/{name}, then rerun")] == [f"ops/{name}"]


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


def _old_database(path: Path) -> None:
    """A database as the cortex before code references, lenses and documents wrote it."""
    import sqlite3

    from cortex import store as store_module

    version = store_module.MIGRATIONS.index(store_module._SCHEMA_CODE_REFS)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    for script in store_module.MIGRATIONS[:version]:
        conn.executescript(
            script.replace("{stemmed}", store_module.STEMMED_TOKENIZER).replace(
                "{exact}", store_module.EXACT_TOKENIZER
            )
        )
    conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(version),))
    conn.executemany(
        "INSERT INTO memories (content, content_hash, created_at, updated_at, deleted_at,"
        " source_path, chunk_index, project_id) VALUES (?, 'h', 1.7e9, 1.7e9, ?, ?, ?, ?)",
        [
            ("old note about web/server.go", None, None, None, None),
            ("deleted: web/old.go", 1.8e9, None, None, None),
            ("# Runbook\n\nfailover first", None, "/n/runbook.md", 0, "ops"),
            ("then the DNS cutover", None, "/n/runbook.md", 1, "ops"),
        ],
    )
    conn.commit()
    conn.close()


def test_migration_backfills_code_references_and_documents_of_an_old_database(
    db_path: Path,
) -> None:
    from cortex import store as store_module

    _old_database(db_path)
    with cortex.open(db_path, embedder=None) as engine:
        assert engine.store.schema_version() == len(store_module.MIGRATIONS)
        assert [r.memory.content for r in engine.search(None, code="web/*")] == [
            "old note about web/server.go"
        ]
        rows = engine.store.query("SELECT ref, kind FROM memory_code")
        assert rows == [("web/server.go", "file")]
        [doc] = engine.search_documents("failover cutover", content=True)
        assert (doc.title, doc.project, doc.chunks) == ("Runbook", "ops", 2)
        assert doc.content == "# Runbook\n\nfailover first\n\nthen the DNS cutover"
        assert engine.lenses() == []


def test_code_filter_is_refused_on_postgresql_filters() -> None:
    from cortex.pg import filters as pg_filters

    with pytest.raises(InvalidOptionError, match="SQLite-only"):
        pg_filters.where(Options(code="a.py"))


# --------------------------------------------------------------------------- fact types


def test_fact_type_filters_and_is_counted(engine: cortex.Engine) -> None:
    a = engine.add("we chose postgres for the ledger")
    b = engine.add("the team prefers tabs over spaces")
    c = engine.add("postgres upgrade went fine")
    engine.add_fact(a, "decision", "postgres for the ledger")
    engine.add_fact(b, "preference", "tabs")
    engine.add_fact(c, "event", "upgrade")
    engine.add_fact(c, "decision", "keep postgres 16")
    assert {r.memory.id for r in engine.search(None, fact_type="decision")} == {a, c}
    found = engine.search("postgres", fact_type="decision", mode="keyword")
    assert {r.memory.id for r in found} == {a, c}
    assert not engine.search("tabs", fact_type="decision", mode="keyword")
    everything = engine.search(None)
    assert everything.aggregations is not None
    assert everything.aggregations["by_fact_type"] == {"decision": 2, "preference": 1, "event": 1}


# --------------------------------------------------------------------------- lenses


def test_a_lens_saves_filters_and_boosts_and_explicit_options_win(engine: cortex.Engine) -> None:
    a = engine.add("deploy the api", project="api", category="runbook")
    engine.add("deploy the web app", project="web", category="runbook")
    i = engine.add("deploy infra", project="infra", category="decision")
    lens = engine.save_lens(
        "ops", project=["api", "infra"], order_by="recency", description="ops view"
    )
    assert lens["options"] == {"project": ["api", "infra"], "order_by": "recency"}
    assert [x["name"] for x in engine.lenses()] == ["ops"]
    found = engine.search("deploy", lens="ops", mode="keyword")
    assert {r.memory.id for r in found} == {a, i}
    # an explicit option wins over the lens's
    assert {r.memory.id for r in engine.search("deploy", lens="ops", project="api")} == {a}
    # the lens combines with other filters
    assert {r.memory.id for r in engine.search(None, lens="ops", category="decision")} == {i}
    # saving again replaces; an Options object's non-default fields are saved
    engine.save_lens("ops", Options(category="runbook"))
    assert engine.lenses()[0]["options"] == {"category": "runbook"}
    engine.delete_lens("ops")
    assert engine.lenses() == []
    with pytest.raises(InvalidOptionError, match="no lens named 'ops'"):
        engine.search("deploy", lens="ops")
    with pytest.raises(cortex.NotFoundError):
        engine.delete_lens("ops")


def test_a_lens_refuses_what_it_cannot_hold(engine: cortex.Engine) -> None:
    with pytest.raises(InvalidOptionError, match="cannot hold 'offset'"):
        engine.save_lens("x", offset=5)
    with pytest.raises(InvalidOptionError, match="did you mean 'project'"):
        engine.save_lens("x", projct="a")
    with pytest.raises(InvalidOptionError, match="at least one option"):
        engine.save_lens("x")
    with pytest.raises(InvalidOptionError, match="limit"):
        engine.save_lens("x", limit=0)


def test_the_recall_log_records_the_lens_or_the_client(engine: cortex.Engine) -> None:
    engine.add("release checklist")
    engine.save_lens("mine", mode="keyword")
    engine.search("release", lens="mine")
    engine.search("release", lens="mine", recorded_as="http:client")
    rows = engine.store.query("SELECT lens FROM recall_log ORDER BY id")
    assert [r[0] for r in rows] == ["mine", "http:client"]


def test_cli_lens_save_list_apply_delete(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    db = str(tmp_path / "cli.db")
    for project in ("a", "b"):
        assert run_cli("--db", db, "add", f"canary note {project}", "--project", project).code == 0
    saved = run_cli("--db", db, "lens", "save", "just-a", "--project", "a", "--mode", "keyword")
    assert saved.code == 0, saved.err
    listed = run_cli("--db", db, "lens", "list", "--json")
    assert json.loads(listed.out)[0]["options"] == {"project": "a", "mode": "keyword"}
    run = run_cli("--db", db, "search", "canary", "--lens", "just-a", "--json")
    assert {r["memory"]["project"] for r in json.loads(run.out)["results"]} == {"a"}
    assert run_cli("--db", db, "lens", "delete", "just-a").code == 0
    assert run_cli("--db", db, "search", "canary", "--lens", "just-a").code == 1


# --------------------------------------------------------------------------- documents


def _notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "failover.md").write_text(
        "# Failover runbook\n\nPromote the replica when the primary is down.\n\n"
        "## DNS\n\nThen move the DNS record to the new primary.\n"
    )
    (folder / "lunch.md").write_text("# Lunch\n\nPizza on Fridays.\n")
    return folder


def test_documents_are_searchable_as_whole_files(engine: cortex.Engine, tmp_path: Path) -> None:
    engine.import_path(_notes(tmp_path), project="ops")
    engine.add("replica DNS note outside any file", project="ops")
    found = engine.search_documents("replica DNS")
    assert [d.title for d in found] == ["Failover runbook"]
    doc = found[0]
    assert doc.chunks >= 2 and doc.project == "ops" and doc.source_path.endswith("failover.md")
    assert "[replica]" in doc.snippet or "replica" in doc.snippet
    assert [d.title for d in engine.search_documents(None)] and not engine.search_documents(
        "replica", project="other"
    )
    assert engine.search_documents("pizza", content=True)[0].content is not None
    results = engine.search("replica DNS", include_documents=True)
    assert results.documents and results.documents[0].title == "Failover runbook"
    assert results.to_dict()["documents"][0]["title"] == "Failover runbook"
    assert "documents" not in engine.search("replica").to_dict()


def test_reimport_updates_and_removes_documents(engine: cortex.Engine, tmp_path: Path) -> None:
    folder = _notes(tmp_path)
    engine.import_path(folder)
    (folder / "lunch.md").write_text("# Lunch\n\nTacos on Fridays.\n")
    engine.import_path(folder)
    assert not engine.search_documents("pizza")
    assert [d.title for d in engine.search_documents("tacos")] == ["Lunch"]
    (folder / "lunch.md").write_text("")
    engine.import_path(folder)
    assert not engine.search_documents("tacos")


def test_documents_keep_the_project_wall(engine: cortex.Engine, tmp_path: Path) -> None:
    folder = _notes(tmp_path)
    engine.import_path(folder, project="a")
    engine.import_path(folder, project="b")
    assert {d.project for d in engine.search_documents("replica")} == {"a", "b"}
    assert {d.project for d in engine.search_documents("replica", project="a")} == {"a"}
    assert {d.project for d in engine.search_documents("replica", project=["a", "b"])} == {
        "a",
        "b",
    }


def test_mcp_memory_documents(engine: cortex.Engine, tmp_path: Path) -> None:
    from cortex.mcp import build_server

    folder = _notes(tmp_path)
    engine.import_path(folder, project="a")
    engine.import_path(folder, project="b")
    error, answer = _call(build_server(engine, projects=["a"]), "memory_documents", {
        "query": "replica DNS"
    })  # fmt: skip
    assert not error and [d["project"] for d in answer["documents"]] == ["a"]
    error, answer = _call(build_server(engine), "memory_documents", {"limit": 0})
    assert error and "limit" in answer


# --------------------------------------------------------------------------- totals


def test_seed_004_totals(engine: cortex.Engine) -> None:
    for i in range(5):
        engine.add(f"deploy step {i} of the release")
    results = engine.search("deploy release", limit=2, mode="keyword")
    assert results.total_found == 5 and results.total_returned == 2
    words = sum(len(r.memory.content.split()) for r in results)
    assert results.token_estimate == sum(
        int(len(r.memory.content.split()) * 1.3 + 10) for r in results
    )
    assert results.token_estimate > words
    data = results.to_dict()
    assert (data["total_found"], data["total_returned"]) == (5, 2)
    assert data["token_estimate"] == results.token_estimate
    empty = engine.search("nothing matches this", mode="keyword")
    assert (empty.total_found, empty.total_returned, empty.token_estimate) == (0, 0, 0)


# --------------------------------------------------------------------------- HTTP


def test_http_search_takes_code_fact_type_lens_and_records_the_client(
    engine: cortex.Engine,
) -> None:
    from starlette.testclient import TestClient

    from cortex.server import create_app

    a = engine.add("token refresh fixed in `auth/session.py`", project="x")
    b = engine.add("token cache notes without code", project="x")
    engine.add_fact(b, "decision", "cache tokens")
    engine.save_lens("xs", project="x", mode="keyword")
    http = TestClient(create_app(engine, rate_limit=None), base_url="http://127.0.0.1")

    def ids(body: dict[str, Any]) -> list[int]:
        answer = http.post("/api/memories/search", json=body)
        assert answer.status_code == 200, answer.text
        return sorted(r["id"] for r in answer.json()["results"])

    assert ids({"query": "token", "filters": {"code": "session.py"}}) == [a]
    assert ids({"query": "token", "filters": {"hasCode": True}}) == [a]
    assert ids({"query": "token", "filters": {"factType": "decision"}}) == [b]
    assert ids({"query": "token", "options": {"lens": "xs"}}) == [a, b]
    assert http.post(
        "/api/memories/search", json={"query": "t", "filters": {"hasCode": False}}
    ).status_code in (400, 501)
    lenses = {r[0] for r in engine.store.query("SELECT lens FROM recall_log")}
    assert lenses and all(str(v).startswith("http:") for v in lenses)


def test_mcp_lens_narrows_the_served_projects(engine: cortex.Engine) -> None:
    from cortex.mcp import build_server

    for project in ("a", "b", "c"):
        engine.add(f"rollback plan of {project}", project=project)
    engine.save_lens("only-b", project="b")
    engine.save_lens("only-c", project="c")
    server = build_server(engine, projects=["a", "b"])
    error, found = _call(server, "memory_search", {"query": "rollback", "lens": "only-b"})
    assert not error and {r["project"] for r in found["results"]} == {"b"}
    error, text = _call(server, "memory_search", {"query": "rollback", "lens": "only-c"})
    assert error and "not served" in text
    error, text = _call(server, "memory_search", {"query": "rollback", "lens": "nope"})
    assert error and "no lens named 'nope'" in text


def test_an_old_database_opened_read_only_still_searches(db_path: Path) -> None:
    _old_database(db_path)
    with cortex.open(db_path, read_only=True, embedder=None) as engine:
        [found] = engine.search("server")
        assert found.related == {"code": []}  # none until it is opened writable once
        assert engine.search("what about web/server.go", mode="keyword")  # names a file
        with pytest.raises(cortex.StorageError, match="open it writable once"):
            engine.search("server", code="server.go")
        with pytest.raises(cortex.StorageError, match="search_documents"):
            engine.search_documents("server")


def test_reindex_rebuilds_documents(engine: cortex.Engine, tmp_path: Path) -> None:
    engine.import_path(_notes(tmp_path))
    with engine.store.transaction() as tx:
        tx.execute("DELETE FROM documents")
    assert not engine.search_documents("replica")
    assert engine.reindex()["documents"] == 2
    assert [d.title for d in engine.search_documents("replica")] == ["Failover runbook"]


def test_every_option_that_narrows_sql_is_one_the_kept_ranking_columns_cannot_judge() -> None:
    """The in-memory keyword index judges the project wall and live/superseded from the
    ranking columns it keeps and sends every other filter to SQLite only when
    `narrows_beyond_project` says so: an option that adds a clause to `where()` but is
    missing from that list would be silently ignored by the keyword leg."""
    import dataclasses
    from datetime import datetime

    from cortex.filters import narrows_beyond_project, where

    samples: dict[type, object] = {
        str: "x",
        float: 0.5,
        datetime: datetime(2026, 1, 1, tzinfo=UTC),
    }
    judged_by_kept_columns = {"project", "include_superseded"}
    base = where(Options())
    seen = 0
    for field in dataclasses.fields(Options):
        if field.name in judged_by_kept_columns:
            continue
        for kind, value in samples.items():
            try:
                opts = dataclasses.replace(Options(), **{field.name: value})
            except (TypeError, ValueError, cortex.errors.CortexError):
                continue
            if where(opts) != base:
                seen += 1
                assert narrows_beyond_project(opts), (field.name, kind)
            break
    assert seen >= 10  # the filters themselves were exercised
