"""Hybrid search latency in one process, the way an agent calls it (issue 16 item 5):
the query embedding (first time and repeated), the pipeline around the kernels, and
recording, on SciFact texts at 10k and 100k memories.

    python benches/bench_latency.py build --sizes 10000 100000
    python benches/bench_latency.py run --sizes 10000 100000 --queries 200
    python benches/bench_latency.py run --sizes 10000 --before /tmp/cortex-before/python
    python benches/bench_latency.py run --sizes 100000 --before /tmp/b/python --encoder int8
    python benches/bench_latency.py profile --size 100000 --queries 100 > profile.txt
    python benches/bench_latency.py stages --size 100000 --queries 100 --kind first

Memories: SciFact's abstracts then sentence-window passages cut from them (the corpus of
benches/bench_e2e.py), stored with seeded random unit vectors through
``add_many(..., vectors=...)`` (the cost of the scan and the pipeline does not depend on
what the vectors are; building needs no model run). Queries: SciFact test claims,
embedded at query time by cortex's default model (the real query cost).

`run` measures, query by query and interleaved (the order rotating per query):
- ``first``: a query not seen before (the query cache cleared), recording on (defaults);
- ``repeat``: the same query again (the cache answers the embedding), recording on;
- ``norecord``: the first kind with ``record=False``.
With ``--before PATH`` (a ``python`` folder of another checkout of cortex), the same
three are measured in a child process of that code at the same time, alternating rounds
of 20 queries between the two processes, so both see the same machine load. p50 / p99 in
ms, the process's CPU time per search (``cpu``: until the answer; ``cpu_total``: with
its recall rows written, which the writer thread does after the answer), and whether
both answered the same ids and scores. ``--encoder int8`` runs this checkout's side with
the int8 query encoder (``CORTEX_QUERY_ENCODER``; the ``--before`` side keeps its default).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_e2e import DEFAULT_DATA, corpus, test_queries  # noqa: E402

#: Every search reads the same clock (recency boosts depend on it): both sides' scores
#: can then be compared exactly.
NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
WORK = Path(os.environ.get("CORTEX_BENCH_LATENCY", "/tmp/cortex-latency"))


def db_for(size: int) -> Path:
    return WORK / str(size) / "cortex.db"


def build(sizes: list[int], data: Path) -> None:
    import cortex
    from cortex.embed import load_default_embedder

    real = load_default_embedder()
    texts, _ = corpus(data, max(sizes))
    for size in sizes:
        path = db_for(size)
        if path.exists():
            print(f"{path} exists", flush=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(size)
        t0 = time.perf_counter()
        with cortex.open(path, embedder=real) as e:
            for start in range(0, size, 5000):
                part = texts[start : min(size, start + 5000)]
                vecs = rng.normal(size=(len(part), real.dim)).astype(np.float32)
                vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
                e.add_many(({"content": t} for t in part), vectors=vecs)
            e.flush()
        print(f"built {path}: {size} memories in {time.perf_counter() - t0:.1f} s", flush=True)


class Runner:
    """The three kinds of search on one store, in this process."""

    def __init__(self, size: int) -> None:
        import cortex
        from cortex.embed import load_default_embedder

        self.cortex = cortex
        self.engine = cortex.open(db_for(size), embedder=load_default_embedder())
        self.engine.keyword_index.wait()
        self.engine.search("warm up", record=False)
        # a saved index of another version is rebuilt in the background from the first
        # search on (FTS5 answers meanwhile): measure once it answers
        self.engine.keyword_index.wait()

    def clear(self) -> None:
        cache = getattr(self.engine, "query_cache", None)
        if cache is not None:
            cache.clear()

    def one(self, kind: str, q: str) -> tuple[float, float, float, list[tuple[int, float]]]:
        if kind != "repeat":
            self.clear()
        opts = self.cortex.Options(record=kind != "norecord", now=NOW)
        c0, t0 = time.process_time(), time.perf_counter()
        results = self.engine.search(q, opts)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        # The recall rows are written by a writer thread after the answer (after d6ee9de):
        # wait for them here, untimed, so that the next search is not charged their CPU;
        # the CPU of the answer plus the write is reported apart ("cpu_total").
        flush = getattr(self.engine, "flush_recalls", None)
        if flush is not None:
            flush()
        total = time.process_time() - c0
        return wall, cpu, total, [(r.memory.id, round(r.score, 9)) for r in results]

    def close(self) -> None:
        self.engine.close()


KINDS = ("first", "repeat", "norecord")


def child(size: int) -> None:
    """Serve rounds on stdin/stdout: a JSON list of queries in, a JSON result out."""
    runner = Runner(size)
    print("ready", flush=True)
    for line in sys.stdin:
        queries = json.loads(line)
        print(json.dumps(round_of(runner, queries)), flush=True)
    runner.close()


def round_of(runner: Runner, queries: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {k: {"wall": [], "cpu": [], "total": [], "ids": []} for k in KINDS}
    for q in queries:
        for kind in KINDS:  # "repeat" right after "first": the same query again
            wall, cpu, total, ids = runner.one(kind, q)
            out[kind]["wall"].append(wall)
            out[kind]["cpu"].append(cpu)
            out[kind]["total"].append(total)
            out[kind]["ids"].append(ids)
    return out


def pct(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return statistics.median(s) * 1e3, s[min(len(s) - 1, round(0.99 * (len(s) - 1)))] * 1e3


def run(args: argparse.Namespace) -> None:
    for size in args.sizes:
        queries, _ = test_queries(args.data, args.queries)
        sides: dict[str, Any] = {}
        procs: dict[str, subprocess.Popen[str]] = {}
        code = {"after": str(HERE.parent / "python")}
        if args.before:
            code["before"] = args.before
        for name, root in code.items():
            env = {**os.environ, "PYTHONPATH": root}
            env.pop("CORTEX_QUERY_ENCODER", None)
            if name == "after" and args.encoder:
                env["CORTEX_QUERY_ENCODER"] = args.encoder
            procs[name] = subprocess.Popen(
                [sys.executable, __file__, "child", "--size", str(size)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            assert procs[name].stdout is not None
            line = procs[name].stdout.readline().strip()
            if line != "ready":
                raise SystemExit(f"{name}: child failed to start")
            sides[name] = {k: {"wall": [], "cpu": [], "total": [], "ids": []} for k in KINDS}
        rounds = [queries[i : i + 20] for i in range(0, len(queries), 20)]
        for r, part in enumerate(rounds):
            names = list(procs)
            if r % 2:
                names.reverse()
            for name in names:
                p = procs[name]
                assert p.stdin is not None and p.stdout is not None
                p.stdin.write(json.dumps(part) + "\n")
                p.stdin.flush()
                got = json.loads(p.stdout.readline())
                for k in KINDS:
                    for field in ("wall", "cpu", "total", "ids"):
                        sides[name][k][field].extend(got[k][field])
        for p in procs.values():
            assert p.stdin is not None
            p.stdin.close()
            p.wait(timeout=120)
        row: dict[str, Any] = {
            "memories": size,
            "queries": len(queries),
            "load": [round(x, 1) for x in os.getloadavg()],
            "encoder": args.encoder or "default",
        }
        for name, side in sides.items():
            for k in KINDS:
                p50, p99 = pct(side[k]["wall"])
                row[f"{name} {k}"] = {
                    "p50_ms": round(p50, 2),
                    "p99_ms": round(p99, 2),
                    "cpu_p50_ms": round(statistics.median(side[k]["cpu"]) * 1e3, 2),
                    "cpu_total_p50_ms": round(statistics.median(side[k]["total"]) * 1e3, 2),
                }
        if "before" in sides:
            a, b = sides["after"]["first"]["ids"], sides["before"]["first"]["ids"]
            row["same_ids"] = sum(
                [i for i, _ in x] == [i for i, _ in y] for x, y in zip(a, b, strict=True)
            ) / len(a)
            row["same_ids_and_scores"] = sum(x == y for x, y in zip(a, b, strict=True)) / len(a)
        print(json.dumps(row), flush=True)


def profile(args: argparse.Namespace) -> None:
    import cProfile
    import pstats

    queries, _ = test_queries(args.data, args.queries)
    runner = Runner(args.size)
    for q in queries[:5]:
        runner.one("norecord", q)
    # The CPU clock of the calling thread: a loaded machine's waits are not charged to
    # the code; the semantic leg's thread is not seen (`stages` times it).
    prof = cProfile.Profile(time.thread_time) if args.clock == "cpu" else cProfile.Profile()
    prof.enable()
    for q in queries:
        runner.one(args.kind, q)
    prof.disable()
    runner.close()
    stats = pstats.Stats(prof)
    stats.sort_stats(args.sort).print_stats(args.top)


#: What `stages` times: (module, attribute path) of the pipeline's steps, each on the
#: CPU clock of the thread that runs it (the semantic leg runs on a worker thread).
STAGES = [
    ("cortex.search.pipeline", "Pipeline.candidates"),
    ("cortex.search.sqlite", "KeywordRetriever.retrieve"),
    ("cortex.search.sqlite", "KeywordRetriever.absent"),
    ("cortex.search.sqlite", "KeywordRetriever.rescore"),
    ("cortex.search.sqlite", "SemanticRetriever.retrieve"),
    ("cortex.search.sqlite", "SemanticRetriever._query"),
    ("cortex.search.sqlite", "SemanticRetriever._stats"),
    ("cortex.search.sqlite", "SemanticRetriever.rescore"),
    ("cortex.search.sqlite", "SemanticRetriever.verify"),
    ("cortex.semantic", "Semantic.verified_search"),
    ("cortex.store", "Store.rank_info"),
    ("cortex.search.pipeline", "Pipeline._fuse"),
    ("cortex.search.pipeline", "Pipeline._rank"),
    ("cortex.search.pipeline", "Pipeline._results"),
    ("cortex.search.pipeline", "Pipeline._finish"),
    ("cortex.engine", "Engine._suggest"),
    # inside the suggestions (the tail of first-time queries)
    ("cortex.suggest", "vocabulary"),
    ("cortex.suggest", "corrections"),
    ("cortex.suggest", "_starting"),
    ("cortex.suggest", "_count"),
    ("cortex.suggest", "_together"),
    ("cortex.suggest", "related_terms"),
    ("cortex.suggest", "_doc_counts"),
]


def stages(args: argparse.Namespace) -> None:
    """Per-stage CPU time (p50 and mean over the queries, in ms) of one kind of search:
    each stage on the CPU clock of its own thread, beside the search's wall and process
    CPU time."""
    import functools
    import importlib

    queries, _ = test_queries(args.data, args.queries)
    runner = Runner(args.size)
    for q in queries[:5]:
        runner.one("norecord", q)
    spent: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*a: Any, **k: Any) -> Any:
            t0 = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                spent[name] = spent.get(name, 0.0) + time.thread_time() - t0

        return wrapper

    for module, path in STAGES:
        owner: Any = importlib.import_module(module)
        *parents, attr = path.split(".")
        for part in parents:
            owner = getattr(owner, part, None)
        if owner is not None and hasattr(owner, attr):
            setattr(owner, attr, timed(path, getattr(owner, attr)))
    samples: dict[str, list[float]] = {}
    each: list[tuple[float, str, dict[str, float]]] = []
    for q in queries:
        spent.clear()
        wall, cpu, _, _ = runner.one(args.kind, q)
        spent["search (wall)"], spent["search (process CPU)"] = wall, cpu
        for name, value in spent.items():
            samples.setdefault(name, []).append(value)
        each.append((wall, q, dict(spent)))
    runner.close()
    load = os.getloadavg()[0]
    print(f"{args.kind} searches at {args.size:,}, {len(queries)} queries, load {load:.1f}")
    for name, values in samples.items():
        print(
            f"{name:34s} {len(values):4d}x  p50 {statistics.median(values) * 1e3:7.3f} ms"
            f"  mean {statistics.mean(values) * 1e3:7.3f} ms"
        )
    if args.worst:
        # the tail by query: each slowest search's steps above 1 ms, largest first
        print(f"the {args.worst} slowest searches (wall ms; steps over 1 ms CPU):")
        for wall, q, steps in sorted(each, reverse=True)[: args.worst]:
            big = sorted(
                ((v, k) for k, v in steps.items() if "search (" not in k and v > 1e-3),
                reverse=True,
            )
            parts = ", ".join(f"{k} {v * 1e3:.1f}" for v, k in big)
            print(f"  {wall * 1e3:7.1f}  {q[:60]!r}: {parts}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    r = sub.add_parser("run")
    r.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    r.add_argument("--queries", type=int, default=200)
    r.add_argument("--before", help="the python/ folder of the cortex to compare with")
    r.add_argument("--encoder", choices=["fp32", "int8"], help="this checkout's query encoder")
    c = sub.add_parser("child")
    c.add_argument("--size", type=int, required=True)
    p = sub.add_parser("profile")
    p.add_argument("--size", type=int, default=10_000)
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--kind", choices=KINDS, default="repeat")
    p.add_argument("--sort", default="cumulative")
    p.add_argument("--top", type=int, default=60)
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    st = sub.add_parser("stages")
    st.add_argument("--size", type=int, default=100_000)
    st.add_argument("--queries", type=int, default=100)
    st.add_argument("--kind", choices=KINDS, default="first")
    st.add_argument("--worst", type=int, default=0, help="list the N slowest searches")
    for sp in (b, r, p, st):
        sp.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()
    if args.cmd == "build":
        build(args.sizes, args.data)
    elif args.cmd == "run":
        run(args)
    elif args.cmd == "child":
        child(args.size)
    elif args.cmd == "stages":
        stages(args)
    else:
        profile(args)


if __name__ == "__main__":
    main()
