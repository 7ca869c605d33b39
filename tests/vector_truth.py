"""The stored vectors of a database as the tests read them: from the vector file SQLite
names, each row checked against the checksum SQLite holds (cortex.semantic.read_vectors)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from cortex.semantic import read_vectors


def stored_vectors(db: Path, model: str, dim: int = 384) -> dict[int, np.ndarray]:
    """memory id -> its stored (f16) row, for every embedding of `model` whose row is
    intact."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return read_vectors(conn, db, model, dim)
    finally:
        conn.close()


def stored_vector(engine, memory_id: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    """One memory's stored row of the engine's model (f16)."""
    return stored_vectors(engine.store.path, engine.model_id)[memory_id]
