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


# --------------------------------------------------------------------------- similar


def test_similar_is_nearest_by_meaning_within_the_project(
    engine: cortex.Engine, ids: dict[str, int]
) -> None:
    near = engine.similar(ids["bluegreen"], 3)
    assert len(near) == 3
    assert ids["bluegreen"] not in [r.memory.id for r in near]
    assert {r.memory.project for r in near} == {"hydra"}  # atlas's blue-green note is walled
    assert near[0].memory.id == ids["rollback"]  # flipping the load balancer back
    scores = [r.score for r in near]
    assert scores == sorted(scores, reverse=True) and all(-1 <= s <= 1 for s in scores)
    everything = engine.similar(ids["mbtiles"], 50)
    assert {r.memory.project for r in everything} == {"atlas"} and len(everything) == 2
    with pytest.raises(cortex.NotFoundError):
        engine.similar(ids["mbtiles"], project="hydra")
    with pytest.raises(cortex.InvalidOptionError, match="k must be"):
        engine.similar(ids["mbtiles"], 0)


def test_similar_leaves_out_superseded_and_deleted(tmp_path: Path) -> None:
    with cortex.open(tmp_path / "s.db") as e:
        a = e.add("the deploy uses a blue green switch", project="p")
        b = e.add("blue green deploys flip the load balancer", project="p")
        c = e.add("deploys flip between two identical environments", project="p")
        d = e.add("blue-green switch for the deploy, version two", project="p")
        e.supersede(b, d)
        e.delete(c)
        assert [r.memory.id for r in e.similar(a, 10)] == [d]


def test_similar_without_a_model_says_why(tmp_path: Path) -> None:
    with cortex.open(tmp_path / "k.db", embedder=None) as e:
        a = e.add("a note", project="p")
        with pytest.raises(cortex.EmbeddingError, match="meaning"):
            e.similar(a)


# --------------------------------------------------------------------------- suggestions


def test_suggestions_correct_spelling_from_the_store(engine: cortex.Engine) -> None:
    found = engine.search("pgbouncr pool", now=NOW, record=False)
    assert found.suggestions and found.suggestions[0] == "pgbouncer pool"
    assert found.to_dict()["suggestions"] == list(found.suggestions)
    # a query that finds plenty gets none
    plenty = engine.search("deploy", now=NOW, record=False, min_score=0.0)
    assert len(plenty) >= 3 and plenty.suggestions == ()


def test_a_misspelling_is_corrected_even_when_meaning_finds_plenty(
    engine: cortex.Engine,
) -> None:
    found = engine.search("smoke tets health", now=NOW, record=False, min_score=0.0)
    assert len(found) >= 3 and found.suggestions[0] == "smoke tests health"
    # words that exist but never meet in one memory: no "better" query to offer
    apart = engine.search("smoke tets rollback", now=NOW, record=False, min_score=0.0)
    assert not any(s.startswith("smoke tests rollback") for s in apart.suggestions)


def test_suggestions_hold_the_project_wall(engine: cortex.Engine) -> None:
    # "mbtiles" is a word of atlas only: hydra's search must not offer it
    walled = engine.search("mbtils", project="hydra", now=NOW, record=False)
    assert not walled and not any("mbtiles" in s for s in walled.suggestions)
    open_ = engine.search("mbtils", project="atlas", now=NOW, record=False)
    assert open_.suggestions and open_.suggestions[0] == "mbtiles"


def test_suggestions_offer_related_terms_of_the_few_results(engine: cortex.Engine) -> None:
    few = engine.search("pgbouncer", mode="keyword", now=NOW, record=False)
    assert 0 < len(few) < 3
    assert few.suggestions
    assert all(s.startswith("pgbouncer ") for s in few.suggestions)
    words = " ".join(r.memory.content.lower() for r in few)
    assert all(s.split()[-1] in words for s in few.suggestions)  # from the results' own words


@pytest.mark.timeout(120)
def test_mcp_similar(tools: Tools, ids: dict[str, int]) -> None:
    near = tools.call("memory_similar", {"id": ids["bluegreen"], "k": 2})
    assert not near.is_error, _text(near)
    data = near.structured_content
    assert data["status"] == "ok" and len(data["results"]) == 2
    assert data["results"][0]["id"] == ids["rollback"]
    assert all(r["project"] == "hydra" for r in data["results"])
    walled = tools.call("memory_similar", {"id": ids["mbtiles"], "project": "hydra"})
    assert walled.is_error and "no memory with id" in _text(walled)


