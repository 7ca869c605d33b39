"""Ingest of supplied vectors beside the recipe, checkout against checkout (BENCHMARKS.md,
"Ingest beside the recipe, third pass").

    python benches/bench_ingest_parts.py ab --size 10000 --repeat 5 BEFORE AFTER
    python benches/bench_ingest_parts.py parts --size 10000

`ab` runs `bench_e2e.py ingest-child` in a fresh process for cortex from the package
folder BEFORE (a directory holding `cortex/`, put first on PYTHONPATH), cortex from AFTER,
and the recipe (FTS5 + sqlite-vec), in a rotating order, `--repeat` rounds: CPU seconds of
each child from `import cortex` to the checkpoint, medians. Byte-compile both folders
first (`python -m compileall`): PYTHONDONTWRITEBYTECODE=1 would make every child compile.

`parts` builds `--size` SciFact memories (5,000 a call of `add_many(..., vectors=)`) in
this process with the cortex PYTHONPATH names, and prints the CPU seconds of each SQL
statement (summed over its calls) and of the write path's Python functions. Timings per
statement move with FTS5's pending terms: they are written out at the first statement of a
transaction that opens a statement journal (or at its commit), whichever that is.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = Path("/work/shared/data/scifact")


def ab(args: argparse.Namespace) -> None:
    trees = {"before": args.before, "after": args.after, "recipe": args.before}
    rows: list[dict[str, Any]] = []
    names = ["before", "after", "recipe"]
    for rep in range(args.repeat):
        order = names[rep % 3 :] + names[: rep % 3]
        if rep % 2:
            order.reverse()
        for name in order:
            env = dict(os.environ, PYTHONPATH=str(trees[name]))
            system = "fts5+sqlite-vec" if name == "recipe" else "cortex"
            proc = subprocess.run(
                [sys.executable, str(HERE / "bench_e2e.py"), "ingest-child", "--system", system,
                 "--size", str(args.size), "--workdir", str(args.workdir), "--batch", "5000",
                 "--data", str(args.data)],
                env=env, capture_output=True, text=True,
            )  # fmt: skip
            if proc.returncode:
                raise SystemExit(proc.stderr[-3000:])
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            row["name"] = name
            rows.append(row)
            print(name, f"{row['cpu_s']:.3f}", row["disk_bytes"], flush=True)
    print("load average", os.getloadavg())
    recipe = statistics.median(r["cpu_s"] for r in rows if r["name"] == "recipe")
    for name in names:
        cpu = [r["cpu_s"] for r in rows if r["name"] == name]
        med = statistics.median(cpu)
        print(f"| {args.size:,} | {name} | {med:.3f} ({', '.join(f'{c:.2f}' for c in cpu)})"
              f" | {recipe / med:.2f}x |")  # fmt: skip


def parts(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(HERE))
    import bench_e2e as b

    texts, _ = b.corpus(args.data, args.size)
    texts = texts[: args.size]
    vecs = b.ingest_vectors(args.size, 384)
    work = Path(args.workdir) / "parts"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    clock = time.process_time
    spent: collections.Counter[str] = collections.Counter()

    class Timed(sqlite3.Connection):
        def execute(self, sql: str, *a: Any) -> Any:  # type: ignore[override]
            c = clock()
            try:
                return super().execute(sql, *a)
            finally:
                spent["sql: " + " ".join(sql.split())[:60]] += clock() - c

        def executemany(self, sql: str, *a: Any) -> Any:  # type: ignore[override]
            c = clock()
            try:
                return super().executemany(sql, *a)
            finally:
                spent["many: " + " ".join(sql.split())[:60]] += clock() - c

    connect = sqlite3.connect
    sqlite3.connect = lambda *a, **k: connect(*a, factory=Timed, **k)  # type: ignore[assignment]
    c0 = clock()
    import cortex
    import cortex.code
    import cortex.engine
    import cortex.semantic
    import cortex.store
    import cortex.vectors
    from cortex.model_dir import _locate

    def wrap(owner: Any, name: str) -> None:
        inner = getattr(owner, name)

        def timed(*a: Any, **k: Any) -> Any:
            c = clock()
            try:
                return inner(*a, **k)
            finally:
                spent["py: " + name] += clock() - c

        setattr(owner, name, timed)

    for owner, name in [
        (cortex.code, "extract"),
        (cortex.store.MemoryInput, "__init__"),
        (cortex.semantic, "_stored_array"),
        (cortex.semantic, "row_checksums"),
        (cortex.semantic.Semantic, "supplied"),
        (cortex.semantic.Semantic, "_append"),
        (cortex.vectors.VectorIndex, "append"),
        (cortex.store.Store, "_insert_bulk"),
    ]:
        wrap(owner, name)
    model = _locate(None).model_id

    class Supplied:
        model_id, dim = model, 384

        def embed(self, text: str) -> Any:
            return vecs[0]

        def embed_batch(self, batch: list[str]) -> Any:
            return vecs[: len(batch)]

    c1 = clock()
    engine = cortex.open(work / "cortex.db", embedder=Supplied(), keyword_index="off")
    c2 = clock()
    for s in range(0, args.size, 5000):
        engine.add_many(({"content": t} for t in texts[s : s + 5000]), vectors=vecs[s : s + 5000])
    c3 = clock()
    engine.flush()
    c4 = clock()
    engine.close()
    c5 = clock()
    print(f"import {c1 - c0:.3f} open {c2 - c1:.3f} add_many {c3 - c2:.3f} flush {c4 - c3:.3f}"
          f" close {c5 - c4:.3f} total {c5 - c0:.3f}")  # fmt: skip
    for key, value in spent.most_common():
        if value >= 0.0015:
            print(f"{value:.3f} {key}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["ab", "parts"])
    ap.add_argument("before", nargs="?", type=Path)
    ap.add_argument("after", nargs="?", type=Path)
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/cortex-ingest-parts"))
    args = ap.parse_args()
    if args.command == "ab":
        if args.before is None or args.after is None:
            ap.error("ab needs BEFORE and AFTER package folders")
        ab(args)
    else:
        parts(args)


if __name__ == "__main__":
    main()
