"""`cortex serve`'s HTTP API through Starlette's TestClient, on a real database and model.

Every endpoint; the answer equal to `cortex search --json`; a battery of bad requests, each
a 4xx JSON error with the database unchanged; tokens, the project wall, the rate limit,
the host check, CORS, the recall log and the access log.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import cortex
from cortex.server import create_app
from cortex.server.api import Capabilities, decode_cursor, encode_cursor
from cortex.server.security import RateLimiter, is_loopback, parse_rate
from tests.conftest import SAMPLE, db_digest, run_cli
from tests.procs import cortex_command, free_port, wait_until_serving

TOKEN = "s3cret-token-for-tests-0123456789"
OTHER_TOKEN = "alpha-only-token-abcdefghijklmnop"
BASE = "http://127.0.0.1"
SEARCH = "/api/memories/search"
ADD = "/api/memories"
LLM = "/api/memories/llm-search"

ALPHA = [
    "The alpha deploy uses a blue-green switch behind the load balancer.",
    "Alpha's database migrations run before the deploy, never after.",
    "We fixed the alpha auth bug: the token refresh raced the session cache.",
]
BETA = [
    "Beta deploys by rolling restart; the secret word is zanzibar.",
    "The beta auth service keeps tokens in Redis for ten minutes.",
]


def fill(engine: cortex.Engine) -> cortex.Engine:
    """The sample notes (no project) plus two projects that share words."""
    assert not engine.import_path(SAMPLE).errors
    for text in ALPHA:
        engine.add(text, project="alpha", category="ops")
    for text in BETA:
        engine.add(text, project="beta", category="ops")
    return engine


@pytest.fixture
def store(engine: cortex.Engine) -> cortex.Engine:
    return fill(engine)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[cortex.Engine]:
    """One filled database for the tests that must leave it unchanged."""
    path = tmp_path_factory.mktemp("shared") / "memories.db"
    with cortex.open(path, embedder=embedder) as engine:
        yield fill(engine)


def client(engine: cortex.Engine, **kwargs: Any) -> TestClient:
    kwargs.setdefault("rate_limit", None)
    return TestClient(create_app(engine, **kwargs), base_url=BASE)


@pytest.fixture
def api(store: cortex.Engine) -> Iterator[TestClient]:
    with client(store) as c:
        yield c


def ids_of(project: str, engine: cortex.Engine) -> list[int]:
    return [r.memory.id for r in engine.search(None, project=project, record=False)]


def recall_lenses(path: Path) -> list[str | None]:
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT lens FROM recall_log ORDER BY id")]
    finally:
        conn.close()


# --------------------------------------------------------------------------- endpoints


def test_search_answers_seed_003_shape(api: TestClient) -> None:
    r = api.post(
        "/api/memories/search",
        json={"query": "deploy release auth", "pagination": {"limit": 3}},
    )
    assert r.status_code == 200
    data = r.json()
    assert set(data) >= {"interpretation", "results", "aggregations", "pagination", "mode"}
    assert 1 <= len(data["results"]) <= 3
    first = data["results"][0]
    assert set(first) >= {"memory", "score", "score_parts", "context", "related", "highlights"}
    assert first["score_parts"]["relevance"] == first["score"]
    marks = re.findall(r"<mark>(.*?)</mark>", first["snippet"])
    assert sorted({m.lower() for m in marks}) == first["highlights"]["matched_keywords"]
    assert data["pagination"]["returned"] == len(data["results"])
    assert data["pagination"]["hasMore"] is True  # the sample holds more than 3 matches
    assert data["interpretation"]["strategies"] == [data["mode"]]
    # the engine counts every match, not only the page
    total = sum(b["count"] for b in data["aggregations"]["timeDistribution"]["buckets"])
    assert total == data["aggregations"]["totalCount"] == data["total"]
    assert total > len(data["results"])


def _cli_results(db: Path, *args: str) -> list[dict[str, Any]]:
    run = run_cli("--db", str(db), "search", *args, "--json", "--no-record")
    assert run.code == 0, run.err
    return json.loads(run.out)["results"]


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
def test_search_equals_cli_json(store: cortex.Engine, db_path: Path, mode: str) -> None:
    """Same query and options: the same results, field for field (the CLI runs first with
    --no-record, so both rank the same database; recency off so the clock cannot move a
    score between the two calls)."""
    query = "deploy auth token"
    cli = _cli_results(
        db_path, query, "--mode", mode, "--limit", "6", "--recency-weight", "0",
        "--category", "ops", "--since", "2000-01-01",
    )  # fmt: skip
    assert cli, "the query must find something for the comparison to mean anything"
    with client(store) as c:
        r = c.post(
            "/api/memories/search",
            json={
                "query": query,
                "mode": mode,
                "filters": {"category": "ops", "dateRange": {"start": "2000-01-01"}},
                "pagination": {"limit": 6},
                "options": {"recency_weight": 0},
            },
        )
    assert r.status_code == 200, r.text
    http = r.json()["results"]
    assert [{k: x[k] for k in cli[0]} for x in http] == cli


def test_search_equals_cli_with_default_options(store: cortex.Engine, db_path: Path) -> None:
    cli = _cli_results(db_path, "how do we ship a release", "--limit", "5")
    with client(store) as c:
        http = c.post(
            "/api/memories/search",
            json={"query": "how do we ship a release", "pagination": {"limit": 5}},
        ).json()["results"]
    assert [x["id"] for x in http] == [x["id"] for x in cli]
    for a, b in zip(http, cli, strict=True):  # recency moves by ~1e-6 a second
        assert a["score"] == pytest.approx(b["score"], rel=1e-4)
        assert a["snippet"] == b["snippet"]


@pytest.mark.parametrize("query", ["deploy OR auth OR release OR database OR token*", None])
def test_pages_concatenated_equal_one_search(api: TestClient, query: str | None) -> None:
    # every match, weak ones too (the relevance floor is not what paging is about)
    base = {"query": query, "mode": "keyword", "options": {"min_score": 0}}
    whole = api.post(SEARCH, json={**base, "pagination": {"limit": 9}}).json()["results"]
    assert len(whole) >= 7
    seen: list[int] = []
    cursor = None
    for _ in range(5):
        page: dict[str, Any] = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        data = api.post(SEARCH, json={**base, "pagination": page}).json()
        seen += [x["id"] for x in data["results"]]
        cursor = data["pagination"]["nextCursor"]
        assert data["pagination"]["hasMore"] is (cursor is not None)
        if len(seen) >= len(whole):
            break
    assert seen[: len(whole)] == [x["id"] for x in whole]
    by_offset = api.post(SEARCH, json={**base, "pagination": {"limit": 3, "offset": 3}}).json()
    assert [x["id"] for x in by_offset["results"]] == [x["id"] for x in whole[3:6]]


def test_cursor_round_trip() -> None:
    assert decode_cursor(encode_cursor(40)) == 40


def test_add_get_timeline(api: TestClient, store: cortex.Engine) -> None:
    r = api.post(
        "/api/memories",
        json={
            "content": "Gamma ships on Fridays only after the smoke test.",
            "project": "gamma",
            "category": "rule",
            "created_at": "2026-03-01T10:00:00Z",
            "metadata": {"from": "http"},
        },
    )
    assert r.status_code == 201, r.text
    added = r.json()
    assert added["content"].startswith("Gamma ships") and added["project"] == "gamma"
    assert added["created_at"] == "2026-03-01T10:00:00Z"
    assert store.get(added["id"]).metadata == {"from": "http"}
    got = api.get(f"/api/memories/{added['id']}")
    assert got.status_code == 200 and got.json() == store.get(added["id"]).to_dict()
    alpha = ids_of("alpha", store)
    tl = api.get(f"/api/memories/{alpha[1]}/timeline", params={"before": 1, "after": 1})
    assert tl.status_code == 200
    assert tl.json() == store.timeline(alpha[1], 1, 1).to_dict()
    found = api.post(
        "/api/memories/search",
        json={"query": "Fridays smoke test", "filters": {"projects": ["gamma"]}},
    ).json()["results"]
    assert [x["id"] for x in found] == [added["id"]]


def test_health_projects_openapi_docs(api: TestClient) -> None:
    health = api.get("/api/health").json()
    assert health["status"] == "ok" and health["version"] == cortex.__version__
    assert health["capabilities"] == Capabilities.of().to_dict()
    projects = api.get("/api/projects").json()["projects"]
    assert projects["alpha"] == 3 and projects["beta"] == 2
    spec = api.get("/openapi.json").json()
    assert spec["openapi"].startswith("3.")
    documented = {(m.upper(), p) for p, ops in spec["paths"].items() for m in ops}
    routes = {
        (m, getattr(r, "path", ""))
        for r in api.app.routes  # type: ignore[attr-defined]
        for m in (getattr(r, "methods", None) or ())
        if getattr(r, "path", "").startswith("/api/") and m != "HEAD"
    }
    assert documented == routes
    assert "min_similarity" in spec["components"]["schemas"]["Options"]["properties"]
    docs = api.get("/docs")
    assert docs.status_code == 200 and "/api/memories/search" in docs.text


def test_pages_fetch_nothing_from_elsewhere(api: TestClient) -> None:
    """No CDN: every script, style and fetch of the page and the docs is this origin's."""
    for path in ("/", "/docs", "/static/app.js", "/static/style.css", "/static/docs.js"):
        r = api.get(path)
        assert r.status_code == 200, path
        assert not re.search(r"(src|href)=[\"']?(https?:)?//", r.text), path
        assert "http://" not in r.text and "https://" not in r.text, path
    page = api.get("/")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"


