"""Issue 13's soak: 8 processes against one PostgreSQL database for `--seconds`.

4 searchers (keyword, semantic, hybrid, and one cycling through the three modes), 2
writers (`add` one at a time and `add_many` in batches of 10, every acknowledged id
logged), 1 importer (a folder of Markdown and JSONL, one file rewritten before each
import so every pass changes something) and 1 process running `reindex()` in a loop.
Every process opens its own Engine on the URL with the real default embedder (query and
memory texts are embedded as in production: no precomputed vectors).

The searchers and writers work in project "soak" (seeded with `--seed` memories first),
the importer in project "imports": the importer replaces and removes its own chunks, and
a removed memory takes its recall log rows with it, so the recall check would otherwise
not be exact by construction.

Afterwards: errors (must be 0), acknowledged ids missing (must be 0), and the recall
counts: recall_log rows and the sum of access_count must both equal the number of
results the searchers recorded.

    python benches/bench_pg_soak.py [--seconds 60] [--seed 1000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORDS = (  # noqa: SIM905 - one string reads better than 42 quoted words
    "deploy database migration index latency cache queue worker retry timeout config "
    "schema backup restore replica vector keyword search memory session project token "
    "release rollback alert metric dashboard incident review budget design meeting "
    "customer invoice report python rust postgres sqlite kubernetes docker network"
).split()


def text(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)) + f" note {rng.randrange(10**9)}"


def worker(
    role: str, url: str, folder: str, start: float, deadline: float, out: str, seed: int
) -> None:
    import cortex

    rng = random.Random(seed)
    report: dict[str, Any] = {"role": role, "ops": 0, "errors": [], "ids": [], "results": 0}
    modes = ["keyword", "semantic", "hybrid"]
    try:
        engine = cortex.open(url)
    except Exception:  # reported, counted as an error
        report["errors"].append(traceback.format_exc(limit=3))
        Path(out).write_text(json.dumps(report))
        return
    engine.model_id  # load the model before the clock matters  # noqa: B018
    time.sleep(max(0.0, start - time.time()))
    step = 0
    while time.time() < deadline:
        step += 1
        try:
            if role.startswith("search"):
                mode = modes[step % 3] if role == "search-mixed" else role.split("-")[1]
                query = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
                found = engine.search(query, mode=mode, project="soak", limit=10)
                report["results"] += len(found)
            elif role == "add":
                report["ids"].append(engine.add(text(rng), project="soak"))
            elif role == "add_many":
                records = [{"content": text(rng), "project": "soak"} for _ in range(10)]
                report["ids"].extend(engine.add_many(records))
            elif role == "import":
                k = step % 4
                if k < 3:
                    body = "\n\n".join(f"## {text(rng, 3)}\n\n{text(rng, 30)}" for _ in range(4))
                    (Path(folder) / f"notes{k}.md").write_text(f"# Notes {k}\n\n{body}\n")
                else:
                    lines = (json.dumps({"content": text(rng, 20)}) for _ in range(5))
                    (Path(folder) / "log.jsonl").write_text("\n".join(lines) + "\n")
                engine.import_path(folder, project="imports")
            elif role == "reindex":
                engine.reindex()
            report["ops"] += 1
        except Exception:  # every failure is reported
            report["errors"].append(traceback.format_exc(limit=3))
    try:
        engine.close()  # writes every recorded search first
    except Exception:
        report["errors"].append(traceback.format_exc(limit=3))
    Path(out).write_text(json.dumps(report))


ROLES = [
    "search-keyword",
    "search-semantic",
    "search-hybrid",
    "search-mixed",
    "add",
    "add_many",
    "import",
    "reindex",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=1000, help="memories in project soak first")
    args = ap.parse_args()

    import psycopg
    from tests.pg_server import running_server

    import cortex

    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp, running_server() as server:
        url = server.create_database("soak")
        folder = Path(tmp) / "import"
        folder.mkdir()
        t = time.perf_counter()
        with cortex.open(url) as engine:
            seeded = engine.add_many(
                [{"content": text(rng), "project": "soak"} for _ in range(args.seed)]
            )
            engine.flush()
        print(f"seeded {len(seeded)} memories in {time.perf_counter() - t:.1f} s")
        ctx = mp.get_context("spawn")
        start = time.time() + 20  # model loads happen before the window
        deadline = start + args.seconds
        procs = []
        for i, role in enumerate(ROLES):
            out = str(Path(tmp) / f"{role}.json")
            args_ = (role, url, str(folder), start, deadline, out, i + 1)
            p = ctx.Process(target=worker, args=args_)
            p.start()
            procs.append((role, p, out))
        for _, p, _ in procs:
            p.join()
        reports = []
        for role, p, out in procs:
            if not Path(out).exists():
                reports.append({"role": role, "ops": 0, "errors": [f"exit {p.exitcode}"],
                                "ids": [], "results": 0})  # fmt: skip
            else:
                reports.append(json.loads(Path(out).read_text()))
        acknowledged = [i for r in reports for i in r["ids"]]
        recorded = sum(r["results"] for r in reports)
        with psycopg.connect(url) as conn:
            present = conn.execute(
                "SELECT count(*) FROM memories WHERE id = ANY(%s) AND deleted_at IS NULL",
                (acknowledged,),
            ).fetchone()[0]
            log_rows = conn.execute("SELECT count(*) FROM recall_log").fetchone()[0]
            accesses = conn.execute(
                "SELECT coalesce(sum(access_count), 0) FROM memories"
            ).fetchone()[0]
            total = conn.execute(
                "SELECT count(*) FROM memories WHERE deleted_at IS NULL"
            ).fetchone()[0]
        errors = [e for r in reports for e in r["errors"]]
        # Ops started before the deadline count; the window is from the common start.
        secs = args.seconds
        searches = sum(r["ops"] for r in reports if r["role"].startswith("search"))
        writes = len(acknowledged)
        print(f"window {secs:.0f} s, {total} live memories at the end")
        print("| role | operations | per second |")
        print("| --- | --- | --- |")
        for r in reports:
            print(f"| {r['role']} | {r['ops']} | {r['ops'] / secs:.1f} |")
        print(f"searches/s {searches / secs:.1f}; acknowledged writes {writes}"
              f" ({writes / secs:.1f}/s)")  # fmt: skip
        print(f"errors: {len(errors)}")
        for e in errors[:5]:
            print(e)
        print(f"acknowledged writes missing: {len(acknowledged) - present}")
        print(f"recorded results {recorded}; recall_log rows {log_rows};"
              f" sum(access_count) {accesses}: "
              + ("exact" if recorded == log_rows == accesses else "NOT EXACT"))  # fmt: skip


if __name__ == "__main__":
    main()
