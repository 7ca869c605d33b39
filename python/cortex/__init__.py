"""cortex: local-first memory search for AI agents."""
from cortex._native import __version__

__all__ = ["__version__"]
