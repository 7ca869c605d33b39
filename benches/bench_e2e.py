"""End-to-end hybrid search beside what a user would build instead: cortex, SQLite FTS5 +
sqlite-vec fused by hand in Python, and LanceDB hybrid search.

    python benches/bench_e2e.py prepare            # embed the corpus once, cache in /tmp
    python benches/bench_e2e.py run [--sizes 10000 100000 1000000] [--queries 300]
    python benches/bench_e2e.py ingest --sizes 10000 100000 [--repeat 3]   # ingest only

`ingest` needs no `prepare`: cortex (`Engine.add_many(records, vectors=...)`) and the recipe
store the same texts and vectors (the cached ones, else seeded random unit vectors: their
values do not change the cost), alternating, each run in a fresh process, through their
final WAL checkpoint; it reports CPU and wall time and the bytes of every part.

Data: SciFact's 5,183 abstracts ("title, blank line, text", exactly what `cortex eval`
imports) followed by passages cut from the same abstracts (windows of one, two and three
consecutive sentences, duplicates dropped), each passage tagged with the abstract it came
from; 100,000 memories in all. A size of N takes the first N memories, so every level holds
all the abstracts. Only the memories `prepare` embedded have real vectors (all 100k when it
runs to the end; the prefix it finished when stopped early, see load_cache); beyond them the
real memories are repeated: copy r > 0 of a text gets the suffix " [copy r]" and the cached
vector plus seeded Gaussian noise (sigma 0.01 per dimension, re-normalised, cosine to the
original ~0.98), so no two memories are identical and every copy is findable. Each result
row says how many memories had real vectors.

Embeddings are computed ONCE by `prepare` with cortex's own embedder (all-MiniLM-L6-v2,
onnxruntime) and cached in /tmp/cortex-bench (never in the repository); every system
ingests the same cached vectors, so ingest compares storage and indexing. The embedding
cost itself is measured separately and reported as its own row.

How cortex gets the cached vectors: `cortex.open(path, embedder=CachedEmbedder(...))`, an
object with `model_id`, `dim`, `embed` and `embed_batch` (cortex's Embedder protocol) that
returns the cached vector for a known text (looked up by text) and embeds anything else,
i.e. the queries, with the real model. The model id is the real model's, so the stored
vectors are interchangeable with ones cortex would compute.

Queries: SciFact test claims (300), embedded at query time by the same model in every
system (the latency includes it), default options (cortex: `engine.search(q)`, hybrid,
linear fusion, limit 20). Quality: nDCG@10 on the test qrels, where a passage counts as
the abstract it was cut from and only the first hit of each abstract is kept (20 results
fetched, deduplicated to abstracts, cut at 10); the same mapping for every system.

Each system x size is built (ingested) in its own subprocess, so peak RSS (`ru_maxrss`)
is per system. Then one process opens every built store of the size and queries them
interleaved, query by query with the order of systems rotating, so that the load of a
shared machine falls on every system alike (`measure`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
CACHE = Path(os.environ.get("CORTEX_BENCH_CACHE", "/tmp/cortex-bench"))
BASE = 100_000  # memories with real embeddings; larger sizes repeat them
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")
LIMIT = 20  # cortex's default limit; every system fetches as many


# --------------------------------------------------------------------------- data


def corpus(data: Path, count: int = BASE) -> tuple[list[str], list[str]]:
    """(texts, doc ids): all abstracts, then unique sentence-window passages."""
    docs: list[tuple[str, str, str]] = []
    with (data / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            docs.append((str(d["_id"]), d.get("title") or "", d.get("text") or ""))
    texts = [f"{t}\n\n{x}".strip() for _, t, x in docs]
    ids = [d for d, _, _ in docs]
    seen = set(texts)
    split = [[s for s in _SENTENCE.split(x) if s.strip()] for _, _, x in docs]
    for width in (1, 2, 3):
        for (doc, _, _), sentences in zip(docs, split, strict=True):
            for i in range(0, max(1, len(sentences) - width + 1)):
                p = " ".join(sentences[i : i + width]).strip()
                if not p or p in seen:
                    continue
                seen.add(p)
                texts.append(p)
                ids.append(doc)
                if len(texts) == count:
                    return texts, ids
    raise SystemExit(f"only {len(texts)} memories available; asked for {count}")


def test_queries(data: Path, n: int) -> tuple[list[str], list[dict[str, int]]]:
    qrels: dict[str, dict[str, int]] = {}
    with (data / "qrels" / "test.tsv").open(encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or parts[0] == "query-id":
                continue
            if int(parts[2]) > 0:
                qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    text: dict[str, str] = {}
    with (data / "queries.jsonl").open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            text[str(d["_id"])] = d["text"]
    qids = [q for q in qrels if q in text][:n]
    return [text[q] for q in qids], [qrels[q] for q in qids]


def expand(texts: list[str], ids: list[str], vecs: np.ndarray, size: int):
    """The first `size` memories; beyond BASE, tagged copies with noisy vectors."""
    if size <= len(texts):
        return texts[:size], ids[:size], vecs[:size]
    reps = math.ceil(size / len(texts))
    out_t, out_i, out_v = list(texts), list(ids), [vecs]
    rng = np.random.default_rng(42)
    for r in range(1, reps):
        out_t += [f"{t} [copy {r}]" for t in texts]
        out_i += ids
        noisy = vecs + rng.normal(0.0, 0.01, vecs.shape).astype(np.float32)
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        out_v.append(noisy.astype(np.float32))
    return out_t[:size], out_i[:size], np.concatenate(out_v)[:size]


def ndcg10(ranked_docs: list[list[str]], qrels: list[dict[str, int]]) -> float:
    total = 0.0
    for docs, rel in zip(ranked_docs, qrels, strict=True):
        uniq: list[str] = []
        for d in docs:
            if d not in uniq:
                uniq.append(d)
        dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(uniq[:10]))
        ideal = sorted(rel.values(), reverse=True)[:10]
        idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
        total += dcg / idcg if idcg else 0.0
    return total / len(qrels)


# --------------------------------------------------------------------------- prepare


def prepare(args: argparse.Namespace) -> None:
    """Embed the BASE memories once (longest-first batches) and cache them in /tmp."""
    from cortex.embed import load_default_embedder

    CACHE.mkdir(parents=True, exist_ok=True)
    texts, ids = corpus(args.data)
    (CACHE / "corpus.json").write_text(json.dumps({"texts": texts, "ids": ids}))
    emb = load_default_embedder()
    out = CACHE / "passages-100k.npy"
    part = CACHE / "partial.npy"
    vecs = np.zeros((len(texts), emb.dim), dtype=np.float32)
    done = np.zeros(len(texts), dtype=bool)
    if args.reuse_db:  # vectors cortex already computed for the same texts (same model)
        import hashlib
        import sqlite3

        from cortex.semantic import read_vectors

        conn = sqlite3.connect(f"file:{args.reuse_db}?mode=ro", uri=True)
        stored = read_vectors(conn, Path(args.reuse_db), emb.model_id, emb.dim)  # the file
        rows = conn.execute(
            "SELECT content_hash, memory_id FROM embeddings WHERE model_id = ?", (emb.model_id,)
        )
        known = {h: stored[m].astype(np.float32) for h, m in rows if m in stored}
        for i, t in enumerate(texts):
            v = known.get(hashlib.sha256(t.encode("utf-8")).hexdigest())
            if v is not None:
                vecs[i], done[i] = v, True
        print(f"reused {int(done.sum())} vectors from {args.reuse_db}", flush=True)
    if part.exists():
        saved = np.load(part)
        vecs[: len(saved)] = saved
        done[: len(saved)] |= np.abs(saved).sum(axis=1) > 0
    todo = [i for i in range(len(texts)) if not done[i]]
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    batch = 256
    for n, start in enumerate(range(0, len(todo), batch)):
        rows_ = todo[start : start + batch]
        vecs[rows_] = emb.embed_batch([texts[i] for i in rows_])
        if n % 20 == 0:
            np.save(part, vecs)
            rate = (start + len(rows_)) / (time.perf_counter() - t0)
            print(f"{start + len(rows_)}/{len(todo)} {rate:.0f}/s", flush=True)
    wall = time.perf_counter() - t0
    np.save(out, vecs)
    part.unlink(missing_ok=True)
    chars = sum(len(texts[i]) for i in todo)
    stats = {
        "embedded": len(todo),
        "wall_s": wall,
        "cpu_s": time.process_time() - cpu0,
        "per_s": len(todo) / wall if wall else 0.0,
        "mean_chars": chars / max(1, len(todo)),
        "threads": emb.threads,
    }
    (CACHE / "embed-stats.json").write_text(json.dumps(stats))
    print(json.dumps(stats), flush=True)


def load_cache() -> tuple[list[str], list[str], np.ndarray]:
    """The cached corpus prefix that has real vectors: all of passages-100k.npy, or the
    rows `prepare` finished so far (partial.npy) when it was stopped early."""
    meta = json.loads((CACHE / "corpus.json").read_text())
    full = CACHE / "passages-100k.npy"
    vecs = np.load(full if full.exists() else CACHE / "partial.npy")
    done = np.abs(vecs).sum(axis=1) > 0
    real = int(np.argmin(done)) if not done.all() else len(done)
    return meta["texts"][:real], meta["ids"][:real], np.ascontiguousarray(vecs[:real])


# --------------------------------------------------------------------------- systems


class CachedEmbedder:
    """cortex's Embedder protocol over the cached vectors: known texts (the corpus and,
    when asked, the queries) come from the cache; anything else is embedded by the real
    model. The model id is the real model's."""

    def __init__(self, real, known: dict[str, np.ndarray]) -> None:
        self.real = real
        self.known = known
        self.model_id = real.model_id
        self.dim = real.dim

    def embed(self, text: str) -> np.ndarray:
        v = self.known.get(text)
        return v if v is not None else self.real.embed(text)

    def embed_batch(self, texts) -> np.ndarray:
        return np.stack([self.embed(t) for t in texts]) if texts else np.empty((0, self.dim))


