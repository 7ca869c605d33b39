"""cortex: local-first memory search for AI agents.

import cortex
with cortex.open("memories.db") as engine:
    engine.add("We deploy with a blue-green switch", project="hydra")
    for result in engine.search("deploy", project="hydra"):
        print(result.score, result.snippet)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cortex.errors import (
    CortexError,
    EmbeddingError,
    ImportFileError,
    IndexFormatError,
    InvalidOptionError,
    NotFoundError,
    QueryError,
    StorageError,
    VectorsLostWarning,
)

if TYPE_CHECKING:
    from cortex._native import __version__
    from cortex.context import ContextAnswer
    from cortex.engine import Engine, Searcher, open
    from cortex.ingest import ImportReport
    from cortex.options import Fusion, Mode, Options, OrderBy
    from cortex.result import Fact, MatchType, Memory, Result, Results

# The engine (SQLite, FTS5, the extension, numpy on first use), and even the options and
# result types (dataclasses, enums, regexes), are imported at first use of these names,
# so that `cortex --version` and `import cortex` cost little more than Python's own start.
_LAZY = {
    "Fusion": "cortex.options",
    "Mode": "cortex.options",
    "Options": "cortex.options",
    "OrderBy": "cortex.options",
    "Fact": "cortex.result",
    "MatchType": "cortex.result",
    "Memory": "cortex.result",
    "Result": "cortex.result",
    "Results": "cortex.result",
    "Engine": "cortex.engine",
    "Searcher": "cortex.engine",
    "open": "cortex.engine",
    "ImportReport": "cortex.ingest",
    "ContextAnswer": "cortex.context",
    "__version__": "cortex._native",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cortex' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ContextAnswer",
    "CortexError",
    "EmbeddingError",
    "Engine",
    "Fact",
    "Fusion",
    "ImportFileError",
    "ImportReport",
    "IndexFormatError",
    "InvalidOptionError",
    "MatchType",
    "Memory",
    "Mode",
    "NotFoundError",
    "Options",
    "OrderBy",
    "QueryError",
    "Result",
    "Results",
    "Searcher",
    "StorageError",
    "VectorsLostWarning",
    "__version__",
    "open",
]