def test_cli_similar(store: tuple[Path, dict[str, int]]) -> None:
    from .conftest import run_cli

    db, named = store
    run = run_cli("--db", str(db), "similar", str(named["bluegreen"]), "-k", "2", "--json")
    assert run.code == 0, run.err
    data = json.loads(run.out)
    assert data["results"][0]["id"] == named["rollback"]
    assert len(data["results"]) == 2


# --------------------------------------------------------------------------- Engine.context


def test_scope_pattern_of_seed_004() -> None:
    from cortex.context import scope_matches, scope_pattern

    assert scope_pattern("hydra", "testing") == "project:hydra:task:testing"
    assert scope_pattern("hydra") == "project:hydra*"
    assert scope_pattern("hydra", language="go") == "project:hydra*"
    assert scope_pattern(language="go") == "language:go"
    assert scope_pattern(task="testing") == "universal"
    assert scope_pattern() == "universal"
    assert scope_matches("project:hydra*", "project:hydra:task:x")
    assert not scope_matches("project:hydra*", "project:atlas")
    assert scope_matches("language:go", "language:go") and not scope_matches("universal", None)


def test_context_confidence_orders_a_clear_match_above_nothing(engine: cortex.Engine) -> None:
    clear = engine.context("how do we roll back a deploy?", now=NOW, record=False)
    nothing = engine.context("what is the capital of peru", now=NOW, record=False)
    assert clear.confidence > 0.8 > 0.2 > nothing.confidence
    assert clear.memories and not nothing.memories and nothing.text == ""
    assert 0.0 <= nothing.confidence <= clear.confidence <= 1.0
    # a question answered by its time window: the window is the answer
    week = engine.context("what did we do last week", now=NOW, record=False)
    assert week.interpretation and week.interpretation["applied"] == "hard"
    assert week.memories and week.confidence > 0.5 > nothing.confidence


@pytest.mark.parametrize("fmt", ["detailed", "summary", "checklist"])
@pytest.mark.parametrize("budget", [30, 80, 200, 2000])
def test_context_respects_the_token_budget(engine: cortex.Engine, fmt: str, budget: int) -> None:
    answer = engine.context(
        "deploy rollback smoke tests pgbouncer", max_tokens=budget, format=fmt,
        now=NOW, record=False,
    )  # fmt: skip
    assert answer.tokens == estimate_tokens(answer.text) <= budget
    assert len(answer.text) <= 4 * budget
    ids = [m["id"] for m in answer.memories]
    assert all(f"#{i}" in answer.text for i in ids)
    if budget >= 200:
        assert len(ids) >= 2
    if fmt == "checklist" and ids:
        assert answer.answer == answer.text and answer.text.startswith("- ")
        assert answer.text.count("\n") == len(ids) - 1
    else:
        assert answer.answer is None


def test_context_detailed_carries_the_chunks_around(
    engine: cortex.Engine, ids: dict[str, int]
) -> None:
    answer = engine.context("rollback load balancer", max_tokens=2000, now=NOW, record=False)
    first = answer.memories[0]
    assert first["id"] == ids["rollback"]
    assert first["text"] == NOTES[1]["content"]  # whole, not a snippet
    around = {c["id"] for side in first["context"].values() for c in side}
    assert {ids["bluegreen"], ids["smoke"]} <= around  # its session's turns before and after
    assert f"(before #{ids['bluegreen']})" in answer.text
    # summary: no context, the long memory as its snippet
    summary = engine.context("pgbouncer pool exhausted", format="summary", now=NOW, record=False)
    long = next(m for m in summary.memories if m["id"] == ids["long"])
    assert "snippet" in long and "context" not in long


