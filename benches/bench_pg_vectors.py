"""pgvector on cortex's schema: exact scan cost by size, HNSW recall@10 against exact.

Vectors: the SciFact corpus embedded by the default model (cached in /tmp by the first
run), grown to the larger sizes with perturbed copies (each copy = a corpus vector plus
Gaussian noise, renormalised: near-duplicates, the hard case for a graph index). Queries:
SciFact's claims, embedded by the same model. For each size: exact p50 (limit 10), the
HNSW build time, HNSW p50 and recall@10 against exact at pgvector's default ef_search
(40), unfiltered and walled to one of two projects (iterative scan).

    python benches/bench_pg_vectors.py [--sizes 5000,20000,50000] [--queries 100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "python"))

CACHE = Path("/tmp/cortex-bench-scifact-vectors.npz")


def _vectors() -> tuple[np.ndarray, np.ndarray]:
    if CACHE.exists():
        data = np.load(CACHE)
        return data["docs"], data["queries"]
    done, qdone = Path("/tmp/scifact_vecs.npy"), Path("/tmp/scifact_qvecs.npy")
    if done.exists() and qdone.exists():  # an earlier embedding run of the same texts
        np.savez(CACHE, docs=np.load(done), queries=np.load(qdone))
        return _vectors()
    from cortex.embed import load_default_embedder
    from cortex.eval import load_beir

    d = load_beir(ROOT.parent.parent / "shared" / "data" / "scifact")
    e = load_default_embedder()
    texts = [f"{t}\n\n{x}".strip() for t, x in d.corpus.values()]
    docs = np.concatenate(
        [np.asarray(e.embed_batch(texts[i : i + 64]), np.float32) for i in range(0, len(texts), 64)]
    )
    queries = np.asarray(e.embed_batch(list(d.queries.values())), np.float32)
    np.savez(CACHE, docs=docs, queries=queries)
    return docs, queries


def _real(count: int, queries: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """SciFact passages embedded by the default model, from `bench_e2e.py prepare`'s cache
    (CORTEX_BENCH_CACHE, default /tmp/cortex-bench: the whole 100k, or the prefix it has
    finished), and SciFact's queries embedded by the same model (cached beside them)."""
    import json
    import os

    cache = Path(os.environ.get("CORTEX_BENCH_CACHE", "/tmp/cortex-bench"))
    texts = json.loads((cache / "corpus.json").read_text())["texts"]
    full = cache / "passages-100k.npy"
    vecs = np.load(full if full.exists() else cache / "partial.npy")
    zero = np.flatnonzero(np.linalg.norm(vecs, axis=1) == 0)  # not embedded yet
    n = min(count, int(zero[0]) if len(zero) else len(vecs))
    qfile = cache / f"queries-{queries}.npy"
    if qfile.exists():
        qv = np.load(qfile)
    else:
        from cortex.embed import load_default_embedder

        data = Path(os.environ.get("SCIFACT", "/work/shared/data/scifact"))
        lines = (data / "queries.jsonl").read_text()
        qs = [json.loads(x)["text"] for x in lines.splitlines() if x.strip()][:queries]
        qv = np.asarray(load_default_embedder().embed_batch(qs), np.float32)
        np.save(qfile, qv)
    return texts[:n], vecs[:n], qv


