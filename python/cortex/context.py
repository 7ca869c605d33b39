"""What an agent should read before it answers: seed 003's LLM endpoint as ``Engine.context``.

:func:`build` turns one search into a :class:`ContextAnswer`: the best memories, each with
the chunks around it (format ``detailed``), packed into a token budget; a calibrated
``confidence`` for the whole answer; follow-up ``suggestions``; and seed 004's scope
pattern of the agent's situation (:func:`scope_pattern`).

Confidence is a logistic model of the search's own evidence (:func:`features`: the best
result's fused relevance and its keyword and meaning parts, its lead over the next, how
many passed the floor), fitted on the tune half of the agent evaluation set to the
probability that the first memory is one the query is about (benches/tune_context.py;
its AUC on the test half is in BENCHMARKS.md). High when the top result clearly matches,
low when nothing does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cortex.agent import estimate_tokens, lean_result
from cortex.errors import InvalidOptionError
from cortex.result import Result, Results

__all__ = [
    "CONFIDENCE_MODEL",
    "FORMATS",
    "WINDOW_MODEL",
    "ContextAnswer",
    "build",
    "confidence",
    "features",
    "scope_pattern",
]

FORMATS = ("detailed", "summary", "checklist")
#: The largest budget a context answer may be given (a whole model's window).
MAX_TOKENS = 200_000
#: Memories searched for a context answer, at most (the budget decides how many are read).
CANDIDATES = 20

#: Names of :func:`features`, in order; the last says which model reads the others.
FEATURES = ("base", "bm25", "semantic", "cosine", "lead", "passed", "any", "window")
#: (intercept, weights of FEATURES but the last): fitted by benches/tune_context.py on the
#: agent set's tune split (hybrid, the three stores).
CONFIDENCE_MODEL: tuple[float, tuple[float, ...]] = (
    -8.869,
    (14.952, 1.370, 0.112, 1.592, 4.491, -4.780, 0.338),
)
#: The same for a search kept to the time window its query named ("what did we ship last
#: week"): the window is most of the answer, and the words left ("what did we ship") are
#: weak evidence. Fitted on the temporal set's tune split, the questions whose window
#: was applied (a strong ridge: few of them are answered wrong).
WINDOW_MODEL: tuple[float, tuple[float, ...]] = (
    1.031,
    (0.334, 0.328, 0.273, 0.186, 0.212, -0.197, 0.0),
)


def scope_pattern(
    project: str | None = None, task: str | None = None, language: str | None = None
) -> str:
    """Seed 004's scope of an agent's situation: ``project:X:task:Y`` with both,
    ``project:X*`` (the project and its tasks) with a project, ``language:X`` with only a
    language, else ``universal``."""
    if project and task:
        return f"project:{project}:task:{task}"
    if project:
        return f"project:{project}*"
    if language:
        return f"language:{language}"
    return "universal"


def scope_matches(pattern: str, scope: str | None) -> bool:
    """Whether a memory's `scope` falls under `pattern` (a trailing * is a prefix)."""
    if scope is None:
        return False
    if pattern.endswith("*"):
        return scope.startswith(pattern[:-1])
    return scope == pattern


def features(results: Sequence[Result]) -> list[float]:
    """The search's evidence that its first result answers it (FEATURES, in order).
    Needs results searched with ``explain=True``. `window`: the query named a time and
    the search kept to it ("what did we ship last week": the window is the answer)."""
    if not results:
        return [0.0] * len(FEATURES)
    understood = getattr(results, "interpretation", None) or {}
    window = 1.0 if str(understood.get("applied") or "").startswith("hard") else 0.0
    top = results[0].explain or {}
    base = float(top.get("base", results[0].score))
    second = float((results[1].explain or {}).get("base", 0.0)) if len(results) > 1 else 0.0
    return [
        base,
        float(top.get("bm25", results[0].bm25_score)),
        float(top.get("semantic", results[0].semantic_score)),
        float(top.get("cosine", 0.0)),
        max(0.0, base - second),
        min(len(results), 10) / 10.0,
        1.0,
        window,
    ]


def confidence(
    values: Sequence[float],
    model: tuple[float, Sequence[float]] | None = None,
    window_model: tuple[float, Sequence[float]] | None = None,
) -> float:
    """The calibrated probability that the answer's first memory is what was asked for
    (`values` from :func:`features`; the models default to the committed ones)."""
    if values[-1] and values[-2]:  # a window was applied and it held something
        intercept, weights = window_model or WINDOW_MODEL
    else:
        intercept, weights = model or CONFIDENCE_MODEL
    z = intercept + sum(w * v for w, v in zip(weights, values[:-1], strict=True))
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


