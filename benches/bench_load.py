"""Load: N searcher processes search one database while a writer process adds and imports.

Reports the searches/s the searchers held under the write load, every error any caller
saw (must be 0: no "database is locked", nothing else), and whether every write the
writer had acknowledged is searchable afterwards (keyword search by a unique token).

    python benches/bench_load.py                      # 60 s, 1 and 3 searchers
    python benches/bench_load.py --seconds 10 --searchers 3 --json

Each role is this script run again (``--role writer|searcher``), so the processes share
nothing but the database file, as separate agents would. Each searcher prints a ready line
once its model is loaded; the writer starts when all are ready and prints one JSON line per
acknowledged write (after ``add_many`` / ``import_path`` returned) on stdout; when it is
done the harness creates a stop file, and the searchers print their counts and errors.
The writer runs for ``--seconds`` or, with ``--writes N``, for exactly N writes:
``tests/test_load.py`` runs a short version of that kind in CI, so nothing it asserts
depends on how fast the machine is.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.words
from tests.words import OPS_WORDS, SEARCH_WORDS

WORDS = [
    *OPS_WORDS,
    *SEARCH_WORDS,
    "snapshot",
    "backup",
    "region",
    "traffic",
    "outage",
    "pager",
    "alert",
]
PROJECTS = ["hydra", "atlas", "orion"]
SEED_MEMORIES = 200


def _token(kind: str, n: int) -> str:
    """A word that occurs in exactly one memory (FTS5 keeps it whole: letters + digits)."""
    return f"{kind}{n:06d}zq"


def _text(rng: random.Random, token: str) -> str:
    return f"{' '.join(rng.sample(WORDS, 8))} {token}"


# ------------------------------------------------------------------------------ roles


def writer(db: str, seconds: float, seed: int, notes: str, writes: int = 0) -> int:
    """Add batches and import Markdown files until `seconds` pass (or, with `writes` > 0,
    exactly `writes` times); one JSON line per acknowledged write:
    {"ids": [...], "tokens": [...]} (ids null for an import)."""
    import cortex

    rng = random.Random(seed)
    out = sys.stdout
    n = 0
    with cortex.open(db) as engine:
        deadline = time.monotonic() + seconds
        batch = 0
        while batch < writes if writes > 0 else time.monotonic() < deadline:
            batch += 1
            tokens = [_token("w", n + i) for i in range(6)]
            n += len(tokens)
            try:
                if batch % 3 == 0:  # an import: one Markdown file, one section a memory
                    path = Path(notes) / f"note-{batch:05d}.md"
                    path.write_text("".join(f"## Note {t}\n\n{_text(rng, t)}\n\n" for t in tokens))
                    report = engine.import_path(path, project=rng.choice(PROJECTS))
                    if report.errors:
                        raise RuntimeError(f"import failed: {report.errors}")
                    ids = None
                else:
                    ids = engine.add_many(
                        {"content": _text(rng, t), "project": rng.choice(PROJECTS)} for t in tokens
                    )
            except Exception as exc:  # every error a caller sees is reported, none hidden
                out.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
            else:
                out.write(json.dumps({"ids": ids, "tokens": tokens}) + "\n")
            out.flush()
    return 0


def searcher(db: str, stop: str, seed: int, min_searches: int = 0) -> int:
    """Print a ready line once the model is loaded, then search in every mode until the
    file `stop` exists (and at least `min_searches` times); print {"searches", "errors",
    ...}."""
    import cortex

    rng = random.Random(seed)
    modes = ["keyword", "hybrid", "semantic"]
    searches = found = 0
    errors: list[str] = []
    with cortex.open(db) as engine:
        engine.search("warm up", mode="semantic", record=False)  # load the model first
        print(json.dumps({"ready": True}), flush=True)
        start = time.monotonic()
        while searches < min_searches or not os.path.exists(stop):
            query = " ".join(rng.sample(WORDS, rng.randint(1, 3)))
            options: dict[str, Any] = {"mode": modes[searches % 3], "limit": 10}
            if rng.random() < 0.5:
                options["project"] = rng.choice(PROJECTS)
            if rng.random() < 0.2:
                query = f"{rng.choice(WORDS)[:4]}*"
            try:
                # record=True (the default): searchers write recall rows too, so several
                # processes contend for the write lock, as agents recalling at once do.
                found += bool(engine.search(query, **options))
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            searches += 1
        elapsed = time.monotonic() - start
    report = {"searches": searches, "seconds": elapsed, "found": found, "errors": errors}
    print(json.dumps(report))
    return 0


# ------------------------------------------------------------------------------ harness


@dataclass
class Report:
    searchers: int
    seconds: float
    searches: int = 0
    searches_each: list[int] = field(default_factory=list)  # per searcher process
    found_each: list[int] = field(default_factory=list)  # searches with a result
    searches_per_s: float = 0.0
    writes: int = 0  # acknowledged write calls
    memories_written: int = 0
    lost: list[str] = field(default_factory=list)  # acknowledged, not found afterwards
    errors: list[str] = field(default_factory=list)
    acked: list[dict[str, Any]] = field(default_factory=list)


def _seed(db: Path) -> None:
    import cortex

    rng = random.Random(1)
    with cortex.open(db) as engine:
        engine.add_many(
            {"content": _text(rng, _token("s", i)), "project": PROJECTS[i % 3]}
            for i in range(SEED_MEMORIES)
        )


def _spawn(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "CORTEX_NO_PROGRESS": "1", "CORTEX_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, __file__, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def run(
    db: Path,
    searchers: int,
    seconds: float,
    *,
    writes: int = 0,
    min_searches: int = 0,
    verify: bool = True,
) -> Report:
    """Seed `db`, run one writer (for `seconds`, or exactly `writes` writes) while
    `searchers` searchers search (each at least `min_searches` times), then check that
    every acknowledged write is found."""
    report = Report(searchers=searchers, seconds=seconds)
    if not db.exists():
        _seed(db)
    notes = Path(tempfile.mkdtemp(prefix="cortex-load-notes-"))
    stop = notes / "stop"
    procs = [_spawn("--role", "searcher", "--db", str(db), "--stop", str(stop),
                    "--min-searches", str(min_searches), "--seed", str(100 + i))
             for i in range(searchers)]  # fmt: skip
    for proc in procs:  # the writes begin once every searcher has its model loaded
        assert proc.stdout is not None
        proc.stdout.readline()  # "" if it died: its exit code is reported below
    write = _spawn("--role", "writer", "--db", str(db), "--seconds", str(seconds),
                   "--writes", str(writes), "--seed", "7", "--notes", str(notes))  # fmt: skip
    limit = seconds + 600  # a guard against a hang only: nothing here is a speed check
    try:
        out, err = write.communicate(timeout=limit)
    finally:
        stop.touch()
    if write.returncode != 0 or err.strip():
        report.errors.append(f"writer exit {write.returncode}: {err.strip()[-2000:]}")
    for line in out.splitlines():
        record = json.loads(line)
        if "error" in record:
            report.errors.append(f"writer: {record['error']}")
        else:
            report.writes += 1
            report.memories_written += len(record["tokens"])
            report.acked.append(record)
    for n, proc in enumerate(procs):
        out, err = proc.communicate(timeout=limit)
        if proc.returncode != 0 or err.strip():
            report.errors.append(f"searcher {n} exit {proc.returncode}: {err.strip()[-2000:]}")
            continue
        result = json.loads(out.strip().splitlines()[-1])
        report.searches += result["searches"]
        report.searches_each.append(result["searches"])
        report.found_each.append(result["found"])
        report.searches_per_s += result["searches"] / result["seconds"]
        report.errors.extend(f"searcher {n}: {e}" for e in result["errors"])
    if verify:
        report.lost = find_lost(db, report.acked)
    return report


def find_lost(db: Path, acked: list[dict[str, Any]]) -> list[str]:
    """Acknowledged writes that a keyword search for their token does not find (exactly
    once, with the acknowledged id when the writer got one)."""
    import cortex

    lost = []
    with cortex.open(db, embedder=None) as engine:
        for record in acked:
            ids = record["ids"] or [None] * len(record["tokens"])
            for memory_id, token in zip(ids, record["tokens"], strict=True):
                hits = engine.search(token, mode="keyword", record=False, min_confidence=0.0)
                got = [r.memory.id for r in hits if token in r.memory.content]
                if len(got) != 1 or (memory_id is not None and got != [memory_id]):
                    lost.append(f"{token} (acknowledged id {memory_id}, found {got})")
    return lost


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=["harness", "writer", "searcher"], default="harness")
    parser.add_argument("--db")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--writes", type=int, default=0, help="exactly this many writes")
    parser.add_argument("--min-searches", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--notes")
    parser.add_argument("--stop")
    parser.add_argument("--searchers", default="1,3", help="comma-separated process counts")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.role == "writer":
        return writer(args.db, args.seconds, args.seed, args.notes, args.writes)
    if args.role == "searcher":
        return searcher(args.db, args.stop, args.seed, args.min_searches)
    reports = []
    for n in (int(x) for x in args.searchers.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(args.db or Path(tmp) / "load.db")
            reports.append(run(db, n, args.seconds, writes=args.writes))
    if args.json:
        print(json.dumps([{**asdict(r), "acked": len(r.acked)} for r in reports], indent=2))
    else:
        print(f"# {_machine()}; {args.seconds:.0f} s per row; one writer process in every row")
        print(f"{'searchers':>9} {'searches':>9} {'searches/s':>11} {'writes':>7} "
              f"{'memories':>9} {'lost':>5} {'errors':>7}")  # fmt: skip
        for r in reports:
            print(f"{r.searchers:>9} {r.searches:>9} {r.searches_per_s:>11.1f} {r.writes:>7} "
                  f"{r.memories_written:>9} {len(r.lost):>5} {len(r.errors):>7}")  # fmt: skip
        for r in reports:
            for line in r.errors[:10] + r.lost[:10]:
                print(f"  {r.searchers} searchers: {line}")
    return 1 if any(r.errors or r.lost for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
