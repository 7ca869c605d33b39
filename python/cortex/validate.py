"""The one place that decides what a write may hold, so that whatever is accepted can be read.

Every write path (``Engine.add`` / ``add_many`` / ``update`` / ``add_fact``, ``cortex add``
and ``import``, JSON/JSONL records, MCP ``memory_add``) and every search filter goes through
these functions. Each either returns the value as it will be stored or raises
:class:`~cortex.errors.InvalidOptionError` naming the field and the fix, in one line.

The limits are the range the readers handle (README, "Limits"):

- **Timestamps** (``created_at``, ``valid_until``, ``last_reinforced``): datetimes, ISO 8601
  strings (an offset is applied; no offset means UTC) or epoch seconds, finite, from
  1970-01-01T00:00:00Z up to (not including) 9999-12-31T00:00:00Z *after* the offset is
  applied. The upper bound leaves a day of room, so that a stored value shown in any time
  zone still has a year Python's ``datetime`` can hold (``9999-12-31T23:59:59-05:00`` is
  year 10000 in UTC, which no reader could convert).
- **Numbers**: ``salience`` and ``confidence`` in [0, 1]; a fact's ``decay_rate`` in
  [0, 1000] per day; real numbers only (not ``bool``, not ``"high"``), finite.
- **Text**: no NUL and no lone surrogate (UTF-16 halves that UTF-8 cannot encode, which
  SQLite would refuse with a raw ``UnicodeEncodeError``). Names (project, session,
  category, scope, sector, tier, fact type) at most 256 characters, a source path 4,096.
- **Metadata**: a JSON object with string keys, nested at most 32 deep, at most 64 KiB as
  JSON; numbers finite (no NaN / Infinity, so ``--json`` output is always valid JSON) and
  integers within int64 (what other JSON readers and SQLite's JSON functions hold).
- **Ids**: integers in [1, 2**63 - 1] (SQLite's rowid range).
"""

from __future__ import annotations

import json
import math
import reprlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from cortex.errors import InvalidOptionError
from cortex.ranking import RankInfo

__all__ = [
    "MAX_ID",
    "MAX_METADATA_BYTES",
    "MAX_METADATA_DEPTH",
    "MAX_NAME_CHARS",
    "MAX_PATH_CHARS",
    "MAX_TIMESTAMP",
    "MIN_TIMESTAMP",
    "check_text",
    "display",
    "memory_id",
    "metadata_json",
    "name",
    "number",
    "timestamp",
    "unit",
]

#: 1970-01-01T00:00:00Z: older dates are refused (Python cannot convert negative epochs on
#: every platform, and no memory predates the epoch).
MIN_TIMESTAMP = 0.0
#: 9999-12-31T00:00:00Z, excluded: the last instant that is still year 9999 in every time zone.
MAX_TIMESTAMP = datetime(9999, 12, 31, tzinfo=UTC).timestamp()
MAX_NAME_CHARS = 256
MAX_PATH_CHARS = 4096
MAX_METADATA_DEPTH = 32
MAX_METADATA_BYTES = 65_536
MAX_ID = 2**63 - 1
_INT64 = (-(2**63), 2**63 - 1)


def _has_lone_surrogate(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def is_encodable(value: str) -> bool:
    """Whether `value` can be written as UTF-8 (holds no lone surrogate)."""
    return not _has_lone_surrogate(value)


def display(value: object) -> str:
    """`value` as printable text: lone surrogates (a file name that is not UTF-8, decoded by
    Python with ``surrogateescape``) become ``\\xNN`` escapes instead of failing a write."""
    text = value if isinstance(value, str) else str(value)
    if not _has_lone_surrogate(text):
        return text
    return text.encode("utf-8", "surrogateescape" if _escapable(text) else "backslashreplace") \
        .decode("utf-8", "backslashreplace")  # fmt: skip


def _escapable(text: str) -> bool:
    # surrogateescape only encodes U+DC80..U+DCFF; other lone surrogates need backslashreplace
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in text)


