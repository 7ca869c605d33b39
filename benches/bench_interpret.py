"""Query interpretation latency, p50 and p99, with and without time words, beside two peers.

    python benches/bench_interpret.py [--queries 300] [--repeat 20] [--peer-queries 100]

Queries, built the same way every run (seeded), in three sets:

- "time": agent-style questions with a time expression, from templates × topics × ~70
  expressions (English and Chinese), e.g. "How did I fix the auth bug last week?".
- "plain": the same templates and topics with no time words ("How did I fix the auth bug?"):
  the quick path when no digit and no trigger word occurs.
- "scifact": SciFact claims as written (real text, often with digits, so the full scan runs),
  read in place from the shared data folder when it is there.

cortex's `interpret` is timed per call (perf_counter_ns), each query `--repeat` times,
interleaved with the peers so machine noise falls on all alike. The peers, in the same run:

- floor: `cortex.keyword._terms`, the tokenizing the keyword leg already does per query: what
  any per-query step costs at least in Python.
- dateparser: `dateparser.search.search_dates(q, languages=["en"], settings={"RELATIVE_BASE":
  now})`, what one would reach for to find dates in text (it returns points, not windows);
  English queries only, `--peer-queries` of them, once each after one warm-up call.
  Skipped when dateparser is not installed (benches/requirements.txt).

Correctness is printed beside the times: the share of "time" queries that got a window (all
should) and of "plain" queries that got none (all should).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from cortex.interpret import interpret
from cortex.keyword import _terms

NOW = datetime(2026, 3, 18, 15, 30, tzinfo=UTC)
#: The shared data folder, beside the main checkout (parents[2]) or beside a worktree's parent.
DEFAULT_DATA = next(
    (p / "shared" / "data" / "scifact" for p in Path(__file__).resolve().parents[2:4]
     if (p / "shared" / "data" / "scifact").exists()),
    Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact",
)  # fmt: skip

TEMPLATES = [
    "How did I fix the {t} {time}?",
    "what was I working on with {t} {time}",
    "{time} notes about {t}",
    "decisions on {t} {time}",
    "why did the {t} break {time}",
    "{t} {time}",
    "what did we discuss about {t} {time}?",
    "summary of {t} changes {time}",
]
TOPICS = [
    "auth bug", "postgres migration", "rate limiter", "deploy pipeline", "cache invalidation",
    "api gateway", "onboarding flow", "billing webhook", "search ranking", "memory leak",
    "kubernetes ingress", "feature flags", "retry policy", "schema change", "login page",
]  # fmt: skip
TIMES = [
    "yesterday", "today", "last week", "this week", "last Tuesday", "on Monday", "this morning",
    "last month", "in March", "since March 3", "before last week", "3 days ago",
    "two weeks ago", "a couple of days ago", "the past 3 days", "in the last 2 weeks",
    "recently", "around March 14", "between March 1 and March 10", "from Monday to Wednesday",
    "on 2026-03-14", "in 2025", "Q1 2026", "last quarter", "over the weekend",
    "earlier this week", "last night", "the day before yesterday", "March 14th",
    "14 March 2026", "lately", "this year", "last year", "a month ago", "next Friday",
    "yesterday afternoon", "since last month", "until yesterday", "in early March",
    "the week before last", "past week", "last weekend", "after March 3", "by Friday",
    "during 2025", "this month", "since 2025-12-01", "the past month", "in December",
    "an hour ago",
]  # fmt: skip
CJK_TIMES = [
    "昨天", "上周", "三天前", "上周二", "本月", "上个月", "最近", "2026年3月14日", "3月以来",
    "今天上午", "两周前", "去年", "这周", "一个月前", "先週",
]  # fmt: skip
CJK_TEMPLATES = ["{time}修复的{t}问题", "{time}关于{t}的会议", "我{time}做了什么{t}"]
CJK_TOPICS = ["登录", "数据库", "缓存", "部署"]


def build_queries(n: int, data: Path) -> dict[str, list[str]]:
    rng = random.Random(7)
    timed: list[str] = []
    plain: list[str] = []
    while len(timed) < n:
        if rng.random() < 0.2:
            q = rng.choice(CJK_TEMPLATES).format(
                t=rng.choice(CJK_TOPICS), time=rng.choice(CJK_TIMES)
            )
            p = rng.choice(CJK_TEMPLATES).format(t=rng.choice(CJK_TOPICS), time="")
        else:
            template, topic = rng.choice(TEMPLATES), rng.choice(TOPICS)
            q = template.format(t=topic, time=rng.choice(TIMES))
            p = " ".join(template.format(t=topic, time="").split()).replace(" ?", "?")
        timed.append(q)
        plain.append(p)
    sets = {"time": timed, "plain": plain}
    queries = data / "queries.jsonl"
    if queries.exists():
        with queries.open(encoding="utf-8") as f:
            claims = [json.loads(line)["text"] for line in f]
        sets["scifact"] = claims[:n]
    return sets


def pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


class Times:
    """Per-call wall and thread-CPU times in microseconds."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def __iadd__(self, other: Times) -> Times:
        self.wall += other.wall
        self.cpu += other.cpu
        return self

    def row(self, name: str, code: str, n: int) -> tuple[str, str, int, float, float, float, float]:
        return (name, code, n, pct(self.wall, 0.5), pct(self.wall, 0.99), pct(self.cpu, 0.5),
                pct(self.cpu, 0.99))  # fmt: skip


