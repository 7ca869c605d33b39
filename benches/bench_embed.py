"""Embedding benchmarks: query latency and batch throughput of the ONNX embedder.

    python benches/bench_embed.py                      # the active model, 1 and 2 threads
    python benches/bench_embed.py --threads 2 --json out.json
    python benches/bench_embed.py --model-dir DIR      # another model dir (e.g. a variant)
    python benches/bench_embed.py --import-texts 2000 --threads 1   # import vs the recipe

Measures, per thread count:
- query latency: ``embed()`` of short queries (3-6 words), p50 / p95 / mean in ms;
- throughput: sentences/s of ``embed_batch()`` at batch 32 on seeded ≈15-token
  sentences (tokenising, padding, pooling and normalising included), and at batch 1.

Correctness is recorded beside the time: the min cosine of the same embedder
against the sentence-transformers reference vectors in
``tests/fixtures/minilm_reference.json`` (only meaningful for all-MiniLM-L6-v2).
The load average before and after each run is printed, and the CPU time this
process used (ms of CPU per query, sentences per CPU-second): on a shared 2-core
machine other work inflates the wall-clock figures, while CPU time stays close
to the cost of the work itself. Compare wall-clock runs only at a low load.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from cortex.embed import OnnxEmbedder

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "minilm_reference.json"

QUERIES = [
    "how we ship code",
    "database migration failed",
    "what does alice drink",
    "release schedule",
    "why was the index slow",
    "meeting notes from tuesday",
    "deploy rollback steps",
    "who owns the billing service",
]

_WORDS = (  # noqa: SIM905 (a word list reads better as text)
    "the a memory agent deploy code review team meeting decided database index query search "
    "result user prefers coffee morning release pipeline test failed because server network "
    "latency budget project quarter report customer invoice schedule backup restore cluster "
    "config secret rotate token cache warm cold storage bucket alert page incident owner "
    "service billing payment refund weekly sync notes action item follow up"
).split()


def make_sentences(n: int, words: int = 11, seed: int = 0) -> list[str]:
    """Seeded sentences of *words* common words (≈15 tokens with [CLS] and [SEP])."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(_WORDS, words)).capitalize() + "." for _ in range(n)]


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}"


def min_cosine(emb: OnnxEmbedder) -> float | None:
    if not FIXTURE.is_file():
        return None
    ref = json.loads(FIXTURE.read_text(encoding="utf-8"))
    if ref["dim"] != emb.dim:
        return None
    got = emb.embed_batch(ref["sentences"])
    return float((got * np.asarray(ref["vectors"], dtype=np.float32)).sum(axis=1).min())


def bench_latency(emb: OnnxEmbedder, iterations: int) -> dict[str, float]:
    for q in QUERIES * 3:  # warm up: first runs allocate and tune kernels
        emb.embed(q)
    times = []
    cpu0 = time.process_time()
    for i in range(iterations):
        q = QUERIES[i % len(QUERIES)]
        t0 = time.perf_counter()
        emb.embed(q)
        times.append((time.perf_counter() - t0) * 1000.0)
    cpu_ms = (time.process_time() - cpu0) * 1000.0 / iterations
    arr = np.asarray(times)
    return {
        "p50_ms": float(np.percentile(arr, 50)),
        "p95_ms": float(np.percentile(arr, 95)),
        "mean_ms": float(arr.mean()),
        "cpu_ms_per_query": cpu_ms,
    }


def bench_throughput(emb: OnnxEmbedder, sentences: list[str], repeat: int) -> dict[str, float]:
    emb.embed_batch(sentences[:64])  # warm up
    rates = []
    cpu0 = time.process_time()
    for _ in range(repeat):
        t0 = time.perf_counter()
        emb.embed_batch(sentences)
        rates.append(len(sentences) / (time.perf_counter() - t0))
    per_cpu_s = len(sentences) * repeat / (time.process_time() - cpu0)
    one = sentences[:256]
    t0 = time.perf_counter()
    for s in one:
        emb.embed(s)
    batch1 = len(one) / (time.perf_counter() - t0)
    return {
        "batch_sents_per_s_median": statistics.median(rates),
        "batch_sents_per_s_best": max(rates),
        "batch_sents_per_cpu_s": per_cpu_s,
        "batch1_sents_per_s": batch1,
    }


