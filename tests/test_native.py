"""The native extension builds, imports, and is the one the package was built with."""

from __future__ import annotations

import importlib.metadata

import cortex
from cortex import _native


def test_native_module_imports_with_the_package_version() -> None:
    assert _native.__version__ == cortex.__version__
    assert importlib.metadata.version("cortex-memory") == cortex.__version__
