#!/usr/bin/env python
"""The opt-in approximate index (IVF, cortex.ann) against the exact search, in one run.

    python benches/bench_ann.py prepare [--sets real-100k real-1m random-1m]
    python benches/bench_ann.py run [--sets ...] [--queries 300] [--hnsw]

Data (never downloaded; cached under /tmp/ann-data, CORTEX_ANN_DATA to move it):

- ``real-100k``: 100,000 real all-MiniLM-L6-v2 vectors: SciFact's 5,183 abstracts and
  sentence windows cut from them (bench_e2e.py's corpus, embedded by cortex's
  OnnxEmbedder; ``passages-100k.npy``). Queries: SciFact claims embedded by the same model
  (``queries.npy``, the first ``--queries`` of them). This is the honest case: real vectors,
  real queries, and the queries are not in the corpus.
- ``real-1m``: NOT 1M real embeddings (there are none here; embedding 1M texts takes
  hours): the 100k real vectors followed by 9 seeded copies of them, each row plus
  Gaussian noise (sigma 0.01 a dimension, re-normalised; cosine to its original ~0.98),
  bench_e2e.py's ``expand``. Copies of one text sit in one cluster and are each other's
  nearest neighbours, which makes this set *easier* for IVF than 1M distinct real texts
  would be: read its recall as an upper bound. Same queries.
- ``random-1m``: 1,000,000 seeded random unit vectors, random unit queries: no cluster
  structure at all, the worst case of any partitioning index.

Every set is a scan file (the vector index cortex searches, format 3: f16 rows + the int8
copy) built with ``VectorIndex.append``; the IVF file is built beside it with
``cortex.ann.build`` (its build time is reported). Then, query by query, the exact search
(``NativeIndex.search``, the default int8 screen, 1 thread) and the approximate search at
each ``nprobe`` (1 thread) run interleaved in a rotating order, so machine load falls on
all alike. Reported per setting: recall@10 against the exact answer (mean over queries),
p50 and p99 latency, rows scored, and exact p50 / setting p50.

``--hnsw`` adds usearch's HNSW (``pip install usearch``; f16 storage, M = 16,
ef_construction = 128) at several ``ef`` as the alternative design's reference.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from cortex import _native
from cortex.ann import default_params
from cortex.vectors import VectorIndex

DATA = Path(os.environ.get("CORTEX_ANN_DATA", "/tmp/ann-data"))
K = 10
SETS = ("real-100k", "real-1m", "random-1m")


def vectors(name: str) -> np.ndarray:
    if name == "random-1m":
        rng = np.random.default_rng(7)
        v = rng.standard_normal((1_000_000, 384), dtype=np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)
    real = np.load(DATA / "passages-100k.npy")
    if name == "real-100k":
        return real
    # bench_e2e.expand: copies r = 1..9 with seeded Gaussian noise, re-normalised
    rng = np.random.default_rng(42)
    out = [real]
    for _ in range(1, 10):
        noisy = real + rng.normal(0.0, 0.01, real.shape).astype(np.float32)
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        out.append(noisy.astype(np.float32))
    return np.concatenate(out)


def queries(name: str, n: int) -> np.ndarray:
    if name.startswith("random"):
        rng = np.random.default_rng(99)
        q = rng.standard_normal((n, 384), dtype=np.float32)
        return q / np.linalg.norm(q, axis=1, keepdims=True)
    return np.load(DATA / "queries.npy")[:n]


def prepare(args: argparse.Namespace) -> None:
    for name in args.sets:
        path = DATA / name / "vectors"
        if path.exists():
            print(f"{name}: exists", flush=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        v = vectors(name)
        ix = VectorIndex.create(path, v.shape[1], "all-MiniLM-L6-v2")
        for a in range(0, len(v), 100_000):
            ix.append(np.arange(a + 1, a + 1 + len(v[a : a + 100_000])), v[a : a + 100_000])
        ix.sync()
        ix.close()
        print(f"{name}: {len(v)} rows", flush=True)


def build_ivf(name: str, nat: object, rows: int, args: argparse.Namespace) -> dict[str, float]:
    p = default_params(rows)
    if args.nlist:
        p.update(nlist=args.nlist, sample=min(rows, 32 * args.nlist))
    path = DATA / name / "vectors.ivf"
    if args.reuse and path.exists():
        a = _native.AnnIndex.open(str(path))
        if a.nlist == p["nlist"] and a.rows == rows:
            return {
                **p,
                "build_wall_s": float("nan"),
                "build_cpu_s": float("nan"),
                "bytes": path.stat().st_size,
            }
    t0, c0 = time.perf_counter(), time.process_time()
    _native.AnnIndex.build(nat, str(path), p["nlist"], p["sample"], p["iters"], 0, 2)
    return {
        **p,
        "build_wall_s": time.perf_counter() - t0,
        "build_cpu_s": time.process_time() - c0,
        "bytes": path.stat().st_size,
    }


def run(args: argparse.Namespace) -> None:
    out = []
    for name in args.sets:
        path = DATA / name / "vectors"
        ix = VectorIndex.open(path)
        nat = ix._index
        rows = ix.rows
        info = build_ivf(name, nat, rows, args)
        t0 = time.perf_counter()
        ann = _native.AnnIndex.open(str(DATA / name / "vectors.ivf"))
        info["open_s"] = time.perf_counter() - t0
        nlist = ann.nlist
        probes = sorted({p for p in args.nprobe if p < nlist} | {nlist})
        qs = queries(name, args.queries)
        hnsw = None
        if args.hnsw:
            from usearch.index import Index

            t0 = time.perf_counter()
            hnsw = Index(ndim=384, metric="ip", dtype="f16", connectivity=16, expansion_add=128)
            hnsw.add(np.arange(rows), vectors(name), threads=2)
            info["hnsw_build_s"] = time.perf_counter() - t0
            info["hnsw_bytes"] = hnsw.memory_usage
        methods: list[tuple[str, object]] = [("exact", None)]
        methods += [(f"nprobe={p}", p) for p in probes]
        if hnsw is not None:
            methods += [(f"hnsw ef={e}", ("hnsw", e)) for e in args.ef]
        times: dict[str, list[float]] = {m: [] for m, _ in methods}
        recall: dict[str, list[float]] = {m: [] for m, _ in methods}
        scored: dict[str, list[int]] = {m: [] for m, _ in methods}
        load0 = os.getloadavg()[0]
        for i, q in enumerate(qs):
            truth = set(nat.search(q, K, threads=1)[0].tolist())
            order = methods[i % len(methods) :] + methods[: i % len(methods)]
            for label, how in order:
                if how is None:
                    t = time.perf_counter()
                    ids = nat.search(q, K, threads=1)[0]
                    dt = time.perf_counter() - t
                    n = rows
                elif isinstance(how, tuple):
                    hnsw.expansion_search = how[1]  # type: ignore[union-attr]
                    t = time.perf_counter()
                    m = hnsw.search(q, K, threads=1)  # type: ignore[union-attr]
                    dt = time.perf_counter() - t
                    ids = np.asarray(m.keys) + 1
                    n = 0
                else:
                    t = time.perf_counter()
                    ids, _, n, _ = ann.search(nat, q, K, how)
                    dt = time.perf_counter() - t
                times[label].append(dt)
                recall[label].append(len(truth & set(ids.tolist())) / K)
                scored[label].append(n)
        exact50 = statistics.median(times["exact"])
        res = {
            "set": name,
            "rows": rows,
            "queries": len(qs),
            **info,
            "load_before": load0,
            "load_after": os.getloadavg()[0],
            "settings": [],
        }
        for label, _ in methods:
            t = sorted(times[label])
            p50 = statistics.median(t)
            res["settings"].append(
                {
                    "method": label,
                    "recall10": float(np.mean(recall[label])),
                    "p50_ms": p50 * 1e3,
                    "p99_ms": t[min(len(t) - 1, int(0.99 * len(t)))] * 1e3,
                    "rows_scored": float(np.mean(scored[label])),
                    "speedup": exact50 / p50,
                }
            )
        out.append(res)
        print(json.dumps(res), flush=True)
        print(table(res), flush=True)
        ix.close()
    meta = {
        "python": platform.python_version(),
        "simd": _native.simd_level(),
        "cpu": platform.processor() or platform.machine(),
    }
    print(json.dumps(meta))


def table(r: dict) -> str:
    lines = [
        f"{r['set']}: {r['rows']:,} rows, {r['queries']} queries, nlist {r['nlist']},"
        f" build {r['build_wall_s']:.1f} s wall / {r['build_cpu_s']:.1f} s CPU,"
        f" file {r['bytes'] / 1e6:.1f} MB, open {r['open_s'] * 1e3:.0f} ms,"
        f" load {r['load_before']:.1f} -> {r['load_after']:.1f}",
        "| setting | recall@10 | p50 ms | p99 ms | rows scored | exact p50 / p50 |",
        "|---|---|---|---|---|---|",
    ]
    for s in r["settings"]:
        lines.append(
            f"| {s['method']} | {s['recall10']:.4f} | {s['p50_ms']:.3f} | {s['p99_ms']:.3f}"
            f" | {s['rows_scored']:,.0f} | {s['speedup']:.1f}x |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("command", choices=("prepare", "run"))
    ap.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--nprobe", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256, 512])
    ap.add_argument("--nlist", type=int, help="lists (default: cortex.ann.default_params)")
    ap.add_argument("--reuse", action="store_true", help="keep an IVF file of the same nlist")
    ap.add_argument("--hnsw", action="store_true")
    ap.add_argument("--ef", type=int, nargs="+", default=[32, 64, 128, 256])
    args = ap.parse_args()
    if args.command == "prepare":
        prepare(args)
    else:
        run(args)


if __name__ == "__main__":
    sys.exit(main())
