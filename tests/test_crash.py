"""Crashes: an import killed with SIGKILL at random points, and damaged derived files.

- A child process imports a folder of Markdown and JSONL files (`Engine.import_path`,
  one transaction a file) and prints each file's name once its transaction committed; it
  runs a semantic search between files, so the vector index is being synced when the kill
  lands too. It is killed after a seeded random delay, five times over one database. After
  every kill: `PRAGMA integrity_check` is ok, every acknowledged file's memories are there
  and found by keyword, and the vector index the kill left behind is brought back in step
  without being asked (semantic results equal those of a forced rebuild).
- A truncated, emptied or scribbled-on vector file, `.ids` file or `.state`: an automatic
  rebuild (same results as a pristine index) or a clear error, never a crash. Each runs in
  a subprocess whose return code must not be negative (a signal: SIGSEGV, SIGBUS).
- A corrupted model file (a copy of the installed model, pointed at by
  `CORTEX_MODEL_DIR`): a one-line error for semantic search, keyword results with a
  notice for hybrid, never a crash.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import cortex
from cortex.semantic import vectors_dir

from .conftest import run_cli
from .words import OPS_WORDS

SEED = 5_150
KILLS = 5
FILES_PER_ROUND = 20
QUERIES = ["how do we roll back a release", "database index rebuild", "token budget"]
WORDS = [*OPS_WORDS, "snapshot", "backup"]

CHILD = r"""
import sys
import cortex

db, folder = sys.argv[1], sys.argv[2]
with cortex.open(db) as engine:
    engine.search("warm up", mode="semantic", record=False)  # model loaded, index synced
    print("ready", flush=True)

    def progress(n, total, path):
        # Called once the file's transaction committed: this line acknowledges it.
        print("file", path.name, flush=True)
        engine.search(path.stem, mode="semantic", record=False)  # syncs the vector index

    report = engine.import_path(folder, project="crash", progress=progress)
    assert not report.errors, report.errors
    print("done", flush=True)
"""

PROBE = r"""
import json, sys
import cortex

db, queries = sys.argv[1], json.loads(sys.argv[2])
try:
    with cortex.open(db) as engine:
        out = []
        for q in queries:
            rs = engine.search(q, mode="semantic", limit=5, record=False)
            out.append([[r.memory.id, r.score] for r in rs])
    print(json.dumps({"results": out}))
except cortex.CortexError as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
"""


def _write_round(folder: Path, round_no: int, rng: random.Random) -> dict[str, list[str]]:
    """New files for one round; returns each file's unique tokens (one a memory)."""
    sub = folder / f"round-{round_no}"
    sub.mkdir()
    tokens: dict[str, list[str]] = {}
    for i in range(FILES_PER_ROUND):
        base = f"r{round_no}f{i:03d}"
        toks = [f"{base}t{k}zq" for k in range(3)]
        words = lambda: " ".join(rng.sample(WORDS, 7))  # noqa: E731
        if i % 5 == 4:
            name = f"{base}.jsonl"
            (sub / name).write_text(
                "".join(json.dumps({"content": f"{words()} {t}"}) + "\n" for t in toks)
            )
        else:
            name = f"{base}.md"
            (sub / name).write_text("".join(f"## {t}\n\n{words()} {t}\n\n" for t in toks))
        tokens[name] = toks
    return tokens


def _index_files(db: Path) -> tuple[Path, Path]:
    """The vector file of the active model and its `.state` (in the database's vectors
    folder)."""
    found = [
        p
        for p in vectors_dir(db).glob("*.vectors")
        if ".tmp" not in p.name  # what a compaction killed midway left (cleaned next time)
    ]
    assert len(found) == 1, found
    return found[0], Path(f"{found[0]}.state")


def _kill_run(
    db: Path, folder: Path, prefix: str, after: int, delay: float
) -> tuple[list[str], bool]:
    """Start the importer and SIGKILL it `delay` s after it acknowledged its `after`-th
    new file (one whose name starts with `prefix`): the kill lands inside the import
    however fast the machine is (a delay from the start alone let a quiet machine finish
    the import first). Returns the files it acknowledged and whether it had finished."""
    lines: list[str] = []
    ready = threading.Event()
    reached = threading.Event()
    seen = 0
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db), str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CORTEX_NO_PROGRESS": "1", "CORTEX_THREADS": "1"},
    ) as proc:

        def read() -> None:
            nonlocal seen
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line.strip())
                if line.strip() == "ready":
                    ready.set()
                elif line.startswith(f"file {prefix}"):
                    seen += 1
                    if seen >= after:
                        reached.set()
                elif line.strip() == "done":
                    reached.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            assert ready.wait(60), "the importer never became ready"
            assert reached.wait(90), "the importer acknowledged no file"
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            reader.join(timeout=30)
            err = proc.stderr.read() if proc.stderr else ""
        finally:
            if proc.poll() is None:
                proc.kill()
    # A kill that lands after "done" (while the child closes the engine or exits) is a
    # kill like any other: the import was over, so it has exit status -9 or 0.
    allowed = (0, -signal.SIGKILL) if "done" in lines else (-signal.SIGKILL,)
    assert proc.returncode in allowed, (proc.returncode, err)
    assert "Traceback" not in err, err  # it died by the kill, not by an error
    acked = [line.split(" ", 1)[1] for line in lines if line.startswith("file ")]
    return acked, "done" in lines


