"""Import: Markdown files and folders (chunked by heading), JSON and JSONL records.

Each file is one *source*; importing it makes the store's memories of that source equal
its chunks (see :meth:`cortex.store.Store.sync_source`), in one transaction per file, so a
file is imported whole or not at all and re-importing unchanged content adds nothing.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cortex import validate
from cortex.errors import ImportFileError, InvalidOptionError
from cortex.store import MemoryInput, OnWrite, Store, SyncCounts

__all__ = ["ImportReport", "chunk_markdown", "date_of", "import_path", "parse_records"]

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
RECORD_SUFFIXES = frozenset({".json", ".jsonl", ".ndjson"})
#: Sections longer than this are split at paragraph boundaries: an embedding model reads
#: 256 tokens, and a result should be a passage a reader can take in.
MAX_CHUNK_CHARS = 2_000
#: Files are read in windows of about this many chunks, whose texts are embedded in one
#: call: sorted by length over the whole window, batches hold texts of equal length and
#: the model computes almost no padding (1 % against 116 % per file in chunks of 64 on
#: 2,000 SciFact texts). The first window holds IMPORT_FIRST_WINDOW chunks and each next
#: one twice as many, up to IMPORT_WINDOW: the first files are written (acknowledged to
#: the progress callback) within seconds, and a killed import loses at most one window
#: of embedding work; the window also bounds the texts and vectors held in memory.
IMPORT_FIRST_WINDOW = 8
IMPORT_WINDOW = 8192

_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_DATED = re.compile(r"^(\d{4})-(\d{2})-(\d{2})\.(?:md|markdown)$")
_RECORD_FIELDS = frozenset(
    {"content", "text", "project", "session", "sector", "tier", "scope", "category",
     "salience", "confidence", "created_at", "metadata"}
)  # fmt: skip


@dataclass(slots=True)
class ImportReport:
    """What an import did: per-file counts, and the files it could not import, with why."""

    files: int = 0
    counts: SyncCounts = field(default_factory=SyncCounts)
    errors: list[tuple[str, str]] = field(default_factory=list)
    #: Symbolic links left alone because they point out of the import root (see follow_links).
    skipped: list[tuple[str, str]] = field(default_factory=list)
    embedded: int = 0  # memories written with a vector of the active model
    not_embedded: str | None = None  # why memories were written without vectors

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "embedded": self.embedded,
            "not_embedded": self.not_embedded,
            "added": self.counts.added,
            "updated": self.counts.updated,
            "unchanged": self.counts.unchanged,
            "removed": self.counts.removed,
            "errors": [{"path": p, "error": e} for p, e in self.errors],
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
        }


def date_of(path: Path) -> float | None:
    """Epoch seconds of a dated note's day (``2026-11-18.md``, in any folder), else None."""
    m = _DATED.match(path.name)
    if not m:
        return None
    try:
        day = datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=UTC)
    except ValueError:
        return None
    return day.timestamp()


def chunk_markdown(text: str) -> list[str]:
    """Split Markdown into sections at ATX headings (not inside fenced code).

    A heading with no text of its own before the next heading is kept with the section that
    follows it, so ``# Project`` / ``## Setup`` / text becomes one chunk. Sections over
    MAX_CHUNK_CHARS are split at blank lines (the heading is repeated on each part).
    """
    sections: list[list[str]] = [[]]
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and _HEADING.match(line):
            current = sections[-1]
            if current and any(not _HEADING.match(x) and x.strip() for x in current):
                sections.append([])
        sections[-1].append(line)
    chunks: list[str] = []
    for lines in sections:
        body = "\n".join(lines).strip()
        if body:
            chunks.extend(_split_long(body))
    return chunks


def _split_long(section: str) -> list[str]:
    if len(section) <= MAX_CHUNK_CHARS:
        return [section]
    first, _, rest = section.partition("\n")
    heading = first if _HEADING.match(first) else ""
    paragraphs = re.split(r"\n\s*\n", rest if heading else section)
    parts: list[str] = []
    buf = ""
    for para in paragraphs:
        para = para.strip()
        while len(para) > MAX_CHUNK_CHARS:  # one huge paragraph: cut at a space
            cut = para.rfind(" ", 0, MAX_CHUNK_CHARS)
            cut = cut if cut > MAX_CHUNK_CHARS // 2 else MAX_CHUNK_CHARS
            if buf:
                parts.append(buf)
                buf = ""
            parts.append(para[:cut].strip())
            para = para[cut:].strip()
        if buf and len(buf) + len(para) + 2 > MAX_CHUNK_CHARS:
            parts.append(buf)
            buf = ""
        buf = f"{buf}\n\n{para}" if buf else para
    if buf:
        parts.append(buf)
    return [f"{heading}\n\n{p}" if heading and not p.startswith(heading) else p for p in parts]


