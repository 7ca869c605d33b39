"""Choose the ranking constants on the agent evaluation set's *tune* split.

    python benches/tune_agent.py [--split tune] [--cache DIR]

Every query of eval/agent runs once through the engine's own pipeline up to fusion
(`Pipeline.candidates`) and once as `cortex eval agent` runs it (both cached). Variants
of the constants are then recomputed from the raw parts with vectorised copies of
cortex.search.hits' formulas (kept equal to them by tests/test_pipeline.py) and of the
pipeline's rules as production runs them: the unknown-name discount (a name no memory of
the searched projects holds: semantic evidence x UNKNOWN_NAME_FACTOR, relevance x
(1 - the names' IDF share)^UNKNOWN_SHARE_POWER), the standout rule (a search answers only
when a match clears the floor with its semantic evidence counted as far as the semantic
leg's best hit stands out of its STANDOUT_RANK-th; exempt when the query names only known
words), the neighbours' borrowed scores, the narrow-filter floor and the boosts that
order what clears the floor. A query whose time words set a window keeps production's
answer (the model does not search windows). The report first checks the model:
production's figures and how many queries the modelled defaults answer as it does.

Then each constant is varied alone around the defaults, per store (what BENCHMARKS.md
quotes), and with --grid the joint grid of fusion, alpha, calibration, gap and
`min_score`. An idea measured and not adopted stays as a knob (`Config.size`). SciFact's
train split checks every change the agent set suggests (`cortex eval DATA --split train
--config hybrid`).

The grid's objective is nDCG@10 plus the lower of the two abstention rates (answerable
queries answered, nothing-relevant queries empty); the report on the *test* split is
`cortex eval agent --split test` (BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import pickle
import time
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

import cortex
from cortex import agent_eval as ae
from cortex.options import DEFAULT_MIN_SCORE
from cortex.search import hits as H
from cortex.search import pipeline as P
from cortex.search.plan import CJK_ALPHA

DISCOUNT = 1 / np.log2(np.arange(2, 12))
#: Stores at least this large keep the semantic midpoint (`Config.size`, an idea measured
#: and not adopted: BENCHMARKS.md, "Ranking: third pass").
SIZE_REFERENCE = 2048


def size_gap(n: int) -> float:
    """How much lower (in z) the best of `n` memories reaches by chance than the best of
    SIZE_REFERENCE: the expected maximum of n normal draws grows like sqrt(2 ln n)."""
    n = min(max(n, 2), SIZE_REFERENCE)
    return float(np.sqrt(2 * np.log(SIZE_REFERENCE)) - np.sqrt(2 * np.log(n)))


def parts(engine: cortex.Engine, query: str, opts: cortex.Options) -> dict[str, Any]:
    """One query's candidates with their raw parts and what the pipeline's rules see (the
    candidates in `Pipeline.candidates`' order)."""
    pipe = engine._pipeline
    p, kw, sem, mode, c, _ = pipe.candidates(query, opts)
    # the pipeline's unknown-name check, as _candidates runs it
    unknown: list[str] = []
    share = None
    wall = cortex.Options(project=opts.project)
    walled = engine.store.allowed_ids(wall)
    rare: list[str] = []
    if (p.named or p.rare) and mode is cortex.Mode.HYBRID:
        unknown = pipe._keyword.absent(p.named, wall, walled)
        gone = pipe._keyword.absent(p.rare, wall, walled) if p.rare else []
        spelt = pipe._keyword.near(gone, wall) if gone else set()
        rare = [w for w in gone if w not in spelt]  # rare words as names (plan.RARE_WORD_RANK)
        if (unknown or rare) and kw is not None:
            share = pipe._keyword.share(kw, unknown + rare)
    top = sorted((h.raw for h in sem.hits), reverse=True) if sem is not None else []
    # what orders the candidates beyond relevance (recency, decay, salience...)
    now = opts.now.timestamp() if opts.now is not None else time.time()
    ranked, _ = pipe._rank(list(c), opts, now)
    boost = {x.memory_id: (x.score / x.base if x.base > 0 else 1.0) for x in ranked}
    pos = {x.memory_id: n for n, x in enumerate(c)}
    pairs = sorted(
        {(min(pos[i], pos[j]), max(pos[i], pos[j]))
         for i, ns in engine.store.adjacent(list(pos)).items() if i in pos
         for j in ns if j in pos}
    )  # fmt: skip
    bound = kw.state.bound if kw is not None and kw.state is not None else 0.0
    mean, sd = (sem.state[1], sem.state[2]) if sem is not None and sem.state else (0.0, 1.0)
    return {
        "ids": np.array([x.memory_id for x in c]),
        "raw": np.array([x.bm25_raw for x in c], float),
        "cos": np.array([x.cosine if x.cosine is not None else -1.0 for x in c], float),
        "bound": bound,
        "mean": mean,
        "sd": sd,
        "cjk": p.alpha != opts.alpha,
        "unknown": bool(unknown),
        "rare": bool(rare),
        "share": share,
        "anchored": bool(p.named) and not (unknown or rare),
        # the best match ignores the rare words: production does not answer (_ignored)
        "ignored": any(x.ignored for x in c),
        "boost": np.array([boost.get(x.memory_id, 1.0) for x in c]),
        "pairs": [] if p.constrained else pairs,
        "narrow": pipe._narrow(opts, engine.store.allowed_ids(opts)),
        "n": len(walled) if walled is not None else 0,  # 0: the whole store
        "top": top[:20],
    }


def gather(cache: Path) -> list[dict[str, Any]]:
    """Every query's `parts`, its labels and production's own answer (cached: the model
    is slow)."""
    s = ae.load_set("agent")
    asked = hashlib.sha256(json.dumps(s.queries, sort_keys=True).encode()).hexdigest()[:12]
    path = cache / f"candidates-v7-{s.data_hash}-{asked}.pkl"  # the memories and the queries
    if path.exists():
        return pickle.loads(path.read_bytes())  # type: ignore[no-any-return]
    now = datetime.fromisoformat(s.meta["now"]) if s.meta.get("now") else None
    data = []
    for store in s.stores:
        db, ids = ae.build_store(s, store)  # the stores `cortex eval agent` searches
        with cortex.open(db) as engine:
            for q in s.queries:
                if str(q["store"]) != store:
                    continue
                opts = cortex.Options(record=False, limit=20, now=now, **q.get("options", {}))
                d = parts(engine, q["query"], opts)
                if d["n"] == 0:
                    d["n"] = len(ids)
                got = engine.search(q["query"], opts.replace(limit=ae.DEPTH))
                prod = [ids.get(r.memory.id, "?") for r in got]
                keys = [ids.get(int(i), "?") for i in d["ids"]]
                d.update(
                    id=q["id"],
                    split=ae.split_of(q["id"]),
                    store=store,
                    kind=q["kind"],
                    nrel=sorted(q["relevant"].values(), reverse=True),
                    rel=np.array([q["relevant"].get(k, 0) for k in keys]),
                    keys=keys,
                    prod=[q["relevant"].get(k, 0) for k in prod[:10]],
                    prod_keys=prod[:10],
                    # a time window searched the query's other words in it: the model
                    # does not search windows, it keeps production's answer
                    window=(got.interpretation or {}).get("applied") is not None,
                )
                data.append(d)
    cache.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(data))
    return data


