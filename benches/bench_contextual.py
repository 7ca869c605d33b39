"""Seed 003's contextual search at scale: interpretation, context expansion, aggregations.

    python benches/bench_contextual.py [--memories 100000] [--queries 200] [--db PATH]

Issue 12's targets: interpretation of a query < 1 ms p50; context expansion < 5 ms p50 for
10 results at 100k memories; aggregations < 20 ms at 100k. The store is keyword-only (no
model: the steps timed here do not touch vectors), built once through `Engine.add_many`
(seeded): 100k short notes over five projects, 2,000 sessions and 5,000 imported files
of 20 chunks each, dated across a year.

Each query runs the same search twice, interleaved: with ``context=2`` and without, 10
results each; the difference of the two p50s is the expansion. Aggregations and the
session lookup they need are timed inside the search by wrapping
``cortex.search.pages.aggregations`` and ``Store.sessions_of`` (the wrappers add a
``perf_counter`` pair each). A listing by filters (``""`` in one project) is timed too:
its aggregations cover every match of the project, not only the page.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import cortex
from cortex.interpret import interpret
from cortex.search import pages

WORDS = [
    "deploy",
    "rollback",
    "cache",
    "index",
    "query",
    "latency",
    "billing",
    "invoice",
    "webhook",
    "retry",
    "timeout",
    "schema",
    "migration",
    "replica",
    "failover",
    "backup",
    "restore",
    "token",
    "session",
    "login",
    "auth",
    "queue",
    "worker",
    "cron",
    "alert",
    "pager",
    "incident",
    "postmortem",
    "release",
    "canary",
    "staging",
    "production",
    "terraform",
    "kubernetes",
    "ingress",
    "dns",
    "certificate",
    "vault",
    "secret",
    "budget",
    "roadmap",
    "review",
]
QUERIES = (
    "how did we fix the {a} {b} last week",
    "what was I working on last Tuesday about {a}",
    "{a} {b}",
    "why did the {a} fail in March",
    "{a} {b} since 2026-06-01",
)


def build(path: Path, n: int) -> None:
    rng = random.Random(7)
    start = time.time() - 365 * 86400
    with cortex.open(path, embedder=None) as engine:
        batch: list[dict[str, Any]] = []
        for i in range(n):
            words = " ".join(rng.choice(WORDS) for _ in range(12))
            item: dict[str, Any] = {
                "content": f"note {i}: {words}",
                "project": f"p{i % 5}",
                "created_at": start + i * (365 * 86400 / n),
            }
            if i % 2:
                item["session"] = f"s{(i // 2) % 2000}"
            else:
                item["source_path"] = f"notes/file{(i // 2) % 5000}.md"
                item["chunk_index"] = (i // 10000) % 20
            batch.append(item)
            if len(batch) == 5000:
                engine.add_many(batch)
                batch.clear()
        if batch:
            engine.add_many(batch)


def timed(samples: list[float], fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            samples.append((time.perf_counter() - t) * 1000)

    return wrapper


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--db", type=Path, help="reuse (or build) the store here")
    args = parser.parse_args()
    db = args.db or Path(tempfile.mkdtemp()) / "contextual.db"
    if not db.exists():
        t = time.perf_counter()
        build(db, args.memories)
        print(f"built {args.memories:,} memories in {time.perf_counter() - t:.1f} s")
    rng = random.Random(11)
    queries = [
        rng.choice(QUERIES).format(a=rng.choice(WORDS), b=rng.choice(WORDS))
        for _ in range(args.queries)
    ]
    now = datetime.now(UTC)
    interp = []
    for q in queries:
        t = time.perf_counter_ns()
        interpret(q, now=now)
        interp.append((time.perf_counter_ns() - t) / 1e6)
    agg: list[float] = []
    sess: list[float] = []
    with_ctx: list[float] = []
    without: list[float] = []
    listing: list[float] = []
    totals: list[int] = []
    with cortex.open(db, embedder=None) as engine:
        store = engine.store
        pages.aggregations = timed(agg, pages.aggregations)  # type: ignore[assignment]
        store.sessions_of = timed(sess, store.sessions_of)  # type: ignore[method-assign]
        engine.search(queries[0], mode="keyword", record=False)  # warm
        agg.clear()
        sess.clear()
        for q in queries:
            for context, out in ((2, with_ctx), (0, without)):
                t = time.perf_counter()
                found = engine.search(q, mode="keyword", limit=10, context=context, record=False)
                out.append((time.perf_counter() - t) * 1000)
            totals.append(found.total)
        for i in range(min(50, args.queries)):
            t = time.perf_counter()
            found = engine.search("", project=f"p{i % 5}", limit=10, record=False)
            listing.append((time.perf_counter() - t) * 1000)
        listed = found.total
    med = statistics.median
    print(f"machine: {platform.processor() or platform.machine()}, Python {sys.version.split()[0]}")
    print(f"memories {args.memories:,}, queries {len(queries)} (mean matches {med(totals):.0f})")
    print(f"interpretation       p50 {med(interp):7.3f} ms   p99 {pct(interp, 0.99):7.3f} ms")
    print(f"search, context=0    p50 {med(without):7.2f} ms   p99 {pct(without, 0.99):7.2f} ms")
    print(f"search, context=2    p50 {med(with_ctx):7.2f} ms   p99 {pct(with_ctx, 0.99):7.2f} ms")
    print(f"  expansion (diff)   p50 {med(with_ctx) - med(without):7.2f} ms for 10 results")
    print(f"aggregations         p50 {med(agg):7.2f} ms   p99 {pct(agg, 0.99):7.2f} ms")
    print(f"  + sessions_of      p50 {med(sess):7.2f} ms   p99 {pct(sess, 0.99):7.2f} ms")
    print(f"listing a project    p50 {med(listing):7.2f} ms ({listed:,} matches aggregated)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
