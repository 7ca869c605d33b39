"""What a new user trips over in the first hour (issue 15), each held by a test."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cortex
from cortex.cli import build_parser
from cortex.errors import ImportFileError, InvalidOptionError, StorageError
from cortex.options import DEFAULT_MIN_SCORE, Options, option_specs

from .conftest import SAMPLE, CliRun, run_cli
from .procs import cortex_command


def _cli_in(cwd: Path, *args: str) -> CliRun:
    """The real entry point, run from `cwd` (for what a relative path would create)."""
    command = cortex_command()
    env = {**os.environ, "CORTEX_NO_PROGRESS": "1"}
    proc = subprocess.run(
        [*command, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )
    return CliRun(proc.returncode, proc.stdout, proc.stderr)


# --------------------------------------------------------------------------- 1. --db anywhere


def test_global_options_go_before_or_after_the_command(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    added = run_cli("add", "blue-green deploys are the rule", "--db", db)
    assert added.code == 0, added.err
    for args in (
        ("--db", db, "search", "deploys", "--mode", "keyword", "--json"),
        ("search", "deploys", "--db", db, "--mode", "keyword", "--json"),
        ("search", "--db", db, "deploys", "--json", "--mode", "keyword", "-v"),
    ):
        run = run_cli(*args)
        assert run.code == 0, (args, run.err)
        assert [r["memory"]["content"] for r in json.loads(run.out)["results"]] == [
            "blue-green deploys are the rule"
        ]
    stats = run_cli("stats", "--json", "--db", db)
    assert json.loads(stats.out)["memories"] == 1
    # --db given after the command wins over nothing given before it, for every command
    parser = build_parser()
    for command in ("add", "import", "search", "show", "stats", "timeline", "reindex", "mcp"):
        needs = {"show": ["1"], "timeline": ["1"], "import": ["x"]}.get(command, [])
        args = parser.parse_args([command, *needs, "--db", "after.db", "-v"])
        assert (args.db, args.verbose) == ("after.db", True), command
        args = parser.parse_args(["--db", "before.db", command, *needs])
        assert (args.db, args.verbose) == ("before.db", False), command


# --------------------------------------------------------------------------- 2. paths


def test_missing_folders_are_never_created(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "folder" / "x.db"
    with pytest.raises(StorageError, match=r"does not exist; create it first \(mkdir -p "):
        cortex.open(missing)
    run = run_cli("--db", str(missing), "import", str(SAMPLE))
    assert run.code == 1 and "mkdir -p" in run.err and "Traceback" not in run.err
    assert not (tmp_path / "no").exists()
    # the file itself is created in an existing folder
    with cortex.open(tmp_path / "here.db", embedder=None) as engine:
        engine.add("x")
    assert (tmp_path / "here.db").is_file()


def test_an_empty_import_path_is_refused(tmp_path: Path) -> None:
    (tmp_path / "note.md").write_text("# A\nsome text\n")
    db = tmp_path / "c.db"
    with cortex.open(db, embedder=None) as engine, pytest.raises(ImportFileError, match="empty"):
        engine.import_path("")
    run = _cli_in(tmp_path, "--db", str(db), "import", "")
    assert run.code == 1 and "empty" in run.err, run.err
    with cortex.open(db, embedder=None) as engine:
        assert engine.stats()["memories"] == 0


@pytest.mark.parametrize(
    "url", ["postgresql://user:s3cret@127.0.0.1:1/memories", "postgres://u:s3cret@127.0.0.1:1/db"]
)
def test_a_postgres_url_connects_and_never_becomes_a_path(
    tmp_path: Path, url: str, monkeypatch
) -> None:
    # Nothing listens on port 1: the open fails as a StorageError naming the database
    # without its password, and nothing is created in the working folder.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorageError) as err:
        cortex.open(url)
    assert "s3cret" not in str(err.value) and "127.0.0.1" in str(err.value)
    run = _cli_in(tmp_path, "--db", url, "add", "hello")
    assert run.code == 1
    assert "s3cret" not in run.err and "127.0.0.1" in run.err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["sqlite:///x.db", "s3://bucket/x.db"])
def test_a_database_url_is_never_a_path(tmp_path: Path, url: str, monkeypatch) -> None:
    scheme = url.split(":", 1)[0]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorageError, match=f"^{scheme}:// databases are not supported yet"):
        cortex.open(url)
    run = _cli_in(tmp_path, "--db", url, "add", "hello")
    assert run.code == 1
    assert f"{scheme}:// databases are not supported yet" in run.err
    assert list(tmp_path.iterdir()) == []  # no `postgresql:` folder, no SQLite file


# --------------------------------------------------------------------------- 3. help


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def test_every_cli_option_has_a_description_and_a_default() -> None:
    for name, parser in _subcommands(build_parser()).items():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or not action.option_strings:
                continue
            if action.help == argparse.SUPPRESS:
                continue
            assert action.help, (name, action.option_strings)
            takes_value = action.nargs != 0 and not isinstance(
                action, argparse.BooleanOptionalAction
            )
            if takes_value or isinstance(action, argparse.BooleanOptionalAction):
                assert "default" in action.help, (name, action.option_strings, action.help)


def test_search_help_states_the_real_default_of_min_score() -> None:
    run = run_cli("search", "--help")
    text = " ".join(run.out.split())
    assert (
        "--min-score MIN_SCORE leave out results whose relevance (the fused score, before"
        " boosts) is lower" in text
    )
    floor = f"{DEFAULT_MIN_SCORE:g}"
    assert f"(default: {floor}, in every mode (0 for hybrid with rrf fusion))" in text
    # ... and it is the default the search applies
    for mode in cortex.Mode:
        assert Options().threshold(mode) == DEFAULT_MIN_SCORE
    assert Options(fusion="rrf").threshold(cortex.Mode.HYBRID) == 0


def test_cli_flags_and_mcp_arguments_come_from_options() -> None:
    specs = {s.name: s for s in option_specs()}
    assert set(specs) == {f for f in Options.__dataclass_fields__}
    # every field is declared with options.option(default, help): its help is its own
    undeclared = [f.name for f in dataclasses.fields(Options) if not f.metadata.get("help")]
    assert undeclared == [], f"declare these with option(default, help): {undeclared}"
    assert all(s.help and s.default_text for s in specs.values())
    search = _subcommands(build_parser())["search"]
    flags = {a.dest: a for a in search._actions if a.help != argparse.SUPPRESS}
    for spec in specs.values():
        assert spec.help in flags[spec.name].help  # type: ignore[operator]
        assert f"(default: {spec.default_text})" in flags[spec.name].help  # type: ignore[operator]


# --------------------------------------------------------------------------- 4. the Python API


def test_a_misspelt_option_names_the_closest_one(tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match="unknown option 'limt'; did you mean 'limit'"):
        Options(limt=5)  # type: ignore[call-arg]
    with cortex.open(tmp_path / "c.db", embedder=None) as engine:
        with pytest.raises(InvalidOptionError, match="did you mean 'project'"):
            engine.search("x", projct="hydra")
        with pytest.raises(InvalidOptionError, match="did you mean 'order_by'"):
            engine.search("x", Options(), orderby="recency")


def test_search_with_no_argument_lists_by_filters(tmp_path: Path) -> None:
    with cortex.open(tmp_path / "c.db", embedder=None) as engine:
        first = engine.add("first", project="a")
        second = engine.add("second", project="a")
        engine.add("other", project="b")
        listed = engine.search(project="a", order_by="recency")
        assert [r.memory.id for r in listed] == [second, first]
        assert len(engine.search()) == 3


def test_mcp_schema_is_generated_from_options(tmp_path: Path) -> None:
    import anyio

    from cortex.mcp import build_server

    with cortex.open(tmp_path / "c.db", embedder=None) as engine:
        tools = {t.name: t for t in anyio.run(build_server(engine).list_tools)}
    props = tools["memory_search"].input_schema["properties"]
    assert props["query"]["type"] == "string"
    for spec in option_specs():
        assert (spec.name in props) == spec.mcp, spec.name
        if spec.mcp:
            published = {k: v for k, v in props[spec.name].items() if k != "title"}
            assert published == spec.json_schema(), spec.name
    assert f"{DEFAULT_MIN_SCORE:g}, in every mode" in props["min_score"]["description"]
    assert props["limit"]["description"] == "How many results at most (default: 20)."


# --------------------------------------------------------------------------- 5. the MCP extra


def test_without_the_mcp_sdk_both_entry_points_say_so_in_one_line(tmp_path: Path) -> None:
    # A module named `mcp` that fails as a missing one does, first on the path.
    (tmp_path / "mcp.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'mcp'\", name='mcp')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    db = str(tmp_path / "c.db")
    runs = [
        subprocess.run(
            command, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL, timeout=60
        )
        for command in (
            [sys.executable, "-m", "cortex.mcp", "--db", db],
            [sys.executable, "-m", "cortex.cli", "mcp", "--db", db],
        )
    ]
    for run in runs:
        assert run.returncode == 1, run.stderr
        assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, run.stderr
        assert "needs the MCP SDK" in run.stderr and "[mcp]" in run.stderr
    assert runs[0].stderr == runs[1].stderr


# --------------------------------------------------------------------------- 8. numbers


def test_salience_is_stored_and_printed_rounded(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with cortex.open(db, embedder=None) as engine:
        memory_id = engine.add("the rollback drill runs on fridays", salience=0.5)
        for _ in range(4):  # 0.5 + 7 × 0.02 in floating point is 0.6400000000000001
            engine.search("rollback", mode="keyword", reinforce=0.02)
        for _ in range(3):
            engine.reinforce([memory_id])
        assert engine.get(memory_id).salience == 0.64
    shown = run_cli("--db", str(db), "show", str(memory_id))
    assert "salience: 0.64\n" in shown.out, shown.out
    as_json = json.loads(run_cli("--db", str(db), "show", str(memory_id), "--json").out)
    assert as_json["salience"] == 0.64


def test_stats_json_dates_are_iso_like_the_text(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    assert run_cli("--db", db, "add", "x", "--created-at", "2026-01-31T08:00:00Z").code == 0
    data = json.loads(run_cli("--db", db, "stats", "--json").out)
    assert data["oldest"] == data["newest"] == "2026-01-31T08:00:00Z"
    text = run_cli("--db", db, "stats").out
    assert "oldest: 2026-01-31T08:00:00Z" in text and "newest: 2026-01-31T08:00:00Z" in text


# --------------------------------------------------------------------------- 9. logging


def test_the_cortex_logger_is_silent_by_default_and_tells_each_search(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("cortex").handlers)
    secret = "zanzibar-quartermaster"
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text(f"# Plan\nThe {secret} rotates keys.\n")
    with cortex.open(tmp_path / "c.db", embedder=None) as engine:
        with caplog.at_level(logging.INFO, logger="cortex"):
            engine.import_path(tmp_path / "notes")
        infos = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
        assert any(m.startswith("imported ") and "1 added" in m for m in infos), infos
        assert not any(secret in m for m in infos)  # never memory text at INFO
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="cortex"):
            engine.search("rotates keys", mode="keyword")
        lines = [r.getMessage() for r in caplog.records]
    summary = [m for m in lines if m.startswith("search mode=keyword")]
    assert len(summary) == 1, lines
    assert "keyword_tier=fts keyword_hits=1" in summary[0] and "total=" in summary[0]
    assert any(m.startswith("keyword AND of 2 terms: FTS5, 1 hits") for m in lines), lines


def test_verbose_logs_to_stderr_and_quiet_does_not(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    run_cli("--db", db, "add", "blue green deploys")
    quiet = run_cli("--db", db, "search", "deploys", "--mode", "keyword")
    loud = run_cli("--db", db, "search", "deploys", "--mode", "keyword", "--verbose")
    assert quiet.code == loud.code == 0 and quiet.out == loud.out
    assert "DEBUG" not in quiet.err
    assert "cortex: DEBUG cortex.search: search mode=keyword" in loud.err


# --------------------------------------------------------------------------- 4. type hints

README_EXAMPLE = """
import cortex

