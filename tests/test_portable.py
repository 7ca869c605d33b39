"""What makes cortex portable beyond POSIX, proven where it can be on this machine.

- The writer lock is the extension's FileLock (std's file locks: flock here, LockFileEx on
  Windows): it excludes other processes, is released by release, close and death, and is
  not reentrant on any platform (on Windows a second lock through the same handle would
  wait forever, so it is refused everywhere).
- replace_file renames over a file that a reader has mapped, and the reader keeps the old
  bytes (unix; the Windows move-aside is unit-tested in rust/kernels/files.rs).
- The per-user data folder is chosen per platform (%LOCALAPPDATA% on Windows), and the CLI
  writes UTF-8 on Windows whatever the code page: both by running the Windows branch here
  (sys.platform set to "win32"), as nothing else can be run on Windows from Linux.
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import cortex
from cortex import _native, cli, paths, semantic
from cortex.errors import StorageError
from cortex.model_dir import default_model_dir
from cortex.vectors import VectorIndex

# A child that locks `argv[1]`, says so, and releases or exits on the lines it reads.
_HOLDER = textwrap.dedent(
    """
    import sys
    from cortex import _native
    lock = _native.FileLock(sys.argv[1])
    print("free" if lock.acquire(blocking=False) else "taken", flush=True)
    if not lock.locked:
        lock.acquire()  # wait for it
        print("got", flush=True)
    for line in sys.stdin:
        if line.strip() == "release":
            lock.release()
            print("released", flush=True)
        elif line.strip() == "exit-holding":
            lock.acquire()
            print("holding", flush=True)
            sys.stdout.flush()
            import os
            os._exit(0)  # dies holding it: no release, no close
    """
)


@contextlib.contextmanager
def _holder(path: Path) -> Iterator[subprocess.Popen[str]]:
    """The child above, killed (if still running) and reaped on the way out."""
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            yield child
        finally:
            child.kill()


def _say(proc: subprocess.Popen[str], line: str) -> str:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def _hear(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


# ------------------------------------------------------------------ FileLock


def test_a_lock_held_by_another_process_excludes_until_released(tmp_path: Path) -> None:
    path = tmp_path / "index.lock"
    with _holder(path) as child:
        assert _hear(child) == "free"
        mine = _native.FileLock(path)
        assert mine.acquire(blocking=False) is False
        assert not mine.locked
        assert _say(child, "release") == "released"
        assert mine.acquire(blocking=False) is True
        mine.close()


def test_a_blocking_acquire_waits_for_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "index.lock"
    mine = _native.FileLock(path)
    assert mine.acquire()
    with _holder(path) as child:
        assert _hear(child) == "taken"  # it tried, then waits in a blocking acquire
        mine.release()
        assert _hear(child) == "got"
        assert mine.acquire(blocking=False) is False
    mine.close()


def test_a_process_that_dies_holding_the_lock_releases_it(tmp_path: Path) -> None:
    path = tmp_path / "index.lock"
    with _holder(path) as child:
        assert _hear(child) == "free"
        assert _say(child, "release") == "released"
        assert _say(child, "exit-holding") == "holding"
        assert child.wait() == 0
    mine = _native.FileLock(path)
    # blocking: Windows releases a dead process's locks soon, not at once (unix at once)
    assert mine.acquire() is True
    mine.close()


def test_two_handles_in_one_process_exclude_each_other_and_none_reenters(tmp_path: Path) -> None:
    path = tmp_path / "index.lock"
    a, b = _native.FileLock(path), _native.FileLock(path)
    assert a.acquire(blocking=False) and a.locked
    assert b.acquire(blocking=False) is False
    with pytest.raises(RuntimeError, match="already locked by this handle"):
        a.acquire()
    with pytest.raises(RuntimeError, match="not locked by this handle"):
        b.release()
    a.close()  # closing releases
    assert a.closed and not a.locked
    with b as held:
        assert held is b and b.locked
    assert not b.locked
    with pytest.raises(RuntimeError, match="closed"):
        a.acquire()
    assert b.path == path and "unlocked" in repr(b)
    b.close()
    b.close()  # idempotent


def test_a_lock_file_must_be_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "dir.lock").mkdir()
    with pytest.raises(OSError, match="cannot open the lock file"):
        _native.FileLock(tmp_path / "dir.lock")
    with pytest.raises(FileNotFoundError, match="cannot open the lock file"):
        _native.FileLock(tmp_path / "missing" / "x.lock")


@pytest.mark.skipif(os.name == "nt", reason="symlinks need a privilege on Windows")
def test_a_lock_file_is_never_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    (tmp_path / "x.lock").symlink_to(target)
    with pytest.raises(OSError, match="cannot open the lock file"):
        _native.FileLock(tmp_path / "x.lock")
    assert target.read_text() == "keep"


def test_the_index_writer_lock_is_the_same_lock_as_filelock(tmp_path: Path, embedder) -> None:
    """semantic.py's writer lock excludes a FileLock of another process on `.lock`."""
    with cortex.open(tmp_path / "m.db", embedder=embedder) as engine:
        engine.add("the first memory")
        sem = engine._semantic
        lock_path = sem._lock_path()
        with sem._write_lock():
            assert lock_path.is_file()
            with _holder(lock_path) as child:
                assert _hear(child) == "taken"
        other = _native.FileLock(lock_path)
        assert other.acquire(blocking=False)
        other.close()