def check_text(field: str, value: str) -> str:
    """Refuse text SQLite or UTF-8 output cannot hold: NUL and lone surrogates."""
    if "\x00" in value:
        raise InvalidOptionError(f"{field} holds NUL bytes; give text without them")
    if _has_lone_surrogate(value):
        raise InvalidOptionError(
            f"{field} holds a lone surrogate (text that is not valid Unicode, such as "
            f"invalid UTF-8 or a JSON \\ud800 escape); give valid UTF-8 text"
        )
    return value


def name(field: str, value: object, *, max_chars: int = MAX_NAME_CHARS) -> str | None:
    """An optional short name (project, session, category, scope, sector, tier)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidOptionError(f"{field} must be a string, not {type(value).__name__}")
    check_text(field, value)
    if len(value) > max_chars:
        raise InvalidOptionError(
            f"{field} is {len(value):,} characters; the limit is {max_chars:,}"
        )
    return value


def number(field: str, value: object, *, lo: float | None = None, hi: float | None = None) -> float:
    """A real, finite number within [lo, hi]; never OverflowError for a huge int."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidOptionError(f"{field} must be a number, not {_short(value)}")
    try:
        v = float(value)
    except OverflowError:
        raise InvalidOptionError(f"{field} is too large a number ({_short(value)})") from None
    if not math.isfinite(v):
        raise InvalidOptionError(f"{field} must be a finite number, not {value!r}")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        lo_s = "-inf" if lo is None else f"{lo:g}"
        hi_s = "inf" if hi is None else f"{hi:g}"
        raise InvalidOptionError(f"{field} must be in [{lo_s}, {hi_s}], not {_short(value)}")
    return v


def unit(field: str, value: object) -> float:
    """A number in [0, 1] (salience, confidence)."""
    return number(field, value, lo=0.0, hi=1.0)


def _short(value: object) -> str:
    """A bounded repr for messages: never recurses deep, never prints 5,000 digits."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        if value.bit_length() > 10_000:  # str() refuses ints of over 4,300 digits
            return f"an integer of {value.bit_length():,} bits"
        digits = str(value)
        return digits if len(digits) <= 40 else f"{digits[:20]}... ({len(digits):,} digits)"
    return _REPR.repr(value)


_REPR = reprlib.Repr()
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlevel = 3


def timestamp(field: str, value: object) -> float | None:
    """Epoch seconds (UTC) of a datetime, an ISO 8601 string or a number; None stays None.

    A datetime or string without an offset is UTC. The result is within
    [MIN_TIMESTAMP, MAX_TIMESTAMP), so every reader can turn it back into a datetime.
    """
    if value is None:
        return None
    original = value
    hint = "an ISO 8601 date such as 2026-01-31T09:30:00Z, a datetime or epoch seconds"
    if isinstance(value, str):
        check_text(field, value)
        text = value.strip()
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise InvalidOptionError(f"{field} must be {hint}, not {_short(value)}") from None
        value = parsed
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        try:
            seconds = moment.timestamp()
        except (OverflowError, ValueError, OSError):
            seconds = math.inf
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidOptionError(f"{field} must be {hint}, not {_short(value)}")
    else:
        try:
            seconds = float(value)
        except OverflowError:
            seconds = math.inf
        if math.isnan(seconds):
            raise InvalidOptionError(f"{field} must be {hint}, not NaN")
    if not MIN_TIMESTAMP <= seconds < MAX_TIMESTAMP:
        raise InvalidOptionError(
            f"{field} {_short(original)} is out of range: dates run from 1970-01-01 to "
            "9999-12-30 (UTC, after the time zone offset)"
        )
    return seconds


def memory_id(value: object, field: str = "id") -> int:
    """A memory id: an integer within SQLite's rowid range (never OverflowError)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptionError(f"a memory {field} is an integer, not {_short(value)}")
    if not 1 <= value <= MAX_ID:
        raise InvalidOptionError(
            f"a memory {field} is an integer from 1 to 2**63 - 1, not {_short(value)}"
        )
    return value


