"""The `cortex` console script and `python -m cortex`.

`cortex --version` is answered here, before the command line's modules (argparse, the
options, the engine) are imported: it then costs little more than Python's own start
(benches/bench_startup.py, BENCHMARKS.md). Everything else is :func:`cortex.cli.main`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:
        from cortex._native import __version__

        sys.stdout.write(f"cortex {__version__}\n")
        return 0
    from cortex.cli import main as cli_main

    return cli_main(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
