"""Answers shaped for an AI agent: what it reads, in as few tokens as it can be said.

An agent pays for every token of a tool's answer, and reads it all. ``Results.to_dict()``
is the whole record of a search (every score part, the memory's nineteen fields, its
session, facts, aggregations): ~1,130 JSON characters for ~104 characters of memory text.
:func:`lean_search` keeps what an agent acts on — per result its id, its text (whole when
short, else the snippet around the match), date, project, source, score and one line of
why it matched — with ``total_results`` and ``status``; ``explain`` adds the score parts,
``verbose`` gives the full record. Keys whose value is empty are left out.

:func:`estimate_tokens` is the measure used to compare shapes (benches/bench_agent.py):
characters / 4, the usual rule of thumb for English JSON under a cl100k-like tokenizer.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from cortex.keyword import ELLIPSIS, MARK_CLOSE, MARK_OPEN
from cortex.result import MatchType, Result, Results

__all__ = [
    "TEXT_LIMIT",
    "compact_json",
    "estimate_tokens",
    "lean_result",
    "lean_search",
    "short_date",
    "why",
]

#: A memory of at most this many characters is given whole; a longer one as its snippet
#: (the ~200 characters around the first match; memory_get reads the rest).
TEXT_LIMIT = 320


def estimate_tokens(text: str) -> int:
    """Tokens of `text` as an LLM counts them, roughly: characters / 4, rounded up."""
    return math.ceil(len(text) / 4)


def compact_json(data: Any) -> str:
    """JSON without the spaces of the default separators (they are tokens too)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def short_date(iso: str | None) -> str | None:
    """``2026-06-02T19:36:00Z`` as ``2026-06-02 19:36`` (minutes are enough to read)."""
    if not iso:
        return None
    day, _, time = iso.partition("T")
    return f"{day} {time[:5]}" if time[:5] and time[:5] != "00:00" else day


def _unmarked(text: str) -> str:
    return text.replace(MARK_OPEN, "").replace(MARK_CLOSE, "")


def _marked_words(snippet: str, limit: int = 4) -> list[str]:
    """The distinct words the snippet marks, in order (what the keyword leg matched)."""
    words: list[str] = []
    rest = snippet
    while MARK_OPEN in rest and len(words) < limit:
        _, _, rest = rest.partition(MARK_OPEN)
        word, _, rest = rest.partition(MARK_CLOSE)
        word = word.lower()
        if word and word not in words:
            words.append(word)
    return words


def why(result: Result) -> str:
    """One line on why `result` matched: the words the keyword leg found, the cosine of the
    meaning leg, a borrowed neighbour, a superseded status."""
    parts: list[str] = []
    words = _marked_words(result.snippet)
    kind = result.match_type
    if kind is MatchType.FILTER:
        parts.append("passes the filters")
    else:
        if result.bm25_score > 0 and kind is not MatchType.SEMANTIC:
            parts.append("words " + ", ".join(words) if words else "keyword match")
        if result.semantic_score > 0 and kind is not MatchType.BM25:
            parts.append(f"meaning {result.semantic_score:.2f}")
        if not parts:
            parts.append("next to a match" if kind is MatchType.BM25 else str(kind))
    if result.is_superseded:
        newer = result.superseded_by.id if result.superseded_by is not None else None
        parts.append(f"superseded by {newer}" if newer is not None else "superseded")
    return "; ".join(parts)


def _source(result: Result) -> str | None:
    m = result.memory
    if m.source_path:
        return m.source_path if m.chunk_index is None else f"{m.source_path}#{m.chunk_index}"
    session = result.source_session
    return f"session {session.id}" if session is not None else None


def lean_result(result: Result, *, explain: bool = False) -> dict[str, Any]:
    """The agent's view of one result (keys with no value are left out)."""
    m = result.memory
    out: dict[str, Any] = {"id": m.id}
    if len(m.content) <= TEXT_LIMIT or not result.snippet:
        out["text"] = m.content
    else:
        snippet = _unmarked(result.snippet)
        out["snippet"] = snippet if snippet.endswith(ELLIPSIS) else snippet + ELLIPSIS
    date = short_date(m.to_dict()["created_at"])
    if date:
        out["date"] = date
    if m.project is not None:  # "" is a project too
        out["project"] = m.project
    source = _source(result)
    if source:
        out["source"] = source
    out["score"] = round(result.score, 3)
    out["why"] = why(result)
    if result.context:
        out["context"] = {
            side: [{"id": c["id"], "text": c["content"]} for c in items]
            for side, items in result.context.items()
            if items
        }
    if result.thread:
        out["thread"] = [{"id": t["id"], "text": t["content"]} for t in result.thread]
    if explain and result.explain is not None:
        out["explain"] = {k: round(v, 4) for k, v in result.explain.items()}
    return out


def lean_search(
    results: Results, *, explain: bool = False, verbose: bool = False
) -> dict[str, Any]:
    """A search's answer for an agent: ``status``, ``total_results`` and the lean results,
    plus the paging, notices, interpretation and suggestions when there are any.

    `verbose` returns the full record (``Results.to_dict()``) with the two agent keys."""
    status = "ok" if len(results) else "no_match"
    if verbose:
        return {"status": status, "total_results": results.total, **results.to_dict()}
    out: dict[str, Any] = {"status": status, "total_results": results.total}
    if results.has_more:
        out["has_more"] = True
        out["next_cursor"] = results.next_cursor
    if results.notices:
        out["notices"] = list(results.notices)
    interpretation = _interpretation(results.interpretation)
    if interpretation:
        out["interpretation"] = interpretation
    suggestions = getattr(results, "suggestions", None)
    if suggestions:
        out["suggestions"] = list(suggestions)
    out["results"] = [lean_result(r, explain=explain) for r in results]
    return out


def _interpretation(data: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Only what changed the search: the time window that was applied, and the words
    searched in its place."""
    if not data or not data.get("timeframe") or not data.get("applied"):
        return None
    frame = data["timeframe"]
    out = {
        "window": frame.get("text"),
        "since": short_date(frame.get("since")),
        "until": short_date(frame.get("until")),
        "applied": data["applied"],
        "searched": data.get("searched"),
    }
    return {k: v for k, v in out.items() if v}
