"""Cost of a spelling correction's vocabulary read in a fresh process (issue 16: a
fresh process's first search at 1M; cortex.suggest reads the store's words).

    python benches/bench_vocab.py --db /tmp/big1m/cortex.db --words protien receptr

Opens the store read-only, without the model or the in-memory keyword index, and times
`suggest.corrections` for the given misspelt words: CPU and wall seconds, and the
corrections found. Run it against two checkouts (PYTHONPATH) to compare them.
"""

from __future__ import annotations

import argparse
import time

import cortex
from cortex import suggest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--words", nargs="+", default=["protien", "receptr"])
    args = ap.parse_args()
    engine = cortex.open(args.db, embedder=None, keyword_index="off", read_only=True)
    try:
        opts = cortex.Options(mode="keyword", limit=1, record=False)
        cpu, wall = time.process_time(), time.perf_counter()
        fixed = suggest.corrections(engine.store, args.words, opts)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        engine.close()
    print(f"corrections {fixed}  cpu {cpu:.3f} s  wall {wall:.3f} s")


if __name__ == "__main__":
    main()