def real_main(args: argparse.Namespace) -> None:
    """HNSW against the exact scan on real embeddings: for each size, exact p50 and, per
    ef_search, HNSW p50 and recall@10 (the top 10 of a pool of --pool, as the Engine
    asks) against the exact top 10; unfiltered, walled to one of 4 projects, and walled
    with a category filter that keeps 1 in 10 of those (iterative scans)."""
    from tests.pg_server import running_server

    from cortex.options import Options
    from cortex.pg import vectors
    from cortex.pg.store import EmbeddingBatch, PgStore
    from cortex.store import MemoryInput, content_hash

    sizes = [int(x) for x in args.sizes.split(",")]
    texts, docs, queries = _real(max(sizes), args.queries)
    print(f"{len(texts)} real passages available; {len(queries)} queries", flush=True)
    sizes = [x for x in sizes if x <= len(texts)]
    vectors.HNSW_M, vectors.HNSW_EF_CONSTRUCTION = args.m, args.ef_construction
    efs = [int(x) for x in args.ef.split(",")]
    model = "all-MiniLM-L6-v2"
    settings = {
        "all": Options(),
        "walled": Options(project="p1"),
        "walled+category": Options(project="p1", category="c0"),
    }
    with running_server() as server:
        store = PgStore.open(server.create_database("vectors"))
        have = 0
        for size in sizes:
            while have < size:
                n = min(2000, size - have)
                items = [
                    MemoryInput(texts[i], project=f"p{i % 4}", category=f"c{(i // 4) % 10}")
                    for i in range(have, have + n)
                ]
                by_hash = {content_hash(it.content): docs[have + j] for j, it in enumerate(items)}
                store.add_many(items, EmbeddingBatch(model, docs.shape[1], by_hash))
                have += n
            with store.transaction() as tx:
                tx.execute("ANALYZE embeddings")
                tx.execute("ANALYZE memories")

            def run(opts: Options, exact: bool, ef: int | None = None):
                out, times = [], []
                for q in queries:
                    t0 = time.perf_counter()
                    hits = vectors.search(store, q, model, opts, args.pool, exact=exact,
                                          ef_search=ef)  # fmt: skip
                    times.append(time.perf_counter() - t0)
                    out.append([h.memory_id for h in hits[:10]])
                return out, statistics.median(times) * 1e3

            def recall(a: list[list[int]], b: list[list[int]]) -> float:
                return sum(len(set(x) & set(y)) for x, y in zip(a, b, strict=True)) / max(
                    1, sum(len(y) for y in b)
                )

            exact = {k: run(o, True) for k, o in settings.items()}
            name = vectors.hnsw_index_name(model, docs.shape[1])
            with store.transaction() as tx:
                tx.execute(f'DROP INDEX IF EXISTS "{name}"')
            t0 = time.perf_counter()
            vectors.ensure_hnsw(store, model, docs.shape[1], min_rows=0)
            build_s = time.perf_counter() - t0
            print(f"\n{size} rows (m {args.m}, ef_construction {args.ef_construction}):"
                  f" HNSW build {build_s:.1f} s; pool {args.pool}", flush=True)  # fmt: skip
            print("| filter | exact p50 | ef_search | HNSW p50 | recall@10 |")
            print("| --- | --- | --- | --- | --- |")
            for key, o in settings.items():
                for ef in efs:
                    got, ms = run(o, False, ef)
                    print(f"| {key} | {exact[key][1]:.1f} ms | {ef} | {ms:.1f} ms"
                          f" | {recall(got, exact[key][0]):.4f} |", flush=True)  # fmt: skip
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="5000,20000,50000")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument(
        "--synthetic",
        action="store_true",
        help="clustered random vectors instead of SciFact's embeddings (no model needed)",
    )
    ap.add_argument("--real", action="store_true", help="SciFact passages (bench_e2e prepare)")
    ap.add_argument("--pool", type=int, default=100, help="--real: rows asked (the Engine's pool)")
    ap.add_argument("--ef", default="40,64,100,200", help="--real: ef_search values")
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--ef-construction", type=int, default=64)
    args = ap.parse_args()
    if args.real:
        real_main(args)
        return
    from tests.pg_server import running_server

    from cortex.options import Options
    from cortex.pg import vectors
    from cortex.pg.store import EmbeddingBatch, PgStore
    from cortex.store import MemoryInput, content_hash

    if args.synthetic:
        g = np.random.default_rng(42)
        centers = g.standard_normal((500, 384)).astype(np.float32)
        docs = centers[g.integers(0, 500, 5183)] + 0.7 * g.standard_normal((5183, 384)).astype(
            np.float32
        )
        queries = centers[g.integers(0, 500, 300)] + 0.7 * g.standard_normal((300, 384)).astype(
            np.float32
        )
    else:
        docs, queries = _vectors()
    queries = queries[: args.queries]
    docs = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    rng = np.random.default_rng(0)
    sizes = [int(s) for s in args.sizes.split(",")]
    with running_server() as server:
        store = PgStore.open(server.create_database("vectors"))
        have = 0
        for size in sizes:
            while have < size:
                n = min(1000, size - have)
                src = docs[np.arange(have, have + n) % len(docs)]
                if have >= len(docs):
                    src = src + rng.normal(0, 0.02, src.shape).astype(np.float32)
                items = [
                    MemoryInput(f"m{have + i}", project=f"p{(have + i) % 2}") for i in range(n)
                ]
                by_hash = {content_hash(it.content): v for it, v in zip(items, src, strict=True)}
                store.add_many(items, EmbeddingBatch("minilm", docs.shape[1], by_hash))
                have += n
            with store.transaction() as tx:
                tx.execute("ANALYZE embeddings")
                tx.execute("ANALYZE memories")

            def run(opts: Options, exact: bool) -> tuple[list[list[int]], float]:
                out, times = [], []
                for q in queries:
                    t0 = time.perf_counter()
                    hits = vectors.search(store, q, "minilm", opts, 10, exact=exact)
                    times.append(time.perf_counter() - t0)
                    out.append([h.memory_id for h in hits])
                return out, statistics.median(times) * 1e3

            walled = Options(project="p1")
            exact_all, exact_ms = run(Options(), True)
            exact_wall, exact_wall_ms = run(walled, True)
            name = vectors.hnsw_index_name("minilm", docs.shape[1])
            with store.transaction() as tx:
                tx.execute(f'DROP INDEX IF EXISTS "{name}"')
            t0 = time.perf_counter()
            vectors.ensure_hnsw(store, "minilm", docs.shape[1], min_rows=0)
            build_s = time.perf_counter() - t0
            hnsw_all, hnsw_ms = run(Options(), False)
            hnsw_wall, hnsw_wall_ms = run(walled, False)

            def recall(a: list[list[int]], b: list[list[int]]) -> float:
                return sum(len(set(x) & set(y)) for x, y in zip(a, b, strict=True)) / sum(
                    len(y) for y in b
                )

            print(
                f"{size:>7} rows: exact p50 {exact_ms:6.1f} ms (walled {exact_wall_ms:6.1f}),"
                f" HNSW build {build_s:5.1f} s, HNSW p50 {hnsw_ms:5.1f} ms"
                f" (walled {hnsw_wall_ms:5.1f}), recall@10 {recall(hnsw_all, exact_all):.4f}"
                f" (walled {recall(hnsw_wall, exact_wall):.4f})",
                flush=True,
            )
        store.close()


if __name__ == "__main__":
    main()
