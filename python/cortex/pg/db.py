"""Connections to PostgreSQL: URL checks and redaction, the pool, vectors on the wire, migrations.

psycopg 3 and psycopg_pool are imported only here and only when a ``postgresql://`` URL is
opened, so the SQLite install needs neither (they are the ``postgres`` extra).
"""

from __future__ import annotations

import re
import struct
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import numpy as np

from cortex.errors import StorageError

if TYPE_CHECKING:
    import psycopg

__all__ = ["SCHEMES", "Database", "is_postgres_url", "redact", "redact_text"]

SCHEMES = ("postgresql://", "postgres://")

#: Pool size: enough for a service's threads, small enough for a shared server (each
#: connection is a backend process).
POOL_MAX = 8

_PASSWORD_KV = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def is_postgres_url(value: object) -> bool:
    """Whether `value` names a PostgreSQL database rather than a SQLite file."""
    return isinstance(value, str) and value.lower().startswith(SCHEMES)


def redact(url: str) -> str:
    """`url` with its password (in the authority or a ``password=`` parameter) replaced by
    ``***``: what logs, errors and ``stats()`` show of a database URL."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return _PASSWORD_KV.sub(r"\1***", url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        netloc = f"{userinfo}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() == "password" for k, _ in pairs):
            query = urlencode(
                [(k, "***" if k.lower() == "password" else v) for k, v in pairs], safe="/:*"
            )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _password(url: str) -> str | None:
    try:
        parts = urlsplit(url)
        for k, v in parse_qsl(parts.query, keep_blank_values=True):
            if k.lower() == "password" and v:
                return v
        return unquote(parts.password) if parts.password else None
    except ValueError:
        return None


def redact_text(text: str, url: str) -> str:
    """`text` (a server or driver message) with the URL's password, in any form, removed."""
    secret = _password(url)
    if secret:
        text = text.replace(secret, "***")
        from urllib.parse import quote

        text = text.replace(quote(secret, safe=""), "***")
    return _PASSWORD_KV.sub(r"\1***", text)


# --------------------------------------------------------------------------- vectors


class Vector:
    """A float32 vector to send as a pgvector ``vector`` in binary (no text formatting)."""

    __slots__ = ("data",)

    def __init__(self, data: np.ndarray | bytes) -> None:
        if isinstance(data, bytes | bytearray | memoryview):
            data = np.frombuffer(data, dtype="<f4")
        self.data = np.ascontiguousarray(data, dtype=np.float32)


def _register_vector(conn: psycopg.Connection[Any]) -> None:
    """Binary dumper of :class:`Vector` and a numpy loader for ``vector`` on `conn`."""
    from psycopg.adapt import Dumper, Loader
    from psycopg.pq import Format
    from psycopg.types import TypeInfo

    found = TypeInfo.fetch(conn, "vector")
    if found is None:
        raise StorageError("the pgvector extension is not installed in this database")
    info: TypeInfo = found

    class VectorDumper(Dumper):
        format = Format.BINARY
        oid = info.oid

        def dump(self, obj: Vector) -> bytes:
            arr = obj.data
            return struct.pack(">HH", arr.shape[0], 0) + arr.astype(">f4").tobytes()

    class VectorLoader(Loader):
        def load(self, data: Any) -> np.ndarray:
            text = bytes(data).decode()
            return np.array(text[1:-1].split(","), dtype=np.float32)

    class VectorBinaryLoader(Loader):
        format = Format.BINARY

        def load(self, data: Any) -> np.ndarray:
            raw = bytes(data)
            (dim,) = struct.unpack_from(">H", raw)
            return np.frombuffer(raw, dtype=">f4", count=dim, offset=4).astype(np.float32)

    info.register(conn)  # the vector type by name, for COPY's set_types
    conn.adapters.register_dumper(Vector, VectorDumper)
    conn.adapters.register_loader(info.oid, VectorLoader)
    conn.adapters.register_loader(info.oid, VectorBinaryLoader)
    conn.commit()  # the type lookup opened a transaction; the pool wants the connection idle


# --------------------------------------------------------------------------- database


class Database:
    """A pool of connections to one PostgreSQL database; safe to share between threads.

    `url` is kept for connecting only; `name` (the redacted URL) is what messages show.
    """

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = POOL_MAX) -> None:
        try:
            import psycopg  # noqa: F401
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise StorageError(
                "PostgreSQL support is not installed: pip install 'cortex-memory[postgres]'"
            ) from None
        self._url = url
        self.name = redact(url)
        self._closed = False
        self._vector_ready = threading.local()
        self._extensions_checked = False
        # The extensions must exist before a connection can register the vector type; the
        # first connection creates them (or says who must), then the pool opens.
        self._ensure_extensions()
        self.pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            configure=_register_vector,
            kwargs={"autocommit": False},
            name="cortex",
        )
        try:
            self.pool.open(wait=True, timeout=30.0)
        except Exception as exc:
            self.pool.close()
            raise StorageError(self.explain(exc)) from None

    def explain(self, exc: BaseException) -> str:
        """One line for `exc`, naming the database by its redacted URL, never the password."""
        message = " ".join(str(exc).split()) or type(exc).__name__
        return f"{self.name}: {redact_text(message, self._url)}"

    def _ensure_extensions(self) -> None:
        import psycopg
        from psycopg import sql

        try:
            with psycopg.connect(self._url, autocommit=True, connect_timeout=30) as conn:
                have = {
                    r[0]
                    for r in conn.execute(
                        "SELECT extname FROM pg_extension WHERE extname IN ('vector', 'pg_trgm')"
                    )
                }
                for ext in ("vector", "pg_trgm"):
                    if ext in have:
                        continue
                    try:
                        conn.execute(
                            sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(ext))
                        )
                    except psycopg.errors.UniqueViolation:
                        pass  # another process created it between our check and ours
                    except psycopg.Error as exc:
                        raise StorageError(
                            f"{self.name}: the {ext} extension is missing and cannot be"
                            f" created here ({redact_text(str(exc).strip(), self._url)});"
                            f" ask the database owner to run CREATE EXTENSION {ext}"
                        ) from None
        except psycopg.Error as exc:
            raise StorageError(self.explain(exc)) from None

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection for reads (its implicit transaction ends on return)."""
        import psycopg

        if self._closed:
            raise StorageError(f"{self.name} is closed")
        try:
            with self.pool.connection(timeout=60.0) as conn:
                yield conn
        except psycopg.Error as exc:
            raise StorageError(self.explain(exc)) from None

    @contextmanager
    def reads(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection for reads in autocommit: each statement its own round trip,
        without the BEGIN before it and the COMMIT on return (3 round trips a read, not 1).
        The same answers: under READ COMMITTED every statement takes its own snapshot
        either way. Back to transactions before the pool has it again."""
        with self.connection() as conn:
            conn.autocommit = True
            try:
                yield conn
            finally:
                if not conn.closed:
                    conn.autocommit = False

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        with self.connection() as conn, conn.transaction():
            yield conn

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.reads() as conn:
            return conn.execute(sql, params).fetchall()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.pool.close()
