"""Tokens an agent reads per search result: the full record against the lean answer.

Runs every query of the agent evaluation set (eval/agent) against its stores, through
the API, and measures the text content of the memory_search answer in both shapes:

- before: ``json.dumps(Results.to_dict())`` (the answer memory_search gave until issue 12,
  item 9; the structured content carried the same again);
- after: ``compact_json(lean_search(results))`` (the default answer now; ``verbose`` gives
  the record above).

Tokens are characters / 4 (cortex.agent.estimate_tokens) and, as a second opinion, the
pieces of cl100k's pre-tokenizer pattern (a lower bound of its token count: BPE never
merges across pieces). Per result = the answer's tokens / the results it holds.

    python benches/bench_agent.py            # store 300, hybrid, limit 10
    python benches/bench_agent.py --store 3000 --limit 20
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from datetime import datetime
from typing import Any

import cortex
from cortex.agent import compact_json, estimate_tokens, lean_search
from cortex.agent_eval import build_store, load_set

#: cl100k_base's pre-tokenizer (without the possessive quantifiers Python's re lacks).
CL100K_PIECES = re.compile(
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\w]?[^\W\d_]+|\d{1,3}| ?[^\s\w]+[\r\n]*"""
    r"""|\s*[\r\n]|\s+(?!\S)|\s+"""
)


def pieces(text: str) -> int:
    return len(CL100K_PIECES.findall(text))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="300")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--mode", default="hybrid")
    args = parser.parse_args(argv)
    evalset = load_set("agent")
    db, _ = build_store(evalset, args.store)
    now = datetime.fromisoformat(evalset.meta["now"])
    before_chars: list[float] = []
    after_chars: list[float] = []
    before_pieces: list[float] = []
    after_pieces: list[float] = []
    content_chars: list[float] = []
    with cortex.open(db) as engine:
        for q in evalset.queries:
            if str(q["store"]) != args.store:
                continue
            results = engine.search(
                q["query"],
                **{**q.get("options", {}), "limit": args.limit, "mode": args.mode},
                record=False,
                now=now,
            )
            if not results:
                continue
            n = len(results)
            full = json.dumps(results.to_dict(), ensure_ascii=False)
            lean = compact_json(lean_search(results))
            before_chars.append(estimate_tokens(full) / n)
            after_chars.append(estimate_tokens(lean) / n)
            before_pieces.append(pieces(full) / n)
            after_pieces.append(pieces(lean) / n)
            content_chars.append(sum(estimate_tokens(r.memory.content) for r in results) / n)
    if not before_chars:
        print("no query returned results", file=sys.stderr)
        return 1
    b, a = statistics.mean(before_chars), statistics.mean(after_chars)
    bp, ap = statistics.mean(before_pieces), statistics.mean(after_pieces)
    print(f"agent set, store {args.store}, mode {args.mode}, limit {args.limit}: "
          f"{len(before_chars)} answers with results")  # fmt: skip
    print(f"memory text alone        {statistics.mean(content_chars):7.1f} tokens/result")
    print(f"full record (before)     {b:7.1f} tokens/result (chars/4), {bp:7.1f} (cl100k pieces)")
    print(f"lean answer (after)      {a:7.1f} tokens/result (chars/4), {ap:7.1f} (cl100k pieces)")
    print(f"ratio                    {b / a:7.2f}x (chars/4), {bp / ap:7.2f}x (cl100k pieces)")
    latency(db, evalset, args.store, now)
    return 0


def latency(db: Any, evalset: Any, store: str, now: datetime) -> None:
    """p50 of Engine.search, Engine.context (detailed, 2000 tokens) and Engine.similar
    (k 10, anchored on each query's first result) over the store's queries; search and
    context each in a freshly opened engine (a repeated query would hit the query
    embedding cache)."""
    queries = [q for q in evalset.queries if str(q["store"]) == store]
    timed: dict[str, list[float]] = {"search": [], "context": [], "similar": []}
    anchors: list[int] = []
    for call in ("search", "context"):
        with cortex.open(db) as engine:
            engine.search("warm up", record=False)
            for q in queries:
                opts = {**q.get("options", {}), "record": False, "now": now}
                started = time.perf_counter()
                if call == "search":
                    results = engine.search(q["query"], **opts)
                    timed[call].append(time.perf_counter() - started)
                    anchors += [results[0].memory.id] if results else []
                else:
                    engine.context(q["query"], **opts)
                    timed[call].append(time.perf_counter() - started)
    with cortex.open(db) as engine:
        engine.similar(anchors[0], 10)
        for anchor in anchors:
            started = time.perf_counter()
            engine.similar(anchor, 10)
            timed["similar"].append(time.perf_counter() - started)
    for name, times in timed.items():
        times.sort()
        p50, p90 = statistics.median(times) * 1e3, times[int(0.9 * len(times))] * 1e3
        print(f"{name:8} p50 {p50:6.1f} ms, p90 {p90:6.1f} ms ({len(times)} calls)")


if __name__ == "__main__":
    sys.exit(main())
