"""Where cortex keeps its files: the per-user data folder, and what a database argument names.

:func:`db_location` is the one place that decides whether a ``--db`` / ``cortex.open``
argument is a SQLite file or a database URL: the CLI, the MCP server and
:func:`cortex.open` all ask it, so a new backend is routed here and nowhere else.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from cortex.errors import StorageError

__all__ = ["SUPPORTED_URL_SCHEMES", "data_home", "db_location", "default_db", "url_scheme"]

#: URL schemes that name a database served elsewhere rather than a file: PostgreSQL
#: (:func:`cortex.open` routes them to :class:`cortex.pg.store.PgStore`).
SUPPORTED_URL_SCHEMES: frozenset[str] = frozenset({"postgresql", "postgres"})

# RFC 3986 scheme, then "://": `postgresql://…`, `sqlite://…`, `s3://…`. A Windows drive
# (`C:\…`, `C:/…`) has no "//" after its colon, and a relative `postgresql:/x` is a path.
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def data_home() -> Path:
    """``$CORTEX_HOME``; else on Windows ``%LOCALAPPDATA%\\cortex`` (per user, not roamed:
    a database and a model are no settings to copy between machines); else
    ``$XDG_DATA_HOME/cortex``, else ``~/.local/share/cortex``."""
    if home := os.environ.get("CORTEX_HOME"):
        return Path(home).expanduser()
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA")
        return (Path(local) if local else Path.home() / "AppData" / "Local") / "cortex"
    if xdg := os.environ.get("XDG_DATA_HOME"):
        return Path(xdg).expanduser() / "cortex"
    return Path.home() / ".local" / "share" / "cortex"


def default_db() -> Path | str:
    """``$CORTEX_DB`` if set (a file, or a ``postgresql://`` URL: see
    :func:`db_location`), else ``cortex.db`` in :func:`data_home`."""
    if db := os.environ.get("CORTEX_DB"):
        return db_location(db)
    return data_home() / "cortex.db"


def url_scheme(value: str | os.PathLike[str]) -> str | None:
    """The lower-cased scheme when `value` is a URL (``postgresql://…``), else None."""
    match = _URL.match(os.fspath(value)) if isinstance(value, str) else None
    return match.group(1).lower() if match else None


def db_location(value: str | os.PathLike[str]) -> Path | str:
    """What a database argument names: a :class:`~pathlib.Path` of a SQLite file, or the
    URL itself (a ``str``) when its scheme is in :data:`SUPPORTED_URL_SCHEMES`.

    A URL is never taken for a path (``Path("postgresql://h/db")`` would create a folder
    named ``postgresql:``): an unsupported scheme raises :class:`StorageError` saying so.
    An empty path (an unset shell variable) and a path with a NUL byte are refused too.
    """
    raw = os.fspath(value)
    if not isinstance(raw, str):  # bytes paths: decode as the OS does
        raw = os.fsdecode(raw)
    if not raw.strip():
        raise StorageError(
            "invalid database path '': it is empty; give the path of a database file"
        )
    if "\x00" in raw:
        raise StorageError(f"invalid database path {raw!r}: it holds a NUL byte")
    scheme = url_scheme(raw)
    if scheme is not None:
        if scheme in SUPPORTED_URL_SCHEMES:
            return raw
        raise StorageError(
            f"{scheme}:// databases are not supported yet; give the path of a SQLite file"
        )
    return Path(raw).expanduser()
