"""The one exception tree of cortex.

Every failure cortex raises on purpose is a :class:`CortexError`; wrong
arguments to a public function raise :class:`ValueError` or :class:`TypeError`
(the standard contract), and :class:`InvalidOptionError` is both a
``CortexError`` and a ``ValueError`` so that either ``except`` catches it.
The native extension raises the classes defined here, so that
``except cortex.errors.IndexFormatError`` works whichever layer failed.
"""

from __future__ import annotations

__all__ = [
    "CortexError",
    "DamagedRowError",
    "EmbeddingError",
    "ImportFileError",
    "IndexFormatError",
    "InvalidOptionError",
    "NotFoundError",
    "QueryError",
    "StorageError",
]


class CortexError(Exception):
    """Base class of every error cortex raises on purpose."""


class QueryError(CortexError):
    """A query cortex cannot run (too long, or nothing searchable in it)."""


class InvalidOptionError(CortexError, ValueError):
    """An option outside its domain: a negative limit, a NaN weight, an unknown mode."""


class StorageError(CortexError):
    """The SQLite store cannot be opened, read or written."""


class DamagedRowError(StorageError):
    """A stored row that cannot be read back (written by an older cortex or another tool:
    a date out of range, metadata that is not JSON). Searches skip it with a notice."""


class NotFoundError(CortexError, KeyError):
    """A memory, session or other record that does not exist."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class ImportFileError(CortexError):
    """A file given to `import` that cannot be read or parsed."""


class EmbeddingError(CortexError):
    """The embedding model is missing, broken, or gave unusable output."""


class IndexFormatError(CortexError):
    """A vector index file that is truncated, corrupt, or of another format."""


class VectorsLostWarning(UserWarning):  # a warning, not an error: outside __all__
    """Vectors that callers supplied (``add_many(..., vectors=...)``) were lost with a
    damaged or missing vector file: cortex cannot make them again. Their memories are
    still found by keyword; ``Engine.stats()["vectors_lost"]`` counts them."""
