"""Keyword search latency, p50 and p99, at 10k and 100k memories, beside bare FTS5.

    python benches/bench_keyword.py [--sizes 10000 100000] [--queries 300] [--data DIR]
    python benches/bench_keyword.py --sizes 10000 --before /tmp/cortex-before/python

Memories are real text: SciFact abstracts (read in place from the shared data folder)
cut into memory-sized passages, windows of one, two and three consecutive sentences, as
many as a size needs (about 150k exist; the windows overlap, which is said with the table).
Queries are SciFact's claims as written (long natural language, ~12 words) and a short
form of each (its first three words that are not stop words), the way an agent asks.

The peer, in the same run on the same file: the bare FTS5 query a user would write by hand
(`SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT 20` with the terms
OR-ed), which has no filters, boosts, snippets or fallbacks; cortex's own overhead is the
difference. Times are per query through the public API (`Engine.search`, mode keyword,
limit 20, recording off), warm page cache, one thread, twice: with the in-memory keyword
index (`keyword_index="on"`, the default "auto" for stores of 5k+) and with FTS5 alone
(`keyword_index="off"`, what the CLI's one-shot commands use). No embedder: the memories
are stored without vectors, which keyword search does not read.

Each cortex configuration runs in a child process of its own, fed rounds of 20 queries in
turn with the bare query (run in this process), so that all see the same machine load; it
reports wall and CPU time (``time.process_time``) per search and the ids and scores it
answered. With ``--before PATH`` (the ``python`` folder of another checkout, e.g. an
exported copy of main) the same is measured for that code on the same file, and the
answers of the two are compared query by query (``same_answers``: ids, order, scores and
the suggestions offered).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")


def passages(data: Path, count: int) -> list[str]:
    abstracts = []
    with (data / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            abstracts.append([s for s in _SENTENCE.split(d["text"]) if s.strip()])
    out: list[str] = []
    for width in (1, 2, 3):
        for sentences in abstracts:
            for i in range(0, max(1, len(sentences) - width + 1)):
                out.append(" ".join(sentences[i : i + width]))
                if len(out) == count:
                    return out
    raise SystemExit(f"only {len(out)} passages available; asked for {count}")


def queries(data: Path, n: int) -> tuple[list[str], list[str]]:
    long: list[str] = []
    with (data / "queries.jsonl").open(encoding="utf-8") as f:
        for line in f:
            long.append(json.loads(line)["text"])
            if len(long) == n:
                break
    from cortex.keyword import STOPWORDS

    short = []
    for q in long:
        words = [w for w in re.findall(r"\w+", q.lower()) if w not in STOPWORDS]
        short.append(" ".join(words[:3]))
    return long, short


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1e3, p99 * 1e3


def bare_fts(conn: sqlite3.Connection, q: str) -> list[int]:
    terms = [w for w in re.findall(r"\w+", q.lower())]
    expr = " OR ".join('"' + t + '"' for t in terms)
    sql = (
        "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?"
        " ORDER BY bm25(memories_fts) LIMIT 20"
    )
    return [r[0] for r in conn.execute(sql, (expr,)).fetchall()]


def timed_round(fn: Any, items: list[str]) -> dict[str, list[Any]]:
    """Wall and CPU seconds of `fn` on each of `items`, and what it answered."""
    out: dict[str, list[Any]] = {"wall": [], "cpu": [], "answers": []}
    for q in items:
        c0, t0 = time.process_time(), time.perf_counter()
        answer = fn(q)
        out["wall"].append(time.perf_counter() - t0)
        out["cpu"].append(time.process_time() - c0)
        out["answers"].append(answer)
    return out


def serve(db: Path, index: str, now: float) -> None:
    """A child: one cortex engine on `db`, answering rounds of queries on stdin. Every
    search reads the clock `now` (recency boosts depend on it), so that the answers of
    two children can be compared exactly."""
    import cortex

    engine = cortex.open(db, embedder=None, keyword_index=index)
    clock = datetime.fromtimestamp(now, UTC)
    opts = cortex.Options(mode="keyword", limit=20, record=False, now=clock)
    t0 = time.perf_counter()
    engine.search("warm up", opts)  # builds the in-memory index
    print(json.dumps({"ready": round(time.perf_counter() - t0, 3)}), flush=True)

    def one(q: str) -> list[Any]:
        found = engine.search(q, opts)
        return [
            [(r.memory.id, round(r.score, 9)) for r in found],
            list(found.suggestions),
            [found.total, found.hidden],
        ]

    for line in sys.stdin:
        print(json.dumps(timed_round(one, json.loads(line))), flush=True)
    engine.close()


class Child:
    def __init__(self, code: str, db: Path, index: str, now: float) -> None:
        env = {**os.environ, "PYTHONPATH": code}
        cmd = [sys.executable, __file__, "serve", "--db", str(db), "--index", index]
        cmd += ["--now", repr(now)]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        self.build = float(json.loads(self._line())["ready"])

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("a benchmark child failed")
        return line

    def round(self, queries: list[str]) -> dict[str, list[Any]]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(queries) + "\n")
        self.proc.stdin.flush()
        return json.loads(self._line())  # type: ignore[no-any-return]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


def measure(
    children: dict[str, Child], conn: sqlite3.Connection, qs: list[str], passes: int = 3
) -> dict[str, Any]:
    """Every system over `qs` `passes` times, in rounds of 20 queries taken in turn (the
    order rotating); per system the pass with the lowest median wall time is kept (the
    machine is shared), with its CPU times, and the answers of the first pass."""
    names = [*children, "bare"]
    runs: dict[str, list[dict[str, list[Any]]]] = {n: [] for n in names}
    rounds = [qs[i : i + 20] for i in range(0, len(qs), 20)]
    for _ in range(passes):
        got: dict[str, dict[str, list[Any]]] = {n: {"wall": [], "cpu": [], "answers": []}
                                                for n in names}  # fmt: skip
        for r, part in enumerate(rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                if name == "bare":
                    res = timed_round(lambda q: bare_fts(conn, q), part)
                else:
                    res = children[name].round(part)
                for k in got[name]:
                    got[name][k].extend(res[k])
        for name in names:
            runs[name].append(got[name])
    out: dict[str, Any] = {}
    for name in names:
        best = min(runs[name], key=lambda g: statistics.median(g["wall"]))
        p50, p99 = percentiles(best["wall"])
        out[name] = {
            "p50": p50,
            "p99": p99,
            "cpu_p50": statistics.median(best["cpu"]) * 1e3,
            "answers": runs[name][0]["answers"],
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    s = sub.add_parser("serve")
    s.add_argument("--db", type=Path, required=True)
    s.add_argument("--index", default="on")
    s.add_argument("--now", type=float, required=True)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--before", help="the python/ folder of the cortex to compare with")
    ap.add_argument("--no-fts5-only", action="store_true", help="skip keyword_index='off'")
    args = ap.parse_args()
    if args.cmd == "serve":
        serve(args.db, args.index, args.now)
        return
    import cortex

    long_q, short_q = queries(args.data, args.queries)
    code = {"": str(HERE.parent / "python")}
    if args.before:
        code["before "] = args.before
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            texts = passages(args.data, size)
            path = Path(tmp) / f"kw{size}.db"
            with cortex.open(path, embedder=None, keyword_index="off") as engine:
                t0 = time.perf_counter()
                for start in range(0, len(texts), 5000):
                    engine.add_many({"content": t} for t in texts[start : start + 5000])
                ingest = time.perf_counter() - t0
            now = time.time()
            children: dict[str, Child] = {}
            for label, root in code.items():
                children[f"{label}cortex"] = Child(root, path, "on", now)
                if not args.no_fts5_only:
                    children[f"{label}cortex, FTS5 only"] = Child(root, path, "off", now)
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            for label, qs in (("short (3 words)", short_q), ("claims (~12 words)", long_q)):
                got = measure(children, conn, qs)
                row: dict[str, Any] = {"memories": size, "queries": label}
                for name, m in got.items():
                    row[name] = {k: round(v, 3) for k, v in m.items() if k != "answers"}
                if args.before:
                    for name in [n for n in got if n.startswith("before ")]:
                        a, b = got[name[len("before ") :]]["answers"], got[name]["answers"]
                        same = sum(x == y for x, y in zip(a, b, strict=True)) / len(a)
                        row[f"same_answers ({name[len('before ') :]})"] = same
                row["ingest_per_s"] = round(size / ingest)
                row["index_build_s"] = round(children["cortex"].build, 2)
                rows.append(row)
                print(json.dumps(row), flush=True)
            conn.close()
            for child in children.values():
                child.close()
    load = os.getloadavg()
    cpu = platform.processor() or platform.machine()
    print(f"\nmachine: {cpu}, python {platform.python_version()}, load {load[0]:.1f}")
    names = [n for n in rows[0] if isinstance(rows[0][n], dict)]
    print("| memories | queries | " + " | ".join(f"{n} p50 / p99 (CPU p50)" for n in names) + " |")
    print("|---|---|" + "---|" * len(names))
    for r in rows:
        cells = [f"{r[n]['p50']:.2f} / {r[n]['p99']:.2f} ms ({r[n]['cpu_p50']:.2f})" for n in names]
        print(f"| {r['memories']:,} | {r['queries']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
