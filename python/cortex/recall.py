"""Sessions, provenance and recall: where a memory came from, what replaced it, what it
relates to, when it was recalled — and the writes a search makes after it has ranked.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cortex import validate
from cortex.errors import DamagedRowError, InvalidOptionError, NotFoundError
from cortex.result import Memory, from_epoch, iso
from cortex.store import _MEMORY_COLUMNS, SESSION_KEY, Store, row_to_memory

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
    store: Store,
    session_id: str | None = None,
    *,
    project: str | None = None,
    summary: str | None = None,
) -> str:
    """Open a session (a fresh id unless one is given) and return its id."""
    sid = session_id or uuid.uuid4().hex
    validate.name("session id", sid)
    validate.name("project", project)
    if summary is not None:
        if not isinstance(summary, str):
            raise InvalidOptionError("a session summary is a string")
        validate.check_text("summary", summary)
    with store.transaction() as tx:
        tx.execute(
            "INSERT INTO sessions (id, project_id, started_at, summary) VALUES (?, ?, ?, ?)"
            f" ON CONFLICT{SESSION_KEY} DO UPDATE SET"
            " summary = COALESCE(excluded.summary, summary)",
            (sid, project, time.time(), summary),
        )
    return sid


def end_session(
    store: Store,
    session_id: str,
    *,
    summary: str | None = None,
    project: str | None = None,
) -> None:
    """End a session. A session belongs to a project: without `project`, the session id
    must name exactly one session (else the projects holding it are listed)."""
    validate.name("session id", session_id)
    if summary is not None:
        if not isinstance(summary, str):
            raise InvalidOptionError("a session summary is a string")
        validate.check_text("summary", summary)
    with store.transaction() as tx:
        if project is None:
            projects = [r[0] for r in tx.execute(
                "SELECT project_id FROM sessions WHERE id = ?", (session_id,)
            ).fetchall()]  # fmt: skip
            if len(projects) > 1:
                raise InvalidOptionError(
                    f"session {session_id!r} exists in several projects "
                    f"({', '.join(repr(p) for p in projects)}); pass project="
                )
            project = projects[0] if projects else None
        cur = tx.execute(
            "UPDATE sessions SET ended_at = ?, summary = COALESCE(?, summary)"
            " WHERE id = ? AND project_id IS ?",
            (time.time(), summary, session_id, project),
        )
        if cur.rowcount == 0:
            raise NotFoundError(f"no session with id {session_id!r}")


def link(store: Store, memory_id: int, session_id: str, usage: str) -> None:
    """Record that a memory was created, recalled, updated or reinforced in a session."""
    if usage not in USAGES:
        raise InvalidOptionError(f"usage must be one of {', '.join(USAGES)}, not {usage!r}")
    memory = store.get(memory_id)
    with store.transaction() as tx:
        store._link_session(tx, session_id, memory_id, usage, memory.project, time.time())


def supersede(store: Store, old_id: int, new_id: int) -> None:
    """Mark `old_id` as replaced by `new_id`: searches leave it out unless asked for it."""
    if old_id == new_id:
        raise InvalidOptionError("a memory cannot supersede itself")
    store.get(old_id)
    store.get(new_id)
    now = time.time()
    with store.transaction() as tx:
        tx.execute(
            "UPDATE memories SET superseded_by = ?, valid_until = COALESCE(valid_until, ?)"
            " WHERE id = ?",
            (new_id, now, old_id),
        )
        tx.execute(
            "INSERT INTO memory_relationships (source_id, target_id, type, created_by, created_at)"
            " VALUES (?, ?, 'SUPERSEDES', 'cortex', ?) ON CONFLICT DO NOTHING",
            (new_id, old_id, now),
        )


def relate(
    store: Store,
    source_id: int,
    target_id: int,
    type: str = "RELATED_TO",
    created_by: str | None = None,
) -> None:
    store.get(source_id)
    store.get(target_id)
    with store.transaction() as tx:
        tx.execute(
            "INSERT INTO memory_relationships (source_id, target_id, type, created_by, created_at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (source_id, target_id, type, created_by, time.time()),
        )


def _sessions_of(store: Store, ids: Sequence[int]) -> dict[int, SessionInfo]:
    """The session each memory was created in (its first 'created' link)."""
    out: dict[int, SessionInfo] = {}
    if not ids:
        return out
    marks = ",".join("?" * len(ids))
    # A memory's session is the one of its own project (sessions belong to a project).
    rows = store.query(
        "SELECT sm.memory_id, s.id, s.project_id, s.started_at, s.ended_at, s.summary"
        " FROM session_memories sm JOIN memories m ON m.id = sm.memory_id"
        " JOIN sessions s ON s.id = sm.session_id AND s.project_id IS m.project_id"
        f" WHERE sm.usage = 'created' AND sm.memory_id IN ({marks})"
        " ORDER BY sm.created_at DESC, sm.rowid DESC",
        list(ids),
    )
    for row in rows:  # oldest last, so the first 'created' link wins
        info = _session_row(row[1:])
        if info is not None:
            out[row[0]] = info
    return out


def session_context(
    store: Store, memory_id: int, *, project: str | None = None
) -> SessionContext | None:
    memory = store.get(memory_id, project=project)
    rows = store.query(
        "SELECT s.id, s.project_id, s.started_at, s.ended_at, s.summary, sm.usage,"
        " (SELECT COUNT(DISTINCT x.memory_id) FROM session_memories x"
        "  JOIN memories xm ON xm.id = x.memory_id"
        "  WHERE x.session_id = s.id AND xm.project_id IS s.project_id)"
        " FROM session_memories sm JOIN sessions s ON s.id = sm.session_id"
        " WHERE sm.memory_id = ? AND s.project_id IS ?"
        " ORDER BY sm.created_at DESC, sm.rowid DESC LIMIT 1",
        (memory_id, memory.project),
    )
    if not rows:
        return None
    row = rows[0]
    info = _session_row(row[:5])
    return None if info is None else SessionContext(info, int(row[6]), row[5])


def timeline(
    store: Store,
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
    created = anchor.created_at.timestamp() if anchor.created_at else 0.0
    live = "deleted_at IS NULL AND project_id IS ?"
    earlier = store.query(
        f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE {live}"
        " AND (created_at < ? OR (created_at = ? AND id < ?))"
        " ORDER BY created_at DESC, id DESC LIMIT ?",
        (anchor.project, created, created, anchor_id, before),
    )
    later = store.query(
        f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE {live}"
        " AND (created_at > ? OR (created_at = ? AND id > ?))"
        " ORDER BY created_at, id LIMIT ?",
        (anchor.project, created, created, anchor_id, after),
    )
    before_m = tuple(_readable(reversed(earlier)))
    after_m = tuple(_readable(later))
    ids = [m.id for m in (*before_m, anchor, *after_m)]
    marks = ",".join("?" * len(ids))
    sessions: dict[str, SessionInfo] = {}
    for row in store.query(  # the sessions of the anchor's project only
        "SELECT DISTINCT s.id, s.project_id, s.started_at, s.ended_at, s.summary"
        " FROM session_memories sm JOIN sessions s ON s.id = sm.session_id"
        f" WHERE sm.memory_id IN ({marks}) AND s.project_id IS ?",
        [*ids, anchor.project],
    ):
        info = _session_row(row)
        if info is not None:
            sessions[row[0]] = info
    return Timeline(anchor, before_m, after_m, sessions)


def _readable(rows: Any) -> list[Memory]:
    """The memories of `rows` that can be read (a damaged row is left out)."""
    out = []
    for row in rows:
        try:
            out.append(row_to_memory(row))
        except DamagedRowError:
            continue
    return out


@dataclass(frozen=True, slots=True)
class Enrichment:
    source_session: dict[int, SessionInfo]
    superseded_by: dict[int, SupersededBy]
    related: dict[int, int]


def enrichment(store: Store, memories: Sequence[Memory]) -> Enrichment:
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
    related: dict[int, int] = {}
    if ids:
        marks = ",".join("?" * len(ids))
        # Only relationships within the memory's own project count: a project is a wall.
        for memory_id, count in store.query(
            "SELECT id, SUM(n) FROM ("
            " SELECT r.source_id AS id, COUNT(*) AS n FROM memory_relationships r"
            " JOIN memories a ON a.id = r.source_id JOIN memories b ON b.id = r.target_id"
            f" WHERE r.source_id IN ({marks}) AND a.project_id IS b.project_id"
            " GROUP BY r.source_id UNION ALL"
            " SELECT r.target_id AS id, COUNT(*) AS n FROM memory_relationships r"
            " JOIN memories a ON a.id = r.source_id JOIN memories b ON b.id = r.target_id"
            f" WHERE r.target_id IN ({marks}) AND a.project_id IS b.project_id"
            " GROUP BY r.target_id) GROUP BY id",
            [*ids, *ids],
        ):
            related[memory_id] = int(count)
    return Enrichment(sessions, by, related)


def reinforce(store: Store, ids: Sequence[int], amount: float) -> None:
    """Raise the salience of `ids` by `amount` (capped at 1.0) and log the reinforcement,
    in one transaction."""
    if not ids:
        return
    with store.transaction() as tx:
        tx.executemany(
            "UPDATE memories SET salience = MIN(1.0, ROUND(salience + ?, 6)) WHERE id = ?",
            [(amount, m) for m in ids],
        )


def record_recall(
    store: Store,
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
    if not rows:
        return
    now = time.time() if at is None else at
    with store.transaction() as tx:
        tx.executemany(
            "INSERT INTO recall_log (memory_id, fact_id, query, session_id, lens, score,"
            " recalled_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(m, f, query, session_id, lens, s, now) for m, f, s in rows],
        )
        tx.executemany(
            "UPDATE memories SET access_count = access_count + 1, last_accessed = ?,"
            # rounded: 0.5 + 7 × 0.02 is 0.64, not 0.6400000000000001
            " salience = ROUND(MIN(1.0, salience + ?), 6) WHERE id = ?",
            [(now, reinforce, m) for m, _, _ in rows],
        )
        if session_id:
            # The session of each recalled memory's own project (sessions belong to one).
            marks = ",".join("?" * len(rows))
            tx.execute(
                "INSERT INTO sessions (id, project_id, started_at)"
                f" SELECT DISTINCT ?, project_id, ? FROM memories WHERE id IN ({marks})"
                f" ON CONFLICT{SESSION_KEY} DO NOTHING",
                [session_id, now, *[m for m, _, _ in rows]],
            )
            tx.executemany(
                "INSERT INTO session_memories (session_id, memory_id, usage, created_at)"
                " VALUES (?, ?, 'recalled', ?)",
                [(session_id, m, now) for m, _, _ in rows],
            )
