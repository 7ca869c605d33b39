"""What the damage checks of the vector index cost (issue 14, section 2).

    python benches/bench_checks.py [--sizes 10000 100000] [--queries 200] [--dim 384]

Per search: `Semantic.verified_search` (the index's top-k, then every returned row
checked against its embedding in SQLite: one query for k blobs, k dot products) beside
the bare `VectorIndex.search` it wraps, on the same open index, interleaved query by
query so that the load of a shared machine falls on both alike. k = 10 and k = 72 (what
a default search asks for: a pool of 2 x limit 20, plus 32 of overfetch).

Per open (once per process, and again after each rebuild another process renames into
place): the full check (every block checksum, every int8 record against its row, the live
row count against SQLite) beside the bare `VectorIndex.open`, and beside one search.

Data: seeded Gaussian vectors, normalised (the checks cost the same whatever the rows
hold), stored through `cortex.open(..., embedder=...)` with an embedder that returns them
(the Embedder protocol), in /tmp/cortex-bench-checks (rebuilt when missing).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(os.environ.get("CORTEX_BENCH_CACHE", "/tmp/cortex-bench-checks"))


class TableEmbedder:
    """Returns row i of a seeded matrix for the text "memory i"."""

    def __init__(self, n: int, dim: int) -> None:
        self.model_id = f"bench/gaussian-{dim}"
        self.dim = dim
        rng = np.random.default_rng(14)
        m = rng.standard_normal((n, dim), dtype=np.float32)
        self.rows = m / np.linalg.norm(m, axis=1, keepdims=True)

    def embed(self, text: str) -> np.ndarray:
        return self.rows[int(text.split()[-1]) % len(self.rows)]

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.embed(t) for t in texts])


def build(n: int, dim: int) -> Path:
    import cortex

    db = ROOT / f"checks-{n}-{dim}.db"
    if db.exists():
        return db
    ROOT.mkdir(parents=True, exist_ok=True)
    emb = TableEmbedder(n, dim)
    with cortex.open(db, embedder=emb, keyword_index="off") as engine:
        for start in range(0, n, 10_000):
            engine.add_many(
                {"content": f"memory {i}"} for i in range(start, min(n, start + 10_000))
            )
        engine.search("memory 0", mode="semantic", record=False)
    return db


def ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1e3


def measure(n: int, dim: int, queries: int) -> None:
    import cortex
    from cortex.semantic import Semantic
    from cortex.vectors import VectorIndex

    db = build(n, dim)
    emb = TableEmbedder(n, dim)
    rng = np.random.default_rng(7)
    qs = rng.standard_normal((queries, dim), dtype=np.float32)
    with cortex.open(db, embedder=emb, keyword_index="off") as engine:
        sem: Semantic = engine._semantic
        index = sem.index()
        for k in (10, 72):
            bare, checked = [], []
            for i, q in enumerate(qs):
                for name in ("bare", "checked")[:: -1 if i % 2 else 1]:
                    t = time.perf_counter()
                    if name == "bare":
                        index.search(q, k)
                    else:
                        sem.verified_search(q, k)
                    (bare if name == "bare" else checked).append(time.perf_counter() - t)
            extra = ms(checked) - ms(bare)
            print(
                f"| {n:,} | search k={k} | {ms(bare):.3f} | {ms(checked):.3f} |"
                f" {ms(checked) / ms(bare):.2f}x (+{extra:.3f} ms) |"
            )
        path = sem.index_path()
        opens, checks, one = [], [], []
        for i in range(7):
            t = time.perf_counter()
            VectorIndex.open(path).close()
            opens.append(time.perf_counter() - t)
            sem._close_index()
            t = time.perf_counter()
            sem.index()
            checks.append(time.perf_counter() - t)
            t = time.perf_counter()
            sem.verified_search(qs[i], 72)
            one.append(time.perf_counter() - t)
        print(
            f"| {n:,} | open | {ms(opens):.3f} | {ms(checks):.3f} |"
            f" +{ms(checks) - ms(opens):.1f} ms once per open = {ms(checks) / ms(one):.1f}"
            " searches |"
        )


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--dim", type=int, default=384)
    args = ap.parse_args()
    print(f"threads: {os.environ.get('CORTEX_THREADS', 'all')}, dim {args.dim}, medians")
    print("| rows | what | without checks (ms) | with checks (ms) | cost |")
    print("|---|---|---|---|---|")
    for n in args.sizes:
        measure(n, args.dim, args.queries)


if __name__ == "__main__":
    main()