def _semantic(engine: cortex.Engine) -> list[list[tuple[int, float]]]:
    return [
        [(r.memory.id, r.score) for r in engine.search(q, mode="semantic", limit=5, record=False)]
        for q in QUERIES
    ]


def _same_results(a: list, b: list, tolerance: float = 1e-5) -> bool:
    """Same ids in the same order, scores within `tolerance` (another process may embed
    the query with another thread count: its last digits differ)."""
    return all(
        [i for i, _ in x] == [i for i, _ in y]
        and all(math.isclose(s, t, abs_tol=tolerance) for (_, s), (_, t) in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.timeout(150)
def test_sigkill_during_import_loses_no_acknowledged_write(tmp_path: Path, embedder) -> None:
    rng = random.Random(SEED)
    db, folder = tmp_path / "crash.db", tmp_path / "notes"
    folder.mkdir()
    tokens: dict[str, list[str]] = {}
    acked: set[str] = set()
    mid_import = stale_index = 0
    for round_no in range(KILLS):
        tokens.update(_write_round(folder, round_no, rng))
        after = rng.randint(1, FILES_PER_ROUND - 4)
        files, finished = _kill_run(db, folder, f"r{round_no}f", after, rng.uniform(0.0, 0.05))
        acked.update(files)
        mid_import += not finished

        conn = sqlite3.connect(db)  # before cortex touches it: SQLite's own recovery only
        try:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            seq = conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM embeddings").fetchone()[0]
        finally:
            conn.close()
        _, state_path = _index_files(db)
        try:
            state = json.loads(state_path.read_text())
        except (OSError, ValueError):
            state = None
        stale_index += state is None or state.get("seq") != seq

        with cortex.open(db, embedder=embedder) as engine:
            missing = []
            for name in sorted(acked):
                for token in tokens[name]:
                    hits = engine.search(token, mode="keyword", record=False, project="crash")
                    if [token in r.memory.content for r in hits] != [True]:
                        missing.append((round_no, name, token))
            assert missing == [], missing[:10]
            # Each memory has its vector (they commit together), and the index was
            # synced by the first search without being asked.
            stats = engine.stats()
            # (one model; no rows at all when the kill came before the first file)
            assert len(stats["embeddings"]) <= 1
            assert sum(stats["embeddings"].values()) == stats["memories"]
            synced = _semantic(engine)
            vector_path, _ = _index_files(db)
            from cortex.vectors import VectorIndex

            # Opened as cortex's readers open it: capped at the rows SQLite counts as
            # committed (a writer killed between its file sync and its COMMIT leaves rows
            # past them, which no reader sees and the next writer takes back).
            counted = engine.store.query(
                "SELECT json_extract(value, '$.rows') FROM meta WHERE key LIKE 'vectors:%'"
            )
            index = VectorIndex.open(vector_path, upto=int(counted[0][0]) if counted else 0)
            try:
                assert len(index) == stats["memories"]
            finally:
                index.close()
            engine.reindex()  # a forced rebuild from SQLite: the reference
            assert _same_results(synced, _semantic(engine)), round_no
    assert mid_import >= KILLS - 1, mid_import  # the kills did land inside the import
    # and after some acknowledged files: an import embeds its files in windows (8 chunks
    # first, then doubling), so files are acknowledged window by window and a kill at
    # 0.2-1.5 s often lands inside the first new window of a round
    assert len(acked) >= 3, acked
    print(f"kills: {KILLS}, mid-import: {mid_import}, index left stale: {stale_index}")


# ----------------------------------------------------------------- damaged index files


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory, embedder) -> tuple[Path, list]:
    """A small database with a synced index, and its semantic results."""
    db = tmp_path_factory.mktemp("pristine") / "m.db"
    rng = random.Random(SEED)
    with cortex.open(db, embedder=embedder) as engine:
        engine.add_many({"content": " ".join(rng.sample(WORDS, 8))} for _ in range(120))
        expected = [
            [
                [r.memory.id, r.score]
                for r in engine.search(q, mode="semantic", limit=5, record=False)
            ]
            for q in QUERIES
        ]
    return db, expected


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)


