"""Bad input, the items tests/test_bad_input.py and tests/test_mcp.py leave out.

Through the CLI: files that cannot be imported (invalid UTF-8, NUL bytes, a broken JSONL
line, a bad record) leave the database exactly as it was, with one line per file and no
traceback; more out-of-range options. Through the API: odd text stored and found
verbatim, bad database paths, a directory where the vector index or the WAL should be.
Through the MCP server: malformed FTS5, NUL bytes, a 1 MB query, emoji, right-to-left,
CJK and SQL-looking text, and the out-of-range values its battery does not send; and
`cortex mcp` started on a path it cannot use. Each: a typed error or a correct (often
empty) result, and the database unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters

import cortex
from cortex.errors import IndexFormatError, InvalidOptionError, QueryError, StorageError

from .conftest import SAMPLE, db_digest, run_cli

# --------------------------------------------------------------------------- import

BAD_FILES: dict[str, bytes] = {
    "latin1.md": "# Café\n\nnotes in latin-1: café crème\n".encode("latin-1"),
    "truncated-utf8.md": b"# Title\n\nends in half a character " + "é".encode()[:1],
    "nul.md": b"# Title\n\nhas a NUL\x00byte inside\n",
    "nul.jsonl": b'{"content": "a\\u0000b"}\n',
    "broken.jsonl": b'{"content": "first line is fine"}\n{"content": "second is not"\n',
    "not-object.json": b'["just", "strings"]',
    "no-content.jsonl": b'{"text": 5}\n',
    "bad-date.jsonl": b'{"content": "x", "created_at": "last tuesday"}\n',
    "bad-confidence.jsonl": b'{"content": "x", "confidence": 5}\n',
    "nan-date.json": b'{"content": "x", "created_at": NaN}',
    "metadata-list.jsonl": b'{"content": "x", "metadata": [1, 2]}\n',
    "project-number.jsonl": b'{"content": "x", "project": 7}\n',
    "bom-then-invalid.md": b"\xef\xbb\xbf# T\n\n\xff\xfe\n",
}


@pytest.fixture(scope="module")
def module_db(tmp_path_factory: pytest.TempPathFactory, embedder) -> Path:
    """The sample notes, imported once for the tests that only read."""
    db = tmp_path_factory.mktemp("bad-more") / "cli.db"
    with cortex.open(db, embedder=embedder) as engine:
        assert not engine.import_path(SAMPLE).errors
    return db


@pytest.fixture
def cli_db(module_db: Path, tmp_path: Path) -> Path:
    """A copy of the sample database this test may write to."""
    import shutil

    db = tmp_path / module_db.name
    for path in module_db.parent.iterdir():
        if path.name.startswith(module_db.name):  # the file, its -wal, its -vectors folder
            copy = shutil.copytree if path.is_dir() else shutil.copy
            copy(path, tmp_path / path.name)
    return db


@pytest.mark.timeout(120)
def test_cli_import_of_bad_files_leaves_the_database_unchanged(cli_db: Path, tmp_path: Path):
    folder = tmp_path / "bad"
    folder.mkdir()
    for name, data in BAD_FILES.items():
        (folder / name).write_bytes(data)
    before = db_digest(cli_db)
    # One file at a time (a sample: the folder below runs them all in one process).
    for name in ("latin1.md", "nul.md", "broken.jsonl"):
        result = run_cli("--db", str(cli_db), "import", str(folder / name))
        assert result.code == 1, (name, result.out, result.err)
        assert "Traceback" not in result.err, name
        lines = result.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("cortex: cannot import"), (name, lines)
        assert db_digest(cli_db) == before, name
    # The whole folder at once: every file refused, each named, nothing written.
    result = run_cli("--db", str(cli_db), "import", str(folder), "--json")
    assert result.code == 1 and "Traceback" not in result.err
    report = json.loads(result.out)[0]
    assert report["added"] == 0 and len(report["errors"]) == len(BAD_FILES), report
    assert db_digest(cli_db) == before


@pytest.mark.timeout(60)
def test_cli_import_skips_the_bad_file_whole_and_keeps_the_good(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "good.md").write_text("# Good\n\nthe good note about zebrafish\n")
    (folder / "half.jsonl").write_bytes(
        b'{"content": "okapi line one is valid"}\n{"content": "okapi two\n'
    )
    db = tmp_path / "m.db"
    result = run_cli("--db", str(db), "import", str(folder))
    assert result.code == 1 and "half.jsonl" in result.err and "Traceback" not in result.err
    with cortex.open(db, read_only=True, embedder=None) as engine:
        assert [r.memory.content for r in engine.search("zebrafish", mode="keyword")] == [
            "# Good\n\nthe good note about zebrafish"
        ]
        # the first, valid line of the broken file did not go in alone
        assert list(engine.search("okapi", mode="keyword")) == []


#: Out-of-range values the CLI battery in tests/test_bad_input.py does not send.
CLI_BAD = [
    (["--limit", "1000000000"], 1, "limit must be between"),
    (["--min-score", "nan"], 1, "min_score must be a finite number"),
    (["--recency-weight", "inf"], 1, "recency_weight must be a finite number"),
    (["--min-similarity", "2"], 1, "min_similarity must be <="),
    (["--token-budget", "-3"], 1, "token_budget must be a positive integer"),
    (["--order-by", "random"], 2, "invalid choice"),
]


@pytest.mark.timeout(120)
def test_cli_more_out_of_range_options(module_db: Path) -> None:
    before = db_digest(module_db)
    for args, code, message in CLI_BAD:
        result = run_cli("--db", str(module_db), "search", "deploy", *args, "--no-record")
        assert result.code == code, (args, result.err)
        assert message in result.err and "Traceback" not in result.err, (args, result.err)
        assert len(result.err.strip().splitlines()) == 1, result.err
    assert db_digest(module_db) == before


# --------------------------------------------------------------------------- API

ODD_TEXT = [
    "🚀 launch checklist 🎉 with emoji",
    "שלום עולם: the Hebrew greeting, right to left",
    "مرحبا بالعالم in Arabic",
    "数据库索引需要定期重建",
    "'; DROP TABLE memories; -- and friends",
    "SELECT * FROM memories WHERE 1=1 UNION SELECT sql FROM sqlite_master",
    "quotes \" and ' and backslash \\ and % and _",
    "e\u0301clair with a combining accent",
    "\u202eright-to-left override\u202c",
]


@pytest.mark.parametrize("text", ODD_TEXT)
def test_odd_text_is_stored_and_found_verbatim(tmp_path: Path, text: str) -> None:
    with cortex.open(tmp_path / "m.db", embedder=None) as engine:
        other = engine.add("an unrelated note about sailing")
        memory_id = engine.add(text)
        assert engine.get(memory_id).content == text
        found = [r.memory.id for r in engine.search(text, mode="keyword", record=False)]
        assert found == [memory_id], (text, found)
        assert engine.get(other).content == "an unrelated note about sailing"
        assert engine.stats()["memories"] == 2


def test_bad_database_paths_are_storage_errors(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="is a directory"):
        cortex.open(tmp_path)
    with pytest.raises(StorageError, match="no database at"):
        cortex.open(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()
    for bad in ("", "a\x00b.db"):
        with pytest.raises(StorageError, match="invalid database path"):
            cortex.open(bad)
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    with pytest.raises(StorageError, match="a part of its folder is a file"):
        cortex.open(plain / "x.db")
    assert plain.read_text() == "x"


def test_read_only_engine_refuses_writes(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with cortex.open(db, embedder=None) as engine:
        engine.add("kept as it was")
    before = db_digest(db)
    with cortex.open(db, read_only=True, embedder=None) as engine:
        with pytest.raises(StorageError, match="read-only"):
            engine.add("not written")
        assert [r.memory.content for r in engine.search("kept", mode="keyword")] == [
            "kept as it was"
        ]
    assert db_digest(db) == before


@pytest.mark.timeout(60)
def test_directory_where_the_vector_index_should_be(tmp_path: Path, embedder) -> None:
    db = tmp_path / "m.db"
    with cortex.open(db, embedder=embedder) as engine:
        memory_id = engine.add("we roll back with one command")
        index = engine._semantic.index_path()  # where the vector file lives
    index.unlink()
    index.mkdir()  # in its place, a directory (a bad restore, a stray mkdir)
    with cortex.open(db, embedder=embedder) as engine:  # the model's vector: made again
        try:
            results = engine.search("how to undo a deploy", mode="semantic", record=False)
        except (IndexFormatError, StorageError) as exc:
            assert str(index) in str(exc), exc  # a clear error naming the path
        else:
            assert [r.memory.id for r in results] == [memory_id]
        # keyword search does not need the index at all
        found = engine.search("roll back", mode="keyword", record=False)
        assert [r.memory.id for r in found] == [memory_id]
        assert engine.store.query("PRAGMA integrity_check") == [("ok",)]


def test_more_bad_values_through_the_api(sample_engine: cortex.Engine) -> None:
    before = db_digest(sample_engine.path)
    bad: list[dict[str, Any]] = [
        {"min_score": float("nan")},
        {"min_score": -1},
        {"min_similarity": float("inf")},
        {"min_similarity": 1.5},
        {"min_salience": 2},
        {"rrf_k": -1},
        {"reinforce": 5},
        {"limit": "10"},
        {"token_budget": 2.5},
        {"include_superseded": "yes"},
        {"order_by": None},
        {"mode": None},
        {"created_until": 12},
    ]
    for changes in bad:
        with pytest.raises(InvalidOptionError):
            sample_engine.search("deploy", **changes)
    with pytest.raises(QueryError):
        sample_engine.search(b"deploy")  # type: ignore[arg-type]
    for content in ("", "   ", "a\x00b", "x" * 1_000_001):
        with pytest.raises(InvalidOptionError):
            sample_engine.add(content)
    with pytest.raises(InvalidOptionError):
        sample_engine.add_many([{"content": "fine"}, {"content": "also fine", "colour": "red"}])
    assert db_digest(sample_engine.path) == before


# --------------------------------------------------------------------------- MCP


@pytest.fixture(scope="module")
def mcp_db(tmp_path_factory: pytest.TempPathFactory, embedder) -> Path:
    db = tmp_path_factory.mktemp("mcp-bad") / "m.db"
    with cortex.open(db, embedder=embedder) as engine:
        assert not engine.import_path(SAMPLE).errors
        engine.add("数据库索引需要定期重建", project="atlas")
        engine.add("🚀 launch checklist 🎉", project="atlas")
        engine.add("שלום עולם deploy notes", project="atlas")
    return db


@pytest.fixture(scope="module")
def mcp(mcp_db: Path) -> Iterator[tuple[BlockingPortal, Client]]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "cortex.mcp", "--db", str(mcp_db)], env=dict(os.environ)
    )
    with start_blocking_portal() as portal:
        client = Client(params, read_timeout_seconds=60)
        with portal.wrap_async_context_manager(client):
            yield portal, client


#: Queries that must answer (results or an empty list), never a tool error.
MCP_ODD_QUERIES = [
    '"unbalanced',
    "NOT",
    "*",
    "(",
    "NEAR(",
    "nosuchcolumn:deploy",
    "deploy\x00staging",
    "\x00",
    "🚀",
    "🚀 launch 🎉",
    "שלום עולם",
    "مرحبا",
    "数据库 索引",
    "数",
    "'; DROP TABLE memories; --",
    "SELECT * FROM memories WHERE 1=1",
    "%",
    "",
    " \t\n ",
    "null",
    "[1, 2]",
]

#: (arguments, words the one-line message must hold): values the battery in
#: tests/test_mcp.py does not send.
MCP_BAD: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    ("memory_search", {"query": "deploy " * 150_000}, ("limit is",)),  # ~1 MB
    ("memory_search", {"query": "deploy", "limit": 2.5}, ("limit",)),
    ("memory_search", {"query": "deploy", "limit": True}, ("limit",)),
    ("memory_search", {"query": "deploy", "min_score": -1}, ("min_score",)),
    ("memory_search", {"query": "deploy", "min_confidence": 1.5}, ("min_confidence",)),
    ("memory_search", {"query": "deploy", "alpha": -0.1}, ("alpha",)),
    ("memory_search", {"query": "deploy", "token_budget": -5}, ("token_budget",)),
    ("memory_search", {"query": "deploy", "order_by": "random"}, ("order_by",)),
    ("memory_search", {"query": "deploy", "mode": ""}, ("mode",)),
    ("memory_search", {"query": "deploy", "created_since": "tuesday"}, ("created_since",)),
    ("memory_search", {"query": "deploy", "scope": "a\x00b"}, ("scope", "NUL")),
    ("memory_search", {"query": ["deploy"]}, ("query",)),
    ("memory_search", {"query": {"q": 1}}, ("query",)),
    ("memory_get", {"id": -1}, ("-1",)),
    ("memory_get", {"id": 1.5}, ("1.5",)),
    ("memory_add", {"content": "x" * 1_000_001}, ("limit",)),
    ("memory_add", {"content": "fine", "project": "a\x00b"}, ("project",)),
    # (a NaN reaches the server as null, which means the default: see test_agent.py)
    ("memory_timeline", {"anchor_id": 1, "after": 10**12}, ("after",)),
]


@pytest.mark.timeout(120)
def test_mcp_odd_queries_answer_and_change_nothing(mcp_db: Path, mcp) -> None:
    portal, client = mcp
    before = db_digest(mcp_db)
    found = 0
    for query in MCP_ODD_QUERIES:
        for mode in ("keyword", "hybrid"):
            args = {"query": query, "mode": mode, "record": False}
            answer = portal.call(client.call_tool, "memory_search", args)
            text = "".join(c.text for c in answer.content if c.type == "text")
            assert not answer.is_error, (query, mode, text)
            assert isinstance(answer.structured_content["results"], list)
            found += bool(answer.structured_content["results"])
    assert found >= 8  # emoji, RTL, CJK and SQL-ish text find their memories
    cjk = portal.call(
        client.call_tool, "memory_search", {"query": "数据库", "mode": "keyword", "record": False}
    ).structured_content["results"]
    assert "数据库索引需要定期重建" in [r["text"] for r in cjk]
    assert db_digest(mcp_db) == before


@pytest.mark.timeout(120)
def test_mcp_more_bad_arguments_are_one_line_tool_errors(mcp_db: Path, mcp) -> None:
    portal, client = mcp
    before = db_digest(mcp_db)
    for tool, args, words in MCP_BAD:
        answer = portal.call(client.call_tool, tool, args)
        message = "".join(c.text for c in answer.content if c.type == "text")
        shown = (tool, {k: str(v)[:40] for k, v in args.items()}, message[:300])
        assert answer.is_error, shown
        assert message and "\n" not in message and "Traceback" not in message, shown
        assert len(message) < 1000, shown  # a 1 MB argument is not echoed back
        assert all(word in message for word in words), shown
    alive = portal.call(
        client.call_tool, "memory_search", {"query": "deploy", "mode": "keyword", "record": False}
    )
    assert not alive.is_error and alive.structured_content["results"]
    assert db_digest(mcp_db) == before


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["directory", "unwritable"])
def test_mcp_server_on_a_bad_database_path(tmp_path: Path, where: str) -> None:
    db = {"directory": tmp_path, "unwritable": Path("/proc/cortex-test/x.db")}[where]
    proc = subprocess.run(
        [sys.executable, "-m", "cortex.mcp", "--db", str(db)],
        input="",
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith("cortex: error:") and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stdout == ""  # nothing on the protocol's channel
