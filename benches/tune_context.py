"""Fit the confidence of Engine.context (cortex.context.CONFIDENCE_MODEL) and measure it.

For every query of the agent evaluation set (eval/agent, its three stores) and of the
temporal set (eval/temporal: questions that name a time, whose window is the answer),
the search
that Engine.context runs (hybrid, explain on, the set's fixed clock) gives the features
of cortex.context.features; the label is whether the first result is a memory the query
is labelled with (queries of kind ``none`` have none: their label is 0). A logistic
regression (Newton's method, a small ridge) is fitted on the tune splits of both; the AUC (the
probability that a query whose first memory is right gets a higher confidence than one
whose first memory is wrong or missing) and the Brier score are reported on both
splits, for the fitted model and for the model committed in cortex/context.py.

    python benches/tune_context.py          # fit on tune, report tune and test
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import Any

import numpy as np

import cortex
from cortex.agent_eval import build_store, load_set, split_of
from cortex.context import CANDIDATES, FEATURES, confidence, features


def collect(name: str, mode: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    evalset = load_set(name)
    now = datetime.fromisoformat(evalset.meta["now"])
    rows: list[list[float]] = []
    labels: list[float] = []
    splits: list[str] = []
    for store in evalset.stores:
        db, ids = build_store(evalset, store)
        with cortex.open(db) as engine:
            for q in evalset.queries:
                if str(q["store"]) != store:
                    continue
                opts: dict[str, Any] = {**q.get("options", {})}
                results = engine.search(
                    q["query"], **opts, mode=mode, explain=True, limit=CANDIDATES,
                    record=False, now=now,
                )  # fmt: skip
                relevant = {k for k, g in q["relevant"].items() if g > 0}
                top = ids.get(results[0].memory.id) if results else None
                rows.append(features(results))
                labels.append(1.0 if top in relevant else 0.0)
                splits.append(split_of(q["id"]))
    return np.asarray(rows), np.asarray(labels), splits


def fit(x: np.ndarray, y: np.ndarray, ridge: float = 1e-2) -> tuple[float, tuple[float, ...]]:
    """Logistic regression by Newton's method (intercept unpenalised)."""
    a = np.hstack([np.ones((len(x), 1)), x])
    w = np.zeros(a.shape[1])
    penalty = np.full(a.shape[1], ridge)
    penalty[0] = 0.0
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-np.clip(a @ w, -60, 60)))
        grad = a.T @ (p - y) + penalty * w
        hess = (a * (p * (1 - p))[:, None]).T @ a + np.diag(penalty) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return float(w[0]), tuple(float(v) for v in w[1:])


def auc(scores: np.ndarray, y: np.ndarray) -> float:
    """Mann-Whitney AUC, ties counted half."""
    pos, neg = scores[y == 1], scores[y == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(pos) * len(neg)))


def report(name: str, models: Any, x: np.ndarray, y: np.ndarray) -> str:
    p = np.asarray([confidence(row, *models) for row in x])
    brier = float(np.mean((p - y) ** 2))
    return (
        f"{name}: AUC {auc(p, y):.3f}, Brier {brier:.3f}, mean {p.mean():.3f},"
        f" n {len(y)} ({int(y.sum())} right)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", default="hybrid")
    args = parser.parse_args(argv)
    sets = {name: collect(name, args.mode) for name in ("agent", "temporal")}
    tunes = {n: np.asarray([s == "tune" for s in sp]) for n, (_, _, sp) in sets.items()}
    xa, ya, _ = sets["agent"]
    xt, yt, _ = sets["temporal"]
    # The agent model: every agent tune query (none has a window applied).
    plain = fit(xa[tunes["agent"]][:, :-1], ya[tunes["agent"]])
    # The window model: the temporal tune questions whose window was applied and held
    # memories; few are answered wrong, so a strong ridge keeps it near its intercept.
    windowed = tunes["temporal"] & (xt[:, -1] == 1.0) & (xt[:, -2] == 1.0)
    window = fit(xt[windowed][:, :-1], yt[windowed], ridge=5.0)
    fitted = (plain, window)
    print(f"features: {', '.join(FEATURES)}")
    for label, m in (("plain", plain), ("window", window)):
        print(f"fitted {label:6}: ({m[0]:.3f}, ({', '.join(f'{v:.3f}' for v in m[1])}))")
    for label, models in (("fitted", fitted), ("committed", (None, None))):
        for name, (xs, ys, _) in sets.items():
            tune = tunes[name]
            print(report(f"{label:9} {name:8} tune", models, xs[tune], ys[tune]))
            print(report(f"{label:9} {name:8} test", models, xs[~tune], ys[~tune]))
        test = ~tunes["temporal"] & (xt[:, -1] == 1.0)
        print(report(f"{label:9} temporal test, window applied", models, xt[test], yt[test]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
