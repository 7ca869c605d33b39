"""Sessions, provenance and recall: where a memory came from, what replaced it, what it
relates to, when it was recalled — and the writes a search makes after it has ranked.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cortex import validate
from cortex.errors import InvalidOptionError
from cortex.result import Memory, from_epoch, iso

__all__ = [
    "USAGES",
    "SessionContext",
    "SessionInfo",
    "SupersededBy",
    "Timeline",
    "end_session",
    "enrichment",
    "record_recall",
    "relate",
    "session_context",
    "start_session",
    "supersede",
    "timeline",
]

USAGES = ("created", "recalled", "updated", "reinforced")


@dataclass(frozen=True, slots=True)
class SessionInfo:
    id: str
    project: str | None
    started_at: datetime
    ended_at: datetime | None = None
    summary: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "project": self.project,
            "started_at": iso(self.started_at),
            "ended_at": iso(self.ended_at),
            "summary": self.summary,
        }


@dataclass(frozen=True, slots=True)
class SessionContext:
    """The latest session a memory took part in, how, and how big that session is."""

    session: SessionInfo
    memories_in_session: int
    usage: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session.to_dict(),
            "memories_in_session": self.memories_in_session,
            "usage": self.usage,
        }


@dataclass(frozen=True, slots=True)
class SupersededBy:
    id: int
    content: str  # the first 200 characters
    created_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "content": self.content, "created_at": iso(self.created_at)}


@dataclass(frozen=True, slots=True)
class Timeline:
    """Memories of the anchor's project around it in time, oldest first."""

    anchor: Memory
    before: tuple[Memory, ...]
    after: tuple[Memory, ...]
    sessions: dict[str, SessionInfo] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "anchor": self.anchor.to_dict(),
            "before": [m.to_dict() for m in self.before],
            "after": [m.to_dict() for m in self.after],
            "sessions": {k: v.to_dict() for k, v in self.sessions.items()},
        }


def _session_row(row: Sequence[Any]) -> SessionInfo | None:
    """A SessionInfo, or None for a damaged session row (its dates cannot be converted):
    the memory is still shown, without its session."""
    try:
        return SessionInfo(
            id=row[0],
            project=row[1],
            started_at=from_epoch(row[2]),  # type: ignore[arg-type]
            ended_at=from_epoch(row[3]),
            summary=row[4],
        )
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def start_session(
    store: Any,
    session_id: str | None = None,
    *,
    project: str | None = None,
    summary: str | None = None,
) -> str:
    """Open a session (a fresh id unless one is given) and return its id."""
    sid = session_id or uuid.uuid4().hex
    validate.name("session id", sid)
    validate.name("project", project)
    _check_summary(summary)
    store.start_session(sid, project, summary)
    return sid


def _check_summary(summary: object) -> None:
    if summary is not None:
        if not isinstance(summary, str):
            raise InvalidOptionError("a session summary is a string")
        validate.check_text("summary", summary)


def end_session(
    store: Any,
    session_id: str,
    *,
    summary: str | None = None,
    project: str | None = None,
) -> None:
    """End a session. A session belongs to a project: without `project`, the session id
    must name exactly one session (else the projects holding it are listed)."""
    validate.name("session id", session_id)
    _check_summary(summary)
    store.end_session(session_id, summary, project)


def link(store: Any, memory_id: int, session_id: str, usage: str) -> None:
    """Record that a memory was created, recalled, updated or reinforced in a session."""
    if usage not in USAGES:
        raise InvalidOptionError(f"usage must be one of {', '.join(USAGES)}, not {usage!r}")
    memory = store.get(memory_id)
    store.link(memory_id, session_id, usage, memory.project)


def supersede(store: Any, old_id: int, new_id: int) -> None:
    """Mark `old_id` as replaced by `new_id`: searches leave it out unless asked for it."""
    if old_id == new_id:
        raise InvalidOptionError("a memory cannot supersede itself")
    store.get(old_id)
    store.get(new_id)
    store.supersede(old_id, new_id)


