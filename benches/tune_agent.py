"""Choose the ranking constants on the agent evaluation set's *tune* split.

    python benches/tune_agent.py [--split tune] [--cache DIR]

Every query of eval/agent runs once through the engine's own pipeline up to fusion
(`Pipeline.candidates`, via benches/tune_fusion.py's `collect`); the grid of fusion,
alpha, calibration constants and `min_score` is then recomputed from those raw parts with
vectorised copies of cortex.search.hits' formulas (kept equal to them by
tests/test_pipeline.py's calibration test). The objective is nDCG@10 plus the lower of the
two abstention rates (answerable queries answered, nothing-relevant queries empty); the
report on the *test* split is `cortex eval agent --split test` (BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np

import cortex
from cortex import agent_eval as ae
from cortex.search import hits as H

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_fusion import collect

DISCOUNT = 1 / np.log2(np.arange(2, 12))


def gather(cache: Path) -> list[dict[str, Any]]:
    """Every query's candidates with their raw parts (cached: the model is slow)."""
    s = ae.load_set("agent")
    path = cache / f"candidates-{s.data_hash}.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())  # type: ignore[no-any-return]
    data = []
    for store in s.stores:
        db, ids = ae.build_store(s, store, cache=cache)
        with cortex.open(db, keyword_index="off") as engine:
            for q in s.queries:
                if str(q["store"]) != store:
                    continue
                opts = cortex.Options(record=False, limit=20, **q.get("options", {}))
                col = collect(engine, {q["id"]: q["query"]}, opts)[q["id"]]
                c = col.candidates
                data.append(
                    {
                        "split": ae.split_of(q["id"]),
                        "store": store,
                        "kind": q["kind"],
                        "nrel": sorted(q["relevant"].values(), reverse=True),
                        "rel": np.array([q["relevant"].get(ids.get(i, "?"), 0) for i, *_ in c]),
                        "ids": np.array([i for i, *_ in c]),
                        "raw": np.array([r for _, r, _ in c], float),
                        "cos": np.array([x for *_, x in c], float),
                        "bound": col.bound,
                        "mean": col.mean,
                        "sd": col.sd,
                    }
                )
    cache.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(data))
    return data


def scores(d: dict[str, Any], fusion: str, alpha: float, ks: float, mid: float, ss: float):
    ratio = d["raw"] / d["bound"] if d["bound"] > 0 else np.zeros_like(d["raw"])
    kw = 1 - np.exp(-ks * np.maximum(ratio, 0))
    z = (d["cos"] - d["mean"]) / max(d["sd"], H.MIN_SD)
    sem = np.where(d["cos"] > -1, 1 / (1 + np.exp(-ss * (z - mid))), 0.0)
    if fusion == "linear":
        return (1 - alpha) * kw + alpha * sem
    k, s = np.clip(kw, 0, 1 - 1e-12), np.clip(sem, 0, 1 - 1e-12)
    return 1 - (1 - k) ** (2 * (1 - alpha)) * (1 - s) ** (2 * alpha)


def run(queries: list[dict[str, Any]], *cfg: Any) -> tuple[float, float, float]:
    *shape, thr = cfg
    nd = answered = empty = 0.0
    nrel = nnone = 0
    for d in queries:
        sc = scores(d, *shape)
        order = np.lexsort((d["ids"], -sc))
        keep = order[sc[order] >= thr][:10]
        if d["nrel"]:
            gains = (2.0 ** d["rel"][keep] - 1) @ DISCOUNT[: len(keep)]
            ideal = (2.0 ** np.array(d["nrel"][:10]) - 1) @ DISCOUNT[: min(10, len(d["nrel"]))]
            nd += gains / ideal
            answered += len(keep) > 0
            nrel += 1
        else:
            empty += len(keep) == 0
            nnone += 1
    return nd / nrel, answered / nrel, empty / max(nnone, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="tune", choices=["tune", "test", "all"])
    ap.add_argument("--cache", type=Path, default=ae.cache_dir() / "tune")
    args = ap.parse_args()
    data = [d for d in gather(args.cache) if args.split == "all" or d["split"] == args.split]
    rows = []
    grid = itertools.product(
        ("linear", "evidence"), (0.3, 0.4, 0.5, 0.6), (0.8, 1.2, 1.6), (2.5, 3.0, 3.5, 4.0),
        (1.5, 2.5), (0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5),
    )  # fmt: skip
    for cfg in grid:
        nd, answered, empty = run(data, *cfg)
        rows.append((nd + min(answered, empty), nd, answered, empty, cfg))
    rows.sort(key=lambda r: -r[0])
    print(f"agent set, {args.split} split: {len(data)} queries")
    print("objective  nDCG@10  answered  none-empty  fusion alpha ks mid ss min_score")
    for obj, nd, answered, empty, cfg in rows[:20]:
        print(f"{obj:9.3f} {nd:8.3f} {answered:9.3f} {empty:11.3f}  {cfg}")
    default = ("evidence", 0.5, H.KEYWORD_SLOPE, H.SEMANTIC_MID, H.SEMANTIC_SLOPE)
    for thr in (0.0, 0.2, 0.3, 0.4, 0.5):
        nd, answered, empty = run(data, *default, thr)
        print(f"defaults, min_score {thr}: nDCG@10 {nd:.3f} answered {answered:.3f} "
              f"none-empty {empty:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
