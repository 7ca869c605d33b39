"""The search pipeline: plan → retrieve (two legs) → score both sides → fuse → rank →
enrich → record. One pass each, in that order (DESIGN.md, "Search pipeline").

The pipeline knows a backend only through its `Store` (reads by id, filters, facts,
recording) and two `Retriever`s; ranking and fusion work on hits alone, so a second
backend plugs in without touching them.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from cortex import code, filters, fusion, keyword, recall, validate
from cortex.errors import EmbeddingError, IndexFormatError, StorageError
from cortex.log import get_logger
from cortex.options import Fusion, Mode, Options, Order, OrderBy, TimeFilter
from cortex.ranking import (
    DAY,
    LN2,
    SECTOR_WEIGHTS,
    Candidate,
    effective_confidence,
    estimate_tokens,
    fact_confidence,
    is_dated,
    recency_factor,
    salience_factor,
    temporal_decay,
)
from cortex.result import Fact, MatchType, Result, Results, from_epoch, iso
from cortex.search import pages
from cortex.search.hits import (
    SEMANTIC_MID,
    SEMANTIC_SLOPE,
    KeywordRetriever,
    Leg,
    Retriever,
    combine,
)
from cortex.search.plan import DROPPED, Plan, clean, plan, pool_for
from cortex.search.recorder import Recall, Recorder
from cortex.store import has_cjk, is_document

__all__ = ["SUPERSEDED_FACTOR", "Pipeline"]

log = get_logger("cortex.search")

#: A soft time window ("recently", or a hard one that held nothing) multiplies the score
#: of the memories inside it by 1 + TIME_BOOST. Chosen on the temporal set (eval/README.md).
TIME_BOOST = 0.5
#: created_until is inclusive; a window's end is not.
_TICK = timedelta(microseconds=1)

#: How much of its best neighbour's score a memory borrows, and how many of the best
#: candidates have their neighbours looked up (eval/README.md, conversations).
NEIGHBOUR_WEIGHT = 0.5
NEIGHBOUR_TOP = 30

#: When a hybrid query names something (a word with a capital or a digit: Heroku, GDPR,
#: k8s) that no memory of the searched project(s) holds, the semantic evidence counts
#: UNKNOWN_NAME_FACTOR (the model places "who owns the RabbitMQ cluster?" near any note
#: about clusters, which is no answer to it), and every match's fused relevance
#: ``sqrt(1 - share)``, `share` being the unknown names' part of the query's keyword weight
#: (their IDFs over the sum of the query's: unknown_name_factor): what a memory matches is
#: at best the rest of the question, and the more of the question the name is, the less
#: that rest answers. Chosen on the tune halves (BENCHMARKS.md, "Ranking: third pass"):
#: the flat UNKNOWN_NAME_BASE it replaces (still what a backend that cannot weigh the names
#: uses) left "what are the OKRs of the ledger team?" answered; a steeper curve
#: (``1 - share``, ``(1 - share)^2``) hid true answers of SciFact claims naming a compound
#: its abstracts spell otherwise (train nDCG@10 0.7346 -> 0.7297, 0.7292).
UNKNOWN_NAME_FACTOR = 0.3
UNKNOWN_NAME_BASE = 0.8
UNKNOWN_SHARE_POWER = 0.5

#: A lower-case word rare in English (Plan.rare: plan.RARE_WORD_RANK) that no memory of the
#: searched projects holds, and that is no misspelling of a word one holds, names
#: something as a capital does: every match's fused relevance counts
#: unknown_name_factor(share) with the other unknown names. Its semantic evidence is not
#: discounted (UNKNOWN_NAME_FACTOR): a true paraphrase is made of words no memory holds
#: ("map pictures came back empty at high magnification"), and its answer is found by
#: meaning alone. What tells it from a question the store cannot answer ("what is the
#: on-call compensation policy?") is whether the best match reflects the rare words: when
#: they carry RARE_IGNORED_SHARE of the query's keyword weight or more, the best
#: candidate holds little of the rest by keyword (its calibrated keyword score under
#: RARE_IGNORED_KEYWORD: it shares the topic, not the question) and its cosine does not
#: drop when they are left out of the query (it is no nearer to the question than to the
#: question without them), the search does not answer (Pipeline._ignored). Chosen on the
#: tune halves and SciFact train (a claim's best abstract holds its other words by
#: keyword, 0.45-0.76, where the tune split's unanswerable questions' best notes hold
#: 0.24-0.29): BENCHMARKS.md, "Ranking: rare words as names". The share, 0.25 then, is
#: 0.19 since the tune split grew: the midpoint between "how do we throttle the ledger
#: dunning emails per customer?" (0.247, answered at 0.25) and the nearest answerable
#: query the rest of the test would empty ("handset power ran down fast…", 0.126); SciFact
#: train unchanged: BENCHMARKS.md, "Ranking: a larger agent set, abstention chosen again".
RARE_IGNORED_SHARE = 0.19
RARE_IGNORED_KEYWORD = 0.4

#: A name no memory holds (a capital or a digit: Bazel, Twilio) has no such test. Tried:
#: the search does not answer when the best match's cosine rises by 0.135 or more with the
#: names left out (the keyword condition cannot apply: SciFact's answered claims hold the
#: rest by keyword at 0.36-0.82). On the tune split it emptied one question ("monorepo
#: migration to Bazel?") and nothing answerable; on the test split it emptied no
#: nothing-relevant question and one true answer ("WORM retention on the invoice archive
#: bucket": the note says object lock), as a name the notes spell otherwise always can;
#: and it costs one more query embedding for every question naming something the store
#: lacks. Not kept: BENCHMARKS.md, "Ranking: a larger agent set, abstention chosen again".

#: A Chinese or Japanese word of a query written in words apart ("オフライン 地図 の キャッシュ
#: 上限": two or more CJK words between spaces) that no memory of the searched projects
#: holds counts as a rare word no memory holds: every match's relevance counts
#: unknown_name_factor(share) with the other unknown words. The English model cannot tell
#: what such a word means (its cosines to CJK text are those of any CJK text), so the
#: keyword leg's statistics are the only evidence that the store knows it. A query in
#: running text ("10月部署有哪些") is left out: the tiers cut it into runs and bigrams across
#: its words, whose absence says nothing (the temporal set's Chinese questions). On the
#: tune halves "オフライン 地図 の キャッシュ 上限" (three of its four words in no memory, 0.81
#: of the weight) no longer answers with a note about deleting old caches; "月度报表 慢" and
#: "日志 保留 多久" (one word in no memory) keep their answers: BENCHMARKS.md, "Ranking:
#: unknown names ignored".
CJK_UNKNOWN_WORDS = True

#: How far the semantic leg's best hit stands out from its STANDOUT_RANK-th (in z-scores
#: of the query's own cosine distribution, read back from the calibrated scores) says
#: whether the model found *a memory* or only *a topic*. A true paraphrase's answer stands
#: out ("billing amounts a penny wrong": z 4.2 against 0.2 for the tenth); a question the
#: store cannot answer lands in a crowd of memories about the same project or subject
#: ("where is the on-premise installation guide for atlas?": z 3.8 against 3.2, every
#: atlas note alike). A hybrid search answers only when one of its matches clears
#: min_score with its semantic evidence counted ``max(STANDOUT_FLOOR, min(1, standout /
#: STANDOUT_GAP))`` (Candidate.standout_base); what it answers is ordered and floored by the
#: fused scores as before. A query that names only things the store holds (Kafka, Priya)
#: is exempt: alike memories about a known name are what it asks for. Tuned on the tune
#: halves: nothing-relevant queries left empty 0.75 -> 0.90, nDCG@10 unchanged; see
#: BENCHMARKS.md, "Ranking: abstention (issue 11; 2026-11-26)".
STANDOUT_RANK = 10
STANDOUT_GAP = 1.5
STANDOUT_FLOOR = 0.3

#: A search that nothing clears min_score for, whose filters (other than the project and
#: dates) admit at most NARROW_FILTER memories (a default page), shows every one of them,
#: ordered by relevance (unless min_score is given). A count, not the page size: the first
#: n results stay the same for every limit. On the tune halves nDCG@10 0.888 -> 0.902
#: ("what did we decide" with category decision scored 0.03: no word of it is in the two
#: decisions of the project); see BENCHMARKS.md, "Ranking: abstention".
NARROW_FILTER = 20

#: Seed 002's temporal decay of dated journal notes is bounded below: a note keeps at least
#: this share of its score however old it is. Unbounded, a 30-day half-life took an exact
#: two-month-old match ("ndots", base 0.976) to 0.27 of its score, below fresh notes found
#: by meaning alone. On the tune halves a floor of 0.7 lifted temporal Recall@10 from 0.901
#: to 0.945 and the agent set's nDCG@10 slightly; freshness still orders near-equals.
DECAY_FLOOR = 0.7

#: A memory that references a file the query names ("why does auth/middleware.ts reject
#: tokens?") gains this much evidence of relevance: ``1 - (1 - base) * (1 - w)``. See
#: eval/README.md (the agent set's scores are unchanged: its questions name no files).
CODE_WEIGHT = 0.5

#: Seed 000: a superseded memory shown on request (`include_superseded`) ranks at half
#: its score, below what replaced it.
SUPERSEDED_FACTOR = 0.5


def _held_by(kw: Leg | None, opts: Options) -> Callable[[str], bool]:
    """Whether a word is held, as far as the keyword leg `kw` already knows: every term
    of it is one that a hit of `kw` holds (its result's `held`). Such a memory is in the
    searched projects and live, so the word is known there and keyword.holds need not
    search for it (~0.2 ms a word at 100k). A leg that may hold superseded memories
    (include_superseded) or says nothing of what its hits hold answers "not known"."""
    terms = getattr(kw.state, "held", None) if kw is not None and kw.hits else None
    if not terms or opts.include_superseded:
        return lambda word: False
    have = set(terms)

    def held(word: str) -> bool:
        parts = keyword.plain_terms(keyword.clean(word)) or []
        return bool(parts) and all(t in have for t in parts)

    return held


class Pipeline:
    """The search of one Engine: a Store and a keyword and a semantic Retriever."""

    def __init__(
        self,
        store: Any,
        keyword_leg: KeywordRetriever,
        semantic_leg: Retriever,
        semantic_unavailable: Callable[[], str | None],
        recorder: Recorder | None = None,
    ) -> None:
        self._store = store
        self._keyword = keyword_leg
        self._semantic = semantic_leg
        self._unavailable = semantic_unavailable
        self._recorder = recorder  # None: each search writes its recall before returning
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _worker(self) -> ThreadPoolExecutor:
        """One thread for the semantic leg of hybrid searches, started on first use."""
        if self._executor is None:
            with self._executor_lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(1, thread_name_prefix="cortex-semantic")
        return self._executor

    # ------------------------------------------------------------------ search

    def search(self, query: str | None, opts: Options) -> Results:
        """Interpret the query's time words (unless `time_filter` is off or an explicit
        created_since/until is given), then search the rest of it in or around the window
        they name, and say what was understood (`Results.interpretation`)."""
        asked = opts
        pool = pool_for(opts)
        if opts.cursor is not None:
            cursor = pages.decode(opts.cursor, query, opts)
            pool = cursor.pool
            opts = opts.replace(
                offset=cursor.offset,
                cursor=None,
                now=opts.now or datetime.fromtimestamp(cursor.now, UTC),
            )
        clock = opts.now if opts.now is not None else datetime.now(UTC)
        results = self._interpreted(query, opts, clock, pool)
        if results.has_more:  # the cursor (a hash of the options) when it is first read
            at, offset = clock.timestamp(), opts.offset + opts.limit
            results._cursor_of = lambda: pages.encode(
                pages.Cursor(offset, at, pool, pages.fingerprint(query, asked))
            )
        return results

    def _interpreted(self, query: str | None, opts: Options, clock: datetime, pool: int) -> Results:
        now = clock.timestamp()
        if query is None or not query.strip():
            return self._browse(query, opts, now, pool)
        understood = None
        if opts.time_filter is not TimeFilter.OFF:
            # imported by the first search that reads a query's time (its ~50 patterns
            # were ~0.015 CPU-s of every process's open, a bulk write's included)
            from cortex.interpret import interpret

            understood = interpret(clean(query), clock)
        window = understood.timeframe if understood is not None else None
        if window is None or opts.created_since is not None or opts.created_until is not None:
            results = self._search(query, opts, now, pool)
            if understood is not None:
                results.interpretation = {**understood.to_dict(), "applied": None}
            return results
        text = understood.searched if understood is not None else query
        how = opts.time_filter
        if how is TimeFilter.AUTO:
            how = TimeFilter.SOFT if window.soft else TimeFilter.HARD
        applied = str(how)
        if how is TimeFilter.HARD:
            # Only the window's memories, every one a candidate: the window is what the
            # user asked for, relevance orders it (no floor unless one is given).
            inside = opts.replace(
                created_since=window.since,
                created_until=None if window.until is None else window.until - _TICK,
                min_score=opts.min_score if opts.min_score is not None else 0.0,
            )
            results = self._search(text, inside, now, pool, query=query)
            if not results and opts.time_filter is TimeFilter.AUTO:
                how, applied = TimeFilter.SOFT, "soft (nothing in the window)"
        if how is TimeFilter.SOFT:
            span = (
                window.since.timestamp() if window.since is not None else float("-inf"),
                window.until.timestamp() if window.until is not None else float("inf"),
            )
            results = self._search(text, opts, now, pool, query=query, window=span)
        assert understood is not None
        results.interpretation = {**understood.to_dict(), "applied": applied}
        return results

    def _search(
        self,
        text: str,
        opts: Options,
        now: float,
        pool: int,
        *,
        query: str | None = None,
        window: tuple[float, float] | None = None,
    ) -> Results:
        """One search of `text` (`query` is what the user typed, when it differs). The
        semantic rows of the page are checked against SQLite before it is answered
        (`verify`); when SQLite changed under the search, or a damaged vector index has
        just been rebuilt, the search runs again."""
        rebuilt = False
        for _ in range(4):
            try:
                return self._search_once(
                    text, opts, now, pool, query=query, window=window, rebuilt=rebuilt
                )
            except _SearchAgain as again:
                rebuilt = rebuilt or again.rebuilt
        raise IndexFormatError("the database kept changing under the search; search again")

    def _search_once(
        self,
        text: str,
        opts: Options,
        now: float,
        pool: int,
        *,
        query: str | None = None,
        window: tuple[float, float] | None = None,
        rebuilt: bool = False,
    ) -> Results:
        shown = query if query is not None else text
        if not text.strip():  # nothing but time words: the window's memories, newest first
            return self._browse(shown, opts, now, pool)
        if window is None and opts.mode is Mode.KEYWORD:
            fast = self._keyword_page(text, shown, opts, now, pool)
            if fast is not None:
                return fast
        t0 = time.perf_counter()
        # the sparse tables probed once for the whole search (Store.steady: the
        # neighbours, the facts and the page's reads ask whether they are empty)
        steady = getattr(self._store, "steady", None)
        with steady() if steady is not None else contextlib.nullcontext():
            # the keyword index checked against the change log once for the legs, the names
            # and the rescoring (KeywordIndexer.pinned), not at each of its lookups
            pinned = getattr(self._keyword, "pinned", None)
            with pinned() if pinned is not None else contextlib.nullcontext():
                p, kw, sem, mode, candidates, notices, allowed = self._candidates(text, opts, pool)
            t1 = time.perf_counter()
            damaged: list[str] = []
            threshold = opts.threshold(mode)
            ranked, hidden = self._rank(
                candidates, opts, now, threshold=threshold, window=window, damaged=damaged
            )
            if not ranked and hidden and opts.min_score is None and self._narrow(opts, allowed):
                # nothing cleared the floor, and the filters picked a handful: show them
                damaged = []
                ranked, hidden = self._rank(
                    candidates, opts, now, threshold=0.0, window=window, damaged=damaged
                )
            default_type = MatchType.SEMANTIC if mode is Mode.SEMANTIC else MatchType.BM25
            terms = kw.terms if kw is not None else _content_words(p.text)
            check = self._page_check(sem, rebuilt)
            results = self._results(ranked, opts, now, default_type, terms, damaged, check)
        self._close(
            results, opts, shown, mode, hidden, damaged, notices,
            rewritten=kw.rewritten if kw is not None else None,
            held=tuple(getattr(kw.state, "held", ())) if kw is not None else (),
            sem=sem,
        )  # fmt: skip
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "search mode=%s (asked %s) keyword_tier=%s keyword_hits=%d semantic_hits=%d"
                " fused=%d returned=%d hidden=%d pool=%d legs=%.1fms total=%.1fms",
                mode, opts.mode, kw.tier if kw is not None else "-",
                len(kw.hits) if kw is not None else 0, len(sem.hits) if sem is not None else 0,
                len(candidates), len(results), hidden, pool,
                (t1 - t0) * 1e3, (time.perf_counter() - t0) * 1e3,
            )  # fmt: skip
        return results

    def _keyword_page(
        self, text: str, shown: str, opts: Options, now: float, pool: int
    ) -> Results | None:
        """A keyword-only search ranked beside the in-memory index (KeywordIndexer.page:
        the keyword tiers' plain AND/OR and `_rank`, natively), its page read in one
        statement: the same answer as the general path, without a Candidate per
        candidate. None when the search needs the general path: filters beyond the
        project, FTS5 syntax, CJK, a file named, facts, explain, a token budget, context
        or threads, an order other than relevance, no plain-tier hit."""
        page_of = getattr(self._keyword, "page", None)
        if (
            page_of is None
            or not getattr(self._keyword, "in_memory", False)  # FTS5 answers (one-shot CLI)
            or opts.order_by is not OrderBy.RELEVANCE
            or opts.explain
            or opts.token_budget is not None
            or opts.context
            or opts.thread
            or filters.narrows_beyond_project(opts)
        ):
            return None
        # plan() of a keyword-mode search of plain text (no FTS5 syntax, no CJK: else
        # plain_terms is None): the keyword leg alone, unconstrained, no notices
        text = clean(text)
        terms = keyword.plain_terms(text)
        if terms is None:
            return None
        if CODE_WEIGHT and opts.fusion is not Fusion.RRF and code.named_in_query(text):
            return None
        # KeywordIndex.rank_page's weights, in its order
        weights = (
            now, DAY, LN2, opts.recency_weight, opts.half_life_days,
            DECAY_FLOOR, opts.salience_weight, SUPERSEDED_FACTOR, opts.min_confidence,
            opts.threshold(Mode.KEYWORD), opts.order is Order.ASC,
        )  # fmt: skip
        sectors = SECTOR_WEIGHTS if opts.sector_weights is None else dict(opts.sector_weights)
        allowed = self._store.allowed_ids(opts)
        found = page_of(terms, pool, opts, allowed, weights, sectors)
        if found is None:
            return None
        damaged: list[str] = []
        with self._store.steady():
            if self._store.facts_for(found.hits, damaged) or damaged:
                return None  # effective confidence from facts: the general path
            # (`_narrow` never applies here: its filters are beyond the project)
            results, damaged = self._page(found, opts)
        self._close(
            results, opts, shown, Mode.KEYWORD, found.hidden, damaged, [],
            rewritten=found.expression, held=tuple(found.held), sem=None,
        )  # fmt: skip
        return results

    def _close(
        self,
        results: Results,
        opts: Options,
        shown: str,
        mode: Mode,
        hidden: int,
        damaged: list[str],
        notices: list[str],
        *,
        rewritten: str | None,
        held: tuple[str, ...],
        sem: Leg | None,
    ) -> None:
        """What every search's answer says of itself (query, mode, hidden, rewritten,
        how the vector leg ran, the notices), then its recording."""
        _damage_notice(damaged, notices)
        results.query, results.mode, results.hidden = shown, str(mode), hidden
        results.rewritten = rewritten
        if opts.approximate:  # never silent: the answer says how the vector leg ran
            results.approximate = _approximate(sem, notices)
        results._held = held
        if not results and hidden:
            notices.append(
                f"nothing passed the thresholds: {hidden} match(es) scored below min_score"
                f" {opts.threshold(mode)} or min_confidence {opts.min_confidence}"
            )
        if self._store.notice is not None:  # opened read-only although asked writable
            notices.append(self._store.notice)
        self._record(results, opts, notices)
        results.notices = tuple(notices)

    def _page(self, found: Any, opts: Options) -> tuple[Results, list[str]]:
        """The Results of a natively ranked keyword search (`found`, a KeywordPage): the
        page's rows read in one statement (a row that cannot be read is skipped and the
        next takes its place, as `_finish` does), enriched; aggregations when read."""
        ranked, end = found.ids, opts.offset + opts.limit
        sessions = self._store.sessions_of(ranked)
        top: list[int] = []  # positions in `ranked` of the page's readable rows
        memories: dict[int, Any] = {}
        refs: dict[int, Any] = {}
        bad: list[int] = []
        start = opts.offset
        while len(top) < opts.limit and start < len(ranked):
            stop = start + opts.limit - len(top)
            rows, found_refs = self._store.page_rows(ranked[start:stop], damaged=bad)
            memories.update(rows)
            refs.update(found_refs)
            top.extend(k for k in range(start, min(stop, len(ranked))) if ranked[k] in memories)
            start = stop
        marker = keyword.highlighter(found.terms) if found.terms else None
        ids = [ranked[k] for k in top]
        extra = recall.enrichment(self._store, [memories[i] for i in ids])
        scores, bm25, infos = found.scores, found.bm25, found.infos
        out = []
        for k in top:
            i = ranked[k]
            memory = memories[i]
            out.append(
                Result.of(
                    memory, scores[k], bm25[k], 0.0, infos[k].confidence,
                    partial(keyword.text_snippet, memory.content, marker), MatchType.BM25, (),
                    extra.source_session.get(i), memory.superseded_by is not None,
                    extra.superseded_by.get(i), extra.related.get(i, 0), None, None,
                    {"code": [r.to_dict() for r in refs.get(i, ())]}, None,
                )
            )  # fmt: skip
        results = Results(out, total=len(ranked), has_more=len(ranked) > end)

        def aggregations() -> dict[str, Any]:
            kept = [Candidate(i, info) for i, info in zip(ranked, infos, strict=True)]
            return pages.aggregations(kept, sessions)

        results._aggregations_of = aggregations
        return results, [f"memory {i}" for i in bad]

    def _page_check(
        self, sem: Leg | None, rebuilt: bool
    ) -> Callable[[list[Candidate]], None] | None:
        """What checks the page's semantic scores against their source before it is
        answered (the retriever's `verify`, when it has one): raises _SearchAgain."""
        verify = getattr(self._semantic, "verify", None)
        if sem is None or verify is None:
            return None

        def check(page: list[Candidate]) -> None:
            rows = [(c.memory_id, c.cosine) for c in page if c.cosine is not None]
            outcome = verify(sem, rows, rebuilt)
            if outcome is not None:
                raise _SearchAgain(outcome == "rebuilt")

        return check

    def candidates(
        self, query: str, opts: Options, pool: int | None = None
    ) -> tuple[Plan, Leg | None, Leg | None, Mode, list[Candidate], list[str]]:
        """Plan, retrieve and fuse: every candidate with its score parts, before boosts,
        thresholds and order (what benches/tune_fusion.py tunes on)."""
        return self._candidates(query, opts, pool)[:6]

    def _candidates(
        self, query: str, opts: Options, pool: int | None = None
    ) -> tuple[Plan, Leg | None, Leg | None, Mode, list[Candidate], list[str], Any]:
        """candidates(), and the ids the filters admit when they were read (else None)."""
        wants_semantic = opts.mode is Mode.SEMANTIC or (
            opts.mode is Mode.HYBRID and opts.alpha > 0.0
        )
        reason = self._unavailable() if wants_semantic else None
        p = plan(query, opts, semantic_unavailable=reason, pool=pool)
        notices = list(p.notices)
        # The ids the filters admit, read once for both legs; only a leg that ranks outside
        # SQLite needs them (the vector index, the in-memory keyword index when built).
        needs = p.use_semantic or (p.use_keyword and getattr(self._keyword, "in_memory", False))
        # A code or fact-type filter is selective: read what it admits first, and when
        # that is nothing, answer at once (the keyword tiers would otherwise try each of
        # their fallbacks, down to a substring scan, before finding nothing).
        selective = opts.code is not None or opts.fact_type is not None
        allowed = self._store.allowed_ids(opts) if needs or selective else None
        if allowed is not None and len(allowed) == 0 and selective:
            return p, None, None, p.mode, [], notices, allowed
        unknown: list[str] = []
        unknown_rare: list[str] = []
        relevance = 1.0

        def names(kw: Leg | None) -> None:
            # Named where? In the project(s) searched, whatever the other filters: a name
            # the user's filter (a category, a date) leaves out is still a known name.
            wall = Options(project=opts.project)
            held = _held_by(kw, opts)
            named = [w for w in p.named if not held(w)]
            rare = [w for w in p.rare if not held(w)]
            runs: list[str] = []
            if p.cjk and CJK_UNKNOWN_WORDS and kw is not None:
                # the CJK words written apart (CJK_UNKNOWN_WORDS), as the keyword leg has them
                words = {w for w in re.findall(r"\w+", p.text) if has_cjk(w)}
                if len(words) > 1:
                    runs = [t for t in kw.terms if t in words and not held(t)]
            walled = (
                self._store.allowed_ids(wall)
                if allowed is not None and (named or rare or runs)
                else None
            )
            if named:
                unknown.extend(self._keyword.absent(named, wall, walled))
            if rare:
                # A rare word no memory holds names something, unless it is a misspelling:
                # of an English word, or of a word a memory holds (plan.RARE_WORD_RANK)
                from cortex import commonness

                gone = self._keyword.absent(rare, wall, walled)
                vocab = commonness.ranks() if gone else None
                gone = [w for w in gone if vocab is None or not commonness.misspelt(w, vocab)]
                near = getattr(self._keyword, "near", None)
                spelt = near(gone, wall) if gone and near is not None else set()
                unknown_rare.extend(w for w in gone if w not in spelt)
            if runs:
                unknown_rare.extend(self._keyword.absent(runs, wall, walled))

        # Checked once both legs answered (a failed semantic leg leaves a keyword search,
        # which weighs no names).
        check = bool(p.named or p.rare or (p.cjk and CJK_UNKNOWN_WORDS)) and p.mode is Mode.HYBRID
        check = check and min(UNKNOWN_NAME_FACTOR, UNKNOWN_NAME_BASE) < 1.0
        kw, sem, mode = self._legs(p, opts, allowed, notices, after=names if check else None)
        missing = unknown + unknown_rare
        share: float | None = None
        if missing:
            shown = ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else "")
            notices.append(f"no memory holds {shown}: matches count for less")
            measure = getattr(self._keyword, "share", None)
            share = measure(kw, missing) if measure is not None and kw is not None else None
            relevance = unknown_name_factor(share)
        # A query that names something every memory-holding project knows (Kafka, Priya) is
        # about it: alike memories are what it asks for, the standout rule stays out.
        anchored = bool(p.named) and not missing
        candidates = self._fuse(
            p, opts, kw, sem, mode, discount=bool(unknown), relevance=relevance, anchored=anchored
        )
        rare_heavy = share is not None and share >= RARE_IGNORED_SHARE
        if unknown_rare and not unknown and sem is not None and candidates and rare_heavy:
            self._ignored(p, unknown_rare, candidates)
        if CODE_WEIGHT and not p.constrained and opts.fusion is not Fusion.RRF:
            candidates = self._code_named(p, opts, kw, sem, mode, candidates)
        if p.cjk and candidates and ('"' in p.text or "NOT" in p.text):
            candidates = self._constrained(p, candidates)
        return p, kw, sem, mode, candidates, notices, allowed

    def _constrained(self, p: Plan, candidates: list[Candidate]) -> list[Candidate]:
        """A CJK query with a NOT or a quoted phrase: its tiers (trigrams, substrings) read
        no operator (the plan does not take CJK text for FTS5 syntax), so every candidate
        of every leg is checked against what the query excludes and the phrases it
        requires (keyword.constraints); a candidate that breaks one is out."""
        excluded, phrases = keyword.constraints(p.text)
        if not (excluded or phrases):
            return candidates
        kept = self._store.holding([c.memory_id for c in candidates], excluded, phrases)
        return [c for c in candidates if c.memory_id in kept]

    def _ignored(self, p: Plan, words: Sequence[str], candidates: list[Candidate]) -> None:
        """When the best of `candidates` is no nearer to the query than to the query
        without the rare `words` no memory holds, it ignores what the query asks about:
        the search does not answer (RARE_IGNORED_SHARE; every candidate's answer base 0,
        `explain["ignored"]`). One more query embedding, only for such a query."""
        top = max(candidates, key=lambda c: (c.base, -c.memory_id))
        less = without(p.semantic_text, words)
        if top.cosine is None or not less or top.bm25 >= RARE_IGNORED_KEYWORD:
            return
        cosines = getattr(self._semantic, "cosines_of", None)
        if cosines is None:
            return
        other = cosines(less, [top.memory_id]).get(top.memory_id)
        if other is None or top.cosine > other:
            return
        for c in candidates:
            c.standout_base = 0.0
            c.ignored = True

    def _narrow(self, opts: Options, allowed: Any) -> bool:
        """Whether filters other than the project admit at most NARROW_FILTER memories:
        then, when nothing clears the floor, the filters are what was asked, and every
        memory they admit is shown, ordered by relevance, as a hard time window does
        ("what did we decide" in category decision of one project; "what was the fix" in
        one session). The project never counts (it is the store: a young project's
        searches still come back empty when nothing matches), nor do dates (explicit
        dates keep the floor)."""
        kinds = opts.replace(project=None, created_since=None, created_until=None)
        if not NARROW_FILTER or not filters.narrows(kinds):
            return False
        if allowed is None:
            allowed = self._store.allowed_ids(opts)
        return allowed is not None and len(allowed) <= NARROW_FILTER

    def _code_named(
        self,
        p: Plan,
        opts: Options,
        kw: Leg | None,
        sem: Leg | None,
        mode: Mode,
        candidates: list[Candidate],
    ) -> list[Candidate]:
        """A query that names a file ("what broke in auth/middleware.ts?") finds the
        memories that reference it (cortex.code): they join the candidates, scored on
        both legs, and referencing it counts as evidence of relevance
        (``1 - (1 - base) * (1 - CODE_WEIGHT)``)."""
        keys = code.named_in_query(p.text)
        if not keys:
            return candidates
        found = self._store.referencing(keys, opts, p.pool)
        if not found:
            return candidates
        by_id = {c.memory_id: c for c in candidates}
        fresh = [i for i in found if i not in by_id]
        for i in fresh:
            by_id[i] = Candidate(i, found[i], match_type=MatchType.BM25)
        if fresh and kw is not None and mode is not Mode.SEMANTIC:
            for i, (score, raw) in self._keyword.rescore(p, opts, kw, fresh).items():
                by_id[i].bm25, by_id[i].bm25_raw = score, raw
        if fresh and sem is not None and mode is not Mode.KEYWORD:
            for i, (score, raw) in self._semantic.rescore(p, opts, sem, fresh).items():
                by_id[i].semantic, by_id[i].cosine = score, raw
        for i in fresh:
            c = by_id[i]
            if mode is Mode.KEYWORD:
                c.base = c.bm25
            elif mode is Mode.SEMANTIC:
                c.base, c.match_type = c.semantic, MatchType.SEMANTIC
            else:
                c.base = combine(c.bm25, c.semantic, p.alpha, opts.fusion)
                c.match_type = (
                    MatchType.HYBRID
                    if c.bm25 and c.semantic
                    else (MatchType.BM25 if c.bm25 else MatchType.SEMANTIC)
                )
        for i in found:
            c = by_id[i]
            c.code = CODE_WEIGHT
            c.base = 1.0 - (1.0 - c.base) * (1.0 - CODE_WEIGHT)
            if c.standout_base is not None:
                c.standout_base = 1.0 - (1.0 - c.standout_base) * (1.0 - CODE_WEIGHT)
            # a memory that references a file the query names is about what it asks,
            # whatever rare word no memory holds (_ignored)
            c.ignored = False
        return list(by_id.values())

    def _legs(
        self,
        p: Plan,
        opts: Options,
        allowed: Any,
        notices: list[str],
        after: Callable[[Leg | None], None] | None = None,
    ) -> tuple[Leg | None, Leg | None, Mode]:
        """Run the legs the plan asks for (the semantic one on the worker thread while this
        thread runs the keyword one), then `after(keyword leg)` when both answered. A
        constrained query runs the keyword leg in every mode: it decides which memories
        the expression admits."""
        mode = p.mode
        run_kw = p.use_keyword or (p.constrained and p.use_semantic)
        pending: Future[Leg] | None = None
        if p.use_semantic and run_kw:
            pending = self._worker().submit(self._semantic.retrieve, p, opts, allowed)
        try:
            kw = self._keyword.retrieve(p, opts, allowed) if run_kw else None
        except BaseException:
            if pending is not None and not pending.cancel():
                wait([pending])  # do not leave it running against a store being closed
            raise
        if kw is not None:
            notices.extend(kw.notices)
        sem: Leg | None = None
        if p.use_semantic:
            try:
                sem = (
                    pending.result()
                    if pending is not None
                    else self._semantic.retrieve(p, opts, allowed)
                )
            except (IndexFormatError, EmbeddingError) as exc:
                if mode is Mode.SEMANTIC or kw is None:
                    raise
                # hybrid: the keyword half still answers; say why the other half did not
                notices.append(f"semantic search failed, keyword results only: {exc}")
                mode = Mode.KEYWORD
        # After both legs, not beside the semantic one: the leg's thread needs the GIL
        # back after each native step (the model's run, the scan), and waits behind this
        # thread's Python for up to the switch interval. Run beside the scan, the names
        # check and the keyword hits' cosines made the scan 5.2 ms instead of 2.2 at 100k;
        # after it, the first-time p50 was 0.875x (BENCHMARKS.md, "Session of
        # 2026-11-26 evening").
        if after is not None and mode is Mode.HYBRID:
            after(kw)
        return kw, sem, mode

    def _fuse(
        self,
        p: Plan,
        opts: Options,
        kw: Leg | None,
        sem: Leg | None,
        mode: Mode,
        *,
        discount: bool = False,
        relevance: float = 1.0,
        anchored: bool = False,
    ) -> list[Candidate]:
        """One candidate per memory, scored on both legs when both ran (a memory one leg
        found is scored by the other too: a strong keyword match missing from the
        semantic top-k is not halved), then fused. `discount`: the query names something
        no memory holds (UNKNOWN_NAME_FACTOR), and every relevance counts `relevance`
        (unknown_name_factor); `anchored`: it names only what the store holds (no
        standout rule, STANDOUT_GAP)."""
        by_id: dict[int, Candidate] = {}
        use_kw = kw is not None and mode is not Mode.SEMANTIC
        use_sem = sem is not None and mode is not Mode.KEYWORD
        kw_found = {h.memory_id for h in kw.hits} if kw is not None else set()
        if kw is not None and use_kw:
            for h in kw.hits:
                c = Candidate(h.memory_id, h.info, bm25=h.score, match_type=MatchType.BM25)
                c.bm25_raw = h.raw
                by_id[h.memory_id] = c
        if sem is not None and use_sem:
            for h in sem.hits:
                known = by_id.get(h.memory_id)
                if known is None:
                    c = Candidate(h.memory_id, h.info, match_type=MatchType.SEMANTIC)
                    by_id[h.memory_id] = c
                else:
                    c = known
                    if c.match_type is MatchType.BM25:
                        c.match_type = MatchType.HYBRID
                c.semantic, c.cosine = h.score, h.raw
            sem_only = [h.memory_id for h in sem.hits if h.memory_id not in kw_found]
            if kw is not None and sem_only:
                filled = self._keyword.rescore(p, opts, kw, sem_only)
                for i, (score, raw) in filled.items():
                    by_id[i].bm25, by_id[i].bm25_raw = score, raw
                if p.constrained:  # the expression excludes or requires: it admits
                    for i in sem_only:
                        if i not in filled:
                            del by_id[i]
            if use_kw:
                kw_only = [i for i, c in by_id.items() if c.match_type is MatchType.BM25]
                if kw_only:
                    for i, (score, raw) in self._semantic.rescore(p, opts, sem, kw_only).items():
                        by_id[i].semantic, by_id[i].cosine = score, raw
        if not use_sem:
            for c in by_id.values():
                c.base = c.bm25
            return list(by_id.values())
        if not use_kw:
            for c in by_id.values():
                c.base = c.semantic
            return list(by_id.values())
        alpha = p.alpha
        factor = UNKNOWN_NAME_FACTOR if discount else 1.0
        if discount:
            for c in by_id.values():
                c.semantic *= UNKNOWN_NAME_FACTOR
        if opts.fusion is not Fusion.RRF:
            # The floor judges the semantic evidence as far as the best hit stands out of
            # its crowd; the order stays the fused score's (STANDOUT_GAP).
            standout = (
                standout_factor([h.score for h in sem.hits])
                if sem is not None and not anchored
                else 1.0
            )
            for c in by_id.values():
                c.base = combine(c.bm25, c.semantic, alpha, opts.fusion)
                if standout < 1.0:
                    c.standout_base = combine(c.bm25, c.semantic * standout, alpha, opts.fusion)
            if NEIGHBOUR_WEIGHT and not p.constrained:
                self._borrow(p, opts, kw, sem, by_id, alpha, factor, standout)
            if relevance < 1.0:
                for c in by_id.values():
                    c.unknown_name = relevance
                    c.base *= relevance
                    if c.standout_base is not None:
                        c.standout_base *= relevance
            return list(by_id.values())
        import numpy as np

        kw_ids = np.fromiter(
            (h.memory_id for h in kw.hits if h.memory_id in by_id), dtype=np.int64
        ) if kw is not None else np.zeros(0, np.int64)  # fmt: skip
        sem_ids = np.fromiter(
            (h.memory_id for h in sem.hits if h.memory_id in by_id), dtype=np.int64
        ) if sem is not None else np.zeros(0, np.int64)  # fmt: skip
        fused = fusion.rrf([kw_ids, sem_ids], [1.0 - alpha, alpha], opts.rrf_k)
        for memory_id, score in zip(fused.ids.tolist(), fused.scores.tolist(), strict=True):
            by_id[memory_id].base = float(score)
        return list(by_id.values())

    def _borrow(
        self,
        p: Plan,
        opts: Options,
        kw: Leg | None,
        sem: Leg | None,
        by_id: dict[int, Candidate],
        alpha: float,
        factor: float = 1.0,
        standout: float = 1.0,
    ) -> None:
        """Let a memory borrow from its neighbours: the chunks right before and after it in
        its source, the turns right before and after it in its session. An answer often
        sits next to the turn that names the topic ("yes, the blue one"; "he moved it to
        Friday"): the neighbours of the best candidates join the candidates, scored on
        both legs, and each candidate's score rises by NEIGHBOUR_WEIGHT times its best
        neighbour's (as evidence: ``1 - (1 - own) * (1 - w * neighbour)``)."""
        top = [
            c for c in sorted(by_id.values(), key=lambda c: -c.base)[:NEIGHBOUR_TOP] if c.base > 0
        ]
        # the documents looked along only when one of them comes from a Markdown file
        documents = any(_from_document(c.info.source_path) for c in top)
        adjacent = self._store.adjacent([c.memory_id for c in top], documents=documents)
        fresh = sorted({n for ns in adjacent.values() for n in ns if n not in by_id})
        if fresh:
            info = self._store.rank_info(fresh, opts)
            for i in fresh:
                if i in info:
                    by_id[i] = Candidate(i, info[i], match_type=MatchType.BM25)
            fresh = [i for i in fresh if i in by_id]
            if kw is not None and fresh:
                for i, (score, raw) in self._keyword.rescore(p, opts, kw, fresh).items():
                    by_id[i].bm25, by_id[i].bm25_raw = score, raw
            if sem is not None and fresh:
                for i, (score, raw) in self._semantic.rescore(p, opts, sem, fresh).items():
                    by_id[i].semantic, by_id[i].cosine = score * factor, raw
            for i in fresh:
                c = by_id[i]
                c.match_type = (
                    MatchType.HYBRID
                    if c.bm25 and c.semantic
                    else (MatchType.BM25 if c.bm25 else MatchType.SEMANTIC)
                )
                c.base = combine(c.bm25, c.semantic, alpha, opts.fusion)
                if standout < 1.0:
                    c.standout_base = combine(c.bm25, c.semantic * standout, alpha, opts.fusion)
        own = {i: c.base for i, c in by_id.items()}
        own_floor = {i: c.answer_base for i, c in by_id.items()}
        best: dict[int, float] = {}
        best_floor: dict[int, float] = {}
        for i, ns in adjacent.items():
            for n in ns:
                if i in own and n in own:
                    best[i] = max(best.get(i, 0.0), own[n])
                    best[n] = max(best.get(n, 0.0), own[i])
                    best_floor[i] = max(best_floor.get(i, 0.0), own_floor[n])
                    best_floor[n] = max(best_floor.get(n, 0.0), own_floor[i])
        for i, b in best.items():
            c = by_id[i]
            c.neighbour = b
            c.base = 1.0 - (1.0 - own[i]) * (1.0 - NEIGHBOUR_WEIGHT * b)
            if c.standout_base is not None:
                c.standout_base = 1.0 - (1.0 - own_floor[i]) * (
                    1.0 - NEIGHBOUR_WEIGHT * best_floor[i]
                )

    # ------------------------------------------------------------------ listing

    def _browse(self, query: str | None, opts: Options, now: float, pool: int) -> Results:
        """No text: the memories that pass the filters, newest first (or by confidence).
        A listing records nothing: it is not a recall."""
        candidates = [Candidate(i, info) for i, info in self._store.list_filtered(opts, pool)]
        damaged: list[str] = []
        steady = getattr(self._store, "steady", None)  # the sparse tables probed once
        with steady() if steady is not None else contextlib.nullcontext():
            ranked, hidden = self._rank(candidates, opts, now, browse=True, damaged=damaged)
            results = self._results(ranked, opts, now, MatchType.FILTER, [], damaged)
        results.query, results.mode, results.hidden = query, "filter", hidden
        counts = getattr(self._store, "filtered_aggregations", None)
        if len(candidates) >= pool and counts is not None:
            # More memories pass the filters than the candidates read: count them all in
            # SQL, so that the total and the aggregations are of every match (the
            # effective-confidence floor, computed per memory, is left to the page).
            results.aggregations = pages.counted(counts(opts))
            results.total = results.aggregations["total"]
            results.has_more = results.total > opts.offset + opts.limit
        notices: list[str] = []
        _damage_notice(damaged, notices)
        if self._store.notice is not None:
            notices.append(self._store.notice)
        results.notices = tuple(notices)
        return results

    def _results(
        self,
        ranked: list[Candidate],
        opts: Options,
        now: float,
        match_type: MatchType,
        terms: Sequence[str],
        damaged: list[str],
        check: Callable[[list[Candidate]], None] | None = None,
    ) -> Results:
        """The page of `ranked` that `opts` asks for, enriched, with the counts of all
        (`check`: called with the page's candidates before it is enriched). Runs in the
        caller's Store.steady scope."""
        end = opts.offset + opts.limit
        sessions = self._store.sessions_of([c.memory_id for c in ranked])
        page = self._finish(ranked[opts.offset :], opts, now, match_type, terms, damaged, check)
        results = Results(page, total=len(ranked), has_more=len(ranked) > end)
        # counted when first read, from what is read now (no store needed then)
        results._aggregations_of = partial(pages.aggregations, ranked, sessions)
        return results

    # ------------------------------------------------------------------ ranking

    def _rank(
        self,
        candidates: list[Candidate],
        opts: Options,
        now: float,
        *,
        browse: bool = False,
        threshold: float = 0.0,
        window: tuple[float, float] | None = None,
        damaged: list[str] | None = None,
    ) -> tuple[list[Candidate], int]:
        """Boosts, confidence, thresholds and order (DESIGN pipeline steps 4-5). A candidate
        whose stored ranking columns are damaged is left out and named in `damaged`."""
        bad = {c.memory_id for c in candidates if not validate.rank_info_ok(c.info)}
        if bad:
            if damaged is not None:
                damaged.extend(f"memory {i}" for i in sorted(bad))
            candidates = [c for c in candidates if c.memory_id not in bad]
        if not candidates:
            return [], 0
        facts = self._store.facts_for([c.memory_id for c in candidates], damaged)
        kept: list[Candidate] = []
        hidden = 0
        sectors = opts.sector_weights if opts.sector_weights is not None else SECTOR_WEIGHTS
        # the options' parts read once, not once per candidate (100+ of them)
        recency_weight, half_life = opts.recency_weight, opts.half_life_days
        salience_weight, min_confidence = opts.salience_weight, opts.min_confidence
        for c in candidates:
            info = c.info
            if facts:
                c.facts = tuple(facts.get(c.memory_id, ()))
                c.effective_confidence = effective_confidence(
                    info.confidence, [(f[4], f[5], f[6]) for f in c.facts], now
                )
            else:  # effective_confidence of a memory without facts: its own
                c.effective_confidence = info.confidence
            if browse:
                c.score = 0.0
            else:
                created = info.created_at
                if recency_weight:
                    c.recency = recency_factor(created, now, recency_weight)
                if half_life and info.source_path and is_dated(info.source_path):
                    c.decay = DECAY_FLOOR + (1.0 - DECAY_FLOOR) * temporal_decay(
                        created, now, half_life
                    )
                c.salience = salience_factor(info.salience, salience_weight)
                if info.sector:
                    c.sector = sectors.get(info.sector, 1.0)
                if info.superseded:
                    c.superseded = SUPERSEDED_FACTOR
                if window is not None and window[0] <= created < window[1]:
                    c.timeframe = 1.0 + TIME_BOOST
                c.score = (
                    c.base * c.recency * c.decay * c.salience * c.sector
                    * c.effective_confidence * c.superseded * c.timeframe
                )  # fmt: skip
            # The floor judges relevance (the fused, calibrated score); boosts and decay only
            # order what is relevant: a 110-day-old journal note that holds the exact term
            # decays to x0.08 and must still be found, just below fresher matches.
            if c.effective_confidence < min_confidence or (not browse and c.base < threshold):
                hidden += 1
                continue
            kept.append(c)
        if not browse and threshold > 0 and kept and all(c.answer_base < threshold for c in kept):
            # Nothing clears the floor once the semantic evidence counts only as far as its
            # best hit stands out of the crowd (STANDOUT_GAP): the store does not answer.
            hidden += len(kept)
            kept = []
        if opts.order_by is OrderBy.RECENCY or (browse and opts.order_by is OrderBy.RELEVANCE):
            kept.sort(key=lambda c: (-c.created_at, -c.memory_id))
        elif opts.order_by is OrderBy.CONFIDENCE:
            kept.sort(key=lambda c: (-c.effective_confidence, -c.score, c.memory_id))
        else:
            kept.sort(key=lambda c: (-c.score, c.memory_id))
        if opts.order is Order.ASC:
            kept.reverse()
        return kept, hidden

    # ------------------------------------------------------------------ enrichment

    def _finish(
        self,
        ranked: list[Candidate],
        opts: Options,
        now: float,
        match_type: MatchType,
        terms: Sequence[str],
        damaged: list[str],
        check: Callable[[list[Candidate]], None] | None = None,
    ) -> list[Result]:
        """Limit, budget and enrichment (pipeline steps 5-6) of the ranked candidates from
        the page's first on. A memory whose row cannot be read is skipped (named in
        `damaged`) and the next candidate takes its place."""
        top: list[Candidate] = []
        memories: dict[int, Any] = {}
        start = 0
        while len(top) < opts.limit and start < len(ranked):
            part = ranked[start : start + opts.limit - len(top)]
            start += len(part)
            bad: list[int] = []
            memories.update(self._store.get_many([c.memory_id for c in part], damaged=bad))
            top.extend(c for c in part if c.memory_id in memories)
            damaged.extend(f"memory {i}" for i in bad)
        if opts.token_budget is not None:
            used = 0
            for n, c in enumerate(top):
                cost = estimate_tokens(memories[c.memory_id].content)
                if used + cost > opts.token_budget:
                    top = top[:n]
                    break
                used += cost
        if check is not None:
            check(top)
        ids = [c.memory_id for c in top]
        marker = keyword.highlighter(list(terms)) if terms else None
        extra = recall.enrichment(self._store, [memories[i] for i in ids])
        context = {i: self._context(memories[i], opts.context) for i in ids} if opts.context else {}
        refs = self._store.code_refs(ids)
        threads = (
            {i: self._thread(memories[i], opts.thread_tokens) for i in ids} if opts.thread else {}
        )
        out = []
        for c in top:
            fact_objs = tuple(
                Fact(
                    id=f[0],
                    memory_id=f[1],
                    type=f[2],
                    content=f[3],
                    confidence=f[4],
                    decay_rate=f[5],
                    last_reinforced=from_epoch(f[6]),  # type: ignore[arg-type]
                    effective_confidence=fact_confidence(f[4], f[5], f[6], now),
                )
                for f in (c.facts if opts.include_facts else ())
            )
            memory = memories[c.memory_id]
            out.append(
                Result(
                    memory=memory,
                    score=c.score,
                    bm25_score=c.bm25,
                    semantic_score=c.semantic,
                    effective_confidence=c.effective_confidence,
                    # made when first read (Result.snippet)
                    snippet=partial(keyword.text_snippet, memory.content, marker),
                    match_type=MatchType(c.match_type or match_type),
                    facts=fact_objs,
                    source_session=extra.source_session.get(c.memory_id),
                    is_superseded=memory.superseded_by is not None,
                    superseded_by=extra.superseded_by.get(c.memory_id),
                    related_memory_count=extra.related.get(c.memory_id, 0),
                    explain=c.explain() if opts.explain else None,
                    context=context.get(c.memory_id),
                    related={"code": [r.to_dict() for r in refs.get(c.memory_id, ())]},
                    thread=threads.get(c.memory_id),
                )
            )
        return out

    def _thread(self, memory: Any, budget: int) -> list[dict[str, Any]]:
        """The other turns of `memory`'s session, the nearest in time first while they fit
        `budget` tokens (characters / 4), in time order."""
        kept, used = [], 0
        for turn in self._store.session_thread(memory):
            cost = -(-len(turn[1]) // 4)
            if used + cost > budget:
                break
            kept.append(turn)
            used += cost
        kept.sort(key=lambda t: (t[2], t[0]))
        return [{"id": i, "content": c, "created_at": iso(from_epoch(t))} for i, c, t in kept]

    def _context(self, memory: Any, n: int) -> dict[str, list[dict[str, Any]]]:
        """Up to `n` chunks before and after `memory` in its own source or session."""
        before, after = self._store.neighbours(memory, n)

        def brief(m: Any) -> dict[str, Any]:
            return {
                "id": m.id,
                "content": m.content,
                "created_at": iso(m.created_at),
                "chunk_index": m.chunk_index,
            }

        return {"before": [brief(m) for m in before], "after": [brief(m) for m in after]}

    # ------------------------------------------------------------------ recording

    def _record(self, results: Results, opts: Options, notices: list[str]) -> None:
        """Pipeline step 7, after the order is fixed: it cannot change this search's
        ranking, and without reinforcement it changes no later one either."""
        if not opts.record or self._store.read_only or not results:
            return
        rows = tuple((r.memory.id, r.facts[0].id if r.facts else None, r.score) for r in results)
        # the log's `lens` column: the client that asked (the HTTP server's label), else the lens
        label = opts.recorded_as if opts.recorded_as is not None else opts.lens
        if self._recorder is not None:
            if not opts.reinforce:  # written by the recorder's thread, after the answer
                entry = Recall(rows, results.query, opts.session_id, label, 0.0, time.time())
                self._recorder.submit(entry)
                return
            # Reinforcement changes the next search's ranking: written now, after what
            # is queued (the log stays in the order of the searches).
            self._recorder.flush()
        try:
            recall.record_recall(
                self._store,
                rows,
                query=results.query,
                session_id=opts.session_id,
                lens=label,
                reinforce=opts.reinforce,
            )
        except StorageError as exc:  # the answer stands; say that it was not recorded
            notices.append(f"recall not recorded: {exc}")


def _from_document(path: Any) -> bool:
    """Whether a memory of this source path may be a chunk of a Markdown document (what
    Store.adjacent looks along): a path that is not text is not ruled out."""
    return path is not None and (not isinstance(path, str) or is_document(path))


def unknown_name_factor(share: float | None) -> float:
    """What the fused relevance of a hybrid search counts when the names no memory holds
    carry `share` of the query's keyword weight: ``(1 - share)^UNKNOWN_SHARE_POWER``
    (UNKNOWN_NAME_BASE when the keyword leg cannot weigh them: None)."""
    if share is None or UNKNOWN_SHARE_POWER <= 0:
        return UNKNOWN_NAME_BASE
    return float((1.0 - min(max(share, 0.0), 1.0)) ** UNKNOWN_SHARE_POWER)


def without(text: str, words: Sequence[str]) -> str:
    """`text` with every whole-word occurrence of `words` left out (case-insensitive; a
    word inside a compound, on-call's call, stays), spaces collapsed."""
    for w in words:
        text = re.sub(r"(?<![\w-])" + re.escape(w) + r"(?![\w-])", " ", text, flags=re.I)
    return " ".join(text.split())


def _z_of(score: float) -> float:
    """The z-score a calibrated semantic score came from (the inverse of
    hits.semantic_score with its default midpoint and slope)."""
    s = min(max(score, 1e-9), 1.0 - 1e-9)
    return SEMANTIC_MID + math.log(s / (1.0 - s)) / SEMANTIC_SLOPE


def semantic_standout(scores: Sequence[float]) -> float | None:
    """How far the best of a semantic leg's calibrated `scores` stands above its
    STANDOUT_RANK-th, in z-scores; None when the leg returned fewer."""
    if len(scores) < STANDOUT_RANK:
        return None
    top = sorted(scores, reverse=True)
    return _z_of(top[0]) - _z_of(top[STANDOUT_RANK - 1])


def standout_factor(scores: Sequence[float]) -> float:
    """What the semantic evidence of a hybrid search counts (STANDOUT_GAP): 1 when the
    best hit stands out from the crowd, down to STANDOUT_FLOOR when it is one of many."""
    gap = semantic_standout(scores)
    if gap is None or STANDOUT_GAP <= 0:
        return 1.0
    return max(STANDOUT_FLOOR, min(1.0, gap / STANDOUT_GAP))


class _SearchAgain(Exception):
    """The page's semantic rows did not match SQLite: it changed under the search, or the
    damaged index was rebuilt (`rebuilt`). The search runs again."""

    def __init__(self, rebuilt: bool) -> None:
        super().__init__("search again")
        self.rebuilt = rebuilt


def _approximate(sem: Leg | None, notices: list[str]) -> dict[str, Any]:
    """Results.approximate of a search asked to be approximate, and its notice."""
    from cortex import ann

    info = sem.approximate if sem is not None else None
    if info is None:
        why = "no vector search ran" if sem is None else "this backend searches vectors exactly"
        info = {"approximate": False, "reason": why}
    notices.append(ann.notice(info))
    return info


def _damage_notice(damaged: list[str], notices: list[str]) -> None:
    """One notice naming the damaged rows a search skipped (an older cortex or another
    tool wrote values no reader can convert); the rest of the answer stands."""
    if damaged:
        names = list(dict.fromkeys(damaged))
        shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        notices.append(
            f"skipped {len(names)} damaged row(s) that cannot be read ({shown}); "
            "delete or repair them"
        )


def _content_words(text: str) -> list[str]:
    """The words of `text` worth highlighting when no keyword leg ran."""
    return [w for w in keyword._terms(text) if w not in DROPPED]
