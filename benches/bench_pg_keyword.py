"""Keyword search on PostgreSQL against the SQLite backend, on BEIR SciFact.

Both stores get the same corpus (title, blank line, text: as `cortex eval` imports it);
each of the 300 test claims runs through each backend's keyword retriever (SQLite: FTS5,
the in-memory index off; PostgreSQL: BM25 in SQL) for its top 10. Prints nDCG@10 of
each, how many of the top-10 positions agree, and the median latency of each.

    python benches/bench_pg_keyword.py [--data ../shared/data/scifact]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.pg_server import running_server  # noqa: E402

from cortex import keyword  # noqa: E402
from cortex.eval import load_beir, ndcg_at_k  # noqa: E402
from cortex.options import Mode, Options  # noqa: E402
from cortex.pg import keyword as pg_keyword  # noqa: E402
from cortex.pg.store import PgStore  # noqa: E402
from cortex.store import MemoryInput, Store  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(ROOT.parent.parent / "shared" / "data" / "scifact"))
    args = ap.parse_args()
    data = load_beir(args.data)
    docs = list(data.corpus.items())
    items = [
        MemoryInput(content=f"{t}\n\n{x}".strip(), metadata={"doc_id": d}) for d, (t, x) in docs
    ]
    opts = Options(mode=Mode.KEYWORD, limit=10, record=False)
    with tempfile.TemporaryDirectory() as tmp, running_server() as server:
        lite = Store.open(Path(tmp) / "scifact.db")
        pg = PgStore.open(server.create_database("scifact"))
        t0 = time.perf_counter()
        lite_ids = lite.add_many(items)
        t1 = time.perf_counter()
        pg_ids = []
        for start in range(0, len(items), 1000):
            pg_ids += pg.add_many(items[start : start + 1000])
        t2 = time.perf_counter()
        print(f"import: sqlite {t1 - t0:.1f} s, postgres {t2 - t1:.1f} s ({len(items)} docs)")
        with pg.transaction() as tx:
            tx.execute("ANALYZE memories")
        to_doc_lite = {i: d for i, (d, _) in zip(lite_ids, docs, strict=True)}
        to_doc_pg = {i: d for i, (d, _) in zip(pg_ids, docs, strict=True)}
        nd_lite, nd_pg, agree, lat_lite, lat_pg = [], [], 0, [], []
        positions = 0
        for qid, text in data.queries.items():
            t = time.perf_counter()
            a = [to_doc_lite[h.memory_id] for h in keyword.search(lite, text, opts, 10).hits]
            lat_lite.append(time.perf_counter() - t)
            t = time.perf_counter()
            b = [to_doc_pg[h.memory_id] for h in pg_keyword.search(pg, text, opts, 10).hits]
            lat_pg.append(time.perf_counter() - t)
            nd_lite.append(ndcg_at_k(a, data.qrels[qid]))
            nd_pg.append(ndcg_at_k(b, data.qrels[qid]))
            positions += max(len(a), len(b))
            agree += sum(1 for x, y in zip(a, b, strict=False) if x == y)
        n = len(nd_lite)
        print(f"queries: {n}")
        print(f"nDCG@10: sqlite {sum(nd_lite) / n:.4f}  postgres {sum(nd_pg) / n:.4f}")
        print(f"top-10 positions equal: {agree}/{positions} ({agree / max(positions, 1):.1%})")
        print(
            f"latency p50: sqlite {statistics.median(lat_lite) * 1e3:.2f} ms,"
            f" postgres {statistics.median(lat_pg) * 1e3:.2f} ms"
        )
        pg.close()
        lite.close()


if __name__ == "__main__":
    main()
