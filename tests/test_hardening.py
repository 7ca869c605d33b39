"""Issue 14: nothing accepted can break a read; other files and read-only; a project is a wall.

Each class of hostile input is tried on every path that can take it (API, CLI, JSON/JSONL
import, MCP): a typed one-line error and an unchanged database, or a value every reader
can read back. Rows no write path accepts any more are written with raw sqlite3 (an older
cortex, another tool) and every reader must step around them. Foreign and read-only files
are opened for real: read-only checks run in a subprocess without root's capabilities,
where file permissions hold as for any user.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import cortex
from cortex import validate
from cortex.errors import (
    CortexError,
    DamagedRowError,
    InvalidOptionError,
    NotFoundError,
    QueryError,
    StorageError,
)
from cortex.mcp import build_server

from .conftest import ROOT, db_digest, run_cli

SURROGATE = "bad\ud800text"


@pytest.fixture
def eng(db_path: Path) -> Iterator[cortex.Engine]:
    with cortex.open(db_path, embedder=None) as e:
        yield e


def _count(engine: cortex.Engine) -> int:
    return int(engine.store.query("SELECT COUNT(*) FROM memories")[0][0])


def _strict_json(text: str) -> Any:
    """json.loads that refuses NaN / Infinity, as any strict JSON reader does."""

    def refuse(name: str) -> Any:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


# --------------------------------------------------------------------------- 1. writes

BAD_DATES: list[Any] = [
    "9999-12-31T23:59:59-05:00",  # year 10000 after the shift
    1e300,
    -1e15,
    -1,
    "0001-01-01T00:00:00+05:00",  # before year 1 after the shift
    "garbage",
    10**400,
    float("nan"),
    float("inf"),
    True,
    [2026],
    datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))),
    "2026-01-01\ud800",
]
GOOD_DATES: list[Any] = [
    "2026-11-18T09:30:00Z",
    "2026-11-18T09:30:00+02:00",
    "2026-11-18",
    0,
    1_700_000_000,
    datetime(2026, 1, 1, tzinfo=UTC),
    "9999-12-30T23:59:59Z",
]


@pytest.mark.parametrize("value", BAD_DATES, ids=repr)
def test_bad_created_at_is_refused_on_every_api_write(eng: cortex.Engine, value: Any) -> None:
    keep = eng.add("a memory to update")
    before = _count(eng)
    with pytest.raises(InvalidOptionError, match="created_at"):
        eng.add("text", created_at=value)
    with pytest.raises(InvalidOptionError, match="created_at"):
        eng.add_many([{"content": "text", "created_at": value}])
    with pytest.raises(InvalidOptionError, match="created_at"):
        eng.update(keep, created_at=value)
    with pytest.raises(InvalidOptionError, match="valid_until"):
        eng.update(keep, valid_until=value)
    with pytest.raises(InvalidOptionError, match="last_reinforced"):
        eng.add_fact(keep, "state", "a fact", last_reinforced=value)
    assert _count(eng) == before
    assert eng.get(keep).content == "a memory to update"


@pytest.mark.parametrize("value", GOOD_DATES, ids=repr)
def test_dates_in_range_are_stored_and_read_back(eng: cortex.Engine, value: Any) -> None:
    memory_id = eng.add("dated memory", created_at=value)
    eng.update(memory_id, valid_until=value)
    eng.add_fact(memory_id, "state", "a fact", last_reinforced=value)
    memory = eng.get(memory_id)
    assert memory.created_at == memory.valid_until
    expected = validate.timestamp("created_at", value)
    assert memory.created_at is not None and memory.created_at.timestamp() == expected
    results = eng.search(None, record=False, min_confidence=0.0)  # old facts decay
    assert [r.memory.id for r in results] == [memory_id]
    assert results[0].facts[0].last_reinforced.timestamp() == expected
    _strict_json(json.dumps(results.to_dict()))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("confidence", "high"),
        ("confidence", 10**400),
        ("confidence", float("nan")),
        ("confidence", 1.5),
        ("confidence", None),
        ("decay_rate", "x"),
        ("decay_rate", -1.0),
        ("decay_rate", float("inf")),
        ("decay_rate", 10**400),
    ],
)
def test_fact_numbers_are_typed_and_in_range(eng: cortex.Engine, field: str, value: Any) -> None:
    memory_id = eng.add("has facts")
    with pytest.raises(InvalidOptionError, match=field):
        eng.add_fact(memory_id, "state", "fact", **{field: value})
    assert eng.store.query("SELECT COUNT(*) FROM facts")[0][0] == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("salience", 10**400),
        ("salience", "0.5"),
        ("confidence", float("inf")),
        ("confidence", -0.1),
        ("salience", True),
    ],
)
def test_memory_numbers_are_typed_and_in_range(eng: cortex.Engine, field: str, value: Any) -> None:
    with pytest.raises(InvalidOptionError, match=field):
        eng.add("text", **{field: value})
    with pytest.raises(InvalidOptionError, match=field):
        eng.add_many([{"content": "text", field: value}])
    assert _count(eng) == 0


STRING_FIELDS = ["project", "session", "sector", "tier", "scope", "category", "source_path"]


@pytest.mark.parametrize("field", ["content", *STRING_FIELDS])
def test_lone_surrogates_are_refused_in_every_string(eng: cortex.Engine, field: str) -> None:
    kwargs: dict[str, Any] = {"content": "text", field: SURROGATE}
    content = kwargs.pop("content")
    with pytest.raises(InvalidOptionError, match="surrogate"):
        eng.add(content, **kwargs)
    with pytest.raises(InvalidOptionError, match="surrogate"):
        eng.add_many([{"content": content, **kwargs}])
    assert _count(eng) == 0


def test_lone_surrogates_in_metadata_update_facts_and_searches(eng: cortex.Engine) -> None:
    keep = eng.add("a memory")
    for metadata in ({SURROGATE: 1}, {"k": SURROGATE}, {"k": [{"deep": SURROGATE}]}):
        with pytest.raises(InvalidOptionError, match="surrogate"):
            eng.add("text", metadata=metadata)
        with pytest.raises(InvalidOptionError, match="surrogate"):
            eng.update(keep, metadata=metadata)
    with pytest.raises(InvalidOptionError, match="surrogate"):
        eng.update(keep, content=SURROGATE)
    with pytest.raises(InvalidOptionError, match="surrogate"):
        eng.add_fact(keep, "state", SURROGATE)
    with pytest.raises(InvalidOptionError, match="surrogate"):
        eng.start_session(SURROGATE)
    with pytest.raises(QueryError, match="surrogate"):
        eng.search(SURROGATE)
    for name in ("project", "session", "scope", "category", "source_prefix", "session_id"):
        with pytest.raises(InvalidOptionError, match="surrogate"):
            eng.search("memory", **{name: SURROGATE})
    assert eng.get(keep).content == "a memory" and _count(eng) == 1


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def test_metadata_limits(eng: cortex.Engine) -> None:
    ok = eng.add("deep enough", metadata=_nested(validate.MAX_METADATA_DEPTH))
    assert eng.get(ok).metadata == _nested(validate.MAX_METADATA_DEPTH)
    refused = [
        _nested(validate.MAX_METADATA_DEPTH + 1),
        _nested(50_000),  # would be a RecursionError in json.dumps
        {"big": "x" * validate.MAX_METADATA_BYTES},
        {"n": float("nan")},
        {"n": [float("-inf")]},
        {"n": 2**63},
        {"n": -(2**63) - 1},
        {"n": 10**5000},
        {1: "int key"},
        {"s": {1, 2}},
        ["not", "an", "object"],
    ]
    for metadata in refused:
        with pytest.raises(InvalidOptionError, match="metadata"):
            eng.add("text", metadata=metadata)  # type: ignore[arg-type]
    assert eng.add("edge ints", metadata={"a": 2**63 - 1, "b": -(2**63)}) > 0
    assert _count(eng) == 2


def test_name_limits(eng: cortex.Engine) -> None:
    name = "p" * validate.MAX_NAME_CHARS
    memory_id = eng.add("named", project=name, category=name, scope=name)
    assert eng.get(memory_id).project == name
    for field in ("project", "session", "sector", "tier", "scope", "category"):
        with pytest.raises(InvalidOptionError, match=f"{field} is 257 characters"):
            eng.add("text", **{field: name + "p"})
    with pytest.raises(InvalidOptionError, match="project is 10,000,000 characters"):
        eng.add("text", project="p" * 10_000_000)
    assert _count(eng) == 1


@pytest.mark.parametrize(
    "bad_id",
    [2**63, 2**64, -(2**63) - 1, 10**400, 0, -1, "1", 1.0, True],
    ids=["2**63", "2**64", "-2**63-1", "10**400", "0", "-1", "str", "float", "bool"],
)
def test_ids_out_of_range_are_typed_errors(eng: cortex.Engine, bad_id: Any) -> None:
    memory_id = eng.add("target")
    for call in (
        lambda: eng.get(bad_id),
        lambda: eng.timeline(bad_id),
        lambda: eng.update(bad_id, content="x"),
        lambda: eng.add_fact(bad_id, "state", "x"),
        lambda: eng.supersede(bad_id, memory_id),
        lambda: eng.relate(memory_id, bad_id),
        lambda: eng.delete(bad_id),
    ):
        with pytest.raises(CortexError):
            call()


def test_huge_numbers_in_options_are_typed_errors(eng: cortex.Engine) -> None:
    for changes in (
        {"alpha": 10**400},
        {"recency_weight": 10**400},
        {"rrf_k": -(10**400)},
        {"sector_weights": {"episodic": 10**400}},
        {"limit": 2**63},
    ):
        with pytest.raises(InvalidOptionError):
            eng.search("x", **changes)
    eng.add("x marks the spot", created_at="2026-01-01")
    for changes, found in (  # dates at the ends of datetime's range are plain bounds
        ({"created_since": "0001-01-01T00:00:00+05:00"}, 1),
        ({"created_until": datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1)))}, 0),
        ({"created_since": "9999-12-31T23:59:59-05:00"}, 0),
    ):
        assert len(eng.search("x", mode="keyword", **changes)) == found


def test_cli_writes_are_validated(db_path: Path) -> None:
    for args in (
        ["add", "x", "--created-at", "9999-12-31T23:59:59-05:00"],
        ["add", "x", "--metadata", '{"a": NaN}'],
        ["add", "x", "--metadata", '{"a": 1e999}'],
        ["add", "x", "--project", "p" * 300],
        ["add", "x", "--confidence", "nan"],
    ):
        run = run_cli("--db", str(db_path), *args)
        assert run.code == 1, (args, run.err)
        assert run.err.count("\n") == 1 and "Traceback" not in run.err
    run = run_cli("--db", str(db_path), "search", "x", "--alpha", "1" + "0" * 400)
    assert run.code in (1, 2) and "Traceback" not in run.err, run.err
    with cortex.open(db_path, read_only=True, embedder=None) as e:
        assert _count(e) == 0


def test_import_records_are_validated_and_the_others_go_in(
    eng: cortex.Engine, tmp_path: Path
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    bad_records = [
        {"content": "c", "created_at": "9999-12-31T23:59:59-05:00"},
        {"content": "c", "created_at": 1e300},
        {"content": "c", "created_at": -1e15},
        {"content": "c", "confidence": "high"},
        {"content": "c", "salience": 1e400},
        {"content": "c", "metadata": {"n": 2**63}},
        {"content": "c", "project": "p" * 300},
    ]
    for n, record in enumerate(bad_records):
        (folder / f"bad{n}.jsonl").write_text(json.dumps(record) + "\n")
    (folder / "good.jsonl").write_text(json.dumps({"content": "the good one"}) + "\n")
    report = eng.import_path(folder)
    assert len(report.errors) == len(bad_records)
    assert report.files == 1 and report.counts.added == 1
    assert [r.memory.content for r in eng.search(None, record=False)] == ["the good one"]


# --------------------------------------------------------------------------- 2. readers


def _poison(db: Path, sql: str, params: tuple[Any, ...]) -> None:
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(sql, params)
    conn.close()


POISON_MEMORY_UPDATES = [
    ("created_at", 1e300),
    ("created_at", -1e15),
    ("created_at", "garbage"),
    ("valid_until", "garbage"),
    ("valid_until", 1e300),
    ("last_accessed", -1e20),
    ("metadata", "not json"),
    ("metadata", "[1, 2]"),
    ("metadata", "[" * 100_000),
    ("confidence", "high"),
    ("salience", "x"),
]


@pytest.mark.parametrize(
    ("column", "value"),
    POISON_MEMORY_UPDATES,
    ids=[f"{c}-{n}" for n, (c, _) in enumerate(POISON_MEMORY_UPDATES)],
)
def test_a_damaged_memory_row_is_skipped_by_every_reader(
    db_path: Path, column: str, value: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    with cortex.open(db_path, embedder=None) as e:
        good = [e.add(f"quokka note {n}", project="p") for n in range(3)]
        bad = e.add("quokka damaged note", project="p")
        e.add_fact(good[0], "state", "a fact")
    _poison(db_path, f"UPDATE memories SET {column} = ? WHERE id = ?", (value, bad))
    with cortex.open(db_path, embedder=None) as e:
        for query, opts in (
            ("quokka", {"mode": "keyword"}),
            ("quokka", {"mode": "keyword", "order_by": "recency"}),
            ("quokka", {"mode": "keyword", "order_by": "confidence"}),
            ("quokka", {"mode": "keyword", "recency_weight": 0.0}),
            (None, {"project": "p"}),
            (None, {}),
        ):
            results = e.search(query, **opts)
            assert sorted(r.memory.id for r in results) == good, (query, opts)
            assert any(f"memory {bad}" in n for n in results.notices), results.notices
            _strict_json(json.dumps(results.to_dict()))
        with pytest.raises(DamagedRowError, match=f"memory {bad}"):
            e.get(bad)
        timeline = e.timeline(good[1], before=10, after=10)
        assert bad not in [m.id for m in (*timeline.before, *timeline.after)]
        with pytest.raises(DamagedRowError):
            e.timeline(bad)
        assert e.stats()["memories"] == 4
    code, out, err = _main(
        capsys, "--db", str(db_path), "search", "quokka", "--mode", "keyword", "--json"
    )
    assert code == 0, err
    assert len(_strict_json(out)["results"]) == 3 and "damaged" in err
    code, out, err = _main(capsys, "--db", str(db_path), "show", str(bad))
    assert code == 1 and "damaged" in err and err.count("\n") == 1
    for args in (["timeline", str(good[1])], ["stats"], ["search", "--project", "p"]):
        code, out, err = _main(capsys, "--db", str(db_path), *args)
        assert code == 0, (args, err)


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The CLI's entry point in-process (the subprocess tests cover the console script)."""
    from cortex.cli import main

    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("confidence", "high"),
        ("decay_rate", "x"),
        ("decay_rate", -5.0),
        ("last_reinforced", 1e300),
        ("last_reinforced", "garbage"),
    ],
)
def test_a_damaged_fact_row_is_skipped(db_path: Path, column: str, value: Any) -> None:
    with cortex.open(db_path, embedder=None) as e:
        memory_id = e.add("quokka with facts")
        e.add_fact(memory_id, "state", "kept fact")
        fact = e.add_fact(memory_id, "state", "damaged fact")
    _poison(db_path, f"UPDATE facts SET {column} = ? WHERE id = ?", (value, fact))
    with cortex.open(db_path, embedder=None) as e:
        for query in ("quokka", None):
            results = e.search(query, mode="keyword")
            assert [r.memory.id for r in results] == [memory_id]
            assert [f.content for f in results[0].facts] == ["kept fact"]
            assert any(f"fact {fact}" in n for n in results.notices)


