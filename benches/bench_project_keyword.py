"""Cost of per-project BM25 statistics (issue 14): project-filtered keyword search with the
searched projects' own N, avgdl and df, beside the same search with the table's statistics
(what cortex did before), at 10k and 100k memories.

    python benches/bench_project_keyword.py [--sizes 10000 100000] [--queries 100]
        [--projects 10] [--data DIR]

Memories: SciFact passages (as benches/bench_keyword.py cuts them), dealt round-robin into
`--projects` projects, so one project holds 1/projects of the store. Queries: SciFact's
claims as written (~12 words) and their first three non-stop words, each searched in
project "p0" through `Engine.search` (keyword mode, limit 20, recording off), with the
in-memory keyword index (`keyword_index="on"`) and with FTS5 alone (`"off"`). "Before" is
the same code with the scope resolver returning None (`filters.projects_of`): the project
stays a filter, the statistics are the whole table's, as before this change. Three rounds,
the round with the lowest median kept (the machine is shared). Also timed: `add_many` of
the store (the triggers now keep memories.tokens and keyword_totals).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import cortex
import cortex.keyword
import cortex.search.sqlite
from bench_keyword import DEFAULT_DATA, passages, queries


@contextmanager
def global_statistics() -> Iterator[None]:
    """Searches inside use the table's statistics (the code path before per-project ones)."""
    saved = cortex.keyword.projects_of, cortex.search.sqlite.projects_of
    cortex.keyword.projects_of = lambda opts: None  # type: ignore[assignment]
    cortex.search.sqlite.projects_of = lambda opts: None  # type: ignore[assignment]
    try:
        yield
    finally:
        cortex.keyword.projects_of, cortex.search.sqlite.projects_of = saved


def timed(fn: Callable[[str], object], items: list[str], rounds: int = 3) -> float:
    """Median ms per call, of the round with the lowest median."""
    best = float("inf")
    for _ in range(rounds):
        samples = []
        for q in items:
            t0 = time.perf_counter()
            fn(q)
            samples.append(time.perf_counter() - t0)
        best = min(best, statistics.median(samples))
    return best * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--projects", type=int, default=10)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()
    long_q, short_q = queries(args.data, args.queries)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            texts = passages(args.data, size)
            path = Path(tmp) / f"p{size}.db"
            t0 = time.perf_counter()
            with cortex.open(path, embedder=None, keyword_index="off") as engine:
                for start in range(0, len(texts), 5000):
                    engine.add_many(
                        {"content": t, "project": f"p{(start + i) % args.projects}"}
                        for i, t in enumerate(texts[start : start + 5000])
                    )
            ingest = time.perf_counter() - t0
            opts = cortex.Options(mode="keyword", limit=20, record=False, project="p0")
            for policy in ("on", "off"):
                engine = cortex.open(path, embedder=None, keyword_index=policy)
                engine.search("warm up", opts)  # builds the in-memory index ("on")
                for label, qs in (("short (3 words)", short_q), ("claims (~12 words)", long_q)):
                    scoped = timed(lambda q, e=engine, o=opts: e.search(q, o), qs)
                    with global_statistics():
                        before = timed(lambda q, e=engine, o=opts: e.search(q, o), qs)
                    rows.append(
                        {
                            "memories": size,
                            "index": "in-memory" if policy == "on" else "FTS5",
                            "queries": label,
                            "before_p50_ms": round(before, 2),
                            "per_project_p50_ms": round(scoped, 2),
                            "ratio": round(scoped / before, 2),
                            "ingest_per_s": round(size / ingest),
                        }
                    )
                    print(json.dumps(rows[-1]), flush=True)
                engine.close()
    print("\n| memories | index | queries | before p50 | per-project p50 | ratio |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['memories']:,} | {r['index']} | {r['queries']} | {r['before_p50_ms']} ms"
            f" | {r['per_project_p50_ms']} ms | {r['ratio']}x |"
        )


if __name__ == "__main__":
    main()
