"""The vocabulary of the seeded texts that tests and benches write: operations words that
FTS5 keeps whole and the embedder tells apart. The benches run as scripts and import it as
``tests.words`` with the repository root put on ``sys.path`` (as ``tests.procs``).

Each corpus extends these in its own way; the order is part of it (seeded ``rng.sample``
and ``rng.choice`` draw by position), so a word is only ever appended.
"""

from __future__ import annotations

__all__ = ["OPS_WORDS", "SEARCH_WORDS"]

#: The twenty words every seeded corpus starts with.
OPS_WORDS = (
    "deploy",
    "release",
    "rollback",
    "staging",
    "canary",
    "database",
    "index",
    "migration",
    "token",
    "auth",
    "session",
    "cache",
    "latency",
    "incident",
    "review",
    "checklist",
    "docker",
    "queue",
    "retry",
    "budget",
)
#: Words of search itself, which the load benches add next.
SEARCH_WORDS = ("memory", "search", "ranking", "vector", "embedding")