with cortex.open("memories.db") as engine:
    engine.add("We deploy with a blue-green switch", project="hydra", category="decision")
    engine.add_many([{"content": "Rollbacks take one command", "project": "hydra"}])
    engine.import_path("notes/")
    results = engine.search("deploy*", project="hydra", limit=5)
    for r in results:
        print(f"{r.score:.3f}", r.match_type, r.memory.id, r.snippet)
    print(results.notices, results.rewritten, results.hidden)
    opts = cortex.Options(mode="keyword", scope="project:hydra*", order_by="recency")
    recent = engine.search(None, opts)
    listed = engine.search(project="hydra")
    also = cortex.Options(mode=cortex.Mode.HYBRID, fusion="rrf")
"""


def _mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(source)
    env = dict(os.environ)
    package_root = Path(cortex.__file__).parents[1]
    if package_root.name not in ("site-packages", "dist-packages"):
        # the source tree under test (PYTHONPATH), not an editable install of another one
        env["MYPYPATH"] = str(package_root)
    # else an installed wheel (scripts/check-wheel.sh): mypy finds it with its py.typed
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--cache-dir", str(tmp_path / "c"),
         "--follow-imports=silent", "--strict", str(snippet)],
        capture_output=True, text=True, env=env, timeout=280,
    )  # fmt: skip


@pytest.mark.timeout(600)
def test_the_readme_example_type_checks_and_a_wrong_value_does_not(tmp_path: Path) -> None:
    good = _mypy(tmp_path, README_EXAMPLE)
    assert good.returncode == 0, good.stdout + good.stderr
    bad = _mypy(tmp_path, 'import cortex\ncortex.Options(mode="keywrd", limt=5)\n')
    assert bad.returncode == 1
    assert 'Argument "mode" to "Options" has incompatible type' in bad.stdout, bad.stdout
    assert 'Unexpected keyword argument "limt"' in bad.stdout, bad.stdout


# --------------------------------------------------------------------------- 6. derived files


def _search_ids(db: Path, embedder: object) -> list[int]:
    with cortex.open(db, embedder=embedder) as engine:
        return [r.memory.id for r in engine.search("undo a bad deploy", mode="semantic")]


def test_vectors_have_their_folder_and_what_is_derived_can_be_deleted(
    tmp_path: Path, embedder
) -> None:
    db = tmp_path / "m.db"
    with cortex.open(db, embedder=embedder) as engine:
        engine.import_path(SAMPLE)
        engine.flush()  # the keyword index saved too, if the store is large enough
    expected = _search_ids(db, embedder)
    assert expected
    beside = {p.name for p in tmp_path.iterdir()} - {"m.db-wal", "m.db-shm"}
    assert {"m.db", "m.db-vectors"} <= beside <= {"m.db", "m.db-vectors", "m.db-index"}
    inside = sorted(p.name for p in (tmp_path / "m.db-vectors").iterdir())
    assert any(name.endswith(".vectors") for name in inside), inside
    assert {name.rsplit(".", 1)[-1] for name in inside} >= {"vectors", "ids", "q8", "state", "lock"}

    shutil.rmtree(tmp_path / "m.db-index", ignore_errors=True)  # derived: nothing is lost
    assert _search_ids(db, embedder) == expected
    assert (tmp_path / "m.db-vectors").is_dir()


def test_the_side_files_of_older_versions_go_when_the_vectors_move_out(
    tmp_path: Path, embedder
) -> None:
    from .test_vectors_stored import _downgrade
    from .vector_truth import stored_vectors

    db = tmp_path / "m.db"
    with cortex.open(db, embedder=embedder) as engine:
        engine.import_path(SAMPLE)
        model = engine.model_id
    expected = _search_ids(db, embedder)
    vectors = {i: v.astype("<f4") for i, v in stored_vectors(db, model).items()}
    _downgrade(db, vectors)  # vectors back in SQLite, as older versions kept them
    (tmp_path / "m.db-index").mkdir(exist_ok=True)
    old = [tmp_path / "m.db.vectors-x", tmp_path / "m.db.vectors-x.ids"]  # before the folder
    old += [tmp_path / "m.db-index" / "vectors-x", tmp_path / "m.db-index" / "vectors-x.state"]
    for path in old:
        path.write_bytes(b"derived by an older cortex")
    assert _search_ids(db, embedder) == expected  # migrated on this writable open
    assert [p for p in old if p.exists()] == []
    assert any((tmp_path / "m.db-vectors").glob("*.vectors"))


# --------------------------------------------------------------------------- 7. install weight


def test_the_graph_is_written_without_the_onnx_package(monkeypatch) -> None:
    from cortex.model import build_minilm_onnx

    from .test_embed import TINY, tiny_weights

    weights = tiny_weights()
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` would raise ImportError
    graph = build_minilm_onnx(weights, TINY)
    monkeypatch.undo()
    # The reference implementation reads it, finds it valid, and writes the same bytes.
    import onnx

    model = onnx.load_model_from_string(graph)
    onnx.checker.check_model(model, full_check=True)
    assert model.SerializeToString() == graph
    assert (model.ir_version, model.opset_import[0].version) == (8, 17)
    assert [i.name for i in model.graph.input] == ["input_ids", "attention_mask", "token_type_ids"]


def test_cortex_imports_neither_onnx_nor_the_model_module_cycle() -> None:
    code = "import sys, cortex, cortex.cli, cortex.embed, cortex.model;print('onnx' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "False", run.stderr
    import ast

    source = Path(cortex.__file__).with_name("embed.py").read_text()
    imported = {
        node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "cortex.model" not in imported  # the embedder reads model folders via model_dir


# --------------------------------------------------------------------------- 8. progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_one_import_bar_with_honest_rates() -> None:
    from cortex.cli import ImportProgress, Progress

    screen = _Terminal()
    bar = ImportProgress("importing notes/", screen)
    for n in range(1, 14):  # 13 files, each embedding one memory in no time
        bar.embedded(1, 1)
        bar.file_done(n, 13)
    bar.finish()
    text = screen.getvalue()
    assert text.count("\n") == 1 and text.endswith("13/13 files, 13 memories embedded\n"), text
    assert "/s)" not in text  # 13 in microseconds is no rate at all, not billions a second

    screen = _Terminal()
    one = Progress("embedding", screen, unit="memories")
    one(1, 1)
    assert screen.getvalue().endswith(" 1/1\n"), screen.getvalue()
    slow = Progress("embedding", screen, unit="memories")
    slow.started -= 2.0  # as if two seconds had passed
    slow(10, 10)
    assert screen.getvalue().endswith(" 10/10 (5 memories/s)\n"), screen.getvalue()
