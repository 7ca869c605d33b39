"""The `cortex` command: add, import, search, show and stats on one database file.

The database is `--db`, else ``$CORTEX_DB``, else ``cortex.db`` in the per-user data folder
(``$CORTEX_HOME``, ``%LOCALAPPDATA%\\cortex`` on Windows, ``$XDG_DATA_HOME/cortex`` or
``~/.local/share/cortex``). Output is UTF-8 on every platform. Every failure is
one line on stderr and a non-zero exit code: 1 for a cortex error, 2 for a usage error,
70 for a bug (with ``CORTEX_DEBUG=1`` to see its traceback), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import cortex
from cortex.errors import CortexError
from cortex.log import to_stderr
from cortex.options import Options, option_specs
from cortex.paths import data_home, db_location, default_db
from cortex.result import from_epoch, iso

__all__ = ["main", "mcp_sdk_missing"]

EXIT_ERROR, EXIT_USAGE, EXIT_BUG, EXIT_INTERRUPTED = 1, 2, 70, 130


class UsageError(Exception):
    """A command line that cannot be run as written."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, never argparse's usage dump
        raise UsageError(message)


# --------------------------------------------------------------------------- output


def _rate(count: int, seconds: float, unit: str) -> str:
    """The " (48 memories/s)" suffix, once a rate means something: a count over half a
    second at least (one item in a microsecond is not a billion items a second)."""
    return f" ({count / seconds:,.0f} {unit}/s)" if seconds >= 0.5 and count else ""


