"""Start-up cost of the `cortex` command beside Python's own start and bare SQLite.

    python benches/bench_startup.py [--size 10000] [--runs 15] [--data DIR]

Fresh processes, interleaved round-robin so that the load of a shared machine falls on
every case alike; per case the median (and min) of wall seconds and of CPU seconds (user +
system of the child, from wait4). Cases:

- ``python -c pass``: the interpreter's own start (the floor);
- ``cortex --version``;
- ``cortex search`` with ``--mode keyword`` on a store of *size* memories (SciFact
  passages, as in bench_keyword; no vectors): a short query, the default page of results;
- the peer: ``python -c`` opening the same file with ``sqlite3`` and running one bare FTS5
  OR query over its stemmed index (what the issue calls "sqlite3 plus one FTS5 query").

The interpreter is ``sys.executable`` (never a pyenv shim, whose bash wrapper alone costs
more than Python's start). The cortex cases run ``python -m cortex`` (what the console
script runs) with this checkout's ``python/`` first on the path. The store is built once
and kept in a temporary folder for the run. Also prints the ten slowest modules of
``-X importtime`` for the keyword search.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "benches"))

from bench_keyword import DEFAULT_DATA, passages  # noqa: E402


def run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one child process; its output is discarded."""
    start = time.perf_counter()
    pid = os.posix_spawn(
        argv[0],
        argv,
        env,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
        ],
    )
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed with {status}")
    return wall, usage.ru_utime + usage.ru_stime


def build(db: Path, size: int, data: Path) -> None:
    import cortex

    texts = passages(data, size)
    with cortex.open(db, embedder=None) as engine:
        engine.add_many([{"content": t, "project": "bench"} for t in texts])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--query", default="vitamin deficiency")
    shared = Path("/work/shared/data/scifact")
    default = DEFAULT_DATA if DEFAULT_DATA.exists() or not shared.exists() else shared
    ap.add_argument("--data", type=Path, default=default)
    args = ap.parse_args()

    py = sys.executable
    env = dict(os.environ)
    # An installed package has its .pyc files written at install; this machine sets
    # PYTHONDONTWRITEBYTECODE, which would make every start compile every module.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python"), env.get("PYTHONPATH", "")])
    with tempfile.TemporaryDirectory(prefix="cortex-startup-") as tmp:
        db = Path(tmp) / f"k{args.size}.db"
        t0 = time.perf_counter()
        build(db, args.size, args.data)
        print(f"built {args.size:,} memories in {time.perf_counter() - t0:.1f} s")
        terms = " OR ".join(f'"{w}"' for w in args.query.split())
        peer = (
            "import sqlite3,sys\n"
            "c=sqlite3.connect(sys.argv[1])\n"
            "r=c.execute('SELECT rowid FROM memories_fts WHERE memories_fts MATCH ? "
            "ORDER BY rank LIMIT 10',(sys.argv[2],)).fetchall()\n"
            "print(len(r))"
        )
        cases = {
            "python -c pass": [py, "-c", "pass"],
            "cortex --version": [py, "-m", "cortex", "--version"],
            f"cortex search --mode keyword ({args.size:,})": [
                py,
                "-m",
                "cortex",
                "--db",
                str(db),
                "search",
                args.query,
                "--mode",
                "keyword",
            ],
            "sqlite3 + one FTS5 OR query": [py, "-c", peer, str(db), terms],
        }
        for argv in cases.values():  # warm the page cache and the .pyc files
            run(argv, env)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, argv in cases.items():
                times[name].append(run(argv, env))

        print(
            f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}, load {os.getloadavg()[0]:.1f}, "
            f"{args.runs} interleaved runs"
        )
        base_wall = statistics.median(w for w, _ in times["python -c pass"])
        base_cpu = statistics.median(c for _, c in times["python -c pass"])
        print("| case | wall p50 (min) s | CPU p50 (min) s | × python -c pass (wall / CPU) |")
        print("|---|---|---|---|")
        for name, got in times.items():
            walls = [w for w, _ in got]
            cpus = [c for _, c in got]
            wall, cpu = statistics.median(walls), statistics.median(cpus)
            print(
                f"| {name} | {wall:.3f} ({min(walls):.3f}) | {cpu:.3f} ({min(cpus):.3f}) "
                f"| {wall / base_wall:.2f} / {cpu / max(base_cpu, 1e-3):.2f} |"
            )

        import subprocess

        search = cases[f"cortex search --mode keyword ({args.size:,})"]
        done = subprocess.run(
            [search[0], "-X", "importtime", *search[1:]],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        rows = []
        for line in done.stderr.splitlines():
            parts = line.split("|")
            if (
                len(parts) == 3
                and parts[0].startswith("import time:")
                and parts[1].strip()[0].isdigit()
            ):
                rows.append((int(parts[0].split(":")[1]), parts[2].rstrip()))
        total = sum(us for us, _ in rows)
        print(f"\n-X importtime of the keyword search: {total / 1e3:.0f} ms self time in all")
        for us, name in sorted(rows, reverse=True)[:10]:
            print(f"  {us / 1e3:6.1f} ms {name.strip()}")


if __name__ == "__main__":
    main()
