"""The ``cortex`` logger: silent unless the application asks (a NullHandler, as a library's
logger should be), on stderr with ``cortex --verbose``.

Levels: DEBUG for each search (mode, keyword tier and where it ran, hits per leg,
milliseconds per step), INFO for imports, reindexing and index rebuilds, WARNING for what
went wrong and was worked around. Memory text never appears at INFO or above; a query
appears only at DEBUG, which is off unless asked for.

    import logging
    logging.getLogger("cortex").setLevel(logging.DEBUG)   # or: cortex.log.to_stderr()
"""

from __future__ import annotations

import logging
import sys
import time
from typing import TextIO

__all__ = ["LOGGER_NAME", "Stopwatch", "get_logger", "to_stderr"]

LOGGER_NAME = "cortex"

logging.getLogger(LOGGER_NAME).addHandler(logging.NullHandler())


def get_logger(module: str) -> logging.Logger:
    """The logger of one cortex module (``cortex.engine``, ...): a child of ``cortex``."""
    return logging.getLogger(module if module.startswith(LOGGER_NAME) else f"cortex.{module}")


def to_stderr(level: int = logging.DEBUG, stream: TextIO | None = None) -> logging.Handler:
    """Send cortex's log lines to stderr (what ``cortex -v`` does); returns the handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter("cortex: %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger(LOGGER_NAME)
    root.addHandler(handler)
    root.setLevel(level)
    return handler


class Stopwatch:
    """Milliseconds per named step, for one debug line: ``keyword=1.2ms semantic=8.0ms``."""

    __slots__ = ("_last", "steps")

    def __init__(self) -> None:
        self._last = time.perf_counter()
        self.steps: dict[str, float] = {}

    def lap(self, step: str) -> None:
        now = time.perf_counter()
        self.steps[step] = self.steps.get(step, 0.0) + (now - self._last) * 1000
        self._last = now

    def __str__(self) -> str:
        return " ".join(f"{k}={v:.1f}ms" for k, v in self.steps.items())
