"""cortex on PostgreSQL: the same data model as the SQLite store, pgvector for vectors and
generated ``tsvector`` columns for keyword search, behind the same Engine.

Selected by a ``postgresql://`` URL. Needs the ``postgres`` extra (psycopg 3 and
psycopg_pool); nothing here is imported by the SQLite path.
"""

from cortex.pg.db import is_postgres_url, redact

__all__ = ["is_postgres_url", "redact"]
