"""The floor of cortex's ingest design beside the recipe (BENCHMARKS.md, "Ingest: the floor
of the design (issue 16; 2026-11-27)").

    pip install --target /tmp/sqlfloor-pkgs sqlean.py pysqlite3-binary   # newer SQLites
    python benches/bench_ingest_floor.py prepare --out /tmp/sqlfloor-trees
    python benches/bench_ingest_floor.py run --trees /tmp/sqlfloor-trees --sizes 10000 100000
    python benches/bench_ingest_floor.py report --json /tmp/sqlfloor-run.json  # again
    python benches/bench_ingest_floor.py bind --size 100000                    # drivers

Issue 16's ingest target: supplied vectors stored at >= 1.0x the CPU rate of the recipe
(FTS5 + sqlite-vec through apsw, `bench_e2e.py ingest-child`). `run` measures, in one
interleaved run (a fresh process per build, the systems' order rotated every round and
reversed every other one, `--repeat` rounds, CPU seconds of each child, medians):

- `cortex`: `bench_e2e.py ingest-child --system cortex` on the copy of this checkout's
  package that `prepare` made (byte-compiled: the environment sets PYTHONDONTWRITEBYTECODE).
- `notwin`: the same with one line removed from `Store._insert_bulk` (a throwaway patch
  `prepare` applies to a second copy, never to the library): the bulk write's inserts into
  `memories_exact`, the unstemmed twin. What skipping the twin would save, CPU and bytes.
- `recipe`: `bench_e2e.py ingest-child --system fts5+sqlite-vec`, the target's yardstick.
- `floor:DRIVER`: what cortex's design cannot drop, and nothing else: the `memories`
  table with its 7 indexes (as a new cortex file has them), ONE external-content FTS5
  index with cortex's stemmed tokenizer, and per 5,000 memories one transaction that
  inserts the index rows, reads their token counts back (FTS5's docsize, as cortex does),
  inserts the rows (SHA-256 of each content, its CJK flag), appends the vectors to a
  vector file through cortex's extension (loaded alone, without the package's Python; the
  file held open across the transactions, where cortex opens it in each) and syncs it,
  then commits; at the end a WAL checkpoint. Cortex's connection PRAGMAs. No
  change log, totals, code references, embeddings rows, validation or file checks.
- `fts:DRIVER`: the recipe's SQLite part without its vectors (the `docs` rows and the FTS5
  index, `porter unicode61`, one transaction a 5,000), to set each SQLite beside apsw's.

DRIVER is the sqlite3 module's API from `stdlib` (Python's own SQLite), `sqlean`
(sqlean.py) or `pysqlite3` (pysqlite3-binary), or `apsw` (the recipe's driver and SQLite);
each child reports its SQLite version and the CPU of each part. Then `--queries` keyword
queries (SciFact's test claims, every word quoted and OR-ed, BM25 order, 40 rows, as the
recipe asks its FTS5) on a 10k floor store, once to warm up and once timed, each driver in
its own process, `--repeat` rounds alternating: p50 of the per-query wall time.

`bind` sets the drivers' cost of binding values apart: rows of 17 values like the floor's
into a table without indexes, rows of one value, and the 17-value rows sent as JSON arrays.
`floor --pragma NAME=VALUE` adds a PRAGMA to one floor child (`secure_delete=OFF` was
tried: Debian's SQLite is built with SECURE_DELETE; no difference). Sizes below SciFact's
5,183 abstracts are refused by bench_e2e.corpus.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = Path("/work/shared/data/scifact")
PKGS = Path("/tmp/sqlfloor-pkgs")
DRIVERS = ("stdlib", "sqlean", "pysqlite3", "apsw")
BATCH = 5000
# The line of Store._insert_bulk that `notwin` drops (prepare checks it is there once).
TWIN_LINE = (
    '        tx.executemany("INSERT INTO memories_exact(rowid, content) VALUES (?, ?)", texts)\n'
)

# cortex's connection (store.py, Store.__init__)
CORTEX_PRAGMAS = """
PRAGMA busy_timeout = 30000;
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
PRAGMA journal_size_limit = 67108864;
PRAGMA foreign_keys = ON;
PRAGMA temp_store = MEMORY;
PRAGMA cache_size = -65536;
PRAGMA mmap_size = 268435456;
"""

# `memories` as a new cortex file has it (store.py: _SCHEMA_V1, then the `tokens` column
# and memories_live_project of _SCHEMA_KEYWORD_TOTALS; memories_hash was dropped by a
# later migration), and memories_fts with STEMMED_TOKENIZER.
FLOOR_DDL = """
CREATE TABLE memories (
    id            INTEGER PRIMARY KEY,
    project_id    TEXT,
    content       TEXT NOT NULL,
    content_hash  TEXT NOT NULL,
    source_path   TEXT,
    chunk_index   INTEGER,
    sector        TEXT,
    tier          TEXT,
    scope         TEXT,
    category      TEXT,
    salience      REAL NOT NULL DEFAULT 0.5,
    confidence    REAL NOT NULL DEFAULT 1.0,
    created_at    REAL NOT NULL,
    updated_at    REAL NOT NULL,
    valid_until   REAL,
    superseded_by INTEGER REFERENCES memories(id),
    deleted_at    REAL,
    last_accessed REAL,
    access_count  INTEGER NOT NULL DEFAULT 0,
    metadata      TEXT NOT NULL DEFAULT '{}',
    has_cjk       INTEGER NOT NULL DEFAULT 0,
    tokens        INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX memories_project_created ON memories(project_id, created_at);
CREATE INDEX memories_created ON memories(created_at);
CREATE INDEX memories_source ON memories(source_path, chunk_index);
CREATE INDEX memories_scope ON memories(scope);
CREATE INDEX memories_category ON memories(category);
CREATE INDEX memories_deleted ON memories(deleted_at) WHERE deleted_at IS NOT NULL;
CREATE INDEX memories_live_project ON memories(project_id)
    WHERE deleted_at IS NULL AND superseded_by IS NULL;
CREATE VIRTUAL TABLE memories_fts USING fts5(
    content, content='memories', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
"""

ROW_SQL = (
    "INSERT INTO memories (id, project_id, content, content_hash, source_path,"
    " chunk_index, sector, tier, scope, category, salience, confidence, created_at,"
    " updated_at, metadata, has_cjk, tokens)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

# the recipe's SQLite part (bench_e2e.FtsVec without vec0)
RECIPE_DDL = """
CREATE TABLE docs(id INTEGER PRIMARY KEY, text TEXT NOT NULL);
CREATE VIRTUAL TABLE fts USING fts5(text, content='docs', content_rowid='id',
    tokenize='porter unicode61');
"""

_CJK = re.compile(  # store._CJK
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\u1100-\u11ff\uf900-\ufaff"
    "\U00020000-\U0002fa1f]"
)
_WORD = re.compile(r"\w+")


# --------------------------------------------------------------------------- drivers


class Db:
    """One connection through `driver`, in autocommit mode (explicit BEGIN/COMMIT), with
    the few calls the children make."""

    def __init__(self, driver: str, path: Path, pkgs: Path) -> None:
        if driver in ("sqlean", "pysqlite3"):
            sys.path.insert(0, str(pkgs))
        if driver == "apsw":
            import apsw

            self.conn: Any = apsw.Connection(str(path))
            self.version = apsw.sqlite_lib_version()
            self.apsw = True
            return
        name = {"stdlib": "sqlite3", "sqlean": "sqlean", "pysqlite3": "pysqlite3.dbapi2"}[driver]
        mod = importlib.import_module(name)
        self.conn = mod.connect(str(path), isolation_level=None)
        self.version = mod.sqlite_version
        self.apsw = False

    def script(self, sql: str) -> None:
        if self.apsw:
            list(self.conn.execute(sql))  # apsw runs every statement of the string
        else:
            self.conn.executescript(sql)

    def rows(self, sql: str, params: Any = ()) -> list[Any]:
        return list(self.conn.execute(sql, params))

    def execute(self, sql: str, params: Any = ()) -> None:
        for _ in self.conn.execute(sql, params):
            pass

    def executemany(self, sql: str, seq: Any) -> None:
        self.conn.executemany(sql, seq)

    def close(self) -> None:
        self.conn.close()


def load_native(path: Path) -> Any:
    """cortex's extension module on its own (the package's __init__ is not run)."""
    loader = importlib.machinery.ExtensionFileLoader("cortex._native", str(path))
    spec = importlib.util.spec_from_file_location("cortex._native", str(path), loader=loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def _varint(blob: bytes) -> int:  # store._varint: FTS5's docsize record
    value = 0
    for n, byte in enumerate(blob[:9]):
        if n == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            break
    return value


class Laps:
    """CPU seconds summed per part: `lap(key)` charges the time since the last lap to
    `key`."""

    def __init__(self) -> None:
        self.part: collections.defaultdict[str, float] = collections.defaultdict(float)
        self.last = self.start = time.process_time()

    def __call__(self, key: str) -> None:
        now = time.process_time()
        if key:
            self.part[key] += now - self.last
        self.last = now


# --------------------------------------------------------------------------- children


def _inputs(args: argparse.Namespace) -> tuple[list[str], Any]:
    sys.path.insert(0, str(HERE))
    import bench_e2e as b

    texts, _ = b.corpus(args.data, max(args.size, 10))
    return texts[: args.size], b.ingest_vectors(args.size, 384)


def floor_child(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    texts, vecs = _inputs(args)
    work = Path(args.workdir) / f"{args.size}-floor-{args.driver}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    w0, lap = time.perf_counter(), Laps()
    db = Db(args.driver, work / "floor.db", args.pkgs)
    native = load_native(args.native)
    lap("import")
    db.script(CORTEX_PRAGMAS + "".join(f"PRAGMA {p};" for p in args.pragma) + FLOOR_DDL)
    writer = native.NativeIndex.create(str(work / "floor.0.vectors"), 384, "floor")
    lap("open")
    for start in range(0, len(texts), BATCH):
        end = min(len(texts), start + BATCH)
        now = time.time()
        db.execute("BEGIN IMMEDIATE")
        first = int(db.rows("SELECT COALESCE(MAX(id), 0) + 1 FROM memories")[0][0])
        ids = range(first, first + end - start)
        index_rows = list(zip(ids, texts[start:end], strict=True))
        lap("python")
        db.executemany("INSERT INTO memories_fts(rowid, content) VALUES (?, ?)", index_rows)
        lap("fts5 stemmed")
        tokens = {
            int(i): _varint(sz)
            for i, sz in db.rows(
                "SELECT id, sz FROM memories_fts_docsize WHERE id BETWEEN ? AND ?",
                (first, first + end - start - 1),
            )
        }
        lap("docsize read")
        rows = [
            (i, None, c, hashlib.sha256(c.encode("utf-8")).hexdigest(), None, None, None,
             None, None, None, 0.5, 1.0, now, now, "{}",
             int(not c.isascii() and _CJK.search(c) is not None), tokens.get(i, 0))
            for i, c in index_rows
        ]  # fmt: skip
        lap("python")
        db.executemany(ROW_SQL, rows)
        lap("memories rows")
        writer.append(np.arange(first, first + end - start, dtype=np.int64), vecs[start:end])
        writer.sync()
        lap("vectors")
        db.execute("COMMIT")
        lap("commit")
    writer.close()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    lap("checkpoint")
    return _row(db.version, lap, time.perf_counter() - w0, work)


def fts_child(args: argparse.Namespace) -> dict[str, Any]:
    texts, _ = _inputs(args)
    work = Path(args.workdir) / f"{args.size}-fts-{args.driver}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    w0, lap = time.perf_counter(), Laps()
    db = Db(args.driver, work / "recipe.db", args.pkgs)
    lap("import")
    db.script("PRAGMA journal_mode=WAL;" + RECIPE_DDL)
    lap("open")
    for start in range(0, len(texts), BATCH):
        rows = range(start, min(len(texts), start + BATCH))
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO docs(id, text) VALUES (?, ?)", ((i + 1, texts[i]) for i in rows)
        )
        lap("docs rows")
        db.executemany(
            "INSERT INTO fts(rowid, text) VALUES (?, ?)", ((i + 1, texts[i]) for i in rows)
        )
        lap("fts5 porter")
        db.execute("COMMIT")
        lap("commit")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    lap("checkpoint")
    return _row(db.version, lap, time.perf_counter() - w0, work)


def _row(version: str, lap: Laps, wall: float, work: Path) -> dict[str, Any]:
    size = sum(f.stat().st_size for f in work.iterdir() if f.is_file())
    return {"cpu_s": lap.last - lap.start, "wall_s": wall, "disk_bytes": size,
            "sqlite": version, "parts": dict(lap.part)}  # fmt: skip


def query_child(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    import bench_e2e as b

    queries, _ = b.test_queries(args.data, args.queries)
    exprs = [" OR ".join(f'"{w}"' for w in _WORD.findall(q.lower())) for q in queries]
    db = Db(args.driver, Path(args.store), args.pkgs)
    sql = (
        "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?"
        " ORDER BY bm25(memories_fts) LIMIT 40"
    )
    for e in exprs:  # warm: pages cached, statement prepared
        db.rows(sql, (e,))
    times: list[float] = []
    got = 0
    c0 = time.process_time()
    for e in exprs:
        t = time.perf_counter()
        got += len(db.rows(sql, (e,)))
        times.append(time.perf_counter() - t)
    cpu = time.process_time() - c0
    db.close()
    return {"p50_ms": 1e3 * statistics.median(times), "cpu_ms_per_query": 1e3 * cpu / len(times),
            "rows": got, "queries": len(times), "sqlite": db.version}  # fmt: skip


def bind_child(args: argparse.Namespace) -> dict[str, Any]:
    """The driver's cost of binding values: `--size` rows shaped like the floor's (17
    values: ints, NULLs, text, floats) into a table without indexes, one executemany in
    one transaction; the same count of one-value rows; and the wide rows again as one
    JSON array a 5,000 (`INSERT ... SELECT value->>0, ... FROM json_each(?)`)."""
    work = Path(args.workdir) / f"bind-{args.driver}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    db = Db(args.driver, work / "bind.db", args.pkgs)
    db.script(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
        " CREATE TABLE wide(a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q); CREATE TABLE one(a);"
    )
    now = time.time()
    rows = [(i, None, "x" * 200, "h" * 64, None, None, None, None, None, None, 0.5, 1.0, now,
             now, "{}", 0, 100) for i in range(args.size)]  # fmt: skip
    out: dict[str, Any] = {"sqlite": db.version}
    for name, sql, seq in (
        ("wide", f"INSERT INTO wide VALUES ({','.join('?' * 17)})", rows),
        ("one", "INSERT INTO one VALUES (?)", [(r[0],) for r in rows]),
    ):
        c = time.process_time()
        db.execute("BEGIN")
        db.executemany(sql, seq)
        db.execute("COMMIT")
        out[name] = time.process_time() - c
    # the same wide rows as one JSON array a 5,000 (how cortex writes its embeddings rows)
    cols = ", ".join(f"value->>{i}" for i in range(17))
    c = time.process_time()
    db.execute("BEGIN")
    for start in range(0, len(rows), BATCH):
        db.execute(
            f"INSERT INTO wide SELECT {cols} FROM json_each(?)",
            (json.dumps(rows[start : start + BATCH]),),
        )
    db.execute("COMMIT")
    out["json"] = time.process_time() - c
    db.close()
    return out


def bind(args: argparse.Namespace) -> None:
    me = [sys.executable, __file__, "bind-child", "--size", str(args.size), "--pkgs",
          str(args.pkgs), "--workdir", str(args.workdir)]  # fmt: skip
    got: dict[str, list[dict[str, Any]]] = {d: [] for d in args.drivers}
    for rep in range(args.repeat):
        for driver in list(args.drivers)[:: 1 if rep % 2 == 0 else -1]:
            got[driver].append(_child([*me, "--driver", driver]))
    print(f"\n| driver | SQLite | {args.size:,} rows of 17 values, CPU-s | of 1 value"
          " | of 17 as JSON arrays |")  # fmt: skip
    print("|---|---|---|---|---|")
    for driver, runs in got.items():
        wide = statistics.median(r["wide"] for r in runs)
        one = statistics.median(r["one"] for r in runs)
        js = statistics.median(r["json"] for r in runs)
        print(f"| {driver} | {runs[0]['sqlite']} | {wide:.3f} | {one:.3f} | {js:.3f} |")


# --------------------------------------------------------------------------- driver


def _memories_shape(conn: Any) -> tuple[Any, ...]:
    """`memories`' columns and its indexes' names and columns, as SQLite reports them."""
    columns = tuple(tuple(r[1:]) for r in conn.execute("PRAGMA table_info(memories)"))
    indexes = tuple(
        (name, tuple(c[2] for c in conn.execute(f"PRAGMA index_info({name})")))  # a name read
        for (name,) in conn.execute(  # from sqlite_master, never a value
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'memories'"
            " AND sql IS NOT NULL ORDER BY name"
        )
    )
    return columns, indexes


def check_floor_ddl() -> None:
    """FLOOR_DDL's `memories` is a new cortex file's (columns, indexes), and its FTS5
    tokenizer cortex's: the floor measures cortex's design only while they agree."""
    import sqlite3

    sys.path.insert(0, str(ROOT / "python"))
    import cortex
    from cortex.store import STEMMED_TOKENIZER

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "new.db"
        cortex.open(path, embedder=None, keyword_index="off").close()
        conn = sqlite3.connect(path)
        real = _memories_shape(conn)
        conn.close()
    mem = sqlite3.connect(":memory:")
    mem.executescript(FLOOR_DDL)
    if _memories_shape(mem) != real or f"tokenize='{STEMMED_TOKENIZER}'" not in FLOOR_DDL:
        raise SystemExit("FLOOR_DDL no longer matches a new cortex file's memories table")


def prepare(args: argparse.Namespace) -> None:
    """Two byte-compiled copies of this checkout's package: `cortex/` as it is and
    `notwin/` without the bulk write's inserts into memories_exact (after checking that
    FLOOR_DDL is still cortex's)."""
    check_floor_ddl()
    out = Path(args.out)
    for name in ("cortex", "notwin"):
        dest = out / name / "cortex"
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(ROOT / "python" / "cortex", dest,
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
        if name == "notwin":
            store = dest / "store.py"
            text = store.read_text()
            if text.count(TWIN_LINE) != 1:
                raise SystemExit("store.py no longer holds the twin's bulk insert line once")
            store.write_text(text.replace(TWIN_LINE, ""))
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(dest)], check=True)
        print("prepared", dest)


