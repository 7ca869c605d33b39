"""Documents (seed 000): the whole text of each imported Markdown file, searchable apart
from its chunks.

A question whose words are spread over a long note ("the runbook that covers both the
failover and the DNS cutover") matches no single chunk well, but it matches the file. The
import writes, beside a file's chunks, one ``documents`` row per (source, project): its
title (the first heading, else the file name), the chunks' text joined, and how many
chunks it has; FTS5 indexes title and text (`documents_fts`). :func:`search` ranks them
by BM25 (a title match counts double) under the project wall of the options;
``Engine.search_documents`` and ``Options(include_documents=True)`` use it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePath
from typing import Any

from cortex import keyword
from cortex.filters import project_ids
from cortex.options import Options
from cortex.result import from_epoch, iso

__all__ = ["Document", "search", "write_document"]

#: A title match weighs this much against a match in the text (FTS5 bm25 column weights).
TITLE_WEIGHT = 2.0
#: The most documents one search returns.
MAX_DOCUMENTS = 1000
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class Document:
    """One imported file as a whole: where it came from, its title and size, and, in a
    search, its score and a snippet around the first match."""

    id: int
    source_path: str
    project: str | None
    title: str
    chunks: int
    created_at: datetime | None
    updated_at: datetime | None
    score: float = 0.0
    snippet: str = ""
    content: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "source_path": self.source_path,
            "project": self.project,
            "title": self.title,
            "chunks": self.chunks,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
            "score": self.score,
            "snippet": self.snippet,
        }
        if self.content is not None:
            out["content"] = self.content
        return out


def title_of(source_path: str, text: str) -> str:
    """The first Markdown heading of `text`, else the file's name without its suffix."""
    m = _HEADING.search(text)
    return m.group(1).strip() if m else PurePath(source_path).stem


def write_document(
    tx: Any,
    source_path: str,
    project: str | None,
    chunks: Sequence[str],
    created_at: float | None,
) -> None:
    """Store (or replace) the document of (`source_path`, `project`) from its chunks; no
    chunks deletes it (the file was emptied or removed from that project)."""
    if not chunks:
        tx.execute(
            "DELETE FROM documents WHERE source_path = ? AND project_id IS ?",
            (source_path, project),
        )
        return
    text = "\n\n".join(chunks)
    now = time.time()
    tx.execute(
        "INSERT INTO documents (project_id, source_path, title, content, chunks, created_at,"
        " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT(source_path, ifnull(project_id, char(0))) DO UPDATE SET"
        " title = excluded.title, content = excluded.content, chunks = excluded.chunks,"
        " created_at = excluded.created_at, updated_at = excluded.updated_at"
        " WHERE documents.content IS NOT excluded.content",
        (
            project,
            source_path,
            title_of(source_path, text),
            text,
            len(chunks),
            created_at if created_at is not None else now,
            now,
        ),
    )


def _wall(opts: Options) -> tuple[str, list[Any]]:
    projects = project_ids(opts)
    if projects is None:
        return "", []
    return f" AND d.project_id IN ({','.join('?' * len(projects))})", list(projects)


def search(
    store: Any, query: str | None, opts: Options, *, limit: int = 10, content: bool = False
) -> list[Document]:
    """The documents matching `query` (any of its words; BM25, best first), or without
    text the newest documents, within the projects `opts` names (a project is a wall) and
    its `source_prefix`. `content` adds each document's whole text."""
    from cortex.search.plan import DROPPED

    wall, params = _wall(opts)
    if opts.source_prefix is not None:
        wall += " AND substr(d.source_path, 1, length(?)) = ?"
        params += [opts.source_prefix, opts.source_prefix]
    limit = max(1, min(int(limit), MAX_DOCUMENTS))
    cols = "d.id, d.source_path, d.project_id, d.title, d.chunks, d.created_at, d.updated_at"
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query or "")))
    terms = [w for w in words if w not in DROPPED] or words
    if not terms:
        rows = [
            (*r, 0.0)
            for r in store.query(
                f"SELECT {cols}, d.content FROM documents d WHERE 1 = 1{wall}"
                " ORDER BY d.created_at DESC, d.id DESC LIMIT ?",
                [*params, limit],
            )
        ]
    else:
        expression = " OR ".join(keyword.quote(t) for t in terms)
        rows = store.query(
            f"SELECT {cols}, d.content, -bm25(documents_fts, ?, 1.0) AS s"
            " FROM documents_fts JOIN documents d ON d.id = documents_fts.rowid"
            f" WHERE documents_fts MATCH ?{wall} ORDER BY s DESC, d.id LIMIT ?",
            [TITLE_WEIGHT, expression, *params, limit],
        )
    marker = keyword.highlighter(terms) if terms else None
    return [
        Document(
            id=int(r[0]),
            source_path=r[1],
            project=r[2],
            title=r[3],
            chunks=int(r[4]),
            created_at=from_epoch(r[5]),
            updated_at=from_epoch(r[6]),
            score=round(float(r[8]), 6),
            snippet=keyword.text_snippet(r[7], marker),
            content=r[7] if content else None,
        )
        for r in rows
    ]
