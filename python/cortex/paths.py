"""Where cortex keeps its files when it is not told: one per-user data folder."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["data_home", "default_db"]


def data_home() -> Path:
    """``$CORTEX_HOME``, else ``$XDG_DATA_HOME/cortex``, else ``~/.local/share/cortex``."""
    if home := os.environ.get("CORTEX_HOME"):
        return Path(home).expanduser()
    if xdg := os.environ.get("XDG_DATA_HOME"):
        return Path(xdg).expanduser() / "cortex"
    return Path.home() / ".local" / "share" / "cortex"


def default_db() -> Path:
    """``$CORTEX_DB`` if set, else ``cortex.db`` in :func:`data_home`."""
    if db := os.environ.get("CORTEX_DB"):
        return Path(db).expanduser()
    return data_home() / "cortex.db"