def relate(
    store: Any,
    source_id: int,
    target_id: int,
    type: str = "RELATED_TO",
    created_by: str | None = None,
) -> None:
    store.get(source_id)
    store.get(target_id)
    store.relate(source_id, target_id, type, created_by)


def _sessions_of(store: Any, ids: Sequence[int]) -> dict[int, SessionInfo]:
    """The session each memory was created in (its first 'created' link)."""
    out: dict[int, SessionInfo] = {}
    for row in store.created_sessions(ids):  # oldest last, so the first 'created' link wins
        info = _session_row(row[1:])
        if info is not None:
            out[row[0]] = info
    return out


def session_context(
    store: Any, memory_id: int, *, project: str | None = None
) -> SessionContext | None:
    memory = store.get(memory_id, project=project)
    row = store.latest_session(memory_id, memory.project)
    if row is None:
        return None
    info = _session_row(row[:5])
    return None if info is None else SessionContext(info, int(row[6]), row[5])


def timeline(
    store: Any,
    anchor_id: int,
    before: int = 5,
    after: int = 5,
    *,
    project: str | None = None,
) -> Timeline:
    """The anchor and the memories of its project around it; with `project`, an anchor of
    another project is not found. A damaged neighbour row is skipped (the anchor itself
    damaged raises DamagedRowError)."""
    for name, value in (("before", before), ("after", after)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1000:
            raise InvalidOptionError(f"{name} must be an integer in [0, 1000], not {value!r}")
    anchor = store.get(anchor_id, project=project)
    earlier, later = store.around(anchor, before, after)
    before_m, after_m = tuple(earlier), tuple(later)
    ids = [m.id for m in (*before_m, anchor, *after_m)]
    sessions: dict[str, SessionInfo] = {}
    for row in store.sessions_touching(ids, anchor.project):  # the anchor's project only
        info = _session_row(row)
        if info is not None:
            sessions[row[0]] = info
    return Timeline(anchor, before_m, after_m, sessions)


@dataclass(frozen=True, slots=True)
class Enrichment:
    source_session: dict[int, SessionInfo]
    superseded_by: dict[int, SupersededBy]
    related: dict[int, int]


def enrichment(store: Any, memories: Sequence[Memory]) -> Enrichment:
    """Session, superseding memory and related count of each result, in three queries."""
    ids = [m.id for m in memories]
    sessions = _sessions_of(store, ids)
    superseding = [m.superseded_by for m in memories if m.superseded_by is not None]
    by: dict[int, SupersededBy] = {}
    if superseding:
        newer = store.get_many(superseding)
        for m in memories:
            if m.superseded_by is not None and m.superseded_by in newer:
                n = newer[m.superseded_by]
                if n.project != m.project or n.deleted_at is not None:
                    # A deleted replacement's text is gone for every reader.
                    # A project is a wall: another project's text never shows in this
                    # one's results (`memory.superseded_by` still holds the id).
                    continue
                by[m.id] = SupersededBy(n.id, n.content[:200], n.created_at)
    # Only relationships within the memory's own project count: a project is a wall.
    related = store.related_counts(ids)
    return Enrichment(sessions, by, related)


def reinforce(store: Any, ids: Sequence[int], amount: float) -> None:
    """Raise the salience of `ids` by `amount` (capped at 1.0), in one transaction."""
    if ids:
        store.reinforce(ids, amount)


def record_recall(
    store: Any,
    rows: Sequence[tuple[int, int | None, float]],
    *,
    query: str | None,
    session_id: str | None,
    lens: str | None,
    reinforce: float,
    at: float | None = None,
) -> None:
    """One transaction after a search has ranked: a recall_log row per result
    ``(memory_id, fact_id, score)``, access counts, reinforcement, and 'recalled' links.
    `at`: when the search ran (default now). Inside a caller's transaction it joins it
    (the background recorder writes a batch of searches in one)."""
    if rows:
        store.record_recall(
            rows, query=query, session_id=session_id, lens=lens, reinforce=reinforce, at=at
        )