def _variant_dirs(model_dir: Path, tmp: Path) -> dict[str, Path]:
    """Quantized copies of the fp32 graph, for --variants (needs the onnx package)."""
    import shutil

    from onnxruntime.quantization import QuantType, quantize_dynamic

    src = model_dir / "model.onnx"
    matmuls = _matmul_names(src)
    ffn = [n for n in matmuls if "/inter/" in n or "/out/" in n]
    out = {"fp32 (installed)": model_dir}
    plans = {
        "int8 dynamic, per-channel, all MatMuls": (matmuls, True),
        "int8 dynamic, per-channel, FFN MatMuls only": (ffn, True),
        "int8 dynamic, per-tensor, all MatMuls": (matmuls, False),
    }
    for i, (name, (nodes, per_channel)) in enumerate(plans.items()):
        d = tmp / f"v{i}"
        shutil.copytree(model_dir, d, ignore=shutil.ignore_patterns("model.onnx", "manifest.json"))
        quantize_dynamic(
            src,
            d / "model.onnx",
            per_channel=per_channel,
            weight_type=QuantType.QInt8,
            nodes_to_quantize=nodes,
        )
        out[name] = d
    try:
        import onnx
        from onnxruntime.quantization import matmul_nbits_quantizer as nbits
    except ImportError:  # needs onnx_ir in recent onnxruntime
        return out
    d = tmp / "nbits8"
    shutil.copytree(model_dir, d, ignore=shutil.ignore_patterns("model.onnx", "manifest.json"))
    q = nbits.MatMulNBitsQuantizer(
        onnx.load(src), bits=8, block_size=32, is_symmetric=True, accuracy_level=0
    )
    q.process()
    q.model.save_model_to_file(str(d / "model.onnx"), use_external_data_format=False)
    out["8-bit weights, blocks of 32 (MatMulNBits), fp32 compute"] = d
    return out


def _matmul_names(path: Path) -> list[str]:
    import onnx

    graph = onnx.load(path).graph
    # Weight MatMuls only (a constant second input); attention's two are activations.
    weights = {init.name for init in graph.initializer}
    return [n.name for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights]