# ------------------------------------------------------------------ replace_file


@pytest.mark.skipif(os.name == "nt", reason="unix: a rename over a mapped file")
def test_replace_file_keeps_a_mapped_reader_on_the_old_bytes(tmp_path: Path) -> None:
    dst, src = tmp_path / "vectors", tmp_path / "vectors.tmp1"
    dst.write_bytes(b"old!" * 1024)
    with open(dst, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as old:
        src.write_bytes(b"new!" * 2048)
        _native.replace_file(src, dst)
        assert old[:8] == b"old!old!" and len(old) == 4096
    assert dst.read_bytes() == b"new!" * 2048
    assert not src.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vectors"]


def test_replace_file_of_a_missing_source_is_an_oserror_naming_both(tmp_path: Path) -> None:
    (tmp_path / "dst").write_text("kept")
    with pytest.raises(FileNotFoundError, match=r"cannot replace .*src with .*dst"):
        _native.replace_file(tmp_path / "src", tmp_path / "dst")
    assert (tmp_path / "dst").read_text() == "kept"


def test_a_reader_searches_on_while_the_index_is_recreated_under_it(tmp_path: Path) -> None:
    """VecFile::create renames its files into place through replace_file."""
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((50, 16)).astype(np.float32)
    path = tmp_path / "v.cvx"
    with VectorIndex.create(path, 16, "m") as w:
        w.append(np.arange(50), rows)
    reader = VectorIndex.open(path)
    with VectorIndex.create(path, 16, "m") as w2:  # a rebuild, renamed over the reader's
        w2.append(np.arange(100, 110), rows[:10])
    ids, _ = reader.search(rows[7], 1)
    assert ids.tolist() == [7]  # the old files, still mapped
    reader.close()
    with VectorIndex.open(path) as fresh:
        assert fresh.search(rows[7], 1)[0].tolist() == [107]


def test_a_windows_sharing_refusal_of_a_replace_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On Windows a reader holding the state file open for a moment refuses the rename;
    semantic._replace tries again (only there): the real replace_file after two refusals."""
    calls: list[str] = []

    class Refusing:
        def replace_file(self, src: Path, dst: Path) -> None:
            calls.append(dst.name)
            if len(calls) <= 2:
                raise PermissionError(13, "in use by another process")
            _native.replace_file(src, dst)

    monkeypatch.setattr(semantic, "_native_files", Refusing)
    (tmp_path / "state.tmp").write_text("new")
    monkeypatch.setattr(os, "name", "nt")
    semantic._replace(tmp_path / "state.tmp", tmp_path / "state")
    monkeypatch.setattr(os, "name", "posix")
    assert (tmp_path / "state").read_text() == "new" and len(calls) == 3
    calls.clear()
    (tmp_path / "state.tmp").write_text("newer")
    with pytest.raises(StorageError, match="in use by another process"):
        semantic._replace(tmp_path / "state.tmp", tmp_path / "state")  # elsewhere: at once
    assert len(calls) == 1


class _NoPlainReads:
    """A file whose read() fails: what a plain read of the main vector file meets on
    Windows while a writer holds it (LockFileEx is mandatory there)."""

    def __init__(self, path: str, mode: str = "rb") -> None:
        assert mode == "rb", mode
        self._f = open(path, mode)  # noqa: SIM115 - closed by __exit__ / close

    def fileno(self) -> int:
        return self._f.fileno()

    def read(self, *args: object) -> bytes:
        raise AssertionError("a plain read of a vector file")

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> _NoPlainReads:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()


def test_python_reads_of_a_locked_index_go_through_mappings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VectorIndex.sample (hybrid search's score statistics past 2,048 rows) and the numpy
    and python backends read the files while another handle is the writer: only through
    mappings, which a Windows writer's lock does not refuse."""
    rng = np.random.default_rng(5)
    rows = rng.standard_normal((3000, 8)).astype(np.float32)
    path = tmp_path / "v.cvx"
    writer = VectorIndex.create(path, 8, "m")  # holds the writer lock from here on
    writer.append(np.arange(3000), rows)
    reader = VectorIndex.open(path)
    monkeypatch.setattr("cortex.vectors.open", _NoPlainReads, raising=False)
    ids, sample = reader.sample(100)
    unit = rows[ids] / np.linalg.norm(rows[ids], axis=1)[:, None]
    # rows are stored as f16: each value within 2^-11 of the unit row, relatively
    assert len(ids) == 100 and np.allclose(sample, unit, rtol=2**-11, atol=1e-7)
    for backend in ("numpy", "python"):
        found, _ = reader.search(rows[42], 1, backend=backend)
        assert found.tolist() == [42], backend
    reader.close()
    writer.close()


# ------------------------------------------------------------------ paths


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("CORTEX_HOME", "CORTEX_DB", "XDG_DATA_HOME", "LOCALAPPDATA", "CORTEX_MODEL_DIR"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_data_folder_on_windows_is_localappdata(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clean_env.setattr(sys, "platform", "win32")
    clean_env.setenv("LOCALAPPDATA", str(tmp_path / "Local"))
    clean_env.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))  # not a Windows convention
    assert paths.data_home() == tmp_path / "Local" / "cortex"
    assert paths.default_db() == tmp_path / "Local" / "cortex" / "cortex.db"
    assert default_model_dir() == tmp_path / "Local" / "cortex" / "models" / "all-MiniLM-L6-v2"
    clean_env.delenv("LOCALAPPDATA")
    assert paths.data_home() == Path.home() / "AppData" / "Local" / "cortex"
    clean_env.setenv("CORTEX_HOME", str(tmp_path / "mine"))  # the override wins everywhere
    assert paths.data_home() == tmp_path / "mine"


def test_the_data_folder_elsewhere_is_xdg(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for platform in ("linux", "darwin"):
        clean_env.setattr(sys, "platform", platform)
        clean_env.setenv("LOCALAPPDATA", str(tmp_path / "Local"))  # ignored off Windows
        assert paths.data_home() == Path.home() / ".local" / "share" / "cortex"
        clean_env.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
        assert paths.data_home() == tmp_path / "xdg" / "cortex"
        clean_env.delenv("XDG_DATA_HOME")


def test_a_windows_drive_path_is_a_path_not_a_url() -> None:
    for raw in (r"C:\Users\me\cortex.db", "C:/Users/me/cortex.db", r"\\server\share\c.db"):
        assert paths.db_location(raw) == Path(raw)


# ------------------------------------------------------------------ UTF-8 output


def _cp1252_stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="cp1252", errors="strict", write_through=True)


def test_cli_output_is_utf8_on_windows_whatever_the_code_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out, err = _cp1252_stream(), _cp1252_stream()
    err.reconfigure(errors="backslashreplace")
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(sys, "platform", "win32")
    cli.utf8_console()
    assert (out.encoding, out.errors) == ("utf-8", "strict")
    assert (err.encoding, err.errors) == ("utf-8", "backslashreplace")
    print("deploy → 東京 …")
    assert isinstance(out.buffer, io.BytesIO)
    assert out.buffer.getvalue().decode("utf-8") == "deploy → 東京 …\n"


def test_cli_output_elsewhere_is_left_as_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _cp1252_stream()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "platform", "linux")
    cli.utf8_console()  # PYTHONIOENCODING and the locale are the user's choice here
    assert out.encoding == "cp1252"


