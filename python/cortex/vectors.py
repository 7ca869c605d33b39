"""The vector index: memory-mapped L2-normalised rows stored as f16, exact top-k.

The index is derived data beside the SQLite store (DESIGN.md, "The native
extension"): four files share a stem, ``path`` (header + f16 rows: the values SQLite
stores, see `encode_stored`),
``path.ids`` (row -> memory id, and a mask flag), ``path.q8`` (an int8 copy
with per-row error norms, used to rule rows out quickly) and ``path.sum``
(a checksum per block of 4096 rows, checked by :meth:`VectorIndex.verify`, which also
holds every int8 record to its row).
The format is documented in ``rust/kernels/vecfile.rs``; :class:`_FileView`
below reads it in Python so the numpy and pure-Python paths need nothing from
the extension to search.

Decisions:

- ``append`` L2-normalises every row and stores it rounded to f16 (a row SQLite
  stores, already so rounded, comes back bit for bit), and refuses rows with
  NaN/inf or zero length. Queries are normalised the same way; a score is the
  inner product of the query with the stored row, the cosine to within f16
  rounding of the row (its length is 1 within ~2^-11, typically ~1e-5).
- Appending an id that already has a live row supersedes that row (it is
  masked). ``mask`` hides rows without rewriting them.
- Results are memory ids (int64) and cosine scores (float32), best first;
  equal scores go to the lower row (the earlier append) first.
- ``backend``: ``"native"`` (the Rust extension: SIMD, threads, GIL released),
  ``"numpy"`` (seed 001's ``matrix @ q`` + ``argpartition``), ``"python"``
  (a loop and a sort). All three return the same ids; scores agree to ~1e-6.
- ``quantized`` (native only): ``None`` picks automatically — the int8 screen
  when the int8 copy covers at least ``QUANTIZED_MIN_ROWS`` rows, else the
  plain scan of the f16 rows; ``True``/``False`` force one. The screen is exact: each int8
  score comes with a proven error bound (Cauchy–Schwarz on the quantization
  residuals, plus f32 rounding), every row the bound cannot rule out is
  rescored from its f16 row, and the answer is the plain scan's (same ids, same
  scores, same order). ``candidates`` switches the screen to the older heuristic
  (rescore the best ``candidates`` rows by int8 score; recall can fall below 1),
  kept only to measure it.
- ``allowed`` (memory ids, any order) restricts the search; the native path
  then scores only those rows (their int8 records first), so its cost follows
  ``len(allowed)``.
- Threads: ``threads=None`` uses ``CORTEX_THREADS`` if set, else every core.
"""

from __future__ import annotations

import array
import contextlib
import math
import mmap
import os
import struct
from typing import Any, Literal

import numpy as np

from cortex.errors import CortexError, IndexFormatError, InvalidOptionError

try:
    from cortex import _native
except ImportError:  # pragma: no cover - only without the compiled extension
    _native = None  # type: ignore[assignment]

__all__ = ["QUANTIZED_MIN_ROWS", "Backend", "VectorIndex", "decode_stored", "encode_stored"]

Backend = Literal["native", "numpy", "python"]
_BACKENDS = ("native", "numpy", "python")

#: Rows the int8 copy must cover before ``quantized=None`` uses it, and rows from which
#: the writer keeps the copy at all (a smaller index has none unless
#: :meth:`VectorIndex.rebuild_quantized` made it); mirrors ``Q8_MIN_ROWS`` in
#: rust/kernels/vecfile.rs.
QUANTIZED_MIN_ROWS = 20_000

_MAGIC = b"CTXVEC\x00\x01"
_IDS_MAGIC = b"CTXIDS\x00\x01"
_VERSION = 3
_ROW_DTYPE = np.dtype("<f2")
_HEADER_LEN = 4096
_SIDE_HEADER_LEN = 64
_COUNT_AT = 512
_CHECKSUM_AT = 504
_ID_DTYPE = np.dtype([("id", "<i8"), ("flags", "<u8")])
_FIX_F32 = "use np.ascontiguousarray(x, dtype=np.float32)"


