"""Who may call the server, and how often: tokens, project walls, rate limits, hosts.

Everything here is plain Python with no Starlette in it, so each rule can be read (and
tested) on its own. The app applies them in this order for every ``/api/`` request: the
Host header (DNS rebinding), the token, the rate limit, then the project wall inside each
endpoint.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cortex.errors import InvalidOptionError

__all__ = [
    "LOOPBACK_NAMES",
    "MIN_TOKEN_LENGTH",
    "Access",
    "RateLimiter",
    "TokenTable",
    "host_allowed",
    "is_loopback",
    "parse_rate",
]

#: Host names that mean "this machine"; a server without a token answers only requests
#: whose Host header is one of them (or the address it is bound to), so a web page on
#: another origin that rebinds its DNS name to 127.0.0.1 cannot read or write memories.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
#: A token shorter than this is refused when the server starts: it could be guessed.
MIN_TOKEN_LENGTH = 16


def is_loopback(host: str) -> bool:
    """Whether binding to `host` keeps the server on this machine."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a name that resolves elsewhere, or a typo: treat it as public


def _host_name(header: str) -> str:
    """The host of a Host header, without its port (``[::1]:8765`` -> ``::1``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def host_allowed(header: str | None, trusted: Iterable[str]) -> bool:
    """Whether a request's Host header names one of the `trusted` hosts."""
    if not header:
        return False
    name = _host_name(header)
    return any(name == t.strip("[]").lower() for t in trusted)


@dataclass(frozen=True, slots=True)
class Access:
    """What one request may see: the projects it is confined to (None: all of them), and
    who it is for the logs and the recall log (never the token itself)."""

    projects: frozenset[str] | None
    client: str

    def admits(self, project: str | None) -> bool:
        return self.projects is None or (project is not None and project in self.projects)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def token_label(token: str) -> str:
    """A name for a token in logs: the first 8 hex digits of its SHA-256, not the token."""
    return "token-" + _digest(token).hex()[:8]


class TokenTable:
    """The accepted tokens, each with the projects it is limited to (None: the server's).

    A request's token is compared with every accepted token through
    :func:`hmac.compare_digest` on SHA-256 digests, so the time taken says neither how
    much of a token matched nor which token it was.
    """

    def __init__(self, tokens: Mapping[str, Sequence[str] | None]) -> None:
        self._entries: list[tuple[bytes, frozenset[str] | None, str]] = []
        for token, projects in tokens.items():
            if not isinstance(token, str) or len(token) < MIN_TOKEN_LENGTH:
                raise InvalidOptionError(
                    f"a token must be at least {MIN_TOKEN_LENGTH} characters; make one with "
                    "python -c 'import secrets; print(secrets.token_urlsafe())'"
                )
            walls = None if projects is None else frozenset(projects)
            self._entries.append((_digest(token), walls, token_label(token)))

    def __bool__(self) -> bool:
        return bool(self._entries)

    def match(self, presented: str) -> tuple[frozenset[str] | None, str] | None:
        """The (projects, label) of the token presented, or None when it is not accepted."""
        digest = _digest(presented)
        found = None
        for expected, projects, label in self._entries:  # no early exit: constant time
            if hmac.compare_digest(digest, expected):
                found = (projects, label)
        return found


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*$", re.I)
_PER = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0}


def parse_rate(text: str) -> float | None:
    """Requests per second of a rate such as ``50/s``, ``600/min`` or ``off`` (None)."""
    if text.strip().lower() in ("off", "none", "0", "unlimited"):
        return None
    match = _RATE.match(text)
    if not match:
        raise InvalidOptionError(
            f"a rate limit is N/s, N/min, N/hour or off (such as 50/s), not {text!r}"
        )
    count, unit = float(match.group(1)), match.group(2).lower()
    per = _PER.get(unit, 3600.0)
    if not math.isfinite(count) or count <= 0:
        raise InvalidOptionError(f"a rate limit must be positive, not {text!r}")
    return count / per


class RateLimiter:
    """A token bucket per client: `rate` requests a second on average, bursts of `burst`.

    Called only from the event loop's thread, so it needs no lock. Idle clients' buckets
    are dropped once more than `max_clients` are held, so many clients cannot grow it
    without bound.
    """

    def __init__(self, rate: float, burst: float | None = None, max_clients: int = 10_000):
        self.rate = rate
        self.burst = burst if burst is not None else max(1.0, rate)
        self.max_clients = max_clients
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, client: str, now: float | None = None) -> float:
        """0 when `client` may make a request now, else the seconds until it may."""
        now = time.monotonic() if now is None else now
        tokens, last = self._buckets.get(client, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        if tokens < 1.0:
            self._buckets[client] = (tokens, now)
            return (1.0 - tokens) / self.rate
        if len(self._buckets) >= self.max_clients and client not in self._buckets:
            self._prune(now)
        self._buckets[client] = (tokens - 1.0, now)
        return 0.0

    def _prune(self, now: float) -> None:
        full = [
            c
            for c, (tokens, last) in self._buckets.items()
            if tokens + (now - last) * self.rate >= self.burst
        ]
        for c in full or list(self._buckets)[: len(self._buckets) // 2]:
            del self._buckets[c]