def run_variants(model_dir: Path, queries: int, sentences: list[str]) -> None:
    """Exactness and speed of quantized variants, 1 thread, CPU time (robust to load)."""
    import tempfile

    print("| variant | min cosine vs ST | query CPU ms | batch 32 sent/CPU-s | file MB |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, d in _variant_dirs(model_dir, Path(tmp)).items():
            emb = OnnxEmbedder(d, threads=1)
            lat = bench_latency(emb, queries)
            thr = bench_throughput(emb, sentences, 1)
            size = (d / "model.onnx").stat().st_size / 1e6
            print(
                f"| {name} | {min_cosine(emb):.5f} | {lat['cpu_ms_per_query']:.2f} "
                f"| {thr['batch_sents_per_cpu_s']:.0f} | {size:.0f} |",
                flush=True,
            )


def scifact_passages(n: int, seed: int = 0) -> list[str]:
    """n texts drawn (seeded) from bench_e2e's 100k SciFact abstracts and passages."""
    import random
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_e2e import DEFAULT_DATA, corpus

    data = Path(os.environ.get("SCIFACT", DEFAULT_DATA))
    if not (data / "corpus.jsonl").exists():
        data = Path(__file__).resolve().parents[3] / "shared" / "data" / "scifact"
    texts, _ = corpus(data)
    return random.Random(seed).sample(texts, n)


def fed_tokens(emb: OnnxEmbedder, texts: list[str], budget: int, rows: int) -> int:
    """Tokens (padding included) the model computes for one call over `texts`."""
    lengths = sorted(len(x) for x in emb._token_ids(texts))
    fed, start = 0, 0
    while start < len(lengths):
        end = start + 1
        while (
            end < len(lengths) and end - start < rows and (end - start + 1) * lengths[end] <= budget
        ):
            end += 1
        fed += (end - start) * lengths[end - 1]
        start = end
    return fed


def import_cost(n: int, threads: int) -> None:
    """CPU of `cortex import` of n texts (one JSONL file) against the recipe: the same
    model embedding the same texts in one call sorted by length, 32 a batch (what
    sentence-transformers' encode() does), then FTS5 + sqlite-vec inserts. Both on
    `threads` intra-op threads, CPU time of this process (robust to a busy machine)."""
    import subprocess
    import sys
    import tempfile

    texts = scifact_passages(n)
    probe = OnnxEmbedder(threads=threads)
    real = sum(len(x) for x in probe._token_ids(texts))
    old = sum(fed_tokens(probe, texts[s : s + 64], 10**9, 32) for s in range(0, len(texts), 64))
    print(
        f"{n} texts, {real} tokens; before this change the model computed {old} "
        f"({old / real - 1:.0%} padding)",
        flush=True,
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        jsonl = Path(tmp) / "notes.jsonl"
        jsonl.write_text("".join(json.dumps({"content": t}) + "\n" for t in texts))
        for rep in range(2):
            for system in ("recipe", "cortex") if rep % 2 == 0 else ("cortex", "recipe"):
                db = Path(tmp) / f"{system}{rep}.db"
                out = subprocess.run(
                    [sys.executable, "-c", "from bench_embed import _import_child; _import_child()",
                     system, str(jsonl), str(db), str(threads)],
                    cwd=Path(__file__).resolve().parent, check=True, capture_output=True, text=True,
                )  # fmt: skip
                row = json.loads(out.stdout.strip().splitlines()[-1])
                rows.append(row)
                print(json.dumps(row), flush=True)
    for system in ("recipe", "cortex"):
        cpu = statistics.median(r["cpu_s"] for r in rows if r["system"] == system)
        fed = next(r["fed_tokens"] for r in rows if r["system"] == system)
        print(f"| {system} | {cpu:.1f} CPU-s | {fed} tokens fed ({fed / real - 1:.1%} padding) |")


def _import_child() -> None:
    import sys

    system, jsonl, db, threads = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
    texts = [json.loads(line)["content"] for line in jsonl.read_text().splitlines()]
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    if system == "cortex":
        import cortex

        emb = OnnxEmbedder(threads=threads)
        with cortex.open(db, embedder=emb, keyword_index="off") as engine:
            engine.import_path(jsonl)
        fed = fed_tokens(emb, texts, emb._token_budget, emb._batch_size)
    else:
        import apsw
        import sqlite_vec

        emb = OnnxEmbedder(threads=threads, batch_size=32, token_budget=10**9)
        vecs = emb.embed_batch(texts)
        conn = apsw.Connection(str(db))
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE docs(id INTEGER PRIMARY KEY, text TEXT NOT NULL);"
            "CREATE VIRTUAL TABLE fts USING fts5(text, content='docs', content_rowid='id',"
            " tokenize='porter unicode61');"
            f"CREATE VIRTUAL TABLE vec USING vec0(embedding float[{emb.dim}]"
            " distance_metric=cosine);"
        )
        with conn:
            conn.executemany("INSERT INTO docs(id, text) VALUES (?, ?)", enumerate(texts, 1))
            conn.executemany("INSERT INTO fts(rowid, text) VALUES (?, ?)", enumerate(texts, 1))
            conn.executemany(
                "INSERT INTO vec(rowid, embedding) VALUES (?, ?)",
                ((i + 1, v.tobytes()) for i, v in enumerate(vecs)),
            )
        fed = fed_tokens(emb, texts, 10**9, 32)
    print(
        json.dumps(
            {
                "system": system,
                "cpu_s": time.process_time() - cpu0,
                "wall_s": time.perf_counter() - t0,
                "fed_tokens": fed,
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description="Embedding latency and throughput.")
    ap.add_argument("--model-dir", default=None, help="default: the active model")
    ap.add_argument("--threads", default="1,2", help="comma-separated intra-op thread counts")
    ap.add_argument("--queries", type=int, default=500, help="latency iterations")
    ap.add_argument("--sentences", type=int, default=2048, help="throughput corpus size")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument(
        "--variants",
        action="store_true",
        help="instead: exactness and CPU cost of quantized variants of the graph",
    )
    ap.add_argument(
        "--import-texts",
        type=int,
        default=0,
        help="instead: CPU of `cortex import` of this many SciFact texts against the recipe",
    )
    args = ap.parse_args()
    if args.import_texts:
        import_cost(args.import_texts, int(args.threads.split(",")[0]))
        return

    sentences = make_sentences(args.sentences)
    if args.variants:
        model_dir = Path(args.model_dir) if args.model_dir else OnnxEmbedder().info.path
        run_variants(model_dir, args.queries, sentences)
        return
    results = []
    for threads in (int(t) for t in args.threads.split(",")):
        load_before = os.getloadavg()[0]
        t0 = time.perf_counter()
        emb = OnnxEmbedder(args.model_dir, threads=threads, batch_size=args.batch_size)
        load_s = time.perf_counter() - t0
        tokens = statistics.mean(len(x) for x in emb._token_ids(sentences[:200]))
        row = {
            "threads": threads,
            "model_id": emb.model_id,
            "load_s": load_s,
            "mean_tokens": tokens,
            "min_cosine_vs_st": min_cosine(emb),
            **bench_latency(emb, args.queries),
            **bench_throughput(emb, sentences, args.repeat),
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg()[0],
        }
        results.append(row)
        print(json.dumps(row), flush=True)

    import onnxruntime

    meta = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "python": platform.python_version(),
        "onnxruntime": onnxruntime.__version__,
        "batch_size": args.batch_size,
        "sentences": args.sentences,
    }
    print()
    print(f"{meta['date']} · {meta['machine']} · onnxruntime {meta['onnxruntime']}")
    print(
        f"model {results[0]['model_id']}, min cosine vs sentence-transformers "
        f"{results[0]['min_cosine_vs_st']}"
    )
    print()
    print(
        "| threads | query p50 ms | query p95 ms | query CPU ms | batch 32 sent/s (median) "
        "| batch 32 sent/CPU-s | batch 1 sent/s | load avg |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['threads']} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} "
            f"| {r['cpu_ms_per_query']:.2f} | {r['batch_sents_per_s_median']:.0f} "
            f"| {r['batch_sents_per_cpu_s']:.0f} | {r['batch1_sents_per_s']:.0f} "
            f"| {r['loadavg_before']:.2f} → {r['loadavg_after']:.2f} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