def _fnv1a(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def _read_mapped(path: str | Any, offset: int, length: int) -> bytes:
    """Up to `length` bytes of `path` from `offset` (fewer past its end), read through a
    read-only mapping, never ``read()``: on Windows the writer's lock of the main file
    (LockFileEx) is mandatory and refuses plain reads by every other handle, not a
    mapping's page-ins (the native reader maps it too)."""
    if not isinstance(path, str):  # a file this process holds open (see _FileView)
        end = min(os.fstat(path.fileno()).st_size, offset + length)
        if end <= offset:
            return b""
        with mmap.mmap(path.fileno(), end, access=mmap.ACCESS_READ) as m:
            return m[offset:end]
    with open(path, "rb") as f:
        return _read_mapped(f, offset, length)


# ---------------------------------------------------------------- the stored form
#
# The one place that knows how an embedding is stored in SQLite (`embeddings.vector`,
# the source of truth every derived file is rebuilt from): the vector L2-normalised in
# float64, then rounded to little-endian float16. Half the bytes of float32 (768 for 384
# dimensions: 4 rows a 4 KiB page instead of 2), and nothing a cosine needs is lost: every
# value lies in [-1, 1], where float16 keeps a relative error <= 2^-11 and cannot
# overflow (a raw vector of large values would); on SciFact (real embeddings) rounding
# moved recall@10 against float32 to 0.9997 and no score by more than 5e-5 (BENCHMARKS.md,
# "Ingest with pre-computed vectors"), and left hybrid nDCG@10 at 0.7352 ("Footprint:
# vectors stored once"). Databases from before the
# conversion (schema migration `_SCHEMA_EMBEDDINGS_F16`) hold float32 rows, which are
# still read: a database opened read-only is not migrated.

_STORED: np.dtype[Any] = np.dtype("<f2")
_LEGACY: np.dtype[Any] = np.dtype("<f4")


def encode_stored(rows: np.ndarray) -> list[bytes]:
    """The stored form of each row of `rows` ((n, dim), finite): L2-normalised, float16.
    An all-zero row stays zero (the vector index refuses it when it is appended)."""
    mat = np.asarray(rows, dtype=np.float64)
    if mat.ndim != 2:
        raise InvalidOptionError(f"rows must have 2 dimensions, got shape {mat.shape}")
    norms = np.sqrt(np.einsum("ij,ij->i", mat, mat))
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    half = np.ascontiguousarray(mat * scale[:, None], dtype=_STORED)
    return [row.tobytes() for row in half]


def decode_stored(blobs: list[bytes], dim: int) -> np.ndarray:
    """Stored rows back as float32 ((len(blobs), dim)), float16 or (before the migration)
    float32. Raises ValueError when a blob is neither ``dim`` float16 nor float32 values."""
    n = len(blobs)
    raw = b"".join(blobs)
    if len(raw) == n * dim * _STORED.itemsize and all(
        len(b) == dim * _STORED.itemsize for b in blobs
    ):
        dtype = _STORED
    elif len(raw) == n * dim * _LEGACY.itemsize and all(
        len(b) == dim * _LEGACY.itemsize for b in blobs
    ):
        dtype = _LEGACY
    else:
        raise ValueError(f"an embedding is not {dim} float16 (or float32) values")
    return np.frombuffer(raw, dtype=dtype).reshape(n, dim).astype(np.float32)


def stored_dim(blob: bytes | None, dim: int) -> bool:
    """Whether `blob` is a stored vector of `dim` dimensions (either form)."""
    return blob is not None and len(blob) in (dim * _STORED.itemsize, dim * _LEGACY.itemsize)


class _FileView:
    """The file read by Python alone (for the numpy and python backends, and for
    :meth:`VectorIndex.sample`). Reads go through mappings (see `_read_mapped`)."""

    def __init__(self, path: str) -> None:
        self.path = path
        fix = "delete it and rebuild the index (`cortex reindex`)"
        # Held open, so that rows stay readable when the file is replaced or removed
        # (a compaction's new generation: semantic.py) while this view is in use.
        self._main: Any = None
        self._ids: Any = None
        self._matrix: np.ndarray | None = None
        try:
            self._main = open(path, "rb")  # noqa: SIM115 - closed by close()
            head = _read_mapped(self._main, 0, _HEADER_LEN)
        except FileNotFoundError:
            raise CortexError(
                f"no vector index at {path}; create it with VectorIndex.create(path, dim, model_id)"
            ) from None
        if head[:8] != _MAGIC:
            raise IndexFormatError(f"{path}: not a cortex vector file (wrong magic); {fix}")
        if len(head) < _HEADER_LEN:
            raise IndexFormatError(f"{path}: truncated header; {fix}")
        version, _, dim, _ = struct.unpack_from("<IIII", head, 8)
        if version != _VERSION:
            raise IndexFormatError(
                f"{path}: format version {version}, this cortex reads version {_VERSION}; {fix}"
            )
        (checksum,) = struct.unpack_from("<Q", head, _CHECKSUM_AT)
        if _fnv1a(head[:_CHECKSUM_AT]) != checksum:
            raise IndexFormatError(f"{path}: header checksum mismatch; {fix}")
        (mlen,) = struct.unpack_from("<I", head, 40)
        self.dim = dim
        self.model_id = head[44 : 44 + mlen].decode("utf-8")
        self.uuid = head[24:40]
        self.count = 0
        self.refresh()

    def close(self) -> None:
        self._matrix = None
        for f in (self._main, self._ids):
            if f is not None:
                f.close()
        self._main = self._ids = None

    def __del__(self) -> None:  # a retired index is let go, not closed (semantic.py)
        with contextlib.suppress(Exception):
            self.close()

    def refresh(self) -> None:
        raw = _read_mapped(self._main, _COUNT_AT, 16)
        if len(raw) < 16:
            raise IndexFormatError(f"{self.path}: truncated header; rebuild the index")
        count, check = struct.unpack("<QQ", raw)
        if count != (~check & 0xFFFFFFFFFFFFFFFF):
            raise IndexFormatError(f"{self.path}: row count is corrupt; rebuild the index")
        need = _HEADER_LEN + count * self.dim * _ROW_DTYPE.itemsize
        ids_need = _SIDE_HEADER_LEN + count * _ID_DTYPE.itemsize
        ids_path = self.path + ".ids"
        if self._ids is None:
            self._ids = open(ids_path, "rb")  # noqa: SIM115 - closed by close()
        size = os.fstat(self._main.fileno()).st_size
        if size < need or os.fstat(self._ids.fileno()).st_size < ids_need:
            raise IndexFormatError(
                f"{self.path}: truncated (header says {count} rows); rebuild the index "
                "(`cortex reindex`)"
            )
        side = _read_mapped(self._ids, 0, _SIDE_HEADER_LEN)
        if side[:8] != _IDS_MAGIC or side[16:32] != self.uuid:
            raise IndexFormatError(f"{ids_path} does not belong to {self.path}; rebuild the index")
        self.count = count

    def cap(self, upto: int | None) -> None:
        """See rows ``0..upto`` only (VectorIndex.open's `upto`)."""
        if upto is None:
            return
        if upto > self.count:
            raise IndexFormatError(
                f"{self.path}: holds {self.count} rows but the database counts {upto}:"
                " rows are missing"
            )
        self.count = upto

    def matrix(self) -> np.ndarray:
        """The rows as a read-only (count, dim) float16 memmap: shared pages, no copy
        (mapped again only when the count changed: a search's check reads a few rows)."""
        if self.count == 0:
            return np.zeros((0, self.dim), dtype=_ROW_DTYPE)
        known = self._matrix
        if known is not None and len(known) == self.count:
            return known
        self._matrix = np.memmap(
            self._main, dtype=_ROW_DTYPE, mode="r", offset=_HEADER_LEN, shape=(self.count, self.dim)
        )
        return self._matrix

    def ids_and_live(self) -> tuple[np.ndarray, np.ndarray]:
        if self.count == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
        rec = np.memmap(
            self._ids,
            dtype=_ID_DTYPE,
            mode="r",
            offset=_SIDE_HEADER_LEN,
            shape=(self.count,),
        )
        return np.asarray(rec["id"], dtype=np.int64), (rec["flags"] & 1) == 0

    def rows_python(self) -> tuple[array.array[float], list[int], list[bool]]:
        """Rows as a flat ``array('f')`` (widened from f16 by ``struct``) and ids/live as
        lists: no numpy involved."""
        n = self.count * self.dim
        rows = array.array(
            "f", struct.unpack(f"<{n}e", _read_mapped(self._main, _HEADER_LEN, n * 2))
        )
        raw = _read_mapped(self._ids, _SIDE_HEADER_LEN, self.count * 16)
        ids, live = [], []
        for memory_id, flags in struct.iter_unpack("<qQ", raw):
            ids.append(memory_id)
            live.append(not flags & 1)
        return rows, ids, live


# ---------------------------------------------------------------- validation


def _check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    if k <= 0:
        raise InvalidOptionError(f"k must be >= 1, got {k}")
    # k past the rows returns every row; past 2**62 it would not fit the extension's
    # integer (an OverflowError), and no index holds that many rows
    return min(int(k), 2**62)


def _check_f32(x: object, name: str, ndim: int, dim: int) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy float32 array, got {type(x).__name__}; {_FIX_F32}")
    if x.dtype != np.float32:
        raise TypeError(f"{name} must be float32, got {x.dtype}; {_FIX_F32}")
    if x.ndim != ndim:
        raise InvalidOptionError(f"{name} must have {ndim} dimension(s), got shape {x.shape}")
    if not x.flags.c_contiguous:
        raise InvalidOptionError(f"{name} is not C-contiguous; {_FIX_F32}")
    if x.shape[-1] != dim:
        raise InvalidOptionError(
            f"{name} has dimension {x.shape[-1]}, this index holds {dim} "
            "(was it embedded with another model?)"
        )
    return x


def _normalised(x: np.ndarray, name: str) -> np.ndarray:
    """Finite, non-zero rows scaled to unit length exactly as the native path does
    (norm in float64, one float32 multiply), so all backends see the same query."""
    x2 = np.atleast_2d(x)
    if not np.isfinite(x2).all():
        raise InvalidOptionError(f"{name} has a NaN or infinite value")
    norms = np.sqrt(np.einsum("ij,ij->i", x2.astype(np.float64), x2.astype(np.float64)))
    if (norms == 0).any():
        raise InvalidOptionError(f"{name} has zero length; a zero vector has no direction")
    inv = (1.0 / norms).astype(np.float32)
    out: np.ndarray = x2 * inv[:, None]
    return out if x.ndim == 2 else out[0]


def _check_backend(backend: str) -> str:
    if backend not in _BACKENDS:
        raise InvalidOptionError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    if backend == "native" and _native is None:
        raise CortexError(
            "the native extension cortex._native is not importable; reinstall cortex "
            "or pass backend='numpy'"
        )
    return backend


def _as_ids(ids: object, name: str) -> np.ndarray:
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise InvalidOptionError(f"{name} must be 1-d, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must be integers, got {arr.dtype}; use np.asarray(ids, np.int64)")
    return np.ascontiguousarray(arr, dtype=np.int64)


# ---------------------------------------------------------------- selection


def _select(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k best of ``scores`` (-inf = excluded): score desc, index asc.

    argpartition picks an arbitrary subset of rows tied at the k-th score, so every
    row tied with it is taken before the final sort: ties go to the lower index.
    """
    valid = int(np.count_nonzero(scores > -np.inf))
    k = min(k, valid)
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    if k < scores.shape[0]:
        part = np.argpartition(-scores, k - 1)[:k]
        kth = scores[part].min()
        cand = np.flatnonzero(scores >= kth)
    else:
        cand = np.flatnonzero(scores > -np.inf)
    order = np.lexsort((cand, -scores[cand]))
    return cand[order[:k]].astype(np.int64)


class VectorIndex:
    """A memory-mapped vector index. Use :meth:`create` or :meth:`open`."""

    def __init__(self, native: Any, view: _FileView | None, path: str) -> None:
        self._index = native
        self._view = view
        self._path = path

    # ------------------------------------------------------------ lifecycle

    @classmethod
    def create(cls, path: str | os.PathLike[str], dim: int, model_id: str) -> VectorIndex:
        """Create an empty index (replacing any at ``path``), open for writing."""
        if _native is None:
            raise CortexError("creating an index needs the native extension cortex._native")
        if isinstance(dim, bool) or not isinstance(dim, int | np.integer):
            raise TypeError(f"dim must be an int, got {type(dim).__name__}")
        p = os.fspath(path)
        return cls(_native.NativeIndex.create(p, int(dim), model_id), None, p)

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], *, writable: bool = False, upto: int | None = None
    ) -> VectorIndex:
        """Open an index. Raises IndexFormatError if it is truncated, corrupt, or of
        another format or version; StorageError if another writer holds it.

        `upto`: the rows committed elsewhere (semantic.py: the file is the source of truth
        and SQLite counts its committed rows). A reader sees rows ``0..upto`` only; a
        writer takes the rows past it back (the next append overwrites them); fewer rows
        than `upto` is an IndexFormatError."""
        p = os.fspath(path)
        if _native is None:
            if writable:
                raise CortexError("writing an index needs the native extension cortex._native")
            view = _FileView(p)
            view.cap(upto)
            return cls(None, view, p)
        native = _native.NativeIndex.open(p, writable=writable, upto=upto)
        try:
            view = _FileView(p)  # holds the files open from now on (see _FileView)
        except BaseException:
            native.close()
            raise
        view.count = int(native.rows)
        return cls(native, view, p)

    def close(self) -> None:
        """Release the mappings (and the writer lock). Idempotent."""
        if self._index is not None:
            self._index.close()
        if self._view is not None:
            self._view.close()
        self._view = None

    def __enter__(self) -> VectorIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ facts

    @property
    def path(self) -> str:
        return self._path

    @property
    def dim(self) -> int:
        return int(self._index.dim if self._index is not None else self._file().dim)

    @property
    def model_id(self) -> str:
        return str(self._index.model_id if self._index is not None else self._file().model_id)

    @property
    def rows(self) -> int:
        """Rows in the file, masked ones included."""
        return int(self._index.rows if self._index is not None else self._file().count)

    @property
    def uuid(self) -> str:
        """The random id (hex) written in every file of this index when it was created: a
        rebuild renamed into place has another, so a reader can tell its files were
        replaced."""
        if self._index is not None:
            return str(self._index.uuid)
        return self._file().uuid.hex()

    @property
    def quantized_rows(self) -> int:
        """Rows the int8 copy covers (rows past it are scanned in f32)."""
        return int(self._index.quantized_rows) if self._index is not None else 0

    def __len__(self) -> int:
        """Live rows: the rows a search can return."""
        if self._index is not None:
            return int(self._index.live_count())
        return int(np.count_nonzero(self._file().ids_and_live()[1]))

    def __repr__(self) -> str:
        return f"VectorIndex({self._path!r}, dim={self.dim}, rows={self.rows})"

    def _file(self) -> _FileView:
        """The Python reader, kept at the same row count as the native handle."""
        if self._index is not None and self._index.closed:
            raise CortexError("this vector index is closed; open it again")
        if self._view is None:
            if self._index is None:
                raise CortexError("this vector index is closed; open it again")
            self._view = _FileView(self._path)
        if self._index is not None and self._view.count != self._index.rows:
            self._view.refresh()
            if self._view.count < self._index.rows:
                raise IndexFormatError(f"{self._path}: the file shrank under the index")
            self._view.count = self._index.rows  # never see more than the native handle
        return self._view

    def sample(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Up to `n` live rows, evenly spaced over the file: (memory ids, rows as a float32
        copy). For spot checks of the rows against their source (the block checksums of
        :meth:`verify` say whether the file is intact, not whether it matches SQLite)."""
        view = self._file()
        ids, live = view.ids_and_live()
        rows = np.flatnonzero(live)
        if len(rows) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros((0, self.dim), dtype=np.float32)
        pick = rows[np.unique(np.linspace(0, len(rows) - 1, min(n, len(rows))).astype(int))]
        return ids[pick].copy(), np.asarray(view.matrix()[pick], dtype=np.float32)

    def ids_and_live(self) -> tuple[np.ndarray, np.ndarray]:
        """The memory id of every row ``0..rows`` (int64) and whether it is live (bool)."""
        if self._index is not None:
            ids, live = self._index.ids_and_live()
            return np.asarray(ids, dtype=np.int64), np.asarray(live, dtype=bool)
        return self._file().ids_and_live()

    def stored(self, rows: Any) -> np.ndarray:
        """A copy of these rows as stored: float16, shape ``(len(rows), dim)``."""
        at = np.asarray(rows, dtype=np.int64).reshape(-1)
        if len(at) and (int(at.min()) < 0 or int(at.max()) >= self.rows):
            raise InvalidOptionError(f"rows must be in 0..{self.rows - 1}")
        if len(at) == 0:
            return np.zeros((0, self.dim), dtype=_ROW_DTYPE)
        return np.asarray(self._file().matrix()[at], dtype=_ROW_DTYPE)

    def check_rows(self, query: np.ndarray, rows: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """(checksum, exact score) of each stored row of `rows` against `query`, as
        `cortex.semantic.row_checksums` and a float64 product of the stored row with the
        query over its length give them, in one native call; None without the
        extension's method (the caller computes them from `stored`)."""
        check = getattr(self._index, "check_rows", None)
        if check is None:
            return None
        q = _check_f32(query, "query", 1, self.dim)
        found: tuple[np.ndarray, np.ndarray] = check(q, np.asarray(rows, dtype=np.int64))
        return found

    # ------------------------------------------------------------ writing

    def append(self, ids: Any, vectors: np.ndarray) -> None:
        """Append rows: ``ids`` integers (n,), ``vectors`` float32 C-contiguous (n, dim).

        Rows are L2-normalised before storing; NaN/inf or zero rows are refused
        (InvalidOptionError). An id with a live row already supersedes it.
        """
        self._writer()
        ids64 = _as_ids(ids, "ids")
        _check_f32(vectors, "vectors", 2, self.dim)
        self._index.append(ids64, vectors)

    def mask(self, ids: Any) -> int:
        """Stop returning the rows of these memory ids (deleted or superseded);
        the rows are not rewritten. Returns how many rows were masked."""
        self._writer()
        return int(self._index.mask(_as_ids(ids, "ids")))

    def refresh(self, upto: int | None = None) -> None:
        """See the rows the writer appended since this index was opened (up to `upto`
        rows: see :meth:`open`)."""
        if self._index is not None:
            self._index.refresh(upto)
        elif self._view is not None:
            self._view.refresh()
            self._view.cap(upto)

    def rebuild_quantized(self) -> None:
        """Rewrite the int8 copy from the stored (f16) rows (writer only)."""
        self._writer()
        self._index.rebuild_quantized()

    def verify(self, from_row: int = 0) -> None:
        """Check every row and memory id against the block checksums written with them,
        and every int8 record against its row (the error bound it claims must hold);
        raises IndexFormatError naming the first damaged block or record. Reads the whole
        file (benches/vectors.md); opening checks only the last block. ``from_row`` > 0
        checks only the blocks from that row on (what was appended since)."""
        if self._index is None:
            raise CortexError("verifying an index needs the native extension cortex._native")
        if isinstance(from_row, bool) or not isinstance(from_row, int) or from_row < 0:
            raise InvalidOptionError(f"from_row must be an int >= 0, got {from_row!r}")
        self._index.verify(from_row)

    def sync(self) -> None:
        """Flush written bytes to disk (only needed to survive a power cut)."""
        self._writer()
        self._index.sync()

    def _writer(self) -> None:
        if self._index is None:
            raise CortexError("writing an index needs the native extension cortex._native")
        if not self._index.writable:
            raise CortexError("this index is open read-only; open it with writable=True")

    # ------------------------------------------------------------ search

    def search(
        self,
        query: np.ndarray,
        k: int,
        *,
        allowed: Any = None,
        backend: Backend = "native",
        quantized: bool | None = None,
        threads: int | None = None,
        candidates: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k by cosine: (memory ids int64, scores float32), best first.

        ``allowed``: memory ids the result may contain (sorted or not); ``None``
        admits every live row. ``quantized``, ``threads`` and ``candidates`` apply to
        the native backend only (see the module doc); every backend and setting
        returns the exact answer unless ``candidates`` is given.
        """
        k = _check_k(k)
        _check_backend(backend)
        q = _check_f32(query, "query", 1, self.dim)
        allowed_ids = None if allowed is None else _as_ids(allowed, "allowed")
        if backend == "native":
            # the extension checks the query as _normalised does (a NaN or infinite
            # value, zero length: InvalidOptionError) and scales it the same way; not
            # checked here first (~9 numpy calls, 0.09 ms of a search's cold tail)
            ids, scores = self._index.search(
                q,
                k,
                allowed=allowed_ids,
                quantized=quantized,
                threads=threads,
                candidates=candidates,
            )
            return ids, scores
        qn = _normalised(q, "query")
        if backend == "numpy":
            return self._search_numpy(qn, k, allowed_ids)
        return self._search_python(qn, k, allowed_ids)

    def moments(self, query: np.ndarray, allowed: Any) -> tuple[int, float, float] | None:
        """(n, mean, standard deviation) of the cosines of `query` with the live rows of
        the memories `allowed`: the numbers ``search(query, len(allowed), allowed=
        allowed)``'s scores give as float64 with numpy's ``mean()`` and ``std()``, to the
        bit, without a top-k of every row; the rows of an `allowed` asked again (a
        calibration sample) are read from a contiguous copy. None when the native
        extension cannot answer (no extension, a damaged file): use `search`."""
        moments = getattr(self._index, "moments", None)
        if moments is None:
            return None
        q = _check_f32(query, "query", 1, self.dim)  # checked and scaled natively (search)
        found: tuple[int, float, float] | None = moments(q, _as_ids(allowed, "allowed"))
        return found

    def search_batch(
        self,
        queries: np.ndarray,
        k: int,
        *,
        backend: Backend = "native",
        quantized: bool | None = None,
        threads: int | None = None,
        candidates: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k for each row of ``queries`` (m, dim): ids (m, k') int64 and scores
        (m, k') float32 with k' = min(k, live rows)."""
        k = _check_k(k)
        _check_backend(backend)
        qs = _check_f32(queries, "queries", 2, self.dim)
        if backend == "native":
            _normalised(qs, "queries")
            ids, scores = self._index.search_batch(
                qs, k, quantized=quantized, threads=threads, candidates=candidates
            )
            return ids, scores
        qn = _normalised(qs, "queries")
        if backend == "numpy":
            return self._search_batch_numpy(qn, k)
        results = [self._search_python(q, k, None) for q in qn]
        width = min((len(r[0]) for r in results), default=0)
        return (
            np.array([r[0][:width] for r in results], dtype=np.int64).reshape(len(qn), width),
            np.array([r[1][:width] for r in results], dtype=np.float32).reshape(len(qn), width),
        )

    # seed 001's method: matrix @ q + argpartition
    def _search_numpy(
        self, q: np.ndarray, k: int, allowed: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        view = self._file()
        ids, live = view.ids_and_live()
        # einsum: the same arithmetic for every row (BLAS's gemv blocks rows, so equal
        # rows could score a rounding apart and break ties to the lower row)
        scores = np.einsum("ij,j->i", np.asarray(view.matrix(), dtype=np.float32), q)
        scores = np.asarray(scores, dtype=np.float32)
        keep = live if allowed is None else live & np.isin(ids, allowed)
        scores = np.where(keep, scores, np.float32(-np.inf))
        top = _select(scores, k)
        return ids[top], scores[top]

    def _search_batch_numpy(self, qs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        view = self._file()
        ids, live = view.ids_and_live()
        all_scores = np.asarray(qs @ np.asarray(view.matrix(), dtype=np.float32).T, np.float32)
        all_scores[:, ~live] = -np.inf
        width = min(k, int(np.count_nonzero(live)))
        out_ids = np.empty((len(qs), width), dtype=np.int64)
        out_scores = np.empty((len(qs), width), dtype=np.float32)
        for j, row in enumerate(all_scores):
            top = _select(row, width) if width else np.zeros(0, dtype=np.int64)
            out_ids[j] = ids[top]
            out_scores[j] = row[top]
        return out_ids, out_scores

    # a loop and a sort: no numpy in the arithmetic
    def _search_python(
        self, q: np.ndarray, k: int, allowed: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        view = self._file()
        rows, ids, live = view.rows_python()
        admitted = None if allowed is None else set(allowed.tolist())
        qv = [float(x) for x in q.tolist()]
        dim = len(qv)
        hits: list[tuple[float, int]] = []
        for r in range(view.count):
            if not live[r] or (admitted is not None and ids[r] not in admitted):
                continue
            row = rows[r * dim : (r + 1) * dim]
            s = math.fsum(a * b for a, b in zip(qv, row, strict=True))
            hits.append((-s, r))
        hits.sort()
        hits = hits[:k]
        return (
            np.array([ids[r] for _, r in hits], dtype=np.int64),
            np.array([-s for s, _ in hits], dtype=np.float32),
        )
