#!/usr/bin/env python
"""Exact and quantized cosine top-k: cortex beside numpy, faiss and usearch, in one run.

Speed (random L2-normalised rows, seeded; warm page cache; medians)::

    python benches/bench_topk.py --n 100000 1000000 --threads 1 2

Quality of the int8 scan (real all-MiniLM-L6-v2 vectors: ``corpus.npy`` and
``queries.npy`` of float32 unit rows in DIR, e.g. SciFact embedded with
cortex.embed; nothing is downloaded)::

    python benches/bench_topk.py --quality DIR

Quality on one file of real rows (rows of zeros skipped; the last 1000 are the queries)::

    python benches/bench_topk.py --real /tmp/cortex-bench/partial.npy

cortex stores rows as f16 (the values SQLite holds); the peers search the same rows
widened to f32 (their format), and numpy's answer on them is the reference. Each cortex
scan is also timed beside its read floor, in the same run: ``NativeIndex.read_floor``, a
bare AVX2 loop reading the same bytes (the f16 rows, or the int8 records) on the same
number of threads and doing nothing else (with the scans' software prefetch and without: the
faster is the floor); the ratio lines report each scan as x its floor.

Each exact scan beside its read floor, interleaved query by query in one process (per
query: the f16 rows' floor, the f16 scan, the int8 records' floor, the int8 screen at each
k), medians and ratios (wall, and CPU: the machine may be shared), at every N, thread
count and k (issue 16's "Exact scans ≤ 1.2× their read floor")::

    python benches/bench_topk.py --floors --n 100000 1000000 --threads 1 2 --floor-k 10 132 \
        --rounds 40 --dir /tmp/cortex-floors --keep

Peers: numpy ``M @ q`` + ``argpartition`` (seed 001's method) and ``Q @ M.T`` for
batches, faiss-cpu ``IndexFlatIP``, usearch exact search (``usearch.index.search``
with ``exact=True``). They are optional: a peer that is not installed is skipped
(benches/requirements.txt lists them). Every row of the output records the
recall@k of the method against numpy's exact answer next to its time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from cortex import _native
from cortex.vectors import VectorIndex

try:
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover
    threadpool_limits = None

try:
    import faiss
except ImportError:  # pragma: no cover
    faiss = None

try:
    import usearch.index as usearch_index
except ImportError:  # pragma: no cover
    usearch_index = None


def unit_rows(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def build_index(path: Path, n: int, dim: int) -> VectorIndex:
    vi = VectorIndex.create(path, dim, "bench-random")
    step = 100_000
    for start in range(0, n, step):
        m = min(step, n - start)
        vi.append(np.arange(start, start + m), unit_rows(m, dim, seed=start + 1))
    return vi


def median_ms(fn: Callable[[Any], Any], inputs: list[Any], warmup: int = 2) -> float:
    for x in inputs[:warmup]:
        fn(x)
    times = []
    for x in inputs:
        t = time.perf_counter()
        fn(x)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def seconds(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def numpy_topk(m: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    s = m @ q
    part = np.argpartition(-s, k - 1)[:k]
    return part[np.argsort(-s[part], kind="stable")]


def numpy_topk_batch(m: np.ndarray, qs: np.ndarray, k: int) -> np.ndarray:
    s = qs @ m.T
    out = np.empty((len(qs), k), dtype=np.int64)
    for j, row in enumerate(s):
        part = np.argpartition(-row, k - 1)[:k]
        out[j] = part[np.argsort(-row[part], kind="stable")]
    return out


def recall(got: np.ndarray, want: np.ndarray) -> float:
    got, want = np.atleast_2d(got), np.atleast_2d(want)
    hits = sum(len(set(g.tolist()) & set(w.tolist())) for g, w in zip(got, want, strict=True))
    return hits / want.size


def _usearch_version() -> str:
    try:
        import usearch

        return str(usearch.__version__)
    except ImportError:
        return "absent"


def machine() -> dict[str, str]:
    model = platform.processor()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return {
        "cpu": model,
        "cores": str(os.cpu_count()),
        "simd": _native.simd_level(),
        "int8 kernel": getattr(_native, "int8_kernel", lambda: "avx2 (before int8_kernel)")(),
        "numpy": np.__version__,
        "faiss": getattr(faiss, "__version__", "absent") if faiss else "absent",
        "usearch": _usearch_version(),
        "python": platform.python_version(),
        "date": dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
    }


def run_speed(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    tmp = Path(args.dir or tempfile.mkdtemp(prefix="cortex-bench-"))
    for n in args.n:
        path = tmp / f"bench-{n}-{args.dim}.cvx"
        t = time.perf_counter()
        vi = build_index(path, n, args.dim)
        print(f"# N={n}: built the index in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        half = np.memmap(path, dtype="<f2", mode="r", offset=4096, shape=(n, args.dim))
        m = np.asarray(half, dtype=np.float32)  # the peers' copy: the same rows, widened
        flat = None
        if faiss is not None and "faiss" in args.peers:
            flat = faiss.IndexFlatIP(args.dim)
            flat.add(np.ascontiguousarray(m))
        for threads in args.threads:
            limits = threadpool_limits(threads) if threadpool_limits else None
            if faiss is not None:
                faiss.omp_set_num_threads(threads)
            bench_one(args, Case(n, threads, vi, m, flat), rows)
            if limits is not None:
                limits.unregister()
        vi.close()
        if not args.keep:
            for suffix in ("", ".ids", ".q8", ".sum"):
                Path(str(path) + suffix).unlink(missing_ok=True)
    if not args.dir and not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


class Case:
    """One (N, threads) configuration and the structures every method searches."""

    def __init__(self, n: int, threads: int, vi: VectorIndex, m: np.ndarray, flat: Any) -> None:
        self.n, self.threads, self.vi, self.m, self.flat = n, threads, vi, m, flat


def bench_one(args: argparse.Namespace, c: Case, rows: list[dict[str, Any]]) -> None:
    n, threads, vi, m, flat, k = c.n, c.threads, c.vi, c.m, c.flat, args.k
    queries = list(unit_rows(args.queries, args.dim, seed=7))
    batch = unit_rows(args.batch, args.dim, seed=8)
    rng = np.random.default_rng(3)
    allowed = np.sort(rng.choice(n, size=max(k, n // 100), replace=False)).astype(np.int64)
    want = np.array([numpy_topk(m, q, k) for q in queries])
    want_batch = numpy_topk_batch(m, batch, k)
    want_f = np.array([allowed[numpy_topk(m[allowed], q, k)] for q in queries])

    def add(kind: str, method: str, value: float, got: Any, ref: Any) -> None:
        row = {"n": n, "threads": threads, "kind": kind, "method": method}
        row.update(value=value, recall=recall(got, ref))
        rows.append(row)
        unit = "ms" if kind != "batch" else "q/s"
        print(
            f"N={n:>8} t={threads} {kind:<7} {method:<28} {value:10.2f} {unit}"
            f"  recall={row['recall']:.4f}",
            file=sys.stderr,
        )

    def single(method: str, fn: Callable[[np.ndarray], Any], ids: Callable[[Any], Any]) -> None:
        got = np.array([ids(fn(q)) for q in queries])
        add("single", method, median_ms(fn, queries), got, want)

    # ---- single query
    single("numpy gemv+argpartition", lambda q: numpy_topk(m, q, k), lambda r: r)
    if flat is not None:
        single("faiss IndexFlatIP", lambda q: flat.search(q[None, :], k), lambda r: r[1][0])
    if usearch_index is not None and "usearch" in args.peers:
        single(
            "usearch exact",
            lambda q: usearch_index.search(m, q, k, "ip", exact=True, threads=threads),
            lambda r: r.keys,
        )
    native = vi._index  # the read floor is a bench helper of the extension, not API
    floors = (("rows", "read floor: f16 rows"), ("q8", "read floor: int8 records"))

    def floor(again: str) -> None:
        # timed like a query (same count, median), before and after the scans; the
        # faster of the loop with the scans' software prefetch and without
        for part, method in floors:
            ms = min(
                median_ms(lambda _q, p=part, f=pf: native.read_floor(p, threads, f), queries)
                for pf in (True, False)
            )
            add("single", method + again, ms, want, want)

    floor("")
    single(
        "cortex exact f16",
        lambda q: vi.search(q, k, threads=threads, quantized=False),
        lambda r: r[0],
    )
    single(
        "cortex exact, int8 bound",
        lambda q: vi.search(q, k, threads=threads, quantized=True),
        lambda r: r[0],
    )
    floor(" (again)")
    for label, quantized in (("f16", False), ("int8 bound", True)):

        def filtered(q: np.ndarray, quantized: bool = quantized) -> Any:
            return vi.search(q, k, threads=threads, allowed=allowed, quantized=quantized)

        got_f = np.array([filtered(q)[0] for q in queries])
        add("single", f"cortex allowed=1%, {label}", median_ms(filtered, queries), got_f, want_f)

    # ---- batch (the slow peers run once at 1M: each run takes tens of seconds)
    reps = args.batch_repeats
    slow_reps = 1 if n >= 500_000 else reps

    def batch_of(method: str, fn: Callable[[], Any], ids: Callable[[Any], Any], r: int) -> None:
        add("batch", method, args.batch / seconds(fn, r), ids(fn()), want_batch)

    batch_of("numpy GEMM+argpartition", lambda: numpy_topk_batch(m, batch, k), lambda r: r, reps)
    if flat is not None:
        batch_of("faiss IndexFlatIP", lambda: flat.search(batch, k), lambda r: r[1], slow_reps)
    if usearch_index is not None and "usearch" in args.peers:
        batch_of(
            "usearch exact",
            lambda: usearch_index.search(m, batch, k, "ip", exact=True, threads=threads),
            lambda r: r.keys,
            slow_reps,
        )
    batch_of(
        "cortex exact f16",
        lambda: vi.search_batch(batch, k, threads=threads, quantized=False),
        lambda r: r[0],
        reps,
    )
    batch_of(
        "cortex exact, int8 bound",
        lambda: vi.search_batch(batch, k, threads=threads, quantized=True),
        lambda r: r[0],
        reps,
    )


def floors_one(
    vi: VectorIndex, threads: int, ks: list[int], queries: list[Any]
) -> dict[str, list[float]]:
    """Ms of each floor and scan on one index per query (the first two are warm-ups),
    alternated query by query."""
    native = vi._index  # the read floor is a bench helper of the extension, not API

    def floor(part: str, prefetch: bool) -> Callable[[np.ndarray], Any]:
        if not hasattr(_native, "int8_kernel"):  # an older extension: one floor loop
            return lambda _q: native.read_floor(part, threads)
        return lambda _q: native.read_floor(part, threads, prefetch)

    def scan(k: int, quantized: bool) -> Callable[[np.ndarray], Any]:
        return lambda q: vi.search(q, k, threads=threads, quantized=quantized)

    methods = [("floor f16, prefetch", floor("rows", True))]
    methods += [("floor f16, no prefetch", floor("rows", False))]
    methods += [(f"f16 scan k={k}", scan(k, False)) for k in ks]
    methods += [("floor q8, prefetch", floor("q8", True))]
    methods += [("floor q8, no prefetch", floor("q8", False))]
    methods += [(f"int8 screen k={k}", scan(k, True)) for k in ks]
    times: dict[str, list[float]] = {name: [] for name, _ in methods}
    cpu: dict[str, list[float]] = {f"{name}, cpu": [] for name, _ in methods}
    # CPU time beside the wall (the machine is shared): one thread runs on the
    # calling thread (its own clock, nothing else counted); more, on threads the
    # call spawns and joins (the process's clock counts them)
    clock = time.thread_time if threads == 1 else time.process_time
    for q in queries:
        for name, fn in methods:
            c0, t0 = clock(), time.perf_counter()
            fn(q)
            times[name].append((time.perf_counter() - t0) * 1e3)
            cpu[f"{name}, cpu"].append((clock() - c0) * 1e3)
    return {name: v[2:] for name, v in (times | cpu).items()}


def run_floors(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each exact scan and its read floor, alternated query by query (see the doc)."""
    rows: list[dict[str, Any]] = []
    tmp = Path(args.dir or tempfile.mkdtemp(prefix="cortex-floors-"))
    tmp.mkdir(parents=True, exist_ok=True)
    queries = list(unit_rows(args.rounds + 2, args.dim, seed=7))
    for n in args.n:
        path = tmp / f"bench-{n}-{args.dim}.cvx"
        if not path.exists():
            build_index(path, n, args.dim).close()
        vi = VectorIndex.open(path)
        for threads in args.threads:
            per = floors_one(vi, threads, args.floor_k, queries)
            # the floor: the faster bare read (the prefetch helps on some CPUs, hurts on
            # others), chosen by its median and then read query by query as the scans
            # are, one call each (a per-query minimum of the two loops would be the
            # best of two draws against the scan's one: lower by the noise alone);
            # each scan's ratio to the floor read beside it (the median of those is
            # robust to the load changing during the run), on the wall and CPU clocks
            for part in ("f16", "q8"):
                for clock in ("", ", cpu"):
                    pf = per[f"floor {part}, prefetch{clock}"]
                    npf = per[f"floor {part}, no prefetch{clock}"]
                    faster = pf if statistics.median(pf) < statistics.median(npf) else npf
                    per[f"floor {part}{clock}"] = faster
            for name, v in per.items():
                if name.endswith(", cpu"):
                    continue
                part = "q8" if name.startswith("int8") else "f16"
                row: dict[str, Any] = {"n": n, "threads": threads, "method": name}
                row["ms"] = statistics.median(v)
                row["cpu_ms"] = statistics.median(per[f"{name}, cpu"])
                if not name.startswith("floor"):
                    floor, floor_cpu = per[f"floor {part}"], per[f"floor {part}, cpu"]
                    row["x_floor"] = row["ms"] / statistics.median(floor)
                    row["x_floor_per_query"] = statistics.median(
                        [a / b for a, b in zip(v, floor, strict=True)]
                    )
                    row["x_floor_cpu"] = row["cpu_ms"] / statistics.median(floor_cpu)
                rows.append(row)
        vi.close()
    if not args.dir and not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def ratios(rows: list[dict[str, Any]]) -> list[str]:
    """The issue's targets as ratios to the peer measured in the same run."""

    def get(n: int, t: int, kind: str, method: str) -> float | None:
        for r in rows:
            if (r["n"], r["threads"], r["kind"], r["method"]) == (n, t, kind, method):
                return float(r["value"])
        return None

    out = []
    for n in sorted({r["n"] for r in rows}):
        for t in sorted({r["threads"] for r in rows}):
            npy = get(n, t, "single", "numpy gemv+argpartition")
            ex = get(n, t, "single", "cortex exact f16")
            q8 = get(n, t, "single", "cortex exact, int8 bound")
            fl = get(n, t, "single", "cortex allowed=1%, int8 bound")
            fl32 = get(n, t, "single", "cortex allowed=1%, f16")
            floors = [
                get(n, t, "single", f"read floor: {what}{again}")
                for what in ("f16 rows", "int8 records")
                for again in ("", " (again)")
            ]
            f16_floor = min(x for x in floors[:2] if x) if any(floors[:2]) else None
            q8_floor = min(x for x in floors[2:] if x) if any(floors[2:]) else None
            fa = get(n, t, "single", "faiss IndexFlatIP")
            us = get(n, t, "single", "usearch exact")
            gemm = get(n, t, "batch", "numpy GEMM+argpartition")
            bex = get(n, t, "batch", "cortex exact f16")
            bq8 = get(n, t, "batch", "cortex exact, int8 bound")
            line = f"N={n} threads={t}:"
            if ex and f16_floor:
                line += f" f16 scan {ex / f16_floor:.2f}x its read floor ({f16_floor:.2f} ms);"
            if q8 and q8_floor:
                line += f" int8 screen {q8 / q8_floor:.2f}x its read floor ({q8_floor:.2f} ms);"
            if npy and ex:
                line += f" exact vs numpy {npy / ex:.2f}x;"
            if fa and ex:
                line += f" vs faiss {fa / ex:.2f}x;"
            if us and ex:
                line += f" vs usearch {us / ex:.2f}x;"
            if npy and q8:
                line += f" int8 bound vs numpy {npy / q8:.2f}x;"
            if ex and fl:
                line += f" 1% filter (int8 bound) vs unfiltered f16 scan {ex / fl:.1f}x;"
            if q8 and fl:
                line += f" vs unfiltered int8 bound {q8 / fl:.1f}x;"
            if ex and fl32:
                line += f" 1% filter (f16) vs unfiltered f16 scan {ex / fl32:.1f}x;"
            if gemm and bex:
                line += f" batch exact vs GEMM {bex / gemm:.2f}x;"
            if gemm and bq8:
                line += f" batch int8 bound vs GEMM {bq8 / gemm:.2f}x;"
            out.append(line)
    return out