def _child(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(" ".join(cmd) + "\n" + proc.stderr[-3000:])
    row: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return row


def run(args: argparse.Namespace) -> None:
    trees = Path(args.trees)
    me = [sys.executable, __file__]
    common = ["--data", str(args.data), "--workdir", str(args.workdir), "--pkgs", str(args.pkgs)]
    systems = ["cortex", "notwin", "recipe"]
    systems += [f"floor:{d}" for d in args.drivers] + [f"fts:{d}" for d in args.drivers]
    rows: list[dict[str, Any]] = []
    loads = []
    for size in args.sizes:
        for rep in range(args.repeat):
            k = rep % len(systems)
            order = systems[k:] + systems[:k]
            if rep % 2:
                order.reverse()
            for name in order:
                if name in ("cortex", "notwin", "recipe"):
                    tree = trees / ("notwin" if name == "notwin" else "cortex")
                    env = dict(os.environ, PYTHONPATH=str(tree))
                    system = "fts5+sqlite-vec" if name == "recipe" else "cortex"
                    row = _child(
                        [sys.executable, str(HERE / "bench_e2e.py"), "ingest-child",
                         "--system", system, "--size", str(size), "--batch", str(BATCH),
                         "--workdir", str(Path(args.workdir) / name), "--data", str(args.data)],
                        env,
                    )  # fmt: skip
                    row["sqlite"] = "3.54.1 (apsw)" if name == "recipe" else "3.40.1 (stdlib)"
                    row["bytes"] = row.pop("parts")  # bench_e2e's parts are bytes per table
                else:
                    kind, driver = name.split(":")
                    row = _child([*me, kind, "--driver", driver, "--size", str(size),
                                  "--native", str(args.native), *common])  # fmt: skip
                row.update(name=name, size=size)
                rows.append(row)
                print(f"{size} {name} {row['cpu_s']:.3f} {row['disk_bytes']}", flush=True)
            loads.append(os.getloadavg()[0])
    print("load average (1 min) after each round:", " ".join(f"{x:.1f}" for x in loads))
    queries = []
    if args.queries:
        store = Path(args.workdir) / "query-store"
        shutil.rmtree(store, ignore_errors=True)
        _child([*me, "floor", "--driver", "stdlib", "--size", "10000", "--native",
                str(args.native), "--data", str(args.data), "--workdir", str(store),
                "--pkgs", str(args.pkgs)])  # fmt: skip
        db = store / "10000-floor-stdlib" / "floor.db"
        for rep in range(args.repeat):
            order = list(args.drivers)[:: 1 if rep % 2 == 0 else -1]
            for driver in order:
                row = _child([*me, "query", "--driver", driver, "--store", str(db),
                              "--queries", str(args.queries), *common])  # fmt: skip
                row["name"] = driver
                queries.append(row)
                print(f"query {driver} p50 {row['p50_ms']:.3f} ms", flush=True)
        print("load average after the queries:", os.getloadavg())
    Path(args.json).write_text(json.dumps({"ingest": rows, "queries": queries}))
    report(rows, queries)


def report(rows: list[dict[str, Any]], queries: list[dict[str, Any]]) -> None:
    print("\n| memories | system / part | CPU-s (runs) | median | x recipe | bytes | SQLite |")
    print("|---|---|---|---|---|---|---|")
    for size in sorted({r["size"] for r in rows}):
        mine = [r for r in rows if r["size"] == size]
        names = list(dict.fromkeys(r["name"] for r in mine))
        recipe = statistics.median(r["cpu_s"] for r in mine if r["name"] == "recipe")
        for name in names:
            runs = [r for r in mine if r["name"] == name]
            cpu = [r["cpu_s"] for r in runs]
            med = statistics.median(cpu)
            last = runs[-1]
            listed = ", ".join(f"{c:.3f}" for c in cpu)
            print(f"| {size:,} | {name} | {listed} | {med:.3f} | {recipe / med:.2f}x"
                  f" | {last['disk_bytes']:,} | {last['sqlite']} |")  # fmt: skip
            if name in ("cortex", "notwin", "recipe"):
                held = runs[-1]["bytes"] if "bytes" in runs[-1] else runs[-1]["parts"]
                twin = sum(b for k, b in held.items() if ":memories_exact" in k)
                if twin:
                    print(f"| {size:,} | {name}: memories_exact's pages | | | | {twin:,} | |")
                continue
            keys = list(dict.fromkeys(k for r in runs for k in r.get("parts", {})))
            for key in keys:
                vals = [r["parts"].get(key, 0.0) for r in runs]
                print(f"| {size:,} | {name}: {key} | {', '.join(f'{v:.3f}' for v in vals)}"
                      f" | {statistics.median(vals):.3f} | | | |")  # fmt: skip
    if queries:
        print("\n| driver | SQLite | p50 ms (runs) | median | CPU ms / query |")
        print("|---|---|---|---|---|")
        for name in dict.fromkeys(q["name"] for q in queries):
            mine = [q for q in queries if q["name"] == name]
            p50 = [q["p50_ms"] for q in mine]
            cpu = statistics.median(q["cpu_ms_per_query"] for q in mine)
            print(f"| {name} | {mine[0]['sqlite']} | {', '.join(f'{p:.3f}' for p in p50)}"
                  f" | {statistics.median(p50):.3f} | {cpu:.3f} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "command",
        choices=["prepare", "run", "report", "bind", "floor", "fts", "query", "bind-child"],
    )
    ap.add_argument("--out", default="/tmp/sqlfloor-trees", help="prepare: where the copies go")
    ap.add_argument("--trees", default="/tmp/sqlfloor-trees", help="run: prepare's --out")
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--size", type=int, default=10_000, help="a child's memories")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--drivers", nargs="+", default=list(DRIVERS), choices=DRIVERS)
    ap.add_argument("--driver", default="stdlib", choices=DRIVERS)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--pragma", action="append", default=[], help="floor: one more PRAGMA")
    ap.add_argument("--store", help="query: the floor store to search")
    ap.add_argument("--native", type=Path, default=ROOT / "python" / "cortex" / "_native.abi3.so")
    ap.add_argument("--pkgs", type=Path, default=PKGS, help="where sqlean.py/pysqlite3 are")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/sqlfloor-work"))
    ap.add_argument(
        "--json", default="/tmp/sqlfloor-run.json", help="run: every row; report reads it"
    )
    args = ap.parse_args()
    if args.command == "prepare":
        prepare(args)
    elif args.command == "run":
        run(args)
    elif args.command == "bind":
        bind(args)
    elif args.command == "report":
        saved = json.loads(Path(args.json).read_text())
        report(saved["ingest"], saved["queries"])
    else:
        children = {"floor": floor_child, "fts": fts_child, "query": query_child,
                    "bind-child": bind_child}  # fmt: skip
        child = children[args.command]
        print(json.dumps(child(args)), flush=True)


if __name__ == "__main__":
    main()
