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
import itertools
import json
import math
import os
import re
import stat
import threading
import time
import warnings
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
    VectorsLostWarning,
)
from cortex.log import get_logger
from cortex.store import Store, content_hash

if TYPE_CHECKING:
    import numpy as np
else:  # imported when a vector is first touched (start-up of keyword-only commands)
    np = LazyModule("numpy")

__all__ = [
    "Semantic",
    "append_vectors",
    "index_dir",
    "read_vectors",
    "row_checksums",
    "vectors_dir",
]

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


def _beside(db_path: Path, suffix: str, *, create: bool) -> tuple[Path, bool]:
    """The folder ``<name><suffix>`` beside the database, and whether this call made it
    (with `create`; IndexFormatError when it cannot)."""
    folder = db_path.with_name(f"{db_path.name}{suffix}")
    if not create:
        return folder, False
    try:
        folder.mkdir()
    except FileExistsError:
        return folder, False
    except OSError as exc:
        raise IndexFormatError(f"cannot create the folder {folder}: {exc.strerror}") from None
    return folder, True


def _drop_old_side_files(db_path: Path) -> None:
    """Delete the side files older versions kept beside the database (``<name>.vectors-*``)."""
    for old in db_path.parent.glob(f"{glob.escape(db_path.name)}.vectors-*"):
        with contextlib.suppress(OSError):
            old.unlink()


def vectors_dir(db_path: Path, *, create: bool = False) -> Path:
    """The folder of the database's vectors: ``<name>-vectors`` beside it. Not a cache:
    it holds the one copy of every vector (SQLite holds their checksums); a backup
    copies it with the database (README, "Backups")."""
    folder, made = _beside(db_path, "-vectors", create=create)
    if made:  # the first time: what older versions derived from vectors in SQLite goes
        _drop_old_side_files(db_path)
        index = index_dir(db_path)
        for path in index.glob("vectors-*") if index.is_dir() else ():
            with contextlib.suppress(OSError):
                path.unlink()
    return folder