@dataclass(frozen=True)
class Config:
    fusion: str = "evidence"
    alpha: float = cortex.Options().alpha
    ks: float = H.KEYWORD_SLOPE
    mid: float = H.SEMANTIC_MID
    ss: float = H.SEMANTIC_SLOPE
    gap: float = P.STANDOUT_GAP
    rank: int = P.STANDOUT_RANK
    floor: float = P.STANDOUT_FLOOR
    unknown_semantic: float = P.UNKNOWN_NAME_FACTOR
    # the unknown-name relevance factor (1 - IDF share)^power (UNKNOWN_NAME_BASE at 0)
    power: float = P.UNKNOWN_SHARE_POWER
    # not in production (measured, not adopted): a semantic midpoint lowered by
    # size * size_gap(n) in stores under SIZE_REFERENCE memories
    size: float = 0.0
    min_score: float = DEFAULT_MIN_SCORE


def scores(d: dict[str, Any], cfg: Config) -> tuple[np.ndarray, np.ndarray]:
    """(fused relevance, what decides whether the search answers) of `d`'s candidates."""
    ratio = d["raw"] / d["bound"] if d["bound"] > 0 else np.zeros_like(d["raw"])
    kw = 1 - np.exp(-cfg.ks * np.maximum(ratio, 0))
    z = (d["cos"] - d["mean"]) / max(d["sd"], H.MIN_SD)
    mid = cfg.mid - cfg.size * size_gap(d["n"])
    sem = np.where(d["cos"] > -1, 1 / (1 + np.exp(-cfg.ss * (z - mid))), 0.0)
    alpha = min(cfg.alpha, CJK_ALPHA) if d["cjk"] else cfg.alpha
    if d["unknown"]:
        sem = sem * cfg.unknown_semantic
    standout = 1.0
    if not d["anchored"] and len(d["top"]) >= cfg.rank and cfg.gap > 0:
        gap = (d["top"][0] - d["top"][int(cfg.rank) - 1]) / max(d["sd"], H.MIN_SD)
        standout = max(cfg.floor, min(1.0, gap / cfg.gap))

    def fuse(k: np.ndarray, s: np.ndarray) -> np.ndarray:
        if cfg.fusion == "linear":
            return (1 - alpha) * k + alpha * s
        k, s = np.clip(k, 0, 1 - 1e-12), np.clip(s, 0, 1 - 1e-12)
        return 1 - (1 - k) ** (2 * (1 - alpha)) * (1 - s) ** (2 * alpha)  # type: ignore[no-any-return]

    base, answer = fuse(kw, sem), fuse(kw, sem * standout)
    if P.NEIGHBOUR_WEIGHT and d["pairs"]:  # borrowing from the best adjacent candidate
        own, own_answer = base.copy(), answer.copy()
        best, best_answer = np.zeros_like(base), np.zeros_like(base)
        for i, j in d["pairs"]:
            best[i], best[j] = max(best[i], own[j]), max(best[j], own[i])
            best_answer[i] = max(best_answer[i], own_answer[j])
            best_answer[j] = max(best_answer[j], own_answer[i])
        base = 1 - (1 - own) * (1 - P.NEIGHBOUR_WEIGHT * best)
        answer = 1 - (1 - own_answer) * (1 - P.NEIGHBOUR_WEIGHT * best_answer)
    if d["unknown"] or d.get("rare"):
        if cfg.power > 0 and d["share"] is not None:
            factor = (1.0 - d["share"]) ** cfg.power
        else:
            factor = P.UNKNOWN_NAME_BASE
        base, answer = base * factor, answer * factor
    if d.get("ignored"):
        answer = np.zeros_like(answer)
    return base, answer