def disk_bytes(paths: list[Path]) -> int:
    total = 0
    for p in paths:
        if p.is_dir():
            total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
        elif p.exists():
            total += p.stat().st_size
    return total


def rss_now_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Cortex:
    name = "cortex"

    def __init__(
        self, work: Path, real, known: dict[str, np.ndarray], keyword_index: str = "auto"
    ) -> None:
        import cortex

        self.cortex = cortex
        self.emb = CachedEmbedder(real, known)
        self.path = work / "cortex.db"
        self.engine = cortex.open(self.path, embedder=self.emb, keyword_index=keyword_index)
        self.ids: dict[int, int] = {}  # memory id -> row in the corpus

    def ingest(self, texts: list[str], batch: int) -> None:
        for start in range(0, len(texts), batch):
            part = texts[start : start + batch]
            mids = self.engine.add_many({"content": t} for t in part)
            self.ids.update((m, start + i) for i, m in enumerate(mids))

    def finish(self) -> None:  # the vector index is synced on the first search
        self.engine.search("warm up", self.cortex.Options(record=False))

    def files(self) -> list[Path]:
        return [p for p in self.path.parent.iterdir() if p.name.startswith(self.path.name)]

    def search(self, q: str, qv: np.ndarray | None, record: bool = True) -> list[int]:
        if qv is not None:
            self.emb.known[q] = qv  # cached query vector: search cost without the model
        else:
            self.emb.known.pop(q, None)
            # a first query: the model runs (cortex's cache of query vectors would answer
            # the warm-up's queries again; agents that repeat queries get that for free)
            self.engine.query_cache.clear()
        opts = None if record else self.cortex.Options(record=False)
        res = self.engine.search(q) if opts is None else self.engine.search(q, opts)
        return [self.ids[r.memory.id] for r in res]