def index_dir(db_path: Path, *, create: bool = False) -> Path:
    """The one folder of files derived from the database at `db_path`: ``<name>-index``
    beside it (as SQLite's ``-wal`` and ``-shm``), holding the saved keyword index. It is
    moved, deleted and rebuilt as one; deleting it loses nothing (rebuilt from SQLite).

    With `create`, the folder is made when missing, and the first time it is, the side
    files older versions kept beside the database (``<name>.vectors-*``) are deleted.
    """
    folder, made = _beside(db_path, "-index", create=create)
    if made:
        _drop_old_side_files(db_path)
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
        self._index_state: tuple[int, float, int, int] | None = None
        # The writer lock (`_write_lock`) is held by this thread when its depth is > 0:
        # writes take it without `self._lock`, so the count is per thread.
        self._held = threading.local()
        self._recheck_at = 0.0  # time.monotonic() of the next full check of the index
        self._rows_of: tuple[Any, int, np.ndarray, np.ndarray] | None = None  # `_rows_for`

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
    def state(self) -> tuple[int, float, int, int] | None:
        """The SQLite position the open vector index is in step with (see `_wanted`):
        what is cached about its contents is keyed by it."""
        return self._index_state

    @property
    def read_only(self) -> bool:
        return self._store.read_only

    # ------------------------------------------------------------------ writing

    def vectors_for(
        self, contents: Sequence[str], progress: Any = None, *, reuse: bool = True
    ) -> dict[str, bytes]:
        """Stored vectors (`encode_stored`) by content hash for `contents`: reused from
        the vector file when this model already embedded the same text (never a vector a
        caller supplied; only a row whose checksum matches SQLite's), embedded in batches
        otherwise (all of them without `reuse`)."""
        from cortex.vectors import encode_stored

        embedder = self.embedder()
        model = str(embedder.model_id)
        hashes = {content_hash(c): c for c in contents}
        todo = list(hashes)
        owner: dict[int, str] = {}
        for start in range(0, len(todo) if reuse else 0, 400):
            part = todo[start : start + 400]
            marks = ",".join("?" * len(part))
            # Through the index of the hashes' first 8 characters (embeddings_hash). Only
            # what the model made: a vector a caller supplied for the same text is theirs.
            for h, memory_id in self._store.query(
                f"SELECT content_hash, MAX(memory_id) FROM embeddings"
                f" WHERE substr(content_hash, 1, 8) IN ({marks}) AND model_id = ?"
                f" AND content_hash IN ({marks}) AND supplied IS NOT 1 GROUP BY content_hash",
                [*(h[:8] for h in part), model, *part],
            ):
                owner[int(memory_id)] = h
        known: dict[str, bytes] = {}
        if owner:
            with contextlib.suppress(CortexError):  # no usable file: embed them again
                found = self.stored_rows(np.fromiter(owner, dtype=np.int64, count=len(owner)))
                for memory_id, row in found.items():
                    known[owner[memory_id]] = row.tobytes()
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
        """Stores the vectors of many memories inside the caller's transaction: (tx,
        memory ids, content hashes, rows as `supplied` returns them). The rows go to the
        vector file just before the transaction commits (see "the vector file")."""

        embedder = self.embedder()
        model, dim = str(embedder.model_id), int(embedder.dim)

        def write(tx: Any, ids: list[int], hashes: list[str], rows: np.ndarray) -> None:
            half = _stored_array(rows)
            sums = row_checksums(half).tolist()
            # One statement over the rows as a JSON array, in order, instead of one
            # statement a row (executemany: OR REPLACE and the foreign key gave each its
            # own statement journal): the same rows, 100k of them in 5,000-row batches
            # 0.72 -> 0.33 CPU-s (BENCHMARKS.md, "third pass").
            tx.execute(
                "INSERT OR REPLACE INTO embeddings (memory_id, model_id, dim, content_hash,"
                " checksum, created_at, supplied) SELECT json_extract(value, '$[0]'), ?, ?,"
                " json_extract(value, '$[1]'), json_extract(value, '$[2]'), ?, 1"
                " FROM json_each(?) ORDER BY key",
                (model, dim, now, json.dumps(list(zip(ids, hashes, sums, strict=True)))),
            )
            self._pending(model, dim).add(ids, half, sums)

        return write

    def write(
        self, tx: Any, memory_id: int, chash: str, blob: bytes, now: float, *, replace: bool = True
    ) -> None:
        """Store one embedding made by the model (as `vectors_for` returns it) inside the
        caller's transaction; with ``replace=False`` only when the memory has no vector of
        this model yet (a kept, unchanged memory). Its checksum is 0 (none) until the
        append before the commit sets it with those of the other rows the transaction
        wrote (`_append`): one numpy pass, not one per row (10k rows: 0.11 CPU-s)."""
        embedder = self.embedder()
        model, dim = str(embedder.model_id), int(embedder.dim)
        half = _as_stored([blob], dim)
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        cur = tx.execute(
            f"{verb} INTO embeddings (memory_id, model_id, dim, content_hash, checksum,"
            " created_at, supplied) VALUES (?, ?, ?, ?, 0, ?, 0)",
            (memory_id, model, dim, chash, now),
        )
        if cur.rowcount:
            self._pending(model, dim).add([memory_id], half)

    def _pending(self, model: str, dim: int) -> _Pending:
        pending: _Pending = self._store.pending(
            f"vectors:{model}", lambda: _Pending(self, model, dim)
        )
        return pending

    def backlog(self) -> list[tuple[int, str]]:
        """Live memories without a vector of the active model: (id, content). Memories
        whose supplied vector was lost (`lost`) are not in it: the model would give them
        another vector than the one their caller chose."""
        return [
            (int(i), c)
            for i, c in self._store.query(
                "SELECT m.id, m.content FROM memories m WHERE m.deleted_at IS NULL AND NOT EXISTS"
                " (SELECT 1 FROM embeddings e WHERE e.memory_id = m.id AND e.model_id = ?)"
                " AND NOT EXISTS (SELECT 1 FROM vectors_lost l WHERE l.memory_id = m.id"
                " AND l.model_id = ?) ORDER BY m.id",
                (self.model_id, self.model_id),
            )
        ]

    # ------------------------------------------------------------------ the vector file
    #
    # The vector file is the one copy of every vector (the source of truth), and SQLite
    # decides what of it counts:
    #
    # - Per model, `meta` holds ``vectors:<model>`` = {"gen": g, "rows": n}: the file
    #   ``<db>-vectors/<model>.<g>.vectors`` (a VectorIndex: rows, id map, checksums and
    #   int8 copy) and how many of its rows are committed. Each `embeddings` row holds the
    #   checksum of its memory's stored row (`row_checksums`) and whether it was supplied.
    # - Writing: rows are appended to the file and synced (fdatasync) inside the SQLite
    #   transaction, just before it commits (`Store.pending`), and the transaction moves
    #   ``rows`` forward. A crash between the two leaves rows past ``rows``: readers never
    #   see them (they open the file capped at ``rows``) and the next writer, which holds
    #   SQLite's write lock, takes them back. Lock order: SQLite's, then the file's.
    # - Reading: every process checks a file it opens (block checksums, int8 records, the
    #   live row count and every live row's checksum against SQLite), and every row a
    #   search returns (its checksum and its score, `verified_search`); a long-lived
    #   process checks in full again every RECHECK_SECONDS or more.
    # - Deletions are masked lazily (the `.state` file says up to which deletion time).
    # - Anything inconsistent: `rebuild` (writable) compacts the file into a new
    #   generation, copying every row whose checksum matches SQLite, and switches ``gen``
    #   in the same transaction (atomic); rows it cannot find are lost: the model's are
    #   embedded again, supplied ones are reported (`lost`, VectorsLostWarning, `stats`)
    #   and their memories stay findable by keyword. Read-only: IndexFormatError.

    def _stem(self) -> Path:
        folder = vectors_dir(self._store.path, create=not self._store.read_only)
        return _stem_of(folder, self.model_id)

    def _gen_path(self, gen: int) -> Path:
        return Path(f"{self._stem()}.{gen}.vectors")

    def index_path(self) -> Path:
        """The vector file of the active model in use now (see "the vector file")."""
        return self._gen_path(self._wanted()[2])

    def _index_files(self, stem: Path | None = None) -> list[Path]:
        """The four files of a vector file (see vectors.py), main file last."""
        stem = self.index_path() if stem is None else stem
        return [Path(f"{stem}{suffix}") for suffix in (".ids", ".sum", ".q8", "")]

    def _state_path(self, gen: int | None = None) -> Path:
        return Path(f"{self._gen_path(self._wanted()[2] if gen is None else gen)}.state")

    def _lock_path(self) -> Path:
        return Path(f"{self._stem()}.lock")

    def _clean_litter(self, keep: int, *, others: bool = True) -> None:
        """Remove the files of other generations than `keep` (older ones a compaction
        replaced, newer ones an interrupted compaction or append left) and temporary
        files. Called with SQLite's write lock and the writer lock held, `keep` read
        under them: no other process is making a generation."""
        stem = self._stem()
        mine = re.compile(r"\.(\d+)\.vectors(\..*)?")
        try:
            entries = list(stem.parent.iterdir())
        except OSError:
            return
        for entry in entries:
            if not entry.name.startswith(stem.name):
                continue
            rest = entry.name[len(stem.name) :]
            m = mine.fullmatch(rest)
            if m is not None and ((others and int(m.group(1)) != keep) or ".tmp" in rest):
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
                " keeps its vector file there: remove it"
            ) from None

    @contextlib.contextmanager
    def _write_lock(self) -> Iterator[None]:
        """The writer lock of the vector file (an exclusive lock of `.lock`: flock on
        unix, LockFileEx on Windows, through the extension's FileLock, taken on a handle
        of its own: it excludes the other threads of this process too), reentrant within
        a thread."""
        depth = getattr(self._held, "depth", 0)
        if depth:
            self._held.depth = depth + 1
            try:
                yield
            finally:
                self._held.depth = depth
            return
        lock = self._open_lock()
        try:
            lock.acquire()  # waits with the GIL released
            self._held.depth = 1
            try:
                yield
            finally:
                self._held.depth = 0
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
                        f"cannot create the vector file lock {path} ({exc}); open the"
                        " database read-only or make its folder writable"
                    ) from None
                self._make_room(path)
            except OSError:
                self._make_room(path)  # a directory, a symlink, a FIFO or a device
        raise StorageError(f"{path} cannot be used as a lock file; remove it")

    def _wanted(self) -> tuple[int, float, int, int]:
        """(last embeddings rowid, last deletion time, generation, committed rows) in
        SQLite now: one statement, cheap enough to run before every search."""
        seq, deleted, meta = self._store.query(
            "SELECT (SELECT COALESCE(MAX(rowid), 0) FROM embeddings),"
            " (SELECT COALESCE(MAX(deleted_at), 0) FROM memories WHERE deleted_at IS NOT NULL),"
            " (SELECT value FROM meta WHERE key = ?)",
            (_meta_key(self.model_id),),
        )[0]
        gen, rows = _parse_meta(meta)
        return int(seq), float(deleted), gen, rows

    def _append(
        self,
        tx: Any,
        model: str,
        dim: int,
        ids: np.ndarray,
        half: np.ndarray,
        held: np.ndarray | None = None,
    ) -> None:
        """Append rows to the vector file and sync them, inside `tx` (SQLite's write lock
        is held), set each memory's checksum in `embeddings` to its row's as stored where
        it holds another (`held`: the checksums it holds, 0 for none yet; None: those of
        `half`), then count them in `meta`: the commit that follows makes them part of
        the database. Rows past the committed count (a writer that died before its
        commit) are taken back first."""
        from cortex.vectors import VectorIndex

        gen, rows = _read_meta(tx, model)
        with self._write_lock():
            writer = None
            if gen:
                try:
                    writer = VectorIndex.open(self._gen_path(gen), writable=True, upto=rows)
                except CortexError as exc:
                    # Missing or damaged: a new generation takes the new rows; the rows
                    # SQLite counted in the old one (kept) are recovered from it or
                    # reported by the next check (`rebuild` reads every generation).
                    _log.warning("vector file of %s unusable (%s); starting another", model, exc)
            if writer is None:
                gen = self._next_gen(gen)
                path = self._gen_path(gen)
                self._make_room(path)
                writer = VectorIndex.create(path, dim, model)
            try:
                sums = _append_stored(writer, ids, half, held)
                writer.sync()
                rows = writer.rows
            finally:
                writer.close()
            self._clean_litter(gen, others=False)
        if held is None:
            held = row_checksums(half)
        change = np.flatnonzero(sums != held)
        tx.executemany(
            "UPDATE embeddings SET checksum = ? WHERE memory_id = ? AND model_id = ?",
            zip(sums[change].tolist(), ids[change].tolist(), itertools.repeat(model)),
        )
        _write_meta(tx, model, gen, rows)
        lost = tx.execute("SELECT 1 FROM vectors_lost LIMIT 1").fetchone()
        if lost is not None:  # a vector given again: no longer lost
            tx.executemany(
                "DELETE FROM vectors_lost WHERE memory_id = ? AND model_id = ?",
                [(int(i), model) for i in ids.tolist()],
            )

    def _generations(self) -> list[int]:
        """The generations whose main file is present."""
        stem = self._stem()
        found: list[int] = []
        with contextlib.suppress(OSError):
            for entry in stem.parent.iterdir():
                m = re.fullmatch(re.escape(stem.name) + r"\.(\d+)\.vectors", entry.name)
                if m is not None:
                    found.append(int(m.group(1)))
        return found

    def _next_gen(self, gen: int) -> int:
        """A generation number above `gen` and above any file of this model present."""
        return _next_gen_of(self._stem(), gen)

    def _read_state(self, gen: int) -> _State | None:
        """The state file of generation `gen`, or None if it is missing or not a state
        cortex wrote (not a regular file, not JSON, a field of the wrong type or range)."""
        data = _read_json(self._state_path(gen))
        state = None if data is None else _State.parse(data)
        return state if state is not None and state.gen == gen else None

    def _write_state(self, state: _State) -> None:
        self._write_json(self._state_path(state.gen), state.to_dict())

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
        """The vector index of the active model, in step with SQLite and checked (see
        above); compacted and repaired when it is damaged and the database is writable."""
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

    def _checked_index(self, wanted: tuple[int, float, int, int]) -> tuple[Any, Any]:
        problem: IndexFormatError | None = None
        for attempt in range(_READ_ONLY_TRIES):
            try:
                return self._open_in_step(wanted)
            except IndexFormatError as exc:
                problem = exc
            now = self._wanted()
            if now == wanted and not self._store.read_only:
                break  # the same database, the same failure: damage
            if now == wanted and attempt:
                time.sleep(0.05)
            wanted = now
        if self._store.read_only:
            raise IndexFormatError(
                f"{problem}; the database is open read-only, so cortex cannot repair the"
                " vector file: open it writable once or run `cortex reindex`"
            ) from None
        _log.warning("vector file of %s: %s; compacting and repairing it", self.model_id, problem)
        self._retire_index()
        self._repair(failed_gen=wanted[2])
        return self._open_in_step(self._wanted())

    def _open_in_step(self, wanted: tuple[int, float, int, int]) -> tuple[Any, Any]:
        """Mask what was deleted since the state, then open (or refresh) and check the
        file SQLite names, capped at its committed rows. Raises IndexFormatError on any
        inconsistency."""
        from cortex.vectors import VectorIndex

        _, deleted, gen, rows = wanted
        if gen == 0:
            if self._live_embeddings(wanted):
                raise IndexFormatError(
                    f"the database has vectors of {self.model_id} but names no vector file"
                )
            if self._store.read_only:
                raise IndexFormatError(
                    f"{self._store.path} has no vector file of {self.model_id} yet"
                )
            dim = int(self.embedder().dim)
            with self._store.transaction() as tx:  # an empty file, so that searches run
                self._append(
                    tx, self.model_id, dim, np.zeros(0, np.int64), np.zeros((0, dim), "<f2")
                )
            wanted = self._wanted()
            _, deleted, gen, rows = wanted
            if gen == 0:
                raise IndexFormatError(f"no vector file of {self.model_id} could be made")
        state = self._read_state(gen)
        if state is None or state.deleted < deleted:
            if self._store.read_only:
                raise IndexFormatError(
                    f"the vector file of {self._store.path} is behind the database and the"
                    " database is open read-only; open it writable once or run"
                    " `cortex reindex`"
                )
            self._mask_deleted(gen, state, deleted)
            state = self._read_state(gen)
            if state is None:
                raise IndexFormatError(f"{self._state_path(gen)}: the state does not follow")
        path = self._gen_path(gen)
        index, from_row = self._index, 0
        if index is not None and index.path == str(path) and index.uuid == state.uuid:
            from_row = index.rows
            try:
                index.refresh(rows)
            except (CortexError, OSError) as exc:
                raise IndexFormatError(str(exc)) from None
        else:
            self._retire_index()
            try:
                index = VectorIndex.open(path, upto=rows)
            except (CortexError, OSError) as exc:  # damaged, or a compaction removed it
                raise IndexFormatError(str(exc)) from None
        started = time.monotonic()
        try:
            cost = self._check(index, state, wanted, from_row)
        except (CortexError, OSError, ValueError) as exc:
            index.close()
            self._index = None
            if isinstance(exc, IndexFormatError):
                raise
            raise IndexFormatError(f"{path}: {exc}") from None
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

    def _mask_deleted(self, gen: int, state: _State | None, deleted: float) -> None:
        """Mask the rows of memories deleted after `state` (all deleted ones without a
        state) up to `deleted`, and write the state (under the writer lock)."""
        from cortex.vectors import VectorIndex

        with self._write_lock():
            again = self._read_state(gen)
            if again is not None and again.deleted >= deleted:
                return
            try:
                writer = VectorIndex.open(self._gen_path(gen), writable=True)
            except CortexError as exc:
                raise IndexFormatError(str(exc)) from None
            try:
                if state is not None and state.uuid != writer.uuid:
                    state = None
                since = -1.0 if state is None else state.deleted
                gone = [
                    int(i)
                    for (i,) in self._store.query(
                        "SELECT id FROM memories WHERE deleted_at IS NOT NULL AND deleted_at > ?"
                        " AND deleted_at <= ?",
                        (since, deleted),
                    )
                ]
                if gone:
                    writer.mask(np.asarray(gone, dtype=np.int64))
                    writer.sync()
                uuid = writer.uuid
            finally:
                writer.close()
            self._write_state(_State(gen, deleted, uuid))

    def _retire_index(self) -> None:
        """Stop handing out the open index without closing it: searches of other threads
        may be scanning it right now (closing it under them failed them with "this vector
        index is closed" once a minute under load, at the periodic check). Its mappings
        are released when the last of them lets go of it."""
        self._index = None
        self._index_state = None
        self._rows_of = None

    def _close_index(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None
        self._index_state = None
        self._rows_of = None

    def _check(
        self, index: Any, state: _State, wanted: tuple[int, float, int, int], from_row: int
    ) -> float | None:
        """Is `index` the file `state` describes, intact, and in step with SQLite? Checks
        rows `from_row..` (the ones this handle has not checked): block checksums, int8
        records and each live row's checksum against SQLite's; then the live row count
        against SQLite's live embeddings. A full check (`from_row` 0) of files a check
        already passed, unchanged since (`.checked`), is not done again: returns the
        seconds that check took (None when checked now)."""
        path = index.path
        fix = "repair it (`cortex reindex`)"
        if index.uuid != state.uuid:
            raise IndexFormatError(f"{path} is not the file its state describes; {fix}")
        if index.model_id != self.model_id or index.dim != int(self.embedder().dim):
            raise IndexFormatError(f"{path} holds vectors of another model; {fix}")
        identity = self._identity(state, wanted) if from_row == 0 else None
        if identity is not None:
            cost = self._checked_before(identity)
            if cost is not None:
                return cost
        started = time.monotonic()
        index.verify(from_row)
        problem = self._rows_mismatch(index, from_row)
        if problem is not None:
            raise IndexFormatError(f"{path}: {problem}; {fix}")
        live, expected = len(index), self._live_embeddings(wanted)
        if live != expected:
            raise IndexFormatError(
                f"{path} has {live} live rows but the database {expected} live"
                f" embeddings of {self.model_id}; {fix}"
            )
        if identity is not None and self._identity(state, wanted) == identity:
            self._mark_checked(identity, time.monotonic() - started)
        return None

    def _rows_mismatch(self, index: Any, from_row: int) -> str | None:
        """The first live row from `from_row` on whose checksum is not its memory's in
        SQLite, or None."""
        ids, live = index.ids_and_live()
        rows = np.flatnonzero(live[from_row:]) + from_row
        if len(rows) == 0:
            return None
        want = self._checksums_of(ids[rows])
        for start in range(0, len(rows), _CHECK_BATCH):
            part = rows[start : start + _CHECK_BATCH]
            got = row_checksums(index.stored(part))
            bad = got != want[start : start + _CHECK_BATCH]
            if bad.any():
                j = int(np.flatnonzero(bad)[0])
                return (
                    f"the row of memory {int(ids[part[j]])} (row {int(part[j])}) does not match"
                    " the checksum the database holds for it"
                )
        return None

    def _checksums_of(self, ids: np.ndarray) -> np.ndarray:
        """SQLite's checksum of each memory in `ids` (0 where it has none), in order."""
        model = self.model_id
        out = np.zeros(len(ids), dtype=np.int64)
        if len(ids) > _CHECK_BATCH:  # many: one scan of the model's rows
            got = self._store.query(
                "SELECT memory_id, checksum FROM embeddings WHERE model_id = ?", (model,)
            )
            if got:
                table = np.array(got, dtype=np.int64)
                order = np.argsort(table[:, 0], kind="stable")
                keys, sums = table[order, 0], table[order, 1]
                at = np.searchsorted(keys, ids)
                at = np.minimum(at, len(keys) - 1)
                hit = keys[at] == ids
                out[hit] = sums[at[hit]]
            return out
        id_list = [int(i) for i in ids.tolist()]
        marks = ",".join("?" * len(id_list))
        known = dict(
            self._store.query(
                f"SELECT memory_id, checksum FROM embeddings WHERE model_id = ?"
                f" AND memory_id IN ({marks})",
                [model, *id_list],
            )
        )
        for j, i in enumerate(id_list):
            out[j] = int(known.get(i, 0))
        return out

    # A passed full check is recorded in `.checked`: the SQLite position and, for each of
    # the four files, (inode, size, mtime, ctime), read before the check and again after it
    # (a write meanwhile records nothing). A process that opens files with that very
    # identity trusts the check instead of reading every row again: any write to a file,
    # by cortex or anything else, changes its mtime and ctime. What this cannot see is
    # damage that leaves a file's times alone (the disk's own bit rot): every row a search
    # returns is still checked against SQLite (`verified_search`), and a long-lived
    # process still checks in full every RECHECK_SECONDS or more.

    def _checked_path(self, gen: int) -> Path:
        return Path(f"{self._gen_path(gen)}.checked")

    def _identity(self, state: _State, wanted: tuple[int, float, int, int]) -> list[Any] | None:
        files: list[Any] = []
        for p in self._index_files(self._gen_path(state.gen)):
            try:
                st = os.stat(p)
            except OSError:
                return None
            files.append([st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns])
        out: list[Any] = json.loads(json.dumps([state.to_dict(), list(wanted), files]))
        return out

    def _checked_before(self, identity: list[Any]) -> float | None:
        """The seconds of the full check `.checked` records for files of this identity,
        or None (no record, another identity, or not a file cortex wrote)."""
        data = _read_json(self._checked_path(int(identity[0]["gen"])))
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
        path = self._checked_path(int(identity[0]["gen"]))
        try:
            self._write_json(path, {"identity": identity, "cost": cost})
        except (OSError, CortexError):
            with contextlib.suppress(OSError):
                Path(f"{path}.tmp{os.getpid()}").unlink()

    def _live_embeddings(self, wanted: tuple[int, float, int, int]) -> int:
        """Embeddings of the active model up to `wanted`'s position whose memory was not
        deleted by then: the live rows a file in step with it holds. Counted as all minus
        deleted (deletions are few and indexed) to stay cheap at 1M."""
        seq, deleted = wanted[0], wanted[1]
        (n,) = self._store.query(
            "SELECT (SELECT COUNT(*) FROM embeddings WHERE model_id = ? AND rowid <= ?)"
            # CROSS JOIN: from the few deleted memories (a partial index) to their
            # embeddings, never the other way round (a scan of every embedding, 1.2 s at 100k).
            " - (SELECT COUNT(*) FROM memories m CROSS JOIN embeddings e ON e.memory_id = m.id"
            " AND e.model_id = ? WHERE m.deleted_at IS NOT NULL AND m.deleted_at <= ?"
            " AND e.rowid <= ?)",
            (self.model_id, seq, self.model_id, deleted, seq),
        )[0]
        return int(n)

    def _repair(self, failed_gen: int | None = None) -> None:
        """Compact the vector file into a new generation (see "the vector file"), then
        embed again what the model made and was lost, and report what was supplied and
        lost. `failed_gen`: the generation found damaged (nothing is done when another
        process has repaired it meanwhile)."""
        lost_supplied, lost_made = self._compact(failed_gen)
        if lost_supplied:
            warnings.warn(
                VectorsLostWarning(
                    f"{lost_supplied} vector(s) of {self.model_id} that callers supplied were"
                    f" lost with a damaged or missing vector file of {self._store.path}:"
                    " those memories are found by keyword only until their vectors are given"
                    " again (`Engine.stats()['vectors_lost']`)"
                ),
                stacklevel=3,
            )
        if lost_made:
            self._embed_backlog()

    def _embed_backlog(self) -> int:
        """Embed the live memories without a vector of the active model (the model's
        vectors lost with a damaged file); returns how many."""
        backlog = self.backlog()
        for start in range(0, len(backlog), 4096):
            part = backlog[start : start + 4096]
            vectors = self.vectors_for([c for _, c in part], reuse=False)
            now = time.time()
            with self._store.transaction() as tx:
                for memory_id, text in part:
                    chash = content_hash(text)
                    self.write(tx, memory_id, chash, vectors[chash], now)
        return len(backlog)

    def _compact(self, failed_gen: int | None) -> tuple[int, int]:
        """Copy every row whose checksum matches its memory's in SQLite into a new
        generation and switch to it in one transaction; returns (supplied vectors lost,
        model vectors lost), whose `embeddings` rows are removed."""
        from cortex.vectors import VectorIndex

        embedder = self.embedder()
        model, dim = str(embedder.model_id), int(embedder.dim)
        with self._store.transaction() as tx, self._write_lock():
            gen, _ = _read_meta(tx, model)
            if failed_gen is not None and gen != failed_gen:
                return 0, 0  # another process repaired it meanwhile
            # Rows are found by their checksum, in every generation present (the one in
            # use last: a writer that found it unusable started another and kept it).
            gens = sorted(self._generations(), key=lambda g: (g == gen, g))
            parts = [_salvage(self._gen_path(g), dim) for g in gens]
            old = np.concatenate(parts) if parts else np.zeros((0, dim), "<f2")
            del parts
            where: dict[int, int] = {}
            for start in range(0, len(old), _CHECK_BATCH):
                sums = row_checksums(np.asarray(old[start : start + _CHECK_BATCH]))
                for j, c in enumerate(sums.tolist()):
                    where[c] = start + j
            found = tx.execute(
                "SELECT e.memory_id, e.checksum, e.supplied, m.deleted_at IS NOT NULL"
                " FROM embeddings e LEFT JOIN memories m ON m.id = e.memory_id"
                " WHERE e.model_id = ? ORDER BY e.memory_id",
                (model,),
            ).fetchall()
            new = self._next_gen(gen)
            path = self._gen_path(new)
            self._make_room(path)
            writer = VectorIndex.create(path, dim, model)
            lost: list[tuple[int, Any]] = []
            gone: list[int] = []
            keep = [(int(m), where[int(c)]) for m, c, _, _ in found if int(c) in where]
            written: list[int] = []  # checksums of the rows as written
            try:
                for start in range(0, len(keep), 4096):
                    part = keep[start : start + 4096]
                    ids = np.fromiter((m for m, _ in part), dtype=np.int64, count=len(part))
                    written += _append_stored(writer, ids, old[[r for _, r in part]]).tolist()
                lost = [(int(m), s) for m, c, s, _ in found if int(c) not in where]
                gone = [int(m) for m, c, _, dead in found if dead and int(c) in where]
                if gone:
                    writer.mask(np.asarray(gone, dtype=np.int64))
                writer.sync()
                rows_now, uuid = writer.rows, writer.uuid
            finally:
                writer.close()
            kept = [m for m, _ in keep]
            if _reread(path, rows_now, kept, written) is not None:
                raise StorageError(f"{path}: a row did not survive the copy")
            # Normalised again on the way in (a few dimensions only): SQLite then holds
            # the checksum of the row as written.
            want = {int(m): int(c) for m, c, _, _ in found}
            tx.executemany(
                "UPDATE embeddings SET checksum = ? WHERE memory_id = ? AND model_id = ?",
                [(c, m, model) for m, c in zip(kept, written, strict=True) if c != want[m]],
            )
            now = time.time()
            if lost:
                tx.executemany(
                    "DELETE FROM embeddings WHERE memory_id = ? AND model_id = ?",
                    [(m, model) for m, _ in lost],
                )
                tx.executemany(
                    "INSERT OR REPLACE INTO vectors_lost (memory_id, model_id, lost_at)"
                    " VALUES (?, ?, ?)",
                    [(m, model, now) for m, s in lost if s != 0],
                )
            _write_meta(tx, model, new, rows_now)
            (deleted,) = tx.execute(
                "SELECT COALESCE(MAX(deleted_at), 0) FROM memories WHERE deleted_at IS NOT NULL"
            ).fetchone()
            self._write_state(_State(new, float(deleted), uuid))
        with self._write_lock():  # committed: the old generation is litter now
            self._clean_litter(self._wanted()[2])
        if lost:
            _log.warning(
                "vector file of %s: %d vector(s) lost (%d supplied)",
                model,
                len(lost),
                sum(1 for _, s in lost if s != 0),
            )
        return sum(1 for _, s in lost if s != 0), sum(1 for _, s in lost if s == 0)

    def rebuild(self) -> int:
        """Compact the vector file of the active model (rows of deleted and replaced
        vectors dropped; damaged or missing rows recovered from what the model can make
        again, or reported); returns its live rows. Searches of other processes go on on
        the old file until they see the new one."""
        with self._lock:
            self._retire_index()
            self._repair()
            self._index_state = None
        return len(self.index())

    def close(self) -> None:
        self._close_index()

    # ------------------------------------------------------------------ reading rows

    def stored_rows(self, ids: np.ndarray) -> dict[int, np.ndarray]:
        """The stored (f16) rows of these memories, by id: only rows whose checksum is
        the one SQLite holds for the memory (a memory without one is left out)."""
        index = self.index()
        ids = np.asarray(ids, dtype=np.int64)
        rows = self._rows_for(index, ids)
        found = rows >= 0
        if not found.any():
            return {}
        half = index.stored(rows[found])
        picked = ids[found]
        good = row_checksums(half) == self._checksums_of(picked)
        return {int(i): half[j] for j, i in enumerate(picked.tolist()) if good[j]}

    def vector_of(self, memory_id: int) -> np.ndarray | None:
        """The memory's vector of the active model (float32, unit length), or None."""
        found = self.stored_rows(np.asarray([memory_id], dtype=np.int64))
        row = found.get(int(memory_id))
        return None if row is None else row.astype(np.float32)

    def _rows_for(self, index: Any, ids: np.ndarray) -> np.ndarray:
        """The live row of each memory of `ids` in `index` (-1 for one it has none of).

        The live ids are kept sorted beside their rows, per handle, extended as rows are
        appended (appended ids are mostly larger than every earlier one: no sort), and
        looked up by binary search: a fresh process at 1M rows pays ~10 ms, where a dict
        of every id cost 0.22 s and ~100 MB. A memory embedded again has its old row
        masked and a new one appended; the newest of equal ids is the one taken."""
        known = self._rows_of
        if known is None or known[0] is not index or known[1] > index.rows:
            empty = np.empty(0, dtype=np.int64)
            known = (index, 0, empty, empty)
        _, done, sorted_ids, sorted_rows = known
        if done < index.rows:
            all_ids, live = index.ids_and_live()
            rows = np.flatnonzero(live[done:]).astype(np.int64) + done
            new = np.asarray(all_ids, dtype=np.int64)[rows]
            if len(new) > 1 and not bool((new[1:] >= new[:-1]).all()):
                order = np.argsort(new, kind="stable")
                new, rows = new[order], rows[order]
            if len(sorted_ids) and len(new) and new[0] < sorted_ids[-1]:
                merged = np.concatenate([sorted_ids, new])
                order = np.argsort(merged, kind="stable")  # equal ids: the older row first
                sorted_ids, sorted_rows = merged[order], np.concatenate([sorted_rows, rows])[order]
            else:
                sorted_ids = np.concatenate([sorted_ids, new])
                sorted_rows = np.concatenate([sorted_rows, rows])
            known = (index, index.rows, sorted_ids, sorted_rows)
        self._rows_of = known
        if len(sorted_ids) == 0:
            return np.full(len(ids), -1, dtype=np.int64)
        at = np.searchsorted(sorted_ids, ids, side="right") - 1
        hit = (at >= 0) & (sorted_ids[np.maximum(at, 0)] == ids)
        return np.where(hit, sorted_rows[np.maximum(at, 0)], -1)

    # ------------------------------------------------------------------ verified search

    def verified_search(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """`index().search(query, k, allowed=allowed)`, with every returned row checked
        against SQLite: the id must have a live embedding of the active model, appear
        once, its row's checksum must be SQLite's, and its cosine to `query` (recomputed
        from the row) must equal the index's score to within f32 rounding. A mismatch
        while SQLite moved is a concurrent write (searched again); otherwise the file is
        damaged: repaired once and searched again (writable), or IndexFormatError
        (read-only)."""
        rebuilt = False
        for _ in range(4):
            index = self.index()
            seen = self._index_state
            ids, scores = index.search(query, k, allowed=allowed)
            problem = self._mismatch_or_error(index, query, ids, scores)
            if problem is None:
                return ids, scores
            if self._wanted() != seen:
                continue  # SQLite changed under the search: search again, in step
            fix = "repair the vector file (`cortex reindex`)"
            if self._store.read_only or rebuilt:
                raise IndexFormatError(f"{index.path}: {problem}; {fix}")
            self.rebuild()
            rebuilt = True
        raise IndexFormatError(
            f"{self.index_path()}: the database kept changing under the search; search again"
        )

    def search_unchecked(
        self,
        query: np.ndarray,
        k: int,
        allowed: np.ndarray | None = None,
        held: tuple[Any, Any] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, Any]:
        """`index().search(query, k, allowed=allowed)` without verified_search's check of
        every row, and the SQLite position the index was in step with: for a caller that
        checks the rows it keeps with `check` (the search pipeline checks the rows of the
        page it answers, not the ~230 candidates it ranks). Rows the index returns twice
        are refused here already: they cannot all reach a page. `held`: (the index, its
        position) as `index()` and `state` gave them to the caller in this search, which
        spares a second look at SQLite's position (`_wanted`)."""
        if held is not None:
            index, seen = held
        else:
            index = self.index()
            seen = self._index_state
        ids, scores = index.search(query, k, allowed=allowed)
        # (a set of a few hundred ids: np.unique's Python layers cost more in a search)
        if len(set(ids.tolist())) != len(ids):  # damage: verified_search repairs or refuses
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
        under the search and "rebuilt" when the file was damaged and has just been
        repaired (search again, in both cases). A damaged file that cannot be repaired
        (read-only, or `rebuilt` already in this search) raises IndexFormatError."""
        if not len(ids):
            return None
        index = self._index
        if index is None or self._index_state != seen:
            if self._wanted() != seen:
                return "changed"
            # The handle was retired (the periodic full check of another thread's search
            # reopens it) while SQLite did not move: the file it opens again holds the
            # very rows that were searched. Reporting "changed" here sent every search in
            # flight round again, and under four threads some ran out of tries.
            index = self.index()
        problem = self._mismatch_or_error(index, query, ids, scores)
        if problem is None:
            return None
        if self._wanted() != seen:
            return "changed"
        if self._store.read_only or rebuilt:
            fix = "repair the vector file (`cortex reindex`)"
            raise IndexFormatError(f"{index.path}: {problem}; {fix}")
        self.rebuild()
        return "rebuilt"

    def _mismatch_or_error(
        self, index: Any, query: np.ndarray, ids: np.ndarray, scores: np.ndarray
    ) -> str | None:
        """`_mismatch`, with a file that cannot be read (removed by a compaction that has
        just switched generations, or damaged) reported as a problem: the caller searches
        again when SQLite moved, and repairs or refuses when it did not."""
        try:
            return self._mismatch(index, query, ids, scores)
        except (CortexError, OSError, ValueError) as exc:
            return f"its rows cannot be read ({exc})"

    def _mismatch(
        self, index: Any, query: np.ndarray, ids: np.ndarray, scores: np.ndarray
    ) -> str | None:
        """What is wrong with these results against SQLite, or None (see
        verified_search). One query for the k checksums, k rows read from the file."""
        if len(ids) == 0:
            return None
        id_list = [int(i) for i in ids.tolist()]
        if len(set(id_list)) != len(id_list):
            return "a memory is returned twice (a masked row is live again)"
        asked = np.asarray(id_list, dtype=np.int64)
        rows = self._rows_for(index, asked)
        want = self._checksums_of(asked)
        for j, i in enumerate(id_list):
            if rows[j] < 0 or want[j] == 0:
                return f"memory {i} has no vector of {self.model_id} in the database"
        # The index scores the stored row as it is (unit to within f16 rounding), not
        # divided by its length: so does this check. Natively in one call when the
        # extension can (VectorIndex.check_rows: the same checksums, the same product
        # in float64), else from the stored rows here.
        found = index.check_rows(query, rows)
        if found is not None:
            got_sums, exact = found
        else:
            half = index.stored(rows)
            got_sums = row_checksums(half)
            mat = half.astype(np.float64)
            q = query.astype(np.float64)
            with np.errstate(all="ignore"):
                exact = (mat @ q) / math.sqrt(float(q @ q))
        if (got_sums != want).any():
            j = int(np.flatnonzero(got_sums != want)[0])
            return f"the row of memory {id_list[j]} does not match its checksum (a damaged row)"
        got = scores.astype(np.float64)
        bad = ~(np.abs(exact - got) <= _score_tolerance(int(query.shape[0])))
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            return (
                f"memory {id_list[j]} scored {got[j]:.6f}, its row {exact[j]:.6f}"
                " (a damaged row or id)"
            )
        return None


class _Pending:
    """The rows written in one transaction, appended to the vector file just before it
    commits (`Store.pending`)."""

    def __init__(self, semantic: Semantic, model: str, dim: int) -> None:
        self._semantic, self._model, self._dim = semantic, model, dim
        self._ids: list[int] = []
        self._rows: list[np.ndarray] = []
        self._held: list[int] = []  # the checksum `embeddings` holds of each (0: none yet)

    def add(self, ids: Sequence[int], half: np.ndarray, held: Sequence[int] = ()) -> None:
        self._ids.extend(int(i) for i in ids)
        self._rows.append(half)
        self._held.extend(held or [0] * len(half))

    def flush(self, tx: Any) -> None:
        if not self._ids:
            return
        # The last vector of a memory written twice in one transaction wins.
        rows = np.concatenate(self._rows) if len(self._rows) > 1 else self._rows[0]
        last: dict[int, int] = {}
        for j, i in enumerate(self._ids):
            last[i] = j
        pick = np.fromiter(last.values(), dtype=np.int64, count=len(last))
        ids = np.fromiter(last.keys(), dtype=np.int64, count=len(last))
        held = np.asarray(self._held, dtype=np.int64)[pick]
        self._semantic._append(tx, self._model, self._dim, ids, rows[pick], held)
        self._ids, self._rows, self._held = [], [], []


def _stem_of(folder: Path, model: str) -> Path:
    """Where the files of `model`'s vectors start: a readable slug and a digest."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", model)[:60]
    digest = hashlib.sha256(model.encode()).hexdigest()[:8]
    return folder / f"{slug}-{digest}"


def _next_gen_of(stem: Path, gen: int) -> int:
    found = [gen]
    with contextlib.suppress(OSError):
        for entry in stem.parent.iterdir():
            m = re.fullmatch(re.escape(stem.name) + r"\.(\d+)\.vectors.*", entry.name)
            if m is not None:
                found.append(int(m.group(1)))
    return max(found) + 1


def migrate_vectors(tx: Any, db_path: Path, model: str, dim: int) -> None:
    """Schema migration (store.py, `_SCHEMA_VECTORS_ONCE`): write the vectors of `model`
    held in `embeddings` to a new vector file, sync it, check every row (id and
    checksum) against its blob, then fill `embeddings_once` with the checksums and name
    the file in `meta`. Rows of another dimension or not a vector are left behind (the
    model's are embedded again: `cortex reindex`). Inside the migration's transaction:
    nothing of SQLite changes if any step fails."""
    from cortex.vectors import VectorIndex, decode_stored, encode_stored

    stem = _stem_of(vectors_dir(db_path, create=True), model)
    gen = _next_gen_of(stem, 0)
    path = Path(f"{stem}.{gen}.vectors")
    writer = VectorIndex.create(path, dim, model)
    kept: list[tuple[int, int, int]] = []  # (rowid, memory id, checksum)
    try:
        last = 0
        while True:
            batch = tx.execute(
                "SELECT rowid, memory_id, vector FROM embeddings WHERE model_id = ?"
                " AND rowid > ? ORDER BY rowid LIMIT 4096",
                (model, last),
            ).fetchall()
            if not batch:
                break
            last = int(batch[-1][0])
            good = [r for r in batch if isinstance(r[2], bytes) and len(r[2]) in (2 * dim, 4 * dim)]
            if not good:
                continue
            blobs = [r[2] for r in good]
            if any(len(b) != 2 * dim for b in blobs):
                blobs = encode_stored(decode_stored(blobs, dim))
            ids = np.fromiter((int(r[1]) for r in good), dtype=np.int64, count=len(good))
            sums = _append_stored(writer, ids, _as_stored(blobs, dim)).tolist()
            kept.extend((int(r[0]), int(r[1]), c) for r, c in zip(good, sums, strict=True))
        writer.sync()
        rows = writer.rows
    finally:
        writer.close()
    bad = _reread(path, rows, [m for _, m, _ in kept], [c for _, _, c in kept])
    if bad is not None:
        raise StorageError(
            f"{path}: memory {bad}'s vector did not survive the move to the vector file (is"
            " the disk failing?); the database is unchanged"
        )
    tx.executemany(
        "INSERT INTO embeddings_once (memory_id, model_id, dim, content_hash, checksum,"
        " supplied, created_at) SELECT memory_id, model_id, ?, content_hash, ?, supplied,"
        " created_at FROM embeddings WHERE rowid = ?",
        [(dim, c, rowid) for rowid, _, c in kept],
    )
    _write_meta(tx, model, gen, rows)


def append_vectors(tx: Any, db_path: Path, model: str, dim: int, ids: Any, half: Any) -> None:
    """Append stored (f16) rows of memories `ids` to `model`'s vector file of the database
    at `db_path` inside `tx` (a sqlite3 connection in a write transaction: its
    `embeddings` rows carry their checksums, `row_checksums`), the way an Engine does (for
    `cortex migrate`, which writes SQLite without one)."""
    store = Store(db_path)  # paths and the lock only: no connection is opened
    semantic = Semantic(store, _ModelOnly(model, dim))
    semantic._append(tx, model, dim, np.asarray(ids, dtype=np.int64), np.asarray(half, "<f2"))


class _ModelOnly:
    """An embedder that only names its model (append_vectors: nothing is embedded)."""

    def __init__(self, model_id: str, dim: int) -> None:
        self.model_id, self.dim = model_id, dim

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        raise EmbeddingError(f"{self.model_id} is not loaded here")


def read_vectors(conn: Any, db_path: Path, model: str, dim: int) -> dict[int, np.ndarray]:
    """The stored (f16) vector of every memory with an embedding of `model`, by memory id,
    read from the vector file SQLite names (through `conn`, a sqlite3 connection): only
    rows whose checksum is the one SQLite holds for the memory. A memory whose row is
    missing or damaged is left out. Reads the files as they are (no lock, no check of
    the side files): for `cortex migrate`, exports and tests."""
    sums = {
        int(m): int(c)
        for m, c in conn.execute(
            "SELECT memory_id, checksum FROM embeddings WHERE model_id = ?", (model,)
        )
    }
    gen, rows = _read_meta(conn, model)
    if not gen or not sums:
        return {}
    path = Path(f"{_stem_of(vectors_dir(db_path), model)}.{gen}.vectors")
    mat = _salvage(path, dim)[:rows]
    got = row_checksums(mat).tolist() if len(mat) else []
    ids: list[int] | None = None
    raw = _read_regular(f"{path}.ids")
    if raw is not None and len(raw) >= 64:
        rec = np.frombuffer(raw, dtype=np.dtype([("id", "<i8"), ("flags", "<u8")]), offset=64,
                            count=(len(raw) - 64) // 16)  # fmt: skip
        ids = rec["id"][: len(mat)].tolist()
    out: dict[int, np.ndarray] = {}
    if ids is not None:
        for r, (i, c) in enumerate(zip(ids, got, strict=False)):
            if sums.get(int(i)) == c:
                out[int(i)] = mat[r]
    if len(out) < len(sums):  # id map damaged: a row with the very checksum is the vector
        by_sum = {c: r for r, c in enumerate(got)}
        for m, c in sums.items():
            if m not in out and c in by_sum:
                out[m] = mat[by_sum[c]]
    return out


def _append_stored(
    writer: Any, ids: np.ndarray, half: np.ndarray, known: np.ndarray | None = None
) -> np.ndarray:
    """Append the stored (f16) rows `half` of memories `ids` to `writer` (a writable
    VectorIndex) and return each row's checksum as the file holds it (`known`: those of
    `half`'s rows where known, 0 where not: kept for the rows stored as given). The file
    normalises each row again before rounding it: for a few dimensions that can move a
    bit of the f16 row (SQLite then holds the checksum of the row as stored); a row moved
    further than rounding did not survive the write (StorageError)."""
    start = writer.rows
    writer.append(ids, half.astype(np.float32))
    stored = writer.stored(np.arange(start, writer.rows))
    differ = (stored.view(np.uint16) != half.view(np.uint16)).any(axis=1)
    if differ.any():
        moved = stored[differ].astype(np.float32) - half[differ].astype(np.float32)
        if np.abs(moved).max() > 2e-3:
            raise StorageError(f"{writer.path}: a vector changed on its way to the file")
    if known is None:
        return row_checksums(stored)
    sums = known.copy()
    need = differ | (known == 0)
    if need.any():
        sums[need] = row_checksums(stored[need])
    return sums


def _reread(path: Path, rows: int, ids: Sequence[int], sums: Sequence[int]) -> int | None:
    """Open the vector file at `path` (its first `rows` rows) afresh and compare each row's
    memory id and checksum with `ids` and `sums` (what was written, in order): the first
    memory whose row does not read back, or None."""
    from cortex.vectors import VectorIndex

    check = VectorIndex.open(path, upto=rows)
    try:
        file_ids, _ = check.ids_and_live()
        for start in range(0, rows, _CHECK_BATCH):
            end = min(start + _CHECK_BATCH, rows)
            got = row_checksums(check.stored(np.arange(start, end))).tolist()
            for memory_id, want, have, file_id in zip(
                ids[start:end], sums[start:end], got, file_ids[start:end].tolist(), strict=True
            ):
                if have != want or file_id != memory_id:
                    return int(memory_id)
    finally:
        check.close()
    return None


def _meta_key(model: str) -> str:
    return f"vectors:{model}"


def _read_meta(conn: Any, model: str) -> tuple[int, int]:
    """(generation, committed rows) of `model`'s vector file as `meta` names it through
    `conn` (a sqlite3 connection or transaction); (0, 0) when there is none."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_meta_key(model),)).fetchone()
    return _parse_meta(row[0] if row else None)


def _write_meta(tx: Any, model: str, gen: int, rows: int) -> None:
    """Name generation `gen` of `rows` committed rows as `model`'s vector file in `meta`."""
    tx.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?)"
        " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (_meta_key(model), json.dumps({"gen": gen, "rows": rows})),
    )


def _parse_meta(value: Any) -> tuple[int, int]:
    """(generation, committed rows) of a ``vectors:<model>`` meta value; (0, 0) when
    there is none (no vector file yet) or it is not one cortex wrote."""
    if value is None:
        return 0, 0
    try:
        data = json.loads(value)
    except (TypeError, ValueError, RecursionError):
        return 0, 0
    if not isinstance(data, dict):
        return 0, 0
    gen, rows = data.get("gen"), data.get("rows")
    if (
        type(gen) is not int
        or type(rows) is not int
        or not (0 <= gen < 2**62 and 0 <= rows < 2**62)
    ):
        return 0, 0
    return gen, rows


def _stored_array(rows: np.ndarray) -> np.ndarray:
    """The stored form of float32 rows as one (n, dim) float16 array: each row
    L2-normalised (its length summed in float64, scaled in float32, as the vector file
    does) and rounded; a third of the cost of `encode_stored`'s all-float64 path."""
    mat = np.ascontiguousarray(rows, dtype=np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", mat, mat, dtype=np.float64))
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    half: np.ndarray = (mat * scale.astype(np.float32)[:, None]).astype("<f2")
    return half


def _as_stored(blobs: Sequence[bytes], dim: int) -> np.ndarray:
    """Stored vectors (`encode_stored`) as one (n, dim) float16 array."""
    raw = b"".join(blobs)
    if len(raw) != len(blobs) * dim * 2:
        raise EmbeddingError(f"a stored vector is not {dim} float16 values")
    return np.frombuffer(raw, dtype="<f2").reshape(len(blobs), dim)


#: Rows checked per step (the checksums of a step are computed in one numpy pass).
_CHECK_BATCH = 8192
_MULT: dict[int, np.ndarray] = {}


def row_checksums(half: np.ndarray) -> np.ndarray:
    """The checksum SQLite keeps of each stored row ((n, dim) float16): the row read as
    64-bit words (16-bit values when the dimension is not a multiple of 4), each word
    mixed by a bijection (xorshift-multiply) and times an odd constant of its position,
    summed mod 2^64, then mixed again. A changed word always changes the sum (both steps
    are invertible mod 2^64); as int64 (SQLite's INTEGER), never 0."""
    half = np.ascontiguousarray(half, dtype="<f2")
    n, dim = half.shape
    wide = dim % 4 == 0
    width = dim // 4 if wide else dim
    mult = _MULT.get(dim)
    if mult is None:
        pos = np.arange(width, dtype=np.uint64)
        mult = (pos * np.uint64(0x9E3779B97F4A7C15) + np.uint64(0x632BE59BD9B4E019)) | np.uint64(1)
        _MULT[dim] = mult
    out = np.empty(n, dtype=np.uint64)
    for start in range(0, n, _CHECK_BATCH):
        part = half[start : start + _CHECK_BATCH]
        words = part.view(np.uint64).copy() if wide else part.view(np.uint16).astype(np.uint64)
        with np.errstate(over="ignore"):
            words ^= words >> np.uint64(29)
            words *= np.uint64(0xBF58476D1CE4E5B9)
            words ^= words >> np.uint64(32)
            words *= mult
            h = words.sum(axis=1, dtype=np.uint64)
            h ^= h >> np.uint64(31)
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(29)
        out[start : start + len(h)] = h
    out[out == 0] = 1
    checked: np.ndarray = out.view(np.int64)
    return checked


def _salvage(path: Path, dim: int) -> np.ndarray:
    """Every whole row the main file at `path` holds (committed or not), read without
    trusting its header's count or its side files: a compaction keeps each row whose
    checksum SQLite knows. Empty when the file is missing or not a cortex vector file
    of `dim` dimensions."""
    from cortex.vectors import _HEADER_LEN, _MAGIC

    raw = _read_regular(path)
    empty = np.zeros((0, dim), dtype="<f2")
    if raw is None or len(raw) < _HEADER_LEN or raw[:8] != _MAGIC:
        return empty
    if int.from_bytes(raw[16:20], "little") != dim:
        return empty
    n = (len(raw) - _HEADER_LEN) // (dim * 2)
    rows: np.ndarray = np.frombuffer(raw, dtype="<f2", count=n * dim, offset=_HEADER_LEN)
    return rows.reshape(n, dim)


def _read_regular(path: Path | str) -> bytes | None:
    """The bytes of `path` if it is a regular file (never a FIFO, a device or a symlink
    followed: none of them blocks or streams here), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_BINARY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read()
    except OSError:
        return None
    finally:
        os.close(fd)


def _score_tolerance(dim: int) -> float:
    """How far an index score may be from the f64 inner product of the stored row and the
    unit query: the f32 dot product of (near-)unit vectors is within dim * 2^-24 of the
    real value (quant.rs, `margin`), plus the rounding of normalising the query to f32
    (the row is the stored f16, widened exactly); doubled for room."""
    return 2.0 * (dim + 8) * 2.0**-24


@dataclass(frozen=True, slots=True)
class _State:
    """What the masks of a vector file reflect (see Semantic, "the vector file"): the
    generation, the deletion time masked up to, and the file's uuid."""

    gen: int
    deleted: float
    uuid: str

    def to_dict(self) -> dict[str, Any]:
        return {"gen": self.gen, "deleted": self.deleted, "uuid": self.uuid}

    @classmethod
    def parse(cls, data: object) -> _State | None:
        if not isinstance(data, dict):
            return None
        gen, deleted, uuid = (data.get(k) for k in ("gen", "deleted", "uuid"))
        if not (type(gen) is int and 0 < gen < 2**62):
            return None
        if not isinstance(deleted, int | float) or isinstance(deleted, bool):
            return None
        if not (math.isfinite(deleted) and deleted >= 0):
            return None
        if not (isinstance(uuid, str) and re.fullmatch(r"[0-9a-f]{32}", uuid)):
            return None
        return cls(gen, float(deleted), uuid)