def _parse_time(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ImportFileError(f"{where}: created_at must be a date, not {value!r}")
    if isinstance(value, int | float):
        try:
            seconds = float(value / 1000 if value > 1e11 else value)  # accept milliseconds too
        except OverflowError:  # an integer of hundreds of digits
            seconds = math.inf
        if not math.isfinite(seconds):
            raise ImportFileError(f"{where}: created_at is not a finite number of seconds")
        value = seconds
    if not isinstance(value, str | float):
        raise ImportFileError(f"{where}: created_at must be a string or a number")
    try:  # one set of rules for every write path: ISO 8601 or seconds, 1970..9999-12-30
        return validate.timestamp("created_at", value)
    except InvalidOptionError as exc:
        raise ImportFileError(f"{where}: {exc}") from None


def _record(
    obj: Any, where: str, source: str, index: int, project: str | None, session: str | None
) -> MemoryInput:
    if not isinstance(obj, Mapping):
        raise ImportFileError(f"{where}: a record is a JSON object, not {type(obj).__name__}")
    content = obj.get("content", obj.get("text"))
    if not isinstance(content, str):
        raise ImportFileError(f"{where}: a record needs a 'content' string")
    metadata = obj.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise ImportFileError(f"{where}: 'metadata' must be a JSON object")
    extra = {k: v for k, v in obj.items() if k not in _RECORD_FIELDS}
    if extra:  # unknown fields are kept, not lost: they go into the metadata
        metadata = {**extra, **metadata}
    try:
        return MemoryInput(
            content=content,
            project=obj.get("project", project),
            session=obj.get("session", session),
            source_path=source,
            chunk_index=index,
            sector=obj.get("sector"),
            tier=obj.get("tier"),
            scope=obj.get("scope"),
            category=obj.get("category"),
            salience=obj.get("salience", 0.5),
            confidence=obj.get("confidence", 1.0),
            created_at=_parse_time(obj.get("created_at"), where),
            metadata=metadata,
        )
    except InvalidOptionError as exc:
        raise ImportFileError(f"{where}: {exc}") from None


def parse_records(
    text: str, path: Path, project: str | None = None, session: str | None = None
) -> list[MemoryInput]:
    """Records of a JSON file (an object, an array of objects, or ``{"memories": [...]}``)
    or of a JSONL file (one object a line; blank lines skipped)."""
    source = str(path)
    if path.suffix.lower() == ".json":
        data = _loads(text, str(path), whole_file=True)
        if isinstance(data, Mapping) and isinstance(data.get("memories"), list):
            data = data["memories"]
        items = data if isinstance(data, list) else [data]
        return [
            _record(obj, f"{path}: record {i + 1}", source, i, project, session)
            for i, obj in enumerate(items)
        ]
    records: list[MemoryInput] = []
    # Lines end at "\n" only: str.splitlines() would also cut at U+0085, U+2028 and other
    # separators that JSON strings may hold raw, breaking a record written with
    # ensure_ascii=False (cortex's own --json output) in two.
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        obj = _loads(line, f"{path}:{lineno}")
        records.append(_record(obj, f"{path}:{lineno}", source, len(records), project, session))
    return records


def _loads(text: str, where: str, *, whole_file: bool = False) -> Any:
    """json.loads with every failure as ImportFileError: invalid JSON, nesting deeper than
    the parser's recursion limit, an integer of more digits than Python converts."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        line = f":{exc.lineno}" if whole_file else ""
        raise ImportFileError(f"{where}{line}: invalid JSON ({exc.msg})") from None
    except RecursionError:
        raise ImportFileError(f"{where}: JSON nested too deep to read") from None
    except ValueError as exc:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise ImportFileError(f"{where}: {str(exc).split(';')[0]}") from None


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImportFileError(f"{path}: cannot read ({exc.strerror})") from None
    if b"\x00" in data:
        raise ImportFileError(f"{path}: holds NUL bytes; not a text file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFileError(
            f"{path}: not valid UTF-8 (byte {exc.start}); convert it, e.g. "
            f"`iconv -f latin1 -t utf-8`"
        ) from None


def file_chunks(
    path: Path, project: str | None = None, session: str | None = None
) -> list[MemoryInput]:
    """The memories one file holds."""
    text = _read_text(path)
    if path.suffix.lower() in RECORD_SUFFIXES:
        return parse_records(text, path, project, session)
    created = date_of(path)
    source = str(path)
    try:
        return [
            MemoryInput(
                content=chunk,
                project=project,
                session=session,
                source_path=source,
                chunk_index=i,
                created_at=created,
            )
            for i, chunk in enumerate(chunk_markdown(text))
        ]
    except InvalidOptionError as exc:
        raise ImportFileError(f"{path}: {exc}") from None


def iter_files(
    root: Path, *, follow_links: bool = False, skipped: list[tuple[str, str]] | None = None
) -> Iterator[Path]:
    """The importable files under `root` (itself if a file), sorted, hidden folders skipped.

    A symbolic link whose target lies outside `root` is not followed unless `follow_links`
    (``x.md -> /etc/...`` must not import that file by surprise); it is listed in `skipped`.
    With `follow_links`, linked folders are walked too, each real folder once (no loops).
    """
    if root.is_file():
        yield root
        return
    base = root.resolve()
    seen: set[Path] = set()
    found: list[Path] = []
    for folder, dirs, names in os.walk(root, followlinks=follow_links):
        here = Path(folder)
        real = here.resolve()
        if real in seen:  # a link back to a folder already walked
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if skipped is not None and not follow_links:
            skipped.extend(
                (str(here / d), "a linked folder out of the import root (use --follow-links)")
                for d in dirs
                if (here / d).is_symlink() and not (here / d).resolve().is_relative_to(base)
            )
        for name in names:
            path = here / name
            if (
                name.startswith(".")
                or path.suffix.lower() not in MARKDOWN_SUFFIXES | RECORD_SUFFIXES
            ):
                continue
            if path.is_symlink():
                target = path.resolve()
                if not follow_links and not target.is_relative_to(base):
                    if skipped is not None:
                        skipped.append(
                            (str(path), "a link out of the import root (use --follow-links)")
                        )
                    continue
            if path.is_file():
                found.append(path)
    yield from sorted(found)


#: What one file can do that stops only that file: bad content (cortex's own errors), or
#: anything else of the file (unreadable while walked, a path too long, nesting too deep).
_FILE_ERRORS = (ImportFileError, InvalidOptionError, OSError, RecursionError, ValueError)


def _report_error(report: ImportReport, file: Path, exc: BaseException) -> None:
    """Name the file and what was wrong with it in the report; the import goes on."""
    if isinstance(exc, ImportFileError | InvalidOptionError):
        report.errors.append((validate.display(file), validate.display(str(exc))))
    else:
        report.errors.append(
            (validate.display(file), f"{type(exc).__name__}: {validate.display(exc)}")
        )


def import_path(
    store: Store,
    path: str | Path,
    *,
    project: str | None = None,
    session: str | None = None,
    progress: Callable[[int, int, Path], None] | None = None,
    embed: Callable[[list[MemoryInput]], OnWrite] | None = None,
    follow_links: bool = False,
) -> ImportReport:
    """Import a file or a folder. Each file is synced in its own transaction; a file that
    cannot be read or parsed is reported in `errors` and the others are still imported.

    `embed(chunks)` computes the vectors of the chunks of a window of files (8 chunks,
    then twice as many each time, up to IMPORT_WINDOW) before their transactions start
    (embedding is slow; the write lock is not held meanwhile) and returns the hook that
    stores them inside each file's transaction. Symbolic links out of the import root are
    left alone (listed in `skipped`) unless `follow_links`.
    """
    validate.name("project", project)
    validate.name("session", session)
    if not str(path).strip():  # Path("") is "." : an unset variable would import everything
        raise ImportFileError("the path to import is empty; give a file or a folder")
    root = Path(path).expanduser()
    if not root.exists():
        raise ImportFileError(f"{validate.display(root)}: no such file or folder")
    if root.is_file() and root.suffix.lower() not in MARKDOWN_SUFFIXES | RECORD_SUFFIXES:
        raise ImportFileError(
            f"{validate.display(root)}: cannot import a "
            f"{validate.display(root.suffix) or 'suffix-less'} file; "
            "cortex imports .md, .markdown, .json, .jsonl and .ndjson"
        )
    report = ImportReport()
    files = list(iter_files(root, follow_links=follow_links, skipped=report.skipped))
    report.skipped = [(validate.display(p), r) for p, r in report.skipped]
    done = 0
    start = 0
    limit = IMPORT_FIRST_WINDOW
    while start < len(files):
        # Read a window of files, embed all their chunks in one call (one length sort over
        # the window: the model pads every batch to its longest text), then write each
        # file in its own transaction as before. One bad file is reported; the rest go on.
        window: list[tuple[Path, str, list[MemoryInput]]] = []
        size = 0
        while start < len(files) and (not window or size < limit):
            file = files[start]
            start += 1
            try:
                source = str(file.resolve())
                if not validate.is_encodable(source):
                    raise ImportFileError(
                        f"{validate.display(file)}: the file name is not valid UTF-8; rename it"
                    )
                chunks = file_chunks(Path(source), project, session)
            except _FILE_ERRORS as exc:
                _report_error(report, file, exc)
                done += 1
                if progress is not None:
                    progress(done, len(files), file)
                continue
            window.append((file, source, chunks))
            size += len(chunks)
        limit = min(2 * limit, IMPORT_WINDOW)
        every = [c for _, _, chunks in window for c in chunks]
        on_write = embed(every) if embed is not None and every else None
        for file, source, chunks in window:
            try:
                groups: dict[str | None, list[MemoryInput]] = {}
                for chunk in chunks:
                    groups.setdefault(chunk.project, []).append(chunk)
                report.counts += store.sync_file(
                    source, project, groups, on_write if chunks else None
                )
                report.files += 1
            except _FILE_ERRORS as exc:
                _report_error(report, file, exc)
            done += 1
            if progress is not None:
                progress(done, len(files), file)
    return report
