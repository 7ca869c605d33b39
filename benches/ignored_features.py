"""What an "is the best match about the missing words?" test sees, per query.

    python benches/ignored_features.py [--split tune|test|all]
        [--scifact DATA --scifact-db DB --scifact-split train]

For every query of the agent set's split (and SciFact's claims, all answerable) that holds
words no memory of the searched projects holds, from the engine's own pipeline: the kind
of those words (`name`: a capital or a digit, as plan.named_terms; `rare`: rare in English
and no misspelling, as plan.rare_terms and Pipeline._candidates; `cjk`: a CJK word of a
query written in words apart), their share of the keyword weight (keyword.share), the best
candidate's calibrated keyword score, its cosine to the query and to the query without
those words (pipeline.without, the semantic retriever's cosines_of), the rise between the
two, the semantic leg's standout (z of the best over the tenth) and whether the search
answered. Then, for a rule "no answer when a name no memory holds is present and the best
match's cosine rises by T or more without it" (Pipeline._ignored's test with the keyword
condition off), the queries each T would empty: nothing-relevant ones (right) and
answerable ones / SciFact claims (wrong, with the nDCG@10 they lose).

BENCHMARKS.md, "Ranking: unknown names ignored (issue 11; 2026-11-26)", quotes the tables.
The rule was implemented and measured on branch abstain4 (commits 9e83cfb, 892f420), reverted
there, and restored on branch eval2 with the enlarged agent set ("Ranking: a larger agent set,
abstention chosen again"), which also lowered RARE_IGNORED_SHARE to 0.19.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import cortex
from cortex import agent_eval as ae
from cortex import commonness
from cortex import eval as ev
from cortex.search import pipeline as P
from cortex.store import has_cjk

RISES = (0.06, 0.08, 0.10, 0.12, 0.135, 0.15)


def features(engine: cortex.Engine, query: str, opts: cortex.Options) -> dict[str, Any] | None:
    """The look-ups above for `query` (None when it holds no word no memory holds)."""
    pipe = engine._pipeline
    p, kw, sem, _, cands, _ = pipe.candidates(query, opts)
    if kw is None or sem is None or not cands:
        return None
    wall = cortex.Options(project=opts.project)
    absent = pipe._keyword.absent
    names = absent(list(p.named), wall) if p.named else []
    rare = absent(list(p.rare), wall) if p.rare else []
    vocab = commonness.ranks() if rare else None
    rare = [w for w in rare if vocab is None or not commonness.misspelt(w, vocab)]
    near = getattr(pipe._keyword, "near", None)
    spelt = near(rare, wall) if rare and near is not None else set()
    rare = [w for w in rare if w not in spelt]
    apart = {w for w in re.findall(r"\w+", p.text) if has_cjk(w)}
    cjk = absent([t for t in kw.terms if t in apart], wall) if len(apart) > 1 else []
    missing = names + rare + cjk
    if not missing:
        return None
    share = pipe._keyword.share(kw, missing)
    top = max(cands, key=lambda c: (c.base, -c.memory_id))
    less = P.without(p.semantic_text, missing)
    other = pipe._semantic.cosines_of(less, [top.memory_id]).get(top.memory_id) if less else None
    rise = other - top.cosine if other is not None and top.cosine is not None else None
    kind = "name" if names else ("rare" if rare else "cjk")
    return {"kind": kind, "words": missing, "share": share, "bm25": top.bm25,
            "cos": top.cosine, "rise": rise,
            "standout": P.semantic_standout([h.score for h in sem.hits])}  # fmt: skip


def agent_queries(
    s: ae.EvalSet, store: str, split: str, now: datetime
) -> Iterator[tuple[dict[str, Any], cortex.Options]]:
    """The agent set's queries of `store` in `split`, each with the options the hybrid
    evaluation runs it with."""
    for q in s.queries:
        if str(q["store"]) != store or (split != "all" and ae.split_of(q["id"]) != split):
            continue
        yield q, cortex.Options(**{**q.get("options", {}), "now": now, "mode": "hybrid",
                                   "limit": ae.DEPTH, "record": False})  # fmt: skip


def scifact_claims(
    engine: cortex.Engine, data: Any
) -> Iterator[tuple[str, str, cortex.Options, dict[str, Any]]]:
    """(claim id, text, options, features) of each SciFact claim whose features exist."""
    opts = cortex.Options(mode="hybrid", limit=100, record=False)
    for qid, text in data.queries.items():
        f = features(engine, text, opts)
        if f is not None:
            yield qid, text, opts, f


def row(label: str, query: str, answered: bool, f: dict[str, Any]) -> str:
    rise = f"{f['rise']:+.3f}" if f["rise"] is not None else "  -   "
    z = f"{f['standout']:.2f}" if f["standout"] is not None else "-"
    return (f"{label:10} {f['kind']:4} share {f['share'] or 0:.2f} kw {f['bm25']:.2f} "
            f"cos {f['cos'] or 0:.3f} rise {rise} z {z} {'answered' if answered else 'empty   '} "
            f"{','.join(f['words'])[:28]:28} | {query[:64]}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default="tune")
    ap.add_argument("--scifact", type=Path)
    ap.add_argument("--scifact-db", type=Path)
    ap.add_argument("--scifact-split", default="train")
    args = ap.parse_args()
    s = ae.load_set("agent")
    now = datetime.fromisoformat(s.meta["now"])
    agent: list[tuple[str, bool, dict[str, Any]]] = []  # (kind, answered, features)
    for store in s.stores:
        db, _ = ae.build_store(s, store)
        with cortex.open(db) as engine:
            for q, opts in agent_queries(s, store, args.split, now):
                f = features(engine, q["query"], opts)
                if f is None:
                    continue
                answered = bool(len(engine.search(q["query"], opts)))
                agent.append((q["kind"], answered, f))
                print(row(q["kind"], q["query"], answered, f))
    claims: list[tuple[float, dict[str, Any]]] = []  # (nDCG@10, features)
    total = 0
    if args.scifact is not None and args.scifact_db is not None:
        data = ev.load_beir(args.scifact, args.scifact_split)
        total = len(data.queries)
        with cortex.open(args.scifact_db) as engine:
            ids = ev._doc_ids(engine)
            for qid, text, opts, f in scifact_claims(engine, data):
                ranked = [ids[r.memory.id] for r in engine.search(text, opts)]
                claims.append((ev.ndcg_at_k(ranked, data.qrels.get(qid, {}), 10), f))
                print(row("scifact", text, bool(ranked), f))
    print("\nrule: a name no memory holds and the best match's cosine rises by >= T without it")
    for t in RISES:

        def fires(f: dict[str, Any], t: float = t) -> bool:
            return f["kind"] == "name" and f["rise"] is not None and f["rise"] >= t

        right = sum(1 for k, a, f in agent if k == "none" and a and fires(f))
        wrong = sum(1 for k, a, f in agent if k != "none" and a and fires(f))
        lost = [n for n, f in claims if fires(f)]
        loss = sum(lost) / max(total, 1)
        print(f"T {t:.3f}: agent none-queries emptied {right}, answerable emptied {wrong}; "
              f"SciFact claims emptied {len(lost)}, nDCG@10 -{loss:.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
