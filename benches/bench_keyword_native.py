"""The native keyword index (cortex._native.KeywordIndex) beside SQLite FTS5: build time,
query p50/p99 for OR and AND, and whether the top-100 and scores agree.

    python benches/bench_keyword_native.py [--docs 0 100000] [--passage-words 0]
        [--queries 300] [--fts-queries 300] [--data DIR]

Documents are SciFact (read in place from the shared data folder): title + abstract, or,
with --passage-words N, the abstracts cut into passages of N words. A size larger than
the corpus repeats it, each copy's documents given one extra word of their own
("copyJ"): the vocabulary, document lengths and term frequencies stay SciFact's, the
document frequency of every real word grows with the copies, so postings are longer and
queries costlier than on the same number of distinct documents. `--docs 0` is the corpus
as is. Queries are SciFact's claims, reduced as cortex's hybrid search reduces plain text
(lowercased distinct words, stop words dropped), run as quoted terms joined by OR and by
AND. FTS5 runs on an in-memory database with cortex's table definition; both sides
return the top 100. One thread, warm caches, each query timed once per round, 3 rounds.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sqlite3
import statistics
import time
from pathlib import Path

import numpy as np

from cortex._native import KeywordIndex
from cortex.keyword import STOPWORDS

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
TOKENIZE = "porter unicode61 remove_diacritics 2"
WORD = re.compile(r"\w+")
K = 100


def load_docs(data: Path, passage_words: int) -> list[str]:
    docs = []
    with (data / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            text = f"{d.get('title', '')} {d['text']}"
            if passage_words <= 0:
                docs.append(text)
                continue
            words = text.split()
            docs += [
                " ".join(words[i : i + passage_words]) for i in range(0, len(words), passage_words)
            ]
    return docs


def scaled(docs: list[str], n: int) -> list[str]:
    if n <= 0 or n == len(docs):
        return docs
    out = []
    copy = 0
    while len(out) < n:
        suffix = f" copy{copy}" if copy else ""
        out += [d + suffix for d in docs[: n - len(out)]]
        copy += 1
    return out


def load_queries(data: Path, n: int) -> list[list[str]]:
    out = []
    with (data / "queries.jsonl").open(encoding="utf-8") as f:
        for line in f:
            seen: dict[str, None] = {}
            for w in WORD.findall(json.loads(line)["text"]):
                key = w.lower()
                if key not in STOPWORDS:
                    seen.setdefault(key, None)
            words = KeywordIndex.query_terms(list(seen))
            if words and seen:  # only queries the native index takes as a whole
                out.append(list(seen)[:32])
            if len(out) >= n:
                break
    return out


def pct(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return statistics.median(s) * 1e3, s[min(len(s) - 1, int(len(s) * 0.99))] * 1e3


def run(docs: list[str], qs: list[list[str]], n_fts: int) -> None:
    ids = np.arange(1, len(docs) + 1, dtype=np.int64) * 3  # sparse ids
    t = time.perf_counter()
    ix = KeywordIndex()
    ix.add(ids, docs)
    native_build = time.perf_counter() - t

    db = sqlite3.connect(":memory:")
    db.executescript(f"""
        CREATE TABLE memories (id INTEGER PRIMARY KEY, content TEXT NOT NULL);
        CREATE VIRTUAL TABLE memories_fts USING fts5(
            content, content='memories', content_rowid='id', tokenize='{TOKENIZE}');
    """)
    t = time.perf_counter()
    with db:
        db.executemany("INSERT INTO memories VALUES (?, ?)", zip(ids.tolist(), docs, strict=True))
        db.execute("INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')")
    fts_build = time.perf_counter() - t
    tokens = ix.total_tokens
    print(
        f"\n{len(docs):,} docs, {tokens / len(docs):.0f} tokens/doc, "
        f"native {ix.memory_bytes() / 2**20:.0f} MiB"
    )
    print(f"build: native {native_build:.2f} s, FTS5 {fts_build:.2f} s "
          f"({fts_build / native_build:.1f}x)")  # fmt: skip

    sql = ("SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? "
           "ORDER BY bm25(memories_fts), rowid LIMIT ?")  # fmt: skip
    for require_all in (False, True):
        op = " " if require_all else " OR "
        name = "AND" if require_all else "OR"
        native: list[float] = []
        fts: list[float] = []
        worst, same, compared = 0.0, 0, 0
        for rnd in range(3):
            for i, words in enumerate(qs):
                t = time.perf_counter()
                got_ids, got_scores = ix.search(words, K, require_all=require_all)
                native.append(time.perf_counter() - t)
                if i >= n_fts:
                    continue
                expr = op.join(f'"{w}"' for w in words)
                t = time.perf_counter()
                rows = db.execute(sql, (expr, K)).fetchall()
                fts.append(time.perf_counter() - t)
                if rnd == 0:
                    compared += 1
                    same += [r[0] for r in rows] == got_ids.tolist()
                    for a, r in zip(got_scores.tolist(), rows, strict=False):
                        worst = max(worst, abs(a + r[1]) / abs(r[1]))
        n50, n99 = pct(native)
        f50, f99 = pct(fts)
        print(
            f"{name:3}: native p50 {n50:.3f} ms p99 {n99:.3f} ms | FTS5 p50 {f50:.2f} ms "
            f"p99 {f99:.2f} ms | speed-up p50 {f50 / n50:.0f}x p99 {f99 / n99:.0f}x | "
            f"identical top-{K} {same}/{compared}, max rel. score diff {worst:.1e}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, nargs="+", default=[0, 100_000])
    ap.add_argument("--passage-words", type=int, default=0)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--fts-queries", type=int, default=300, help="of those, also run on FTS5")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    a = ap.parse_args()
    print(f"{platform.processor() or platform.machine()}, SQLite {sqlite3.sqlite_version}")
    base = load_docs(a.data, a.passage_words)
    qs = load_queries(a.data, a.queries)
    print(f"{len(qs)} queries, {statistics.mean(len(q) for q in qs):.1f} words each")
    for n in a.docs:
        run(scaled(base, n), qs, a.fts_queries)


if __name__ == "__main__":
    main()
