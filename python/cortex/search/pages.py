"""Pages and counts of a search: opaque cursors, and aggregations over the matches.

A cursor is what a page hands to the next: where it stopped, the clock it ran with and
the depth of its candidate pool, bound to the query and options by a fingerprint. Run
again with them, the search ranks the same candidates the same way (recency and time
words read the same clock), so following cursors returns every match exactly once while
nothing is written. It is opaque to callers (base64 of a small JSON object) and checked,
never trusted: a cursor of another search, or a damaged one, is an InvalidOptionError.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from cortex.errors import InvalidOptionError
from cortex.options import Options
from cortex.ranking import Candidate

__all__ = ["Cursor", "aggregations", "decode", "encode", "fingerprint"]

DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class Cursor:
    offset: int
    now: float
    pool: int
    fingerprint: str


def fingerprint(query: str | None, opts: Options) -> str:
    """What makes two requests the same search (everything but the page and the clock)."""
    same = opts.replace(offset=0, cursor=None, limit=1, now=None)
    fields = {f.name: getattr(same, f.name) for f in dataclasses.fields(same)}
    text = json.dumps([query, {k: repr(v) for k, v in fields.items()}], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def encode(cursor: Cursor) -> str:
    raw = json.dumps(
        {"o": cursor.offset, "n": cursor.now, "p": cursor.pool, "f": cursor.fingerprint},
        separators=(",", ":"),
    ).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(text: str, query: str | None, opts: Options) -> Cursor:
    """The cursor `text`, checked against the search it is used with."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        data = json.loads(raw)
        cursor = Cursor(int(data["o"]), float(data["n"]), int(data["p"]), str(data["f"]))
    except (binascii.Error, ValueError, TypeError, KeyError, OverflowError):
        raise InvalidOptionError(
            "cursor is not a next_cursor of cortex; pass the next_cursor of the page before"
        ) from None
    if not (0 <= cursor.offset <= 10_000_000 and 0 < cursor.pool <= 10_000_000) or not (
        _a_moment(cursor.now)
    ):
        raise InvalidOptionError("cursor is damaged; start again from the first page")
    if cursor.fingerprint != fingerprint(query, opts):
        raise InvalidOptionError(
            "cursor belongs to another search (another query or other options);"
            " start again from the first page"
        )
    return cursor


def _a_moment(when: float) -> bool:
    """Whether `when` is a moment a datetime can hold (the search reads its clock from
    it): a cursor's clock edited past year 9999 is damage, not an OverflowError."""
    try:
        datetime.fromtimestamp(when, UTC)
    except (OverflowError, ValueError, OSError):
        return False
    return True


def _bucket(when: float, unit: str) -> str:
    day = datetime.fromtimestamp(when, tz=UTC).date()
    if unit == "month":
        return day.replace(day=1).isoformat()
    if unit == "week":
        return (day - timedelta(days=day.weekday())).isoformat()
    return day.isoformat()


def counted(counts: dict[str, Any]) -> dict[str, Any]:
    """The aggregations of a listing counted in SQL (Store.filtered_aggregations), in the
    shape `aggregations` gives: for a listing whose matches outnumber the candidates."""
    days = counts["days"]
    unit = "day"
    if days:
        span = days[-1][0] - days[0][0]
        unit = "day" if span <= 60 else "week" if span <= 420 else "month"
    over_time: Counter[str] = Counter()
    for day, n in counts["days"]:
        over_time[_bucket(day * DAY, unit)] += n
    return {
        "total": counts["total"],
        "by_project": counts["by_project"],
        "by_category": counts["by_category"],
        "by_session": counts["by_session"],
        "by_fact_type": counts["by_fact_type"],
        "over_time": {
            "unit": unit,
            "buckets": [{"start": k, "count": over_time[k]} for k in sorted(over_time)],
        },
    }


def aggregations(ranked: Sequence[Candidate], sessions: dict[int, str]) -> dict[str, Any]:
    """Counts of the matches (every ranked candidate, not only the page): by project,
    category, session and fact type (the memories holding a fact of each type), and over
    time in day, week or month buckets chosen from the span so that there are at most
    ~60 of them."""
    by_project = Counter(c.info.project if c.info.project is not None else "" for c in ranked)
    by_category = Counter(c.info.category for c in ranked if c.info.category is not None)
    by_session = Counter(sessions[c.memory_id] for c in ranked if c.memory_id in sessions)
    by_fact_type = Counter(t for c in ranked for t in {f[2] for f in c.facts})
    times = [c.info.created_at for c in ranked]
    unit = "day"
    if times:
        span = (max(times) - min(times)) / DAY
        unit = "day" if span <= 60 else "week" if span <= 420 else "month"
    days: dict[int, str] = {}  # one date conversion per day, not per match
    over_time: Counter[str] = Counter()
    for t in times:
        day = int(t // DAY)
        bucket = days.get(day)
        if bucket is None:
            bucket = days[day] = _bucket(t, unit)
        over_time[bucket] += 1
    return {
        "total": len(ranked),
        "by_project": dict(by_project.most_common()),
        "by_category": dict(by_category.most_common()),
        "by_session": dict(by_session.most_common(50)),
        "by_fact_type": dict(by_fact_type.most_common()),
        "over_time": {
            "unit": unit,
            "buckets": [{"start": k, "count": over_time[k]} for k in sorted(over_time)],
        },
    }
