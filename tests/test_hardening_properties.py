"""Property tests over every write path: whatever is accepted can be read back.

Hypothesis draws hostile values for every field (lone surrogates, NUL, huge and tiny
numbers, NaN, dates at and past the ends of the calendar with offsets, deep and wide
metadata, over-long names) and sends them through each write path: ``Engine.add``,
``add_many``, ``update``, ``add_fact``, a JSONL import, ``cortex add`` and MCP
``memory_add``. Each must either refuse with a typed error (a ``CortexError``; exit 1 or
2 from the CLI; a tool error from MCP) or accept. What is accepted must then be read back
(``get``), listed by a search, found or calmly missed by a keyword search, shown by
``cortex show --json`` as strict JSON, exported and re-imported unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import json
import math
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cortex
from cortex import validate
from cortex.cli import main as cli_main
from cortex.errors import CortexError, QueryError
from cortex.mcp import build_server

SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

HOSTILE_TEXT = [
    "\ud800",
    "a\udcffb",
    "\x00",
    "",
    " ",
    "p" * 257,
    "é" * 256,
    "NaN",
    "2026-01-01",
    "'; DROP TABLE memories; --",
    '"unbalanced',
    "NEAR(",
    "数据库 索引",
    "\u202eevil",
]
TEXT = st.one_of(
    st.text(max_size=30),
    st.text(st.characters(exclude_categories=()), max_size=8),  # surrogates included
    st.sampled_from(HOSTILE_TEXT),
)
NAMES = st.one_of(st.none(), TEXT)
NUMBERS = st.one_of(
    st.floats(min_value=0.0, max_value=1.0),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.sampled_from([0, 1, True, "0.5", "high", None, 2**63, -(2**63) - 1]),
)
ZONES = st.sampled_from(
    [
        UTC,
        timezone(timedelta(hours=-5)),
        timezone(timedelta(hours=14)),
        timezone(timedelta(hours=-12)),
    ]
)
DATETIMES = st.datetimes(timezones=st.one_of(st.none(), ZONES))
DATES = st.one_of(
    st.none(),
    DATETIMES,
    DATETIMES.map(lambda d: d.isoformat()),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**400),
    st.sampled_from(
        [
            "9999-12-31T23:59:59-05:00",
            "9999-12-30T23:59:59Z",
            "0001-01-01T00:00:00+05:00",
            "1970-01-01T00:00:00Z",
            "garbage",
            "2026-11-18T09:30:00+02:00",
        ]
    ),
)
JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(min_value=-(2**70), max_value=2**70),
        TEXT,
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=12,
)


def _deep(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        value = {"k": value}
    return value


METADATA = st.one_of(
    st.none(),
    st.dictionaries(TEXT, JSON, max_size=4),
    st.dictionaries(st.integers(), st.integers(), max_size=2),
    st.sampled_from([_deep(31), _deep(32), _deep(40), {"big": "x" * 70_000}, {"n": 2**63}]),
)
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "project": NAMES,
        "session": NAMES,
        "sector": NAMES,
        "tier": NAMES,
        "scope": NAMES,
        "category": NAMES,
        "source_path": NAMES,
        "salience": NUMBERS,
        "confidence": NUMBERS,
        "created_at": DATES,
        "metadata": METADATA,
    },
)
CONTENT = st.one_of(st.text(min_size=1, max_size=60), TEXT)


# --------------------------------------------------------------------------- the checks


class World:
    """One database for every example of a test; each example leaves no live memory."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.db = folder / "props.db"
        self.engine = cortex.open(self.db, embedder=None, keyword_index="off")
        self.counter = itertools.count()
        self.accepted = 0
        self.refused = 0
        self._server: Any = None

    def close(self) -> None:
        self.engine.close()

    def server(self) -> Any:
        """The MCP server of this world's engine, built once (building costs ~0.3 s)."""
        if self._server is None:
            self._server = build_server(self.engine)
        return self._server

    def clear(self) -> None:
        for r in self.engine.search(None, record=False, min_confidence=0.0, limit=10_000):
            self.engine.delete(r.memory.id)

    def check_readable(self, memory_id: int) -> None:
        """Everything a reader does with an accepted memory works."""
        engine = self.engine
        memory = engine.get(memory_id)
        data = memory.to_dict()
        text = json.dumps(data, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
        listed = engine.search(
            None,
            project=memory.project,
            record=False,
            min_confidence=0.0,
            include_superseded=True,
            limit=10_000,
        )
        assert memory_id in [r.memory.id for r in listed]
        assert not any("damaged" in n for n in listed.notices), listed.notices
        json.dumps(listed.to_dict(), allow_nan=False).encode("utf-8")
        with contextlib.suppress(QueryError):  # "nothing searchable": a typed refusal
            found = engine.search(memory.content[:500], mode="keyword", record=False)
            json.dumps(found.to_dict(), allow_nan=False)
        timeline = engine.timeline(memory_id)
        json.dumps(timeline.to_dict(), allow_nan=False)
        # shown by the CLI as strict JSON
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli_main(["--db", str(self.db), "show", str(memory_id), "--json"])
        assert code == 0, err.getvalue()
        shown = json.loads(out.getvalue(), parse_constant=_refuse)
        assert shown == json.loads(text)
        # exported and re-imported: the record imports into an equal memory
        record = {
            k: data[k]
            for k in ("content", "project", "sector", "tier", "scope", "category", "salience",
                      "confidence", "created_at", "metadata")
        }  # fmt: skip
        path = self.folder / f"export-{next(self.counter)}.jsonl"
        path.write_text(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")
        report = engine.import_path(path)
        assert not report.errors, report.errors
        assert report.counts.added == 1
        again = engine.search(
            None,
            source_prefix=str(path.resolve()),
            record=False,
            min_confidence=0.0,
            limit=10,
        )
        assert len(again) == 1
        copy = again[0].memory
        for key in ("content", "project", "sector", "tier", "scope", "category", "salience",
                    "confidence", "created_at", "metadata"):  # fmt: skip
            assert getattr(copy, key) == getattr(memory, key), key
        self.accepted += 1


def _refuse(name: str) -> Any:
    raise ValueError(f"not strict JSON: {name}")


@pytest.fixture
def world() -> Iterator[World]:
    with tempfile.TemporaryDirectory() as tmp:
        w = World(Path(tmp))
        try:
            yield w
        finally:
            w.close()
    # Each path must see both outcomes, or its strategy is not testing anything.
    assert w.accepted > 0 and w.refused > 0, (w.accepted, w.refused)


def _api(world: World, call: Any) -> int | None:
    """Run a write; a refusal must be a CortexError (anything else fails the test)."""
    try:
        return call()
    except CortexError:
        world.refused += 1
        return None


# --------------------------------------------------------------------------- write paths


@SETTINGS
@given(content=CONTENT, fields=FIELDS)
def test_add(world: World, content: str, fields: dict[str, Any]) -> None:
    memory_id = _api(world, lambda: world.engine.add(content, **fields))
    if memory_id is not None:
        world.check_readable(memory_id)
    world.clear()


@SETTINGS
@given(content=CONTENT, fields=FIELDS)
def test_add_many(world: World, content: str, fields: dict[str, Any]) -> None:
    ids = _api(
        world, lambda: world.engine.add_many([{"content": "ok"}, {"content": content, **fields}])
    )
    if ids is not None:
        for memory_id in ids:
            world.check_readable(memory_id)
    else:  # all or none
        assert not world.engine.search(None, record=False, min_confidence=0.0)
    world.clear()


@SETTINGS
@given(content=st.one_of(st.none(), CONTENT), fields=FIELDS, valid_until=DATES)
def test_update(
    world: World, content: str | None, fields: dict[str, Any], valid_until: Any
) -> None:
    memory_id = world.engine.add("the original text")
    fields = {k: v for k, v in fields.items() if k not in ("session", "source_path")}
    if content is not None:
        fields["content"] = content
    fields["valid_until"] = valid_until
    before = world.engine.get(memory_id)
    if _api(world, lambda: world.engine.update(memory_id, **fields)) is None:
        assert world.engine.get(memory_id) == before
    world.check_readable(memory_id)
    world.clear()


@SETTINGS
@given(
    type_=TEXT,
    content=CONTENT,
    confidence=NUMBERS,
    decay_rate=st.one_of(st.none(), NUMBERS),
    last_reinforced=DATES,
)
def test_add_fact(
    world: World, type_: str, content: str, confidence: Any, decay_rate: Any, last_reinforced: Any
) -> None:
    memory_id = world.engine.add("a memory with a fact")
    fact = _api(
        world,
        lambda: world.engine.add_fact(
            memory_id,
            type_,
            content,
            confidence=confidence,
            decay_rate=decay_rate,
            last_reinforced=last_reinforced,
        ),
    )
    results = world.engine.search(None, record=False, min_confidence=0.0)
    assert not results.notices, results.notices
    facts = [f.id for f in results[0].facts]
    assert facts == ([fact] if fact is not None else [])
    for f in results[0].facts:
        assert math.isfinite(f.effective_confidence)
    json.dumps(results.to_dict(), allow_nan=False)
    world.check_readable(memory_id)
    world.clear()


@SETTINGS
@given(content=CONTENT, fields=FIELDS)
def test_jsonl_import(world: World, content: str, fields: dict[str, Any]) -> None:
    record = {"content": content, **{k: v for k, v in fields.items() if k != "source_path"}}
    for key in ("created_at",):
        if isinstance(record.get(key), datetime):
            record[key] = record[key].isoformat()
    try:
        line = json.dumps(record, ensure_ascii=True)  # NaN is written as NaN: refused on read
    except (TypeError, ValueError):
        return  # a value JSON cannot hold (a set): not a file anyone can write
    path = world.folder / f"in-{next(world.counter)}.jsonl"
    path.write_text('{"content": "the good record"}\n' + line + "\n")
    report = world.engine.import_path(path)
    if report.errors:
        world.refused += 1
        assert report.files == 0 and report.counts.added == 0
        assert all(validate.is_encodable(e) and "\n" not in e for _, e in report.errors)
    else:
        listed = world.engine.search(None, record=False, min_confidence=0.0, limit=100)
        assert len(listed) == 2
        for r in listed:
            world.check_readable(r.memory.id)
    world.clear()


def _argv(fields: dict[str, Any]) -> list[str] | None:
    args: list[str] = []
    for name in ("project", "session", "sector", "tier", "scope", "category"):
        value = fields.get(name)
        if isinstance(value, str):
            args += [f"--{name}", value]
    for name in ("salience", "confidence"):
        value = fields.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                args += [f"--{name}", repr(float(value))]
            except OverflowError:
                args += [f"--{name}", str(value)[:50]]
    created = fields.get("created_at")
    if isinstance(created, str | datetime):
        args += ["--created-at", created if isinstance(created, str) else created.isoformat()]
    metadata = fields.get("metadata")
    if metadata is not None:
        with contextlib.suppress(TypeError, ValueError):
            args += ["--metadata", json.dumps(metadata)]
    return args


@pytest.fixture
def no_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`cortex add` without a model installed (keyword only), so that each example does
    not load the ONNX model again: the write path is the same either way."""
    monkeypatch.setenv("CORTEX_MODEL_DIR", str(tmp_path / "no-model"))


@SETTINGS
@given(content=CONTENT, fields=FIELDS)
def test_cli_add(world: World, no_model: None, content: str, fields: dict[str, Any]) -> None:
    if content.startswith("-"):
        content = " " + content
    out, err = io.StringIO(), io.StringIO()
    argv = ["--db", str(world.db), "add", content, *(_argv(fields) or [])]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(argv)
    assert code in (0, 1, 2), err.getvalue()  # never 70, an internal error
    if code == 0:
        memory_id = int(out.getvalue().split()[-1])
        world.check_readable(memory_id)
    else:
        world.refused += 1
        assert err.getvalue().count("\n") == 1
        assert not world.engine.search(None, record=False, min_confidence=0.0)
    world.clear()


@SETTINGS
@given(content=CONTENT, fields=FIELDS)
def test_mcp_memory_add(world: World, content: str, fields: dict[str, Any]) -> None:
    server = world.server()
    args: dict[str, Any] = {"content": content, **fields}
    if isinstance(args.get("created_at"), datetime):
        args["created_at"] = args["created_at"].isoformat()
    result = asyncio.run(server.call_tool("memory_add", args))
    text = result.content[0].text
    if result.is_error:
        world.refused += 1
        assert not text.startswith("Error executing tool"), text  # a raw exception
        assert "\n" not in text
        assert not world.engine.search(None, record=False, min_confidence=0.0)
    else:
        world.check_readable(json.loads(text)["id"])
    world.clear()