def test_a_damaged_session_row_does_not_fail_a_search(db_path: Path) -> None:
    with cortex.open(db_path, embedder=None) as e:
        memory_id = e.add("quokka in a session", session="s1")
    _poison(db_path, "UPDATE sessions SET started_at = ?", ("garbage",))
    with cortex.open(db_path, embedder=None) as e:
        results = e.search("quokka", mode="keyword")
        assert [r.memory.id for r in results] == [memory_id]
        assert results[0].source_session is None
        assert e.timeline(memory_id).sessions == {}


# --------------------------------------------------------------------------- 3. import


def test_one_bad_file_does_not_stop_an_import(eng: cortex.Engine, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a-good.md").write_text("# Good\n\nthe first good file\n")
    (folder / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "deep.jsonl").write_text('{"content": "x", "m": ' + "[" * 5000 + "]" * 5000 + "}\n")
    (folder / "hugeint.jsonl").write_text('{"content": "x", "n": ' + "9" * 5000 + "}\n")
    (folder / "hugedate.jsonl").write_text('{"content": "x", "created_at": ' + "9" * 400 + "}\n")
    (folder / "surrogate.jsonl").write_text('{"content": "x \\ud800 y"}\n')
    (folder / "surrogate-key.jsonl").write_text('{"content": "x", "metadata": {"\\udc00": 1}}\n')
    (folder / "nan.jsonl").write_text('{"content": "x", "metadata": {"n": NaN}}\n')
    bad_name = os.fsencode(folder) + b"/caf\xe9.md"
    fd = os.open(bad_name, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"# Latin-1 name\n\ntext\n")
    os.close(fd)
    (folder / "z-good.jsonl").write_text(json.dumps({"content": "the last good file"}) + "\n")
    report = eng.import_path(folder)
    failed = {Path(p).name for p, _ in report.errors}
    assert failed == {
        "deep.json",
        "deep.jsonl",
        "hugeint.jsonl",
        "hugedate.jsonl",
        "surrogate.jsonl",
        "surrogate-key.jsonl",
        "nan.jsonl",
        "caf\\xe9.md",
    }, report.errors
    for _, error in report.errors:
        assert "\n" not in error and validate.is_encodable(error)
    assert report.files == 2
    contents = sorted(r.memory.content for r in eng.search(None, record=False))
    assert contents == ["# Good\n\nthe first good file", "the last good file"]
    json.dumps(report.to_dict(), ensure_ascii=False).encode("utf-8")
    run = run_cli("--db", str(eng.path), "import", str(folder), "--json")
    assert run.code == 1 and "Traceback" not in run.err
    assert len(json.loads(run.out)[0]["errors"]) == 8


def test_import_does_not_follow_links_out_of_its_root(eng: cortex.Engine, tmp_path: Path) -> None:
    outside = tmp_path / "private"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nsomething outside the notes\n")
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "own.md").write_text("# Own\n\nthe notes' own file\n")
    (folder / "sub" / "inner.md").write_text("# Inner\n\nlinked from inside\n")
    (folder / "link.md").symlink_to(outside / "secret.md")
    (folder / "dirlink").symlink_to(outside)
    (folder / "inside-link.md").symlink_to(folder / "sub" / "inner.md")
    (folder / "loop").symlink_to(folder)
    report = eng.import_path(folder)
    assert not report.errors
    assert {Path(p).name for p, _ in report.skipped} == {"link.md", "dirlink"}
    texts = {r.memory.content for r in eng.search(None, record=False)}
    assert not any("outside" in t for t in texts)
    assert len(texts) == 2  # own.md, and inner.md once (its link resolves to it)
    followed = eng.import_path(folder, follow_links=True)
    assert not followed.skipped and not followed.errors
    assert any("outside" in r.memory.content for r in eng.search(None, record=False))
    again = tmp_path / "again.db"
    run = run_cli("--db", str(again), "import", str(folder))
    assert run.code == 0 and "skipped" in run.err and "link.md" in run.err
    run = run_cli("--db", str(again), "import", str(folder), "--follow-links")
    assert run.code == 0 and "skipped" not in run.err


