"""Choose the ranking constants by measurement: fusion, alpha, and score calibration.

    python benches/tune_fusion.py --eval-db /tmp/scifact.db [--split train] [--data DIR]

Tuning runs on SciFact's *train* split (809 queries) only; the chosen configuration is
reported once on the test split by `cortex eval` (README, "Choosing the defaults"). The
agent evaluation set has its own tuner (`python -m cortex.agent_eval --tune`).

Each query runs once through the engine's own pipeline up to fusion
(`Pipeline.candidates`: the plan, both legs, every candidate scored on both sides); the
variants are then recomputed from those raw parts with the library's own calibration and
fusion functions (cortex.search.hits), so this file holds no copy of them.

The database is filled by `cortex eval DATA --eval-db PATH` (embedding 5,183 abstracts
takes minutes; the file is reused).
"""

from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import cortex
from cortex import eval as ev
from cortex.search import hits as H

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"


@dataclass(frozen=True, slots=True)
class Query:
    """One query's candidates: (memory id, BM25, cosine) and the calibration inputs."""

    candidates: list[tuple[int, float, float]]
    bound: float
    mean: float
    sd: float


def collect(engine: cortex.Engine, texts: dict[str, str], opts: cortex.Options) -> dict[str, Query]:
    out: dict[str, Query] = {}
    for qid, text in texts.items():
        _, kw, sem, _, cands, _ = engine._pipeline.candidates(text, opts)
        bound = kw.state.bound if kw is not None and kw.state is not None else 0.0
        mean, sd = (sem.state[1], sem.state[2]) if sem is not None and sem.state else (0.0, 1.0)
        out[qid] = Query(
            [(c.memory_id, c.bm25_raw, c.cosine if c.cosine is not None else -1.0) for c in cands],
            bound,
            mean,
            sd,
        )
    return out


def fused(q: Query, fusion: str, alpha: float, ks: float, mid: float, ss: float) -> list[int]:
    """The candidates' ids, best first, under one setting of the constants."""
    scored = []
    for i, raw, cos in q.candidates:
        kw = H.keyword_score(raw / q.bound, ks) if q.bound > 0 else 0.0
        sem = H.semantic_score(cos, q.mean, q.sd, mid, ss) if cos > -1.0 else 0.0
        if fusion == "keyword":
            s = kw
        elif fusion == "semantic":
            s = sem
        else:
            s = H.combine(kw, sem, alpha, fusion)
        scored.append((s, i))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [i for _, i in scored]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--split", default="train")
    ap.add_argument("--eval-db", type=Path, required=True)
    args = ap.parse_args()
    dataset = ev.load_beir(args.data, args.split)
    engine = cortex.open(args.eval_db, keyword_index="on")
    doc_of = ev._doc_ids(engine)
    if not doc_of:
        raise SystemExit(f"{args.eval_db} holds no corpus; run `cortex eval DATA --eval-db ...`")
    opts = cortex.Options(mode="hybrid", limit=50, record=False)
    queries = collect(engine, dataset.queries, opts)

    def ndcg(fusion: str, alpha: float, ks: float, mid: float, ss: float) -> float:
        total = 0.0
        for qid, q in queries.items():
            order = [doc_of[i] for i in fused(q, fusion, alpha, ks, mid, ss)][:10]
            total += ev.ndcg_at_k(order, dataset.qrels[qid], 10)
        return total / len(queries)

    rows = []
    d = (H.KEYWORD_SLOPE, H.SEMANTIC_MID, H.SEMANTIC_SLOPE)
    rows.append(("keyword", "", ndcg("keyword", 0, *d)))
    rows.append(("semantic", "", ndcg("semantic", 1, *d)))
    for fusion, alpha, ks, mid, ss in itertools.product(
        ("linear", "evidence"), (0.3, 0.4, 0.5, 0.6), (0.8, 1.6, 3.0), (2.0, 3.0), (1.0, 1.5)
    ):
        rows.append(
            (fusion, f"alpha={alpha} ks={ks} mid={mid} ss={ss}", ndcg(fusion, alpha, ks, mid, ss))
        )
    rows.sort(key=lambda r: -r[2])
    print(f"SciFact {args.split}: {len(queries)} queries, nDCG@10")
    for method, params, value in rows[:25]:
        print(f"{method:<9} {params:<36} {value:.4f}")
    best = {
        m: max((r for r in rows if r[0] == m), key=lambda r: r[2]) for m in {r[0] for r in rows}
    }
    print(json.dumps({m: [p, round(v, 4)] for m, (_, p, v) in best.items()}, indent=1))


if __name__ == "__main__":
    main()
