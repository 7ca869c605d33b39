"""The Engine: one cortex database, and every way to write to it and search it."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from cortex import filters, fusion, keyword, recall, validate
from cortex.errors import (
    EmbeddingError,
    IndexFormatError,
    InvalidOptionError,
    QueryError,
    StorageError,
)
from cortex.ingest import ImportReport, import_path
from cortex.keyword_index import KeywordIndexer
from cortex.options import Fusion, Mode, Options, OrderBy
from cortex.ranking import (
    DEFAULT_FACT_DECAY,
    FACT_DECAY_RATES,
    RANK_COLUMNS,
    SECTOR_WEIGHTS,
    Candidate,
    RankInfo,
    effective_confidence,
    estimate_tokens,
    fact_confidence,
    is_dated,
    recency_factor,
    salience_factor,
    temporal_decay,
)
from cortex.result import Fact, MatchType, Memory, Result, Results, from_epoch
from cortex.semantic import Semantic, SemHit
from cortex.store import MemoryInput, Store, content_hash

__all__ = ["Engine", "Searcher", "open"]

#: Each retriever fetches at least this many candidates (or 2 x limit if more), whatever
#: the limit: the first n results are then the same for every limit up to half of it.
CANDIDATE_POOL = 100
#: The largest daily decay rate a fact may have (1000 / day is gone within minutes).
MAX_DECAY_RATE = 1000.0


@runtime_checkable
class Searcher(Protocol):
    """Anything that answers a query with ranked results (the Go engine's `Searcher`)."""

    def search(self, query: str | None, options: Options | None = None) -> list[Result]: ...


def _epoch(value: datetime | float | str | None, field: str = "created_at") -> float | None:
    """Epoch seconds of a date given to the API, checked by :mod:`cortex.validate`."""
    return validate.timestamp(field, value)


class Engine:
    """A cortex database opened for reading and writing memories.

    Open with :func:`cortex.open`. Safe to share between threads (each thread gets its own
    SQLite connection); use it as a context manager or call :meth:`close`.
    """

    def __init__(self, store: Store, embedder: Any = "auto", keyword_index: str = "auto") -> None:
        self._store = store
        self._semantic = Semantic(store, embedder)
        self._keyword_index = KeywordIndexer(store, keyword_index)
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle

    @property
    def path(self) -> Path:
        return self._store.path

    @property
    def store(self) -> Store:
        return self._store

    @property
    def keyword_index(self) -> KeywordIndexer:
        """The in-memory keyword index (see :mod:`cortex.keyword_index`)."""
        return self._keyword_index

    def _worker(self) -> ThreadPoolExecutor:
        """One thread for the semantic leg of hybrid searches, started on first use."""
        if self._executor is None:
            with self._executor_lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(1, thread_name_prefix="cortex-semantic")
        return self._executor

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        self._keyword_index.close()
        self._semantic.close()
        self._store.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writes

    def add(
        self,
        content: str,
        *,
        project: str | None = None,
        session: str | None = None,
        sector: str | None = None,
        tier: str | None = None,
        scope: str | None = None,
        category: str | None = None,
        salience: float = 0.5,
        confidence: float = 1.0,
        created_at: datetime | float | str | None = None,
        metadata: Mapping[str, Any] | None = None,
        source_path: str | None = None,
    ) -> int:
        """Store one memory (and its embedding, when a model is installed); return its id."""
        return self._write_many(
            [
                MemoryInput(
                    content=content,
                    project=project,
                    session=session,
                    sector=sector,
                    tier=tier,
                    scope=scope,
                    category=category,
                    salience=salience,
                    confidence=confidence,
                    created_at=_epoch(created_at),
                    metadata=metadata,
                    source_path=source_path,
                )
            ]
        )[0]

    def add_many(self, records: Iterable[Mapping[str, Any]]) -> list[int]:
        """Store several memories in one transaction (all or none); returns their ids."""
        items = []
        for record in records:
            fields = dict(record)
            if "created_at" in fields:
                fields["created_at"] = _epoch(fields["created_at"])
            try:
                items.append(MemoryInput(**fields))
            except TypeError as exc:
                raise InvalidOptionError(f"bad memory record: {exc}") from None
        return self._write_many(items)

    def _embedding_hook(self, items: Sequence[MemoryInput], progress: Any = None) -> Any:
        """Embed `items` (before any transaction) and return the hook that stores each
        vector with its memory; None when no model is available (keyword still works)."""
        if self._semantic.unavailable() is not None:
            return None
        vectors = self._semantic.vectors_for([i.content for i in items], progress)
        now = time.time()

        def on_write(tx: Any, memory_id: int, item: MemoryInput, changed: bool) -> None:
            chash = content_hash(item.content)
            self._semantic.write(tx, memory_id, chash, vectors[chash], now, replace=changed)

        return on_write

    def _write_many(self, items: list[MemoryInput]) -> list[int]:
        return self._store.add_many(items, self._embedding_hook(items))

    def import_path(
        self,
        path: str | os.PathLike[str],
        *,
        project: str | None = None,
        session: str | None = None,
        progress: Callable[[int, int, Path], None] | None = None,
        embed_progress: Callable[[int, int], None] | None = None,
        follow_links: bool = False,
    ) -> ImportReport:
        """Import a Markdown/JSON/JSONL file or a folder of them (see :mod:`cortex.ingest`).

        Memories are embedded on the way in when a model is installed; without one they are
        imported all the same (found by keyword) and ``report.not_embedded`` says why.
        `progress` reports files done; `embed_progress` the texts of the current file
        embedded (one large JSONL file is minutes of embedding). Symbolic links out of the
        imported folder are not followed unless `follow_links` (``report.skipped``).
        """
        reason = self._semantic.unavailable()
        embedded = 0

        def embed(chunks: list[MemoryInput]) -> Any:
            nonlocal embedded
            hook = self._embedding_hook(chunks, embed_progress)
            embedded += len(chunks)
            return hook

        report = import_path(
            self._store,
            Path(path),
            project=project,
            session=session,
            progress=progress,
            embed=embed if reason is None else None,
            follow_links=follow_links,
        )
        report.embedded = embedded
        report.not_embedded = reason
        self._store.after_bulk_write()
        return report

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Embed every live memory that has no vector of the active model (after a model
        change, or memories added while no model was installed), then rebuild the vector
        index from SQLite. Returns what it did."""
        if self._store.read_only:
            raise StorageError(
                f"cannot reindex {self.path}: it is open read-only "
                + ("(this user cannot write it)" if self._store.notice else "")
                + "; reindex where the database is writable"
            )
        backlog = self._semantic.backlog()
        by_id = dict(backlog)
        done = 0
        for start in range(0, len(backlog), 256):
            part = backlog[start : start + 256]
            vectors = self._semantic.vectors_for([c for _, c in part])
            now = time.time()
            with self._store.transaction() as tx:
                for memory_id, _ in part:
                    chash = content_hash(by_id[memory_id])
                    self._semantic.write(tx, memory_id, chash, vectors[chash], now)
            done += len(part)
            if progress is not None:
                progress(done, len(backlog))
        rows = self._semantic.rebuild()
        return {"embedded": done, "model_id": self._semantic.model_id, "rows": rows}

    def get(self, memory_id: int, *, project: str | None = None) -> Memory:
        """One live memory by id; with `project`, only if it belongs to that project (a
        memory of another project is not found: a project is a wall)."""
        return self._store.get(memory_id, project=project)

    def update(self, memory_id: int, **fields: Any) -> Memory:
        """Change fields of a memory; new content is re-embedded in the same transaction."""
        if "created_at" in fields:
            fields["created_at"] = _epoch(fields["created_at"])
        hook = None
        if isinstance(fields.get("content"), str):
            hook = self._embedding_hook([MemoryInput(content=fields["content"])])
        return self._store.update(memory_id, on_write=hook, **fields)

    def delete(self, memory_id: int) -> None:
        """Soft-delete a memory: it stays in the file but is never found again."""
        self._store.delete(memory_id)

    def add_fact(
        self,
        memory_id: int,
        type: str,
        content: str,
        *,
        confidence: float = 1.0,
        decay_rate: float | None = None,
        last_reinforced: datetime | float | str | None = None,
    ) -> int:
        """Attach a fact to a memory. Its confidence decays at `decay_rate` per day from
        `last_reinforced` on; without a rate, the default of its type applies
        (:data:`cortex.ranking.FACT_DECAY_RATES`: identities never fade, states in weeks)."""
        self._store.get(memory_id)
        validate.name("type", type)
        if not isinstance(content, str) or not content.strip():
            raise InvalidOptionError("a fact's content must be a non-empty string")
        validate.check_text("content", content)
        confidence = validate.unit("confidence", confidence)
        if decay_rate is None:
            decay_rate = FACT_DECAY_RATES.get(type, DEFAULT_FACT_DECAY)
        decay_rate = validate.number("decay_rate", decay_rate, lo=0.0, hi=MAX_DECAY_RATE)
        now = time.time()
        reinforced = _epoch(last_reinforced, "last_reinforced")
        with self._store.transaction() as tx:
            cur = tx.execute(
                "INSERT INTO facts (memory_id, type, content, confidence, decay_rate,"
                " last_reinforced, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    memory_id,
                    type,
                    content,
                    confidence,
                    decay_rate,
                    reinforced if reinforced is not None else now,
                    now,
                ),
            )
            return int(cur.lastrowid or 0)

    def stats(self) -> dict[str, Any]:
        return self._store.stats()

    # ------------------------------------------------------------------ search

    def search(self, query: str | None, options: Options | None = None, **changes: Any) -> Results:
        """Search the memories; `query=None` lists the memories that pass the filters.

        `options` defaults to :class:`Options`'s documented defaults; keyword arguments
        change single fields (``engine.search("deploy", limit=5)``). An empty query finds
        nothing. Returns :class:`Results`, a ``list[Result]`` that also says how it ran.
        """
        opts = options if options is not None else Options()
        if not isinstance(opts, Options):
            raise InvalidOptionError(f"options must be cortex.Options, not {type(opts).__name__}")
        if changes:
            try:
                opts = opts.replace(**changes)
            except TypeError as exc:
                raise InvalidOptionError(str(exc)) from None
        if query is not None and not isinstance(query, str):
            raise QueryError(f"a query is a string or None, not {type(query).__name__}")
        if query is not None and not validate.is_encodable(query):
            raise QueryError("the query holds a lone surrogate (not valid Unicode); give UTF-8")
        now = time.time()
        pool = max(CANDIDATE_POOL, 2 * opts.limit)
        if query is None:
            return self._browse(opts, pool, now)

        notices: list[str] = []
        text = keyword.clean(query)
        mode = opts.mode
        use_kw = mode is Mode.KEYWORD or (mode is Mode.HYBRID and opts.alpha < 1.0)
        use_sem = mode is Mode.SEMANTIC or (mode is Mode.HYBRID and opts.alpha > 0.0)
        if use_sem and text:
            reason = self._semantic.unavailable()
            if reason is not None:
                if mode is Mode.SEMANTIC:
                    raise EmbeddingError(f"semantic search is unavailable: {reason}")
                notices.append(f"semantic search unavailable, keyword results only: {reason}")
                use_sem, use_kw, mode = False, True, Mode.KEYWORD
        if mode is Mode.HYBRID and not (use_kw and use_sem):
            # alpha 0 or 1: one retriever only, so the search is that mode (same floor too)
            mode = Mode.KEYWORD if use_kw else Mode.SEMANTIC
        # Hybrid: the semantic leg (query embedding, vector scan: both release the GIL) runs
        # on the engine's worker thread while this thread runs the keyword leg.
        pending = (
            self._worker().submit(self._semantic.search, text, opts, pool)
            if use_sem and text and use_kw
            else None
        )
        try:
            kw = (
                keyword.search(self._store, query, opts, pool, native=self._keyword_index)
                if use_kw
                else None
            )
        except BaseException:
            if pending is not None and not pending.cancel():
                wait([pending])  # do not leave it running against a store being closed
            raise
        if kw is not None:
            notices.extend(kw.notices)
        sem: list[SemHit] = []
        if use_sem and text:
            try:
                sem = (
                    pending.result()
                    if pending is not None
                    else self._semantic.search(text, opts, pool)
                )
            except (IndexFormatError, EmbeddingError) as exc:
                if mode is Mode.SEMANTIC or kw is None:
                    raise
                # hybrid: the keyword half still answers; say why the other half did not
                notices.append(f"semantic search failed, keyword results only: {exc}")
                mode, use_sem = Mode.KEYWORD, False
        candidates = self._fuse(kw.hits if kw is not None else [], sem, opts, use_kw, use_sem)
        damaged: list[str] = []
        ranked, hidden = self._rank(
            candidates, opts, now, threshold=opts.threshold(mode), damaged=damaged
        )
        default_type = MatchType.SEMANTIC if mode is Mode.SEMANTIC else MatchType.BM25
        results = Results(
            self._finish(ranked, opts, now, default_type, kw, damaged=damaged),
            query=query,
            mode=str(mode),
            rewritten=kw.rewritten if kw is not None else None,
            hidden=hidden,
        )
        if not results and hidden:
            notices.append(
                f"nothing passed the thresholds: {hidden} match(es) scored below min_score"
                f" {opts.threshold(mode)} or min_confidence {opts.min_confidence}"
            )
        _damage_notice(damaged, notices)
        self._record(results, opts, notices)
        results.notices = tuple(notices)
        return results

    def _fuse(
        self,
        kw_hits: Sequence[keyword.Hit],
        sem_hits: Sequence[SemHit],
        opts: Options,
        use_kw: bool,
        use_sem: bool,
    ) -> list[Candidate]:
        """One candidate per memory (DESIGN pipeline step 3), with both scores kept."""
        by_id: dict[int, Candidate] = {}
        for h in kw_hits:
            by_id[h.memory_id] = Candidate(
                h.memory_id, h.info, bm25=h.score, base=h.score,
                match_type=MatchType.BM25,
            )  # fmt: skip
        for s in sem_hits:
            c = by_id.get(s.memory_id)
            if c is None:
                by_id[s.memory_id] = Candidate(
                    s.memory_id, s.info, semantic=s.score, base=s.score,
                    match_type=MatchType.SEMANTIC,
                )  # fmt: skip
            else:
                c.semantic = s.score
                c.match_type = MatchType.HYBRID
        if not (use_kw and use_sem):
            return list(by_id.values())
        if opts.fusion is Fusion.LINEAR:
            # Seed 001: a weighted sum of the absolute scores (cosine, mapped BM25), so the
            # fused score means the same thing in every query and a threshold holds.
            for c in by_id.values():
                c.base = (1.0 - opts.alpha) * c.bm25 + opts.alpha * c.semantic
            return list(by_id.values())
        kw_ids = np.fromiter((h.memory_id for h in kw_hits), dtype=np.int64, count=len(kw_hits))
        sem_ids = np.fromiter((s.memory_id for s in sem_hits), dtype=np.int64, count=len(sem_hits))
        fused = fusion.rrf([kw_ids, sem_ids], [1.0 - opts.alpha, opts.alpha], opts.rrf_k)
        for memory_id, score in zip(fused.ids.tolist(), fused.scores.tolist(), strict=True):
            by_id[memory_id].base = float(score)
        return list(by_id.values())

    def _browse(self, opts: Options, pool: int, now: float) -> Results:
        predicate, params = filters.where(opts)
        order = (
            "m.confidence DESC, m.id"
            if opts.order_by is OrderBy.CONFIDENCE
            else ("m.created_at DESC, m.id DESC")
        )
        rows = self._store.query(
            f"SELECT m.id, {RANK_COLUMNS} FROM memories m WHERE {predicate}"
            f" ORDER BY {order} LIMIT ?",
            [*params, pool],
        )
        candidates = [Candidate(int(i), RankInfo(*rest)) for i, *rest in rows]
        damaged: list[str] = []
        ranked, hidden = self._rank(candidates, opts, now, browse=True, damaged=damaged)
        results = Results(
            self._finish(ranked, opts, now, MatchType.FILTER, None, damaged=damaged),
            query=None,
            mode="filter",
            hidden=hidden,
        )
        notices: list[str] = []
        _damage_notice(damaged, notices)
        self._record(results, opts, notices)
        results.notices = tuple(notices)
        return results

    def _load_facts(
        self, ids: Sequence[int], damaged: list[str] | None = None
    ) -> dict[int, list[tuple[Any, ...]]]:
        """Facts of the given memories, by memory id (one cheap probe when there are none).
        A damaged fact row is left out (and named in `damaged`)."""
        out: dict[int, list[tuple[Any, ...]]] = {}
        if not ids or not self._store.query("SELECT EXISTS (SELECT 1 FROM facts)")[0][0]:
            return out
        for start in range(0, len(ids), 500):
            part = list(ids[start : start + 500])
            marks = ",".join("?" * len(part))
            for row in self._store.query(
                "SELECT id, memory_id, type, content, confidence, decay_rate, last_reinforced"
                f" FROM facts WHERE memory_id IN ({marks}) ORDER BY id",
                part,
            ):
                if not validate.fact_row_ok(row):
                    if damaged is not None and f"fact {row[0]}" not in damaged:
                        damaged.append(f"fact {row[0]}")
                    continue
                out.setdefault(row[1], []).append(row)
        return out

    def _rank(
        self,
        candidates: list[Candidate],
        opts: Options,
        now: float,
        *,
        browse: bool = False,
        threshold: float = 0.0,
        damaged: list[str] | None = None,
    ) -> tuple[list[Candidate], int]:
        """Boosts, confidence, thresholds and order (DESIGN pipeline steps 4-5). A candidate
        whose stored ranking columns are damaged is left out and named in `damaged`."""
        bad = [c.memory_id for c in candidates if not validate.rank_info_ok(c.info)]
        if bad:
            if damaged is not None:
                damaged.extend(f"memory {i}" for i in bad)
            candidates = [c for c in candidates if c.memory_id not in set(bad)]
        if not candidates:
            return [], 0
        facts = self._load_facts([c.memory_id for c in candidates], damaged)
        kept: list[Candidate] = []
        hidden = 0
        sectors = opts.sector_weights if opts.sector_weights is not None else SECTOR_WEIGHTS
        for c in candidates:
            info = c.info
            c.effective_confidence = effective_confidence(
                info.confidence, [(f[4], f[5], f[6]) for f in facts.get(c.memory_id, ())], now
            )
            if browse:
                c.score = 0.0
            else:
                if opts.recency_weight:
                    c.recency = recency_factor(info.created_at, now, opts.recency_weight)
                if opts.half_life_days and is_dated(info.source_path):
                    c.decay = temporal_decay(info.created_at, now, opts.half_life_days)
                c.salience = salience_factor(info.salience, opts.salience_weight)
                c.sector = sectors.get(info.sector, 1.0) if info.sector else 1.0
                c.score = (
                    c.base * c.recency * c.decay * c.salience * c.sector * c.effective_confidence
                )
            if c.effective_confidence < opts.min_confidence or (not browse and c.score < threshold):
                hidden += 1
                continue
            kept.append(c)
        if opts.order_by is OrderBy.RECENCY or (browse and opts.order_by is OrderBy.RELEVANCE):
            kept.sort(key=lambda c: (-c.created_at, -c.memory_id))
        elif opts.order_by is OrderBy.CONFIDENCE:
            kept.sort(key=lambda c: (-c.effective_confidence, -c.score, c.memory_id))
        else:
            kept.sort(key=lambda c: (-c.score, c.memory_id))
        return kept, hidden

    def _finish(
        self,
        ranked: list[Candidate],
        opts: Options,
        now: float,
        match_type: MatchType,
        kw: keyword.KeywordResult | None,
        *,
        damaged: list[str] | None = None,
    ) -> list[Result]:
        """Limit, budget and enrichment (pipeline steps 5-6) of the ranked candidates.
        A memory whose row cannot be read is skipped (named in `damaged`) and the next
        candidate takes its place."""
        top: list[Candidate] = []
        memories: dict[int, Memory] = {}
        start = 0
        while len(top) < opts.limit and start < len(ranked):
            part = ranked[start : start + opts.limit - len(top)]
            start += len(part)
            bad: list[int] = []
            memories.update(self._store.get_many([c.memory_id for c in part], damaged=bad))
            top.extend(c for c in part if c.memory_id in memories)
            if damaged is not None:
                damaged.extend(f"memory {i}" for i in bad)
        if opts.token_budget is not None:
            used = 0
            for n, c in enumerate(top):
                cost = estimate_tokens(memories[c.memory_id].content)
                if used + cost > opts.token_budget:
                    top = top[:n]
                    break
                used += cost
        ids = [c.memory_id for c in top]
        contents = {i: memories[i].content for i in ids}
        if kw is not None:
            snippets = keyword.snippets(kw, contents, ids)
        else:
            snippets = {i: keyword.text_snippet(contents[i], None) for i in ids}
        facts = self._load_facts(ids, damaged) if opts.include_facts else {}
        extra = recall.enrichment(self._store, [memories[i] for i in ids])
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
                for f in facts.get(c.memory_id, ())
            )
            memory = memories[c.memory_id]
            out.append(
                Result(
                    memory=memory,
                    score=c.score,
                    bm25_score=c.bm25,
                    semantic_score=c.semantic,
                    effective_confidence=c.effective_confidence,
                    snippet=snippets.get(c.memory_id, ""),
                    match_type=MatchType(c.match_type) if c.match_type else match_type,
                    facts=fact_objs,
                    source_session=extra.source_session.get(c.memory_id),
                    is_superseded=memory.superseded_by is not None,
                    superseded_by=extra.superseded_by.get(c.memory_id),
                    related_memory_count=extra.related.get(c.memory_id, 0),
                    explain=c.explain() if opts.explain else None,
                )
            )
        return out

    def _record(self, results: Results, opts: Options, notices: list[str]) -> None:
        """Pipeline step 7, after the order is fixed: it cannot change this search's ranking."""
        if self._store.notice is not None:  # opened read-only although asked writable
            notices.append(self._store.notice)
        if not opts.record or self._store.read_only or not results:
            return
        try:
            recall.record_recall(
                self._store,
                [(r.memory.id, r.facts[0].id if r.facts else None, r.score) for r in results],
                query=results.query,
                session_id=opts.session_id,
                lens=opts.lens,
                reinforce=opts.reinforce,
            )
        except StorageError as exc:  # the answer stands; say that it was not recorded
            notices.append(f"recall not recorded: {exc}")

    # ------------------------------------------------------------------ sessions

    def start_session(
        self,
        session_id: str | None = None,
        *,
        project: str | None = None,
        summary: str | None = None,
    ) -> str:
        """Open a session and return its id (a fresh one unless given)."""
        return recall.start_session(self._store, session_id, project=project, summary=summary)

    def end_session(
        self, session_id: str, *, summary: str | None = None, project: str | None = None
    ) -> None:
        """End a session; pass `project` when the same session id is used in several
        projects (a session belongs to one project)."""
        recall.end_session(self._store, session_id, summary=summary, project=project)

    def link(self, memory_id: int, session_id: str, usage: str = "recalled") -> None:
        """Record that a memory was created / recalled / updated / reinforced in a session."""
        recall.link(self._store, memory_id, session_id, usage)

    def supersede(self, old_id: int, new_id: int) -> None:
        """Mark `old_id` as replaced by `new_id`; searches leave it out unless asked."""
        recall.supersede(self._store, old_id, new_id)

    def relate(
        self,
        source_id: int,
        target_id: int,
        type: str = "RELATED_TO",
        created_by: str | None = None,
    ) -> None:
        recall.relate(self._store, source_id, target_id, type, created_by)

    def timeline(
        self, anchor_id: int, before: int = 5, after: int = 5, *, project: str | None = None
    ) -> recall.Timeline:
        """The memories of the anchor's project just before and after it, with their sessions.
        With `project`, an anchor of another project is not found."""
        return recall.timeline(self._store, anchor_id, before, after, project=project)

    def session_context(
        self, memory_id: int, *, project: str | None = None
    ) -> recall.SessionContext | None:
        """The latest session the memory took part in, and how."""
        return recall.session_context(self._store, memory_id, project=project)


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


def open(
    path: str | os.PathLike[str],
    *,
    read_only: bool = False,
    embedder: Any = "auto",
    keyword_index: str = "auto",
) -> Engine:
    """Open (creating it unless `read_only`) the cortex database at `path`.

    `embedder`: "auto" (the default model, loaded when first needed; without one, searches
    run keyword-only and say so), None (keyword only), or any object with `embed`,
    `embed_batch`, `model_id` and `dim` (see :class:`cortex.embed.Embedder`).

    `keyword_index`: "auto" (an in-memory twin of the FTS5 index answers plain-text
    keyword queries once built in the background, for databases of 5,000 memories or
    more), "on" (built at the first search, which waits for it) or "off" (FTS5 only).
    Results are the same either way; see :mod:`cortex.keyword_index`.
    """
    store = Store.open(path, read_only=read_only)
    try:
        return Engine(store, embedder, keyword_index)
    except BaseException:
        store.close()
        raise
