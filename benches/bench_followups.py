"""The measurements of the 2026-11-26 review follow-ups (BENCHMARKS.md, "Review
follow-ups"): run one case in a fresh process, with PYTHONPATH naming the checkout to
measure, and interleave the checkouts in a shell loop (see BENCHMARKS.md).

    python benches/bench_followups.py write N     # Semantic.write of N rows, one transaction
    python benches/bench_followups.py bulk N      # the bulk writer (add_many with vectors=)
    python benches/bench_followups.py ann-build DIR   # a 100k x 384 vector file + .ivf
    python benches/bench_followups.py ann DIR     # ann.search per-query CPU, 300 queries

Seeded data, no model, no download: the writes go through a real Store and vector file
(`_ModelOnly` names the model, as `cortex migrate` does).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from cortex import ann
from cortex.semantic import Semantic, _ModelOnly
from cortex.store import MemoryInput, Store
from cortex.vectors import VectorIndex, encode_stored

DIM = 384


def unit(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    out: np.ndarray = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def write(n: int, bulk: bool) -> None:
    vecs = unit(n, 0)
    blobs = encode_stored(vecs)
    with tempfile.TemporaryDirectory() as d:
        store = Store.open(Path(d) / "db.sqlite")
        sem = Semantic(store, _ModelOnly("test-model", DIM))
        ids = store.add_many([MemoryInput(content=f"memory number {i}") for i in range(n)])
        t0, c0 = time.perf_counter(), time.process_time()
        if bulk:
            writer = sem.bulk_writer(0.0)
            with store.transaction() as tx:
                writer(tx, ids, [f"h{i}" for i in range(n)], vecs)
        else:
            with store.transaction() as tx:
                for i in range(n):
                    sem.write(tx, ids[i], f"h{i}", blobs[i], 0.0)
        t1, c1 = time.perf_counter(), time.process_time()
        store.close()
    what = "bulk" if bulk else "write"
    print(f"{what} n={n} wall_ms={1e3 * (t1 - t0):.0f} cpu_ms={1e3 * (c1 - c0):.0f}")


def ann_build(d: Path, n: int = 100_000) -> None:
    d.mkdir(parents=True, exist_ok=True)
    ix = VectorIndex.create(d / "vectors", DIM, "m")
    centres = unit(200, 3)
    rows = centres[np.random.default_rng(4).integers(0, 200, n)] + 0.6 * unit(n, 5)
    ix.append(np.arange(1, n + 1), rows / np.linalg.norm(rows, axis=1, keepdims=True))
    print(ann.build(ix, nlist=1024))
    ix.close()


def ann_search(d: Path) -> None:
    ix = VectorIndex.open(d / "vectors")
    allowed = np.arange(1, ix.rows + 1, 2)  # half the ids: the IVF path, filtered
    out = []
    for name, only in (("filtered", allowed), ("plain", None)):
        times = []
        for q in unit(300, 7):
            t0 = time.process_time_ns()
            ann.search(ix, q, 10, nprobe=8, allowed=only)
            times.append(time.process_time_ns() - t0)
        out.append(f"{name} {statistics.median(times) / 1e3:.0f} us")
    ix.close()
    print(" | ".join(out))


def main() -> None:
    case, arg = sys.argv[1], sys.argv[2]
    if case in ("write", "bulk"):
        write(int(arg), case == "bulk")
    elif case == "ann-build":
        ann_build(Path(arg))
    elif case == "ann":
        ann_search(Path(arg))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
