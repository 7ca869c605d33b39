"""How often Results.suggestions corrects a misspelt query, how often it "corrects" a
query that needed none, and what the suggestions cost (cortex.suggest).

Every query of the agent evaluation set (eval/agent, three stores) runs through
Engine.search with the defaults (hybrid) and the set's clock. Counted: misspelling
queries whose first suggestion is a correction; other answerable queries that found at
least three results and still got a correction (false alarms); the time of the
suggestion step alone (the vocabulary read once per database state, then cached).

    python benches/bench_suggest.py
    python benches/bench_suggest.py --scale 100000   # the step's cost at 100,000 memories

With ``--scale N`` it builds instead a keyword-only store of N notes of 20 words drawn
from 5,000 (five projects) and times the suggestion step for 50 queries of two words,
one of them misspelt by a swapped letter pair, in a project filter and without.
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import datetime

import cortex
from cortex.agent_eval import build_store, load_set
from cortex.options import Options
from cortex.suggest import suggest


def at_scale(n: int) -> None:
    import random
    import tempfile
    from pathlib import Path

    rng = random.Random(11)
    vocab = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(5, 10)))
        for _ in range(5000)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "scale.db"
        with cortex.open(db, embedder=None, keyword_index="off") as engine:
            for start in range(0, n, 10_000):
                engine.add_many(
                    {"content": " ".join(rng.choice(vocab) for _ in range(20)),
                     "project": f"p{i % 5}"}
                    for i in range(start, min(n, start + 10_000))
                )  # fmt: skip
            engine.flush()
        with cortex.open(db, embedder=None, keyword_index="off") as engine:
            for project in (None, "p1"):
                opts = Options(mode="keyword", record=False, project=project)
                times: list[float] = []
                fixed = 0
                for q in range(51):
                    a, b = rng.choice(vocab), rng.choice(vocab)
                    wrong = b[:2] + b[3] + b[2] + b[4:]  # "abcdef" -> "abdcef"
                    started = time.perf_counter()
                    got = suggest(engine.store, f"{a} {wrong}", opts, [])
                    if q:  # the first reads the vocabulary once for the database
                        times.append(time.perf_counter() - started)
                    fixed += bool(got and got[0] == f"{a} {b}")
                times.sort()
                print(
                    f"{n} memories, project {project}: suggestion step p50"
                    f" {statistics.median(times) * 1e3:.2f} ms, p90"
                    f" {times[int(0.9 * len(times))] * 1e3:.2f} ms ({fixed}/51 corrected: the"
                    " rest are withheld, their two words meet in no note of the filter)"
                )


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--scale":
        at_scale(int(sys.argv[2]))
        return 0
    evalset = load_set("agent")
    now = datetime.fromisoformat(evalset.meta["now"])
    misspelt = corrected = others = false_alarms = 0
    times: list[float] = []
    for store in evalset.stores:
        db, _ = build_store(evalset, store)
        with cortex.open(db) as engine:
            engine.search("warm up", record=False)
            for q in evalset.queries:
                if str(q["store"]) != store:
                    continue
                opts = Options(**q.get("options", {}), record=False, now=now)
                results = engine.search(q["query"], opts)
                started = time.perf_counter()
                suggest(engine.store, q["query"], opts, results, related=len(results) < 3)
                times.append(time.perf_counter() - started)
                if q["kind"] == "misspelling":
                    misspelt += 1
                    corrected += bool(results.suggestions)
                elif q["kind"] != "none" and len(results) >= 3:
                    others += 1
                    false_alarms += bool(results.suggestions)
    times.sort()
    print(f"misspelt queries corrected: {corrected}/{misspelt}")
    print(f"other queries (>= 3 results) given a correction: {false_alarms}/{others}")
    print(
        f"suggestion step: p50 {statistics.median(times) * 1e3:.2f} ms,"
        f" p90 {times[int(0.9 * len(times))] * 1e3:.2f} ms, max {times[-1] * 1e3:.2f} ms"
        f" ({len(times)} queries)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
