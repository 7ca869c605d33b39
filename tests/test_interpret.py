"""Query interpretation: time windows, searched text, intent and topics, over a fixed clock.

Every expectation below was worked out by hand from the definitions in the module
docstring of cortex.interpret (weeks start on Monday; "last Tuesday" is strictly before
today; a month without a year is the most recent one begun), not read off the code.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cortex.interpret import KINDS, Intent, Interpretation, TimeFrame, interpret

# The clocks. WED is the default: Wednesday 2026-03-18, 15:30 UTC.
WED = datetime(2026, 3, 18, 15, 30, tzinfo=UTC)
MON = datetime(2026, 3, 16, 9, 0, tzinfo=UTC)
TUE = datetime(2026, 3, 17, 9, 0, tzinfo=UTC)
SUN = datetime(2026, 3, 22, 20, 0, tzinfo=UTC)
MAR31 = datetime(2026, 3, 31, 12, 0, tzinfo=UTC)
JAN1 = datetime(2026, 1, 1, 8, 0, tzinfo=UTC)  # a Thursday
NEWYEAR27 = datetime(2027, 1, 1, 10, 0, tzinfo=UTC)  # a Friday
LEAPDAY = datetime(2028, 2, 29, 12, 0, tzinfo=UTC)  # a Tuesday
LEAP_MAR1 = datetime(2028, 3, 1, 12, 0, tzinfo=UTC)
NOV = datetime(2026, 11, 15, 12, 0, tzinfo=UTC)
FEB = datetime(2026, 2, 10, 12, 0, tzinfo=UTC)


def t(text: str | None) -> datetime | None:
    """'2026-03-17' is midnight UTC; '2026-03-17T05' is 05:00; '2026-03-17T15:30' as said."""
    if text is None:
        return None
    if "T" not in text:
        return datetime.fromisoformat(text).replace(tzinfo=UTC)
    day, clock = text.split("T")
    hour, _, minute = clock.partition(":")
    return datetime.fromisoformat(day).replace(hour=int(hour), minute=int(minute or 0), tzinfo=UTC)


# (query, now, since, until, kind, searched)
WINDOWS: list[tuple[str, datetime, str | None, str | None, str, str]] = [
    # days
    ("what happened yesterday", WED, "2026-03-17", "2026-03-18", "day", "what happened"),
    ("today's standup notes", WED, "2026-03-18", "2026-03-19", "day", "standup notes"),
    ("Today", WED, "2026-03-18", "2026-03-19", "day", ""),
    ("notes for tomorrow", WED, "2026-03-19", "2026-03-20", "day", "notes"),
    ("the day before yesterday", WED, "2026-03-16", "2026-03-17", "day", ""),
    ("plans for the day after tomorrow", WED, "2026-03-20", "2026-03-21", "day", "plans"),
    ("earlier today", WED, "2026-03-18", "2026-03-19", "day", ""),
    ("YESTERDAY", WED, "2026-03-17", "2026-03-18", "day", ""),
    # parts of a day
    ("this morning's deploy", WED, "2026-03-18T05", "2026-03-18T12", "day", "deploy"),
    ("this afternoon", WED, "2026-03-18T12", "2026-03-18T18", "day", ""),
    ("this evening", WED, "2026-03-18T18", "2026-03-19", "day", ""),
    ("tonight", WED, "2026-03-18T18", "2026-03-19T05", "day", ""),
    ("last night", WED, "2026-03-17T18", "2026-03-18T05", "day", ""),
    ("yesterday afternoon meeting", WED, "2026-03-17T12", "2026-03-17T18", "day", "meeting"),
    ("yesterday morning", WED, "2026-03-17T05", "2026-03-17T12", "day", ""),
    ("last Tuesday evening", WED, "2026-03-17T18", "2026-03-18", "day", ""),
    # weekdays (WED is a Wednesday)
    ("what was I working on last Tuesday", WED, "2026-03-17", "2026-03-18", "day",
     "what was I working on"),
    ("last Tuesday", TUE, "2026-03-10", "2026-03-11", "day", ""),
    ("last Wednesday", WED, "2026-03-11", "2026-03-12", "day", ""),
    ("last Monday", MON, "2026-03-09", "2026-03-10", "day", ""),
    ("last Sunday", MON, "2026-03-15", "2026-03-16", "day", ""),
    ("on Tuesday", WED, "2026-03-17", "2026-03-18", "day", ""),
    ("Tuesday", TUE, "2026-03-17", "2026-03-18", "day", ""),
    ("what did I do on Monday", WED, "2026-03-16", "2026-03-17", "day", "what did I do"),
    ("friday deploy", WED, "2026-03-13", "2026-03-14", "day", "deploy"),
    ("Sunday", SUN, "2026-03-22", "2026-03-23", "day", ""),
    ("this Tuesday", WED, "2026-03-17", "2026-03-18", "day", ""),
    ("this Friday", WED, "2026-03-20", "2026-03-21", "day", ""),
    ("this Sunday", MON, "2026-03-22", "2026-03-23", "day", ""),
    ("next Monday", WED, "2026-03-23", "2026-03-24", "day", ""),
    ("next Wednesday", WED, "2026-03-25", "2026-03-26", "day", ""),
    ("last Tue", WED, "2026-03-17", "2026-03-18", "day", ""),
    ("notes on Sat", WED, "2026-03-14", "2026-03-15", "day", "notes"),
    ("since Monday", WED, "2026-03-16", None, "since", ""),
    ("Tuesday's retro", WED, "2026-03-17", "2026-03-18", "day", "retro"),
    ("last week on Tuesday", WED, "2026-03-10", "2026-03-11", "day", ""),
    # weeks
    ("last week", WED, "2026-03-09", "2026-03-16", "week", ""),
    ("last week", MON, "2026-03-09", "2026-03-16", "week", ""),
    ("last week", SUN, "2026-03-09", "2026-03-16", "week", ""),
    ("previous week", WED, "2026-03-09", "2026-03-16", "week", ""),
    ("this week", WED, "2026-03-16", "2026-03-19", "week", ""),
    ("this week", SUN, "2026-03-16", "2026-03-23", "week", ""),
    ("this week", MON, "2026-03-16", "2026-03-17", "week", ""),
    ("last week", NEWYEAR27, "2026-12-21", "2026-12-28", "week", ""),
    ("this week", NEWYEAR27, "2026-12-28", "2027-01-02", "week", ""),
    ("past week", WED, "2026-03-11", "2026-03-19", "recent", ""),
    ("the last week", WED, "2026-03-11", "2026-03-19", "recent", ""),
    ("the week before last", WED, "2026-03-02", "2026-03-09", "week", ""),
    ("next week", WED, "2026-03-23", "2026-03-30", "week", ""),
    ("earlier this week", WED, "2026-03-16", "2026-03-18", "week", ""),
    ("earlier this week", MON, "2026-03-16", "2026-03-17", "week", ""),
    ("last week's incidents", WED, "2026-03-09", "2026-03-16", "week", "incidents"),
    # weekends
    ("what broke over the weekend", WED, "2026-03-14", "2026-03-16", "weekend", "what broke"),
    ("over the weekend", SUN, "2026-03-21", "2026-03-23", "weekend", ""),
    ("last weekend", WED, "2026-03-14", "2026-03-16", "weekend", ""),
    ("last weekend", SUN, "2026-03-14", "2026-03-16", "weekend", ""),
    ("this weekend", WED, "2026-03-21", "2026-03-23", "weekend", ""),
    # months
    ("last month", WED, "2026-02-01", "2026-03-01", "month", ""),
    ("last month", MAR31, "2026-02-01", "2026-03-01", "month", ""),
    ("last month", JAN1, "2025-12-01", "2026-01-01", "month", ""),
    ("this month", WED, "2026-03-01", "2026-03-19", "month", ""),
    ("earlier this month", WED, "2026-03-01", "2026-03-18", "month", ""),
    ("next month", WED, "2026-04-01", "2026-05-01", "month", ""),
    ("the past month", WED, "2026-02-18", "2026-03-19", "recent", ""),
    ("the past month", MAR31, "2026-02-28", "2026-04-01", "recent", ""),
    ("in March", NOV, "2026-03-01", "2026-04-01", "month", ""),
    ("in March", FEB, "2025-03-01", "2025-04-01", "month", ""),
    ("in March", WED, "2026-03-01", "2026-04-01", "month", ""),
    ("in December", JAN1, "2025-12-01", "2026-01-01", "month", ""),
    ("deploys in May", WED, "2025-05-01", "2025-06-01", "month", "deploys"),
    ("in May, we shipped", WED, "2025-05-01", "2025-06-01", "month", "we shipped"),
    ("March 2025", WED, "2025-03-01", "2025-04-01", "month", ""),
    ("last March", WED, "2025-03-01", "2025-04-01", "month", ""),
    ("since April", WED, "2025-04-01", None, "since", ""),
    ("early March", WED, "2026-03-01", "2026-03-11", "month", ""),
    ("late February", WED, "2026-02-21", "2026-03-01", "month", ""),
    ("mid-January", WED, "2026-01-11", "2026-01-21", "month", ""),
    ("in February", LEAP_MAR1, "2028-02-01", "2028-03-01", "month", ""),
    ("in February", WED, "2026-02-01", "2026-03-01", "month", ""),
    # month days
    ("March 14th", WED, "2026-03-14", "2026-03-15", "day", ""),
    ("march 14th deploy", WED, "2026-03-14", "2026-03-15", "day", "deploy"),
    ("March 20", WED, "2025-03-20", "2025-03-21", "day", ""),
    ("14 March 2026", WED, "2026-03-14", "2026-03-15", "day", ""),
    ("the 14th of March", WED, "2026-03-14", "2026-03-15", "day", ""),
    ("May 3, 2025 incident", WED, "2025-05-03", "2025-05-04", "day", "incident"),
    ("what happened on Jan 5", WED, "2026-01-05", "2026-01-06", "day", "what happened"),
    ("Sept. 9", WED, "2025-09-09", "2025-09-10", "day", ""),
    ("February 29", LEAP_MAR1, "2028-02-29", "2028-03-01", "day", ""),
    ("February 29", WED, "2024-02-29", "2024-03-01", "day", ""),
    ("Feb 29 2028", WED, "2028-02-29", "2028-03-01", "day", ""),
    # years and quarters
    ("last year", WED, "2025-01-01", "2026-01-01", "year", ""),
    ("this year", WED, "2026-01-01", "2026-03-19", "year", ""),
    ("during 2025", WED, "2025-01-01", "2026-01-01", "year", ""),
    ("the past year", LEAPDAY, "2027-02-28", "2028-03-01", "recent", ""),
    ("Q1 2026", WED, "2026-01-01", "2026-04-01", "quarter", ""),
    ("Q4", WED, "2025-10-01", "2026-01-01", "quarter", ""),
    ("q1", WED, "2026-01-01", "2026-04-01", "quarter", ""),
    ("2025-Q3", WED, "2025-07-01", "2025-10-01", "quarter", ""),
    ("last quarter", WED, "2025-10-01", "2026-01-01", "quarter", ""),
    ("last quarter", JAN1, "2025-10-01", "2026-01-01", "quarter", ""),
    ("this quarter", WED, "2026-01-01", "2026-03-19", "quarter", ""),
    # ISO dates
    ("2026-03-14", WED, "2026-03-14", "2026-03-15", "day", ""),
    ("notes from 2026-03", WED, "2026-03-01", "2026-04-01", "month", "notes"),
    ("on 2026-03-14 the deploy failed", WED, "2026-03-14", "2026-03-15", "day",
     "the deploy failed"),
    ("2026-03-14T10:00:00Z log", WED, "2026-03-14", "2026-03-15", "day", "log"),
    ("2026/03/14", WED, "2026-03-14", "2026-03-15", "day", ""),
    ("2028-02-29", WED, "2028-02-29", "2028-03-01", "day", ""),
    # N units ago
    ("3 days ago", WED, "2026-03-15", "2026-03-16", "day", ""),
    ("three days ago", WED, "2026-03-15", "2026-03-16", "day", ""),
    ("twenty days ago", WED, "2026-02-26", "2026-02-27", "day", ""),
    ("a week ago", WED, "2026-03-08", "2026-03-15", "around", ""),
    ("two weeks ago", WED, "2026-03-01", "2026-03-08", "around", ""),
    ("a couple of days ago", WED, "2026-03-15", "2026-03-18", "around", ""),
    ("a month ago", WED, "2026-02-03", "2026-03-06", "around", ""),
    ("a month ago", MAR31, "2026-02-13", "2026-03-16", "around", ""),
    ("a year ago", LEAPDAY, "2026-08-28", "2027-08-28", "around", ""),
    ("an hour ago", WED, "2026-03-18T13:30", "2026-03-18T15:30", "around", ""),
    ("what did I fix 2 days ago?", WED, "2026-03-16", "2026-03-17", "day", "what did I fix?"),
    ("half a year ago", WED, "2025-09-03", "2025-10-04", "around", ""),
    ("half an hour ago", WED, "2026-03-18T14:45", "2026-03-18T15:15", "around", ""),
    ("10 minutes ago", WED, "2026-03-18T15:15", "2026-03-18T15:25", "around", ""),
    # the past N
    ("the past 3 days", WED, "2026-03-15", "2026-03-19", "recent", ""),
    ("in the last 2 weeks", WED, "2026-03-04", "2026-03-19", "recent", ""),
    ("past two months", WED, "2026-01-18", "2026-03-19", "recent", ""),
    ("last 24 hours", WED, "2026-03-17T15:30", "2026-03-19", "recent", ""),
    ("recently", WED, "2026-03-04", "2026-03-19", "recent", ""),
    ("errors lately", WED, "2026-03-04", "2026-03-19", "recent", "errors"),
    # operators and ranges
    ("before last week", WED, None, "2026-03-09", "before", ""),
    ("after March 3", WED, "2026-03-04", None, "since", ""),
    ("until yesterday", WED, None, "2026-03-18", "before", ""),
    ("by Friday", WED, None, "2026-03-14", "before", ""),
    ("since last week", WED, "2026-03-09", None, "since", ""),
    ("since 2025-03-01", WED, "2025-03-01", None, "since", ""),
    ("changes since 2025", WED, "2025-01-01", None, "since", "changes"),
    ("between March 1 and March 10", WED, "2026-03-01", "2026-03-11", "range", ""),
    ("between 2024 and 2025", WED, "2024-01-01", "2026-01-01", "range", ""),
    ("from Monday to Wednesday", WED, "2026-03-16", "2026-03-19", "range", ""),
    ("from March to May", WED, "2025-03-01", "2025-06-01", "range", ""),
    ("around March 14", WED, "2026-03-11", "2026-03-18", "around", ""),
    ("about 2026-03-14", WED, "2026-03-11", "2026-03-18", "around", ""),
    ("yesterday and today", WED, "2026-03-17", "2026-03-19", "range", ""),
    ("Q3 onwards", WED, "2025-07-01", None, "since", ""),
    ("2026-03-01..2026-03-05", WED, "2026-03-01", "2026-03-06", "range", ""),
    ("from jan to mar", WED, "2026-01-01", "2026-04-01", "range", ""),
    ("Did the build fail on Friday or Saturday?", WED, "2026-03-13", "2026-03-15", "range",
     "Did the build fail?"),
    ("since yesterday morning", WED, "2026-03-17T05", None, "since", ""),
    ("around last Tuesday", WED, "2026-03-14", "2026-03-21", "around", ""),
    # Chinese
    ("昨天修复的bug", WED, "2026-03-17", "2026-03-18", "day", "修复的bug"),
    ("今天", WED, "2026-03-18", "2026-03-19", "day", ""),
    ("前天", WED, "2026-03-16", "2026-03-17", "day", ""),
    ("明天", WED, "2026-03-19", "2026-03-20", "day", ""),
    ("今早的会议", WED, "2026-03-18T05", "2026-03-18T12", "day", "会议"),
    ("今天上午", WED, "2026-03-18T05", "2026-03-18T12", "day", ""),
    ("昨天晚上", WED, "2026-03-17T18", "2026-03-18", "day", ""),
    ("上周的会议", WED, "2026-03-09", "2026-03-16", "week", "会议"),
    ("上星期", WED, "2026-03-09", "2026-03-16", "week", ""),
    ("上个星期", WED, "2026-03-09", "2026-03-16", "week", ""),
    ("这周", WED, "2026-03-16", "2026-03-19", "week", ""),
    ("本周", WED, "2026-03-16", "2026-03-19", "week", ""),
    ("这个星期", WED, "2026-03-16", "2026-03-19", "week", ""),
    ("上个月", WED, "2026-02-01", "2026-03-01", "month", ""),
    ("上月", WED, "2026-02-01", "2026-03-01", "month", ""),
    ("本月", WED, "2026-03-01", "2026-03-19", "month", ""),
    ("这个月", WED, "2026-03-01", "2026-03-19", "month", ""),
    ("今年", WED, "2026-01-01", "2026-03-19", "year", ""),
    ("去年", WED, "2025-01-01", "2026-01-01", "year", ""),
    ("三天前", WED, "2026-03-15", "2026-03-16", "day", ""),
    ("两周前", WED, "2026-03-01", "2026-03-08", "around", ""),
    ("一个月前", WED, "2026-02-03", "2026-03-06", "around", ""),
    ("二十一天前", WED, "2026-02-25", "2026-02-26", "day", ""),
    ("三十一天前", WED, "2026-02-15", "2026-02-16", "day", ""),
    ("最近的错误", WED, "2026-03-04", "2026-03-19", "recent", "错误"),
    ("最近三天", WED, "2026-03-15", "2026-03-19", "recent", ""),
    ("周二", WED, "2026-03-17", "2026-03-18", "day", ""),
    ("星期二", WED, "2026-03-17", "2026-03-18", "day", ""),
    ("礼拜二", WED, "2026-03-17", "2026-03-18", "day", ""),
    ("上周二", WED, "2026-03-10", "2026-03-11", "day", ""),
    ("这周二", WED, "2026-03-17", "2026-03-18", "day", ""),
    ("星期天", WED, "2026-03-15", "2026-03-16", "day", ""),
    ("上周末", WED, "2026-03-14", "2026-03-16", "weekend", ""),
    ("三月", WED, "2026-03-01", "2026-04-01", "month", ""),
    ("3月", FEB, "2025-03-01", "2025-04-01", "month", ""),
    ("十二月", WED, "2025-12-01", "2026-01-01", "month", ""),
    ("2026年3月", WED, "2026-03-01", "2026-04-01", "month", ""),
    ("2026年3月14日", WED, "2026-03-14", "2026-03-15", "day", ""),
    ("3月14号", WED, "2026-03-14", "2026-03-15", "day", ""),
    ("2025年", WED, "2025-01-01", "2026-01-01", "year", ""),
    ("去年三月", WED, "2025-03-01", "2025-04-01", "month", ""),
    ("3月以来的变更", WED, "2026-03-01", None, "since", "变更"),
    ("3月14日之前", WED, None, "2026-03-14", "before", ""),
    ("上周之后", WED, "2026-03-16", None, "since", ""),
    ("自从上周", WED, "2026-03-09", None, "since", ""),
    ("从3月1日到3月10日", WED, "2026-03-01", "2026-03-11", "range", ""),
    ("我在上周修复了登录问题", WED, "2026-03-09", "2026-03-16", "week", "我 修复了登录问题"),
    ("上季度", WED, "2025-10-01", "2026-01-01", "quarter", ""),
    ("2026年第一季度", WED, "2026-01-01", "2026-04-01", "quarter", ""),
    ("这周五", WED, "2026-03-20", "2026-03-21", "day", ""),
    ("下周一的计划", WED, "2026-03-23", "2026-03-24", "day", "计划"),
    ("上上周", WED, "2026-03-02", "2026-03-09", "week", ""),
    ("半年前", WED, "2025-09-03", "2025-10-04", "around", ""),
    ("半个月前", WED, "2026-03-01", "2026-03-08", "around", ""),
    # Japanese basics
    ("昨日", WED, "2026-03-17", "2026-03-18", "day", ""),
    ("先週の会議", WED, "2026-03-09", "2026-03-16", "week", "会議"),
    ("今週", WED, "2026-03-16", "2026-03-19", "week", ""),
    ("先月", WED, "2026-02-01", "2026-03-01", "month", ""),
    ("3日前", WED, "2026-03-15", "2026-03-16", "day", ""),
    ("2週間前", WED, "2026-03-01", "2026-03-08", "around", ""),
]  # fmt: skip


@pytest.mark.parametrize(("query", "now", "since", "until", "kind", "searched"), WINDOWS)
def test_window(
    query: str, now: datetime, since: str | None, until: str | None, kind: str, searched: str
) -> None:
    got = interpret(query, now)
    assert got.timeframe is not None, query
    assert (got.timeframe.since, got.timeframe.until) == (t(since), t(until))
    assert got.timeframe.kind == kind
    assert got.searched == searched


def test_the_table_is_large_and_covers_every_kind() -> None:
    assert len(WINDOWS) + len(NO_WINDOW) >= 100
    assert {kind for *_, kind, _ in WINDOWS} == KINDS


SOFT = [
    ("recently", True),
    ("lately", True),
    ("最近", True),
    ("around March 14", True),
    ("two weeks ago", True),
    ("a couple of days ago", True),
    ("this morning", True),
    ("early March", True),
    ("3 days ago", False),
    ("last week", False),
    ("in March", False),
    ("the past 3 days", False),
    ("the past few days", True),
    ("yesterday", False),
]


@pytest.mark.parametrize(("query", "soft"), SOFT)
def test_soft_marks_vague_windows(query: str, soft: bool) -> None:
    got = interpret(query, WED)
    assert got.timeframe is not None
    assert got.timeframe.soft is soft


# Words that look like time but are not: no window, and the query comes back as it was
# (whitespace normalised).
NO_WINDOW = [
    "this may cause a crash",
    "we may need a retry",
    "May I ask about caching",
    "in may cause trouble",
    "the May release",
    "troops march on",
    "march forward with the plan",
    "march 5 miles",
    "to march on",
    "sun exposure notes",
    "I sat on the review",
    "wed the two branches",
    "second attempt at the migration",
    "fall back to keyword search",
    "spring boot config",
    "standup on Tuesdays",
    "every Monday standup",
    "Tuesdays and Thursdays",
    "keep logs for 3 days",
    "retry in 3 days",
    "a 30 day trial",
    "version 2.10 regression",
    "upgrade to 3.12.1",
    "HTTP 404 errors",
    "abc2026 ticket",
    "ticket 2026",
    "issue #2026",
    "release v2026",
    "2026abc",
    "in 2048 dimensions",
    "monday.com integration",
    "每周二的例会",
    "保留3天",
    "三个月的数据",
    "周期性任务",
    "现在的进度",
    "kubernetes networking",
    "  spaced   out\tquery  ",
    "",
    "February 30",
    "2026-13-01",
    "Q5 planning",
    "the last time we deployed",
    "a second ago",
    "we talked about March madness",
    "version 1.2026.3",
    "the 2025 roadmap",
    "roadmap for 2025",
    "What did I learn on 3/14?",
    "in the morning",
    "every morning",
    "week 12",
]


@pytest.mark.parametrize("query", NO_WINDOW)
def test_no_window(query: str) -> None:
    got = interpret(query, WED)
    assert got.timeframe is None, got.timeframe
    assert got.searched == " ".join(query.split())


# Intent, by rules (see the module docstring).
INTENTS = [
    ("How did I fix the auth bug last week?", Intent.DEBUG),
    ("why is the build failing", Intent.DEBUG),
    ("traceback in the importer", Intent.DEBUG),
    ("the deploy is broken again", Intent.DEBUG),
    ("昨天修复的bug", Intent.DEBUG),
    ("what lessons did we learn from the outage", Intent.LEARN),
    ("how to rotate the api keys", Intent.LEARN),
    ("why did we choose sqlite", Intent.LEARN),
    ("what did we decide about caching", Intent.LEARN),
    ("best practice for migrations", Intent.LEARN),
    ("为什么用sqlite", Intent.LEARN),
    ("tell me about the billing service", Intent.EXPLORE),
    ("everything on postgres", Intent.EXPLORE),
    ("kubernetes networking", Intent.EXPLORE),
    ("关于数据库的笔记", Intent.EXPLORE),
    ("", Intent.EXPLORE),
    ("what was I working on last Tuesday", Intent.FIND),
    ("the nginx config file path for staging", Intent.FIND),
    ("where is auth/middleware.ts", Intent.FIND),
    ("meeting notes yesterday", Intent.FIND),
]


@pytest.mark.parametrize(("query", "intent"), INTENTS)
def test_intent(query: str, intent: Intent) -> None:
    assert interpret(query, WED).intent is intent


TOPICS = [
    ("How did I fix the auth bug last week?", ("fix", "auth", "bug")),
    ("what was I working on last Tuesday", ()),
    ("what happened yesterday", ()),
    ("Auth auth AUTH middleware", ("auth", "middleware")),
    ("check auth/middleware.ts and node.js", ("check", "auth/middleware.ts", "node.js")),
    ("the team's roadmap for Q1", ("team", "roadmap")),
    ("we didn't ship the feature", ("ship", "feature")),
    ("上周的会议", ("会议",)),
    ("我上周二做了什么", ("做",)),
    ("昨天修复的登录bug", ("修复的登录", "bug")),
    ("the May release", ("may", "release")),
    ("version 2.10 regression", ("version", "2.10", "regression")),
]


@pytest.mark.parametrize(("query", "topics"), TOPICS)
def test_topics(query: str, topics: tuple[str, ...]) -> None:
    assert interpret(query, WED).topics == topics


def test_searched_keeps_question_words_and_fixes_punctuation() -> None:
    assert interpret("Yesterday, what did I do?", WED).searched == "what did I do?"
    assert interpret("How did I fix the auth bug last week?", WED).searched == (
        "How did I fix the auth bug?"
    )
    # "on" served "working", not the time: it stays before "last Tuesday"
    assert interpret("working on last Tuesday", WED).searched == "working on"
    # "on" before a bare weekday or a date is glue
    assert interpret("deploy on Tuesday", WED).searched == "deploy"


def test_text_holds_the_words_that_said_it() -> None:
    tf = interpret("what did we ship in the last 2 weeks?", WED).timeframe
    assert tf is not None and tf.text == "the last 2 weeks"
    tf = interpret("incidents between March 1 and March 10", WED).timeframe
    assert tf is not None and tf.text == "between March 1 and March 10"


def test_to_dict_is_json_with_iso_strings() -> None:
    d = interpret("How did I fix the auth bug last week?", WED).to_dict()
    assert d == {
        "timeframe": {
            "since": "2026-03-09T00:00:00Z",
            "until": "2026-03-16T00:00:00Z",
            "text": "last week",
            "kind": "week",
            "soft": False,
        },
        "intent": "debug",
        "topics": ["fix", "auth", "bug"],
        "searched": "How did I fix the auth bug?",
    }
    assert json.loads(json.dumps(d)) == d
    none = interpret("kubernetes", WED).to_dict()
    assert none["timeframe"] is None
    open_ended = interpret("since March", WED).to_dict()["timeframe"]
    assert isinstance(open_ended, dict) and open_ended["until"] is None


def test_results_are_frozen_and_deterministic() -> None:
    a = interpret("what broke last Tuesday", WED)
    assert a == interpret("what broke last Tuesday", WED)
    with pytest.raises(AttributeError):
        a.searched = "x"  # type: ignore[misc]
    assert isinstance(a, Interpretation) and isinstance(a.timeframe, TimeFrame)
    assert a.timeframe.contains(datetime(2026, 3, 17, 23, 59, tzinfo=UTC))
    assert not a.timeframe.contains(datetime(2026, 3, 18, tzinfo=UTC))


# Time zones: the window is in the zone of the interpretation, day boundaries at its midnight.


def test_tz_of_now_is_used() -> None:
    shanghai = timezone(timedelta(hours=8))
    now = datetime(2026, 3, 18, 1, 0, tzinfo=shanghai)  # 2026-03-17 17:00 UTC
    tf = interpret("yesterday", now).timeframe
    assert tf is not None
    assert tf.since == datetime(2026, 3, 17, tzinfo=shanghai)
    assert tf.to_dict()["since"] == "2026-03-17T00:00:00+08:00"


def test_tz_argument_converts_now() -> None:
    ny = ZoneInfo("America/New_York")
    now = datetime(2026, 3, 18, 1, 0, tzinfo=UTC)  # still the 17th, 21:00, in New York
    tf = interpret("today", now, tz=ny).timeframe
    assert tf is not None
    assert tf.since == datetime(2026, 3, 17, tzinfo=ny)
    assert tf.until == datetime(2026, 3, 18, tzinfo=ny)
    assert tf.to_dict()["since"] == "2026-03-17T00:00:00-04:00"


def test_naive_now_is_read_in_tz_or_utc() -> None:
    naive = datetime(2026, 3, 18, 15, 30)
    assert interpret("today", naive).timeframe == interpret("today", WED).timeframe
    tokyo = ZoneInfo("Asia/Tokyo")
    tf = interpret("today", naive, tz=tokyo).timeframe
    assert tf is not None and tf.since == datetime(2026, 3, 18, tzinfo=tokyo)


def test_week_across_a_dst_change_keeps_local_midnights() -> None:
    ny = ZoneInfo("America/New_York")  # clocks went forward on 2026-03-08
    tf = interpret("last week", datetime(2026, 3, 10, 12, 0, tzinfo=ny)).timeframe
    assert tf is not None and tf.since is not None and tf.until is not None
    assert tf.to_dict()["since"] == "2026-03-02T00:00:00-05:00"
    assert tf.to_dict()["until"] == "2026-03-09T00:00:00-04:00"
    assert tf.until - tf.since == timedelta(days=7)  # wall-clock arithmetic, same tzinfo


def test_bad_arguments_raise_type_error() -> None:
    with pytest.raises(TypeError, match="query must be a str"):
        interpret(None, WED)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="now must be a datetime"):
        interpret("today", date(2026, 3, 18))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tz must be a tzinfo"):
        interpret("today", WED, tz="UTC")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot be read in"):
        interpret("today", datetime(1, 1, 1, tzinfo=UTC), tz=ZoneInfo("Pacific/Kiritimati"))


@pytest.mark.parametrize("query", ["around yesterday", "next year", "tomorrow", "1000 years ago"])
@pytest.mark.parametrize("now", [datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59)])
def test_windows_past_the_calendar_are_dropped_not_raised(query: str, now: datetime) -> None:
    got = interpret(query, now)
    if got.timeframe is None:
        assert got.searched == query  # nothing was understood, nothing was taken out
    else:
        _check(got, UTC)


def test_long_query_is_scanned_only_at_its_head() -> None:
    q = "x " * 5000 + "yesterday"
    got = interpret(q, WED)
    assert got.timeframe is None
    assert got.searched == " ".join(q.split())
    assert interpret("yesterday " + "x " * 5000, WED).timeframe is not None


# Property: never raises on any text, windows are ordered and aware in the zone.

_TIME_WORDS = st.sampled_from(
    ["yesterday", "today", "last", "this", "next", "week", "month", "year", "Tuesday",
     "March", "May", "14", "14th", "2026", "2026-03-14", "ago", "days", "two", "a couple of",
     "since", "before", "after", "between", "and", "from", "to", "around", "Q1", "the past",
     "recently", "weekend", "morning", "on", "in", "昨天", "上周", "三天前", "周二", "3月",
     "以来", "之前", "前", "2026年", "最近", "个月", "先週", "-", ",", "?", "'s", "0", "99"]
)  # fmt: skip
_ZONES = st.sampled_from(
    [
        UTC,
        ZoneInfo("America/New_York"),
        ZoneInfo("Asia/Shanghai"),
        ZoneInfo("Australia/Lord_Howe"),  # a half-hour DST shift
        timezone(timedelta(hours=-11)),
    ]
)
_NOWS = st.datetimes(min_value=datetime(1, 1, 3), max_value=datetime(9999, 12, 29))


def _check(got: Interpretation, zone: object) -> None:
    tf = got.timeframe
    if tf is not None:
        assert tf.since is not None or tf.until is not None
        if tf.since is not None and tf.until is not None:
            assert tf.since < tf.until
        for end in (tf.since, tf.until):
            assert end is None or end.tzinfo is zone
        assert tf.kind in KINDS
        json.dumps(got.to_dict())
    assert got.searched == got.searched.strip()
    assert got.intent in Intent


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80), _NOWS, _ZONES)
def test_never_raises_on_any_text(query: str, now: datetime, zone: ZoneInfo) -> None:
    _check(interpret(query, now, tz=zone), zone)


@settings(max_examples=600, deadline=None)
@given(st.lists(_TIME_WORDS, max_size=8), _NOWS, _ZONES)
def test_never_raises_on_time_words(words: list[str], now: datetime, zone: ZoneInfo) -> None:
    query = " ".join(words)
    _check(interpret(query, now, tz=zone), zone)
    assert interpret(query, now, tz=zone) == interpret(query, now, tz=zone)
