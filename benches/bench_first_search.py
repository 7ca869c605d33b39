"""The first search of a fresh process on a large store, end to end (issue 16, item 4).

    python benches/build_1m.py                      # once: /tmp/big1m/cortex.db, 1M memories
    python benches/bench_first_search.py --db /tmp/big1m/cortex.db [--runs 7] [--cold]

Fresh processes, interleaved round-robin (so a shared machine's load falls on every case
alike), each timed from exec to its exit (wall, and user + system CPU from wait4): the
answer is printed before the process exits, so these bound the time to the answer from
above. The interpreter is ``sys.executable``; the cortex cases run ``python -m cortex``
(what the console script runs) with this checkout's ``python/`` first on the path.
Cases:

- ``python -c pass``: the interpreter's own start (the floor);
- ``cortex search --mode keyword``: the CLI, keyword only (policy "saved": it loads
  ``<db>-index/keywords.bin`` from SAVED_MIN memories);
- ``cortex search``: the CLI's default, hybrid (the model loads for the query vector);
- ``library hybrid`` / ``library keyword``: ``cortex.open(db)`` then one
  ``engine.search(q)`` (default options, and mode keyword), record off;
- ``library keyword, FTS5 alone``: the same with ``keyword_index="off"`` (what the CLI
  answers with when no saved index is there, or below SAVED_MIN).

Page cache: by default warm (every case runs once untimed first, and the files stay
cached between runs; the store is far smaller than this machine's memory). With
``--cold``, before every timed run the store's files (database, WAL, derived folder) and
the model's files are dropped from the page cache with ``posix_fadvise(DONTNEED)`` (those
files only; no global cache drop on a shared machine), so each process reads what it
touches from disk.

Queries: short and long, and with ``--claims N`` the first N SciFact claims, rotating
per run (``--runs`` a multiple of their number asks each as often). The ``FTS5 alone``
CLI cases run the same command with SAVED_MIN out of reach (no saved index is loaded).
The answers of the CLI and the library are compared once (``--json``): same ids for the
keyword cases, same ids for the hybrid ones.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from bench_startup import run  # noqa: E402  (one child process: wall and CPU seconds)

QUERIES = (
    "vitamin deficiency",
    "the effect of vitamin d deficiency on bone density in elderly women",
    "tumor suppressor gene mutations",
)
SCIFACT = Path("/work/shared/data/scifact/queries.jsonl")

#: The CLI with FTS5 alone for keywords (SAVED_MIN out of reach: no saved index loaded).
CLI_FTS5 = """
import sys
from cortex import keyword_index
keyword_index.SAVED_MIN = 1 << 62
from cortex.__main__ import main
sys.exit(main(sys.argv[1:]))
"""

LIBRARY = """
import sys
import cortex
with cortex.open(sys.argv[1], keyword_index=sys.argv[4]) as e:
    r = e.search(sys.argv[2], cortex.Options(mode=sys.argv[3], record=False))
    print(len(r))
"""

LIBRARY_JSON = """
import json, sys
import cortex
with cortex.open(sys.argv[1]) as e:
    r = e.search(sys.argv[2], cortex.Options(mode=sys.argv[3], record=False))
    print(json.dumps([x.memory.id for x in r]))
"""


def store_files(db: Path) -> list[Path]:
    from cortex.model_dir import resolve_model_dir

    out = [p for p in db.parent.glob(db.name + "*") if p.is_file()]
    for part in ("-index", "-vectors"):  # the derived files; the vector files
        folder = db.with_name(f"{db.name}{part}")
        if folder.is_dir():
            out += [p for p in folder.rglob("*") if p.is_file()]
    with contextlib.suppress(OSError):  # no model: nothing of it to drop
        out += [p for p in resolve_model_dir()[0].rglob("*") if p.is_file()]
    return out


def drop(files: list[Path]) -> None:
    """Evict these files' pages from the page cache (dirty pages are written first)."""
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", type=Path, default=Path("/tmp/big1m/cortex.db"))
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--claims", type=int, default=0, help="add this many SciFact claims")
    ap.add_argument("--only", nargs="*", default=None, help="case names to run")
    args = ap.parse_args()
    if not args.db.exists():
        raise SystemExit(f"{args.db} does not exist: build it with benches/build_1m.py")

    sys.path.insert(0, str(ROOT / "python"))
    py = sys.executable
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an install writes .pyc files
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python"), env.get("PYTHONPATH", "")])
    db = str(args.db)
    cli = [py, "-m", "cortex", "--db", db, "search"]
    cli_fts5 = [py, "-c", CLI_FTS5, "--db", db, "search"]
    queries = list(QUERIES)
    if args.claims and SCIFACT.exists():  # SciFact claims: long, their AND often empty
        with SCIFACT.open(encoding="utf-8") as f:
            lines = [line for _, line in zip(range(args.claims), f, strict=False)]
        queries += [json.loads(line)["text"] for line in lines]

    def cases(q: str) -> dict[str, list[str]]:
        return {
            "python -c pass": [py, "-c", "pass"],
            "cortex search --mode keyword": [*cli, q, "--mode", "keyword"],
            "cortex search (hybrid)": [*cli, q],
            "cortex search --mode keyword, FTS5 alone": [*cli_fts5, q, "--mode", "keyword"],
            "cortex search (hybrid), FTS5 alone": [*cli_fts5, q],
            "library keyword": [py, "-c", LIBRARY, db, q, "keyword", "auto"],
            "library hybrid": [py, "-c", LIBRARY, db, q, "hybrid", "auto"],
            "library keyword, FTS5 alone": [py, "-c", LIBRARY, db, q, "keyword", "off"],
        }

    names = [n for n in cases("") if args.only is None or n in args.only]
    files = store_files(args.db) if args.cold else []
    for name in names:  # warm the .pyc files (and the page cache, unless --cold)
        run(cases(QUERIES[0])[name], env)
    times: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    for i in range(args.runs):
        q = queries[i % len(queries)]
        for name in names:
            if files:
                drop(files)
            times[name].append(run(cases(q)[name], env))

    # The answers: the CLI's against the library's, once, warm.
    agree: dict[str, bool] = {}
    index_used: dict[str, bool] = {}
    for mode in ("keyword", "hybrid"):
        got = subprocess.run(
            [*cli, QUERIES[1], "--mode", mode, "--json", "--verbose"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        ids_cli = [r["memory"]["id"] for r in json.loads(got.stdout)["results"]]
        lib = subprocess.run(
            [py, "-c", LIBRARY_JSON, db, QUERIES[1], mode],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        agree[mode] = ids_cli == json.loads(lib.stdout) and len(ids_cli) > 0
        index_used[mode] = "in-memory index" in got.stderr  # the saved file answered

    size = sum(p.stat().st_size for p in args.db.parent.glob(args.db.name + "*") if p.is_file())
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, load {os.getloadavg()[0]:.1f} at the end, "
        f"{args.runs} interleaved runs, page cache {'COLD (fadvise)' if args.cold else 'warm'}"
        f", store {size / 1e9:.2f} GB + derived folder"
    )
    print(f"CLI and library answer alike: {agree}; the CLI used the saved index: {index_used}")
    print("| case | wall p50 (max) s | CPU p50 (max) s |")
    print("|---|---|---|")
    for name, got in times.items():
        walls = [w for w, _ in got]
        cpus = [c for _, c in got]
        print(
            f"| {name} | {statistics.median(walls):.3f} ({max(walls):.3f}) "
            f"| {statistics.median(cpus):.3f} ({max(cpus):.3f}) |"
        )


if __name__ == "__main__":
    main()
