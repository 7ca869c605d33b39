"""Where a keyword search's CPU goes, step by step (issue 16: keyword search at 10k).

    python benches/bench_keyword_steps.py [--size 10000] [--queries 300] [--data DIR]
    PYTHONPATH=/tmp/cortex-before/python python benches/bench_keyword_steps.py --db FILE

The short queries of bench_keyword.py (the first three words of SciFact's claims that
are not stop words) through ``Engine.search`` (mode keyword, limit 20, recording off, one
clock), each step's ``time.process_time_ns`` summed per search by wrapping the functions
that make it, wherever the code being measured has them (the general path: the keyword
leg, `_fuse`, `_rank`, `_finish`; the native one: `KeywordIndexer.page`, `_page`). Steps
marked "—" run inside the step above them. Median and mean over three passes after a
warm-up pass; the medians of the steps do not add up to the search's (suggestions cost
~0.01 ms for most queries and several ms for a few).
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_keyword import DEFAULT_DATA, passages, queries

STEPS: tuple[tuple[str, str, str], ...] = (
    ("cortex.engine:Engine", "search", "Engine.search, all"),
    ("cortex.search.pipeline", "interpret", "time words (interpret)"),
    ("cortex.search.pipeline", "plan", "plan"),
    ("cortex.store:Store", "allowed_ids", "filters' ids (allowed_ids)"),
    ("cortex.keyword", "search", "keyword leg (keyword.search)"),
    ("cortex.keyword_index:KeywordIndexer", "rank_info", "— kept ranking columns"),
    ("cortex.search.pipeline:Pipeline", "_fuse", "candidates (_fuse)"),
    ("cortex.search.pipeline:Pipeline", "_rank", "ranking (_rank)"),
    ("cortex.search.pipeline:Pipeline", "_finish", "page (_finish)"),
    ("cortex.keyword_index:KeywordIndexer", "page", "native ranking (KeywordIndexer.page)"),
    ("cortex.search.pipeline:Pipeline", "_page", "page (_page)"),
    ("cortex.keyword_index:KeywordIndexer", "_current", "— log position checks"),
    ("cortex.store:Store", "get_many", "— rows to Memory (get_many)"),
    ("cortex.store:Store", "page_rows", "— rows and code references (page_rows)"),
    ("cortex.store:Store", "code_refs", "— code references"),
    ("cortex.engine:Engine", "_suggest", "suggestions"),
)


def _wrap(acc: dict[str, int], target: str, name: str, label: str) -> None:
    import importlib

    module, _, cls = target.partition(":")
    owner: Any = importlib.import_module(module)
    if cls:
        owner = getattr(owner, cls)
    f = getattr(owner, name, None)
    if f is None:
        return

    def timed(*a: Any, **k: Any) -> Any:
        t = time.process_time_ns()
        try:
            return f(*a, **k)
        finally:
            acc[label] += time.process_time_ns() - t

    setattr(owner, name, timed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--db", type=Path, help="a store bench_keyword.py built (else built here)")
    args = ap.parse_args()
    import cortex

    _, short = queries(args.data, args.queries)
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db
        if db is None:
            db = Path(tmp) / "kw.db"
            texts = passages(args.data, args.size)
            with cortex.open(db, embedder=None, keyword_index="off") as engine:
                for start in range(0, len(texts), 5000):
                    engine.add_many({"content": t} for t in texts[start : start + 5000])
        run(cortex, db, short)
    print(f"cortex from {Path(cortex.__file__).parent}, load {os.getloadavg()[0]:.1f}")


def run(cortex: Any, db: Path, short: list[str]) -> None:
    engine = cortex.open(db, embedder=None, keyword_index="on")
    clock = datetime(2026, 11, 26, 12, tzinfo=UTC)
    opts = cortex.Options(mode="keyword", limit=20, record=False, now=clock)
    acc: dict[str, int] = collections.defaultdict(int)
    for target, name, label in STEPS:
        _wrap(acc, target, name, label)
    per: dict[str, list[int]] = collections.defaultdict(list)
    search: Callable[[str], Any] = lambda q: engine.search(q, opts)  # noqa: E731
    for rep in range(4):
        for q in short:
            acc.clear()
            search(q)
            if rep:  # the first pass warms the index, the kept columns and the caches
                for _, _, label in STEPS:
                    per[label].append(acc.get(label, 0))
    engine.close()
    print("| step | median ms | mean ms |\n|---|---|---|")
    for _, _, label in STEPS:
        v = per[label]
        if any(v):
            print(f"| {label} | {statistics.median(v) / 1e6:.3f} | {sum(v) / len(v) / 1e6:.3f} |")


if __name__ == "__main__":
    main()
