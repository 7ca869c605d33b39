#!/usr/bin/env python
"""Interleaved timings of the vector scans, for a noisy shared machine (BENCHMARKS.md,
"Footprint: vectors stored once").

Each scan beside its read floor (``NativeIndex.read_floor``: a bare AVX2 read of the same
bytes, the faster with or without the software prefetch), alternated query by query, one
thread, k = 10, medians (``bench_topk.py --floors`` does the same at more k, N and thread
counts)::

    python benches/bench_vecfloor.py floors --n 100000 --rounds 40

One checkout's scans (plain and int8 screen) on an index it builds at PATH the first time
(run it once to build, then alternate it with another checkout's run, each with its own
PYTHONPATH and PATH: two versions compared in fresh processes taking turns)::

    PYTHONPATH=/path/to/checkout/python python benches/bench_vecfloor.py scans --n 100000 \\
        --index /tmp/ix-100000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_topk import build_index, unit_rows
from cortex.vectors import VectorIndex


def ms(f: Callable[[], Any]) -> float:
    t = time.perf_counter()
    f()
    return (time.perf_counter() - t) * 1e3


def floors(args: argparse.Namespace) -> None:
    path = Path(args.index or f"/tmp/cortex-vecfloor-{args.n}")
    if not path.exists():
        build_index(path, args.n, 384).close()
    vi = VectorIndex.open(path)
    native = vi._index  # the bench helper is the extension's, not API
    qs = unit_rows(args.rounds, 384, seed=7)
    t: dict[str, list[float]] = {"floor f16": [], "scan f16": [], "floor q8": [], "screen": []}
    for q in qs:
        # the floor: the faster of the bare read with and without the software prefetch
        t["floor f16"].append(
            min(ms(lambda p=p: native.read_floor("rows", 1, p)) for p in (True, False))
        )
        t["scan f16"].append(ms(lambda q=q: vi.search(q, 10, quantized=False, threads=1)))
        t["floor q8"].append(
            min(ms(lambda p=p: native.read_floor("q8", 1, p)) for p in (True, False))
        )
        t["screen"].append(ms(lambda q=q: vi.search(q, 10, quantized=True, threads=1)))
    med = {k: statistics.median(v[2:]) for k, v in t.items()}
    print(
        args.n,
        {k: round(v, 2) for k, v in med.items()},
        f"scan/floor {med['scan f16'] / med['floor f16']:.2f}",
        f"screen/floor {med['screen'] / med['floor q8']:.2f}",
        f"screen/scan {med['screen'] / med['scan f16']:.2f}",
    )


def scans(args: argparse.Namespace) -> None:
    path = Path(args.index)
    if not path.exists():
        build_index(path, args.n, 384).close()
        print("built", path)
        return
    vi = VectorIndex.open(path)
    qs = unit_rows(24, 384, seed=7)
    plain, screen = [], []
    for q in qs:  # alternated query by query
        plain.append(ms(lambda q=q: vi.search(q, 10, quantized=False, threads=1)))
        screen.append(ms(lambda q=q: vi.search(q, 10, quantized=True, threads=1)))
    p, s = statistics.median(plain[2:]), statistics.median(screen[2:])
    print(f"plain {p:.2f} ms, screen {s:.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("what", choices=["floors", "scans"])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--index", help="the index file (built there when missing)")
    args = ap.parse_args()
    if args.what == "scans" and not args.index:
        ap.error("scans needs --index")
    (floors if args.what == "floors" else scans)(args)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
