"""CJK keyword-leg latency: this checkout's `keyword.search` beside another version's,
interleaved in one process over a cached agent-set store (BENCHMARKS.md, "Ranking: CJK
tiers weighted by rarity").

    git show main:python/cortex/keyword.py > /tmp/base_keyword.py
    CORTEX_EVAL_CACHE=/tmp/NAME-eval python benches/bench_cjk_keyword.py 3000 /tmp/base_keyword.py

The store is the one `python -m cortex.agent_eval --set agent` cached under
CORTEX_EVAL_CACHE (build it first). Only keyword.py may differ between the two versions.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import statistics
import sys
import time

import cortex
from cortex import keyword as new
from cortex.options import Options

QUERIES = [
    "deploy 手順 nimbus",
    "cert-manager 自動更新",
    "数据库 索引",
    "デプロイ 手順",
    "本周谁值班",
    "PMTiles 格式",
    "自動更新の設定",
]
ROUNDS = 15


def main() -> None:
    size, base_path = sys.argv[1], sys.argv[2]
    spec = importlib.util.spec_from_file_location("base_keyword", base_path)
    assert spec is not None and spec.loader is not None
    base = importlib.util.module_from_spec(spec)
    sys.modules["base_keyword"] = base
    spec.loader.exec_module(base)
    cache = os.environ.get("CORTEX_EVAL_CACHE", "")
    db = glob.glob(os.path.join(cache, f"agent-{size}-*", "cortex.db"))[0]
    opts = Options(mode="keyword")
    times: dict[str, dict[str, list[float]]] = {"base": {}, "new": {}}
    with cortex.open(db) as engine:
        store = engine.store
        for round_ in range(ROUNDS):
            order = [("base", base), ("new", new)]
            for name, module in order if round_ % 2 else order[::-1]:
                for q in QUERIES:
                    started = time.perf_counter()
                    module.search(store, q, opts, 100)
                    times[name].setdefault(q, []).append(time.perf_counter() - started)
    for q in QUERIES:
        b = statistics.median(times["base"][q]) * 1000
        n = statistics.median(times["new"][q]) * 1000
        print(f"{q}: base {b:.2f} ms  this {n:.2f} ms  ratio {n / b:.2f}")


if __name__ == "__main__":
    main()
