"""Ingest of pre-computed vectors: 4 writer processes, PostgreSQL beside SQLite.

Each writer adds `--per-writer` short memories (~15 words, like an agent's notes) with a
384-dimension vector each, in batches of `--batch` (one transaction a batch: the
memories, their keyword terms and their vectors commit together). Prints rows per second
for each backend, measured in the same run on the same machine.

    python benches/bench_pg_ingest.py [--writers 4] [--per-writer 5000] [--batch 500]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "python"))

WORDS = [
    "deploy",
    "auth",
    "service",
    "port",
    "config",
    "restart",
    "database",
    "migration",
    "token",
    "cache",
    "queue",
    "worker",
    "release",
    "branch",
    "review",
    "test",
    "build",
    "cluster",
    "node",
    "memory",
    "index",
    "search",
    "vector",
    "keyword",
]
DIM = 384


def _batch(writer: int, start: int, n: int) -> tuple[list, dict]:
    from cortex.store import MemoryInput, content_hash

    rng = np.random.default_rng(writer * 1_000_003 + start)
    items, vecs = [], {}
    for i in range(start, start + n):
        words = rng.choice(WORDS, 14)
        text = f"note {writer}-{i}: " + " ".join(words)
        items.append(MemoryInput(text, project=f"p{writer % 2}"))
        v = rng.standard_normal(DIM).astype(np.float32)
        vecs[content_hash(text)] = v / np.linalg.norm(v)
    return items, vecs


def _pg_writer(url: str, writer: int, count: int, batch: int, ready, go) -> None:
    from cortex.pg.store import EmbeddingBatch, PgStore

    batches = [_batch(writer, s, min(batch, count - s)) for s in range(0, count, batch)]
    with PgStore.open(url, pool_size=1) as store:
        ready.wait()
        go.wait()
        for items, vecs in batches:
            store.add_many(items, EmbeddingBatch("bench-model", DIM, vecs))


def _lite_writer(path: str, writer: int, count: int, batch: int, ready, go) -> None:
    import cortex

    batches = []
    for s in range(0, count, batch):
        items, vecs = _batch(writer, s, min(batch, count - s))
        records = [{"content": i.content, "project": i.project} for i in items]
        batches.append((records, np.stack([vecs[i.content_hash] for i in items])))
    # The vectors are supplied as the active model's (the vector file is their only copy,
    # SQLite keeps a checksum): what a SQLite user's `add_many(..., vectors=...)` costs.
    with cortex.open(path) as engine:
        ready.wait()
        go.wait()
        for records, rows in batches:
            engine.add_many(records, vectors=rows)


def _run(target, arg: str, writers: int, count: int, batch: int) -> float:
    ctx = mp.get_context("spawn")
    ready, go = ctx.Barrier(writers + 1), ctx.Barrier(writers + 1)
    procs = [
        ctx.Process(target=target, args=(arg, w, count, batch, ready, go)) for w in range(writers)
    ]
    for p in procs:
        p.start()
    ready.wait()  # every writer has its batches ready and its connection open
    t0 = time.perf_counter()
    go.wait()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a writer failed ({p.exitcode})")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--per-writer", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=500)
    args = ap.parse_args()
    from tests.pg_server import running_server

    from cortex.pg.store import PgStore

    total = args.writers * args.per_writer
    with tempfile.TemporaryDirectory() as tmp, running_server(durable=True) as server:
        url = server.create_database("ingest")
        PgStore.open(url).close()  # the schema, before the writers race to create it
        pg_s = _run(_pg_writer, url, args.writers, args.per_writer, args.batch)
        with PgStore.open(url) as store:
            stats = store.stats()
            assert stats["memories"] == total, stats
            assert stats["embeddings"] == {"bench-model": total}, stats
        lite_path = str(Path(tmp) / "ingest.db")
        import cortex

        cortex.open(lite_path).close()  # the schema, before the writers race to create it
        lite_s = _run(_lite_writer, lite_path, args.writers, args.per_writer, args.batch)
    print(f"{args.writers} writers x {args.per_writer} memories, batches of {args.batch}")
    print(f"postgres: {total / pg_s:,.0f} memories/s ({pg_s:.1f} s; durable commits)")
    print(f"sqlite:   {total / lite_s:,.0f} memories/s ({lite_s:.1f} s)")


if __name__ == "__main__":
    main()
