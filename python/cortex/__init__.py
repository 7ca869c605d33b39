"""cortex: local-first memory search for AI agents.

import cortex
with cortex.open("memories.db") as engine:
    engine.add("We deploy with a blue-green switch", project="hydra")
    for result in engine.search("deploy", project="hydra"):
        print(result.score, result.snippet)
"""

from cortex._native import __version__
from cortex.engine import Engine, Searcher, open
from cortex.errors import (
    CortexError,
    EmbeddingError,
    ImportFileError,
    IndexFormatError,
    InvalidOptionError,
    NotFoundError,
    QueryError,
    StorageError,
)
from cortex.ingest import ImportReport
from cortex.options import Fusion, Mode, Options, OrderBy
from cortex.result import Fact, MatchType, Memory, Result, Results

__all__ = [
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
    "__version__",
    "open",
]