def test_llm_search_packs_into_max_tokens(api: TestClient) -> None:
    r = api.post(
        "/api/memories/llm-search",
        json={"prompt": "how do we deploy?", "max_tokens": 120, "format": "detailed"},
    )
    assert r.status_code == 200, r.text
    data = r.json()
    assert set(data) >= {"answer", "memories", "suggestions", "confidence"}
    assert 0.0 <= data["confidence"] <= 1.0
    assert data["basis"] == "context"  # Engine.context answers it
    assert data["memories"] and data["token_estimate"] <= 120
    assert len(data["text"]) <= 4 * 120 and data["scope"] == "universal"
    nothing = api.post("/api/memories/llm-search", json={"prompt": "qwxzv plorg"}).json()
    assert nothing["confidence"] <= data["confidence"]


# --------------------------------------------------------------------------- bad input

BIG = b'{"query": "' + b"a" * 1_100_000 + b'"}'
J = {"content-type": "application/json"}


def _chunks() -> Iterator[bytes]:
    yield b'{"query": "'
    for _ in range(12):
        yield b"b" * 100_000
    yield b'"}'


BAD: list[tuple[str, str, str, dict[str, Any], int]] = [
    # (name, method, path, request kwargs, status)
    ("truncated JSON", "POST", SEARCH, {"content": b'{"query": "x"', "headers": J}, 400),
    ("empty body", "POST", SEARCH, {"content": b"", "headers": J}, 400),
    ("array body", "POST", SEARCH, {"json": ["query"]}, 400),
    ("string body", "POST", SEARCH, {"json": "deploy"}, 400),
    ("null body", "POST", SEARCH, {"content": b"null", "headers": J}, 400),
    ("NaN limit", "POST", SEARCH, {"content": b'{"pagination": {"limit": NaN}}', "headers": J},
     400),
    ("Infinity alpha", "POST", SEARCH,
     {"content": b'{"query": "x", "options": {"alpha": Infinity}}', "headers": J}, 400),
    ("invalid UTF-8", "POST", SEARCH, {"content": b'{"query": "\xff\xfe"}', "headers": J}, 400),
    ("nested too deep", "POST", SEARCH, {"content": b"[" * 100_000, "headers": J}, 400),
    ("huge body", "POST", SEARCH, {"content": BIG, "headers": J}, 413),
    ("huge chunked body", "POST", SEARCH, {"content": _chunks(), "headers": J}, 413),
    ("text/plain", "POST", SEARCH,
     {"content": b'{"query": "x"}', "headers": {"content-type": "text/plain"}}, 415),
    ("unknown field", "POST", SEARCH, {"json": {"query": "x", "projct": "alpha"}}, 422),
    ("unknown filter", "POST", SEARCH, {"json": {"filters": {"project": "alpha"}}}, 422),
    ("unknown option", "POST", SEARCH, {"json": {"options": {"alhpa": 0.5}}}, 422),
    ("unknown page field", "POST", SEARCH, {"json": {"pagination": {"page": 2}}}, 422),
    ("query a number", "POST", SEARCH, {"json": {"query": 42}}, 400),
    ("limit a string", "POST", SEARCH, {"json": {"pagination": {"limit": "5"}}}, 400),
    ("limit 0", "POST", SEARCH, {"json": {"pagination": {"limit": 0}}}, 400),
    ("limit 10^30", "POST", SEARCH, {"json": {"pagination": {"limit": 10**30}}}, 400),
    ("negative offset", "POST", SEARCH, {"json": {"pagination": {"offset": -1}}}, 400),
    ("bad cursor", "POST", SEARCH, {"json": {"pagination": {"cursor": "../../etc"}}}, 400),
    ("unknown mode", "POST", SEARCH, {"json": {"query": "x", "mode": "fuzzy"}}, 400),
    ("strategies a string", "POST", SEARCH, {"json": {"strategies": "keyword"}}, 400),
    ("alpha 10^400", "POST", SEARCH, {"json": {"query": "x", "options": {"alpha": 10**400}}}, 400),
    ("bad date", "POST", SEARCH,
     {"json": {"filters": {"dateRange": {"start": "the day after"}}}}, 400),
    ("record off", "POST", SEARCH, {"json": {"query": "x", "options": {"record": False}}}, 400),
    ("recorded_as", "POST", SEARCH,
     {"json": {"query": "x", "options": {"recorded_as": "admin"}}}, 400),
    ("unknown lens", "POST", SEARCH, {"json": {"query": "x", "options": {"lens": "nope"}}}, 400),
    ("sort by unknown", "POST", SEARCH, {"json": {"sort": {"by": "vibes"}}}, 400),
    ("sort order sideways", "POST", SEARCH, {"json": {"sort": {"order": "sideways"}}}, 400),
    ("projects a string", "POST", SEARCH, {"json": {"filters": {"projects": "alpha"}}}, 400),
    ("projects empty", "POST", SEARCH, {"json": {"filters": {"projects": []}}}, 400),
    ("NUL in category", "POST", SEARCH, {"json": {"filters": {"category": "a\x00b"}}}, 400),
    ("add without content", "POST", ADD, {"json": {"project": "alpha"}}, 400),
    ("add content a number", "POST", ADD, {"json": {"content": 5}}, 400),
    ("add blank content", "POST", ADD, {"json": {"content": "   "}}, 400),
    ("add salience 2", "POST", ADD, {"json": {"content": "x", "salience": 2}}, 400),
    ("add metadata a string", "POST", ADD, {"json": {"content": "x", "metadata": "m"}}, 400),
    ("add bad date", "POST", ADD, {"json": {"content": "x", "created_at": "soon"}}, 400),
    ("add unknown field", "POST", ADD, {"json": {"content": "x", "owner": "me"}}, 422),
    ("add huge", "POST", ADD, {"content": BIG.replace(b"query", b"content"), "headers": J}, 413),
    ("id not a number", "GET", "/api/memories/abc", {}, 400),
    ("id traversal", "GET", "/api/memories/..%2F..%2Fetc%2Fpasswd", {}, 404),
    ("id dot dot", "GET", "/api/memories/%2e%2e", {}, 400),
    ("id negative", "GET", "/api/memories/-1", {}, 400),
    ("id past int64", "GET", "/api/memories/99999999999999999999999", {}, 400),
    ("id fullwidth digits", "GET", "/api/memories/\uff11", {}, 400),
    ("missing id", "GET", "/api/memories/987654", {}, 404),
    ("unknown query param", "GET", "/api/memories/1?verbose=1", {}, 422),
    ("timeline before -1", "GET", "/api/memories/1/timeline?before=-1", {}, 400),
    ("timeline before huge", "GET", "/api/memories/1/timeline?before=5000", {}, 400),
    ("timeline of missing", "GET", "/api/memories/987654/timeline", {}, 404),
    ("llm without prompt", "POST", LLM, {"json": {"max_tokens": 5}}, 400),
    ("llm bad format", "POST", LLM, {"json": {"prompt": "x", "format": "poem"}}, 400),
    ("llm max_tokens 0", "POST", LLM, {"json": {"prompt": "x", "max_tokens": 0}}, 400),
    ("DELETE a memory", "DELETE", "/api/memories/1", {}, 405),
    ("GET the search", "GET", SEARCH, {}, 400),  # read as the id "search"
    ("no such route", "GET", "/api/memories/1/../../../etc/passwd", {}, 404),
]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "kwargs", "status"), [b[1:] for b in BAD],
                         ids=[b[0] for b in BAD])  # fmt: skip