_WORD = re.compile(r"\w+")


class FtsVec:
    """The common recipe: one SQLite file (through apsw, which can load extensions), FTS5
    (porter unicode61, like cortex) for BM25 and sqlite-vec's vec0 (cosine) for KNN, each
    fetching 2 x limit, fused by reciprocal rank (k = 60) in Python."""

    name = "fts5+sqlite-vec"

    def __init__(self, work: Path, real, stopwords: bool = False) -> None:
        import apsw
        import sqlite_vec

        self.real = real
        self.path = work / "recipe.db"
        self.conn = apsw.Connection(str(self.path))
        self.conn.enable_load_extension(True)
        self.conn.load_extension(sqlite_vec.loadable_path())
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS docs(id INTEGER PRIMARY KEY, text TEXT NOT NULL);"
            "CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(text, content='docs',"
            " content_rowid='id', tokenize='porter unicode61');"
            f"CREATE VIRTUAL TABLE IF NOT EXISTS vec USING vec0(embedding float[{real.dim}]"
            " distance_metric=cosine);"
        )

    def ingest(self, texts: list[str], vecs: np.ndarray, batch: int) -> None:
        for start in range(0, len(texts), batch):
            rows = range(start, min(len(texts), start + batch))
            with self.conn:
                self.conn.executemany(
                    "INSERT INTO docs(id, text) VALUES (?, ?)", ((i + 1, texts[i]) for i in rows)
                )
                self.conn.executemany(
                    "INSERT INTO fts(rowid, text) VALUES (?, ?)", ((i + 1, texts[i]) for i in rows)
                )
                self.conn.executemany(
                    "INSERT INTO vec(rowid, embedding) VALUES (?, ?)",
                    ((i + 1, vecs[i].tobytes()) for i in rows),
                )

    def finish(self) -> None:
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def files(self) -> list[Path]:
        return [p for p in self.path.parent.iterdir() if p.name.startswith(self.path.name)]

    def search(self, q: str, qv: np.ndarray | None, drop: frozenset[str] = frozenset()):
        v = self.real.embed(q) if qv is None else qv
        k = 2 * LIMIT
        terms = [w for w in _WORD.findall(q.lower()) if w not in drop]
        expr = " OR ".join(f'"{t}"' for t in terms)
        kw = [
            r[0]
            for r in self.conn.execute(
                "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?", (expr, k)
            )
        ] if expr else []  # fmt: skip
        sem = [
            r[0]
            for r in self.conn.execute(
                "SELECT rowid FROM vec WHERE embedding MATCH ? AND k = ?",
                (np.asarray(v, dtype=np.float32).tobytes(), k),
            )
        ]
        score: dict[int, float] = {}
        for ranked in (kw, sem):
            for rank, rowid in enumerate(ranked):
                score[rowid] = score.get(rowid, 0.0) + 1.0 / (60 + rank + 1)
        top = sorted(score, key=lambda r: -score[r])[:LIMIT]
        # fetch what a caller shows: the text of each result
        marks = ",".join("?" * len(top))
        texts = dict(self.conn.execute(f"SELECT id, text FROM docs WHERE id IN ({marks})", top))
        return [r - 1 for r in top if r in texts]


