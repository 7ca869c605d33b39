"""Choose the hybrid defaults by measurement: fusion method, weights, score mapping.

    python benches/tune_fusion.py --eval-db /tmp/scifact.db [--split train] [--data DIR]

Tuning runs on SciFact's *train* split (809 queries) only; the chosen configuration is
then reported once on the test split by `cortex eval` (README, "Choosing the defaults").
Each query's keyword and semantic candidate lists (100 deep, the engine's own retrievers
and filters) are fetched once; every fusion variant is then computed from the same lists:

- rrf(alpha, k): seed 002, ``Σ w_i / (k + rank_i)``;
- minmax(alpha): each list min-max normalised to [0, 1], then weighted (a common recipe);
- linear(alpha, K): seed 001's weighted sum of absolute scores, cosine similarity and BM25
  mapped to ``x / (x + K)`` (K = 1 is the [0, 1) map of the keyword tier), which keeps a
  score comparable across queries, so that a threshold means something.

The database is filled by `cortex eval DATA --eval-db PATH` (embedding 5,183 abstracts
takes minutes; the file is reused).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import cortex
from cortex import eval as ev
from cortex import keyword

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"


def fuse_rrf(kw, sem, alpha, k=60.0):
    scores: dict[int, float] = {}
    for rank, (i, _) in enumerate(kw, 1):
        scores[i] = scores.get(i, 0.0) + (1 - alpha) / (k + rank)
    for rank, (i, _) in enumerate(sem, 1):
        scores[i] = scores.get(i, 0.0) + alpha / (k + rank)
    return scores


def fuse_minmax(kw, sem, alpha):
    def norm(lst):
        if not lst:
            return {}
        vals = [s for _, s in lst]
        lo, hi = min(vals), max(vals)
        return {i: (s - lo) / (hi - lo) if hi > lo else 1.0 for i, s in lst}

    a, b = norm(kw), norm(sem)
    return {i: (1 - alpha) * a.get(i, 0.0) + alpha * b.get(i, 0.0) for i in a.keys() | b.keys()}


def fuse_linear(kw_raw, sem, alpha, k_map):
    a = {i: x / (x + k_map) for i, x in kw_raw}
    b = dict(sem)
    return {i: (1 - alpha) * a.get(i, 0.0) + alpha * b.get(i, 0.0) for i in a.keys() | b.keys()}


def ranked(scores: dict[int, float]) -> list[int]:
    return [i for i, _ in sorted(scores.items(), key=lambda t: (-t[1], t[0]))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--split", default="train")
    ap.add_argument("--eval-db", type=Path, required=True)
    args = ap.parse_args()
    dataset = ev.load_beir(args.data, args.split)
    engine = cortex.open(args.eval_db)
    doc_of = ev._doc_ids(engine)
    if not doc_of:
        raise SystemExit(f"{args.eval_db} holds no corpus; run `cortex eval DATA --eval-db ...`")
    opts = cortex.Options(mode="hybrid", limit=100, record=False, min_similarity=-1.0)
    lists = {}
    for qid, text in dataset.queries.items():
        kw = keyword.search(engine.store, text, opts, 100).hits
        sem = engine._semantic.search(keyword.clean(text), opts, 100)
        lists[qid] = ([(h.memory_id, h.raw) for h in kw], [(h.memory_id, h.score) for h in sem])

    def score(fn) -> float:
        total = 0.0
        for qid, (kw, sem) in lists.items():
            order = [doc_of[i] for i in ranked(fn(kw, sem))][:10]
            total += ev.ndcg_at_k(order, dataset.qrels[qid], 10)
        return total / len(lists)

    rows = []
    alphas = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    for alpha in alphas:
        for k in (10, 60):
            rows.append(
                (
                    "rrf",
                    f"alpha={alpha} k={k}",
                    score(lambda a, b, al=alpha, k=k: fuse_rrf(a, b, al, k)),
                )
            )
        rows.append(
            ("minmax", f"alpha={alpha}", score(lambda a, b, al=alpha: fuse_minmax(a, b, al)))
        )
        for k_map in (1.0, 5.0, 10.0, 20.0):
            rows.append(
                (
                    "linear",
                    f"alpha={alpha} K={k_map:g}",
                    score(lambda a, b, al=alpha, km=k_map: fuse_linear(a, b, al, km)),
                )
            )
    rows.append(("keyword", "", score(lambda a, b: {i: s for i, s in a})))
    rows.append(("semantic", "", score(lambda a, b: dict(b))))
    rows.sort(key=lambda r: -r[2])
    print(f"SciFact {args.split}: {len(lists)} queries, nDCG@10")
    for method, params, value in rows:
        print(f"{method:<9} {params:<18} {value:.4f}")
    best = {
        m: max((r for r in rows if r[0] == m), key=lambda r: r[2]) for m in {r[0] for r in rows}
    }
    print(json.dumps({m: [p, round(v, 4)] for m, (_, p, v) in best.items()}, indent=1))
    assert not math.isnan(rows[0][2])

    # What a minimum score would cost the default (linear, alpha 0.5, K 10): the share of
    # relevant documents in the top 10 whose fused score is below each threshold.
    relevant_scores = []
    for qid, (kw, sem) in lists.items():
        fused = fuse_linear(kw, sem, 0.5, 10.0)
        for i in ranked(fused)[:10]:
            if dataset.qrels[qid].get(doc_of[i], 0) > 0:
                relevant_scores.append(fused[i])
    print(f"relevant top-10 hits: {len(relevant_scores)}")
    for threshold in (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35):
        lost = sum(s < threshold for s in relevant_scores) / len(relevant_scores)
        print(f"min_score {threshold:.2f}: loses {lost:.1%} of them")


if __name__ == "__main__":
    main()
