"""Cost of issue 12's filters: code-reference extraction at write time, and the latency of
the code, multi-project and fact-type filters, lenses and document search.

    python benches/bench_filters.py [--memories 50000] [--repeat 30]

1. Extraction: `cortex.code.extract` per memory (p50, p99, total) over the agent set's
   3,000 notes and SciFact's 5,183 abstracts (read in place from the shared data folder),
   beside the keyword-only `add_many` of the same texts (what one write costs anyway).
2. Filters: a keyword-only store of `--memories` agent-style notes in 8 projects, a fifth
   naming files (``src/<area>/<name>.py``), a tenth with a fact, with the in-memory
   keyword index (what ``keyword_index="auto"`` builds at this size); each filter's
   search (listing without text, and a keyword query) timed `--repeat` times after one
   warm-up. ``CODE_WEIGHT=0`` in the environment runs the same without the boost of a
   query that names a file.
3. Documents: 2,000 Markdown-like documents (SciFact abstracts, three to a document),
   `Engine.search_documents` for SciFact queries.

Every store is built in a temporary folder and deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import cortex
from cortex.code import extract
from cortex.documents import write_document

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = next(
    (p / "shared" / "data" / "scifact" for p in Path(__file__).resolve().parents[2:4]
     if (p / "shared" / "data" / "scifact").exists()),
    Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact",
)  # fmt: skip
AREAS = ["auth", "db", "api", "web", "billing", "search", "infra", "jobs"]
WORDS = [
    "deploy", "release", "rollback", "cache", "token", "session", "index", "migration",
    "latency", "queue", "retry", "budget", "backup", "region", "traffic", "incident",
    "review", "checklist", "docker", "vector",
]  # fmt: skip


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(p50, p99) milliseconds of `fn`, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.99 * len(times)))]


def extraction(texts: list[str], label: str) -> dict[str, object]:
    per = []
    for t in texts:
        t0 = time.perf_counter_ns()
        extract(t)
        per.append((time.perf_counter_ns() - t0) / 1e3)
    per.sort()
    with tempfile.TemporaryDirectory() as tmp, cortex.open(Path(tmp) / "x.db", embedder=None) as e:
        t0 = time.perf_counter()
        e.add_many({"content": t} for t in texts)
        write = time.perf_counter() - t0
    refs = sum(1 for t in texts if extract(t))
    return {
        "set": label,
        "texts": len(texts),
        "with_refs": refs,
        "extract_p50_us": round(statistics.median(per), 1),
        "extract_p99_us": round(per[int(0.99 * len(per))], 1),
        "extract_total_s": round(sum(per) / 1e6, 3),
        "add_many_total_s": round(write, 3),
    }


def filters(n: int, repeat: int) -> list[dict[str, object]]:
    rng = random.Random(12)
    records = []
    for i in range(n):
        words = " ".join(rng.sample(WORDS, 6))
        content = f"{words} note {i}"
        if i % 5 == 0:
            area = rng.choice(AREAS)
            content += f" in src/{area}/{rng.choice(WORDS)}.py and `{area}.handle_{i % 50}`"
        records.append({"content": content, "project": f"p{i % 8}", "created_at": 1.7e9 + i})
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "f.db"
        with cortex.open(db, embedder=None, keyword_index="on") as e:
            for start in range(0, n, 10_000):
                e.add_many(records[start : start + 10_000])
            with e.store.transaction() as tx:
                tx.executemany(
                    "INSERT INTO facts (memory_id, type, content, confidence, decay_rate,"
                    " last_reinforced, created_at) VALUES (?, ?, 'f', 1, 0, 1.7e9, 1.7e9)",
                    [(i, rng.choice(["decision", "preference", "event"])) for i in range(1, n, 10)],
                )
            e.save_lens("two", project=["p1", "p2"], order_by="recency")
            cases: list[tuple[str, str | None, dict[str, object]]] = [
                ("no filter", "deploy cache", {}),
                ("project one", "deploy cache", {"project": "p1"}),
                ("project three", "deploy cache", {"project": ["p1", "p2", "p3"]}),
                ("code exact file", "deploy cache", {"code": "src/auth/cache.py"}),
                ("code suffix", "deploy cache", {"code": "cache.py"}),
                ("code folder", "deploy cache", {"code": "auth/*"}),
                ("code symbol", "deploy cache", {"code": "handle_7"}),
                ("fact_type", "deploy cache", {"fact_type": "decision"}),
                ("lens", "deploy cache", {"lens": "two"}),
                ("query names a file", "what broke in src/auth/cache.py", {}),
            ]
            if os.environ.get("CODE_WEIGHT") is not None:  # the same search without the boost
                from cortex.search import pipeline

                pipeline.CODE_WEIGHT = float(os.environ["CODE_WEIGHT"])
            for label, query, kw in cases:
                for q in (query, None) if label != "query names a file" else (query,):
                    opts = cortex.Options(mode="keyword", record=False, limit=20, **kw)  # type: ignore[arg-type]
                    p50, p99 = timed(lambda q=q, opts=opts: e.search(q, opts), repeat)
                    total = e.search(q, opts).total
                    out.append({"case": label, "query": q is not None, "matches": total,
                                "p50_ms": round(p50, 2), "p99_ms": round(p99, 2)})  # fmt: skip
    return out


def documents(data: Path, repeat: int) -> dict[str, object]:
    corpus = [json.loads(line) for line in (data / "corpus.jsonl").open()][:6000]
    queries = [json.loads(line)["text"] for line in (data / "queries.jsonl").open()][:50]
    with tempfile.TemporaryDirectory() as tmp, cortex.open(Path(tmp) / "d.db", embedder=None) as e:
        with e.store.transaction() as tx:
            for d in range(0, len(corpus) - 2, 3):
                parts = [f"# {corpus[d]['title']}"] + [c["text"] for c in corpus[d : d + 3]]
                write_document(tx, f"/notes/{d}.md", f"p{d % 4}", parts, 1.7e9)
        count = e.store.query("SELECT COUNT(*) FROM documents")[0][0]
        times = []
        for q in queries:
            p50, _ = timed(lambda q=q: e.search_documents(q, limit=10), max(3, repeat // 10))
            times.append(p50)
        walled = [timed(lambda q=q: e.search_documents(q, project=["p1", "p2"]), 3)[0]
                  for q in queries[:20]]  # fmt: skip
    times.sort()
    return {"documents": count, "queries": len(queries),
            "p50_ms": round(statistics.median(times), 2),
            "p99_ms": round(times[int(0.99 * (len(times) - 1))], 2),
            "two_projects_p50_ms": round(statistics.median(walled), 2)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}", file=sys.stderr)
    agent = [json.loads(line)["content"] for line in (ROOT / "eval/agent/memories.jsonl").open()]
    report: dict[str, object] = {"extraction": [extraction(agent, "agent set")]}
    if (args.data / "corpus.jsonl").exists():
        scifact = [
            f"{d['title']}\n\n{d['text']}"
            for d in map(json.loads, (args.data / "corpus.jsonl").open())
        ]
        report["extraction"].append(extraction(scifact, "SciFact"))  # type: ignore[attr-defined]
        report["documents"] = documents(args.data, args.repeat)
    report["filters"] = filters(args.memories, args.repeat)
    report["memories"] = args.memories
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