class Lance:
    """LanceDB: one table (id, text, vector), its native full-text index on text, no
    vector index (flat, exact, as LanceDB does by default); the hybrid query with its
    default reranker (RRF)."""

    name = "lancedb"

    def __init__(self, work: Path, real) -> None:
        import lancedb

        self.real = real
        self.dir = work / "lance"
        self.db = lancedb.connect(str(self.dir))
        self.table = None

    def ingest(self, texts: list[str], vecs: np.ndarray, batch: int) -> None:
        import pyarrow as pa

        dim = vecs.shape[1]
        schema = pa.schema(
            [("id", pa.int64()), ("text", pa.string()), ("vector", pa.list_(pa.float32(), dim))]
        )

        def batches():
            for start in range(0, len(texts), batch):
                end = min(len(texts), start + batch)
                flat = pa.array(np.ascontiguousarray(vecs[start:end]).reshape(-1))
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array(np.arange(start, end, dtype=np.int64)),
                        pa.array(texts[start:end]),
                        pa.FixedSizeListArray.from_arrays(flat, dim),
                    ],
                    schema=schema,
                )

        self.table = self.db.create_table(
            "memories", data=pa.RecordBatchReader.from_batches(schema, batches()), mode="overwrite"
        )

    def finish(self) -> None:
        from lancedb.index import FTS

        self.table.create_index("text", config=FTS())

    def files(self) -> list[Path]:
        return [self.dir]

    def search(self, q: str, qv: np.ndarray | None) -> list[int]:
        v = self.real.embed(q) if qv is None else qv
        rows = (
            self.table.search(query_type="hybrid")
            .vector(np.asarray(v, dtype=np.float32))
            .text(q)
            .select(["id", "text"])
            .limit(LIMIT)
            .to_list()
        )
        return [int(r["id"]) for r in rows]


