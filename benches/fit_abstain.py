"""Can a small fitted model decide "does this store hold an answer" better than the rules?

    python benches/fit_abstain.py [--split tune] [--cache DIR] [--list]
        [--scifact DATA --scifact-db DB]   # SciFact's train claims counted as answerable

Today's hybrid abstention is a set of hand rules (cortex.search.pipeline: the min_score
floor, the semantic standout rule, the unknown-name discount). This script measures the
alternative: one decision made by a logistic regression over a few per-query features,
fitted on the agent set's tune split and cross-validated inside it (5 folds, 20
shuffles), the fused order untouched (it decides whether, not what). Per query, from the
engine's own pipeline (benches/tune_agent.py's gathered candidates, plus a few look-ups):

- ``lbest``: logit of the best fused relevance; ``lans``: the same with the semantic
  evidence counted as the standout rule counts it (what today's floor judges);
- ``gap``: the semantic leg's best-to-tenth gap in z (capped at 3); ``zb``: the best
  candidate's cosine z;
- ``miss``: the IDF-weighted share of the query's keyword terms that no memory inside the
  project wall holds (as a word or a word's prefix); ``miss2``: the same, leaving out
  words `cortex.suggest.corrections` finds a near spelling of (misspellings);
- ``cov``: the IDF-weighted share of the query's terms the best candidate holds;
  ``mc = miss * cov`` and ``ms = miss * (cov > 0)``: part of the question matched by
  keyword while the rest is held by nothing (the "Twilio API keys" shape);
- ``unk``: the unknown names' share of the keyword weight (keyword.share).

A search answers when something clears min_score (the floor, standout rule off) and the
model says so. `--list` prints every misjudged query of the split with its features.
Measured and not adopted: no feature set reaches 0.90 both ways, and each that empties
more nothing-relevant queries than the rules empties right answers too (BENCHMARKS.md,
"Ranking: abstention, second pass", quotes the table this prints; ~5 min a run, the
look-ups cached beside tune_agent.py's).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import sys
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import cortex
import tune_agent as T
from cortex import agent_eval as ae
from cortex import keyword as K
from cortex import suggest
from cortex.search import hits as H

SETS: list[list[str]] = [
    ["lbest", "gap"],
    ["lbest", "gap", "miss"],
    ["lbest", "gap", "mc"],
    ["lbest", "gap", "zb", "mc"],
    ["lbest", "gap", "miss", "cov", "mc"],
    ["lans"],
    ["lans", "miss"],
    ["lans", "mc"],
    ["lans", "ms"],
    ["lans", "miss2"],
    ["lans", "mc", "zb"],
]
THRESHOLDS = (-3.0, -2.0, -1.5, -1.0, -0.5)


def lookups(cache: Path) -> dict[str, dict[str, Any]]:
    """Per query: its keyword terms, each term's share of the keyword weight, whether a
    memory inside the wall holds it, whether the best candidate does, and the near
    spellings of the missing ones (cached)."""
    s = ae.load_set("agent")
    asked = hashlib.sha256(json.dumps(s.queries, sort_keys=True).encode()).hexdigest()[:12]
    path = cache / f"abstain-v1-{s.data_hash}-{asked}.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())  # type: ignore[no-any-return]
    by_id = {d["id"]: d for d in T.gather(cache)}
    now = datetime.fromisoformat(s.meta["now"]) if s.meta.get("now") else None
    out: dict[str, dict[str, Any]] = {}
    for store in s.stores:
        db, _ = ae.build_store(s, store)
        with cortex.open(db) as engine:
            for q in s.queries:
                if str(q["store"]) != store:
                    continue
                opts = cortex.Options(record=False, limit=20, now=now, **q.get("options", {}))
                out[q["id"]] = lookup(engine, q["query"], opts, by_id[q["id"]])
    path.write_bytes(pickle.dumps(out))
    return out


def lookup(
    engine: cortex.Engine, query: str, opts: cortex.Options, d: dict[str, Any]
) -> dict[str, Any]:
    """`query`'s look-ups (see lookups) on `engine`; `d`: its gathered candidates."""
    pipe, st = engine._pipeline, engine.store
    native = getattr(pipe._keyword, "_native", None)
    _, kw, _, _, _, _ = pipe.candidates(query, opts)
    wall = cortex.Options(project=opts.project)
    terms = list(kw.terms) if kw is not None else []
    found = kw.state if kw is not None else None
    weights = [
        (K.share(st, found, [t], native) or 0.0) if found is not None else 0.0 for t in terms
    ]
    holders = [K._holders(st, t, wall) for t in terms]
    held = [h is None or bool(h) for h in holders]
    base, _ = T.scores(d, T.Config())
    order = np.lexsort((d["ids"], -base * d["boost"]))
    best = int(d["ids"][order[0]]) if len(order) else None
    in_best = []
    for t, h in zip(terms, holders, strict=True):
        stemmed: set[int] = set()
        if best is not None:
            try:
                stemmed = {int(r[0]) for r in st.conn.execute(
                    "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? AND rowid = ?",
                    [K.quote(t), best])}  # fmt: skip
            except Exception:  # a term FTS5 rejects alone
                stemmed = set()
        in_best.append(best is not None and (best in (h or set()) or best in stemmed))
    missing = [t for t, h in zip(terms, held, strict=True) if not h]
    near = suggest.corrections(st, missing, wall) if missing else {}
    return {"terms": terms, "w": weights, "held": held, "in_best": in_best, "near": near,
            "query": query}  # fmt: skip