def test_records_naming_their_project_are_removed_on_reimport(
    eng: cortex.Engine, tmp_path: Path
) -> None:
    path = tmp_path / "memories.jsonl"
    records = [
        {"content": "alpha one", "project": "alpha"},
        {"content": "beta one", "project": "beta"},
        {"content": "beta two", "project": "beta"},
        {"content": "default one"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    first = eng.import_path(path, project="dflt")
    assert first.counts.added == 4
    eng.import_path(path, project="other")  # the same file in another default project
    path.write_text(json.dumps(records[0]) + "\n")  # beta's and the default's removed
    report = eng.import_path(path, project="dflt")
    assert report.counts.removed == 3 and report.counts.unchanged == 1
    live = sorted((r.memory.project, r.memory.content) for r in eng.search(None, record=False))
    # A record naming its project is one memory of (project, file) whichever default the
    # file was imported under; the default project's records are that import's own.
    assert live == [("alpha", "alpha one"), ("other", "default one")]
    path.write_text("")
    assert eng.import_path(path, project="dflt").counts.removed == 1
    assert eng.import_path(path, project="other").counts.removed == 1
    assert len(eng.search(None, record=False)) == 0


# --------------------------------------------------------------------------- 4. CLI bytes


def _run_bytes(args: list[bytes], stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "CORTEX_NO_PROGRESS": "1", "PYTHONPATH": str(ROOT / "python")}
    return subprocess.run(
        [sys.executable.encode(), b"-m", b"cortex.cli", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=120,
    )


def test_invalid_utf8_in_argv_and_stdin_is_one_line_not_a_bug(db_path: Path) -> None:
    db = os.fsencode(db_path)
    cases: list[tuple[list[bytes], bytes | None]] = [
        ([b"--db", db, b"add", b"caf\xe9"], None),
        ([b"--db", db, b"add", b"-"], b"caf\xe9 \xff\xfe"),
        ([b"--db", db, b"add", b"ok", b"--project", b"\xff"], None),
        ([b"--db", db, b"add", b"ok", b"--metadata", b'{"k": "\xff"}'], None),
        ([b"--db", db, b"search", b"\xff\xfe"], None),
        ([b"--db", db, b"search", b"x", b"--project", b"\xe9"], None),
        ([b"--db", db, b"import", b"/tmp/\xff-missing"], None),
        ([b"--db", db, b"show", b"\xff"], None),
    ]
    for args, stdin in cases:
        proc = _run_bytes(args, stdin)
        err = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode in (1, 2), (args, err)
        assert err.count("\n") == 1 and "Traceback" not in err and "internal" not in err, err
    proc = _run_bytes([b"--db", db, b"search", b"x"])
    assert proc.returncode == 0
    with cortex.open(db_path, embedder=None) as e:
        assert _count(e) == 0


# --------------------------------------------------------------------------- 5. MCP


def _call(server: Any, name: str, args: dict[str, Any]) -> tuple[bool, Any]:
    result = asyncio.run(server.call_tool(name, args))
    text = result.content[0].text
    return bool(result.is_error), (text if result.is_error else json.loads(text))


def test_mcp_tools_take_a_project_that_is_enforced(eng: cortex.Engine) -> None:
    a = eng.add("alpha quokka", project="A")
    b = eng.add("beta quokka", project="B")
    server = build_server(eng)
    assert _call(server, "memory_get", {"id": a, "project": "A"})[1]["id"] == a
    assert _call(server, "memory_get", {"id": b, "project": "A"}) == (
        True,
        f"no memory with id {b}",
    )
    error, answer = _call(server, "memory_timeline", {"anchor_id": b, "project": "A"})
    assert error and "no memory" in answer
    error, answer = _call(server, "memory_timeline", {"anchor_id": a, "project": "A"})
    assert not error and answer["anchor"]["id"] == a
    assert eng.get(a, project="A").id == a
    with pytest.raises(NotFoundError):
        eng.get(b, project="A")
    with pytest.raises(NotFoundError):
        eng.timeline(b, project="A")


def test_mcp_server_scoped_to_projects_confines_every_tool(eng: cortex.Engine) -> None:
    a = eng.add("alpha quokka", project="A")
    b = eng.add("beta quokka", project="B")
    c = eng.add("gamma quokka", project="C")
    one = build_server(eng, projects=["A"])
    error, found = _call(one, "memory_search", {"query": "quokka", "mode": "keyword"})
    assert not error and [r["id"] for r in found["results"]] == [a]
    assert _call(one, "memory_search", {"query": "quokka", "project": "B"})[0]
    assert _call(one, "memory_get", {"id": b})[0]
    assert _call(one, "memory_timeline", {"anchor_id": b})[0]
    assert _call(one, "memory_timeline", {"anchor_id": a})[1]["anchor"]["id"] == a
    error, added = _call(one, "memory_add", {"content": "new in A"})
    assert not error and added["project"] == "A"
    assert _call(one, "memory_add", {"content": "into B", "project": "B"})[0]
    two = build_server(eng, projects=["A", "B"])
    assert _call(two, "memory_get", {"id": b})[1]["id"] == b
    assert _call(two, "memory_get", {"id": c})[0]
    error, found = _call(two, "memory_search", {"query": "quokka", "mode": "keyword"})
    assert not error and sorted(r["id"] for r in found["results"]) == [a, b]  # both, not C
    error, found = _call(two, "memory_search", {"query": "quokka", "project": "B"})
    assert not error and [r["id"] for r in found["results"]] == [b]
    assert _count(eng) == 4


def _mcp_process(db: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    return subprocess.Popen(
        [sys.executable, "-m", "cortex.mcp", "--db", str(db), *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def test_mcp_answers_lines_it_cannot_parse_and_keeps_serving(db_path: Path) -> None:
    with cortex.open(db_path, embedder=None) as e:
        a = e.add("alpha quokka", project="A")
        b = e.add("beta quokka", project="B")
    proc = _mcp_process(db_path, "--project", "A")
    assert proc.stdin is not None and proc.stdout is not None

    def send(line: str) -> dict[str, Any]:
        proc.stdin.write(line + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        return json.loads(proc.stdout.readline())  # type: ignore[union-attr]

    try:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        assert "result" in send(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        )
        proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"
        )
        surrogate = (
            '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_search",'
            '"arguments":{"query":"\\ud800"}}}'
        )
        deep = (
            '{"jsonrpc":"2.0","id":3,"method":"ping","params":{"a":' + "[" * 300 + "]" * 300 + "}}"
        )
        for n, line in (
            (2, surrogate),
            (3, deep),
            (None, "[" * 10_000 + "]" * 10_000),
            (None, "{"),
        ):
            reply = send(line)
            assert reply["id"] == n and reply["error"]["code"] == -32700, reply
        reply = send('{"jsonrpc":"2.0","id":"x","nonsense":1}')
        assert reply["error"]["code"] == -32600 and reply["id"] == "x"

        def call(i: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
            request = {"name": name, "arguments": args}
            return send(
                json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": request})
            )["result"]

        assert call(4, "memory_get", {"id": a})["structuredContent"]["id"] == a
        assert call(5, "memory_get", {"id": b})["isError"]
        assert call(6, "memory_timeline", {"anchor_id": b})["isError"]
        found = call(7, "memory_search", {"query": "quokka", "mode": "keyword"})
        assert [r["id"] for r in found["structuredContent"]["results"]] == [a]
    finally:
        proc.stdin.close()
        code = proc.wait(timeout=60)
        proc.stdout.close()
    assert code == 0


# --------------------------------------------------------------------------- 6. foreign files


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_another_applications_sqlite_file_is_refused_untouched(tmp_path: Path) -> None:
    cases = {}
    plain = tmp_path / "app.sqlite"
    conn = sqlite3.connect(plain)
    conn.executescript("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);"
                       "INSERT INTO users (name) VALUES ('ada');")  # fmt: skip
    conn.close()
    cases["plain"] = plain
    with_meta = tmp_path / "meta.sqlite"
    conn = sqlite3.connect(with_meta)
    conn.executescript("CREATE TABLE meta (version INTEGER); CREATE TABLE things (x);")
    conn.close()
    cases["meta"] = with_meta
    same_meta = tmp_path / "same-meta.sqlite"
    conn = sqlite3.connect(same_meta)
    conn.executescript("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); CREATE TABLE t (x);")
    conn.close()
    cases["same-meta"] = same_meta
    noise = tmp_path / "noise.db"
    noise.write_bytes(os.urandom(8192))
    cases["noise"] = noise
    text = tmp_path / "notes.db"
    text.write_text("# not a database\n" * 100)
    cases["text"] = text
    for kind, path in cases.items():
        digest = _sha(path)
        for read_only in (False, True):
            with pytest.raises(StorageError, match=r"not a cortex database|another application"):
                cortex.open(path, read_only=read_only, embedder=None)
        assert _sha(path) == digest, kind
        assert not Path(f"{path}-wal").exists(), kind
        run = run_cli("--db", str(path), "search", "x")
        assert run.code == 1 and run.err.count("\n") == 1, run.err
        assert _sha(path) == digest, kind


def test_an_empty_file_or_a_new_path_becomes_a_cortex_database(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    for path in (empty, tmp_path / "fresh.db"):  # a new file; never a new folder (issue 15)
        with cortex.open(path, embedder=None) as e:
            memory_id = e.add("hello")
        with cortex.open(path, read_only=True, embedder=None) as e:
            assert e.get(memory_id).content == "hello"


# --------------------------------------------------------------------------- 7. read-only


def _as_unprivileged(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `code` with file permissions enforced. As root (here and in CI) permissions are
    ignored, so the child drops every capability first (setpriv clears the bounding set:
    a root process without CAP_DAC_OVERRIDE obeys mode bits like any user); as another
    user it runs as is."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        prefix = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python"), "CORTEX_NO_PROGRESS": "1"}
    return subprocess.run(
        [*prefix, sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )


READ_ONLY_CHECK = """
import json, sys, cortex
from cortex.errors import StorageError
out = {}
for read_only in (False, True):
    with cortex.open("db/c.db", read_only=read_only, embedder=None) as e:
        r = e.search("quokka", mode="keyword")
        out[str(read_only)] = {"ids": [x.memory.id for x in r], "notices": list(r.notices),
                               "read_only": e.store.read_only}
        try:
            e.reindex()
            out["reindex"] = "ran"
        except StorageError as exc:
            out["reindex"] = str(exc)
try:
    open("db/probe", "w")
    out["can_write"] = True
except PermissionError:
    out["can_write"] = False
print(json.dumps(out))
"""


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder outside pytest's private tmp (mode 700), restored writable at the end."""
    folder = Path(tempfile.mkdtemp(prefix="cortex-ro-"))
    folder.chmod(0o755)
    yield folder
    for path in (folder / "db", folder):
        if path.exists():
            path.chmod(0o755)
    subprocess.run(["rm", "-rf", str(folder)], check=True)


def _build_db(folder: Path) -> tuple[Path, list[int]]:
    (folder / "db").mkdir()
    db = folder / "db" / "c.db"
    with cortex.open(db, embedder=None) as e:
        ids = [e.add("quokka one"), e.add("quokka two")]
        e.search("quokka", mode="keyword")  # recorded: the WAL is written and checkpointed
    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0
    return db, ids


def test_a_database_the_user_cannot_write_opens_read_only(shared_folder: Path) -> None:
    db, ids = _build_db(shared_folder)
    db.chmod(0o444)
    before = db_digest(db)
    run = _as_unprivileged(READ_ONLY_CHECK, shared_folder)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["can_write"] is True  # the folder is writable; the file is not
    default = out["False"]
    assert sorted(default["ids"]) == ids and default["read_only"]
    assert any("not writable" in n for n in default["notices"])
    assert sorted(out["True"]["ids"]) == ids
    assert "read-only" in out["reindex"]
    assert db_digest(db) == before  # nothing recorded


def test_a_clean_wal_database_in_a_read_only_folder_is_readable(shared_folder: Path) -> None:
    db, ids = _build_db(shared_folder)
    with open(db, "rb") as f:
        assert f.read(20)[18:20] == b"\x02\x02"  # still a WAL database
    db.chmod(0o644)
    (shared_folder / "db").chmod(0o555)
    before = _sha(db)
    run = _as_unprivileged(READ_ONLY_CHECK, shared_folder)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["can_write"] is False
    for read_only in ("False", "True"):
        assert sorted(out[read_only]["ids"]) == ids and out[read_only]["read_only"]
    assert "read-only" in out["reindex"]
    assert _sha(db) == before and sorted(os.listdir(shared_folder / "db")) == ["c.db"]
    cli = (
        "import sys; from cortex.cli import main; "
        "sys.exit(main(['--db', 'db/c.db', 'search', 'quokka', '--json']))"
    )
    run = _as_unprivileged(cli, shared_folder)
    assert run.returncode == 0, run.stderr
    assert len(json.loads(run.stdout)["results"]) == 2 and "not writable" in run.stderr
    mode = stat.S_IMODE((shared_folder / "db").stat().st_mode)
    assert mode == 0o555


def test_an_unreadable_file_is_reported_and_the_import_goes_on(shared_folder: Path) -> None:
    notes = shared_folder / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n\nreadable\n")
    (notes / "b.md").write_text("# B\n\nunreadable\n")
    (notes / "c.md").write_text("# C\n\nreadable too\n")
    (notes / "b.md").chmod(0o000)
    code = (
        "import json, cortex\n"
        "with cortex.open('import.db', embedder=None) as e:\n"
        "    r = e.import_path('notes')\n"
        "    print(json.dumps([r.files, r.errors]))\n"
    )
    run = _as_unprivileged(code, shared_folder)
    assert run.returncode == 0, run.stderr
    files, errors = json.loads(run.stdout)
    assert files == 2 and len(errors) == 1 and errors[0][0].endswith("b.md")
    assert "cannot read" in errors[0][1]


# --------------------------------------------------------------------------- 8. sessions


def test_the_same_session_id_in_two_projects_is_two_sessions(eng: cortex.Engine) -> None:
    eng.start_session("s", project="A", summary="A's private summary")
    a = eng.add("quokka from A", project="A", session="s")
    b = eng.add("quokka from B", project="B", session="s")
    found = eng.search("quokka", mode="keyword", project="B", session_id="s")
    assert [r.memory.id for r in found] == [b]
    session = found[0].source_session
    assert session is not None and session.project == "B" and session.summary is None
    again = eng.search("quokka", mode="keyword", project="A")
    assert again[0].source_session.summary == "A's private summary"
    assert eng.timeline(b).sessions["s"].project == "B"
    context = eng.session_context(b)
    assert context is not None and context.session.project == "B"
    assert context.memories_in_session == 1
    with pytest.raises(InvalidOptionError, match="several projects"):
        eng.end_session("s")
    eng.end_session("s", project="B", summary="B's own")
    assert eng.search("quokka", project="A")[0].source_session.summary == "A's private summary"
    assert eng.get(a).project == "A"


def test_sessions_of_an_older_database_are_split_by_project(tmp_path: Path) -> None:
    from cortex.store import EXACT_TOKENIZER, MIGRATIONS, STEMMED_TOKENIZER, _statements

    db = tmp_path / "v2.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
    for script in MIGRATIONS[:2]:
        script = script.replace("{stemmed}", STEMMED_TOKENIZER).replace("{exact}", EXACT_TOKENIZER)
        for statement in _statements(script):
            conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    for mid, project in ((1, "A"), (2, "B")):
        conn.execute(
            "INSERT INTO memories (id, project_id, content, content_hash, created_at, updated_at)"
            " VALUES (?, ?, ?, 'h', 1.7e9, 1.7e9)",
            (mid, project, f"quokka {project}"),
        )
    conn.execute("INSERT INTO sessions VALUES ('s', 'A', 1.6e9, NULL, 'A secret')")
    conn.execute("INSERT INTO session_memories VALUES ('s', 1, 'created', 1.6e9)")
    conn.execute("INSERT INTO session_memories VALUES ('s', 2, 'created', 1.65e9)")
    conn.close()
    with cortex.open(db, embedder=None) as e:
        found = {r.memory.project: r for r in e.search("quokka", mode="keyword")}
        assert found["A"].source_session.summary == "A secret"
        b_session = found["B"].source_session
        assert b_session.project == "B" and b_session.summary is None
        assert b_session.started_at.timestamp() == 1.65e9


def test_related_counts_and_superseded_text_stay_within_the_project(eng: cortex.Engine) -> None:
    a1 = eng.add("quokka a1", project="A")
    a2 = eng.add("quokka a2", project="A")
    b1 = eng.add("quokka b1", project="B")
    eng.relate(a1, b1)
    eng.relate(b1, a1, "MENTIONS")
    by_id = {r.memory.id: r for r in eng.search("quokka", mode="keyword", project="A")}
    assert by_id[a1].related_memory_count == 0
    eng.relate(a1, a2)
    by_id = {r.memory.id: r for r in eng.search("quokka", mode="keyword", project="A")}
    assert by_id[a1].related_memory_count == 1 and by_id[a2].related_memory_count == 1
    new = eng.add("replacement text that will be deleted", project="A")
    eng.supersede(a2, new)
    eng.delete(new)
    found = eng.search("quokka", mode="keyword", project="A", include_superseded=True)
    old = next(r for r in found if r.memory.id == a2)
    assert old.superseded_by is None and "replacement" not in json.dumps(found.to_dict())
