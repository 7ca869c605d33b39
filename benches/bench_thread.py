"""Cost of Options(thread=True): each result's session thread at 100,000 memories.

Builds (keyword only, no model) a store of `--memories` notes in sessions of `--turns`
turns over five projects, then times the thread expansion of 10 results the way the
pipeline does it (Store.session_thread and the budget), for random memories: p50 over
`--rounds` rounds of 10. Prints the time of one round (10 results).

    python benches/bench_thread.py                 # 100,000 memories, sessions of 50
    python benches/bench_thread.py --turns 500     # long conversations
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cortex


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args(argv)
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "thread.db"
        with cortex.open(db, embedder=None, keyword_index="off") as engine:
            batch: list[dict[str, object]] = []
            for i in range(args.memories):
                batch.append({
                    "content": f"turn {i % args.turns} of session {i // args.turns}: "
                               + " ".join(f"w{rng.randrange(5000)}" for _ in range(20)),
                    "project": f"p{(i // args.turns) % 5}",
                    "session": f"s{i // args.turns}",
                    "created_at": 1.7e9 + i * 60.0,
                })  # fmt: skip
                if len(batch) == 10_000:
                    engine.add_many(batch)
                    batch = []
            if batch:
                engine.add_many(batch)
            engine.flush()
        with cortex.open(db, embedder=None, keyword_index="off") as engine:
            pipeline = engine._pipeline
            ids = [rng.randrange(1, args.memories + 1) for _ in range(10 * args.rounds)]
            memories = engine.store.get_many(ids)
            rounds: list[float] = []
            turns = 0
            for r in range(args.rounds):
                part = [memories[i] for i in ids[r * 10 : (r + 1) * 10]]
                started = time.perf_counter()
                threads = [pipeline._thread(m, 500) for m in part]
                rounds.append(time.perf_counter() - started)
                turns += sum(len(t) for t in threads)
    print(
        f"{args.memories} memories, sessions of {args.turns}: thread of 10 results"
        f" p50 {statistics.median(rounds) * 1e3:.2f} ms, max {max(rounds) * 1e3:.2f} ms"
        f" ({turns / (10 * args.rounds):.1f} turns a result within 500 tokens)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