def ndcg(grades: Any, nrel: list[int]) -> float:
    gains = (2.0 ** np.asarray(grades, float) - 1) @ DISCOUNT[: len(grades)]
    ideal = (2.0 ** np.array(nrel[:10]) - 1) @ DISCOUNT[: min(10, len(nrel))]
    return float(gains / ideal)


def answer(d: dict[str, Any], cfg: Config) -> np.ndarray:
    """The positions of `d`'s candidates a search under `cfg` returns, best first."""
    base, standout = scores(d, cfg)
    order = np.lexsort((d["ids"], -base * d["boost"]))
    keep = order[base[order] >= cfg.min_score]
    if cfg.min_score > 0 and len(keep) and not (standout[keep] >= cfg.min_score).any():
        keep = keep[:0]
    if not len(keep) and d["narrow"]:  # the filters picked a handful: all of them
        keep = order
    return keep[:10]


def run(queries: list[dict[str, Any]], cfg: Config) -> tuple[float, float, float]:
    nd = answered = empty = 0.0
    nrel = nnone = 0
    for d in queries:
        if d["window"]:
            grades, n = d["prod"], len(d["prod_keys"])
        else:
            keep = answer(d, cfg)
            grades, n = d["rel"][keep], len(keep)
        if d["nrel"]:
            nd += ndcg(grades, d["nrel"]) if n else 0.0
            answered += n > 0
            nrel += 1
        else:
            empty += n == 0
            nnone += 1
    return nd / nrel, answered / nrel, empty / max(nnone, 1)


