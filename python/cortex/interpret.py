"""Query interpretation: the time words of a query become a window; the rest is searched.

A pure, deterministic, local function of the query and a clock (no model, no network)::

    interpret(query: str, now: datetime, *, tz: tzinfo | None = None) -> Interpretation

    Interpretation(timeframe: TimeFrame | None, searched: str, intent: Intent,
                   topics: tuple[str, ...]).to_dict()
        -> {"timeframe": {"since", "until", "text", "kind", "soft"} | None,
            "intent": "find" | "explore" | "debug" | "learn",
            "topics": [str, ...], "searched": str}

    TimeFrame(since: datetime | None, until: datetime | None, text: str, kind: str, soft: bool)

``timeframe`` is a half-open window ``[since, until)`` of aware datetimes in the time zone
of the interpretation: ``tz`` if given (``now`` is converted to it), else ``now``'s own
tzinfo, else UTC (a naive ``now`` is read in that zone). Either end may be ``None`` (open:
"since March" has no ``until``); when both are set, ``since < until``. ``text`` holds the
words that said it (several expressions are joined by ``" + "``); ``kind`` is one of
``KINDS``; ``soft`` marks a vague window ("recently", "around", "two weeks ago", a part of
a day) that a search should rather boost by than filter on. Datetimes print as ISO 8601
(UTC as ``Z``, as in :mod:`cortex.result`).

``searched`` is the query without its time words and the glue words that only served them
(``in``/``during``/``from``/``of``/``at``/``over``/``for``/``within``/``throughout``;
``on`` only before a bare weekday or a date; Chinese 在/于/从 before and 的/里/内/期间
after), with whitespace normalised. Question words stay: the ranking handles them. A
query without time words comes back as itself with whitespace normalised.

``topics`` are the content words of ``searched``: lowercased, in order, without duplicates,
stop words, question words or generic time nouns. A CJK run is kept as one topic, cut at
multi-character question words (什么, 怎么, 为什么...) and trimmed of particles and pronouns
at its ends (的, 了, 吗, 我...), so 我做了什么 gives no topic and 修复的登录 stays whole.

Intent, by rules over the whole query, first match wins:

1. ``debug``: error, bug, fix, crash, fail(ing/ed/ure), broken, traceback, stack trace,
   exception, panic, segfault, regression, timeout, "not working"...; 报错, 错误, 崩溃, 修复.
2. ``learn``: lesson, learned, "how to/do/did/can/should", why, decided/decision, best
   practice, tip, insight, pattern, approach...; 为什么, 如何, 经验, 教训, 决定.
3. ``explore``: about, everything, overview, related, summary, "what do I know", "tell me",
   topics...; 关于, 所有, 相关. Also a bare topic: at most three content words, no question
   word, no time window, no quoted phrase and no identifier-like token (digit, ``.``, ``/``,
   ``_``), e.g. "kubernetes networking".
4. ``find`` otherwise: a specific memory ("what was I working on last Tuesday").
   An empty query is ``explore`` (it lists by filters).

Time expressions (English, case-insensitive unless said; Chinese; a little Japanese), with
weeks starting on Monday and every day boundary at local midnight of the zone:

- today (today's), tomorrow, yesterday, the day before yesterday / after tomorrow: that day.
- this morning [05:00, 12:00), this afternoon [12:00, 18:00), this evening [18:00, 24:00),
  tonight [18:00, 05:00 next day), last night [18:00 yesterday, 05:00 today); a day
  expression followed by morning/afternoon/evening/night narrows the same way. Soft.
- "last Tuesday" (also "past", "previous"): the most recent Tuesday strictly before today
  (said on a Tuesday: a week ago). "Tuesday", "on Tuesday": the most recent Tuesday,
  today included. "this Tuesday": the Tuesday of the current week (maybe ahead).
  "next Tuesday": the first Tuesday strictly after today. Full names count bare in any
  case; abbreviations (Mon, Tue, Wed...) only after last/this/next, or capitalised after
  on/since/before/after/until/by. Habitual forms give no window: "on Tuesdays",
  "every Tuesday", "each Tuesday".
- last week / previous week: the previous ISO week, Monday 00:00 to Monday 00:00. this
  week: this Monday to tomorrow 00:00 (every "this <period>" that has begun ends at
  tomorrow 00:00). next week. "the week before last". past week, this past week, the last
  week (with "the"): the last 7 days [today - 7, tomorrow). Month, quarter and year alike:
  "last month" is the previous calendar month, "the last month" / "past month" the
  window from the same day a month ago. earlier this week/month/year: from its start to
  today 00:00 (to tomorrow when today is its first day).
- weekend: "last weekend" = Saturday-Monday of the previous ISO week, "this weekend" of
  the current one, "over the weekend" / "the weekend" / "past weekend" = the most recent
  weekend that has begun.
- Months: "in March" = the most recent March that has begun (said in November 2026: March
  2026; in February 2026: March 2025); "last March" = the most recent March strictly before
  the current month; "this March"; "next March"; "March 2026"; "March 14[th][, 2026]",
  "14 March [2026]", "the 14th of March" = that day, the most recent one not in the future
  when no year is given (February 29 looks back to the last leap year); early/mid/late
  March = days 1-10, 11-20, 21-end (soft). A month name alone needs a preposition before it
  (in, during, since, before, after, until, by, from, around, of, between...): "march" the
  verb and "may" the modal are not months; lowercase "may" also needs the word after it to
  be a function word or punctuation ("in may cause" is no date). "the May release" is
  read as a name, not a time: no window (a month name after "the" is a modifier more often
  than a date, and a wrong hard filter loses recall). Seasons are not read (hemispheres).
- ISO dates: 2026-03-14 (also with a time, or 2026/03/14), 2026-03 (a month); a bare year
  2026 only after a preposition ("in 2026", "since 2025", "between 2024 and 2025"), so
  ids and codes (404, 2.10, v2026, #2026, "ticket 2026") are not dates.
- Q1..Q4 [year] (or 2026-Q1): a calendar quarter, the most recent one begun when no year;
  last/this/next quarter.
- N units ago (N a digit, or a..twenty, thirty..ninety, "a couple of", "a few", "several"):
  days: that day (hard; vague counts widen it by a day each side, soft); weeks, months,
  years: a window one unit wide centred on the day N units back (soft, kind "around"); a
  year ago from 2028-02-29 centres on 2027-02-28. hours/minutes: around that instant.
- the past/last N days/weeks/months/years/hours (also "in the last", "within the past"):
  [the day N units back at 00:00, tomorrow 00:00) (hours: from the instant), kind "recent".
- recently, lately, of late, these days: the last 14 days, soft. "the other day": the
  week before today, soft.
- Operators: since/starting/beginning X → [start of X, open); after X → [end of X, open);
  before / prior to X → [open, start of X); until/till/by/up to X → [open, end of X);
  around/circa/approximately X (and "about" before a calendar date) → X widened by 3 days
  on each side, soft; between X and Y, from X to/until/through Y, X to Y → [start of the
  earlier, end of the later), kind "range" (also "X..Y"); "X onwards", "X or later" →
  since. A range whose first end has no year and would fall after its second is moved a
  year back: "from March to May" said in March 2026 is March-May 2025.
- Chinese: 今天/今日, 昨天/昨日, 前天, 大前天, 明天, 后天; 今早/今晨, 今晚, 昨晚, and
  <day>上午/早上/中午/下午/晚上; 上周/上星期/上个星期/上礼拜 (last week), 这周/本周/
  这个星期 (this week), 下周, 上上周; 周二/星期二/礼拜二 (the most recent Tuesday, today
  included), 上周二 (the Tuesday of the previous week), 这周二/本周二, 下周二, 周末/上周末;
  上个月/上月, 本月/这个月, 下个月; 今年, 去年, 前年, 明年; 上季度/本季度, 第一季度;
  N天前/N周前/N个星期前/N个月前/N年前/N小时前 (N in digits or numerals 一..三十一, 两, 几,
  半); 最近 (soft), 最近三天/过去两周/近一个月 (recent); 三月/3月, 2026年, 2026年3月,
  2026年3月14日/号, 去年三月; with 以来/起/开始/至今 (since), 之后/以后 (after), 之前/以前
  (before), 前/后 after a calendar date, 左右/前后 (around), 自从/从 X (since), 截至/直到 X
  (until), 从 X 到/至 Y (range). Japanese: 昨日, 一昨日, 今日, 明日, 先週, 今週, 来週,
  先月, 今月, 来月, 昨年, N日前/N週間前/Nヶ月前/N年前, 月曜日..日曜日, から/まで.
- Numbers that are no dates give no window: "keep logs for 3 days", "in 3 days", HTTP
  codes, versions. Only "ago", "past/last N", and the forms above make one. Slashed
  day-month forms (3/14, 14/3) are not read: their order is ambiguous, and so is a fraction.
  Clock times ("at 3pm") are not read either: the day around them is.

Several expressions in one query are intersected when they overlap and spanned when they
do not ("yesterday and today", "Friday or Saturday"); a bare weekday beside a longer window
is that weekday inside it ("last week on Tuesday", 上周 周二). Time scanning reads the first
``MAX_SCAN`` characters; the rest of a long query is kept as it is. A query with no digit,
no CJK time character and no word starting like a time word takes a quick path (a set
look-up per word). A window that would leave the calendar (year 1 to 9999) is dropped and
its words kept.

Kinds: "day" (a day, or a part of one), "week", "weekend", "month" (also early/mid/late),
"quarter", "year", "range" (between/from-to, or several expressions), "since" and "before"
(one open end), "around" (around X; N weeks/months/years/hours ago), "recent" (the past N
units; recently).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from enum import StrEnum

__all__ = ["KINDS", "MAX_SCAN", "Intent", "Interpretation", "TimeFrame", "interpret"]

#: The kinds of window a TimeFrame can have.
KINDS = frozenset(
    {"day", "week", "weekend", "month", "quarter", "year", "range", "since", "before",
     "around", "recent"}
)  # fmt: skip

#: Only the first MAX_SCAN characters of a query are read for time words, topics and intent:
#: a prompt-sized query keeps its tail as it is in `searched`, and the cost stays bounded
#: (about 6 ms for 4,000 characters of prose; a typical query takes 0.15 ms).
MAX_SCAN = 4096

#: Days on each side of an "around <date>" window.
AROUND_DAYS = 3
#: The span of "recently" / "lately" / 最近, in days before today.
RECENT_DAYS = 14


class Intent(StrEnum):
    """What the user is after: a specific memory, a topic, a problem, or a lesson."""

    FIND = "find"
    EXPLORE = "explore"
    DEBUG = "debug"
    LEARN = "learn"


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class TimeFrame:
    """A half-open window ``[since, until)``; ``None`` leaves that end open."""

    since: datetime | None
    until: datetime | None
    text: str
    kind: str
    soft: bool = False

    def contains(self, when: datetime) -> bool:
        """Whether an aware datetime falls inside the window."""
        return (self.since is None or when >= self.since) and (
            self.until is None or when < self.until
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "since": _iso(self.since),
            "until": _iso(self.until),
            "text": self.text,
            "kind": self.kind,
            "soft": self.soft,
        }


@dataclass(frozen=True, slots=True)
class Interpretation:
    """What a query was understood to say; see the module docstring for each field."""

    timeframe: TimeFrame | None
    searched: str
    intent: Intent
    topics: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "timeframe": None if self.timeframe is None else self.timeframe.to_dict(),
            "intent": str(self.intent),
            "topics": list(self.topics),
            "searched": self.searched,
        }


# --------------------------------------------------------------------------------------
# Calendar arithmetic (dates; a window is made of local midnights of the zone)


def _month_len(y: int, m: int) -> int:
    return calendar.monthrange(y, m)[1]


def _add_months(d: date, n: int) -> date:
    """`d` moved by n calendar months, the day clamped to the month (Mar 31 - 1 = Feb 28)."""
    y, m0 = divmod(d.year * 12 + d.month - 1 + n, 12)
    return date(y, m0 + 1, min(d.day, _month_len(y, m0 + 1)))


def _month_first(d: date, n: int = 0) -> date:
    y, m0 = divmod(d.year * 12 + d.month - 1 + n, 12)
    return date(y, m0 + 1, 1)


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _quarter_first(d: date, n: int = 0) -> date:
    return _month_first(date(d.year, 3 * ((d.month - 1) // 3) + 1, 1), 3 * n)


# --------------------------------------------------------------------------------------
# Atoms: one time expression each, found by a rule (a regex and a handler)


@dataclass(slots=True)
class _Ctx:
    query: str
    lower: str
    now: datetime
    today: date
    tz: tzinfo

    def at(self, d: date, hour: int = 0) -> datetime:
        return datetime(d.year, d.month, d.day, hour, tzinfo=self.tz)

    @property
    def tomorrow(self) -> date:
        return self.today + timedelta(days=1)

    def prev_word(self, pos: int) -> str:
        m = _PREV_WORD.search(self.lower, max(0, pos - 40), pos)
        return m.group(1) if m else ""


@dataclass(slots=True)
class _Hit:
    """A time expression at [start, end) of the query with its window."""

    start: int
    end: int
    since: datetime | None
    until: datetime | None
    kind: str
    soft: bool = False
    absolute: bool = False  # a calendar date, month or year named outright
    day: bool = False  # one whole day: a following "morning"/"evening" narrows it
    on_glue: bool = False  # "on" before it is glue ("on Tuesday", "on March 3")
    weekday: int | None = None  # a bare weekday, which another window may place
    yearless: bool = False  # a month or date whose year was chosen as the most recent


_Handler = Callable[[re.Match[str], _Ctx], _Hit | None]
_PREV_WORD = re.compile(r"([a-z]+)[\s-]*$")

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WD_ABBR = {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3,
            "fri": 4, "sat": 5, "sun": 6}  # fmt: skip
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")  # fmt: skip
_MON_ABBR = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8,
             "sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12}  # fmt: skip
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
            "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
            "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40,
            "fifty": 50, "sixty": 60, "ninety": 90}  # fmt: skip
#: Vague counts: how many units they stand for; their windows are soft.
_VAGUE = {"couple": 2, "few": 3, "several": 5}

_WD_RX = "|".join(_WEEKDAYS) + "|" + "|".join(sorted(_WD_ABBR, key=len, reverse=True))
_MON_RX = "|".join(_MONTHS) + "|" + "|".join(sorted(_MON_ABBR, key=len, reverse=True))
_NUM_RX = (
    r"\d{1,4}|half\s+an?|a\s+couple(?:\s+of)?|couple(?:\s+of)?|a\s+few|few|several|"
    + "|".join(sorted(_NUMBERS, key=len, reverse=True))
)
_UNIT_RX = r"(?P<unit>minute|min|hour|hr|day|week|fortnight|month|year)s?"
#: Words before a month name that make it a date ("in March"), not a verb or a modal.
_MONTH_PRE = frozenset(
    {"in", "during", "since", "after", "before", "until", "till", "til", "by", "from",
     "around", "of", "early", "mid", "late", "last", "this", "next", "between",
     "and", "to", "through", "thru", "throughout", "starting", "beginning", "circa", "end",
     "start"}
)  # fmt: skip
#: ...of which these only count inside a range ("between March and May").
_RANGE_ONLY = frozenset({"and", "to", "through", "thru"})
#: Words after a lowercase "may" that keep it a month ("in may we...", "in may, ...").
_AFTER_MAY = frozenset(
    {"", "the", "a", "i", "we", "you", "they", "he", "she", "it", "and", "or", "but", "last",
     "this", "next", "when", "where", "what", "which", "who", "how", "why", "for", "with",
     "to", "on", "at", "in", "of", "before", "after", "until", "since", "did", "was", "were",
     "is", "are", "my", "our", "notes", "meeting", "release"}
)  # fmt: skip
_YEAR_PRE = frozenset(
    {"in", "during", "since", "after", "before", "until", "till", "by", "from", "between",
     "around", "circa", "of", "early", "mid", "late", "throughout", "year", "and", "to",
     "through", "starting", "beginning"}
)  # fmt: skip
_HABIT = frozenset({"every", "each", "most", "all", "other", "some"})
_PARTS = {"morning": (5, 12), "afternoon": (12, 18), "evening": (18, 24), "night": (18, 29)}


def _count(text: str) -> tuple[float, bool]:
    """The number a count word or digits say, and whether it is vague."""
    t = text.lower().split()
    if t[0] == "half":
        return 0.5, False
    for word, n in _VAGUE.items():
        if word in t:
            return float(n), True
    w = t[-1]
    return (float(int(w)) if w.isdigit() else float(_NUMBERS[w])), False


def _part(ctx: _Ctx, d: date, part: str) -> tuple[datetime, datetime]:
    a, b = _PARTS[part]
    return ctx.at(d) + timedelta(hours=a), ctx.at(d) + timedelta(hours=b)


def _this(ctx: _Ctx, first: date, end: date) -> tuple[date, date]:
    """A current period ends at tomorrow 00:00 once begun: nothing is stored ahead of now."""
    return (first, min(end, ctx.tomorrow)) if first <= ctx.today else (first, end)


def _h_day_word(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    w = m.group("w").lower()
    if w == "tonight":
        a, b = _part(ctx, ctx.today, "night")
        return _Hit(m.start(), m.end(), a, b, "day", soft=True)
    if " " in w:  # the day before yesterday / after tomorrow
        d = ctx.today + timedelta(days=-2 if "before" in w else 2)
    else:
        d = ctx.today + timedelta(days={"today": 0, "yesterday": -1, "tomorrow": 1}[w])
    return _Hit(m.start(), m.end(), ctx.at(d), ctx.at(d + timedelta(days=1)), "day", day=True)


def _h_part_of_day(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    which, part = m.group("which").lower(), m.group("part").lower()
    if which == "last" and part not in ("night", "evening"):
        return None
    shift = {"this": 0, "yesterday": -1, "tomorrow": 1, "last": -1}[which]
    a, b = _part(ctx, ctx.today + timedelta(days=shift), part)
    return _Hit(m.start(), m.end(), a, b, "day", soft=True)


def _h_earlier(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    unit = m.group("unit").lower()
    t = ctx.today
    if unit == "today":
        return _Hit(m.start(), m.end(), ctx.at(t), ctx.at(ctx.tomorrow), "day", day=True)
    first = {"week": _monday(t), "month": t.replace(day=1), "year": date(t.year, 1, 1)}[unit]
    end = t if t > first else ctx.tomorrow
    return _Hit(m.start(), m.end(), ctx.at(first), ctx.at(end), unit)


def _period(ctx: _Ctx, unit: str, n: int) -> tuple[date, date]:
    """The calendar `unit` n steps from the current one (0 = this, -1 = last)."""
    t = ctx.today
    if unit == "week":
        first = _monday(t) + timedelta(weeks=n)
        return first, first + timedelta(weeks=1)
    if unit == "weekend":
        sat = _monday(t) + timedelta(weeks=n, days=5)
        return sat, sat + timedelta(days=2)
    if unit == "month":
        return _month_first(t, n), _month_first(t, n + 1)
    if unit == "quarter":
        return _quarter_first(t, n), _quarter_first(t, n + 1)
    return date(t.year + n, 1, 1), date(t.year + n + 1, 1, 1)


def _back(d: date, unit: str, n: float) -> date:
    """The day n units before `d` (months and years clamp the day: Feb 29 - 1 year = Feb 28)."""
    if unit == "day":
        return d - timedelta(days=n)
    if unit == "week":
        return d - timedelta(days=7 * n)
    if unit == "fortnight":
        return d - timedelta(days=14 * n)
    if unit == "month":
        whole = int(n)
        out = _add_months(d, -whole)
        return out - timedelta(days=round((n - whole) * 30))
    whole = int(n)
    out = _add_months(d, -12 * whole)
    return _add_months(out, -round((n - whole) * 12))


def _h_period(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    if m.group("unit2"):  # "the week before last"
        unit = m.group("unit2").lower()
        first, end = _period(ctx, unit, -2)
        return _Hit(m.start(), m.end(), ctx.at(first), ctx.at(end), unit)
    mod = " ".join(m.group("mod").lower().split())
    unit = m.group("unit").lower()
    the = bool(m.group("the"))
    t = ctx.today
    if unit == "weekend":
        if mod in ("past", "this past") or (the and mod == "last"):
            n = 0 if t.weekday() >= 5 else -1
        else:
            n = {"last": -1, "previous": -1, "prior": -1, "this": 0, "current": 0}.get(mod, 1)
        first, end = _period(ctx, unit, n)
        if n == 0:
            first, end = _this(ctx, first, end)
        return _Hit(m.start(), m.end(), ctx.at(first), ctx.at(end), "weekend")
    if mod in ("past", "this past") or (the and mod == "last"):
        first = _add_months(t, -3) if unit == "quarter" else _back(t, unit, 1)
        return _Hit(m.start(), m.end(), ctx.at(first), ctx.at(ctx.tomorrow), "recent")
    n = {"last": -1, "previous": -1, "prior": -1, "this": 0, "current": 0}.get(mod, 1)
    first, end = _period(ctx, unit, n)
    if n == 0:
        first, end = _this(ctx, first, end)
    return _Hit(m.start(), m.end(), ctx.at(first), ctx.at(end), unit)


def _h_weekend(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    if ctx.prev_word(m.start()) in _HABIT:
        return None
    n = 0 if ctx.today.weekday() >= 5 else -1
    first, end = _period(ctx, "weekend", n)
    if n == 0:
        first, end = _this(ctx, first, end)
    return _Hit(m.start(), m.end(), ctx.at(first), ctx.at(end), "weekend", on_glue=True)


def _h_ago(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    n, vague = _count(m.group("n"))
    unit = {"min": "minute", "hr": "hour"}.get(m.group("unit").lower(), m.group("unit").lower())
    return _ago(ctx, m.start(), m.end(), n, vague, unit)


def _ago(ctx: _Ctx, start: int, stop: int, n: float, vague: bool, unit: str) -> _Hit | None:
    """The window of "n units ago": see the module docstring."""
    if n <= 0 or n > 5000:
        return None
    if unit == "year" and n != int(n):  # half a year ago: six months
        n, unit = n * 12, "month"
    if unit == "month" and n != int(n):  # half a month ago: two weeks
        n, unit = float(max(1, round(n * 30 / 7))), "week"
    if unit in ("minute", "hour"):
        step = timedelta(minutes=n) if unit == "minute" else timedelta(hours=n)
        instant = ctx.now - step
        half = timedelta(hours=1) if unit == "hour" and n >= 1 else step / 2
        half = max(half, timedelta(minutes=5))
        return _Hit(start, stop, instant - half, instant + half, "around", soft=True)
    centre = _back(ctx.today, unit, n)
    if unit == "day" and not vague:
        return _Hit(start, stop, ctx.at(centre), ctx.at(centre + timedelta(days=1)), "day",
                    day=True)  # fmt: skip
    if unit == "day":  # "a couple of days ago": a day either side
        first, end = centre - timedelta(days=1), centre + timedelta(days=2)
    elif unit in ("week", "fortnight"):
        width = 7 if unit == "week" else 14
        first = centre - timedelta(days=width // 2)
        end = first + timedelta(days=width)
        if vague:
            first, end = first - timedelta(days=7), end + timedelta(days=7)
    elif unit == "month":
        first, end = centre - timedelta(days=15), centre + timedelta(days=16)
        if vague:
            first, end = _add_months(first, -1), _add_months(end, 1)
    else:
        first, end = _add_months(centre, -6), _add_months(centre, 6)
    return _Hit(start, stop, ctx.at(first), ctx.at(end), "around", soft=True)


def _h_past_n(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    n, vague = _count(m.group("n"))
    unit = {"min": "minute", "hr": "hour"}.get(m.group("unit").lower(), m.group("unit").lower())
    if n <= 0 or n > 5000:
        return None
    tomorrow = ctx.at(ctx.tomorrow)
    if unit in ("minute", "hour"):
        step = timedelta(minutes=n) if unit == "minute" else timedelta(hours=n)
        return _Hit(m.start(), m.end(), ctx.now - step, tomorrow, "recent", soft=vague)
    first = _back(ctx.today, unit, n)
    return _Hit(m.start(), m.end(), ctx.at(first), tomorrow, "recent", soft=vague)


def _h_recent(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    w = " ".join(m.group(0).lower().split())
    if w == "the other day":
        first, end = ctx.today - timedelta(days=7), ctx.today
    else:
        first, end = ctx.today - timedelta(days=RECENT_DAYS), ctx.tomorrow
    return _Hit(m.start(), m.end(), ctx.at(first), ctx.at(end), "recent", soft=True)


def _wd_index(word: str) -> int:
    w = word.lower().rstrip(".")
    return _WEEKDAYS.index(w) if w in _WEEKDAYS else _WD_ABBR[w]


def _weekday_date(today: date, wd: int, mod: str) -> date:
    """The date a weekday names: see the module docstring for each modifier."""
    if mod in ("last", "past", "this past", "previous"):
        return today - timedelta(days=(today.weekday() - wd - 1) % 7 + 1)
    if mod == "this":
        return _monday(today) + timedelta(days=wd)
    if mod in ("next", "coming"):
        return today + timedelta(days=(wd - today.weekday() - 1) % 7 + 1)
    return today - timedelta(days=(today.weekday() - wd) % 7)


def _h_weekday(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    word = m.group("wd")
    mod = " ".join((m.group("mod") or "").lower().split())
    full = word.lower().rstrip(".") in _WEEKDAYS
    if not mod:
        prev = ctx.prev_word(m.start())
        if prev in _HABIT:
            return None
        if not full and not (
            word[0].isupper() and prev in ("on", "since", "before", "after", "until", "by")
        ):
            return None
    d = _weekday_date(ctx.today, _wd_index(word), mod)
    return _Hit(m.start(), m.end(), ctx.at(d), ctx.at(d + timedelta(days=1)), "day",
                day=True, on_glue=not mod, weekday=None if mod else _wd_index(word))  # fmt: skip


def _month_index(word: str) -> int:
    w = word.lower().rstrip(".")
    return _MONTHS.index(w) + 1 if w in _MONTHS else _MON_ABBR[w]


def _recent_day(today: date, month: int, day: int) -> date | None:
    """The most recent `month`/`day` not after today (Feb 29 looks back to a leap year)."""
    for y in range(today.year, today.year - 9, -1):
        if day <= _month_len(y, month):
            d = date(y, month, day)
            if d <= today:
                return d
    return None


def _month_hit(
    ctx: _Ctx, start: int, end: int, month: int, year: int | None, day: int | None,
    mod: str, part: str,
) -> _Hit | None:  # fmt: skip
    hit = _month_window(ctx, start, end, month, year, day, mod, part)
    if hit is not None and year is None and not mod:
        hit.yearless = True
    return hit


def _month_window(
    ctx: _Ctx, start: int, end: int, month: int, year: int | None, day: int | None,
    mod: str, part: str,
) -> _Hit | None:  # fmt: skip
    t = ctx.today
    if day is not None:
        if year is not None:
            if not 1 <= day <= _month_len(year, month):
                return None
            d: date | None = date(year, month, day)
        else:
            d = _recent_day(t, month, day)
        if d is None:
            return None
        return _Hit(start, end, ctx.at(d), ctx.at(d + timedelta(days=1)), "day",
                    absolute=True, day=True, on_glue=True)  # fmt: skip
    if year is None:
        if mod == "last":
            year = t.year if month < t.month else t.year - 1
        elif mod == "next":
            year = t.year if month > t.month else t.year + 1
        elif mod == "this":
            year = t.year
        else:
            year = t.year if month <= t.month else t.year - 1
    first, after = date(year, month, 1), _month_first(date(year, month, 1), 1)
    if part:
        lo, hi = {"early": (1, 11), "beginning": (1, 11), "start": (1, 11), "mid": (11, 21),
                  "late": (21, 32), "end": (21, 32)}[part]  # fmt: skip
        first = date(year, month, lo)
        after = date(year, month, hi) if hi <= _month_len(year, month) else after
        return _Hit(start, end, ctx.at(first), ctx.at(after), "month", soft=True, absolute=True)
    return _Hit(start, end, ctx.at(first), ctx.at(after), "month", absolute=True, on_glue=True)


_AMBIGUOUS_MONTHS = frozenset({"may", "march", "mar"})
_NEXT_WORD = re.compile(r"\s*([a-z]*)")
_END_OR_PUNCT = re.compile(r"\s*(?:[,.;:?!)]|$)")


def _function_word_next(ctx: _Ctx, pos: int) -> bool:
    """Whether the word at `pos` is absent, punctuation or a function word ("in May, we...")."""
    nxt = _NEXT_WORD.match(ctx.lower, pos)
    return nxt is None or nxt.group(1) in _AFTER_MAY


def _h_month(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    word = m.group("mon")
    low = word.lower().rstrip(".")
    pre = " ".join((m.group("pre") or "").lower().split())
    day = int(m.group("day")) if m.group("day") else None
    year = int(m.group("year")) if m.group("year") else None
    if year is not None and not 1900 <= year <= 2200:
        return None
    if day is not None and not 1 <= day <= 31:
        return None
    if pre in _RANGE_ONLY and not re.search(r"\b(?:between|from)\b", ctx.lower[: m.start()]):
        pre = ""
    if pre == "of" and ctx.prev_word(m.start("pre")) in ("end", "start", "beginning"):
        pre = ctx.prev_word(m.start("pre"))
        start = ctx.lower.rfind(pre, 0, m.start("pre"))
    else:
        start = (
            m.start("pre")
            if pre in ("early", "mid", "late", "last", "this", "next")
            else (m.start("mon"))
        )
    if day is None and year is None:
        if not pre:
            return None
        if low == "may" and word[0] == "m" and not _function_word_next(ctx, m.end()):
            return None  # the modal: "in may cause", "this may break"
    elif (
        low in _AMBIGUOUS_MONTHS
        and word[0].islower()
        and year is None
        and not pre
        and not (m.group("ord") or _END_OR_PUNCT.match(ctx.lower, m.end()))
    ):
        return None  # "march 5 miles", "may 3 users": lowercase, nothing says it is a date
    mod = pre if pre in ("last", "this", "next") else ""
    part = pre if pre in ("early", "mid", "late", "end", "start", "beginning") else ""
    return _month_hit(ctx, start, m.end(), _month_index(word), year, day, mod, part)


def _h_day_month(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    word = m.group("mon")
    day = int(m.group("day"))
    year = int(m.group("year")) if m.group("year") else None
    if year is not None and not 1900 <= year <= 2200:
        return None
    if not 1 <= day <= 31:
        return None
    if (
        word.lower().rstrip(".") in _AMBIGUOUS_MONTHS
        and word[0].islower()
        and not (m.group("of") or m.group("ord") or year)
    ):
        return None  # "5 may cause", "3 march ..."
    return _month_hit(ctx, m.start(), m.end(), _month_index(word), year, day, "", "")


def _h_iso(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    y = int(m.group("y"))
    if not 1900 <= y <= 2200:
        return None
    if m.group("m") is None:
        if ctx.prev_word(m.start()) not in _YEAR_PRE or not _function_word_next(ctx, m.end()):
            return None  # "ticket 2026", "in 2048 dimensions"
        if ctx.prev_word(m.start()) in _RANGE_ONLY and not re.search(
            r"\b(?:between|from)\b", ctx.lower[: m.start()]
        ):
            return None
        first = date(y, 1, 1)
        return _Hit(m.start(), m.end(), ctx.at(first), ctx.at(date(y + 1, 1, 1)), "year",
                    absolute=True)  # fmt: skip
    mo = int(m.group("m"))
    if not 1 <= mo <= 12:
        return None
    if m.group("d") is None:
        first = date(y, mo, 1)
        return _Hit(m.start(), m.end(), ctx.at(first), ctx.at(_month_first(first, 1)), "month",
                    absolute=True, on_glue=True)  # fmt: skip
    d = int(m.group("d"))
    if not 1 <= d <= _month_len(y, mo):
        return None
    day = date(y, mo, d)
    return _Hit(m.start(), m.end(), ctx.at(day), ctx.at(day + timedelta(days=1)), "day",
                absolute=True, day=True, on_glue=True)  # fmt: skip


def _quarter_hit(ctx: _Ctx, start: int, end: int, q: int, year: int | None) -> _Hit | None:
    if year is None:
        year = ctx.today.year
        if date(year, 3 * q - 2, 1) > ctx.today:
            year -= 1
    if not 1900 <= year <= 2200:
        return None
    first = date(year, 3 * q - 2, 1)
    return _Hit(start, end, ctx.at(first), ctx.at(_month_first(first, 3)), "quarter",
                absolute=True)  # fmt: skip


def _h_quarter(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    y = m.group("y1") or m.group("y2")
    return _quarter_hit(ctx, m.start(), m.end(), int(m.group("q")), int(y) if y else None)


# ---- Chinese and Japanese

_CN_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "兩": 2, "三": 3, "四": 4,
              "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}  # fmt: skip
_CN_NUM = r"\d{1,4}|[零〇一二两兩三四五六七八九十百几幾半]{1,5}"
_CN_WD = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_JP_WD = {"月": 0, "火": 1, "水": 2, "木": 3, "金": 4, "土": 5, "日": 6}


def _cn_int(text: str) -> tuple[float, bool] | None:
    """A Chinese or Arabic number, 1..9999 (几 = a few, vague; 半 = half)."""
    s = text.strip()
    if s.isdigit():
        return float(int(s)), False
    if s in ("几", "幾"):
        return 3.0, True
    if s == "半":
        return 0.5, False
    if "十" in s:
        tens, _, ones = s.partition("十")
        if len(tens) > 1 or len(ones) > 1 or (tens and tens not in _CN_DIGITS):
            return None
        if ones and ones not in _CN_DIGITS:
            return None
        return float((_CN_DIGITS[tens] if tens else 1) * 10 + (_CN_DIGITS[ones] if ones else 0)), (
            False
        )
    if s and all(c in _CN_DIGITS for c in s):
        return float(int("".join(str(_CN_DIGITS[c]) for c in s))), False
    return None


_CN_UNITS = {"分钟": "minute", "分鐘": "minute", "分": "minute", "小时": "hour", "小時": "hour",
             "钟头": "hour", "鐘頭": "hour", "時間": "hour", "天": "day", "日": "day",
             "周": "week", "週": "week", "星期": "week", "礼拜": "week", "禮拜": "week",
             "月": "month", "年": "year"}  # fmt: skip


def _h_cn_ago(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    parsed = _cn_int(m.group("n"))
    unit = _CN_UNITS[m.group("u")]
    if parsed is None or parsed[0] <= 0:
        return None
    n, vague = parsed
    if unit == "month" and not m.group("ge"):
        return None  # 3月前 is "before March"
    if (unit == "year" and n > 200) or n > 5000:
        return None  # 2020年前 is "before 2020"
    if n != int(n) and unit not in ("month", "year"):
        return None  # 半天前: half a day is no day window
    return _ago(ctx, m.start(), m.end(), n, vague, unit)


def _h_cn_past(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    parsed = _cn_int(m.group("n"))
    if parsed is None or parsed[0] <= 0 or parsed[0] > 5000:
        return None
    n, vague = parsed
    unit = _CN_UNITS[m.group("u")]
    if unit == "hour":
        return _Hit(m.start(), m.end(), ctx.now - timedelta(hours=n), ctx.at(ctx.tomorrow),
                    "recent", soft=vague)  # fmt: skip
    first = _back(ctx.today, unit, n)
    return _Hit(m.start(), m.end(), ctx.at(first), ctx.at(ctx.tomorrow), "recent", soft=vague)


_CN_DAY = {"大前天": -3, "一昨昨日": -3, "前天": -2, "一昨日": -2, "一昨天": -2, "昨天": -1,
           "昨日": -1, "今天": 0, "今日": 0, "明天": 1, "明日": 1, "后天": 2, "後天": 2,
           "明後日": 2}  # fmt: skip
_CN_PART = {"上午": "morning", "早上": "morning", "早晨": "morning", "清晨": "morning",
            "凌晨": "morning", "中午": "afternoon", "下午": "afternoon", "傍晚": "evening",
            "晚上": "evening", "夜里": "night", "夜裡": "night", "夜间": "night",
            "夜間": "night", "夜": "night", "早": "morning", "晨": "morning",
            "晚": "evening", "朝": "morning"}  # fmt: skip


def _h_cn_day(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    d = ctx.today + timedelta(days=_CN_DAY[m.group("d")])
    part = m.group("p")
    if part:
        a, b = _part(ctx, d, _CN_PART[part])
        return _Hit(m.start(), m.end(), a, b, "day", soft=True)
    return _Hit(m.start(), m.end(), ctx.at(d), ctx.at(d + timedelta(days=1)), "day", day=True)


def _h_cn_short_part(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    d = ctx.today + timedelta(days={"今": 0, "昨": -1, "明": 1}[m.group("d")])
    a, b = _part(ctx, d, _CN_PART[m.group("p")])
    return _Hit(m.start(), m.end(), a, b, "day", soft=True)


def _cn_shift(pre: str) -> int | None:
    if pre.startswith("上上"):
        return -2
    if pre[:1] in ("上", "先"):
        return -1
    if pre[:1] in ("这", "這", "本", "今"):
        return 0
    if pre[:1] in ("下", "来", "來"):
        return 1
    return None


def _h_cn_week(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    shift = _cn_shift(m.group("pre"))
    if shift is None:
        return None
    wd = m.group("wd")
    if wd == "末":
        first, end = _period(ctx, "weekend", shift)
        if shift == 0:
            first, end = _this(ctx, first, end)
        return _Hit(m.start(), m.end(), ctx.at(first), ctx.at(end), "weekend")
    if wd:
        d = _monday(ctx.today) + timedelta(weeks=shift, days=_CN_WD[wd])
        return _Hit(m.start(), m.end(), ctx.at(d), ctx.at(d + timedelta(days=1)), "day", day=True)
    first, end = _period(ctx, "week", shift)
    if shift == 0:
        first, end = _this(ctx, first, end)
    return _Hit(m.start(), m.end(), ctx.at(first), ctx.at(end), "week")


def _h_cn_weekday(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    if m.start() > 0 and ctx.query[m.start() - 1] in "每各逢":
        return None  # 每周二: every Tuesday
    wd = _JP_WD[m.group("jwd")] if m.group("jwd") else _CN_WD[m.group("wd")]
    d = _weekday_date(ctx.today, wd, "")
    return _Hit(m.start(), m.end(), ctx.at(d), ctx.at(d + timedelta(days=1)), "day", day=True,
                weekday=wd)  # fmt: skip


def _h_cn_weekend(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    if m.start() > 0 and ctx.query[m.start() - 1] in "每各逢":
        return None
    return _h_weekend(m, ctx)


def _h_cn_period(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    shift = _cn_shift(m.group("pre"))
    if shift is None:
        return None
    unit = "quarter" if m.group("u").endswith("季度") or m.group("u") == "季" else "month"
    first, end = _period(ctx, unit, shift)
    if shift == 0:
        first, end = _this(ctx, first, end)
    return _Hit(m.start(), m.end(), ctx.at(first), ctx.at(end), unit)


_CN_YEAR = {"今年": 0, "去年": -1, "昨年": -1, "前年": -2, "一昨年": -2, "明年": 1,
            "来年": 1, "來年": 1, "后年": 2, "後年": 2}  # fmt: skip


def _h_cn_year(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    shift = _CN_YEAR[m.group(0)]
    first, end = _period(ctx, "year", shift)
    if shift == 0:
        first, end = _this(ctx, first, end)
    return _Hit(m.start(), m.end(), ctx.at(first), ctx.at(end), "year")


def _h_cn_date(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    groups = m.groupdict()
    year: int | None = None
    if groups.get("y"):
        parsed = _cn_int(groups["y"])
        if parsed is None:
            return None
        year = int(parsed[0])
        if not 1900 <= year <= 2200:
            return None
    elif groups.get("ry"):
        year = ctx.today.year + _CN_YEAR[groups["ry"]]
    elif m.start() > 0 and ctx.query[m.start() - 1] in "0123456789个個几幾每第上下这這本今先来來":
        return None  # 13月, 三个月, 每月: not a month named outright
    if not groups.get("m"):
        if year is None:
            return None
        first = date(year, 1, 1)
        return _Hit(m.start(), m.end(), ctx.at(first), ctx.at(date(year + 1, 1, 1)), "year",
                    absolute=True)  # fmt: skip
    month = _cn_int(groups["m"])
    if month is None or not 1 <= month[0] <= 12 or month[0] != int(month[0]):
        return None
    day: int | None = None
    if groups.get("d"):
        parsed_day = _cn_int(groups["d"])
        if parsed_day is None or not 1 <= parsed_day[0] <= 31:
            return None
        day = int(parsed_day[0])
    return _month_hit(ctx, m.start(), m.end(), int(month[0]), year, day, "", "")


def _h_cn_quarter(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    q = _cn_int(m.group("q"))
    if q is None or not 1 <= q[0] <= 4:
        return None
    year = int(m.group("y")) if m.group("y") else None
    return _quarter_hit(ctx, m.start(), m.end(), int(q[0]), year)


def _h_cn_recent(m: re.Match[str], ctx: _Ctx) -> _Hit | None:
    w = m.group(0)
    if w in ("前几天", "前幾天", "前些天", "前些日子", "前两天", "前兩天"):
        first, end = ctx.today - timedelta(days=5), ctx.today
    else:
        first, end = ctx.today - timedelta(days=RECENT_DAYS), ctx.tomorrow
    return _Hit(m.start(), m.end(), ctx.at(first), ctx.at(end), "recent", soft=True)


_I = re.IGNORECASE
_AGO = re.compile(rf"\b(?P<n>{_NUM_RX})\s+{_UNIT_RX}\s+ago\b", _I)
_CN_NUM_G = rf"(?P<n>{_CN_NUM})"
_CN_UNIT_G = r"(?P<u>分钟|分鐘|分|小时|小時|钟头|鐘頭|時間|天|日|周|週|星期|礼拜|禮拜|月|年)"
_CN_DAYNUM = r"\d{1,2}|[一二三]?十[一二三四五六七八九]?|[一二三四五六七八九]"
_CN_MONNUM = r"\d{1,2}|十[一二]?|[一二三四五六七八九]"

#: Every time-expression rule: a compiled regex and the handler that turns a match into a
#: window (or refuses it). All candidates are collected; the leftmost-longest win.
_RULES: tuple[tuple[re.Pattern[str], _Handler], ...] = (
    (re.compile(r"\b(?P<w>(?:the\s+)?day\s+(?:before\s+yesterday|after\s+tomorrow)|today|"
                r"tonight|yesterday|tomorrow)(?:['’]s)?\b", _I), _h_day_word),
    (re.compile(r"\b(?P<which>this|yesterday|tomorrow|last)\s+(?P<part>morning|afternoon|"
                r"evening|night)(?:['’]s)?\b", _I), _h_part_of_day),
    (re.compile(r"\bearlier\s+(?:this\s+)?(?P<unit>today|week|month|year)\b", _I), _h_earlier),
    (re.compile(r"\b(?:(?P<the>the\s+)?(?P<mod>this\s+past|last|this|next|past|previous|prior|"
                r"coming|current)\s+(?P<unit>weekend|week|month|quarter|year)|(?:the\s+)?"
                r"(?P<unit2>week|month|year)\s+before\s+last)(?:['’]s)?\b", _I), _h_period),
    (re.compile(r"\bthe\s+weekend\b", _I), _h_weekend),
    (_AGO, _h_ago),
    (re.compile(rf"\b(?:the\s+)?(?:past|last|previous|prior)\s+(?P<n>{_NUM_RX})\s+{_UNIT_RX}\b",
                _I), _h_past_n),
    (re.compile(r"\b(?:recently|lately|of\s+late|these\s+days|the\s+other\s+day)\b", _I),
     _h_recent),
    (re.compile(rf"\b(?:(?P<mod>this\s+past|last|this|next|past|previous|coming)\s+)?"
                rf"(?P<wd>{_WD_RX})(?!\w|\.\w)\.?(?:['’]s\b)?", _I), _h_weekday),
    (re.compile(rf"\b(?:(?P<pre>{'|'.join(sorted(_MONTH_PRE, key=len, reverse=True))})"
                rf"[\s-]+)?(?P<mon>{_MON_RX})(?!\w|\.\w)\.?(?:\s+(?P<day>\d{{1,2}})(?P<ord>st|nd|rd|th)?"
                rf"\b(?![:.]\d))?(?:,?\s+(?:of\s+)?(?P<year>\d{{4}})\b)?", _I), _h_month),
    (re.compile(rf"\b(?:the\s+)?(?P<day>\d{{1,2}})(?P<ord>st|nd|rd|th)?\s+(?P<of>of\s+)?"
                rf"(?P<mon>{_MON_RX})(?!\w|\.\w)\.?(?:,?\s+(?P<year>\d{{4}})\b)?", _I),
     _h_day_month),
    (re.compile(r"(?<![\w/:#@-])(?<![^.]\.)(?P<y>\d{4})(?:(?P<sep>[-/])(?P<m>\d{1,2})(?:(?P=sep)"
                r"(?P<d>\d{1,2}))?)?(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?"
                r"(?:Z|[+-]\d{2}:?\d{2})?)?(?![\w/:@]|[.-]\d)", _I), _h_iso),
    (re.compile(r"\b(?:(?P<y1>\d{4})[\s-]?)?Q(?P<q>[1-4])(?:[\s-]?(?P<y2>\d{4}))?\b", _I),
     _h_quarter),
    # Chinese and Japanese (from _CJK_FROM on: skipped for ASCII queries)
    (re.compile(r"(?P<d>大前天|一昨昨日|前天|一昨日|一昨天|昨天|昨日|今天|今日|明天|明日|后天|"
                r"後天|明後日)(?P<p>上午|早上|早晨|清晨|凌晨|中午|下午|傍晚|晚上|夜里|夜裡|夜间|"
                r"夜間)?"), _h_cn_day),
    (re.compile(r"(?P<d>[今昨明])(?P<p>早|晨|晚|夜|朝)"), _h_cn_short_part),
    (re.compile(r"(?P<pre>上上个|上上個|上上|上个|上個|上|这个|這個|这|這|本|下个|下個|下|今|先|来|來)"
                r"(?:周|週|星期|礼拜|禮拜)(?:(?P<wd>[一二三四五六日天末])|(?![期年边邊围圍刊报報转轉]))"),
     _h_cn_week),
    (re.compile(r"(?:周|週|星期|礼拜|禮拜)(?P<wd>[一二三四五六日天])|(?P<jwd>[月火水木金土日])曜日"),
     _h_cn_weekday),
    (re.compile(r"(?<![上下这這本每])(?:周末|週末)"), _h_cn_weekend),
    (re.compile(r"(?P<pre>上上个|上上個|上个|上個|上|这个|這個|本|下个|下個|下|先|今|来|來)"
                r"(?P<u>月|季度|季)"), _h_cn_period),
    (re.compile(r"一昨年|今年|去年|昨年|前年|明年|来年|來年|后年|後年"), _h_cn_year),
    (re.compile(rf"{_CN_NUM_G}\s*(?:(?P<ge>个|個|ヶ|か|カ|ケ|ヵ)\s*)?{_CN_UNIT_G}(?:间|間)?\s*"
                r"(?:前|以前|之前)"), _h_cn_ago),
    (re.compile(rf"(?:最近|过去|過去|近|这|這|过去的|過去的)\s*{_CN_NUM_G}\s*(?:个|個)?\s*"
                r"(?P<u>天|日|周|週|星期|礼拜|月|年|小时|小時)(?:来|以来|以來|里|裡|内|內)?"),
     _h_cn_past),
    (re.compile(r"前几天|前幾天|前些天|前些日子|前两天|前兩天|最近|近期|近来|近來|这几天|這幾天|"
                r"这些天|這些天|这段时间|這段時間"), _h_cn_recent),
    (re.compile(rf"(?<!\d)(?P<y>\d{{4}}|[〇零一二三四五六七八九]{{4}})\s*年(?:\s*(?P<m>{_CN_MONNUM})\s*月份?"
                rf"(?:\s*(?P<d>{_CN_DAYNUM})\s*[日号號])?)?"), _h_cn_date),
    (re.compile(rf"(?P<ry>今年|去年|前年|明年|昨年)\s*(?P<m>{_CN_MONNUM})\s*月份?"
                rf"(?:\s*(?P<d>{_CN_DAYNUM})\s*[日号號])?"), _h_cn_date),
    (re.compile(rf"(?P<m>{_CN_MONNUM})\s*月份?(?:\s*(?P<d>{_CN_DAYNUM})\s*[日号號])?"), _h_cn_date),
    (re.compile(r"(?:(?P<y>\d{4})\s*年\s*)?第\s*(?P<q>[1-4一二三四])\s*(?:季度|季|四半期)"),
     _h_cn_quarter),
)  # fmt: skip

#: The index of the first Chinese/Japanese rule: an ASCII query needs none of them.
_CJK_FROM = next(i for i, (_, handler) in enumerate(_RULES) if handler is _h_cn_day)

#: The quick path: a query with no digit, no CJK time character and no word that starts like
#: a time word (its first three letters, or one of the short words) has no time expression.
#: Every English rule needs one of these; false alarms ("decisions", "more") only cost the
#: full scan.
_TRIGGER_CHARS = re.compile(r"[\d今昨前明后後天日周週星期礼禮拜月年最近早晚午曜先来來去季段]")
_TRIGGER_PREFIXES = frozenset(
    {"tod", "ton", "yes", "tom", "day", "mor", "aft", "eve", "nig", "ear", "wee", "mon", "yea",
     "qua", "ago", "min", "hou", "rec", "lat", "tue", "wed", "thu", "fri", "sat", "sun",
     "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
)  # fmt: skip
_TRIGGER_WORDS = frozenset({"hr", "hrs", "fortnight", "fortnights"})
_LETTERS = re.compile(r"[a-z]+")


def _may_have_time(text: str) -> bool:
    if _TRIGGER_CHARS.search(text):
        return True
    return any(
        w[:3] in _TRIGGER_PREFIXES or w in _TRIGGER_WORDS for w in _LETTERS.findall(text.lower())
    )


# --------------------------------------------------------------------------------------
# Composition: operators, ranges, several expressions

_PART_AFTER = re.compile(r"\s+(?:in\s+the\s+|at\s+)?(morning|afternoon|evening|night)\b", _I)
_PRE_OP = re.compile(
    r"(?:\b(?P<en>since|after|starting(?:\s+(?:from|on|in))?|beginning(?:\s+(?:from|on|in))?|"
    r"before|prior\s+to|until|till|til|up\s+to|by|no\s+later\s+than|around|about|circa|"
    r"approximately|approx\.?|roughly)|(?P<zh>自从|自從|自|截至|截止|直到|大约|大約|大概|约|約))"
    r"\s*$",
    _I,
)
_POST_OP = re.compile(
    r"\s*(?:(?P<since>以来|以來|起|开始|開始|至今|到现在|到現在|以降|から)|"
    r"(?P<since_en>\s(?:onwards?|and\s+(?:later|after|since)|or\s+later)\b)|"
    r"(?P<after>之后|之後|以后|以後)|(?P<before>之前|以前)|(?P<until>まで|为止|為止)|"
    r"(?P<before_en>\s(?:or|and)\s+(?:earlier|before)\b)|(?P<around>左右|前后|前後)|"
    r"(?P<bare_before>前)|(?P<bare_after>后|後))",
    _I,
)
_RANGE_GAP = re.compile(
    r"\s*(?P<c>to|until|till|through|thru|and|&|\.\.|-|–|—|~|～|〜|到|至|和)\s*", _I
)
_RANGE_PRE = re.compile(r"(?:\b(?P<en>between|from)|(?P<zh>从|從|自从|自從|自))\s*$", _I)
_JOIN_GAP = re.compile(r"\s*(?:and|or|,|&|和|或|及|、)?\s*", _I)
#: Chinese glue, unless it ends a word: 现在 (now), 关于 (about), 由于 (because)...
_CN_GLUE = r"(?<![现現实實存正所由关關对對等属屬至位基])(?:在|于|於|从|從)\s*$"
_GLUE_LEFT = re.compile(
    rf"(?:\b(?:in|during|from|of|at|over|for|within|throughout)\s+)+$|{_CN_GLUE}", _I
)
_GLUE_LEFT_ON = re.compile(
    rf"(?:\b(?:in|during|from|of|at|over|for|within|throughout|on)\s+)+$|{_CN_GLUE}", _I
)
_GLUE_RIGHT = re.compile(r"\s*(?:的时候|的時候|时候|時候|的|里|裡|内|內|期间|期間|の)")


_IS_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


@dataclass(slots=True)
class _Expr:
    start: int
    end: int
    since: datetime | None
    until: datetime | None
    kind: str
    soft: bool
    on_glue: bool
    weekday: int | None = None

    def contains(self, when: datetime) -> bool:
        return (self.since is None or when >= self.since) and (
            self.until is None or when < self.until
        )


def _scan(ctx: _Ctx, text: str) -> list[_Hit]:
    """The leftmost-longest non-overlapping time expressions of `text`."""
    found: list[_Hit] = []
    for rx, handler in _RULES[: _CJK_FROM if text.isascii() else len(_RULES)]:
        for m in rx.finditer(text):
            try:
                hit = handler(m, ctx)
            except (ValueError, OverflowError, KeyError):  # a date out of range: no window
                hit = None
            if hit is not None and hit.start < hit.end:
                found.append(hit)
    found.sort(key=lambda h: (h.start, -h.end))
    chosen: list[_Hit] = []
    end = -1
    for hit in found:
        if hit.start >= end:
            chosen.append(hit)
            end = hit.end
    return chosen


def _widen(a: _Hit, days: int) -> tuple[datetime | None, datetime | None]:
    step = timedelta(days=days)
    return (None if a.since is None else a.since - step), (
        None if a.until is None else a.until + step
    )


def _compose(ctx: _Ctx, hits: list[_Hit], text: str) -> list[_Expr]:
    """Operators and ranges applied to the atoms: since/before/around X, between X and Y."""
    out: list[_Expr] = []
    i = 0
    while i < len(hits):
        a = hits[i]
        if a.day:  # "yesterday afternoon", "last Tuesday evening"
            pm = _PART_AFTER.match(text, a.end)
            if pm and a.since is not None:
                d = a.since.date()
                a.since, a.until = _part(ctx, d, pm.group(1).lower())
                a.end, a.soft, a.day = pm.end(), True, False
        if i + 1 < len(hits):
            b = hits[i + 1]
            if a.yearless and a.since and a.until and b.until and b.until <= a.since:
                # "from March to May" said in March: both ends in the same past year
                a.since = ctx.at(_add_months(a.since.date(), -12))
                a.until = ctx.at(_add_months(a.until.date(), -12))
            gap = _RANGE_GAP.fullmatch(text, a.end, b.start)
            pre = _RANGE_PRE.search(text, max(0, a.start - 12), a.start)
            if gap and (gap.group("c").lower() not in ("and", "&", "和") or (
                pre is not None and (pre.group("en") or "").lower() == "between"
            )):  # fmt: skip
                sinces = [t for t in (a.since, b.since) if t is not None]
                untils = [t for t in (a.until, b.until) if t is not None]
                start = pre.start() if pre else a.start
                out.append(_Expr(start, b.end, min(sinces) if sinces else None,
                                 max(untils) if untils else None, "range",
                                 a.soft and b.soft, False))  # fmt: skip
                i += 2
                continue
        start, end = a.start, a.end
        since, until, kind, soft = a.since, a.until, a.kind, a.soft
        op = _PRE_OP.search(text, max(0, a.start - 24), a.start)
        post = _POST_OP.match(text, a.end)
        word = ""
        if op is not None:
            word = " ".join((op.group("en") or op.group("zh")).lower().split())
            if (
                op.group("zh")
                and len(word) == 1
                and op.start() > 0
                and _IS_CJK.match(text, op.start() - 1)
            ):
                word = ""  # 预约明天 (booking), 来自上周: the character ends a word
            if word == "about" and not (a.absolute and a.kind == "day"):
                word = ""  # "notes about yesterday's meeting": a topic, not a vague date
            if word:
                start = op.start()
        if post is not None and not word:
            name = post.lastgroup or ""
            if name.startswith("bare_") and not a.absolute:
                post = None
            else:
                word = {"since": "since", "since_en": "since", "after": "after",
                        "before": "before", "before_en": "until", "until": "until",
                        "around": "around", "bare_before": "before",
                        "bare_after": "after"}[name]  # fmt: skip
                end = post.end()
        elif post is not None and post.group("since") and word in ("自从", "自從", "自"):
            end = post.end()  # 自从 X 以来
        if word in ("since", "自从", "自從", "自") or word.startswith(("starting", "beginning")):
            until, kind = None, "since"
        elif word == "after":
            since, until, kind = a.until, None, "since"
        elif word in ("before", "prior to"):
            since, until, kind = None, a.since, "before"
        elif word in ("until", "till", "til", "up to", "by", "no later than", "截至", "截止",
                      "直到"):  # fmt: skip
            since, kind = None, "before"
        elif word:  # around, about, circa, 大约...
            since, until = _widen(a, AROUND_DAYS)
            kind, soft = "around", True
        out.append(_Expr(start, end, since, until, kind, soft, a.on_glue and not word,
                         None if word else a.weekday))  # fmt: skip
        i += 1
    return out


def _place_weekdays(ctx: _Ctx, exprs: list[_Expr]) -> None:
    """A bare weekday beside a longer window is that weekday inside it ("last week on Tuesday")."""
    for e in exprs:
        if e.weekday is None:
            continue
        for other in exprs:
            if other is e or other.since is None or other.until is None:
                continue
            first, end = other.since.date(), other.until.date()
            if (end - first).days < 2 or (e.since is not None and other.contains(e.since)):
                continue
            d = first + timedelta(days=(e.weekday - first.weekday()) % 7)
            if d < end:
                e.since, e.until = ctx.at(d), ctx.at(d + timedelta(days=1))
                break


def _combine(exprs: list[_Expr]) -> tuple[datetime | None, datetime | None, str, bool]:
    """Intersect the windows when they overlap, span them when they do not."""
    since, until, kind, soft = exprs[0].since, exprs[0].until, exprs[0].kind, exprs[0].soft
    for e in exprs[1:]:
        lo = max((t for t in (since, e.since) if t is not None), default=None)
        hi = min((t for t in (until, e.until) if t is not None), default=None)
        if lo is None or hi is None or lo < hi:
            if (lo, hi) == (e.since, e.until):
                kind, soft = e.kind, e.soft
            elif (lo, hi) != (since, until):
                kind, soft = "range", soft and e.soft
            since, until = lo, hi
        else:
            since = None if since is None or e.since is None else min(since, e.since)
            until = None if until is None or e.until is None else max(until, e.until)
            kind, soft = "range", soft or e.soft
    return since, until, kind, soft


_SPACE_PUNCT = re.compile(r"\s+([?!.,;:？！。，；：])")
_LEAD_PUNCT = re.compile(r"^[\s,;:.\-–—、，。]+")
_TRAIL_PUNCT = re.compile(r"[\s,;:\-–—、，]+$")


def _strip_spans(query: str, spans: list[tuple[int, int]]) -> str:
    parts: list[str] = []
    pos = 0
    for a, b in sorted(spans):
        if a < pos:
            a = pos
        parts.append(query[pos:a])
        parts.append(" ")
        pos = max(pos, b)
    parts.append(query[pos:])
    out = " ".join("".join(parts).split())
    out = _SPACE_PUNCT.sub(r"\1", out)
    out = _LEAD_PUNCT.sub("", out)
    return _TRAIL_PUNCT.sub("", out)


def _timeframe(ctx: _Ctx) -> tuple[TimeFrame | None, list[tuple[int, int]]]:
    text = ctx.query[:MAX_SCAN]
    hits = _scan(ctx, text)
    if not hits:
        return None, []
    exprs = _compose(ctx, hits, text)
    spans: list[tuple[int, int]] = []
    for k, e in enumerate(exprs):
        glue = (_GLUE_LEFT_ON if e.on_glue else _GLUE_LEFT).search(text, max(0, e.start - 40),
                                                                   e.start)  # fmt: skip
        start = glue.start() if glue else e.start
        right = _GLUE_RIGHT.match(text, e.end)
        end = right.end() if right else e.end
        if k + 1 < len(exprs) and _JOIN_GAP.fullmatch(text, end, exprs[k + 1].start):
            end = exprs[k + 1].start  # "yesterday and today": the "and" served the times
        spans.append((start, end))
    _place_weekdays(ctx, exprs)
    since, until, kind, soft = _combine(exprs)
    words = " + ".join(" ".join(text[e.start : e.end].split()) for e in exprs)
    if since is None and until is None:
        return None, spans
    if since is not None and until is not None and not since < until:
        return None, spans
    return TimeFrame(since, until, words, kind, soft), spans


# --------------------------------------------------------------------------------------
# Intent and topics

_DEBUG = re.compile(
    r"\b(?:errors?|bugs?|buggy|fix(?:e[sd]|ing)?|crash(?:e[sd]|ing)?|fail(?:s|ed|ing|ures?)?|"
    r"broken|breaks?|breaking|traceback|stack\s*traces?|exceptions?|panic(?:ked|s)?|segfaults?|"
    r"debug(?:ging)?|regressions?|not\s+working|doesn['’]?t\s+work|won['’]?t\s+(?:start|work|"
    r"build|compile|run)|timeouts?|timed\s+out|hangs?|deadlocks?|leak(?:s|ing)?|troubleshoot\w*|"
    r"workaround|oom)\b|报错|報錯|错误|錯誤|崩溃|崩潰|修复|修復|异常|異常|失败|失敗|故障|バグ|エラー",
    _I,
)
_LEARN = re.compile(
    r"\b(?:lessons?|learn(?:ed|t|ings?)?|how\s+(?:to|do|does|did|can|could|should|would)|why|"
    r"decid(?:e|ed|ing)|decisions?|best\s+practices?|tips?|insights?|takeaways?|principles?|"
    r"patterns?|guidelines?|conventions?|approach(?:es)?|remember\s+that|should\s+(?:i|we)|"
    r"what\s+works|trade-?offs?)\b|为什么|為什麼|如何|怎么做|怎麼做|怎样|怎樣|经验|經驗|教训|教訓|"
    r"学到|學到|决定|決定|最佳实践|最佳實踐|なぜ|学んだ",
    _I,
)
_EXPLORE = re.compile(
    r"\b(?:about|everything|anything|all|overview|explore|related|regarding|summar(?:y|ize|ise)|"
    r"topics?|thoughts\s+on|notes\s+on|what\s+do\s+(?:i|we)\s+know|tell\s+me|show\s+me|list)\b|"
    r"关于|關於|所有|相关|相關|总结|總結|概述|について",
    _I,
)
_QUESTION = frozenset(
    {"what", "when", "where", "which", "who", "whom", "whose", "why", "how", "did", "do",
     "does", "is", "are", "was", "were", "can", "could", "should", "would", "will", "have",
     "has", "had", "shall"}
)  # fmt: skip
_CJK_QUESTION = re.compile(
    r"什么|什麼|怎么|怎麼|为什么|為什麼|怎样|怎樣|如何|哪些|哪个|哪個|哪里|哪裡|"
    r"谁|誰|吗|嗎|呢|いつ|どう|なに|何"
)
_STOP = frozenset(
    {"a", "about", "above", "after", "again", "all", "also", "am", "an", "and", "any", "as",
     "at", "be", "been", "being", "before", "but", "by", "for", "from", "get", "got", "he",
     "her", "here", "him", "his", "i", "if", "in", "into", "it", "its", "just", "me", "more",
     "most", "my", "no", "not", "of", "on", "onto", "or", "our", "ours", "out", "over", "she",
     "so", "some", "such", "than", "that", "the", "their", "them", "then", "there", "these",
     "they", "this", "those", "to", "too", "up", "us", "very", "we", "with", "you", "your",
     "may", "might", "must", "let", "lets", "ok", "please", "thing", "things", "stuff",
     "something", "anything", "everything", "happen", "happened", "happening", "working",
     "know", "remember", "recall", "tell", "show", "find", "look", "looking", "see", "said",
     "say", "talked", "discuss", "discussed", "doing", "done", "going", "went", "i'm", "i've",
     "we've", "i'd", "we're", "it's", "what's", "there's", "that's", "via", "each",
     "own", "same", "both", "few", "other", "off", "only", "while", "until", "since",
     "between", "during", "through", "around", "within", "without", "ever"}
    | _QUESTION
)  # fmt: skip
#: Generic time nouns left after the expressions are taken out ("the last time I...").
_TIME_NOUNS = frozenset(
    {"day", "days", "week", "weeks", "weekend", "weekends", "month", "months", "year", "years",
     "time", "times", "ago", "today", "yesterday", "tomorrow", "tonight", "morning",
     "afternoon", "evening", "night", "recently", "lately", "recent", "last", "next", "past",
     "earlier", "later", "now", "currently", "quarter", "hour", "hours", "minute", "minutes",
     "date", "when"}
)  # fmt: skip
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(r"\w+(?:[./\-+#'’]\w+)*")
_CJK_RUN = re.compile(rf"([{_CJK}]+)")
_CJK_LEAD = re.compile(r"^(?:我们|我們|你们|你們|他们|他們|她们|她們|我|你|他|她|它|的|了)+")
_CJK_TRAIL = re.compile(r"(?:的|了|吗|嗎|呢|吧|啊|呀|の|は|が|を|に|で|と|も|か)+$")
_IDENTIFIER = re.compile(r"[\d./_]")


def _cjk_topics(run: str) -> list[str]:
    out = []
    for piece in _CJK_QUESTION.split(run):
        piece = _CJK_TRAIL.sub("", _CJK_LEAD.sub("", piece))
        if piece:
            out.append(piece)
    return out


def _tokens(searched: str) -> list[tuple[str, bool, int]]:
    """(token, is a CJK run, offset): words as \\w runs, with CJK runs cut out of them."""
    out: list[tuple[str, bool, int]] = []
    for m in _TOKEN.finditer(searched):
        token = m.group(0)
        if token.isascii():
            out.append((token, False, m.start()))
            continue
        for i, part in enumerate(_CJK_RUN.split(token)):
            part = part.strip("./-+#'’")
            if part:
                out.append((part, i % 2 == 1, m.start() + (i > 0)))
    return out


def _topics(searched: str) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for raw, cjk, offset in _tokens(searched):
        if cjk:
            for piece in _cjk_topics(raw):
                seen.setdefault(piece, None)
            continue
        word = raw.lower().replace("’", "'")
        if word.endswith("'s"):
            word = word[:-2]
        name = word == "may" and raw[0] == "M" and offset > 0  # "the May release"
        if (word.endswith("n't") or word in _STOP or word in _TIME_NOUNS) and not name:
            continue
        if word.strip("_"):
            seen.setdefault(word, None)
    return tuple(seen)


def _intent(query: str, searched: str, topics: tuple[str, ...], timed: bool) -> Intent:
    if not query.strip():
        return Intent.EXPLORE
    # the markers are read in `searched`: an "about" that said "about March 14" is spent
    if _DEBUG.search(searched):
        return Intent.DEBUG
    if _LEARN.search(searched):
        return Intent.LEARN
    if _EXPLORE.search(searched):
        return Intent.EXPLORE
    words = [w.lower() for w in re.findall(r"[^\W\d_]+", searched)]
    if (
        not timed
        and 0 < len(topics) <= 3
        and not any(w in _QUESTION for w in words)
        and not _CJK_QUESTION.search(searched)
        and '"' not in query
        and not any(_IDENTIFIER.search(t) for t in topics)
    ):
        return Intent.EXPLORE
    return Intent.FIND


# --------------------------------------------------------------------------------------
# The function


def interpret(query: str, now: datetime, *, tz: tzinfo | None = None) -> Interpretation:
    """What `query` says, read against the clock `now` (see the module docstring).

    Pure and deterministic: the same query, `now` and `tz` give the same answer. Raises
    `TypeError` for a query that is not a string, a `now` that is not a datetime or a `tz`
    that is not a tzinfo, and `ValueError` for a `now` at the edge of the datetime range that
    `tz` pushes past it; never for the text of the query.
    """
    if not isinstance(query, str):
        raise TypeError(f"query must be a str, not {type(query).__name__}")
    if not isinstance(now, datetime):
        raise TypeError(f"now must be a datetime, not {type(now).__name__}")
    if tz is not None and not isinstance(tz, tzinfo):
        raise TypeError(f"tz must be a tzinfo (e.g. zoneinfo.ZoneInfo('Europe/Paris')), not {tz!r}")
    zone = tz or now.tzinfo or UTC
    try:
        now = now.replace(tzinfo=zone) if now.tzinfo is None else now.astimezone(zone)
    except OverflowError:
        raise ValueError(f"now={now.isoformat()} cannot be read in {zone}: pass a later or "
                         "earlier clock, or no tz") from None  # fmt: skip
    normalised = " ".join(query.split())
    timeframe: TimeFrame | None = None
    spans: list[tuple[int, int]] = []
    if _may_have_time(query[:MAX_SCAN]):
        ctx = _Ctx(query, query.lower(), now, now.date(), zone)
        try:
            timeframe, spans = _timeframe(ctx)
        except (OverflowError, ValueError):  # a window past year 1 or 9999: none, words kept
            timeframe, spans = None, []
    searched = _strip_spans(query, spans) if spans else normalised
    head = searched[:MAX_SCAN]  # a prompt-sized query: its head says what it is about
    topics = _topics(head)
    intent = _intent(query, head, topics, timeframe is not None)
    return Interpretation(timeframe, searched, intent, topics)
