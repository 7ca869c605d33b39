"""The first keyword search of a fresh process: the saved keyword index against a build.

    python benches/bench_keyword_load.py [--size 100000] [--runs 5] [--data DIR]
    python benches/bench_keyword_load.py --synthetic 1000000   # the file alone, no SQLite

A store of *size* SciFact passages (as bench_keyword; no vectors) is built once. Then,
in fresh processes interleaved round-robin, each opens it and runs one keyword search
(a short and a long query, `Engine.search`, mode keyword, record off), timed from before
`cortex.open` to the answer (CPU and wall seconds, medians):

- ``build``: policy "on" with no saved file (tokenizes every memory, as every process
  did before the file existed);
- ``load``: policy "on" with the saved file (``<db>-index/keywords.bin``);
- ``fts5``: policy "off" (FTS5 alone: what the CLI does below ``SAVED_MIN``).

The answers of the three are compared (same ids, same order). ``--synthetic N`` instead
builds an index of N random-word documents in memory and times ``to_bytes`` and
``from_bytes`` (the file's write and load cost at a size SQLite is not built for here).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "benches"))

from bench_keyword import DEFAULT_DATA, passages  # noqa: E402

CHILD = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import cortex
with cortex.open(sys.argv[1], embedder=None, keyword_index=sys.argv[2]) as e:
    r = e.search(sys.argv[3], cortex.Options(mode="keyword", limit=10, record=False))
    used = e.keyword_index.ready()
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "ids": [x.memory.id for x in r], "used": used}))
"""


def child(db: Path, policy: str, query: str, env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(db), policy, query],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    out: dict[str, object] = json.loads(done.stdout)
    return out


def synthetic(n: int) -> None:
    import itertools
    import random

    import numpy as np

    from cortex._native import KeywordIndex

    rng = random.Random(0)
    words = [f"w{i}" for i in range(50_000)]
    cum = list(itertools.accumulate(1 / (i + 1) for i in range(len(words))))  # Zipf-like
    index = KeywordIndex()
    t = time.process_time()
    for start in range(0, n, 50_000):
        m = min(50_000, n - start)
        texts = [
            " ".join(rng.choices(words, cum_weights=cum, k=rng.randint(8, 60))) for _ in range(m)
        ]
        index.add(np.arange(start + 1, start + m + 1, dtype=np.int64), texts)
    print(f"built {n:,} documents in {time.process_time() - t:.1f} CPU-s (texts included)")
    t = time.perf_counter()
    data = index.to_bytes(1)
    print(f"to_bytes {time.perf_counter() - t:.2f} s, {len(data) / 1e6:.0f} MB")
    with tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        del data
        loads = []
        for _ in range(3):
            t, c = time.perf_counter(), time.process_time()
            loaded, _ = KeywordIndex.from_bytes(Path(f.name).read_bytes())
            loads.append((time.perf_counter() - t, time.process_time() - c))
            assert len(loaded) == n
            del loaded
    print(
        f"read + from_bytes: {statistics.median(w for w, _ in loads):.2f} s wall, "
        f"{statistics.median(c for _, c in loads):.2f} CPU-s (median of 3)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--db", type=Path, default=None, help="reuse this store (built if missing)")
    ap.add_argument("--synthetic", type=int, default=0)
    shared = Path("/work/shared/data/scifact")
    default = DEFAULT_DATA if DEFAULT_DATA.exists() or not shared.exists() else shared
    ap.add_argument("--data", type=Path, default=default)
    args = ap.parse_args()
    if args.synthetic:
        synthetic(args.synthetic)
        return

    import cortex

    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python"), env.get("PYTHONPATH", "")])
    with tempfile.TemporaryDirectory(prefix="cortex-kwload-") as tmp:
        db = args.db or Path(tmp) / f"k{args.size}.db"
        if not db.exists():
            texts = passages(args.data, args.size)
            with cortex.open(db, embedder=None, keyword_index="off") as engine:
                engine.add_many([{"content": t, "project": "bench"} for t in texts])
        saved = db.with_name(f"{db.name}-index") / "keywords.bin"
        with cortex.open(db, embedder=None, keyword_index="on") as engine:
            t = time.perf_counter()
            engine.keyword_index.persist()
            print(f"built and saved in {time.perf_counter() - t:.2f} s")
        size = saved.stat().st_size
        print(f"{saved.name}: {size / 1e6:.1f} MB ({size / args.size:.0f} B a memory)")
        aside = saved.with_name("keywords.aside")
        queries = {
            "short": "vitamin deficiency",
            "long": "the effect of vitamin d deficiency on bone density in elderly women",
        }
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        answers: dict[tuple[str, str], object] = {}
        for _ in range(args.runs):
            for qname, q in queries.items():
                for case, policy in (("load", "on"), ("fts5", "off"), ("build", "on")):
                    if case == "build":
                        saved.rename(aside)
                    try:
                        got = child(db, policy, q, env)
                    finally:
                        if case == "build":
                            saved.unlink(missing_ok=True)  # what the build saved
                            aside.rename(saved)
                    assert got["used"] == (case != "fts5"), (case, got)
                    times.setdefault((qname, case), []).append(
                        (float(got["wall"]), float(got["cpu"]))  # type: ignore[arg-type]
                    )
                    answers.setdefault((qname, case), got["ids"])
        for qname in queries:
            same = answers[(qname, "load")] == answers[(qname, "build")]
            same = same and answers[(qname, "load")] == answers[(qname, "fts5")]
            print(f"{qname} query: the three answers {'agree' if same else 'DIFFER'}")
        print(
            f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load "
            f"{os.getloadavg()[0]:.1f}, {args.size:,} memories, {args.runs} runs each"
        )
        print("| query | case | open + first search, wall p50 s | CPU p50 s |")
        print("|---|---|---|---|")
        for (qname, case), got in times.items():
            print(
                f"| {qname} | {case} | {statistics.median(w for w, _ in got):.3f} "
                f"| {statistics.median(c for _, c in got):.3f} |"
            )


if __name__ == "__main__":
    main()
