"""Suggestions of two checkouts of cortex over the same queries (issue 16: the corrections'
vocabulary read from the in-memory keyword index instead of FTS5's ``fts5vocab``): each
side in its own process, on the store of benches/bench_latency.py, with the keyword index
ready; prints the queries whose suggestions differ and the time of each side's searches.

    CORTEX_BENCH_LATENCY=/tmp/vocab-lat python benches/bench_suggest_vocab.py \\
        --size 100000 --queries 200 --before /work/main/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_e2e import DEFAULT_DATA, test_queries  # noqa: E402
from bench_latency import NOW, db_for  # noqa: E402


def misspelt(queries: list[str]) -> list[str]:
    """Each query with one word of 5 letters or more given one seeded edit (a letter
    dropped, doubled, swapped with the next, or replaced), so that every query asks for a
    correction."""
    import random
    import re

    rng = random.Random(16)
    out = []
    for q in queries:
        words = [m for m in re.finditer(r"[A-Za-z]{5,}", q)]
        if not words:
            continue
        m = rng.choice(words)
        w, i = m.group(), rng.randrange(1, len(m.group()) - 1)
        edit = rng.randrange(4)
        if edit == 0:
            w = w[:i] + w[i + 1 :]
        elif edit == 1:
            w = w[:i] + w[i] + w[i:]
        elif edit == 2:
            w = w[:i] + w[i + 1] + w[i] + w[i + 2 :]
        else:
            w = w[:i] + rng.choice("aeioustrnl") + w[i + 1 :]
        out.append(q[: m.start()] + w + q[m.end() :])
    return out


def _corrections(engine: Any, q: str) -> dict[str, str]:
    """The corrections of `q`'s words before the together-check of a suggestion (which
    drops most of a long claim's): what the vocabulary decides."""
    import inspect

    import cortex
    from cortex import keyword, suggest
    from cortex.search.plan import DROPPED

    words = [w for w in keyword._terms(q) if w not in DROPPED]
    base = suggest._probe_options(cortex.Options(record=False))
    extra = {}
    if "native" in inspect.signature(suggest.corrections).parameters:
        extra["native"] = engine.keyword_index
    return dict(suggest.corrections(engine.store, words, base, **extra))


def child(size: int, queries: list[str]) -> None:
    import cortex
    from cortex.embed import load_default_embedder

    with cortex.open(db_for(size), embedder=load_default_embedder()) as engine:
        engine.keyword_index.wait()
        engine.search("warm up", record=False)
        engine.keyword_index.wait()
        out = []
        for q in queries:
            t0 = time.perf_counter()
            found = engine.search(q, cortex.Options(record=False, now=NOW))
            wall = time.perf_counter() - t0
            out.append([q, list(found.suggestions or []), wall, _corrections(engine, q)])
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--before", required=True)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--misspelt", action="store_true", help="one word of each query misspelt")
    args = ap.parse_args()
    queries, _ = test_queries(args.data, args.queries)
    if args.misspelt:
        queries = misspelt(queries)
    if args.child:
        child(args.size, queries)
        return
    got = {}
    for name, root in (("after", str(HERE.parent / "python")), ("before", args.before)):
        cmd = [sys.executable, __file__, "--child", "--size", str(args.size)]
        cmd += ["--queries", str(args.queries), "--before", args.before, "--data", str(args.data)]
        cmd += ["--misspelt"] if args.misspelt else []
        res = subprocess.run(
            cmd, env={**os.environ, "PYTHONPATH": root}, capture_output=True, text=True
        )
        if res.returncode:
            raise SystemExit(f"{name}: {res.stderr[-2000:]}")
        got[name] = json.loads(res.stdout)
    differ = [
        {"query": a[0], "after": a[1], "before": b[1], "fixed": [a[3], b[3]]}
        for a, b in zip(got["after"], got["before"], strict=True)
        if a[1] != b[1] or a[3] != b[3]
    ]
    with_fix = sum(bool(a[1]) for a in got["after"])
    corrected = sum(bool(a[3]) for a in got["after"])
    print(
        json.dumps(
            {
                "queries": len(queries),
                "with_suggestions": with_fix,
                "with_corrections": corrected,
                "differ": differ,
                "load": [round(x, 1) for x in os.getloadavg()],
            }
        )
    )


if __name__ == "__main__":
    main()
