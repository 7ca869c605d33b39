"""How often Results.suggestions corrects a misspelt query, how often it "corrects" a
query that needed none, and what the suggestions cost (cortex.suggest).

Every query of the agent evaluation set (eval/agent, three stores) runs through
Engine.search with the defaults (hybrid) and the set's clock. Counted: misspelling
queries whose first suggestion is a correction; other answerable queries that found at
least three results and still got a correction (false alarms); the time of the
suggestion step alone (the vocabulary read once per database state, then cached).

    python benches/bench_suggest.py
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


def main() -> int:
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
