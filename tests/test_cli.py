"""The `cortex` command, run through its installed entry point as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import cortex

from .conftest import SAMPLE, run_cli


def test_import_search_show_stats(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    imported = run_cli("--db", db, "import", str(SAMPLE))
    assert imported.code == 0, imported.err
    assert "added" in imported.out

    found = run_cli("--db", db, "search", "deployment", "--mode", "keyword")
    assert found.code == 0, found.err
    assert "Deployment" in found.out
    assert found.out.splitlines()[0].split()[:3] == ["#", "score", "id"]

    data = json.loads(
        run_cli("--db", db, "search", "deployment", "--json", "--mode", "keyword").out
    )
    assert data["mode"] == "keyword"
    first = data["results"][0]
    assert set(first) >= {"id", "score", "bm25_score", "semantic_score", "snippet", "memory"}

    shown = run_cli("--db", db, "show", str(first["id"]))
    assert shown.code == 0 and "Deployment" in shown.out
    as_json = json.loads(run_cli("--db", db, "show", str(first["id"]), "--json").out)
    assert as_json["id"] == first["id"]

    stats = json.loads(run_cli("--db", db, "stats", "--json").out)
    assert stats["memories"] > 0 and stats["schema_version"] >= 1


def test_cli_json_matches_the_api(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with cortex.open(db) as engine:
        engine.import_path(SAMPLE)
        queries = [
            "deployment",
            "release OR database",
            "数据库 索引",
            "auth",
            "staging NOT rollback",
        ]
        now = "2026-11-23T12:00:00+00:00"  # one clock for both (recency moves with it)
        expected = {
            q: [
                (r.memory.id, r.score)
                for r in engine.search(q, mode="keyword", record=False, now=now)
            ]
            for q in queries
        }
    for q in queries:
        out = run_cli(
            "--db", str(db), "search", q, "--mode", "keyword", "--json", "--no-record",
            "--now", now,
        )  # fmt: skip
        got = [(r["id"], r["score"]) for r in json.loads(out.out)["results"]]
        assert got == expected[q], q


def test_reimport_reports_unchanged(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    run_cli("--db", db, "import", str(SAMPLE))
    again = run_cli("--db", db, "import", str(SAMPLE), "--json")
    report = json.loads(again.out)[0]
    assert report["added"] == 0 and report["unchanged"] > 0


def test_add_from_argument_and_stdin(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    added = run_cli("--db", db, "add", "We use blue-green deploys", "--project", "p", "--json")
    assert added.code == 0, added.err
    memory = json.loads(added.out)
    assert memory["project"] == "p"
    piped = run_cli("--db", db, "add", "--category", "rule", stdin="From standard input\n")
    assert piped.code == 0 and "added memory" in piped.out
    found = json.loads(run_cli("--db", db, "search", "standard", "--json").out)
    assert found["results"][0]["memory"]["category"] == "rule"


def test_every_option_is_a_flag() -> None:
    help_text = run_cli("search", "--help").out
    import dataclasses

    for field in dataclasses.fields(cortex.Options):
        assert "--" + field.name.replace("_", "-") in help_text, field.name


def test_filters_from_flags(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    run_cli("--db", db, "import", str(SAMPLE))
    out = json.loads(run_cli("--db", db, "search", "--scope", "project:hydra*", "--json").out)
    assert {r["memory"]["scope"] for r in out["results"]} == {
        "project:hydra",
        "project:hydra:task:testing",
    }
    out = json.loads(
        run_cli("--db", db, "search", "--order-by", "recency", "--limit", "2", "--json").out
    )
    assert len(out["results"]) == 2


def test_database_from_environment_then_user_default(tmp_path: Path) -> None:
    env_db = tmp_path / "env.db"
    assert run_cli("add", "from env", env={"CORTEX_DB": str(env_db)}).code == 0
    assert env_db.exists()
    home = tmp_path / "home"
    result = run_cli("add", "from default", env={"CORTEX_DB": "", "CORTEX_HOME": str(home)})
    assert result.code == 0, result.err
    assert (home / "cortex.db").exists()


def test_notices_go_to_stderr_results_to_stdout(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    run_cli("--db", db, "import", str(SAMPLE))
    result = run_cli("--db", db, "search", '"unbalanced deploy', "--mode", "keyword", "--json")
    assert result.code == 0
    json.loads(result.out)  # stdout is pure JSON
    assert "not a valid FTS5 query" in result.err


def test_no_command_prints_help() -> None:
    result = run_cli()
    assert result.code == 2
    assert "search" in result.out


def test_version_and_keyword_search_import_no_vector_code(tmp_path: Path) -> None:
    """`cortex --version` and a keyword search never touch a vector, so they import
    neither numpy nor the model runtime (start-up cost; BENCHMARKS.md)."""
    import subprocess
    import sys

    db = tmp_path / "c.db"
    with cortex.open(db, embedder=None) as engine:
        engine.add("the deployment of the billing service", project="p")
    heavy = ("numpy", "onnxruntime", "tokenizers", "cortex.vectors", "cortex.embed")
    probe = (
        "import sys, json, contextlib, io, cortex.cli\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    with contextlib.suppress(SystemExit):\n"
        "        cortex.cli.main(sys.argv[1:])\n"
        f"heavy = [m for m in {heavy!r} if m in sys.modules]\n"
        "print(json.dumps({'out': out.getvalue(), 'heavy': heavy}))"
    )
    for args in (["--version"], ["--db", str(db), "search", "deploy*", "--mode", "keyword"]):
        done = subprocess.run(
            [sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True
        )
        got = json.loads(done.stdout)
        assert got["heavy"] == [], args
        assert ("cortex " if args == ["--version"] else "billing") in got["out"]


def test_console_script_answers_version_before_the_command_line(tmp_path: Path) -> None:
    """The console script (`cortex.__main__:main`, also `python -m cortex`) prints the
    version without importing argparse, the options or the engine, and hands every other
    command line to cortex.cli unchanged."""
    import os
    import subprocess
    import sys

    from cortex._native import __version__

    probe = (
        "import sys, json, contextlib, io\n"
        "import cortex.__main__\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    code = cortex.__main__.main(sys.argv[1:])\n"
        "loaded = [m for m in ('argparse', 'cortex.cli', 'cortex.options', 'cortex.engine')"
        " if m in sys.modules]\n"
        "print(json.dumps({'out': out.getvalue(), 'code': code, 'loaded': loaded}))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", probe, "--version"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    got = json.loads(done.stdout)
    assert got == {"out": f"cortex {__version__}\n", "code": 0, "loaded": []}

    db = tmp_path / "c.db"
    with cortex.open(db, embedder=None) as engine:
        engine.add("the deployment of the billing service", project="p")
    done = subprocess.run(
        [sys.executable, "-m", "cortex", "--db", str(db), "search", "deploy*", "--mode", "keyword"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "billing" in done.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "cortex", "--nope"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert bad.returncode == 2 and "usage error" in bad.stderr
