"""Running cortex as a process of its own: what the tests and the benches that start the
CLI or `cortex serve` share. The benches run as scripts and import it as ``tests.procs``
with the repository root put on ``sys.path``.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["cortex_command", "free_port", "wait_until_serving"]


def cortex_command() -> list[str]:
    """The `cortex` console script beside this Python, as a user runs it (``cortex.exe``
    in a Windows venv's Scripts folder), else ``python -m cortex.cli``."""
    exe = Path(sys.executable).with_name("cortex.exe" if sys.platform == "win32" else "cortex")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "cortex.cli"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_serving(proc: subprocess.Popen[Any], url: str, *, timeout: float = 120.0) -> None:
    """Return once `url` answers over HTTP (any status: a 401 is an answer too). Raises
    RuntimeError if `proc` exits first, or after `timeout` seconds: a guard against a
    hang (start-up and the model load on a busy machine), never a speed check."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10):
                return
        except urllib.error.HTTPError as exc:
            exc.close()
            return
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the process exited (code {proc.returncode}) before {url} answered"
                ) from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not answer within {timeout:.0f} s") from None
            time.sleep(0.2)