class Progress:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, label: str, stream: TextIO | None = None, unit: str = "") -> None:
        self.label = label
        self.unit = unit
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() and not os.environ.get("CORTEX_NO_PROGRESS")
        self.started = time.monotonic()
        self.last = 0.0

    def draw(self, done: int, total: int, tail: str = "", *, final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not final and now - self.last < 0.1:
            return
        self.last = now
        if not total:  # nothing counted yet (the first file of an import is being embedded)
            self.stream.write(f"\r\x1b[K{self.label}:{tail}")
            self.stream.flush()
            return
        width = 30
        filled = int(width * done / total) if total else width
        bar = "█" * filled + "░" * (width - filled)
        self.stream.write(f"\r\x1b[K{self.label} {bar} {done:,}/{total:,}{tail}")
        if final:
            self.stream.write("\n")
        self.stream.flush()

    def __call__(self, done: int, total: int, item: object = None) -> None:
        rate = _rate(done, time.monotonic() - self.started, self.unit or "items")
        self.draw(done, total, rate, final=done >= total)


class ImportProgress(Progress):
    """One bar for a whole import: files done of all files, and the memories embedded so
    far (a file's memories are embedded before it is written), with one honest rate."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        super().__init__(label, stream)
        self.files = (0, 0)
        self.embedded_before = 0  # memories embedded for the files already done
        self.embedding = 0  # of the file in progress

    def _tail(self) -> str:
        embedded = self.embedded_before + self.embedding
        files = " files" if self.files[1] else ""
        if not embedded:
            return files
        seconds = time.monotonic() - self.started
        rate = _rate(embedded, seconds, "memories")
        return f"{files}{',' if files else ''} {embedded:,} memories embedded{rate}"

    def file_done(self, done: int, total: int, path: object = None) -> None:
        self.files = (done, total)
        self.embedded_before += self.embedding
        self.embedding = 0
        self.draw(done, total, self._tail())

    def embedded(self, done: int, total: int) -> None:
        self.embedding = done
        self.draw(*self.files, self._tail())

    def finish(self) -> None:
        if self.files[1]:
            self.draw(*self.files, self._tail(), final=True)


def _marks(snippet: str, tty: bool) -> str:
    if tty:
        return snippet.replace("<mark>", "\x1b[1;33m").replace("</mark>", "\x1b[0m")
    return snippet.replace("<mark>", "[").replace("</mark>", "]")


def _visible_len(text: str) -> int:
    return len(text.replace("\x1b[1;33m", "").replace("\x1b[0m", ""))


def _clip(text: str, width: int) -> str:
    """Cut `text` to `width` visible characters, keeping ANSI marks balanced."""
    if _visible_len(text) <= width:
        return text
    out, seen, i, open_mark = "", 0, 0, False
    while i < len(text) and seen < width - 1:
        for code in ("\x1b[1;33m", "\x1b[0m"):
            if text.startswith(code, i):
                out += code
                open_mark = code == "\x1b[1;33m"
                i += len(code)
                break
        else:
            out += text[i]
            seen += 1
            i += 1
    return out + ("\x1b[0m" if open_mark else "") + "…"


def _where(memory: cortex.Memory) -> str:
    if memory.source_path:
        where = Path(memory.source_path).name
        if memory.chunk_index is not None:
            where += f"#{memory.chunk_index}"
    else:
        where = memory.scope or memory.category or "-"
    return f"{memory.project}:{where}" if memory.project else where


def print_results(results: cortex.Results, out: TextIO) -> None:
    tty = out.isatty()
    width = shutil.get_terminal_size((100, 20)).columns
    if not results:
        hidden = (
            f" ({results.hidden} below the minimum score or confidence)" if results.hidden else ""
        )
        out.write(f"no results{hidden}\n")
        _print_suggestions(results, out)
        return
    rows = [
        (
            str(n),
            f"{r.score:.3f}",
            str(r.memory.id),
            str(r.match_type),
            _where(r.memory),
            _marks(r.snippet or r.memory.content, tty),
        )
        for n, r in enumerate(results, 1)
    ]
    head = ("#", "score", "id", "match", "source", "snippet")
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head[:5])]
    widths[4] = min(widths[4], 28)
    snippet_width = max(20, width - sum(widths) - 2 * 5)
    line = "  ".join(h.ljust(w) for h, w in zip(head[:5], widths, strict=True)) + "  snippet"
    out.write((f"\x1b[2m{line}\x1b[0m" if tty else line) + "\n")
    for row in rows:
        cells = [row[i].rjust(widths[i]) if i < 3 else row[i][: widths[i]].ljust(widths[i])
                 for i in range(5)]  # fmt: skip
        out.write("  ".join(cells) + "  " + _clip(" ".join(row[5].split()), snippet_width) + "\n")
    if any(r.explain for r in results):
        out.write("\n")
        for n, r in enumerate(results, 1):
            if r.explain:
                parts = "  ".join(f"{k}={v:.4f}" for k, v in r.explain.items())
                out.write(f"{n:>3}. id {r.memory.id}: {parts}\n")
    if results.hidden:
        out.write(f"({results.hidden} more below the minimum score or confidence)\n")
    if results.documents:
        out.write("\ndocuments:\n")
        for n, d in enumerate(results.documents, 1):
            out.write(f"{n:>3}. {d.score:.3f}  {d.title}  ({d.source_path})\n")
    _print_suggestions(results, out)


def _print_suggestions(results: cortex.Results, out: TextIO) -> None:
    if results.suggestions:
        out.write("try: " + " | ".join(results.suggestions) + "\n")


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")


def _dump(data: object, out: TextIO) -> None:
    json.dump(data, out, ensure_ascii=False, indent=2, default=_json_default)
    out.write("\n")


# --------------------------------------------------------------------------- parser


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError('expected a JSON object such as {"episodic": 0.5}')
    return value


def _add_search_options(parser: argparse.ArgumentParser) -> None:
    """One flag per Options field, generated from its declaration (options.option_specs):
    a field added there appears here, with its help text and its default."""
    for spec in option_specs():
        if not spec.cli:
            continue
        flag = "--" + spec.name.replace("_", "-")
        help_text = spec.described().replace("%", "%%")
        if spec.kinds == ("boolean",):
            parser.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=None, help=help_text
            )
            continue
        kind = (spec.items or "string") if spec.kinds == ("array",) else spec.kinds[0]
        arg_type: Any = {"integer": int, "number": float, "object": _json_object}.get(kind, str)
        parser.add_argument(
            flag,
            type=arg_type,
            choices=list(spec.choices) if spec.choices else None,
            # an array (or str | list[str]) option is repeatable: --project a --project b
            action="append" if "array" in spec.kinds else "store",
            default=None,
            metavar=None if spec.choices else spec.name.upper(),
            help=help_text,
        )
    # Short names people reach for.
    parser.add_argument("--since", dest="created_since", help=argparse.SUPPRESS)
    parser.add_argument("--until", dest="created_until", help=argparse.SUPPRESS)


def _add_global_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """The options every command takes, before or after its name (`cortex --db X search`
    and `cortex search --db X`). A subcommand's copy defaults to SUPPRESS, so that leaving
    it out there keeps what was given before the command name."""
    default: Any = None if top else argparse.SUPPRESS
    if "--db" not in parser._option_string_actions:  # a command may declare its own
        parser.add_argument(
            "--db",
            default=default,
            help="the database file (default: $CORTEX_DB, else cortex.db in the per-user "
            "data folder)",
        )
    if "--verbose" not in parser._option_string_actions:
        parser.add_argument(
            "-v",
            "--verbose",
            action="store_true",
            default=False if top else argparse.SUPPRESS,
            help="log what cortex does (searches, imports, rebuilds) on stderr",
        )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cortex",
        description="Local-first memory search for AI agents.",
        epilog="The database is --db, else $CORTEX_DB, else cortex.db in the per-user data "
        "folder ($CORTEX_HOME, else %LOCALAPPDATA%\\cortex on Windows, $XDG_DATA_HOME/cortex "
        "or ~/.local/share/cortex). "
        "--db and --verbose go before or after the command.",
    )
    parser.add_argument("--version", action="version", version=f"cortex {cortex.__version__}")
    _add_global_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("add", help="store one memory (text from the argument or stdin)")
    p.add_argument("content", nargs="?", help="the memory's text; '-' or nothing reads stdin")
    p.add_argument("--project", help="the project it belongs to (default: none)")
    p.add_argument("--session", help="the session it was learned in (default: none)")
    p.add_argument("--sector", help="its sector, e.g. semantic or episodic (default: none)")
    p.add_argument("--tier", help="its tier (default: none)")
    p.add_argument("--scope", help="its scope, e.g. project:hydra/api (default: none)")
    p.add_argument("--category", help="its category, e.g. decision or lesson (default: none)")
    p.add_argument(
        "--salience", type=float, default=0.5, help="how important, 0 to 1 (default: 0.5)"
    )
    p.add_argument("--confidence", type=float, default=1.0, help="how sure, 0 to 1 (default: 1)")
    p.add_argument("--created-at", help="when it was learned, ISO 8601 (default: now)")
    p.add_argument("--metadata", help="a JSON object kept with it (default: none)")
    p.add_argument("--json", action="store_true", help="print the new memory as JSON")

    p = sub.add_parser("import", help="import Markdown, JSON or JSONL files or folders")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders (folders are walked)")
    p.add_argument(
        "--project", help="the project of memories whose record names none (default: none)"
    )
    p.add_argument("--session", help="link the imported memories to this session (default: none)")
    p.add_argument(
        "--follow-links",
        action="store_true",
        help="follow symbolic links that point out of the imported folder (default: skip them)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")

    p = sub.add_parser("search", help="search the memories")
    p.add_argument(
        "query",
        nargs="?",
        help='FTS5 syntax welcome (AND, OR, NOT, "phrase", prefix*); '
        "leave it out to list the memories that pass the filters",
    )
    _add_search_options(p)
    p.add_argument("--json", action="store_true", help="print results as JSON")

    p = sub.add_parser("lens", help="save, list or delete lenses (named search options)")
    lens_sub = p.add_subparsers(dest="lens_command", metavar="ACTION", parser_class=_Parser)
    q = lens_sub.add_parser(
        "save", help="save a lens: the search options given (cortex search's flags)"
    )
    q.add_argument("name", help="the lens's name (apply it with --lens NAME)")
    q.add_argument("--description", help="what the lens is for (default: none)")
    _add_search_options(q)
    q.add_argument("--json", action="store_true", help="print the lens as JSON")
    q = lens_sub.add_parser("list", help="the saved lenses")
    q.add_argument("--json", action="store_true", help="print them as JSON")
    q = lens_sub.add_parser("delete", help="delete a lens")
    q.add_argument("name", help="the lens's name")
    for q in lens_sub.choices.values():
        _add_global_options(q, top=False)

    p = sub.add_parser(
        "documents", help="search the imported files as whole documents, apart from chunks"
    )
    p.add_argument("query", nargs="?", help="words to find; leave it out for the newest files")
    p.add_argument(
        "--project",
        action="append",
        help="only this project's files (repeatable; default: every project)",
    )
    p.add_argument("--limit", type=int, default=10, help="how many at most (default 10)")
    p.add_argument("--json", action="store_true", help="print them as JSON")

    p = sub.add_parser("show", help="print one memory")
    p.add_argument("id", type=int, help="the memory's id")
    p.add_argument("--project", help="only if it belongs to this project (default: any)")
    p.add_argument("--json", action="store_true", help="print it as JSON")

    p = sub.add_parser(
        "context", help="what an agent should read for a prompt, packed into a token budget"
    )
    p.add_argument("prompt", help="the question or the need, in plain words")
    p.add_argument(
        "--max-tokens", type=int, default=2000, help="budget of the text (default: 2000)"
    )
    p.add_argument(
        "--format",
        choices=["detailed", "summary", "checklist"],
        default="detailed",
        help="detailed (whole, with neighbouring chunks), summary or checklist (default: detailed)",
    )
    p.add_argument("--project", help="the current project: a wall (default: every project)")
    p.add_argument("--task", help="the current task, for the scope pattern (default: none)")
    p.add_argument("--language", help="the current language, for the scope (default: none)")
    p.add_argument("--mode", choices=["keyword", "semantic", "hybrid"], help=argparse.SUPPRESS)
    p.add_argument("--now", help="the clock, ISO 8601 (default: the time it runs)")
    p.add_argument("--json", action="store_true", help="print the answer as JSON")

    p = sub.add_parser("similar", help="the memories nearest to one memory by meaning")
    p.add_argument("id", type=int, help="the memory's id")
    p.add_argument("-k", type=int, default=10, help="how many (default: 10)")
    p.add_argument("--project", help="only if it belongs to this project (default: any)")
    p.add_argument("--json", action="store_true", help="print results as JSON")

    p = sub.add_parser("stats", help="what the database holds")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")

    p = sub.add_parser("timeline", help="the memories around one memory in time")
    p.add_argument("id", type=int, help="the memory to look around")
    p.add_argument("--before", type=int, default=5, help="how many earlier memories (default: 5)")
    p.add_argument("--after", type=int, default=5, help="how many later memories (default: 5)")
    p.add_argument("--project", help="only if the anchor belongs to this project (default: any)")
    p.add_argument("--json", action="store_true", help="print the timeline as JSON")

    p = sub.add_parser("index", help="build derived indexes (the opt-in approximate one)")
    index_sub = p.add_subparsers(dest="index_command", required=True)
    q = index_sub.add_parser(
        "build", help="build the approximate vector index (used only by --approximate)"
    )
    q.add_argument(
        "--approximate", action="store_true", required=True,
        help="the approximate (IVF) vector index; searches use it only when asked",
    )  # fmt: skip
    q.add_argument("--nlist", type=int, help="lists (default: about 2 x sqrt(vectors))")
    q.add_argument("--json", action="store_true", help="print what was built as JSON")

    p = sub.add_parser("reindex", help="embed memories that lack vectors; rebuild the index")
    p.add_argument("--json", action="store_true", help="print the counts as JSON")

    p = sub.add_parser(
        "eval", help="measure retrieval quality on a BEIR-layout dataset or an agent set"
    )
    p.add_argument(
        "dataset",
        help="folder with corpus.jsonl, queries.jsonl, qrels/<split>.tsv; or agent, temporal"
        " or conversations (the sets of eval/, by store size and query kind)",
    )
    p.add_argument("--split", default="test", help="the qrels split to score (default: test)")
    p.add_argument(
        "--config",
        action="append",
        metavar="NAME",
        help="keyword, semantic, hybrid-rrf, hybrid-linear (repeatable; default: all)",
    )
    p.add_argument(
        "--eval-db", help="keep the imported corpus in this database, reused (default: a temp file)"
    )
    p.add_argument(
        "--plot",
        metavar="PNG",
        help="draw the metrics per configuration into this PNG (default: no plot)",
    )
    p.add_argument("--json", action="store_true", help="print the metrics as JSON")

    p = sub.add_parser("mcp", help="serve the memory tools to an MCP client over stdio")
    p.add_argument(
        "--project",
        action="append",
        metavar="NAME",
        help="serve only this project's memories (repeatable; every tool is confined to"
        " them; default: every project)",
    )

    p = sub.add_parser("serve", help="serve the HTTP API and the search page")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default: 8765; 0 picks one)")
    p.add_argument("--token", help="require this bearer token (default: $CORTEX_TOKEN)")
    p.add_argument(
        "--project",
        action="append",
        help="serve only this project (repeatable; default: every project)",
    )
    p.add_argument(
        "--cors-origin", action="append", default=[], help="allow this web origin (default: none)"
    )
    p.add_argument(
        "--rate-limit", default="50/s", help="per-client rate: N/s, N/min or off (default: 50/s)"
    )

    p = sub.add_parser("migrate", help="copy a database between SQLite and PostgreSQL (resumable)")
    p.add_argument("src", help="a database file or a postgresql:// URL")
    p.add_argument("dst", help="a postgresql:// URL or a database file")

    p = sub.add_parser("model", help="show the embedding model, or install it")
    p.add_argument(
        "action", nargs="?", choices=["show", "install"], default="show",
        help="show the active model, or install the default one (default: show)",
    )  # fmt: skip
    p.add_argument("--force", action="store_true", help="install again even if present")
    p.add_argument("--json", action="store_true", help="print the model's details as JSON")

    for command in sub.choices.values():  # every command, including ones added above later
        _add_global_options(command, top=False)
    return parser


# --------------------------------------------------------------------------- commands


def _db_path(args: argparse.Namespace) -> Path | str:
    """The database of this command: --db (a file or a ``postgresql://`` URL, never
    empty), else the default, whose per-user folder is cortex's own to create (a folder of
    --db never is)."""
    if args.db is not None:
        return db_location(args.db)
    if not os.environ.get("CORTEX_DB"):
        data_home().mkdir(parents=True, exist_ok=True)
    return default_db()


def _exists(db: Path | str) -> bool:
    """Whether the database is there to read: a file that exists; a server's database
    (a URL) always is (opening it says otherwise)."""
    return isinstance(db, str) or db.exists()


def _cmd_add(args: argparse.Namespace, out: TextIO) -> int:
    content = args.content
    if content is None or content == "-":
        if sys.stdin.isatty():
            raise UsageError("give the memory's text as an argument or on stdin")
        try:  # read bytes and decode here: invalid UTF-8 is a one-line error, not a crash
            stdin = getattr(sys.stdin, "buffer", None)
            content = stdin.read().decode("utf-8") if stdin is not None else sys.stdin.read()
        except UnicodeDecodeError as exc:
            raise UsageError(f"stdin is not valid UTF-8 (byte {exc.start})") from None
    metadata = None
    if args.metadata:
        try:
            metadata = json.loads(args.metadata)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--metadata is not JSON: {exc.msg}") from None
        except RecursionError:
            raise UsageError("--metadata is nested too deeply") from None
        except ValueError as exc:  # an integer of more digits than Python converts
            raise UsageError(f"--metadata: {str(exc).split(';')[0]}") from None
    created = None
    if args.created_at:
        try:
            created = datetime.fromisoformat(args.created_at.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"--created-at {args.created_at!r} is not an ISO 8601 date") from None
    with cortex.open(_db_path(args), keyword_index="off") as engine:
        memory_id = engine.add(
            content,
            project=args.project,
            session=args.session,
            sector=args.sector,
            tier=args.tier,
            scope=args.scope,
            category=args.category,
            salience=args.salience,
            confidence=args.confidence,
            created_at=created,
            metadata=metadata,
        )
        if args.json:
            _dump(engine.get(memory_id).to_dict(), out)
        else:
            out.write(f"added memory {memory_id}\n")
    return 0


def _cmd_import(args: argparse.Namespace, out: TextIO) -> int:
    failed = False
    reports = []
    with cortex.open(_db_path(args), keyword_index="saved") as engine:
        for path in args.paths:
            progress = ImportProgress(f"importing {path}")
            try:
                report = engine.import_path(
                    path,
                    project=args.project,
                    session=args.session,
                    progress=progress.file_done,
                    embed_progress=progress.embedded,
                    follow_links=args.follow_links,
                )
            finally:
                progress.finish()
            for where, reason in report.skipped:
                print(f"cortex: skipped {where}: {reason}", file=sys.stderr)
            reports.append({"path": path, **report.to_dict()})
            for where, error in report.errors:
                print(f"cortex: cannot import {where}: {error}", file=sys.stderr)
            failed = failed or bool(report.errors)
            if report.not_embedded and (report.counts.added or report.counts.updated):
                print(
                    "cortex: imported without embeddings (keyword search only until "
                    f"`cortex reindex`): {report.not_embedded}",
                    file=sys.stderr,
                )
            if not args.json:
                c = report.counts
                out.write(
                    f"{path}: {report.files} file(s); {c.added} added, {c.updated} updated, "
                    f"{c.unchanged} unchanged, {c.removed} removed"
                    + (f"; {len(report.errors)} failed" if report.errors else "")
                    + "\n"
                )
        # Save the in-memory keyword index (stores of AUTO_MIN memories and more), so
        # that later `cortex search` processes load it instead of scanning with FTS5.
        engine.keyword_index.persist()
    if args.json:
        _dump(reports, out)
    return EXIT_ERROR if failed else 0


def _search_options(args: argparse.Namespace) -> Options:
    changes = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(Options)
        if getattr(args, f.name, None) is not None
    }
    return Options(**changes)


def _cmd_search(args: argparse.Namespace, out: TextIO) -> int:
    options = _search_options(args)
    # "saved": the keyword index `cortex import` saved, when valid (FTS5 otherwise).
    with cortex.open(
        _db_path(args), read_only=not _exists(_db_path(args)), keyword_index="saved"
    ) as engine:
        results = engine.search(args.query, options)
    for notice in results.notices:
        print(f"cortex: {notice}", file=sys.stderr)
    if args.json:
        _dump(results.to_dict(), out)
    else:
        print_results(results, out)
    return 0


def _cmd_lens(args: argparse.Namespace, out: TextIO) -> int:
    if not args.lens_command:
        raise UsageError("cortex lens needs an action: save, list or delete")
    if args.lens_command == "list":
        db = _db_path(args)
        if not _exists(db):
            found: list[dict[str, Any]] = []
        else:
            with cortex.open(db, read_only=True, embedder=None, keyword_index="off") as engine:
                found = engine.lenses()
        if args.json:
            _dump(found, out)
        elif not found:
            out.write("no lenses saved (cortex lens save NAME --project X ...)\n")
        for lens in found if not args.json else ():
            shown = " ".join(f"{k}={v}" for k, v in lens["options"].items())
            note = f"  # {lens['description']}" if lens["description"] else ""
            out.write(f"{lens['name']}: {shown}{note}\n")
        return 0
    with cortex.open(_db_path(args), embedder=None, keyword_index="off") as engine:
        if args.lens_command == "delete":
            engine.delete_lens(args.name)
            out.write(f"deleted lens {args.name!r}\n")
            return 0
        lens = engine.save_lens(args.name, _search_options(args), description=args.description)
    if args.json:
        _dump(lens, out)
    else:
        shown = " ".join(f"{k}={v}" for k, v in lens["options"].items())
        out.write(f"saved lens {lens['name']!r}: {shown}\n")
    return 0


def _cmd_documents(args: argparse.Namespace, out: TextIO) -> int:
    db = _db_path(args)
    with cortex.open(db, read_only=not _exists(db), embedder=None, keyword_index="off") as e:
        found = e.search_documents(args.query, project=args.project, limit=args.limit)
    if args.json:
        _dump([d.to_dict() for d in found], out)
        return 0
    if not found:
        out.write("no documents\n")
    for n, d in enumerate(found, 1):
        where = f"{d.project}:{d.source_path}" if d.project else d.source_path
        out.write(f"{n:>3}. {d.score:.3f}  {d.title}  ({where}, {d.chunks} chunks)\n")
        if d.snippet:
            out.write(f"     {_marks(' '.join(d.snippet.split()), out.isatty())}\n")
    return 0


def _cmd_show(args: argparse.Namespace, out: TextIO) -> int:
    with cortex.open(_db_path(args), read_only=True, embedder=None, keyword_index="off") as engine:
        memory = engine.get(args.id, project=args.project)
    if args.json:
        _dump(memory.to_dict(), out)
        return 0
    data = memory.to_dict()
    content = data.pop("content")
    for key, value in data.items():
        if value not in (None, {}, ""):
            shown = f"{value:.6g}" if isinstance(value, float) else value
            out.write(f"{key:>14}: {shown}\n")
    out.write("\n" + content + "\n")
    return 0


def _cmd_context(args: argparse.Namespace, out: TextIO) -> int:
    changes = {k: getattr(args, k) for k in ("mode", "now") if getattr(args, k) is not None}
    with cortex.open(
        _db_path(args), read_only=not _exists(_db_path(args)), keyword_index="off"
    ) as engine:
        answer = engine.context(
            args.prompt,
            max_tokens=args.max_tokens,
            format=args.format,
            project=args.project,
            task=args.task,
            language=args.language,
            options=Options(**changes),
        )
    for notice in answer.notices:
        print(f"cortex: {notice}", file=sys.stderr)
    if args.json:
        _dump(answer.to_dict(), out)
        return 0
    out.write((answer.text or "(no memory on this)") + "\n\n")
    out.write(
        f"confidence {answer.confidence:.2f} · {len(answer.memories)} of"
        f" {answer.total_found} found · ~{answer.tokens} of {answer.max_tokens} tokens"
        f" · scope {answer.scope}\n"
    )
    if answer.suggestions:
        out.write("try: " + " | ".join(answer.suggestions) + "\n")
    return 0


def _cmd_similar(args: argparse.Namespace, out: TextIO) -> int:
    with cortex.open(
        _db_path(args), read_only=not _exists(_db_path(args)), keyword_index="off"
    ) as engine:
        results = engine.similar(args.id, args.k, project=args.project)
    if args.json:
        _dump(results.to_dict(), out)
    else:
        print_results(results, out)
    return 0


def _cmd_stats(args: argparse.Namespace, out: TextIO) -> int:
    with cortex.open(_db_path(args), read_only=True, embedder=None, keyword_index="off") as engine:
        stats = engine.stats()
    for key in ("oldest", "newest"):  # one format for both outputs: ISO 8601 in UTC
        if stats[key] is not None:
            stats[key] = iso(from_epoch(stats[key]))
    if args.json:
        _dump(stats, out)
        return 0
    for key in ("path", "schema_version", "memories", "deleted", "sources", "facts", "sessions"):
        out.write(f"{key:>14}: {stats[key]}\n")
    out.write(f"{'size':>14}: {stats['size_bytes'] / 1e6:.2f} MB\n")
    for key in ("oldest", "newest"):
        if stats[key] is not None:
            out.write(f"{key:>14}: {stats[key]}\n")
    if stats["projects"]:
        out.write(f"{'projects':>14}: ")
        out.write(", ".join(f"{p or '(none)'} {n}" for p, n in stats["projects"].items()) + "\n")
    for model, n in stats["embeddings"].items():
        out.write(f"{'embeddings':>14}: {n} ({model})\n")
    for model, n in stats.get("vectors_lost", {}).items():
        out.write(f"{'vectors lost':>14}: {n} ({model}; supplied, found by keyword only)\n")
    return 0


def _cmd_timeline(args: argparse.Namespace, out: TextIO) -> int:
    with cortex.open(_db_path(args), read_only=True, embedder=None, keyword_index="off") as engine:
        tl = engine.timeline(args.id, args.before, args.after, project=args.project)
    if args.json:
        _dump(tl.to_dict(), out)
        return 0
    for memory in (*tl.before, tl.anchor, *tl.after):
        mark = "→" if memory.id == tl.anchor.id else " "
        when = memory.created_at.isoformat(timespec="minutes") if memory.created_at else "-"
        text = " ".join(memory.content.split())
        out.write(f"{mark} {when}  {memory.id:>6}  {_clip(text, 80)}\n")
    for session in tl.sessions.values():
        out.write(f"  session {session.id}: {session.summary or ''}\n")
    return 0


def _cmd_index(args: argparse.Namespace, out: TextIO) -> int:
    params = {} if args.nlist is None else {"nlist": args.nlist}
    with cortex.open(_db_path(args), keyword_index="off") as engine:
        built = engine.build_approximate_index(**params)
    if args.json:
        _dump(built, out)
    else:
        out.write(
            f"approximate index of {built['rows']} vectors in {built['nlist']} lists:"
            f" {built['path']}\n"
        )
    return 0


def _cmd_reindex(args: argparse.Namespace, out: TextIO) -> int:
    with cortex.open(_db_path(args), keyword_index="off") as engine:
        done = engine.reindex(progress=Progress("embedding", unit="memories"))
    if args.json:
        _dump(done, out)
    else:
        out.write(
            f"embedded {done['embedded']} memories; index of {done['model_id']} holds "
            f"{done['rows']} vectors; {done['code_refs']} code references\n"
        )
    return 0


def _cmd_eval(args: argparse.Namespace, out: TextIO) -> int:
    import tempfile

    from cortex import eval as ev

    if args.dataset in ("agent", "temporal", "conversations") and not Path(args.dataset).is_dir():
        # the agent-setting sets of eval/ (cortex.agent_eval): nDCG, recall and abstention
        # per store size and query kind
        from cortex import agent_eval

        argv = ["--set", args.dataset, "--split", args.split]
        if args.json:
            argv.append("--json")
        if args.plot:
            argv += ["--plot", args.plot]
        for name in args.config or []:
            argv += ["--mode", name]
        return agent_eval.main(argv)

    unknown = [c for c in args.config or [] if c not in ev.CONFIGS]
    if unknown:
        raise UsageError(
            f"unknown --config {', '.join(unknown)}; choose from {', '.join(ev.CONFIGS)}"
        )
    configs = {c: ev.CONFIGS[c] for c in args.config} if args.config else ev.CONFIGS
    dataset = ev.load_beir(args.dataset, args.split)
    with tempfile.TemporaryDirectory() as tmp:
        # --eval-db: a file, or a postgresql:// URL (the evaluation on that backend)
        db = db_location(args.eval_db) if args.eval_db else Path(tmp) / "eval.db"
        with cortex.open(db) as engine:
            results = ev.run(engine, dataset, configs, progress=lambda label: Progress(label))
    if args.plot:
        ev.plot(
            results,
            args.plot,
            f"{Path(args.dataset).name} ({args.split}, {len(dataset.queries)} queries)",
        )
    if args.json:
        _dump([r.to_dict() for r in results], out)
        return 0
    out.write(
        f"{'configuration':<16} {'nDCG@10':>8} {'R@10':>8} {'R@100':>8} {'MRR@10':>8} {'s':>7}\n"
    )
    for r in results:
        out.write(
            f"{r.name:<16} {r.ndcg_at_10:>8.4f} {r.recall_at_10:>8.4f} {r.recall_at_100:>8.4f}"
            f" {r.mrr_at_10:>8.4f} {r.seconds:>7.1f}\n"
        )
    return 0


def mcp_sdk_missing(exc: ImportError) -> str:
    """The one line `cortex mcp` and `python -m cortex.mcp` print without the mcp extra."""
    return (
        f"`cortex mcp` needs the MCP SDK ({exc}); install the mcp extra: "
        "pip install 'cortex-memory[mcp]' (from a checkout: pip install '.[mcp]')"
    )


def _cmd_mcp(args: argparse.Namespace, out: TextIO) -> int:
    try:
        from cortex.mcp import serve  # lazy: importing the MCP SDK takes seconds
    except ImportError as exc:
        raise CortexError(mcp_sdk_missing(exc)) from None
    serve(_db_path(args), projects=args.project)
    return 0


def _cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    from cortex.server import serve  # lazy: the other commands need no web stack

    serve(
        _db_path(args),
        args.host,
        args.port,
        token=args.token or os.environ.get("CORTEX_TOKEN") or None,
        projects=args.project,
        cors_origins=args.cors_origin,
        rate_limit=args.rate_limit,
    )
    return 0


def _cmd_model(args: argparse.Namespace, out: TextIO) -> int:
    from cortex import model

    if args.action == "install":
        info = model.install_model(
            force=args.force, progress=lambda m: print(f"cortex: {m}", file=sys.stderr)
        )
    else:
        info = model.model_info()
    from cortex.query_int8 import installed_int8, query_encoder_choice

    # What a search embeds its query with: the int8 graph when installed and chosen (the
    # default), else the fp32 one (the embedder falls back to it, with a notice).
    int8 = installed_int8(info.path, info.files[0]) if info.files else None
    encoder = query_encoder_choice(None) if int8 is not None else "fp32"
    if args.json:
        _dump(
            {
                "model_id": info.model_id,
                "name": info.name,
                "path": str(info.path),
                "source": info.source,
                "dim": info.dim,
                "max_tokens": info.max_tokens,
                "files": [
                    {"name": f.name, "path": str(f.path), "sha256": f.sha256, "size": f.size}
                    for f in info.files
                ],
                "query_encoder": encoder,
                "query_graph": (
                    None
                    if int8 is None
                    else {"path": str(int8.path), "sha256": int8.sha256, "size": int8.size}
                ),
            },
            out,
        )
        return 0
    out.write(f"{'model':>10}: {info.model_id}\n")
    out.write(f"{'folder':>10}: {info.path} (from {info.source})\n")
    out.write(f"{'dimension':>10}: {info.dim}, up to {info.max_tokens} tokens\n")
    for f in info.files:
        out.write(f"{f.name:>10}: sha256 {f.sha256}  {f.size / 1e6:.1f} MB\n")
    if int8 is not None:
        out.write(f"{'int8':>10}: sha256 {int8.sha256}  {int8.size / 1e6:.1f} MB\n")
    out.write(f"{'queries':>10}: {encoder}\n")
    return 0


def _cmd_migrate(args: argparse.Namespace, out: TextIO) -> int:
    from cortex.pg.migrate import describe, migrate

    bars: dict[str, Progress] = {}

    def progress(table: str, done: int, total: int) -> None:
        bars.setdefault(table, Progress(f"copying {table}"))(done, total)

    copied = migrate(args.src, args.dst, progress=progress)
    out.write(f"copied {describe(args.src)} -> {describe(args.dst)}\n")
    for table, n in copied.items():
        out.write(f"{table:>22}: {n} rows\n")
    return 0


_COMMANDS = {
    "add": _cmd_add,
    "import": _cmd_import,
    "search": _cmd_search,
    "lens": _cmd_lens,
    "documents": _cmd_documents,
    "context": _cmd_context,
    "show": _cmd_show,
    "similar": _cmd_similar,
    "stats": _cmd_stats,
    "timeline": _cmd_timeline,
    "index": _cmd_index,
    "reindex": _cmd_reindex,
    "model": _cmd_model,
    "eval": _cmd_eval,
    "migrate": _cmd_migrate,
    "mcp": _cmd_mcp,
    "serve": _cmd_serve,
}


def utf8_console() -> None:
    """Make stdout and stderr UTF-8 on Windows, as they are elsewhere. There Python encodes
    redirected output (a pipe, a file, an agent reading it) in the ANSI code page
    (cp1252...), in which most of the world's text and cortex's own `…` and `→` cannot be
    written; the console itself takes UTF-8 either way. The error handler is kept."""
    if sys.platform != "win32":
        return
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        if isinstance(stream, io.TextIOWrapper) and encoding != "utf8":
            stream.reconfigure(encoding="utf-8", errors=stream.errors)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    utf8_console()
    out = sys.stdout
    try:
        args = build_parser().parse_args(argv)
        if args.verbose:
            to_stderr(logging.DEBUG)
        if not args.command:
            build_parser().print_help(out)
            return EXIT_USAGE
        return _COMMANDS[args.command](args, out)
    except UsageError as exc:
        print(f"cortex: usage error: {exc} (see `cortex --help`)", file=sys.stderr)
        return EXIT_USAGE
    except CortexError as exc:
        print(f"cortex: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("cortex: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except UnicodeError as exc:
        # Text that is not valid UTF-8 reached a place that must encode it (an argument
        # decoded by Python with surrogateescape, a file): the input's fault, not a bug.
        reason = getattr(exc, "reason", type(exc).__name__)
        print(f"cortex: error: input is not valid UTF-8 ({reason})", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        # The reader went away (`cortex search x | head`): not an error worth a message.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:  # a bug: one line, and the traceback only on request
        if os.environ.get("CORTEX_DEBUG"):
            raise
        print(
            f"cortex: internal error: {type(exc).__name__}: {exc} "
            "(set CORTEX_DEBUG=1 for the traceback, and please report it)",
            file=sys.stderr,
        )
        return EXIT_BUG


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
