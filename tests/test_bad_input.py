"""Bad input through the API and the CLI: a typed error or a correct empty result, never a
raw SQLite error or a traceback, and the database unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

import cortex
from cortex.errors import CortexError, InvalidOptionError, QueryError

from .conftest import SAMPLE, db_digest, run_cli

# Searches that return results record recalls (access counts, recall_log): a documented
# write. These tests are about bad input leaving the database alone, so they turn it off.
KW = cortex.Options(mode="keyword", record=False)

# Each query must give results or an empty list (never an exception) in keyword mode.
ODD_QUERIES = [
    '"unbalanced',
    'deploy "',
    "NOT",
    "deploy NOT",
    "AND",
    "OR OR OR",
    "*",
    "**",
    "deploy**",
    "(",
    ")",
    "(deploy",
    "deploy)",
    "NEAR(",
    "NEAR(deploy staging",
    "content:deploy",
    "nosuchcolumn:deploy",
    "{content}: deploy",
    "^deploy",
    "deploy\x00staging",
    "\x00",
    "'; DROP TABLE memories; --",
    "SELECT * FROM memories WHERE 1=1",
    "%",
    "_",
    "\\",
    "deploy -staging",
    "🚀 deploy 🎉",
    "🚀",
    "שלום עולם deploy",
    "مرحبا",
    "数据库",
    "数",
    "ｄｅｐｌｏｙ",  # full-width
    "e\u0301clair",  # combining accent
    " \t\n ",
    "",
]


@pytest.mark.parametrize("query", ODD_QUERIES)
def test_odd_queries_through_the_api(sample_engine: cortex.Engine, query: str) -> None:
    before = db_digest(sample_engine.path)
    results = sample_engine.search(query, KW)
    assert isinstance(results, cortex.Results)
    for r in results:
        assert isinstance(r.memory, cortex.Memory)
    assert db_digest(sample_engine.path) == before


@pytest.mark.parametrize("query", ["NOT", "*", "(", "NEAR("])
def test_queries_without_words_find_nothing(sample_engine: cortex.Engine, query: str) -> None:
    assert list(sample_engine.search(query, KW)) == []


@pytest.mark.parametrize("query", ["", "   "])
def test_a_blank_query_lists_by_filters(sample_engine: cortex.Engine, query: str) -> None:
    listed = [r.memory.id for r in sample_engine.search(None, KW)]
    assert listed and [r.memory.id for r in sample_engine.search(query, KW)] == listed


def test_injection_text_is_only_text(sample_engine: cortex.Engine) -> None:
    sample_engine.search("'; DROP TABLE memories; --", KW)
    assert sample_engine.stats()["memories"] > 0


def test_huge_query_is_a_query_error(sample_engine: cortex.Engine) -> None:
    before = db_digest(sample_engine.path)
    with pytest.raises(QueryError, match="limit is"):
        sample_engine.search("deploy " * 200_000, KW)  # 1.4 MB
    assert db_digest(sample_engine.path) == before


def test_long_but_allowed_query_runs(sample_engine: cortex.Engine) -> None:
    query = " ".join(f"word{i}" for i in range(1500))[:9_000] + " deployment"
    assert isinstance(sample_engine.search(query, KW), cortex.Results)


@pytest.mark.parametrize(
    "changes",
    [
        {"limit": -1},
        {"limit": 0},
        {"limit": 10**9},
        {"limit": 2.5},
        {"limit": True},
        {"alpha": float("nan")},
        {"alpha": 1.5},
        {"recency_weight": float("inf")},
        {"min_confidence": -0.1},
        {"mode": "fuzzy"},
        {"order_by": "random"},
        {"fusion": "max"},
        {"token_budget": 0},
        {"project": 12},
        {"scope": "a\x00b"},
        {"created_since": "last tuesday"},
    ],
)
def test_bad_options_are_typed_errors(sample_engine: cortex.Engine, changes: dict) -> None:
    with pytest.raises(InvalidOptionError):
        sample_engine.search("deploy", **changes)
    # and ValueError for code that catches the builtin
    with pytest.raises(ValueError):
        cortex.Options(**changes)


def test_unknown_option_is_a_typed_error(sample_engine: cortex.Engine) -> None:
    with pytest.raises(InvalidOptionError):
        sample_engine.search("deploy", colour="blue")


def test_non_string_query_is_a_typed_error(sample_engine: cortex.Engine) -> None:
    with pytest.raises(QueryError):
        sample_engine.search(42)  # type: ignore[arg-type]


def test_every_error_is_a_cortex_error() -> None:
    for name in cortex.errors.__all__:
        assert issubclass(getattr(cortex.errors, name), CortexError)


# ------------------------------------------------------------------------------ CLI


@pytest.fixture
def cli_db(tmp_path: Path) -> Path:
    db = tmp_path / "cli.db"
    result = run_cli("--db", str(db), "import", str(SAMPLE))
    assert result.code == 0, result.err
    return db


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "NOT", "*", "(", "nosuchcolumn:x", "NEAR(", "a\x01b", "", "🚀", "数据库 索引"],
)
def test_odd_queries_through_the_cli(cli_db: Path, query: str) -> None:
    before = db_digest(cli_db)
    result = run_cli("--db", str(cli_db), "search", query, "--mode", "keyword", "--no-record")
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    assert db_digest(cli_db) == before


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["search", "x", "--limit", "-1"], 1, "limit must be between"),
        (["search", "x", "--limit", "nope"], 2, "invalid int value"),
        (["search", "x", "--alpha", "nan"], 1, "alpha must be a finite number"),
        (["search", "x", "--mode", "fuzzy"], 2, "invalid choice"),
        (["search", "x", "--since", "tuesday"], 1, "ISO 8601"),
        (["show", "999999"], 1, "no memory with id 999999"),
        (["show", "abc"], 2, "invalid int value"),
        (["frobnicate"], 2, "invalid choice"),
    ],
)
def test_cli_errors_are_one_line(cli_db: Path, args: list[str], code: int, message: str) -> None:
    before = db_digest(cli_db)
    result = (
        run_cli("--db", str(cli_db), *args, "--no-record")
        if args[0] == "search"
        else (run_cli("--db", str(cli_db), *args))
    )
    assert result.code == code
    assert message in result.err
    assert "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert db_digest(cli_db) == before


def test_cli_huge_query(cli_db: Path) -> None:
    before = db_digest(cli_db)
    result = run_cli("--db", str(cli_db), "search", "-", "--mode", "keyword", stdin=None)
    assert result.code == 0
    big = "deploy " * 150_000  # ~1 MB: too long for argv on some systems, so a file
    result = run_cli("--db", str(cli_db), "search", big[:120_000], "--mode", "keyword")
    assert result.code == 1 and "limit is" in result.err
    assert db_digest(cli_db) == before


def test_cli_directory_and_read_only_paths(tmp_path: Path) -> None:
    result = run_cli("--db", str(tmp_path), "stats")
    assert result.code == 1 and "is a directory" in result.err
    result = run_cli("--db", str(tmp_path / "missing.db"), "search", "x")
    assert result.code == 1 and "no database at" in result.err
    assert not (tmp_path / "missing.db").exists()
    # Unwritable places (the tests may run as root, so permissions alone prove nothing):
    # a path under a regular file, and a file system no one may write.
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    for where in (plain / "x.db", Path("/proc/cortex-test/x.db")):
        result = run_cli("--db", str(where), "add", "hello")
        assert result.code == 1, where
        assert result.err.startswith("cortex: error:")
        assert "Traceback" not in result.err


def test_cli_corrupt_database(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"\x00garbage" * 1000)
    result = run_cli("--db", str(bad), "search", "x")
    assert result.code == 1
    assert "not a cortex database" in result.err
    assert bad.read_bytes() == b"\x00garbage" * 1000
