"""Semantic search: the embedder, the stored embeddings and the derived vector index.

Embeddings live in SQLite (`embeddings`: memory id, model id, content hash, and the vector
normalised and stored as float16: `cortex.vectors.encode_stored`),
written in the same transaction as the memory they belong to. The vector index, in the
folder beside the database (``<db>-index/vectors-<model>``), is derived from them:
appended as embeddings are added, masked as memories are deleted, and rebuilt from
SQLite when it is missing, of another model, damaged, or does not match the state file
written after every sync (a killed process leaves exactly that mismatch). Writers take an
exclusive file lock to sync; searchers only read and refresh; every row a search returns
is checked against SQLite (see "the index" below).

Vectors of another model are never mixed into a search: the index of the active model
holds only its rows, and lookups by content hash are per model.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import math
import os
import re
import stat
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cortex._lazy import LazyModule
from cortex.errors import (
    CortexError,
    EmbeddingError,
    IndexFormatError,
    InvalidOptionError,
    StorageError,
)
from cortex.log import get_logger
from cortex.store import Store, content_hash

if TYPE_CHECKING:
    import numpy as np
else:  # imported when a vector is first touched (start-up of keyword-only commands)
    np = LazyModule("numpy")

__all__ = ["Semantic", "index_dir"]

_EMBED_BATCH = 64
#: A state file is a few dozen bytes; never read more than this of whatever is there.
_STATE_MAX = 4096
#: Looks a read-only process takes at an index a writer may be renaming into place.
_READ_ONLY_TRIES = 5
#: A process that keeps an index open checks it in full again after this many seconds...
RECHECK_SECONDS = 60.0
#: ... or later, so that the checks take at most this share of its time (1M rows: ~1.5 s
#: of checks every 150 s).
RECHECK_SHARE = 0.01

_log = get_logger(__name__)

# Flags of the state file's opens where the platform has them (Windows has no symlink
# following to refuse, no FIFOs, and wants O_BINARY so that no byte is translated).
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)
#: Tries of a replace that another process's open handle refuses (Windows only: a
#: reader holding the state file open for a moment, without delete sharing).
_REPLACE_TRIES = 20


def _native_files() -> Any:
    """The extension's file operations (the writer lock, replace_file): writing an
    index needs the extension anyway."""
    try:
        from cortex import _native
    except ImportError:  # pragma: no cover - only without the compiled extension
        raise CortexError(
            "writing the vector index needs the native extension cortex._native; reinstall cortex"
        ) from None
    return _native


def _replace(src: Path, dst: Path) -> None:
    """Rename `src` over `dst` (atomically; readers keep what they mapped), through the
    extension so that on Windows a mapped `dst` is moved aside first. A Windows reader
    that has `dst` open for a moment makes the rename fail: tried again a few times."""
    native = _native_files()
    for attempt in range(_REPLACE_TRIES):
        try:
            native.replace_file(src, dst)
            return
        except PermissionError as exc:
            if os.name != "nt" or attempt == _REPLACE_TRIES - 1:
                raise StorageError(
                    f"{exc} (is another process using it, or the folder read-only?); the"
                    " index is rebuilt on the next search that can"
                ) from None
            time.sleep(0.01 * (attempt + 1))


def index_dir(db_path: Path, *, create: bool = False) -> Path:
    """The one folder of files derived from the database at `db_path`: ``<name>-index``
    beside it (as SQLite's ``-wal`` and ``-shm``), holding each model's vector index. It
    is moved, deleted and rebuilt as one; deleting it loses nothing (rebuilt from SQLite).

    With `create`, the folder is made when missing, and the first time it is, the side
    files older versions kept beside the database (``<name>.vectors-*``) are deleted: the
    index is rebuilt into the folder from the embeddings in SQLite.
    """
    folder = db_path.with_name(f"{db_path.name}-index")
    if create:
        try:
            folder.mkdir()
        except FileExistsError:
            pass
        except OSError as exc:
            message = f"cannot create the index folder {folder}: {exc.strerror}"
            raise IndexFormatError(message) from None
        else:
            for old in db_path.parent.glob(f"{glob.escape(db_path.name)}.vectors-*"):
                with contextlib.suppress(OSError):
                    old.unlink()
    return folder


def _check_vectors(vecs: Any, n: int, dim: int) -> np.ndarray:
    vecs = np.asarray(vecs, dtype=np.float32)
    if vecs.ndim != 2 or vecs.shape[0] != n or vecs.shape[1] != dim:
        raise EmbeddingError(
            f"the embedder returned shape {vecs.shape} for {n} texts; expected ({n}, {dim})"
        )
    if not np.isfinite(vecs).all():
        raise EmbeddingError("the embedder returned NaN or infinite values")
    checked: np.ndarray = vecs
    return checked


def _embed_sorted(embedder: Any, texts: list[str], progress: Any = None) -> np.ndarray:
    """Vectors of `texts`, in their order, embedded in length order.

    Padding is the waste of batched inference: a batch is as wide as its longest text.
    The default embedder takes the whole list in one call and sorts it by token count
    (0.5 % padding on 10k SciFact passages, against 121 % for per-call sorting in
    chunks of 64); any other embedder gets chunks of _EMBED_BATCH texts taken in
    character-length order, a close proxy for tokens.
    """
    from cortex.embed import OnnxEmbedder

    dim = int(embedder.dim)
    if isinstance(embedder, OnnxEmbedder):
        return _check_vectors(embedder.embed_batch(texts, progress), len(texts), dim)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.empty((len(texts), dim), dtype=np.float32)
    for start in range(0, len(order), _EMBED_BATCH):
        rows = order[start : start + _EMBED_BATCH]
        out[rows] = _check_vectors(embedder.embed_batch([texts[i] for i in rows]), len(rows), dim)
        if progress is not None:
            progress(min(start + _EMBED_BATCH, len(order)), len(order))
    return out


def _read_json(path: Path) -> Any:
    """A small side file's JSON, or None if it is missing or not one cortex wrote: not a
    regular file (a directory, a FIFO, a symlink to /dev/zero: never followed, never read
    past `_STATE_MAX` bytes) or not JSON."""
    try:
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        raw = os.read(fd, _STATE_MAX + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(raw) > _STATE_MAX:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


class Semantic:
    """The embedding side of one Engine. `embedder` is an Embedder, None (semantic search
    off), or "auto" (the default model, loaded on first use; missing is not an error until
    a semantic search is asked for explicitly)."""

    def __init__(self, store: Store, embedder: Any = "auto") -> None:
        self._store = store
        self._spec = embedder
        self._embedder: Any = None if embedder == "auto" else embedder
        self._error: str | None = None if embedder is not None else "semantic search is off"
        self._loaded = embedder != "auto"
        self._lock = threading.Lock()
        self._index: Any = None
        self._index_state: tuple[int, float] | None = None
        self._lock_depth = 0  # the writer lock (`_write_lock`) is held when > 0
        self._recheck_at = 0.0  # time.monotonic() of the next full check of the index

    # ------------------------------------------------------------------ embedder

    def embedder(self) -> Any:
        """The embedder, loading the default model once; raises EmbeddingError if absent."""
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    try:
                        from cortex.embed import load_default_embedder

                        self._embedder = load_default_embedder()
                    except EmbeddingError as exc:
                        self._error = str(exc)
                    except ImportError as exc:  # numpy/onnxruntime/tokenizers missing
                        self._error = f"the embedding runtime is not installed ({exc})"
                    self._loaded = True
        if self._embedder is None:
            raise EmbeddingError(self._error or "no embedder")
        return self._embedder

    def unavailable(self) -> str | None:
        """Why semantic search cannot run, or None when it can."""
        try:
            self.embedder()
        except EmbeddingError as exc:
            return str(exc)
        return None

    @property
    def model_id(self) -> str:
        return str(self.embedder().model_id)

    @property
    def store(self) -> Store:
        return self._store

    @property
    def state(self) -> tuple[int, float] | None:
        """The SQLite position the open vector index is in step with (last embeddings
        rowid, last deletion time): what is cached about its contents is keyed by it."""
        return self._index_state

    @property
    def read_only(self) -> bool:
        return self._store.read_only

    # ------------------------------------------------------------------ writing

    def vectors_for(self, contents: Sequence[str], progress: Any = None) -> dict[str, bytes]:
        """Stored vectors (`encode_stored`) by content hash for `contents`: reused from
        SQLite when this model already embedded the same text (never a vector a caller
        supplied), embedded in batches otherwise."""
        from cortex.vectors import encode_stored

        embedder = self.embedder()
        model = str(embedder.model_id)
        hashes = {content_hash(c): c for c in contents}
        known: dict[str, bytes] = {}
        todo = list(hashes)
        for start in range(0, len(todo), 400):
            part = todo[start : start + 400]
            marks = ",".join("?" * len(part))
            # Through the index of the hashes' first 8 characters (embeddings_hash). Only
            # what the model made: a vector a caller supplied for the same text is theirs.
            for h, blob in self._store.query(
                f"SELECT content_hash, vector FROM embeddings WHERE substr(content_hash, 1, 8)"
                f" IN ({marks}) AND model_id = ? AND content_hash IN ({marks})"
                " AND supplied IS NOT 1 GROUP BY content_hash",
                [*(h[:8] for h in part), model, *part],
            ):
                known[h] = blob
        missing = [h for h in todo if h not in known]
        if missing:
            vecs = _embed_sorted(embedder, [hashes[h] for h in missing], progress)
            known.update(zip(missing, encode_stored(vecs), strict=True))
        return known

    def supplied(self, vectors: Any, n: int) -> np.ndarray:
        """Vectors a caller computed with the active model, checked (shape ``(n, dim)``,
        every value finite, no zero row), as a float32 array."""
        embedder = self.embedder()
        dim = int(embedder.dim)
        try:
            arr = np.asarray(vectors, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise InvalidOptionError(f"vectors must be an array of numbers: {exc}") from None
        if arr.ndim != 2 or arr.shape != (n, dim):
            raise InvalidOptionError(
                f"vectors has shape {arr.shape}; expected ({n}, {dim}): one row of the active"
                f" model's {dim} dimensions ({embedder.model_id}) per record"
            )
        if not np.isfinite(arr).all():
            raise InvalidOptionError("vectors holds NaN or infinite values")
        if n and not (np.abs(arr).max(axis=1) > 0).all():
            raise InvalidOptionError("vectors holds an all-zero row, which has no direction")
        checked: np.ndarray = np.ascontiguousarray(arr, dtype=np.float32)
        return checked

    def bulk_writer(self, now: float) -> Any:
        """Stores the vectors of many memories in one statement, inside the caller's
        transaction: (tx, memory ids, content hashes, rows as `supplied` returns them)."""
        from cortex.vectors import encode_stored

        embedder = self.embedder()
        model, dim = str(embedder.model_id), int(embedder.dim)

        def write(tx: Any, ids: list[int], hashes: list[str], rows: np.ndarray) -> None:
            blobs = encode_stored(rows)
            tx.executemany(
                "INSERT OR REPLACE INTO embeddings (memory_id, model_id, dim, content_hash,"
                " vector, created_at, supplied) VALUES (?, ?, ?, ?, ?, ?, 1)",
                [(i, model, dim, h, b, now) for i, h, b in zip(ids, hashes, blobs, strict=True)],
            )

        return write

    def write(
        self, tx: Any, memory_id: int, chash: str, blob: bytes, now: float, *, replace: bool = True
    ) -> None:
        """Store one embedding (as `vectors_for` returns it) inside the caller's
        transaction; with ``replace=False`` only
        when the memory has no vector of this model yet (a kept, unchanged memory)."""
        embedder = self.embedder()
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        tx.execute(
            f"{verb} INTO embeddings (memory_id, model_id, dim, content_hash, vector,"
            " created_at, supplied) VALUES (?, ?, ?, ?, ?, ?, 0)",
            (memory_id, str(embedder.model_id), int(embedder.dim), chash, blob, now),
        )

    def backlog(self) -> list[tuple[int, str]]:
        """Live memories without a vector of the active model: (id, content)."""
        return [
            (int(i), c)
            for i, c in self._store.query(
                "SELECT m.id, m.content FROM memories m WHERE m.deleted_at IS NULL AND NOT EXISTS"
                " (SELECT 1 FROM embeddings e WHERE e.memory_id = m.id AND e.model_id = ?)"
                " ORDER BY m.id",
                (self.model_id,),
            )
        ]

    # ------------------------------------------------------------------ the index
    #
    # The index is derived from the embeddings in SQLite, and SQLite decides:
    #
    # - `.state` records what the index files hold: the SQLite position they were synced to
    #   (last embeddings rowid, last deletion time), their row count and their uuid (a
    #   rebuild is a new set of files with a new uuid). A state that is missing, unreadable,
    #   not a regular file, of other files, or ahead of SQLite means a rebuild.
    # - A handle is checked once when it is opened and for every append it sees: every block
    #   checksum (rows and ids), every int8 record against its row, and its live row count
    #   against SQLite's count of live embeddings (a mask flag set or cleared by damage); a
    #   process that keeps it open checks it in full again now and then (RECHECK_SECONDS).
    #   A passed full check is recorded (`.checked`) against the files' identity; a fresh
    #   process opening the very same files trusts it (see `_checked_path`).
    # - Every row a search returns is checked against its embedding in SQLite
    #   (`verified_search`): no id or score can be wrong, whatever happened since the open.
    # - A rebuild is built aside (`<index>.tmp<pid>`) and renamed into place, side files
    #   first; a reader keeps its mapping (still valid: renamed files are not truncated)
    #   until the state names another uuid, then opens the new files. A reader that opens
    #   between two renames sees files of two uuids and tries again, under the writer lock
    #   once (a rebuild holds it until the state is written), before calling it damage.
    # - Anything inconsistent: rebuild once (writable) or IndexFormatError saying the fix.

    def index_path(self) -> Path:
        """The vector file of the active model, in the database's index folder; every
        derived path is computed from it (`_index_files`, `_state_path`, `_lock_path`,
        `_aside_path`)."""
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", self.model_id)[:60]
        digest = hashlib.sha256(self.model_id.encode()).hexdigest()[:8]
        folder = index_dir(self._store.path, create=not self._store.read_only)
        return folder / f"vectors-{slug}-{digest}"

    def _index_files(self, stem: Path | None = None) -> list[Path]:
        """The four files of an index (see vectors.py), main file last: the order a
        rebuild renames them in."""
        stem = self.index_path() if stem is None else stem
        return [Path(f"{stem}{suffix}") for suffix in (".ids", ".sum", ".q8", "")]

    def _state_path(self) -> Path:
        return Path(f"{self.index_path()}.state")

    def _lock_path(self) -> Path:
        return Path(f"{self.index_path()}.lock")

    def _aside_path(self) -> Path:
        """Where a rebuild writes the new files before renaming them into place."""
        return Path(f"{self.index_path()}.tmp{os.getpid()}")

    def _clean_litter(self) -> None:
        """Remove what interrupted rebuilds left (`<index>.tmp<pid>*`, `*.tmp<pid>` of the
        side files and the state). Called under the writer lock: no build is under way."""
        stem = self.index_path()
        litter = re.compile(r"(\.[a-z0-9]+)?\.tmp\d*(\.[a-z0-9]+)?(\.tmp\d*)?")
        try:
            entries = list(stem.parent.iterdir())
        except OSError:
            return
        for entry in entries:
            rest = entry.name[len(stem.name) :]
            if entry.name.startswith(stem.name) and litter.fullmatch(rest):
                with contextlib.suppress(OSError):
                    entry.unlink()

    @staticmethod
    def _make_room(path: Path) -> None:
        """Let a regular file be written or renamed at `path`: an empty directory, FIFO,
        socket, device or symlink there (none of which cortex makes) is removed; a
        directory with files in it is the user's to remove."""
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISREG(st.st_mode):
            return
        try:
            if stat.S_ISDIR(st.st_mode):
                os.rmdir(path)
            else:
                os.unlink(path)
        except OSError as exc:
            raise StorageError(
                f"{path} is not a regular file and cannot be removed ({exc.strerror}); cortex"
                " keeps its vector index there: remove it"
            ) from None

    @contextlib.contextmanager
    def _write_lock(self) -> Iterator[None]:
        """The writer lock of the index (an exclusive lock of `.lock`: flock on unix,
        LockFileEx on Windows, through the extension's FileLock), reentrant within this
        Semantic (its callers hold `self._lock`)."""
        if self._lock_depth:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        lock = self._open_lock()
        try:
            lock.acquire()  # waits with the GIL released
            self._lock_depth = 1
            try:
                yield
            finally:
                self._lock_depth = 0
                lock.release()
        finally:
            lock.close()

    def _open_lock(self) -> Any:
        """The lock file as a FileLock: created if missing, never through a symlink (on
        unix) and never anything but a regular file (a FIFO there does not block)."""
        native = _native_files()
        path = self._lock_path()
        for _ in range(3):
            try:
                return native.FileLock(path)
            except PermissionError as exc:
                if not path.is_dir():  # (Windows refuses to open a folder this way)
                    raise StorageError(
                        f"cannot create the vector index lock {path} ({exc}); open the"
                        " database read-only or make its folder writable"
                    ) from None
                self._make_room(path)
            except OSError:
                self._make_room(path)  # a directory, a symlink, a FIFO or a device
        raise StorageError(f"{path} cannot be used as a lock file; remove it")

    def _wanted(self) -> tuple[int, float]:
        """(last embeddings rowid, last deletion time) in SQLite now: two index lookups,
        cheap enough to run before every search. Rows of other models move the first
        too; syncing then appends nothing and only moves the state forward."""
        seq, deleted = self._store.query(  # one statement, two index lookups
            "SELECT (SELECT COALESCE(MAX(rowid), 0) FROM embeddings),"
            " (SELECT COALESCE(MAX(deleted_at), 0) FROM memories WHERE deleted_at IS NOT NULL)"
        )[0]
        return int(seq), float(deleted)

    def _read_state(self) -> _State | None:
        """The state file, or None if it is missing or not a state cortex wrote: not a
        regular file (a directory, a FIFO, a symlink to /dev/zero: never followed, never
        read past `_STATE_MAX` bytes), not JSON, or a field of the wrong type or range."""
        data = _read_json(self._state_path())
        return None if data is None else _State.parse(data)

    def _write_state(self, state: _State) -> None:
        self._write_json(self._state_path(), state.to_dict())

    def _write_json(self, path: Path, data: Any) -> None:
        """Write a small side file as JSON: aside (`<path>.tmp<pid>`), then renamed over
        `path`, never through a symlink."""
        tmp = Path(f"{path}.tmp{os.getpid()}")
        self._make_room(tmp)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_NOFOLLOW | _O_CLOEXEC | _O_BINARY
        fd = os.open(tmp, flags, 0o644)
        try:
            os.write(fd, json.dumps(data).encode())
        finally:
            os.close(fd)
        self._make_room(path)
        _replace(tmp, path)

    def index(self) -> Any:
        """The vector index of the active model, in step with SQLite (synced if not) and
        checked (see above); rebuilt when it is damaged and the database is writable."""
        wanted = self._wanted()
        if self._index is not None and self._index_state == wanted:
            if time.monotonic() < self._recheck_at:
                return self._index
            with self._lock:  # time for the periodic full check: open afresh, check all
                if self._index is not None and time.monotonic() >= self._recheck_at:
                    self._retire_index()
        with self._lock:
            self._index, self._index_state = self._checked_index(wanted)
            return self._index

    def _checked_index(self, wanted: tuple[int, float]) -> tuple[Any, tuple[int, float]]:
        try:
            return self._open_in_step(wanted)
        except IndexFormatError as exc:
            problem = exc
        if self._store.read_only:
            # A writer may be renaming a rebuild into place: look again, then give up.
            for _ in range(_READ_ONLY_TRIES):
                time.sleep(0.05)
                try:
                    return self._open_in_step(self._wanted())
                except IndexFormatError as exc:
                    problem = exc
            raise IndexFormatError(
                f"{problem}; the database is open read-only, so cortex cannot rebuild the"
                " index: open it writable once or run `cortex reindex`"
            ) from None
        with self._write_lock():
            # No sync or rebuild of another process is under way now, so what still fails
            # is damage, unless SQLite moved under the check (then it is checked again).
            for _ in range(3):
                wanted = self._wanted()
                try:
                    return self._open_in_step(wanted)
                except IndexFormatError:
                    if self._wanted() == wanted:
                        break
            self._retire_index()
            self._sync(wanted, rebuild=True)
            return self._open_in_step(wanted)

    def _open_in_step(self, wanted: tuple[int, float]) -> tuple[Any, tuple[int, float]]:
        """Sync if the state is behind `wanted`, then open (or refresh) and check the
        index the state describes. Raises IndexFormatError on any inconsistency."""
        from cortex.vectors import VectorIndex

        for _ in range(3):
            state = self._read_state()
            if state is not None and state.position == wanted:
                break
            if self._store.read_only:
                raise IndexFormatError(
                    f"the vector index of {self._store.path} is behind the database and the"
                    " database is open read-only; open it writable once or run"
                    " `cortex reindex`"
                )
            self._sync(wanted)
            wanted = self._wanted()
        else:
            raise IndexFormatError(f"{self._state_path()}: the index state does not follow")
        index, from_row = self._index, 0
        if index is not None and index.uuid == state.uuid:
            from_row = index.rows
            index.refresh()  # what another process appended
        else:
            self._retire_index()
            try:
                index = VectorIndex.open(self.index_path())
            except (IndexFormatError, StorageError) as exc:
                raise IndexFormatError(str(exc)) from None
        started = time.monotonic()
        try:
            cost = self._check(index, state, from_row)
        except BaseException:
            index.close()
            self._index = None
            raise
        if from_row == 0:
            # Damage done while this process holds a checked index cannot put a wrong row
            # into an answer (verified_search), but could hide a row until the next full
            # check: a long-lived process repeats it every RECHECK_SECONDS, or less often
            # when it is costly, so that it takes at most RECHECK_SHARE of the time.
            cost = time.monotonic() - started if cost is None else cost
            self._recheck_at = started + max(RECHECK_SECONDS, cost / RECHECK_SHARE)
        return index, wanted

    def _retire_index(self) -> None:
        """Stop handing out the open index without closing it: searches of other threads
        may be scanning it right now (closing it under them failed them with "this vector
        index is closed" once a minute under load, at the periodic check). Its mappings
        are released when the last of them lets go of it."""
        self._index = None
        self._index_state = None

    def _close_index(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None
        self._index_state = None

    def _check(self, index: Any, state: _State, from_row: int) -> float | None:
        """Is `index` the one `state` describes, intact, and in step with SQLite? Checks
        rows `from_row..` (the ones this handle has not checked): block checksums and int8
        records; then the live row count against SQLite's live embeddings. A full check
        (`from_row` 0) of files a check already passed, unchanged since (`.checked`), is
        not done again: returns the seconds that check took (None when checked now)."""
        path = index.path
        fix = "rebuild the index (`cortex reindex`)"
        if state.uuid is not None and index.uuid != state.uuid:
            raise IndexFormatError(f"{path} is not the index its state file describes; {fix}")
        if index.rows < state.rows:
            raise IndexFormatError(
                f"{path} holds {index.rows} rows, its state says {state.rows}; {fix}"
            )
        if index.model_id != self.model_id or index.dim != int(self.embedder().dim):
            raise IndexFormatError(f"{path} holds vectors of another model; {fix}")
        identity = self._identity(state) if from_row == 0 else None
        if identity is not None:
            cost = self._checked_before(identity)
            if cost is not None:
                return cost
        started = time.monotonic()
        index.verify(from_row)
        if index.rows == state.rows:  # no append since the state: counts comparable
            live, expected = len(index), self._live_embeddings(state)
            if live != expected:
                raise IndexFormatError(
                    f"{path} has {live} live rows but the database {expected} live"
                    f" embeddings of {self.model_id}; {fix}"
                )
            if identity is not None and self._identity(state) == identity:
                self._mark_checked(identity, time.monotonic() - started)
        return None

    # A passed full check is recorded in `.checked`: the state and, for each of the four
    # files, (inode, size, mtime, ctime), read before the check and again after it (a
    # write meanwhile records nothing). A process that opens files with that very identity
    # trusts the check instead of reading every row again (1M rows: ~1.3 s of a fresh
    # process's first search, benches/bench_first_search.py): any write to a file, by
    # cortex (which also moves the state) or anything else, changes its mtime and ctime,
    # and a rebuild its inode. What this cannot see is damage that leaves a file's times
    # alone (the disk's own bit rot): every row a search returns is still checked against
    # SQLite (`verified_search`), and a long-lived process still checks in full every
    # RECHECK_SECONDS or more.

    def _checked_path(self) -> Path:
        return Path(f"{self.index_path()}.checked")

    def _identity(self, state: _State) -> list[Any] | None:
        files: list[Any] = []
        for p in self._index_files():
            try:
                st = os.stat(p)
            except OSError:
                return None
            files.append([st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns])
        out: list[Any] = json.loads(json.dumps([state.to_dict(), files]))
        return out

    def _checked_before(self, identity: list[Any]) -> float | None:
        """The seconds of the full check `.checked` records for files of this identity,
        or None (no record, another identity, or not a file cortex wrote)."""
        data = _read_json(self._checked_path())
        if not isinstance(data, dict) or data.get("identity") != identity:
            return None
        cost = data.get("cost")
        if isinstance(cost, bool) or not isinstance(cost, int | float):
            return None
        return float(cost) if math.isfinite(cost) and cost >= 0 else None

    def _mark_checked(self, identity: list[Any], cost: float) -> None:
        """Record a passed full check (nothing when the store is read-only or the folder
        cannot be written: the next process checks in full)."""
        if self._store.read_only:
            return
        path = self._checked_path()
        try:
            self._write_json(path, {"identity": identity, "cost": cost})
        except (OSError, CortexError):
            with contextlib.suppress(OSError):
                Path(f"{path}.tmp{os.getpid()}").unlink()

    def _live_embeddings(self, state: _State) -> int:
        """Embeddings of the active model up to `state`'s position whose memory was not
        deleted by then: the live rows an index synced to that position holds. Counted
        as all minus deleted (deletions are few and indexed) to stay cheap at 1M."""
        (n,) = self._store.query(
            "SELECT (SELECT COUNT(*) FROM embeddings WHERE model_id = ? AND rowid <= ?)"
            # CROSS JOIN: from the few deleted memories (a partial index) to their
            # embeddings, never the other way round (a scan of every embedding, 1.2 s at 100k).
            " - (SELECT COUNT(*) FROM memories m CROSS JOIN embeddings e ON e.memory_id = m.id"
            " AND e.model_id = ? WHERE m.deleted_at IS NOT NULL AND m.deleted_at <= ?"
            " AND e.rowid <= ?)",
            (self.model_id, state.seq, self.model_id, state.deleted, state.seq),
        )[0]
        return int(n)

    def _sync(self, wanted: tuple[int, float], *, rebuild: bool = False) -> None:
        """Bring the index files up to `wanted` (under the writer lock): append and mask
        in place when the state and the files agree, else rebuild aside from SQLite."""
        from cortex.vectors import VectorIndex

        embedder = self.embedder()
        model, dim = str(embedder.model_id), int(embedder.dim)
        with self._write_lock():
            self._clean_litter()
            state = self._read_state()
            if (
                rebuild
                or state is None
                or state.seq > wanted[0]  # ahead of SQLite: rows it names are not there
                or state.deleted > wanted[1]
            ):
                _log.info(
                    "building the vector index of %s from SQLite at %s", model, self.index_path()
                )
                self._build_aside(model, dim, wanted)
                return
            try:
                writer = VectorIndex.open(self.index_path(), writable=True)
            except CortexError:  # missing, damaged, or not a file
                self._build_aside(model, dim, wanted)
                return
            if (writer.model_id, writer.dim, writer.rows, writer.uuid) != (
                model,
                dim,
                state.rows,
                state.uuid,
            ):
                writer.close()
                self._build_aside(model, dim, wanted)
                return
            try:
                self._fill(writer, model, dim, state.position, wanted)
                writer.sync()
                self._write_state(_State(*wanted, rows=writer.rows, uuid=writer.uuid))
            finally:
                writer.close()

    def _fill(
        self,
        writer: Any,
        model: str,
        dim: int,
        since: tuple[int, float],
        upto: tuple[int, float],
    ) -> None:
        """Append the embeddings of rowids in (since, upto] and mask the memories deleted
        in that span: bounded above, so the state written after says exactly what the
        files hold even while other processes write."""
        for ids, vecs in self._embedding_batches(model, dim, since[0], upto[0]):
            writer.append(ids, vecs)
        gone = [
            int(i)
            for (i,) in self._store.query(
                "SELECT id FROM memories WHERE deleted_at IS NOT NULL AND deleted_at > ?"
                " AND deleted_at <= ?",
                (since[1], upto[1]),
            )
        ]
        if gone:
            writer.mask(np.asarray(gone, dtype=np.int64))

    def _build_aside(self, model: str, dim: int, wanted: tuple[int, float]) -> None:
        """Rebuild from SQLite into new files beside the index, then rename them into
        place (side files first) and write the state. Readers keep their mappings of the
        old files; none ever sees a file truncated or half written."""
        from cortex.vectors import VectorIndex

        aside = self._aside_path()
        writer = VectorIndex.create(aside, dim, model)
        try:
            self._fill(writer, model, dim, (0, 0.0), wanted)
            writer.sync()
            done = _State(*wanted, rows=writer.rows, uuid=writer.uuid)
        finally:
            writer.close()
        for src, dst in zip(self._index_files(aside), self._index_files(), strict=True):
            self._make_room(dst)
            _replace(src, dst)
        self._write_state(done)

    def _embedding_batches(
        self, model: str, dim: int, after: int, upto: int
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        from cortex.vectors import decode_stored

        last = after
        while True:
            # `+model_id` keeps the planner on the rowid range: through the model index it
            # sorted every row of the model for each batch (quadratic: 365 s at 1M).
            rows = self._store.query(
                "SELECT rowid, memory_id, vector FROM embeddings WHERE rowid > ? AND rowid <= ?"
                " AND +model_id = ? ORDER BY rowid LIMIT 5000",
                (last, upto, model),
            )
            if not rows:
                return
            ids = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
            try:
                vecs = decode_stored([r[2] for r in rows], dim)
            except ValueError as exc:
                raise EmbeddingError(
                    f"{exc} (model {model}, {self._store.path}); run `cortex reindex`"
                ) from None
            last = int(rows[-1][0])
            yield ids, vecs

    def rebuild(self) -> int:
        """Rebuild the vector index of the active model from SQLite; returns its live rows.
        Searches of other processes go on on the old files until they see the new ones."""
        with self._lock:
            self._sync(self._wanted(), rebuild=True)
            self._index_state = None  # the next index() sees the new uuid and reopens
        return len(self.index())

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    # ------------------------------------------------------------------ verified search

    def verified_search(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """`index().search(query, k, allowed=allowed)`, with every returned row checked
        against its embedding in SQLite: the id must have a live embedding of the active
        model, appear once, and its cosine to `query` (recomputed from the SQLite blob)
        must equal the index's score to within f32 rounding. A mismatch while SQLite
        moved is a concurrent write (searched again); otherwise the index is damaged:
        rebuilt once and searched again (writable), or IndexFormatError (read-only)."""
        rebuilt = False
        for _ in range(4):
            index = self.index()
            seen = self._index_state
            ids, scores = index.search(query, k, allowed=allowed)
            problem = self._mismatch(query, ids, scores)
            if problem is None:
                return ids, scores
            if self._wanted() != seen:
                continue  # SQLite changed under the search: search again, in step
            fix = "rebuild the index (`cortex reindex`)"
            if self._store.read_only or rebuilt:
                raise IndexFormatError(f"{self.index_path()}: {problem}; {fix}")
            self.rebuild()
            rebuilt = True
        raise IndexFormatError(
            f"{self.index_path()}: the database kept changing under the search; search again"
        )

    def search_unchecked(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, Any]:
        """`index().search(query, k, allowed=allowed)` without verified_search's check of
        every row, and the SQLite position the index was in step with: for a caller that
        checks the rows it keeps with `check` (the search pipeline checks the rows of the
        page it answers, not the ~230 candidates it ranks: their embeddings, read from
        SQLite, were ~2 ms of a hybrid search at 100k). Rows the index returns twice are
        refused here already: they cannot all reach a page."""
        index = self.index()
        seen = self._index_state
        ids, scores = index.search(query, k, allowed=allowed)
        if len(np.unique(ids)) != len(ids):  # damage: verified_search repairs or refuses
            ids, scores = self.verified_search(query, k, allowed=allowed)
            seen = self._index_state
        return ids, scores, seen

    def check(
        self,
        query: np.ndarray,
        ids: np.ndarray,
        scores: np.ndarray,
        seen: Any,
        *,
        rebuilt: bool = False,
    ) -> str | None:
        """verified_search's check of rows that `search_unchecked` returned (`seen`: the
        position it returned): None when every row is right; "changed" when SQLite moved
        under the search and "rebuilt" when the index was damaged and has just been
        rebuilt (search again, in both cases). A damaged index that cannot be rebuilt
        (read-only, or `rebuilt` already in this search) raises IndexFormatError."""
        problem = self._mismatch(query, ids, scores)
        if problem is None:
            return None
        if self._wanted() != seen:
            return "changed"
        if self._store.read_only or rebuilt:
            fix = "rebuild the index (`cortex reindex`)"
            raise IndexFormatError(f"{self.index_path()}: {problem}; {fix}")
        self.rebuild()
        return "rebuilt"

    def _mismatch(self, query: np.ndarray, ids: np.ndarray, scores: np.ndarray) -> str | None:
        """What is wrong with these results against SQLite, or None (see verified_search).
        One query for the k blobs and k dot products: ~0.1 ms for k = 50."""
        if len(ids) == 0:
            return None
        id_list = [int(i) for i in ids.tolist()]
        if len(set(id_list)) != len(id_list):
            return "a memory is returned twice (a masked row is live again)"
        marks = ",".join("?" * len(id_list))
        blobs = dict(
            self._store.query(
                f"SELECT memory_id, vector FROM embeddings WHERE model_id = ?"
                f" AND memory_id IN ({marks})",
                [self.model_id, *id_list],
            )
        )
        from cortex.vectors import decode_stored, stored_dim

        dim = query.shape[0]
        for i in id_list:
            if not stored_dim(blobs.get(i), dim):
                return f"memory {i} has no embedding of {self.model_id} of dimension {dim}"
        mat = decode_stored([blobs[i] for i in id_list], dim).astype(np.float64)
        q = query.astype(np.float64)
        with np.errstate(all="ignore"):
            # The index scores the stored row as it is (unit to within f16 rounding),
            # not divided by its length: so does this check.
            exact = (mat @ q) / math.sqrt(float(q @ q))
        got = scores.astype(np.float64)
        bad = ~(np.abs(exact - got) <= _score_tolerance(dim))
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            return (
                f"memory {id_list[j]} scored {got[j]:.6f}, its embedding {exact[j]:.6f}"
                " (a damaged row or id)"
            )
        return None


def _score_tolerance(dim: int) -> float:
    """How far an index score may be from the f64 inner product of the SQLite row and the
    unit query: the f32 dot product of (near-)unit vectors is within dim * 2^-24 of the
    real value (quant.rs, `margin`), plus the rounding of normalising the query to f32
    (the row is the stored f16, widened exactly); doubled for room."""
    return 2.0 * (dim + 8) * 2.0**-24


@dataclass(frozen=True, slots=True)
class _State:
    """What the index files hold (see Semantic, "the index")."""

    seq: int
    deleted: float
    rows: int
    uuid: str | None  # None: a state written before the uuid was recorded (read as is)

    @property
    def position(self) -> tuple[int, float]:
        return self.seq, self.deleted

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "deleted": self.deleted, "rows": self.rows, "uuid": self.uuid}

    @classmethod
    def parse(cls, data: object) -> _State | None:
        if not isinstance(data, dict):
            return None
        seq, deleted, rows, uuid = (data.get(k) for k in ("seq", "deleted", "rows", "uuid"))
        if not (type(seq) is int and type(rows) is int and 0 <= seq < 2**63 and 0 <= rows < 2**63):
            return None
        if not isinstance(deleted, int | float) or isinstance(deleted, bool):
            return None
        if not (math.isfinite(deleted) and deleted >= 0):
            return None
        if uuid is not None and not (isinstance(uuid, str) and re.fullmatch(r"[0-9a-f]{32}", uuid)):
            return None
        return cls(seq, float(deleted), rows, uuid)