def time_calls(fn: Callable[[str], object], queries: list[str], repeat: int) -> Times:
    """Every query `repeat` times, round-robin. Wall time counts the moments the shared
    machine's scheduler takes the core away; thread CPU time does not, so both are kept."""
    out = Times()
    wall, cpu = time.perf_counter_ns, time.thread_time_ns
    for _ in range(repeat):
        for q in queries:
            c0, w0 = cpu(), wall()
            fn(q)
            w1, c1 = wall(), cpu()
            out.wall.append((w1 - w0) / 1000)
            out.cpu.append((c1 - c0) / 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--peer-queries", type=int, default=100)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args()

    sets = build_queries(args.queries, args.data)
    ours = lambda q: interpret(q, NOW)  # noqa: E731
    floor = _terms
    for qs in sets.values():  # warm the regex caches and the branch predictor alike
        time_calls(ours, qs, 1)
        time_calls(floor, qs, 1)

    rows: list[tuple[str, str, int, float, float, float, float]] = []
    for name, qs in sets.items():
        t_ours = Times()
        t_floor = Times()
        for _ in range(args.repeat):  # alternate so drift in machine load falls on both
            t_ours += time_calls(ours, qs, 1)
            t_floor += time_calls(floor, qs, 1)
        rows.append(t_ours.row(name, "cortex interpret", len(qs)))
        rows.append(t_floor.row(name, "floor: keyword _terms", len(qs)))

    try:
        from dateparser.search import search_dates  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        search_dates = None
        print("dateparser not installed: its row is skipped", file=sys.stderr)
    if search_dates is not None:
        english = [q for q in sets["time"] if q.isascii()][: args.peer_queries]
        settings = {"RELATIVE_BASE": NOW.replace(tzinfo=None)}

        def peer(q: str) -> object:
            return search_dates(q, languages=["en"], settings=settings)

        peer(english[0])
        t_peer = time_calls(peer, english, 1)
        t_same = time_calls(ours, english, args.repeat)
        rows.append(t_peer.row("time (en)", "dateparser search_dates", len(english)))
        rows.append(t_same.row("time (en)", "cortex interpret", len(english)))

    found = sum(interpret(q, NOW).timeframe is not None for q in sets["time"])
    clean = sum(interpret(q, NOW).timeframe is None for q in sets["plain"])
    print(f"python {platform.python_version()} on {platform.machine()}, now = {NOW.isoformat()}")
    print(f"queries per set: {args.queries}, repeats: {args.repeat}\n")
    print("| set | code | queries | p50 µs | p99 µs | p50 CPU µs | p99 CPU µs |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for name, code, n, p50, p99, c50, c99 in rows:
        print(f"| {name} | {code} | {n} | {p50:.1f} | {p99:.1f} | {c50:.1f} | {c99:.1f} |")
    print(f"\nwindows found on 'time' queries: {found}/{len(sets['time'])}")
    print(f"no window on 'plain' queries: {clean}/{len(sets['plain'])}")
    if "scifact" in sets:
        sci = sum(interpret(q, NOW).timeframe is not None for q in sets["scifact"])
        print(f"windows on SciFact claims: {sci}/{len(sets['scifact'])}")


if __name__ == "__main__":
    main()
