"""A module imported at its first use, so that `cortex --version` and a keyword search
do not pay for numpy (~0.1 s of CPU) when no vector is touched."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["LazyModule"]


class LazyModule:
    """Stands for the module `name` and imports it at the first attribute read; each
    attribute is then kept on this object, so later reads cost what a module's do."""

    def __init__(self, name: str) -> None:
        self._lazy_name = name

    def __getattr__(self, attr: str) -> Any:
        value = getattr(importlib.import_module(self._lazy_name), attr)
        setattr(self, attr, value)
        return value

    def __repr__(self) -> str:
        return f"<lazy module {self._lazy_name!r}>"