# --------------------------------------------------------------------------- one run


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1e3, p99 * 1e3


def timed(fn, queries: list[str], qvecs: list[np.ndarray | None]):
    samples, results = [], []
    for q, v in zip(queries, qvecs, strict=True):
        t0 = time.perf_counter()
        results.append(fn(q, v))
        samples.append(time.perf_counter() - t0)
    return percentiles(samples), results


def build(args: argparse.Namespace) -> dict:
    """Ingest one system at one size in this (fresh) process, so that its peak RSS is its
    own; the store is left in WORKDIR/SIZE/SYSTEM for `measure`. Prints a JSON row."""
    base_texts, base_ids, base_vecs = load_cache()
    texts, _, vecs = expand(base_texts, base_ids, base_vecs, args.size)
    real_vectors = min(len(base_texts), len(texts))
    del base_vecs, base_texts, base_ids
    from cortex.embed import load_default_embedder

    real = load_default_embedder()
    rss_data = rss_now_mb()
    row: dict = {"system": args.system, "memories": len(texts), "real_vectors": real_vectors}
    work = store_dir(args.workdir, args.size, args.system)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if args.system == "cortex":
        sysm = Cortex(work, real, dict(zip(texts, vecs, strict=True)))
        ingest = lambda: sysm.ingest(texts, args.batch)  # noqa: E731
    elif args.system == "fts5+sqlite-vec":
        sysm = FtsVec(work, real)
        ingest = lambda: sysm.ingest(texts, vecs, args.batch)  # noqa: E731
    else:
        sysm = Lance(work, real)
        ingest = lambda: sysm.ingest(texts, vecs, args.batch)  # noqa: E731
    t0 = time.perf_counter()
    ingest()
    t1 = time.perf_counter()
    sysm.finish()
    t2 = time.perf_counter()
    if isinstance(sysm, Cortex):
        mids = np.zeros(max(sysm.ids) + 1, dtype=np.int64)
        for m, i in sysm.ids.items():
            mids[m] = i
        np.save(work / "rows.npy", mids)
    row["ingest_s"] = t2 - t0
    row["index_s"] = t2 - t1
    row["ingest_per_s"] = len(texts) / (t2 - t0)
    row["disk_mb"] = disk_bytes(sysm.files()) / 2**20
    row["files_mb"] = {p.name: round(disk_bytes([p]) / 2**20, 1) for p in sysm.files()}
    row["rss_data_mb"] = rss_data
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(row), flush=True)
    return row


def store_dir(workdir: Path, size: int, system: str) -> Path:
    return Path(workdir) / str(size) / system.replace("+", "-")