# ---------------------------------------------------------------- quality


def run_quality(args: argparse.Namespace) -> dict[str, Any]:
    """recall@k and top-1 agreement of the int8 scan against exact f32 on real vectors,
    for several candidate counts, beside what f16 and 1-bit copies would give."""
    if args.real:
        # One file of embedded rows (rows of zeros are not embedded yet): the
        # last `--real-queries` non-zero rows are the queries, the rest the corpus.
        allrows = np.load(args.real, mmap_mode="r")
        nonzero = np.flatnonzero(np.any(allrows != 0, axis=1))
        filled = int(nonzero[-1]) + 1 if len(nonzero) else 0
        data = np.asarray(allrows[:filled], dtype=np.float32)
        data = data[np.any(data != 0, axis=1)]
        cut = len(data) - args.real_queries
        corpus, queries = data[:cut], data[cut:]
    else:
        d = Path(args.quality)
        corpus = np.load(d / "corpus.npy").astype(np.float32)
        queries = np.load(d / "queries.npy").astype(np.float32)
    n, dim = corpus.shape
    k = args.k
    tmp = Path(tempfile.mkdtemp(prefix="cortex-quality-"))
    vi = VectorIndex.create(tmp / "q.cvx", dim, "all-MiniLM-L6-v2")
    vi.append(np.arange(n), corpus)
    exact_ids, _ = vi.search_batch(queries, k, quantized=False)
    t = time.perf_counter()
    exact_scores_f32 = vi.search_batch(queries, k, quantized=False)[1]
    f32_seconds = time.perf_counter() - t
    res: dict[str, Any] = {"n": n, "dim": dim, "queries": len(queries), "k": k, "int8": {}}
    t = time.perf_counter()
    bound_ids, bound_scores = vi.search_batch(queries, k, quantized=True)
    res["int8 bound (exact)"] = {
        "recall": recall(bound_ids, exact_ids),
        "top1": float(np.mean(bound_ids[:, 0] == exact_ids[:, 0])),
        "identical ids and scores": bool(
            np.array_equal(bound_ids, exact_ids) and np.array_equal(bound_scores, exact_scores_f32)
        ),
        "seconds": time.perf_counter() - t,
        "f32 scan seconds": f32_seconds,
    }
    for c in (k, 2 * k, 4 * k, 50, 100, 200):
        got, _ = vi.search_batch(queries, k, quantized=True, candidates=c)
        res["int8"][c] = {
            "recall": recall(got, exact_ids),
            "top1": float(np.mean(got[:, 0] == exact_ids[:, 0])),
        }
    default = vi.search_batch(queries, k, quantized=True)[0]
    res["int8"]["default"] = {
        "recall": recall(default, exact_ids),
        "top1": float(np.mean(default[:, 0] == exact_ids[:, 0])),
    }
    # What the other copies would give, simulated with numpy on the same rows:
    # candidates by the approximate score, then the exact f32 rescoring.
    exact_scores = queries @ corpus.T
    approx = {
        "f16": queries.astype(np.float16).astype(np.float32)
        @ corpus.astype(np.float16).astype(np.float32).T,
        "1-bit": np.sign(queries) @ np.sign(corpus).T,
    }
    for name, s in approx.items():
        res[name] = {}
        for c in (k, 4 * k, 100, 400, 1000):
            c = min(c, n)
            cand = np.argpartition(-s, c - 1, axis=1)[:, :c]
            rescored = np.take_along_axis(exact_scores, cand, axis=1)
            top = np.take_along_axis(cand, np.argsort(-rescored, axis=1)[:, :k], axis=1)
            res[name][c] = {
                "recall": recall(top, exact_ids),
                "top1": float(np.mean(top[:, 0] == exact_ids[:, 0])),
            }
    vi.close()
    shutil.rmtree(tmp, ignore_errors=True)
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--n", type=int, nargs="+", default=[100_000])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--queries", type=int, default=15, help="single queries timed (median)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--batch-repeats", type=int, default=3)
    p.add_argument("--peers", nargs="*", default=["faiss", "usearch"])
    p.add_argument("--dir", help="where to write the index files (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the index files")
    p.add_argument("--json", help="write the results to this file")
    p.add_argument("--quality", metavar="DIR", help="measure int8 quality on DIR/*.npy instead")
    p.add_argument("--real", metavar="NPY", help="measure int8 quality on one file of real rows")
    p.add_argument("--real-queries", type=int, default=1000, help="held-out rows used as queries")
    p.add_argument("--floors", action="store_true", help="each exact scan beside its read floor")
    p.add_argument("--floor-k", type=int, nargs="+", default=[10, 132], help="k of --floors")
    p.add_argument("--rounds", type=int, default=40, help="queries of --floors (medians)")
    args = p.parse_args(argv)
    info = machine()
    print(json.dumps(info), file=sys.stderr)
    if args.floors:
        fl = run_floors(args)
        out: dict[str, Any] = {"machine": info, "command": " ".join(sys.argv), "floors": fl}
        for r in fl:
            x = ""
            if "x_floor" in r:
                x = f", {r['x_floor']:.2f}x its floor ({r['x_floor_per_query']:.2f}x per query"
                x += f"; CPU {r['x_floor_cpu']:.2f}x)"
            print(
                f"N={r['n']} threads={r['threads']} {r['method']}: {r['ms']:.2f} ms"
                f" (CPU {r['cpu_ms']:.2f}){x}"
            )
    elif args.quality or args.real:
        out = {"machine": info, "quality": run_quality(args)}
        print(json.dumps(out["quality"], indent=1))
    else:
        rows = run_speed(args)
        out = {"machine": info, "command": " ".join(sys.argv), "rows": rows}
        out["ratios"] = ratios(rows)
        print("\n".join(out["ratios"]))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