def _scribble(path: Path, offset: int, length: int = 64) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(bytes(random.Random(offset).randrange(256) for _ in range(length)))


DAMAGE = {
    "vectors truncated to half": lambda v: _truncate(v, v.stat().st_size // 2),
    "vectors truncated to 100 bytes": lambda v: _truncate(v, 100),
    "vectors emptied": lambda v: _truncate(v, 0),
    "vectors deleted": lambda v: v.unlink(),
    "vectors header scribbled": lambda v: _scribble(v, 8),
    "vectors row count scribbled": lambda v: _scribble(v, 512, 16),
    # The rows themselves, header intact (a bad disk, a partial copy over the file).
    "vectors rows scribbled": lambda v: _scribble(v, 4096, v.stat().st_size - 4096),
    "ids truncated": lambda v: _truncate(Path(f"{v}.ids"), 80),
    "ids scribbled": lambda v: _scribble(Path(f"{v}.ids"), 0),
    "state garbage": lambda v: Path(f"{v}.state").write_bytes(b"\x00{not json"),
    "state wrong generation": lambda v: Path(f"{v}.state").write_text(
        json.dumps({"gen": 7, "deleted": 0.0, "uuid": "0" * 32})
    ),
    "state deleted": lambda v: Path(f"{v}.state").unlink(),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_index_is_rebuilt_or_refused_never_a_crash(
    tmp_path: Path, pristine: tuple[Path, list], damage: str
) -> None:
    source, expected = pristine
    db = tmp_path / source.name
    for path in source.parent.iterdir():
        if path.name.startswith(source.name):  # the file, its -wal, its -index folder
            copy = shutil.copytree if path.is_dir() else shutil.copy
            copy(path, tmp_path / path.name)
    vectors, _ = _index_files(db)
    DAMAGE[damage](vectors)

    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(db), json.dumps(QUERIES)],
        capture_output=True,
        text=True,
        timeout=50,
        env={**os.environ, "CORTEX_THREADS": "1"},
    )
    assert proc.returncode >= 0, f"killed by signal {-proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    answer: dict[str, Any] = json.loads(proc.stdout)
    if "error" in answer:  # refused: a typed error that says what to do
        assert answer["error"] == "IndexFormatError", answer
        assert "reindex" in answer["message"] or "rebuild" in answer["message"], answer
    else:  # rebuilt without being asked: the pristine results
        # Scores carry the recency boost, which moves with the clock between the fixture
        # and this probe (minutes on a loaded machine): 1e-3, not the last digits.
        assert _same_results(answer["results"], expected, 1e-3), answer
    # Either way the next open works and is right: the damage did not stick.
    with cortex.open(db, embedder=None) as engine:
        assert engine.store.query("PRAGMA integrity_check") == [("ok",)]


# ----------------------------------------------------------------- a damaged model


@pytest.fixture(scope="module")
def model_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from cortex.model import model_info

    dest = tmp_path_factory.mktemp("model") / "model"
    shutil.copytree(model_info().path, dest)
    return dest


MODEL_DAMAGE = {
    "model.onnx truncated": lambda m: _truncate(m / "model.onnx", 1_000_000),
    "model.onnx header scribbled": lambda m: _scribble(m / "model.onnx", 0, 256),
    "model.onnx emptied": lambda m: _truncate(m / "model.onnx", 0),
    "tokenizer.json scribbled": lambda m: _scribble(m / "tokenizer.json", 0, 256),
}


@pytest.mark.timeout(90)
@pytest.mark.parametrize("damage", list(MODEL_DAMAGE))
def test_corrupted_model_is_a_clear_error_never_a_crash(
    tmp_path: Path, model_copy: Path, pristine: tuple[Path, list], damage: str
) -> None:
    model = tmp_path / "model"
    shutil.copytree(model_copy, model)
    MODEL_DAMAGE[damage](model)
    db, _ = pristine
    env = {"CORTEX_MODEL_DIR": str(model), "CORTEX_THREADS": "1"}

    args = ["--db", str(db), "search", "rollback", "--mode", "semantic", "--no-record"]
    semantic = run_cli(*args, env=env)
    assert semantic.code >= 0, f"killed by signal {-semantic.code}"
    assert semantic.code == 1, (semantic.code, semantic.err)
    assert semantic.err.startswith("cortex: error:") and "Traceback" not in semantic.err
    assert len(semantic.err.strip().splitlines()) == 1, semantic.err
    assert "CORTEX_MODEL_DIR" in semantic.err or str(model) in semantic.err, semantic.err

    hybrid = run_cli("--db", str(db), "search", "deploy", "--no-record", "--json", env=env)
    assert hybrid.code == 0, hybrid.err
    answer = json.loads(hybrid.out)
    assert answer["mode"] == "keyword" and answer["notices"], answer
    assert answer["results"], answer  # keyword search still answers
