"""Refresh the screenshots of the search page under docs/screenshots/.

Runs the browser tests (tests/test_server_browser.py: a real `cortex serve` and Debian's
headless Chromium) with CORTEX_SCREENSHOTS pointing there; each main state is saved as a
PNG: search, filtered, context, timeline, empty. Usage: python scripts/screenshots.py [DIR]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "screenshots"
    env = {**os.environ, "CORTEX_SCREENSHOTS": str(out.resolve())}
    command = [sys.executable, "-m", "pytest", "-q", "tests/test_server_browser.py"]
    code = subprocess.call(command, cwd=ROOT, env=env)
    if code == 0:
        for png in sorted(out.glob("*.png")):
            print(png.relative_to(ROOT) if png.is_relative_to(ROOT) else png)
    return code


if __name__ == "__main__":
    sys.exit(main())
