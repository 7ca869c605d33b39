"""The opt-in approximate vector index: IVF over the vector file (issue 16, item 6).

Never used unless asked: ``Options(approximate=True)`` (``cortex search --approximate``,
``nprobe`` to trade speed for recall) after ``cortex index build --approximate`` (or
:func:`build`). Every answer it gives says so: ``Results.approximate`` (a dict: lists
probed of how many, rows scored, whether the answer is exact after all) and a notice. The
default search stays exact.

Design (rust/kernels/ann.rs has the file format): a spherical k-means coarse quantizer
(`nlist` centroids, trained on a seeded sample of the f16 rows) assigns every row of the
vector file to one list; the file ``<vector file>.ivf`` holds the centroids, each list's
row numbers and a copy of the rows' int8 records in list order. A search scores the query
against the centroids, scans the `nprobe` best lists' int8 records with their proven error
bounds, and rescores what the bounds cannot rule out from the f16 rows of the vector file:
the result is the exact top-k *of the probed rows*, with exact scores (the same the exact
search gives and the pipeline checks against SQLite), so the only approximation is which
lists are probed. With ``nprobe >= nlist`` the answer is the exact one.

- Rows appended after the build (the tail) are scanned exactly on every search, so nothing
  added later is missed; rows deleted or superseded are skipped through the vector file's
  live flags, as in the exact search; `allowed` (filters, the project wall) is applied to
  every row, and when the allowed rows are fewer than the probed lists hold, they are
  searched exactly instead (cheaper, and exact).
- The file names the vector file it was built from (its uuid) and the rows it covers: a
  rebuilt vector file (another uuid) makes it stale; a stale index is ignored (the search
  runs exact and says why) until it is built again. A damaged file (checksum, offsets,
  row numbers, all checked when it is opened) is an IndexFormatError from :func:`open_for`
  and, in a search, the same exact fallback with a notice naming the damage.
- Why IVF rather than HNSW: it is built in minutes at 1M on 2 cores from the existing
  rows (k-means on a sample, then one assignment pass), its lists reuse the int8 records
  and their exact bounds, and it needs 4 bytes a row beyond that copy; BENCHMARKS.md,
  "Approximate index", has the measurements that decided it and its limits.
"""

from __future__ import annotations

import math
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from cortex.errors import CortexError, IndexFormatError, InvalidOptionError

try:
    from cortex import _native
except ImportError:  # pragma: no cover - only without the compiled extension
    _native = None  # type: ignore[assignment]

__all__ = [
    "DEFAULT_NPROBE",
    "ann_path",
    "build",
    "default_nprobe",
    "default_params",
    "open_for",
    "search",
]

#: Lists a search probes when `nprobe` is not given (all of them below this many): with
#: nlist ~ 4·sqrt(rows) that is ~64·sqrt(rows) rows. Measured on real vectors (BENCHMARKS.md,
#: "Approximate index", quiet machine): recall@10 0.994 at 15.5x the exact search at 1M
#: (nlist 4096); 0.994 at only 3.6x at 100k, where the exact search takes ~3 ms.
DEFAULT_NPROBE = 256


def default_params(rows: int) -> dict[str, int]:
    """Build parameters for an index of `rows` rows: nlist, the power of two nearest
    4·sqrt(rows) (16..4096: 1024 at 100k, 4096 at 1M; at 1M 4096 lists gave recall@10
    0.992 at 20.8x where 2048 needed 6x the rows for 0.99, BENCHMARKS.md); the k-means
    sample, 32 rows a list; 8 iterations."""
    nlist = 2 ** round(math.log2(max(1.0, 4.0 * math.sqrt(max(rows, 1)))))
    nlist = max(1, min(4096, max(16, nlist), rows))
    return {"nlist": nlist, "sample": min(rows, 32 * nlist), "iters": 8}


def default_nprobe(nlist: int) -> int:
    """Lists probed when `nprobe` is not given: DEFAULT_NPROBE, at most every list."""
    return max(1, min(nlist, DEFAULT_NPROBE))


def ann_path(vector_path: str | os.PathLike[str]) -> Path:
    """The approximate index of the vector file at `vector_path`."""
    return Path(f"{os.fspath(vector_path)}.ivf")


def _need_native() -> Any:
    if _native is None or not hasattr(_native, "AnnIndex"):
        raise CortexError("the approximate index needs the native extension cortex._native")
    return _native


