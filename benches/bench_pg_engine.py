"""The Engine on PostgreSQL against the Engine on SQLite: the same store, the same queries.

Loads one store of the agent set (eval/agent, default the 3000 store) into both backends
through `Engine.add_many` with the same vectors (the default model, embedded once), then
runs every query of that store in keyword, semantic and hybrid mode on each. Prints, per
mode, the median and p95 latency of a search on each backend and how many of the top-10
positions agree (issue 13's "same answers").

    python benches/bench_pg_engine.py [--store 3000] [--repeat 3] [--cache DIR]

`--scale N` grows the store to N memories with copies of its records (each with a few
random words appended and its vector moved by small Gaussian noise, re-normalised: the
default model embeds only the store itself); `--modes` limits the modes run. As shipped,
`engine.flush()` builds PostgreSQL's HNSW index once the model has
`cortex.pg.vectors.HNSW_MIN_ROWS` vectors; `--hnsw` measures first with the exact scan
(the index held back) and then again after building it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from tests.pg_server import running_server  # noqa: E402

import cortex  # noqa: E402
from cortex.agent_eval import load_set, record_of  # noqa: E402
from cortex.embed import load_default_embedder  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", default="3000")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each query (median kept)")
    ap.add_argument("--differences", action="store_true", help="list the queries that differ")
    ap.add_argument("--scale", type=int, default=0, help="grow the store to N memories")
    ap.add_argument("--modes", default="keyword,semantic,hybrid")
    ap.add_argument("--hnsw", action="store_true", help="measure again with the HNSW index")
    ap.add_argument("--noise", type=float, default=0.01, help="σ per dimension of the copies")
    ap.add_argument(
        "--cache", type=Path, default=None,
        help="a folder keeping the store's embedded vectors between runs (same model)",
    )  # fmt: skip
    args = ap.parse_args()
    agent = load_set("agent")
    records = [record_of(m) for m in agent.members(args.store)]
    queries = [q for q in agent.queries if q["store"] == args.store]
    embedder = load_default_embedder()
    t0 = time.perf_counter()
    cached = args.cache / f"agent-{args.store}.npy" if args.cache is not None else None
    if cached is not None and cached.is_file():
        vectors = np.load(cached)
    else:
        vectors = np.asarray(embedder.embed_batch([r["content"] for r in records]), np.float32)
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            np.save(cached, vectors)
    print(f"{len(records)} memories embedded in {time.perf_counter() - t0:.1f} s;"
          f" {len(queries)} queries")  # fmt: skip
    if args.scale > len(records):
        records, vectors = grow(records, vectors, args.scale, args.noise)
        print(f"grown to {len(records)} memories")
    now = datetime.fromisoformat(agent.meta["now"])
    from cortex.pg import vectors as pgvectors

    min_rows = pgvectors.HNSW_MIN_ROWS
    if args.hnsw:  # the exact scan first
        pgvectors.HNSW_MIN_ROWS = 1 << 62
    with tempfile.TemporaryDirectory() as tmp, running_server() as server:
        engines = {
            "sqlite": cortex.open(Path(tmp) / "bench.db", embedder=embedder),
            "postgres": cortex.open(server.create_database("bench"), embedder=embedder),
        }
        keys = {}
        for name, e in engines.items():
            t = time.perf_counter()
            ids = e.add_many(records, vectors=vectors, model_id=e.model_id)
            e.flush()
            print(f"{name}: add_many {time.perf_counter() - t:.1f} s")
            pg_keywords = getattr(e, "_pg_keywords", None)
            if pg_keywords is not None:
                print(f"{name}: in-memory keyword index ready: {pg_keywords.ready()}")
            keys[name] = {i: r["metadata"]["key"] for i, r in zip(ids, records, strict=True)}
        for e in engines.values():  # warm: model, caches, the vector index
            e.search("warm up", record=False)
        modes = args.modes.split(",")
        measure(engines, keys, queries, modes, now, args.repeat, args.differences)
        if args.hnsw:
            pgvectors.HNSW_MIN_ROWS = min_rows
            t = time.perf_counter()
            engines["postgres"].flush()  # what a bulk load's end does: builds the index
            print(f"postgres: HNSW index built in {time.perf_counter() - t:.1f} s")
            engines["postgres"].search("warm up", record=False)
            measure(engines, keys, queries, modes, now, args.repeat, args.differences)
            hnsw_recall(engines["postgres"], embedder, queries, now)
        for e in engines.values():
            e.close()


def grow(
    records: list[dict], vectors: np.ndarray, n: int, noise: float = 0.01
) -> tuple[list[dict], np.ndarray]:
    """`n` records: the originals, then copies with random words appended and their
    vectors moved by Gaussian noise (seeded), re-normalised."""
    rng = np.random.default_rng(0)
    words = " ".join(r["content"] for r in records).split()
    out = list(records)
    rows = [vectors]
    base = len(records)
    idx = np.arange(base, n) % base
    jitter = rng.normal(0, noise, (n - base, vectors.shape[1])).astype(np.float32)
    more = vectors[idx] + jitter
    more /= np.linalg.norm(more, axis=1, keepdims=True)
    rows.append(more)
    for j, i in enumerate(idx):
        r = records[i]
        extra = " ".join(words[k] for k in rng.integers(0, len(words), 4))
        meta = {**r["metadata"], "key": f"{r['metadata']['key']}~{base + j}"}
        out.append({**r, "content": f"{r['content']} {extra}", "metadata": meta})
    return out, np.concatenate(rows)


def hnsw_recall(engine: cortex.Engine, embedder: object, queries: list, now: datetime) -> None:
    """Recall@10 of the HNSW search against the exact scan (pool 100, as the Engine asks)
    at a few `ef_search` values."""
    from cortex.pg import vectors as pgvectors

    opts = cortex.Options(mode="semantic", limit=10, now=now, record=False)
    qvs = [embedder.embed(q["query"]) for q in queries]  # type: ignore[attr-defined]
    store, model = engine.store, engine.model_id
    exact = [
        [h.memory_id for h in pgvectors.search(store, v, model, opts, 100, exact=True)] for v in qvs
    ]
    for ef in (100, 400, 1000):
        found = 0
        for v, ex in zip(qvs, exact, strict=True):
            hits = pgvectors.search(store, v, model, opts, 100, ef_search=ef)
            found += len({h.memory_id for h in hits[:10]} & set(ex[:10]))
        print(f"HNSW recall@10 against exact, ef_search {ef}: {found / (10 * len(qvs)):.3f}")


def measure(
    engines: dict, keys: dict, queries: list, modes: list[str], now: datetime, repeat: int,
    differences: bool,
) -> None:  # fmt: skip
    print("| mode | SQLite p50 / p95 | PostgreSQL p50 / p95 | top-10 positions equal |")
    print("| --- | --- | --- | --- |")
    for mode in modes:
        times: dict[str, list[float]] = {n: [] for n in engines}
        tops: dict[str, list[list[str]]] = {n: [] for n in engines}
        opts = cortex.Options(mode=mode, limit=10, now=now, record=False)
        for q in queries:
            for name, e in engines.items():
                runs = []
                for _ in range(repeat):
                    t = time.perf_counter()
                    found = e.search(q["query"], opts)
                    runs.append(time.perf_counter() - t)
                times[name].append(statistics.median(runs))
                tops[name].append([keys[name][r.memory.id] for r in found])
        equal = total = 0
        differ = []
        for q, a, b in zip(queries, tops["sqlite"], tops["postgres"], strict=True):
            same = sum(1 for x, y in zip(a, b, strict=False) if x == y)
            equal += same
            total += max(len(a), len(b))
            if same < max(len(a), len(b)):
                differ.append(f"  {mode} {q['id']} {q['query']!r}: {a} / {b}")

        def ms(values: list[float], q: float) -> str:
            return f"{1e3 * float(np.quantile(values, q)):.1f}"

        print(
            f"| {mode} | {ms(times['sqlite'], 0.5)} / {ms(times['sqlite'], 0.95)} ms"
            f" | {ms(times['postgres'], 0.5)} / {ms(times['postgres'], 0.95)} ms"
            f" | {equal} / {total} ({100 * equal / max(total, 1):.1f} %) |"
        )
        if differences:
            print("\n".join(differ))


if __name__ == "__main__":
    main()
