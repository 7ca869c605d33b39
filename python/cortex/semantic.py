"""Semantic search: the embedder, the stored embeddings and the derived vector index.

Embeddings live in SQLite (`embeddings`: memory id, model id, content hash, f32 blob),
written in the same transaction as the memory they belong to. The vector index, in the
folder beside the database (``<db>-index/vectors-<model>``), is derived from them:
appended as embeddings are added, masked as memories are deleted, and rebuilt from
SQLite when it is missing, of another model, or does not match the state file written
after every sync (a killed process leaves exactly that mismatch). Writers take an
exclusive file lock to sync; searchers only read and refresh.

Vectors of another model are never mixed into a search: the index of the active model
holds only its rows, and lookups by content hash are per model.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import json
import os
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cortex import filters
from cortex._lazy import LazyModule
from cortex.errors import CortexError, EmbeddingError, IndexFormatError, InvalidOptionError
from cortex.log import get_logger
from cortex.options import Options
from cortex.ranking import RankInfo
from cortex.store import Store, content_hash

if TYPE_CHECKING:
    import numpy as np
else:  # imported when a vector is first touched (start-up of keyword-only commands)
    np = LazyModule("numpy")

__all__ = ["SemHit", "Semantic", "index_dir"]

#: Rows fetched beyond the pool when the search is not restricted to an allowed set, so
#: that superseded memories (filtered after the scan) rarely leave the pool short.
OVERFETCH = 32
_EMBED_BATCH = 64

_log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class SemHit:
    memory_id: int
    score: float  # cosine similarity
    info: RankInfo


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


def _has_filters(opts: Options) -> bool:
    """Whether `opts` narrows the memories beyond dropping deleted/superseded ones."""
    return any(
        v is not None
        for v in (
            opts.project,
            opts.session,
            opts.sector,
            opts.tier,
            opts.scope,
            opts.category,
            opts.source_prefix,
            opts.min_salience,
            opts.created_since,
            opts.created_until,
        )
    )


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
    def read_only(self) -> bool:
        return self._store.read_only

    # ------------------------------------------------------------------ writing

    def vectors_for(self, contents: Sequence[str], progress: Any = None) -> dict[str, bytes]:
        """f32 blobs by content hash for `contents`: reused from SQLite when this model
        already embedded the same text, embedded in batches otherwise."""
        embedder = self.embedder()
        model = str(embedder.model_id)
        hashes = {content_hash(c): c for c in contents}
        known: dict[str, bytes] = {}
        todo = list(hashes)
        for start in range(0, len(todo), 500):
            part = todo[start : start + 500]
            marks = ",".join("?" * len(part))
            for h, blob in self._store.query(
                f"SELECT content_hash, vector FROM embeddings WHERE model_id = ?"
                f" AND content_hash IN ({marks}) GROUP BY content_hash",
                [model, *part],
            ):
                known[h] = blob
        missing = [h for h in todo if h not in known]
        if missing:
            vecs = _embed_sorted(embedder, [hashes[h] for h in missing], progress)
            for h, v in zip(missing, vecs, strict=True):
                known[h] = np.ascontiguousarray(v, dtype="<f4").tobytes()
        return known

    def supplied(self, vectors: Any, n: int) -> list[bytes]:
        """f32 blobs of vectors a caller computed with the active model, checked: shape
        ``(n, dim)``, every value finite, no zero row."""
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
        arr = np.ascontiguousarray(arr, dtype="<f4")
        return [row.tobytes() for row in arr]

    def bulk_writer(self, now: float) -> Any:
        """Stores the vectors of many memories in one statement, inside the caller's
        transaction: (tx, memory ids, content hashes, f32 blobs)."""
        embedder = self.embedder()
        model, dim = str(embedder.model_id), int(embedder.dim)

        def write(tx: Any, ids: list[int], hashes: list[str], blobs: list[bytes]) -> None:
            tx.executemany(
                "INSERT OR REPLACE INTO embeddings (memory_id, model_id, dim, content_hash,"
                " vector, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                [(i, model, dim, h, b, now) for i, h, b in zip(ids, hashes, blobs, strict=True)],
            )

        return write

    def write(
        self, tx: Any, memory_id: int, chash: str, blob: bytes, now: float, *, replace: bool = True
    ) -> None:
        """Store one embedding inside the caller's transaction; with ``replace=False`` only
        when the memory has no vector of this model yet (a kept, unchanged memory)."""
        embedder = self.embedder()
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        tx.execute(
            f"{verb} INTO embeddings (memory_id, model_id, dim, content_hash, vector,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?)",
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

    def index_path(self) -> Path:
        """The vector file of the active model, in the database's index folder (its
        ``.ids``/``.q8``/``.sum``/``.state``/``.lock`` are named after it)."""
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", self.model_id)[:60]
        digest = hashlib.sha256(self.model_id.encode()).hexdigest()[:8]
        folder = index_dir(self._store.path, create=not self._store.read_only)
        return folder / f"vectors-{slug}-{digest}"

    def _state_path(self) -> Path:
        return Path(f"{self.index_path()}.state")

    @contextlib.contextmanager
    def _write_lock(self) -> Iterator[None]:
        lock_path = Path(f"{self.index_path()}.lock")
        with open(lock_path, "a+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def _wanted(self) -> tuple[int, float]:
        """(last embeddings rowid, last deletion time) in SQLite now: two index lookups,
        cheap enough to run before every search. Rows of other models move the first
        too; syncing then appends nothing and only moves the state forward."""
        seq = self._store.query("SELECT COALESCE(MAX(rowid), 0) FROM embeddings")[0][0]
        deleted = self._store.query(
            "SELECT COALESCE(MAX(deleted_at), 0) FROM memories WHERE deleted_at IS NOT NULL"
        )[0][0]
        return int(seq), float(deleted)

    def _read_state(self) -> dict[str, Any] | None:
        try:
            state = json.loads(self._state_path().read_text())
        except (OSError, ValueError):
            return None
        return state if isinstance(state, dict) else None

    def _write_state(self, state: dict[str, Any]) -> None:
        tmp = Path(f"{self._state_path()}.tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self._state_path())

    def index(self) -> Any:
        """The vector index of the active model, in step with SQLite (synced if not)."""
        from cortex.vectors import VectorIndex

        wanted = self._wanted()
        if self._index is not None and self._index_state == wanted:
            return self._index
        with self._lock:
            state = self._read_state()
            if (
                self._index is not None
                and state is not None
                and (state.get("seq"), state.get("deleted")) == wanted
            ):
                self._index.refresh()  # another process synced it: see its rows
                self._index_state = wanted
                return self._index
            if self._store.read_only:
                fresh = state is not None and (state.get("seq"), state.get("deleted")) == wanted
                if not fresh:
                    raise IndexFormatError(
                        f"the vector index of {self._store.path} is behind the database and the"
                        " database is open read-only; open it writable once or run"
                        " `cortex reindex`"
                    )
            else:
                self._sync(wanted)
            if self._index is not None:
                self._index.close()
                self._index = None
            try:
                index = VectorIndex.open(self.index_path())
                self._verify(index)
            except IndexFormatError:
                if self._store.read_only:
                    raise
                self._sync(wanted, rebuild=True)
                index = VectorIndex.open(self.index_path())
            self._index = index
            self._index_state = wanted
            return self._index

    def _verify(self, index: Any, sample: int = 32) -> None:
        """Spot-check rows of the index against the embeddings in SQLite. Opening checks
        the header and the last block's checksum (a full `index.verify()` reads every row:
        0.2 s at 1M); rows that are intact but are not this database's, such as another
        database's index or rows overwritten with valid numbers, fail here and are rebuilt
        instead of answering wrong."""
        ids, rows = index.sample(sample)
        if len(ids) == 0:
            return
        marks = ",".join("?" * len(ids))
        stored = {
            int(i): np.frombuffer(blob, dtype="<f4")
            for i, blob in self._store.query(
                f"SELECT memory_id, vector FROM embeddings WHERE model_id = ?"
                f" AND memory_id IN ({marks})",
                [self.model_id, *ids.tolist()],
            )
        }
        for memory_id, row in zip(ids.tolist(), rows, strict=True):
            vec = stored.get(memory_id)
            if vec is None or vec.shape != row.shape:
                raise IndexFormatError(f"{index.path}: row of memory {memory_id} has no source")
            norm = float(np.linalg.norm(vec))
            if not np.isfinite(row).all() or not np.allclose(row, vec / norm, atol=1e-4):
                raise IndexFormatError(
                    f"{index.path}: the row of memory {memory_id} does not match its embedding;"
                    " rebuild the index (`cortex reindex`)"
                )

    def _sync(self, wanted: tuple[int, float], *, rebuild: bool = False) -> None:
        """Bring the index file up to `wanted` (under the writer lock), rebuilding it from
        SQLite when it is missing, damaged, of another model or out of step with its state."""
        from cortex.vectors import VectorIndex

        embedder = self.embedder()
        model, dim = str(embedder.model_id), int(embedder.dim)
        path = self.index_path()
        with self._write_lock():
            state = self._read_state()
            writer = None
            if not rebuild and state is not None and path.exists():
                try:
                    writer = VectorIndex.open(path, writable=True)
                    if (
                        writer.model_id != model
                        or writer.dim != dim
                        or writer.rows != state.get("rows")
                    ):
                        writer.close()
                        writer = None
                except (IndexFormatError, CortexError):
                    writer = None
            if writer is None:
                _log.info("building the vector index of %s from SQLite at %s", model, path)
                writer = VectorIndex.create(path, dim, model)
                state = {"seq": 0, "deleted": 0.0, "rows": 0}
            assert state is not None
            try:
                seq = int(state.get("seq", 0))
                for rowid_batch in self._embedding_batches(model, dim, seq):
                    ids, vecs, last = rowid_batch
                    writer.append(ids, vecs)
                    seq = last
                deleted_since = float(state.get("deleted", 0.0))
                gone = [
                    int(i)
                    for (i,) in self._store.query(
                        "SELECT id FROM memories WHERE deleted_at IS NOT NULL AND deleted_at > ?",
                        (deleted_since,),
                    )
                ]
                if gone:
                    writer.mask(np.asarray(gone, dtype=np.int64))
                writer.sync()
                self._write_state(
                    {"seq": max(seq, wanted[0]), "deleted": wanted[1], "rows": writer.rows}
                )
            finally:
                writer.close()

    def _embedding_batches(
        self, model: str, dim: int, after: int
    ) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
        last = after
        while True:
            # `+model_id` keeps the planner on the rowid range: through the model index it
            # sorted every row of the model for each batch (quadratic: 365 s at 1M).
            rows = self._store.query(
                "SELECT rowid, memory_id, vector FROM embeddings WHERE rowid > ? AND +model_id = ?"
                " ORDER BY rowid LIMIT 5000",
                (last, model),
            )
            if not rows:
                return
            ids = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
            vecs = np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4").reshape(-1, dim)
            last = int(rows[-1][0])
            yield ids, np.ascontiguousarray(vecs, dtype=np.float32), last

    def rebuild(self) -> int:
        """Rebuild the vector index of the active model from SQLite; returns its live rows."""
        with self._lock:
            if self._index is not None:
                self._index.close()
                self._index = None
            wanted = self._wanted()
            self._sync(wanted, rebuild=True)
            self._index_state = None
        return len(self.index())

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    # ------------------------------------------------------------------ search

    def search(self, text: str, opts: Options, pool: int, _retried: bool = False) -> list[SemHit]:
        """Up to `pool` memories by cosine similarity to `text`, at least
        `opts.min_similarity`, under `opts`'s filters, best first."""
        embedder = self.embedder()
        query = np.asarray(embedder.embed(text), dtype=np.float32)
        if query.shape != (embedder.dim,) or not np.isfinite(query).all():
            raise EmbeddingError("the embedder returned an unusable query vector")
        index = self.index()
        if len(index) == 0:
            return []
        predicate, params = filters.where(opts)
        if _has_filters(opts):
            allowed = np.fromiter(
                (
                    r[0]
                    for r in self._store.query(
                        f"SELECT m.id FROM memories m WHERE {predicate} ORDER BY m.id", params
                    )
                ),
                dtype=np.int64,
            )
            if len(allowed) == 0:
                return []
            ids, scores = index.search(query, min(pool, len(allowed)), allowed=allowed)
        else:
            ids, scores = index.search(query, min(pool + OVERFETCH, len(index)))
        if len(scores) and (not np.isfinite(scores).all() or np.abs(scores).max() > 1.001):
            # Not a cosine: a damaged row the spot check did not sample. Rebuild once.
            if self._store.read_only or _retried:
                worst = float(np.abs(scores).max())
                raise IndexFormatError(
                    f"{self.index_path()}: damaged rows (a score of {worst:.3g});"
                    " rebuild the index (`cortex reindex`)"
                )
            self.rebuild()
            return self.search(text, opts, pool, _retried=True)
        keep = scores >= opts.min_similarity
        ids, scores = ids[keep], scores[keep]
        if len(ids) == 0:
            return []
        meta = filters.admitted(self._store, ids.tolist(), opts)
        hits = [
            SemHit(int(i), float(s), meta[int(i)])
            for i, s in zip(ids, scores, strict=True)
            if int(i) in meta
        ]
        return hits[:pool]
