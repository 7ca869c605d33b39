"""Build one large store for the first-search and latency benches (issue 16, item 4).

    python benches/build_1m.py [--size 1000000] [--db /tmp/big1m/cortex.db]

Memories: bench_e2e's corpus (SciFact abstracts then sentence-window passages, 100k),
repeated past 100k with the suffix " [copy r]" (as bench_e2e's `expand`), so every text
is unique; vectors: seeded random unit vectors through ``add_many(..., vectors=...)``
(their values do not change the cost of a scan; 1M real embeddings would take hours).
Batches of 10,000, then ``flush()``, then the keyword index is built and saved
(``keyword_index.persist()``, what ``cortex import`` does). Prints each phase's wall and
CPU time and the bytes of every file.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_e2e import DEFAULT_DATA, corpus  # noqa: E402


def texts_for(size: int, data: Path) -> list[str]:
    base, _ = corpus(data, min(size, 100_000))
    out = list(base)
    r = 1
    while len(out) < size:
        out += [f"{t} [copy {r}]" for t in base[: size - len(out)]]
        r += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--db", type=Path, default=Path("/tmp/big1m/cortex.db"))
    ap.add_argument("--batch", type=int, default=10_000)
    shared = Path("/work/shared/data/scifact")
    default = DEFAULT_DATA if DEFAULT_DATA.exists() or not shared.exists() else shared
    ap.add_argument("--data", type=Path, default=default)
    args = ap.parse_args()
    import cortex
    from cortex.embed import load_default_embedder

    if args.db.exists():
        raise SystemExit(f"{args.db} exists")
    args.db.parent.mkdir(parents=True, exist_ok=True)
    texts = texts_for(args.size, args.data)
    real = load_default_embedder()
    rng = np.random.default_rng(args.size)
    t0, c0 = time.perf_counter(), time.process_time()
    with cortex.open(args.db, embedder=real, keyword_index="on") as e:
        for start in range(0, args.size, args.batch):
            part = texts[start : start + args.batch]
            vecs = rng.normal(size=(len(part), real.dim)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            e.add_many(({"content": t, "project": "bench"} for t in part), vectors=vecs)
            if (start // args.batch) % 10 == 0:
                print(f"{start + len(part):,} in {time.perf_counter() - t0:.0f} s", flush=True)
        t1, c1 = time.perf_counter(), time.process_time()
        print(f"add_many: {t1 - t0:.1f} s wall, {c1 - c0:.1f} CPU-s", flush=True)
        e.flush()
        t2, c2 = time.perf_counter(), time.process_time()
        print(f"flush: {t2 - t1:.1f} s wall, {c2 - c1:.1f} CPU-s", flush=True)
        saved = e.keyword_index.persist()
        t3, c3 = time.perf_counter(), time.process_time()
        print(f"keyword index persist ({saved}): {t3 - t2:.1f} s wall, {c3 - c2:.1f} CPU-s")
    total = 0
    for p in sorted(args.db.parent.rglob("*")):
        if p.is_file():
            total += p.stat().st_size
            print(f"{p.stat().st_size / 1e6:10.1f} MB  {p}")
    print(
        f"{total / 1e9:.2f} GB in all; {time.perf_counter() - t0:.0f} s in all; "
        f"load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
