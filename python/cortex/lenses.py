"""Memory lenses (seed 002): a named, saved set of search filters and boosts.

A lens is how a user or an agent keeps a way of looking at the memories: "ops" = the
procedural and episodic memories of projects api and infra, recent first; "decisions" =
memories holding a decision fact, trusted ones first. ``Engine.save_lens("ops",
project=["api", "infra"], order_by="recency")`` stores it in the ``lenses`` table;
``Options(lens="ops")`` (``--lens ops``, the MCP argument `lens`) applies it: each option
the lens sets is used unless the search gives that option itself (an explicit option
wins; an option left at its default takes the lens's value). A lens never holds the page
(offset, cursor), the clock or what is recorded.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import Any

from cortex import validate
from cortex.errors import InvalidOptionError, NotFoundError
from cortex.options import Options, unknown_option

__all__ = ["LENS_FIELDS", "apply", "delete", "get", "list_lenses", "save"]

#: Options a lens cannot hold: the page, the clock, the recording and the lens itself.
_NOT_SAVED = frozenset(
    {"lens", "recorded_as", "offset", "cursor", "now", "record", "reinforce", "session_id"}
)
LENS_FIELDS = tuple(f.name for f in dataclasses.fields(Options) if f.name not in _NOT_SAVED)
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Options)}


def _plain(value: Any) -> Any:
    """An option's value as JSON."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, tuple | list):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


def _fields(options: Options | None, given: Mapping[str, Any]) -> dict[str, Any]:
    """The options a lens saves: those of `options` that differ from the defaults, then
    `given` (validated by building Options from them)."""
    for name in given:
        if name in _NOT_SAVED:
            raise InvalidOptionError(f"a lens cannot hold {name!r} (the page, clock or recording)")
        if name not in _DEFAULTS:
            raise InvalidOptionError(unknown_option(name, LENS_FIELDS))
    base = options if options is not None else Options()
    if not isinstance(base, Options):
        raise InvalidOptionError(f"options must be cortex.Options, not {type(base).__name__}")
    try:
        built = base.replace(**given)
    except TypeError as exc:
        raise InvalidOptionError(str(exc)) from None
    chosen = set(given) | {name for name in LENS_FIELDS if getattr(base, name) != _DEFAULTS[name]}
    out = {name: _plain(getattr(built, name)) for name in LENS_FIELDS if name in chosen}
    if not out:
        raise InvalidOptionError("a lens needs at least one option (a filter or a boost)")
    return out


def save(
    store: Any,
    name: str,
    options: Options | None = None,
    *,
    description: str | None = None,
    **given: Any,
) -> dict[str, Any]:
    """Save (or replace) the lens `name`: the options of `options` that differ from the
    defaults, and the keyword options `given`. Returns the lens as :func:`get` does."""
    validate.name("lens", name)
    if not isinstance(name, str) or not name.strip():
        raise InvalidOptionError("a lens needs a name")
    if description is not None:
        if not isinstance(description, str):
            raise InvalidOptionError("description must be a string")
        validate.check_text("description", description)
    fields = _fields(options, given)
    store.save_lens(name, json.dumps(fields, sort_keys=True), description, time.time())
    return get(store, name)


def _row(row: tuple[Any, ...]) -> dict[str, Any]:
    return {
        "name": row[0],
        "options": json.loads(row[1]),
        "description": row[2],
        "created_at": datetime.fromtimestamp(row[3]).astimezone().isoformat(),
        "updated_at": datetime.fromtimestamp(row[4]).astimezone().isoformat(),
    }


def get(store: Any, name: str) -> dict[str, Any]:
    """The lens `name`: {name, options, description, created_at, updated_at}."""
    rows = store.lens_rows(name)
    if not rows:
        names = [r[0] for r in store.lens_rows()]
        known = f"; the lenses are {', '.join(map(repr, names))}" if names else "; none is saved"
        raise NotFoundError(f"no lens named {name!r}{known}")
    return _row(rows[0])


def list_lenses(store: Any) -> list[dict[str, Any]]:
    """Every saved lens, by name."""
    return [_row(r) for r in store.lens_rows()]


def delete(store: Any, name: str) -> None:
    """Delete the lens `name` (NotFoundError when there is none)."""
    if not store.delete_lens(name):
        raise NotFoundError(f"no lens named {name!r}")


def apply(store: Any, opts: Options) -> Options:
    """`opts` with its lens applied: every option the lens holds that `opts` leaves at its
    default. Unchanged when `opts` names no lens; an unknown lens is an error (a lens
    silently ignored would widen the search it was meant to narrow)."""
    if opts.lens is None:
        return opts
    try:
        lens = get(store, opts.lens)
    except NotFoundError as exc:
        raise InvalidOptionError(str(exc)) from None
    changes = {
        name: value
        for name, value in lens["options"].items()
        if name in LENS_FIELDS and getattr(opts, name) == _DEFAULTS[name]
    }
    if not changes:
        return opts
    return opts.replace(**changes)
