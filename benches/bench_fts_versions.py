"""FTS5 in Python's SQLite against apsw's newer one, on the same texts (issue 16).

    python benches/bench_fts_versions.py [--size 10000] [--repeat 5]

bench_e2e's corpus (SciFact passages) into one FTS5 table, in transactions of 5,000 rows,
stemmed (cortex's memories_fts) and unstemmed, each SQLite alternating with the other in
the same process; CPU seconds, medians. apsw comes from benches/requirements.txt.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import apsw

from bench_e2e import DEFAULT_DATA, corpus

TOKENIZERS = ("porter unicode61 remove_diacritics 2", "unicode61 remove_diacritics 2")


def build(kind: str, tokenizer: str, rows: list[tuple[int, str]], folder: Path) -> float:
    path = folder / f"{kind}.db"
    for f in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        f.unlink(missing_ok=True)
    conn = (
        sqlite3.connect(path, isolation_level=None)
        if kind == "sqlite3"
        else apsw.Connection(str(path))
    )
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"CREATE VIRTUAL TABLE f USING fts5(content, tokenize='{tokenizer}')")
    started = time.process_time()
    for start in range(0, len(rows), 5000):
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO f(rowid, content) VALUES (?, ?)", rows[start : start + 5000])
        conn.execute("COMMIT")
    took = time.process_time() - started
    conn.close()
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()
    texts, _ = corpus(args.data, args.size)
    rows = list(enumerate(texts[: args.size], 1))
    out: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeat):
            for kind in ("sqlite3", "apsw") if rep % 2 == 0 else ("apsw", "sqlite3"):
                for tok in TOKENIZERS:
                    out.setdefault((kind, tok), []).append(build(kind, tok, rows, Path(tmp)))
    print(f"sqlite3 {sqlite3.sqlite_version}, apsw {apsw.sqlite_lib_version()},"
          f" load {os.getloadavg()[0]:.1f}")  # fmt: skip
    for (kind, tok), runs in out.items():
        print(f"{kind:8s} {tok:40s} {statistics.median(runs):.3f} CPU-s"
              f" ({', '.join(f'{r:.3f}' for r in runs)})")  # fmt: skip


if __name__ == "__main__":
    main()
