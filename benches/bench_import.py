"""Import of the whole SciFact corpus (5,183 abstracts) through `cortex import`, with and
without embeddings: total time, documents/s and peak memory of the importing process.

    python benches/bench_import.py [--data ../shared/data/scifact]

The corpus is written as a JSONL file (title, blank line, text) into a temporary folder
(never into the repository) and imported by the real `cortex` command in a subprocess, so
the peak RSS is that of the import alone. "keyword only" points CORTEX_MODEL_DIR at an
empty folder: the same import without a model (memories found by keyword until
`cortex reindex`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"


def run(jsonl: Path, db: Path, env: dict[str, str]) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of one `cortex import` in a child process."""
    exe = shutil.which("cortex") or sys.executable
    cmd = [exe] if exe.endswith("cortex") else [exe, "-m", "cortex.cli"]
    # A fresh interpreter per run measures the import alone: RUSAGE_CHILDREN holds the
    # largest child seen so far, so each run goes through its own measuring parent.
    probe = (
        "import resource, subprocess, sys, time, json\n"
        "t = time.perf_counter()\n"
        "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
        "dt = time.perf_counter() - t\n"
        "print(json.dumps([dt, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, *cmd, "--db", str(db), "import", str(jsonl)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    seconds, rss_kb = json.loads(out.stdout.strip().splitlines()[-1])
    return seconds, rss_kb / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        jsonl = Path(tmp) / "scifact.jsonl"
        docs = 0
        with (args.data / "corpus.jsonl").open(encoding="utf-8") as src, jsonl.open("w") as dst:
            for line in src:
                d = json.loads(line)
                content = f"{d.get('title', '')}\n\n{d.get('text', '')}".strip()
                dst.write(json.dumps({"content": content, "metadata": {"doc_id": d["_id"]}}))
                dst.write("\n")
                docs += 1
        env = {**os.environ, "CORTEX_NO_PROGRESS": "1"}
        rows = []
        for label, extra in (
            ("keyword only (no model)", {"CORTEX_MODEL_DIR": str(Path(tmp) / "none")}),
            ("with embeddings", {}),
        ):
            db = Path(tmp) / f"{len(rows)}.db"
            seconds, rss = run(jsonl, db, {**env, **extra})
            size = sum(  # the database, its -wal, and every file of its -index folder
                f.stat().st_size
                for p in Path(tmp).glob(f"{db.name}*")
                for f in ([p] if p.is_file() else p.rglob("*"))
                if f.is_file()
            )
            rows.append((label, seconds, docs / seconds, rss, size / 1e6))
            print(json.dumps(rows[-1]), flush=True)
    print(f"\n{docs} documents; {platform.machine()}, {os.cpu_count()} cores")
    print("| import | total | docs/s | peak RSS | database + index |")
    print("|---|---|---|---|---|")
    for label, seconds, rate, rss, size in rows:
        print(f"| {label} | {seconds:.1f} s | {rate:.1f} | {rss:.0f} MB | {size:.1f} MB |")


if __name__ == "__main__":
    main()
