"""Stemming decision: SciFact keyword nDCG@10 with and without the Porter stemmer.

    python benches/stemming.py [--data ../shared/data/scifact] [--split test]

Imports the corpus into a throwaway database (the dataset is read where it lies, never
copied), runs every judged query of the split through the keyword tiers 100 deep, once on
the Porter-stemmed index and once on the unstemmed one, and prints nDCG@10, Recall@10,
Recall@100, MRR@10 and the median latency of each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import cortex
from cortex import keyword
from cortex.eval import evaluate, import_corpus, load_beir

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--split", default="test")
    args = ap.parse_args()
    dataset = load_beir(args.data, args.split)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        engine = cortex.open(Path(tmp) / "scifact.db")
        doc_of = import_corpus(engine, dataset)
        opts = cortex.Options(mode="keyword", limit=100, recency_weight=0.0)
        for stemmed in (False, True):
            latencies: list[float] = []

            def search(text: str, stemmed: bool = stemmed, latencies=latencies) -> list[str]:
                t0 = time.perf_counter()
                hits = keyword.search(engine.store, text, opts, 100, stemmed=stemmed).hits
                latencies.append(time.perf_counter() - t0)
                return [doc_of[h.memory_id] for h in hits]

            name = "keyword/porter" if stemmed else "keyword/unstemmed"
            ev = evaluate(name, search, dataset)
            rows.append(ev.to_dict() | {"p50_ms": round(statistics.median(latencies) * 1e3, 2)})
        engine.close()
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
