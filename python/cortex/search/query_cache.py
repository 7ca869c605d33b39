"""A cache of query embeddings: agents repeat their queries, and the embedding is most of
a hybrid search's time (~7-10 ms of CPU on a 2-core machine, the vector scan at 10k-100k
a fraction of that).

Keyed by the model's id and the query text with its whitespace collapsed (the tokenizer
splits on whitespace, so ``"deploy  staging "`` and ``"deploy staging"`` embed alike);
least recently used entries leave first; safe to share between threads. A cached vector
is the very array the model returned (read-only), so a search answers exactly as it
would have without the cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from contextlib import suppress
from typing import Any

__all__ = ["DEFAULT_ENTRIES", "QueryCache", "normalise"]

#: Query vectors kept (384 float32 each: 1.5 kB, so ~1.6 MB for the default).
DEFAULT_ENTRIES = 1024


def normalise(text: str) -> str:
    """The cache's key for a query text: its words separated by single spaces."""
    return " ".join(text.split())


class QueryCache:
    """A bounded, thread-safe LRU of query vectors keyed by (model id, normalised text).

    `max_entries` 0 turns it off (every query is embedded). A miss computes outside the
    lock: two threads missing the same query at once both embed it (same vector), and
    neither waits for the other's model call.
    """

    def __init__(self, max_entries: int = DEFAULT_ENTRIES) -> None:
        self._entries: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._lock = threading.Lock()
        self._max = 0
        self.hits = 0
        self.misses = 0
        self.resize(max_entries)

    def resize(self, max_entries: int) -> None:
        """Keep at most `max_entries` vectors from now on (0: cache nothing)."""
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 0:
            from cortex.errors import InvalidOptionError

            raise InvalidOptionError(
                f"max_entries must be a non-negative integer, not {max_entries!r}"
            )
        with self._lock:
            self._max = max_entries
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    @property
    def max_entries(self) -> int:
        return self._max

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, model_id: str, text: str, compute: Callable[[str], Any]) -> Any:
        """The vector of `text` under `model_id`, from the cache or from `compute(text)`
        (which must return the final, checked vector: only what it returns is kept)."""
        if self._max == 0:
            with self._lock:
                self.misses += 1
            return compute(text)
        key = (model_id, normalise(text))
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return found
            self.misses += 1
        vector = compute(text)
        with suppress(AttributeError, ValueError):  # shared between searches: read-only
            vector.flags.writeable = False
        with self._lock:
            if self._max > 0:
                self._entries[key] = vector
                self._entries.move_to_end(key)
                while len(self._entries) > self._max:
                    self._entries.popitem(last=False)
        return vector

    def clear(self) -> None:
        """Forget every vector (the counters stay)."""
        with self._lock:
            self._entries.clear()

    def stats(self) -> dict[str, Any]:
        """Hits, misses, entries held, the bound, and the hit rate so far."""
        with self._lock:
            asked = self.hits + self.misses
            return {
                "hits": self.hits,
                "misses": self.misses,
                "entries": len(self._entries),
                "max_entries": self._max,
                "hit_rate": self.hits / asked if asked else 0.0,
            }