def test_context_holds_the_project_wall(engine: cortex.Engine) -> None:
    answer = engine.context("blue green deploys", project="atlas", now=NOW, record=False)
    assert answer.memories and {m["project"] for m in answer.memories} == {"atlas"}
    assert answer.scope == "project:atlas*"
    assert "hydra" not in answer.text and "idle color" not in answer.text
    assert not any("pgbouncer" in s or "color" in s for s in answer.suggestions)
    data = answer.to_dict()
    assert data["total_returned"] == len(answer.memories) and data["scope"] == "project:atlas*"
    assert set(data) >= {"answer", "memories", "suggestions", "confidence"}  # seed 003's shape
    assert set(data) >= {"total_found", "total_returned", "token_estimate"}  # seed 004's


def test_context_suggests_follow_ups(engine: cortex.Engine) -> None:
    answer = engine.context("pgbouncr", now=NOW, record=False)
    assert answer.suggestions and answer.suggestions[0] == "pgbouncer"


def test_context_refuses_bad_arguments(engine: cortex.Engine) -> None:
    with pytest.raises(cortex.InvalidOptionError, match="format must be"):
        engine.context("x", format="poem")
    with pytest.raises(cortex.InvalidOptionError, match="max_tokens"):
        engine.context("x", max_tokens=0)
    with pytest.raises(cortex.InvalidOptionError, match="task"):
        engine.context("x", task="  ")
    with pytest.raises(cortex.QueryError):
        engine.context(42)  # type: ignore[arg-type]


@pytest.mark.timeout(120)
def test_mcp_context(tools: Tools, ids: dict[str, int]) -> None:
    listed = {t.name: t for t in tools.list()}
    assert "memory_learn" in listed["memory_add"].description  # memory_add is seed 004's
    answer = tools.call(
        "memory_context",
        {"prompt": "how do we roll back a deploy?", "max_tokens": 120, "project": "hydra",
         "task": "release", "format": None},
    )  # fmt: skip
    assert not answer.is_error, _text(answer)
    data = answer.structured_content
    assert data["status"] == "ok" and data["confidence"] > 0.5
    assert data["ids"][0] == ids["rollback"] and data["token_estimate"] <= 120
    assert data["scope"] == "project:hydra:task:release"
    assert "memories" not in data  # the text says it once; verbose adds the records
    verbose = tools.call("memory_context", {"prompt": "rollback", "verbose": True})
    assert verbose.structured_content["memories"]
    nothing = tools.call("memory_context", {"prompt": "what is the capital of peru"})
    assert nothing.structured_content["status"] == "no_match"
    assert nothing.structured_content["confidence"] < 0.2
    bad = tools.call("memory_context", {"prompt": "x", "format": "poem"})
    assert bad.is_error and "format must be" in _text(bad)


def test_cli_context(store: tuple[Path, dict[str, int]]) -> None:
    from .conftest import run_cli

    db, named = store
    run = run_cli("--db", str(db), "context", "how do we roll back?", "--max-tokens", "100",
                  "--project", "hydra", "--now", NOW.isoformat(), "--json")  # fmt: skip
    assert run.code == 0, run.err
    data = json.loads(run.out)
    assert data["memories"][0]["id"] == named["rollback"] and data["token_estimate"] <= 100
    text = run_cli("--db", str(db), "context", "how do we roll back?", "--format", "checklist")
    assert text.code == 0 and text.out.startswith("- ") and "confidence" in text.out


# --------------------------------------------------------------------------- threads