def scifact(cache: Path, data: Path, db: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """SciFact's train claims (all answerable) as (candidates, look-ups), on the database
    `cortex eval DATA --eval-db DB` filled (cached)."""
    from cortex import eval as ev

    dataset = ev.load_beir(data, "train")
    path = cache / f"abstain-scifact-v1-{len(dataset.queries)}.pkl"
    if path.exists():
        return pickle.loads(path.read_bytes())  # type: ignore[no-any-return]
    out = []
    with cortex.open(db) as engine:
        for qid, text in dataset.queries.items():
            opts = cortex.Options(record=False, limit=20)
            d = T.parts(engine, text, opts)
            d.update(id=f"scifact-{qid}", split="train", store="scifact", kind="scifact",
                     nrel=[1], rel=np.zeros(len(d["ids"]), int), window=False)  # fmt: skip
            if d["n"] == 0:
                d["n"] = len(engine.store.allowed_ids(cortex.Options()) or [])
            out.append((d, lookup(engine, text, opts, d)))
    path.write_bytes(pickle.dumps(out))
    return out


def logit(p: float) -> float:
    p = min(max(p, 1e-4), 1 - 1e-4)
    return float(np.log(p / (1 - p)))


def features(d: dict[str, Any], look: dict[str, Any]) -> dict[str, float]:
    base, answer = T.scores(d, T.Config())
    order = np.lexsort((d["ids"], -base * d["boost"]))
    b = order[0] if len(order) else None
    sd = max(d["sd"], H.MIN_SD)
    top = d["top"]
    w = np.array(look["w"], float)
    total = w.sum() or 1.0
    held = np.array(look["held"], bool)
    in_best = np.array(look["in_best"], bool)
    misspelt = np.array([t in look["near"] for t in look["terms"]], bool)
    miss = float(w[~held].sum() / total) if len(w) else 0.0
    cov = float(w[in_best].sum() / total) if len(w) else 0.0
    f = {
        "lbest": logit(float(base[b])) if b is not None else logit(0.0),
        "lans": logit(float(answer.max())) if len(answer) else logit(0.0),
        "gap": min((top[0] - top[9]) / sd, 3.0) if len(top) >= 10 else 0.0,
        "zb": float((d["cos"][b] - d["mean"]) / sd) if b is not None else 0.0,
        "miss": miss,
        "miss2": float(w[~held & ~misspelt].sum() / total) if len(w) else 0.0,
        "cov": cov,
        "mc": miss * cov,
        "ms": miss * (cov > 0),
        "unk": float(d["share"] or 0.0),
    }
    return f


def fit(
    x: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 3000
) -> tuple[np.ndarray, float]:
    """A class-balanced, L2-regularised logistic regression by gradient descent (on
    standardised features; returned in the features' own units)."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = (x - mu) / sd
    w, b = np.zeros(z.shape[1]), 0.0
    cw = np.where(y == 1, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    for _ in range(steps):
        g = (1 / (1 + np.exp(-(z @ w + b))) - y) * cw
        w -= 0.1 * (z.T @ g / len(y) + l2 * w / len(y))
        b -= 0.1 * g.mean()
    return w / sd, float(b - (w / sd) @ mu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="tune", choices=["tune", "test", "all"])
    ap.add_argument("--cache", type=Path, default=ae.cache_dir() / "tune")
    ap.add_argument("--list", action="store_true", help="the misjudged queries, with features")
    ap.add_argument("--scifact", type=Path, help="also fit on SciFact's train claims (answerable)")
    ap.add_argument("--scifact-db", type=Path, help="the database `cortex eval --eval-db` filled")
    args = ap.parse_args()
    look = lookups(args.cache)
    rows = [d for d in T.gather(args.cache)
            if (args.split == "all" or d["split"] == args.split) and not d["window"]]  # fmt: skip
    feats = [features(d, look[d["id"]]) for d in rows]
    y = np.array([1 if d["nrel"] else 0 for d in rows])
    extra: list[tuple[dict[str, Any], dict[str, Any]]] = []
    if args.scifact is not None and args.scifact_db is not None:
        extra = scifact(args.cache, args.scifact, args.scifact_db)
    sci = np.array([False] * len(rows) + [True] * len(extra))
    rows += [d for d, _ in extra]
    feats += [features(d, lk) for d, lk in extra]
    y = np.concatenate([y, np.ones(len(extra), int)])
    floor = np.array([len(T.answer(d, replace(T.Config(), gap=0.0))) > 0 for d in rows])
    rules = np.array([len(T.answer(d, T.Config())) > 0 for d in rows])
    gain = np.array([
        T.ndcg(d["rel"][T.answer(d, replace(T.Config(), gap=0.0))], d["nrel"])
        if d["nrel"] and floor[i] else 0.0 for i, d in enumerate(rows)
    ])  # fmt: skip
    gain_rules = np.array([
        T.ndcg(d["rel"][T.answer(d, T.Config())], d["nrel"]) if d["nrel"] and rules[i] else 0.0
        for i, d in enumerate(rows)
    ])  # fmt: skip
    agent = ~sci
    pos, neg = agent & (y == 1), agent & (y == 0)

    def row(ans: np.ndarray, g: np.ndarray) -> tuple[float, float, float, float]:
        out = (ans[pos].mean(), (~ans[neg]).mean(), (g * ans)[pos].mean(),
               ans[sci].mean() if sci.any() else float("nan"))  # fmt: skip
        return out

    also = f"; SciFact train: {sci.sum()} claims" if sci.any() else ""
    print(f"agent set, {args.split} split: {agent.sum()} queries ({neg.sum()} nothing-relevant;"
          f" time-window queries left out){also}")  # fmt: skip
    print(f"{'decision':44s} answered  none-empty  nDCG@10  SciFact answered")
    shown_rows = [("the rules (production)", row(rules, gain_rules)),
                  ("the floor alone (no standout rule)", row(floor, gain))]  # fmt: skip
    for name, r in shown_rows:
        print(f"{name:44s} {r[0]:8.3f} {r[1]:11.3f} {r[2]:8.3f} {r[3]:10.3f}")
    rng = np.random.default_rng(1)
    for names in SETS:
        x = np.array([[f[n] for n in names] for f in feats])
        for t in THRESHOLDS:
            res = []
            for _ in range(20):
                fold = rng.permutation(len(y)) % 5
                pred = np.full(len(y), -9.0)
                for k in range(5):
                    train = floor & (fold != k)
                    w, b = fit(x[train], y[train])
                    pred[fold == k] = x[fold == k] @ w + b
                res.append(row(floor & (pred > t), gain))
            a = np.mean(res, 0)
            shown = f"LR {'+'.join(names)} > {t:+.1f} (CV)"
            print(f"{shown:44s} {a[0]:8.3f} {a[1]:11.3f} {a[2]:8.3f} {a[3]:10.3f}")
    if args.list:
        for d, f, yy, r, s in zip(rows, feats, y, rules, sci, strict=True):
            if bool(yy) != bool(r) and not s:
                kind = "answerable, left empty" if yy else "nothing relevant, answered"
                print(f"{d['id']} ({kind}) {look[d['id']]['query']!r}")
                print("   ", " ".join(f"{k}={v:.2f}" for k, v in f.items()))


if __name__ == "__main__":
    main()
