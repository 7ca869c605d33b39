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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="5000,20000,50000")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument(
        "--synthetic",
        action="store_true",
        help="clustered random vectors instead of SciFact's embeddings (no model needed)",
    )
    args = ap.parse_args()
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
