"""Shared fixtures: a real SQLite file per test, and the real `cortex` entry point."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

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