def test_bad_input_is_a_4xx_json_error(
    shared: cortex.Engine,
    method: str,
    path: str,
    kwargs: dict[str, Any],
    status: int,
) -> None:
    db_path = shared.path
    with client(shared) as c:
        before = db_digest(db_path)
        r = c.request(method, path, **kwargs)
        assert r.status_code == status, r.text[:300]
        body = r.json()
        assert set(body) == {"error"} and body["error"] and "\n" not in body["error"]
        assert "Traceback" not in body["error"]
        assert db_digest(db_path) == before
        assert c.get("/api/health").status_code == 200  # still serving


def test_bad_values_carry_cortex_messages(api: TestClient) -> None:
    r = api.post(SEARCH, json={"query": "x", "mode": "fuzzy"})
    with pytest.raises(cortex.InvalidOptionError) as exc:
        cortex.Options(mode="fuzzy")  # type: ignore[arg-type]
    assert r.json()["error"] == str(exc.value)


def test_not_supported_yet_is_said(api: TestClient) -> None:
    caps = Capabilities.of()
    for body, needs in (
        ({"query": "x", "strategies": ["temporal"]}, None),
        ({"query": "x", "context": {"expandChunks": True}}, "context"),
        ({"query": "x", "sort": {"order": "asc"}}, "order"),
    ):
        r = api.post(SEARCH, json=body)
        if needs is not None and caps.has(needs):
            assert r.status_code == 200, r.text
        else:
            assert r.status_code == 400 and "not supported yet" in r.json()["error"]