@dataclass(frozen=True, slots=True)
class ContextAnswer:
    """What an agent should read for `prompt`, packed into `max_tokens`.

    `text` is the memories rendered in `format` (``detailed``: each whole, with the
    chunks around it; ``summary``: each as its text or snippet; ``checklist``: one line
    each), the part to paste into a prompt; `tokens` is its estimate (characters / 4),
    never above `max_tokens`. `memories` are the same memories as records (the lean shape
    of cortex.agent, plus `context` in the detailed format). `confidence` is calibrated
    (see the module), `suggestions` are follow-up queries, `scope` seed 004's pattern of
    the project / task / language given. `total_found` counts every match of the search,
    `notices` say how it ran.
    """

    prompt: str
    format: str
    max_tokens: int
    text: str
    tokens: int
    memories: tuple[dict[str, Any], ...]
    confidence: float
    suggestions: tuple[str, ...]
    scope: str
    total_found: int
    notices: tuple[str, ...] = ()
    interpretation: dict[str, Any] | None = field(default=None)

    @property
    def answer(self) -> str | None:
        """The checklist itself (seed 003's `answer`), None in the other formats."""
        return self.text if self.format == "checklist" and self.text else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "format": self.format,
            "answer": self.answer,
            "text": self.text,
            "memories": list(self.memories),
            "confidence": self.confidence,
            "suggestions": list(self.suggestions),
            "scope": self.scope,
            "total_found": self.total_found,
            "total_returned": len(self.memories),
            "token_estimate": self.tokens,
            "max_tokens": self.max_tokens,
            "notices": list(self.notices),
            "interpretation": self.interpretation,
        }


def check_format(value: object) -> str:
    if not isinstance(value, str) or value.strip().lower() not in FORMATS:
        raise InvalidOptionError(f"format must be one of {', '.join(FORMATS)}, not {value!r}")
    return value.strip().lower()


def check_budget(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKENS:
        raise InvalidOptionError(
            f"max_tokens must be an integer from 1 to {MAX_TOKENS}, not {value!r}"
        )
    return value


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _head(record: dict[str, Any]) -> str:
    """``[#12 2026-06-02 hydra]``: what a rendered memory starts with."""
    parts = [f"#{record['id']}"]
    parts += [str(record[k]) for k in ("date", "project") if record.get(k)]
    return "[" + " ".join(parts) + "]"


def _render(record: dict[str, Any], fmt: str, with_context: bool) -> str:
    body = record.get("text") or record.get("snippet") or ""
    if fmt == "checklist":
        return f"- {_one_line(body)} {_head(record)}"
    if fmt == "summary":
        return f"{_head(record)} {_one_line(body)}"
    lines = [f"{_head(record)} {body}"]
    ctx = record.get("context") if with_context else None
    if ctx:
        for side in ("before", "after"):
            for item in ctx.get(side, []):
                lines.append(f"  ({side} #{item['id']}) {_one_line(item['text'])}")
    return "\n".join(lines)


def pack(
    results: Sequence[Result], fmt: str, max_tokens: int
) -> tuple[list[dict[str, Any]], str, int]:
    """The records and text of as many of `results`, best first, as fit `max_tokens`.

    In the detailed format a memory that does not fit with its context is tried without
    it, then as its snippet; in every format one that still does not fit is skipped and a
    shorter one further down may take the room."""
    records: list[dict[str, Any]] = []
    pieces: list[str] = []
    used = 0
    for r in results:
        # the project always named (None too): the server's wall reads it on every item
        record = {**lean_result(r), "project": r.memory.project}
        if fmt == "detailed":
            whole = {**record, "text": r.memory.content}
            whole.pop("snippet", None)
            tries = [(whole, True), (whole, False), (record, False)]
        else:
            tries = [(record, False)]
        for candidate, with_context in tries:
            piece = _render(candidate, fmt, with_context)
            cost = estimate_tokens(piece + "\n")
            if used + cost <= max_tokens:
                kept = dict(candidate)
                if not with_context:
                    kept.pop("context", None)
                records.append(kept)
                pieces.append(piece)
                used += cost
                break
    text = "\n".join(pieces)
    return records, text, estimate_tokens(text)


def build(
    prompt: str,
    results: Results,
    *,
    fmt: str,
    max_tokens: int,
    scope: str,
    suggestions: Sequence[str],
    prefer_scope: bool = True,
) -> ContextAnswer:
    """The ContextAnswer of `results` (searched with explain=True for `prompt`);
    `prefer_scope` (a relevance order) lets memories of the scope rank higher."""
    ranked = list(results)
    if prefer_scope and scope != "universal":
        ranked.sort(
            key=lambda r: -r.score * (SCOPE_BOOST if scope_matches(scope, r.memory.scope) else 1.0)
        )
    records, text, tokens = pack(ranked, fmt, max_tokens)
    return ContextAnswer(
        prompt=prompt,
        format=fmt,
        max_tokens=max_tokens,
        text=text,
        tokens=tokens,
        memories=tuple(records),
        confidence=round(confidence(features(results)), 4),
        suggestions=tuple(suggestions),
        scope=scope,
        total_found=results.total,
        notices=results.notices,
        interpretation=results.interpretation,
    )


#: A memory whose scope falls under the agent's scope pattern ranks as if its score were
#: this much higher (an ordering among near-equals; the project filter is the wall).
SCOPE_BOOST = 1.25