def test_thread_carries_the_session_within_its_budget(
    engine: cortex.Engine, ids: dict[str, int]
) -> None:
    plain = engine.search("rollback", now=NOW, record=False)
    assert all(r.thread is None and "thread" not in r.to_dict() for r in plain)
    found = engine.search("rollback", now=NOW, record=False, thread=True)
    first = next(r for r in found if r.memory.id == ids["rollback"])
    assert [t["id"] for t in first.thread or []] == [ids["bluegreen"], ids["smoke"]]
    assert first.to_dict()["thread"] == first.thread
    # a budget for one turn: the nearest in time (smoke tests, a day after; blue-green a
    # day before: the tie goes to the lower id)
    tight = engine.search("rollback", now=NOW, record=False, thread=True, thread_tokens=40)
    one = next(r for r in tight if r.memory.id == ids["rollback"])
    assert len(one.thread or []) == 1
    assert sum(-(-len(t["content"]) // 4) for t in one.thread or []) <= 40
    # the long incident note has no session: an empty thread
    lonely = engine.search("incident outage", now=NOW, record=False, thread=True)
    assert next(r for r in lonely if r.memory.id == ids["long"]).thread == []
    lean = lean_search(found)["results"]
    assert (
        next(r for r in lean if r["id"] == ids["rollback"])["thread"][0]["id"] == ids["bluegreen"]
    )
    with pytest.raises(cortex.InvalidOptionError, match="thread_tokens"):
        engine.search("x", thread=True, thread_tokens=0)


def test_thread_stays_in_the_project(tmp_path: Path) -> None:
    with cortex.open(tmp_path / "t.db", embedder=None) as e:
        a = e.add("we chose the blue deploy", project="p", session="s", created_at=1000)
        e.add("secret of q in the same session id", project="q", session="s", created_at=1001)
        b = e.add("then the green one", project="p", session="s", created_at=1002)
        found = e.search("blue deploy", mode="keyword", thread=True, record=False)
        assert [t["id"] for t in found[0].thread or []] == [b]
        assert found[0].memory.id == a


def test_server_search_gives_the_conversation_thread(
    engine: cortex.Engine, ids: dict[str, int]
) -> None:
    from .test_server import SEARCH, client

    body = {"query": "rollback", "context": {"thread": True, "maxContextSize": 40}}
    with client(engine) as c:
        r = c.post(SEARCH, json=body)
        assert r.status_code == 200, r.text
        first = next(x for x in r.json()["results"] if x["id"] == ids["rollback"])
        thread = first["context"]["conversation_thread"]
        assert len(thread) == 1 and thread[0]["id"] in (ids["bluegreen"], ids["smoke"])
        llm = c.post("/api/memories/llm-search", json={
            "prompt": "how do we roll back?", "max_tokens": 60,
            "context": {"current_project": "hydra", "task": "release"},
        }).json()  # fmt: skip
        assert llm["basis"] == "context" and llm["scope"] == "project:hydra:task:release"
        assert llm["token_estimate"] <= 60 and llm["memories"][0]["id"] == ids["rollback"]


@pytest.mark.timeout(120)
def test_mcp_confined_to_a_project(store: tuple[Path, dict[str, int]]) -> None:
    db, named = store
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "cortex.mcp", "--db", str(db), "--project", "atlas"],
        env=dict(os.environ),
    )
    with start_blocking_portal() as portal:
        client = Client(params, read_timeout_seconds=TIMEOUT)
        with portal.wrap_async_context_manager(client):
            confined = Tools(portal, client)
            answer = confined.call("memory_context", {"prompt": "blue green deploys"})
            assert not answer.is_error, _text(answer)
            data = answer.structured_content
            assert data["ids"] and data["scope"] == "project:atlas*"
            assert "idle color" not in data["text"] and "hydra" not in data["text"]
            assert set(data["ids"]) <= {named["atlas_deploy"], named["mbtiles"], named["ingress"]}
            other = confined.call("memory_context", {"prompt": "x", "project": "hydra"})
            assert other.is_error and "not served" in _text(other)
            walled = confined.call("memory_similar", {"id": named["bluegreen"]})
            assert walled.is_error and "no memory with id" in _text(walled)
            near = confined.call("memory_similar", {"id": named["mbtiles"]})
            assert {r["project"] for r in near.structured_content["results"]} == {"atlas"}


def test_cli_search_prints_suggestions(store: tuple[Path, dict[str, int]]) -> None:
    from .conftest import run_cli

    db, _ = store
    run = run_cli("--db", str(db), "search", "pgbouncr pool", "--no-record")
    assert run.code == 0, run.err
    assert "try: pgbouncer pool" in run.out
    data = json.loads(run_cli("--db", str(db), "search", "pgbouncr", "--json", "--no-record").out)
    assert data["suggestions"][0] == "pgbouncer"


def test_lean_interpretation_names_the_window(engine: cortex.Engine) -> None:
    lean = lean_search(engine.search("what did we do last week", now=NOW, record=False))
    assert lean["interpretation"] == {
        "window": "last week", "since": "2026-11-16", "until": "2026-11-23",
        "applied": "hard", "searched": "what did we do",
    }  # fmt: skip