def build(
    index: Any,
    *,
    nlist: int | None = None,
    sample: int | None = None,
    iters: int | None = None,
    seed: int = 0,
    threads: int | None = None,
) -> dict[str, Any]:
    """Build the approximate index of `index` (a cortex.vectors.VectorIndex) beside its
    file, replacing any there. Returns what was built (lists, rows, path)."""
    native = _need_native()
    rows = index.rows
    if rows == 0:
        raise InvalidOptionError("the vector index is empty: nothing to build")
    p = default_params(rows)
    for name, value in (("nlist", nlist), ("sample", sample), ("iters", iters)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidOptionError(f"{name} must be an integer >= 1, got {value!r}")
            p[name] = value
    path = ann_path(index.path)
    lists, covered = native.AnnIndex.build(
        index._index, str(path), p["nlist"], p["sample"], p["iters"], seed, threads
    )
    with _lock:
        _cache.pop(str(path), None)
    return {
        "path": str(path),
        "nlist": lists,
        "rows": covered,
        **{"sample": p["sample"], "iters": p["iters"]},
    }


def built_nlist(path: Path) -> int | None:
    """The lists of the approximate index at `path` (to rebuild it alike), None when it
    cannot be read."""
    try:
        return int(_need_native().AnnIndex.open(str(path)).nlist)
    except CortexError:
        return None


_lock = threading.Lock()
#: path -> (mtime_ns, size, AnnIndex): an index is opened (and checked) once per change.
_cache: dict[str, tuple[int, int, Any]] = {}


def open_for(index: Any) -> Any | None:
    """The approximate index of `index` (a VectorIndex) when there is one and it is in step
    (built from this very vector file); None when there is none or it is stale. Raises
    IndexFormatError when the file is damaged."""
    native = _need_native()
    path = ann_path(index.path)
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    key = str(path)
    with _lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] == st.st_mtime_ns and hit[1] == st.st_size:
            ann = hit[2]
        else:
            ann = native.AnnIndex.open(key)  # checks everything; IndexFormatError if damaged
            _cache[key] = (st.st_mtime_ns, st.st_size, ann)
    if ann.uuid != index.uuid or ann.rows > index.rows or ann.dim != index.dim:
        return None
    return ann


def search(
    index: Any,
    query: np.ndarray,
    k: int,
    *,
    nprobe: int | None = None,
    allowed: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Top-k of `index` through its approximate index: (ids, scores, info). `info` says
    how it ran: ``approximate`` (False when the search ran exact: no index, a stale or
    damaged one, or every list probed), ``nprobe``/``nlist``, ``rows_scored`` (of
    ``rows``), ``tail`` (rows added since the build, scanned exactly), and ``reason`` when
    it fell back to the exact search. Never raises for a missing, stale or damaged index:
    it answers exactly and says why."""
    if nprobe is not None and (
        isinstance(nprobe, bool) or not isinstance(nprobe, int) or nprobe < 1
    ):
        raise InvalidOptionError(f"nprobe must be an integer >= 1, got {nprobe!r}")
    rows = index.rows
    reason = None
    try:
        ann = open_for(index)
        if ann is None:
            reason = (
                "no approximate index: build it with `cortex index build --approximate`"
                if not ann_path(index.path).exists()
                else "the approximate index is stale (built from an older vector index):"
                " rebuild it with `cortex index build --approximate`"
            )
    except IndexFormatError as exc:
        ann, reason = None, f"the approximate index is damaged ({exc})"
    if ann is None:
        ids, scores = index.search(query, k, allowed=allowed)
        return (
            ids,
            scores,
            {"approximate": False, "reason": reason, "rows": rows, "rows_scored": rows},
        )
    probes = nprobe if nprobe is not None else default_nprobe(ann.nlist)
    q = np.ascontiguousarray(query, dtype=np.float32)
    a = None if allowed is None else np.ascontiguousarray(allowed, dtype=np.int64)
    ids, scores, scored, exact = ann.search(index._index, q, k, probes, a)
    info = {
        "approximate": not exact,
        "method": "ivf",
        "nprobe": min(probes, ann.nlist),
        "nlist": ann.nlist,
        "rows": rows,
        "rows_scored": int(scored),
        "tail": rows - ann.rows,
    }
    return ids, scores, info


def notice(info: dict[str, Any]) -> str:
    """The sentence a user reads about how an approximate search ran."""
    if not info.get("approximate"):
        why = info.get("reason")
        return "approximate search asked for, exact search ran" + (
            f": {why}" if why else " (the probed lists covered every allowed row)"
        )
    return (
        f"approximate vector search (IVF, {info['nprobe']} of {info['nlist']} lists,"
        f" {info['rows_scored']:,} of {info['rows']:,} rows scored): a near memory in a"
        " list not probed is missed; raise nprobe or search without approximate"
    )


def semantic_search(
    semantic: Any,
    query: np.ndarray,
    k: int,
    *,
    nprobe: int | None = None,
    allowed: np.ndarray | None = None,
    held: tuple[Any, Any],
) -> tuple[np.ndarray, np.ndarray, Any, dict[str, Any]]:
    """`Semantic.search_unchecked` through the approximate index of `held` (the index
    this search checked and the SQLite position it is in step with): (ids, scores, that
    position, info). The pipeline checks the rows of the page against SQLite as it does
    for the exact search (the scores are exact)."""
    index, seen = held
    ids, scores, info = search(index, query, k, nprobe=nprobe, allowed=allowed)
    if len(np.unique(ids)) != len(ids):  # damage: the exact path repairs or refuses
        ids, scores, seen = semantic.search_unchecked(query, k, allowed=allowed, held=held)
        info = {
            "approximate": False,
            "reason": "the vector index returned a row twice",
            "rows": info["rows"],
            "rows_scored": info["rows"],
        }
    return ids, scores, seen, info