def measure(args: argparse.Namespace) -> dict:
    """Query every built system of one size in ONE process, interleaved query by query
    (the order of systems rotates), so that the load of this shared machine falls on all
    of them alike. Pass 1: all test queries, embedded at query time (latency + nDCG@10).
    Pass 2: the first --queries-extra queries with the query vector cached (search cost
    without the model). Prints a JSON row."""
    from cortex.embed import load_default_embedder
    from cortex.keyword import STOPWORDS

    base_texts, base_ids, base_vecs = load_cache()
    _, ids, _ = expand(base_texts, base_ids, base_vecs[:1].repeat(len(base_ids), 0), args.size)
    del base_texts, base_vecs
    queries, qrels = test_queries(args.data, args.queries)
    real = load_default_embedder()
    for q in queries[:5]:
        real.embed(q)  # warm the model up
    qvecs, embed_s = [], []
    for q in queries:
        t0 = time.perf_counter()
        qvecs.append(real.embed(q))
        embed_s.append(time.perf_counter() - t0)
    runners = {}
    out_extra: dict = {}
    for system in args.systems:
        work = store_dir(args.workdir, args.size, system)
        if not work.exists():
            continue
        if system == "cortex":
            t0 = time.perf_counter()
            c = Cortex(work, real, {})
            c.engine.keyword_index.wait()  # "auto" builds it in the background from open
            out_extra["keyword_index_build_s"] = time.perf_counter() - t0
            out_extra["keyword_index_ready"] = c.engine.keyword_index.ready()
            rows = np.load(work / "rows.npy")
            c.ids = {int(m): int(rows[m]) for m in range(len(rows))}
            runners["cortex"] = c.search
            runners["cortex, record=False"] = lambda q, v, c=c: c.search(q, v, record=False)
            fts_only = Cortex(work, real, {}, keyword_index="off")
            fts_only.ids = c.ids
            runners["cortex, record=False, keyword_index=off"] = lambda q, v, c=fts_only: c.search(
                q, v, record=False
            )
        elif system == "fts5+sqlite-vec":
            r = FtsVec(work, real)
            runners["fts5+sqlite-vec"] = r.search
            stop = frozenset(STOPWORDS)
            runners["fts5+sqlite-vec, stop words dropped"] = lambda q, v, r=r, s=stop: r.search(
                q, v, s
            )
        else:
            lance = Lance(work, real)
            lance.table = lance.db.open_table("memories")
            runners["lancedb"] = lance.search
    names = list(runners)
    for q, v in zip(queries[:5], qvecs[:5], strict=True):  # warm caches, not timed
        for n in names:
            runners[n](q, v)
    out: dict = {"memories": args.size, "queries": len(queries), **out_extra}
    out["embed_query_p50_ms"], out["embed_query_p99_ms"] = percentiles(embed_s)
    nx = min(len(queries), args.queries_extra)
    for label, qs, vs in (
        ("", queries, [None] * len(queries)),
        ("_noembed", queries[:nx], qvecs[:nx]),
    ):
        samples: dict[str, list[float]] = {n: [] for n in names}
        results: dict[str, list[list[int]]] = {n: [] for n in names}
        # cortex with record=False only in pass 2: pass 1 is the defaults, recording on
        run_names = [n for n in names if label or "record=False" not in n]
        for j, (q, v) in enumerate(zip(qs, vs, strict=True)):
            k = j % len(run_names)
            for n in run_names[k:] + run_names[:k]:
                t0 = time.perf_counter()
                res = runners[n](q, v)
                samples[n].append(time.perf_counter() - t0)
                results[n].append(res)
        for n in run_names:
            row = out.setdefault(n, {})
            row[f"p50{label}_ms"], row[f"p99{label}_ms"] = percentiles(samples[n])
            if not label:
                row["ndcg10"] = ndcg10([[ids[i] for i in r] for r in results[n]], qrels)
    print(json.dumps(out), flush=True)
    return out


# --------------------------------------------------------------------------- ingest


def ingest_vectors(n: int, dim: int) -> np.ndarray:
    """The cached real vectors when `prepare` ran, else seeded random unit vectors: ingest
    stores and indexes them, and what they are does not change its cost."""
    try:
        _, _, vecs = load_cache()
    except (OSError, ValueError):
        vecs = np.empty((0, dim), dtype=np.float32)
    if len(vecs) >= n:
        return np.ascontiguousarray(vecs[:n])
    rng = np.random.default_rng(7)
    out = rng.normal(size=(n, dim)).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    out[: len(vecs)] = vecs
    return out