def production(queries: list[dict[str, Any]]) -> tuple[float, float, float, int]:
    """Production's own figures on `queries`, and how many the modelled defaults rank the
    same way (the same first ten keys)."""
    nd = answered = empty = 0.0
    nrel = nnone = same = 0
    for d in queries:
        keys = d["prod_keys"] if d["window"] else [d["keys"][i] for i in answer(d, Config())]
        same += keys == d["prod_keys"]
        if d["nrel"]:
            nd += ndcg(d["prod"], d["nrel"]) if d["prod"] else 0.0
            answered += bool(d["prod_keys"])
            nrel += 1
        else:
            empty += not d["prod_keys"]
            nnone += 1
    return nd / nrel, answered / nrel, empty / max(nnone, 1), same


#: One constant at a time around the defaults (what BENCHMARKS.md quotes), then --grid.
VARY: dict[str, tuple[Any, ...]] = {
    "alpha": (0.2, 0.25, 0.4),
    "ks": (1.2, 2.0),
    "mid": (1.75, 2.25, 2.5),
    "ss": (0.75, 1.25),
    "gap": (1.25, 2.0, 2.5),
    "rank": (5, 20),
    "floor": (0.0, 0.5),
    "unknown_semantic": (0.0, 0.5),
    "power": (0.0, 0.75, 1.0, 2.0),
    "size": (0.25, 0.5, 1.0),
    "min_score": (0.4, 0.5, 0.55),
}


def by_store(data: list[dict[str, Any]], cfg: Config) -> str:
    out = []
    for store in ("30", "300", "3000", None):
        part = [d for d in data if store is None or d["store"] == store]
        nd, answered, empty = run(part, cfg)
        out.append(f"{nd:.3f} {empty:.2f} {answered:.3f}")
    return " | ".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="tune", choices=["tune", "test", "all"])
    ap.add_argument("--cache", type=Path, default=ae.cache_dir() / "tune")
    ap.add_argument("--grid", action="store_true", help="also the joint grid (minutes)")
    args = ap.parse_args()
    data = [d for d in gather(args.cache) if args.split == "all" or d["split"] == args.split]
    print(f"agent set, {args.split} split: {len(data)} queries")
    nd, answered, empty, same = production(data)
    print(f"production (searched): nDCG@10 {nd:.3f} answered {answered:.3f} none-empty "
          f"{empty:.3f}; the model ranks {same} of {len(data)} queries as it does")  # fmt: skip
    print("nDCG@10 none-empty answered, stores 30 | 300 | 3,000 | all")
    print(f"{'defaults':24s} {by_store(data, Config())}")
    for name, values in VARY.items():
        for value in values:
            shown = f"{name} {value}"
            print(f"{shown:24s} {by_store(data, replace(Config(), **{name: value}))}")
    if not args.grid:
        return
    rows = []
    grid = itertools.product(
        ("linear", "evidence"), (0.2, 0.3, 0.4, 0.5), (1.2, 1.6, 2.0), (1.5, 2.0, 2.5),
        (1.0, 1.5), (1.0, 1.5, 2.0), (0.35, 0.4, 0.45, 0.5),
    )  # fmt: skip
    for fusion, alpha, ks, mid, ss, gap, min_score in grid:
        cfg = Config(fusion, alpha, ks, mid, ss, gap, min_score=min_score)
        nd, answered, empty = run(data, cfg)
        rows.append((nd + min(answered, empty), nd, answered, empty, cfg))
    rows.sort(key=lambda r: -r[0])
    print("objective  nDCG@10  answered  none-empty  fusion alpha ks mid ss gap min_score")
    for obj, nd, answered, empty, cfg in rows[:20]:
        shown = (cfg.fusion, cfg.alpha, cfg.ks, cfg.mid, cfg.ss, cfg.gap, cfg.min_score)
        print(f"{obj:9.3f} {nd:8.3f} {answered:9.3f} {empty:11.3f}  {shown}")


if __name__ == "__main__":
    main()
