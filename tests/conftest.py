"""Shared fixtures: a real SQLite file per test, and the real `cortex` entry point."""

from __future__ import annotations

import hashlib
import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import cortex

from .procs import cortex_command

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "sample"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memories.db"


@pytest.fixture(scope="session")
def embedder():
    """The real default model, loaded once for the session (a missing model fails the
    tests that need it, with the fix in the message; nothing is skipped)."""
    from cortex.embed import load_default_embedder
    from cortex.errors import EmbeddingError

    try:
        return load_default_embedder()
    except EmbeddingError as exc:
        pytest.fail(f"the embedding model is not installed: {exc}")


@pytest.fixture
def engine(db_path: Path, embedder) -> Iterator[cortex.Engine]:
    with cortex.open(db_path, embedder=embedder) as e:
        yield e


@pytest.fixture
def sqlite_engine(db_path: Path, embedder) -> Iterator[cortex.Engine]:
    """The Engine on SQLite, for a test of SQLite's own files in a module whose `engine`
    runs on both backends."""
    with cortex.open(db_path, embedder=embedder) as e:
        yield e


_pg_databases = itertools.count()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """A throwaway PostgreSQL server (tests/pg_server.py), started once per session by the
    first test that needs it."""
    from tests.pg_server import running_server

    with running_server() as server:
        yield server


def new_pg_database(server: Any, *, migrated: bool = False) -> str:
    """The URL of a new, empty database on `server`; `migrated`: with cortex's schema
    already in it (copied from a template migrated once: a third of the time per test)."""
    name = f"cortex_test_{os.getpid()}_{next(_pg_databases)}"
    if not migrated:
        return str(server.create_database(name))
    import psycopg

    from cortex.pg.store import PgStore

    template = f"cortex_template_{os.getpid()}"
    if not getattr(server, "_cortex_template", False):
        PgStore.open(server.create_database(template)).close()
        server._cortex_template = True
    with psycopg.connect(server.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return str(server.url(name))


@pytest.fixture
def pg_engine(request: pytest.FixtureRequest, embedder) -> Iterator[cortex.Engine]:
    """The Engine on a new PostgreSQL database (`cortex.open("postgresql://...")`)."""
    url = new_pg_database(request.getfixturevalue("pg_server"), migrated=True)
    with cortex.open(url, embedder=embedder) as e:
        yield e


@pytest.fixture(params=["sqlite", "postgres"])
def any_engine(request: pytest.FixtureRequest, db_path: Path, embedder) -> Iterator[cortex.Engine]:
    """The Engine on each backend: the behavioural tests that use it run on both."""
    if request.param == "sqlite":
        with cortex.open(db_path, embedder=embedder) as e:
            yield e
    else:
        yield request.getfixturevalue("pg_engine")


@pytest.fixture
def sample_engine(engine: cortex.Engine) -> cortex.Engine:
    report = engine.import_path(SAMPLE)
    assert not report.errors
    return engine


@dataclass
class CliRun:
    code: int
    out: str
    err: str


def run_cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> CliRun:
    """Run the installed `cortex` console script in a subprocess, as a user would."""
    command = cortex_command()
    full_env = {**os.environ, "CORTEX_NO_PROGRESS": "1", **(env or {})}
    proc = subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        env=full_env,
        input=stdin,
        timeout=120,
    )
    return CliRun(proc.returncode, proc.stdout, proc.stderr)


def run_python(script: str, *args: str) -> str:
    """Run `script` in a fresh interpreter importing this checkout's cortex (with `args`
    as sys.argv[1:]); answers its standard output. Fails the test if it fails."""
    env = {**os.environ, "PYTHONPATH": str(Path(cortex.__file__).parents[1])}
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return proc.stdout


def db_digest(path: Path) -> str:
    """A digest of everything a database holds (content of every table), for
    "the database is unchanged" assertions that do not depend on WAL checkpoints."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        h = hashlib.sha256()
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND sql NOT LIKE 'CREATE VIRTUAL%' AND name NOT GLOB 'memories_fts_*'"
                " AND name NOT GLOB 'memories_exact_*' AND name NOT GLOB 'memories_trigram_*'"
                " AND name NOT GLOB 'documents_fts_*'"
                " ORDER BY name"
            )
        ]
        for table in tables:
            h.update(table.encode())
            for row in conn.execute(f'SELECT * FROM "{table}" ORDER BY rowid'):
                h.update(repr(row).encode())
        for fts in ("memories_fts", "memories_exact", "memories_trigram"):
            for row in conn.execute(f"SELECT id FROM {fts}_docsize ORDER BY id"):
                h.update(repr(row).encode())
        return h.hexdigest()
    finally:
        conn.close()