def parts(files: list[Path]) -> dict[str, int]:
    """Bytes per part: each SQLite table/index (dbstat) and every other file."""
    out: dict[str, int] = {}
    for f in files:
        if f.is_dir() or f.suffix in (".lock",) or not f.exists():
            if f.is_dir():
                out[f.name] = disk_bytes([f])
            continue
        if f.name.endswith(".db"):
            import sqlite3

            conn = sqlite3.connect(f"file:{f}?mode=ro", uri=True)
            try:
                for name, size in conn.execute(
                    "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"
                ):
                    out[f"{f.name}:{name}"] = int(size)
            except sqlite3.Error:
                out[f.name] = f.stat().st_size
            conn.close()
        else:
            out[f.name] = f.stat().st_size
    return out


def ingest_child(args: argparse.Namespace) -> None:
    """One system ingesting `size` memories with their vectors in this fresh process: CPU
    and wall seconds, through its own checkpoint; bytes on disk per part afterwards."""
    texts, _ = corpus(args.data, max(args.size, 10))
    texts = texts[: args.size]
    vecs = ingest_vectors(args.size, 384)
    work = store_dir(args.workdir, args.size, f"ingest-{args.system}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cpu0, t0 = time.process_time(), time.perf_counter()
    if args.system == "cortex":
        import cortex
        from cortex.model_dir import _locate

        model = _locate(None).model_id  # the active model's id, without loading it

        class Supplied:  # the active model's id and dim; queries are not asked for here
            model_id, dim = model, 384

            def embed(self, text: str) -> np.ndarray:
                return vecs[0]

            def embed_batch(self, texts: list[str]) -> np.ndarray:
                return vecs[: len(texts)]

        engine = cortex.open(work / "cortex.db", embedder=Supplied(), keyword_index="off")
        for start in range(0, len(texts), args.batch):
            end = min(len(texts), start + args.batch)
            engine.add_many(({"content": t} for t in texts[start:end]), vectors=vecs[start:end])
        engine.flush()
        files = [p for p in work.iterdir() if p.name.startswith("cortex.db")]
        engine.close()
    else:
        sysm = FtsVec(work, type("Dim", (), {"dim": 384})())
        sysm.ingest(texts, vecs, args.batch)
        sysm.finish()
        files = sysm.files()
        sysm.conn.close()
    row = {
        "system": args.system,
        "memories": args.size,
        "cpu_s": time.process_time() - cpu0,
        "wall_s": time.perf_counter() - t0,
        "disk_bytes": disk_bytes([f for f in files if f.exists()]),
        "parts": parts(files),
    }
    print(json.dumps(row), flush=True)


def ingest(args: argparse.Namespace) -> None:
    """cortex and the recipe ingesting the same memories and vectors, alternating, each
    in its own process, `--repeat` times; medians and ratios."""
    rows = []
    common = ["--data", str(args.data), "--workdir", str(args.workdir), "--batch", str(args.batch)]
    for size in args.sizes:
        for rep in range(args.repeat):
            order = ["cortex", "fts5+sqlite-vec"][:: 1 if rep % 2 == 0 else -1]
            for system in order:
                proc = subprocess.run(
                    [sys.executable, __file__, "ingest-child", "--system", system,
                     "--size", str(size), *common],
                    capture_output=True, text=True,
                )  # fmt: skip
                if proc.returncode != 0:
                    raise SystemExit(proc.stderr[-3000:])
                rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
                print(json.dumps({k: v for k, v in rows[-1].items() if k != "parts"}), flush=True)
        shutil.rmtree(Path(args.workdir) / str(size), ignore_errors=True)
    print("\n| memories | system | memories/CPU-s | memories/s (wall) | disk MB | B/memory |")
    print("|---|---|---|---|---|---|")
    for size in args.sizes:
        med = {}
        for system in ("cortex", "fts5+sqlite-vec"):
            mine = [r for r in rows if r["system"] == system and r["memories"] == size]
            cpu = statistics.median(r["cpu_s"] for r in mine)
            wall = statistics.median(r["wall_s"] for r in mine)
            disk = mine[-1]["disk_bytes"]
            med[system] = (cpu, wall, disk)
            print(f"| {size:,} | {system} | {size / cpu:,.0f} | {size / wall:,.0f} "
                  f"| {disk / 2**20:.1f} | {disk / size:,.0f} |")  # fmt: skip
        (c_cpu, c_wall, c_disk), (r_cpu, r_wall, r_disk) = med["cortex"], med["fts5+sqlite-vec"]
        print(f"| {size:,} | cortex / recipe | {r_cpu / c_cpu:.2f}x | {r_wall / c_wall:.2f}x "
              f"| {c_disk / r_disk:.2f}x size | |")  # fmt: skip
    for size in args.sizes:
        for system in ("cortex", "fts5+sqlite-vec"):
            last = [r for r in rows if r["system"] == system and r["memories"] == size][-1]
            print(f"\n{system} at {size:,}: bytes per memory by part")
            for name, b in sorted(last["parts"].items(), key=lambda kv: -kv[1]):
                if b / size >= 1:
                    print(f"  {name}: {b / size:,.0f}")


# --------------------------------------------------------------------------- driver

SYSTEMS = ("cortex", "fts5+sqlite-vec", "lancedb")


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    pkgs = ("cortex-memory", "numpy", "onnxruntime", "apsw", "sqlite-vec", "lancedb", "pyarrow")
    for pkg in pkgs:
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "missing"
    import sqlite3

    out["sqlite (cortex)"] = sqlite3.sqlite_version
    git = subprocess.run(
        ["git", "-C", str(Path(__file__).parent), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
    )
    out["cortex commit"] = git.stdout.strip() or "unknown"
    try:
        import apsw

        out["sqlite (apsw)"] = apsw.sqlite_lib_version()
    except ImportError:
        pass
    return out


def run(args: argparse.Namespace) -> None:
    rows: list[dict] = [{"versions": versions(), "date": time.strftime("%Y-%m-%d %H:%M")}]
    print(json.dumps(rows[0]), flush=True)
    out = Path(args.out)

    def child(cmd: list[str]) -> dict | None:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, __file__, *cmd], capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr, flush=True)
            return None
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        row["wall_s"] = time.perf_counter() - t0
        rows.append(row)
        print(json.dumps(row), flush=True)
        out.write_text(json.dumps(rows, indent=1))
        return row

    common = ["--data", str(args.data), "--workdir", str(args.workdir)]
    for size in args.sizes:
        systems = [s for s in args.systems if size <= BASE or s not in args.skip_1m]
        for system in systems:
            child(["build", "--system", system, "--size", str(size),
                   "--batch", str(args.batch), *common])  # fmt: skip
        nq = args.queries if size <= BASE else args.queries_1m
        child(["measure", "--size", str(size), "--queries", str(nq), "--systems", *systems,
               "--queries-extra", str(args.queries_extra), *common])  # fmt: skip
        if not args.keep:
            shutil.rmtree(Path(args.workdir) / str(size), ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "command", choices=["prepare", "run", "build", "measure", "ingest", "ingest-child"]
    )
    ap.add_argument("--repeat", type=int, default=3, help="ingest: runs per system and size")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--reuse-db", help="a cortex database whose vectors of the same texts to reuse")
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    ap.add_argument("--skip-1m", nargs="*", default=[], choices=SYSTEMS)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--queries-1m", type=int, default=100)
    ap.add_argument("--queries-extra", type=int, default=100, help="for the secondary passes")
    ap.add_argument("--batch", type=int, default=5000, help="memories per write transaction")
    ap.add_argument("--workdir", type=Path, default=CACHE)
    ap.add_argument("--out", default=str(CACHE / "e2e.json"))
    ap.add_argument("--system", choices=SYSTEMS)
    ap.add_argument("--size", type=int)
    ap.add_argument("--keep", action="store_true", help="keep the built stores")
    args = ap.parse_args()
    if args.command == "prepare":
        prepare(args)
    elif args.command == "run":
        run(args)
    elif args.command == "build":
        build(args)
    elif args.command == "ingest":
        ingest(args)
    elif args.command == "ingest-child":
        ingest_child(args)
    else:
        measure(args)


if __name__ == "__main__":
    main()