def metadata_json(value: object) -> str:
    """The JSON text of a metadata object, checked against the limits above."""
    if value is None:
        return "{}"
    if not isinstance(value, Mapping):
        raise InvalidOptionError(
            f"metadata must be a JSON object (a dict), not {type(value).__name__}"
        )
    _check_json(value, "metadata", 1)
    try:
        text = json.dumps(dict(value), ensure_ascii=False, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:  # mixed key types cannot be sorted
        raise InvalidOptionError(f"metadata is not JSON-serialisable: {exc}") from None
    size = len(text.encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise InvalidOptionError(
            f"metadata is {size:,} bytes as JSON; the limit is {MAX_METADATA_BYTES:,} "
            "(keep large data in a file and store its path)"
        )
    return text


def _check_json(value: Any, where: str, depth: int) -> None:
    """Walk a JSON value once; depth is bounded, so the recursion is too."""
    if depth > MAX_METADATA_DEPTH:
        raise InvalidOptionError(
            f"metadata is nested deeper than {MAX_METADATA_DEPTH} levels (at {_where(where)})"
        )
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        if _has_lone_surrogate(value):
            raise InvalidOptionError(
                f"{_where(where)} holds a lone surrogate (not valid Unicode); give valid text"
            )
        return
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise InvalidOptionError(
                f"{_where(where)} is an integer beyond 64 bits; store it as a string"
            )
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidOptionError(
                f"{_where(where)} is {value!r}; JSON has no NaN or Infinity (use null)"
            )
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidOptionError(
                    f"metadata keys are strings; {_where(where)} has the key {_short(key)}"
                )
            if _has_lone_surrogate(key):
                raise InvalidOptionError(
                    f"a key in {_where(where)} holds a lone surrogate (not valid Unicode)"
                )
            _check_json(item, f"{where}.{key}" if len(where) < 80 else where, depth + 1)
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_json(item, f"{where}[{i}]" if len(where) < 80 else where, depth + 1)
        return
    raise InvalidOptionError(f"{_where(where)} is a {type(value).__name__}, which JSON cannot hold")


def _where(path: str) -> str:
    return display(path)


# --------------------------------------------------------------------------- readers
# A row already on disk may hold what no write path accepts today (an older cortex, another
# tool, a hand edit). Readers check the few columns their arithmetic needs with these and
# skip a row that fails, instead of failing the whole search.


def _stored_real(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)  # an int within SQLite's int64 is always finite
    )


def _stored_time(value: object) -> bool:
    return _stored_real(value) and MIN_TIMESTAMP <= value < MAX_TIMESTAMP  # type: ignore[operator]


class CheckedRankInfo(RankInfo):
    """Ranking columns that passed rank_info_ok when they were read: the in-memory keyword
    index keeps these, and the searches that rank them do not check them again."""

    __slots__ = ()

    def _replace(self, /, **changes: Any) -> RankInfo:  # type: ignore[override]
        """A plain RankInfo: changed columns are checked again."""
        return RankInfo(*self)._replace(**changes)


def checked(info: RankInfo) -> RankInfo:
    """`info` as a CheckedRankInfo when it passes rank_info_ok, else as it is."""
    return CheckedRankInfo(*info) if rank_info_ok(info) else info


def rank_info_ok(info: Any) -> bool:
    """Whether a memory's ranking columns (cortex.ranking.RankInfo) can be ranked."""
    if type(info) is CheckedRankInfo:
        return True
    t, c, s, sector, path = info[:5]
    if (  # what SQLite returns for a row cortex wrote, checked without a call per column
        type(t) is float
        and type(c) is float
        and type(s) is float
        and MIN_TIMESTAMP <= t < MAX_TIMESTAMP
        and -math.inf < c < math.inf
        and -math.inf < s < math.inf
        and (sector is None or type(sector) is str)
        and (path is None or type(path) is str)
    ):
        return True
    return (
        _stored_time(info.created_at)
        and _stored_real(info.confidence)
        and _stored_real(info.salience)
        and isinstance(info.sector, str | None)
        and isinstance(info.source_path, str | None)
    )


def fact_row_ok(row: Any) -> bool:
    """Whether a fact row (id, memory_id, type, content, confidence, decay_rate,
    last_reinforced) can be decayed and shown: finite numbers, a non-negative rate (a
    negative one would overflow exp), a date in range."""
    return (
        isinstance(row[2], str)
        and isinstance(row[3], str)
        and _stored_real(row[4])
        and _stored_real(row[5])
        and 0.0 <= row[5] <= 1e6
        and _stored_time(row[6])
    )