# --------------------------------------------------------------------------- security


def test_token_required_and_compared(store: cortex.Engine, db_path: Path) -> None:
    with client(store, token=TOKEN) as c:
        before = db_digest(db_path)
        assert c.get("/").status_code == 200  # the page holds no memory
        wrong = ("", "Bearer wrong", TOKEN, f"Basic {TOKEN}", f"Bearer {TOKEN}x")
        for headers in [{"authorization": w} if w else {} for w in wrong]:
            r = c.post(SEARCH, json={"query": "deploy"}, headers=headers)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
            r = c.post("/api/memories", json={"content": "intruder"}, headers=headers)
            assert r.status_code == 401
        assert db_digest(db_path) == before
        ok = c.post(SEARCH, json={"query": "deploy"}, headers={"authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200 and ok.json()["results"]
    label = recall_lenses(db_path)[-1]
    assert label is not None and label.startswith("http:testclient:token-")
    assert TOKEN not in label


def test_short_token_refused(store: cortex.Engine) -> None:
    with pytest.raises(cortex.InvalidOptionError, match="at least 16"):
        create_app(store, token="short")


def test_public_bind_needs_a_token(db_path: Path) -> None:
    run = run_cli("--db", str(db_path), "serve", "--host", "0.0.0.0", "--port", "1")
    assert run.code == 1 and "token" in run.err and "Traceback" not in run.err
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2")


def test_foreign_host_header_refused_without_token(api: TestClient) -> None:
    r = api.get("/api/health", headers={"host": "evil.example:8765"})
    assert r.status_code == 403
    assert api.get("/api/health", headers={"host": "localhost:8765"}).status_code == 200
    assert api.get("/api/health", headers={"host": "[::1]:8765"}).status_code == 200


def test_project_wall(store: cortex.Engine, db_path: Path) -> None:
    alpha, beta = ids_of("alpha", store), ids_of("beta", store)
    with client(store, projects=["alpha"]) as c:
        before = db_digest(db_path)
        r = c.post(SEARCH, json={"query": "deploy", "filters": {"projects": ["beta"]}})
        assert r.status_code == 403
        assert c.post(SEARCH, json={"query": "x", "filters": {"projects": ["alpha", "beta"]}}
                      ).status_code == 403  # fmt: skip
        missing = c.get("/api/memories/987654").json()["error"]
        for memory_id in beta:
            r = c.get(f"/api/memories/{memory_id}")
            assert r.status_code == 404
            assert r.json()["error"] == missing.replace("987654", str(memory_id))
            assert c.get(f"/api/memories/{memory_id}/timeline").status_code == 404
        assert c.post("/api/memories", json={"content": "x", "project": "beta"}).status_code == 403
        r = c.post("/api/memories/llm-search",
                   json={"prompt": "deploy", "context": {"current_project": "beta"}})  # fmt: skip
        assert r.status_code == 403
        assert db_digest(db_path) == before
        # no project named: only alpha's memories, in every mode, with the secret word too
        for mode in ("hybrid", "keyword", "semantic"):
            for query in ("deploy auth tokens", "zanzibar", None):
                data = c.post(SEARCH, json={"query": query, "mode": mode}).json()
                got = {x["memory"]["project"] for x in data["results"]}
                assert got <= {"alpha"}, (mode, query)
                assert "zanzibar" not in json.dumps(data["results"])
        assert c.get(f"/api/memories/{alpha[0]}").status_code == 200
        assert set(c.get("/api/projects").json()["projects"]) == {"alpha"}
        added = c.post("/api/memories", json={"content": "Alpha rule: tag every release."})
        assert added.status_code == 201 and added.json()["project"] == "alpha"
        llm = c.post("/api/memories/llm-search", json={"prompt": "deploy auth"}).json()
        assert {m["project"] for m in llm["memories"]} <= {"alpha"}


def test_token_walls(store: cortex.Engine) -> None:
    beta = ids_of("beta", store)
    with client(store, tokens={TOKEN: None, OTHER_TOKEN: ["alpha"]}) as c:
        full = {"authorization": f"Bearer {TOKEN}"}
        alpha_only = {"authorization": f"Bearer {OTHER_TOKEN}"}
        assert c.get(f"/api/memories/{beta[0]}", headers=full).status_code == 200
        assert c.get(f"/api/memories/{beta[0]}", headers=alpha_only).status_code == 404
        data = c.post(SEARCH, json={"query": "zanzibar deploy"}, headers=alpha_only).json()
        assert {x["memory"]["project"] for x in data["results"]} <= {"alpha"}
        both = c.post(SEARCH, json={"query": "zanzibar"}, headers=full).json()
        assert any(x["memory"]["project"] == "beta" for x in both["results"])


def test_several_projects_at_once(store: cortex.Engine) -> None:
    with client(store, projects=["alpha", "beta"]) as c:
        r = c.post(SEARCH, json={"query": "deploy"})
        if Capabilities.of().projects_field is None:
            assert r.status_code == 400 and "alpha, beta" in r.json()["error"]
            one = c.post(SEARCH, json={"query": "deploy", "filters": {"projects": ["beta"]}})
            assert {x["memory"]["project"] for x in one.json()["results"]} == {"beta"}
        else:
            assert {x["memory"]["project"] for x in r.json()["results"]} == {"alpha", "beta"}


def test_rate_limit(store: cortex.Engine, db_path: Path) -> None:
    with client(store, rate_limit=parse_rate("1/min")) as c:
        assert c.get("/api/health").status_code == 200
        r = c.post("/api/memories", json={"content": "quixotic platypus"})
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        assert "too many requests" in r.json()["error"]
    assert not store.search("quixotic platypus", mode="keyword", record=False)


def test_rate_limiter_refills() -> None:
    bucket = RateLimiter(rate=2.0, burst=2.0)
    assert bucket.take("a", now=0.0) == 0 and bucket.take("a", now=0.0) == 0
    assert bucket.take("a", now=0.0) == pytest.approx(0.5)
    assert bucket.take("b", now=0.0) == 0  # per client
    assert bucket.take("a", now=0.6) == 0
    assert parse_rate("off") is None and parse_rate("120/min") == 2.0
    with pytest.raises(cortex.InvalidOptionError):
        parse_rate("fast")


def test_cors_off_unless_configured(store: cortex.Engine) -> None:
    origin = {"origin": "http://localhost:3000"}
    with client(store) as c:
        r = c.post(SEARCH, json={"query": "deploy"}, headers=origin)
        assert "access-control-allow-origin" not in r.headers
    with client(store, cors_origins=["http://localhost:3000"]) as c:
        r = c.post(SEARCH, json={"query": "deploy"}, headers=origin)
        assert r.headers["access-control-allow-origin"] == "http://localhost:3000"
        r = c.post(SEARCH, json={"query": "deploy"}, headers={"origin": "http://evil.example"})
        assert "access-control-allow-origin" not in r.headers


def test_searches_recorded_with_client(api: TestClient, db_path: Path) -> None:
    before = len(recall_lenses(db_path))
    data = api.post(SEARCH, json={"query": "deploy", "pagination": {"limit": 2}}).json()
    lenses = recall_lenses(db_path)[before:]
    assert len(lenses) == len(data["results"]) == 2
    assert set(lenses) == {"http:testclient"}


def test_access_log_holds_no_memory_text(api: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="cortex.server"):
        api.post(SEARCH, json={"query": "zanzibar"})
        api.post("/api/memories", json={"content": "the vault code is 7781 quokka"})
        api.get("/api/memories/1/timeline?before=1")
    text = caplog.text
    assert "POST /api/memories/search 200" in text
    for secret in ("zanzibar", "quokka", "7781", "before=1"):
        assert secret not in text


def test_cortex_serve_flags(shared: cortex.Engine) -> None:
    """`cortex serve` as a user starts it: the token from $CORTEX_TOKEN, a project wall
    and the rate limit from the flags, then SIGTERM ends it cleanly."""
    import os
    import subprocess
    import urllib.error
    import urllib.request

    port = free_port()
    args = ["--db", str(shared.path), "serve", "--port", str(port), "--project", "alpha",
            "--rate-limit", "1000/min"]  # fmt: skip
    env = {**os.environ, "CORTEX_TOKEN": TOKEN}
    proc = subprocess.Popen([*cortex_command(), *args], env=env, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"

    def get(path: str, token: str | None) -> tuple[int, Any]:
        request = urllib.request.Request(base + path)
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, json.load(exc)

    try:
        wait_until_serving(proc, base + "/api/health")
        assert get("/api/health", None)[0] == 401
        status, health = get("/api/health", TOKEN)
        assert status == 200 and health["projects"] == ["alpha"]
        beta = ids_of("beta", shared)[0]
        assert get(f"/api/memories/{beta}", TOKEN)[0] == 404
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert TOKEN not in err and "zanzibar" not in err
    assert f"GET /api/memories/{beta} 404" in err