def test_the_cli_prints_any_text_on_a_windows_code_page(tmp_path: Path) -> None:
    """The whole CLI in a child whose stdout is cp1252 (as a redirected Windows console's
    is), running the Windows branch: a memory in any script comes back, as UTF-8."""
    script = textwrap.dedent(
        """
        import sys
        sys.platform = "win32"
        from cortex import cli
        sys.exit(cli.main(sys.argv[1:]))
        """
    )
    db = tmp_path / "m.db"
    env = {**os.environ, "PYTHONIOENCODING": "cp1252", "CORTEX_NO_PROGRESS": "1"}
    text = "Übergabe → 東京 ✓"

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-c", script, "--db", str(db), *args],
            capture_output=True,
            env=env,
            timeout=300,
        )

    added = run("add", text)
    assert added.returncode == 0, added.stderr.decode("utf-8", "replace")
    found = run("search", "Übergabe", "--mode", "keyword")
    assert found.returncode == 0, found.stderr.decode("utf-8", "replace")
    assert "[Übergabe] → 東京 ✓" in found.stdout.decode("utf-8")  # the match marked
    shown = run("show", "1")
    assert shown.returncode == 0, shown.stderr.decode("utf-8", "replace")
    assert text in shown.stdout.decode("utf-8")
    # The same child without the branch set by hand: on Windows the real branch, UTF-8;
    # elsewhere it fails on its first non-cp1252 character, as Windows did before (with an
    # error about the input, not the output).
    plain = subprocess.run(
        [sys.executable, "-m", "cortex.cli", "--db", str(db), "show", "1"],
        capture_output=True,
        env=env,
        timeout=300,
    )
    if sys.platform == "win32":
        assert plain.returncode == 0 and text in plain.stdout.decode("utf-8"), plain
    else:
        assert plain.returncode == 1, plain
        assert b"character maps to <undefined>" in plain.stderr
