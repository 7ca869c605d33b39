"""The Engine: one cortex database, and every way to write to it and search it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from cortex import documents, lenses, recall, validate
from cortex._lazy import LazyModule
from cortex.errors import (
    EmbeddingError,
    ImportFileError,
    InvalidOptionError,
    NotFoundError,
    QueryError,
    StorageError,
)
from cortex.keyword_index import POLICIES, KeywordIndexer
from cortex.log import get_logger
from cortex.options import MAX_LIMIT, Options
from cortex.paths import db_location, url_scheme
from cortex.ranking import DEFAULT_FACT_DECAY, FACT_DECAY_RATES
from cortex.result import MatchType, Memory, Result, Results
from cortex.search.pipeline import Pipeline
from cortex.search.plan import CANDIDATE_POOL
from cortex.search.query_cache import QueryCache
from cortex.search.recorder import Recorder
from cortex.search.sqlite import KeywordRetriever, SemanticRetriever
from cortex.semantic import Semantic
from cortex.store import SCHEMA_VERSION, MemoryInput, Store, content_hash
from cortex.suggest import FEW

if TYPE_CHECKING:
    import numpy as np

    from cortex.context import ContextAnswer
    from cortex.ingest import ImportReport
else:  # imported when a vector is first touched (start-up of keyword-only commands)
    np = LazyModule("numpy")

__all__ = ["CANDIDATE_POOL", "Engine", "Searcher", "open"]

#: The largest daily decay rate a fact may have (1000 / day is gone within minutes).
MAX_DECAY_RATE = 1000.0
#: The most documents a search with ``include_documents`` adds to its results.
DOCUMENTS_WITH_RESULTS = 5
#: Memories `reindex` embeds per call and writes per transaction.
REINDEX_WINDOW = 8192

_log = get_logger(__name__)


@runtime_checkable
class Searcher(Protocol):
    """Anything that answers a query with ranked results (the Go engine's `Searcher`)."""

    def search(self, query: str | None, options: Options | None = None) -> list[Result]: ...


def _one_project(value: object) -> str | None:
    """The project a search is confined to, when it is exactly one."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and len(value) == 1 and isinstance(value[0], str):
        return value[0]
    return None


def _epoch(value: datetime | float | str | None, field: str = "created_at") -> float | None:
    """Epoch seconds of a date given to the API, checked by :mod:`cortex.validate`."""
    return validate.timestamp(field, value)


class Engine:
    """A cortex database opened for reading and writing memories.

    Open with :func:`cortex.open`. Safe to share between threads (each thread gets its own
    SQLite connection); use it as a context manager or call :meth:`close`.
    """

    def __init__(self, store: Any, embedder: Any = "auto", keyword_index: str = "auto") -> None:
        # A Store (SQLite) or a cortex.pg.store.PgStore: the same methods; the backend
        # decides the retrievers and where vectors live.
        self._store: Any = store
        self._pg = getattr(store, "backend", "sqlite") == "postgres"
        self._query_cache = QueryCache()
        keyword_leg: Any
        semantic_leg: Any
        if self._pg:
            from cortex.pg.embedding import PgSemantic
            from cortex.pg.retrievers import PgKeywordRetriever, PgSemanticRetriever

            if keyword_index not in POLICIES:
                raise InvalidOptionError(
                    f"keyword_index must be one of {', '.join(POLICIES)}, not {keyword_index!r}"
                )
            from cortex.pg.keyword_index import PgKeywordIndex

            self._semantic: Any = PgSemantic(store, embedder)
            # BM25 in PostgreSQL, or in memory (cortex.pg.keyword_index); no SQLite twin
            self._keyword_index = KeywordIndexer(store, "off")
            self._pg_keywords: Any = PgKeywordIndex(store, keyword_index)
            keyword_leg = PgKeywordRetriever(store, self._pg_keywords)
            semantic_leg = PgSemanticRetriever(store, self._semantic, self._query_cache)
        else:
            self._semantic = Semantic(store, embedder)
            self._keyword_index = KeywordIndexer(store, keyword_index)
            keyword_leg = KeywordRetriever(store, self._keyword_index)
            semantic_leg = SemanticRetriever(self._semantic, self._query_cache)
        # Searches hand their recall rows to a writer thread (cortex.search.recorder).
        self._recorder = None if store.read_only else Recorder(store)
        self._pipeline = Pipeline(
            store, keyword_leg, semantic_leg, self._semantic.unavailable, self._recorder
        )

    @property
    def backend(self) -> str:
        """ "sqlite" or "postgres"."""
        return "postgres" if self._pg else "sqlite"

    def _sqlite_only(self, what: str) -> None:
        """Refuse a feature the PostgreSQL backend does not have yet (said, never ignored)."""
        if self._pg:
            raise InvalidOptionError(
                f"{what} is SQLite-only for now: not available on PostgreSQL ({self.path})"
            )

    # ------------------------------------------------------------------ lifecycle

    @property
    def path(self) -> Path:
        """The database file (on PostgreSQL: its URL, password removed, as a str)."""
        return self._store.path  # type: ignore[no-any-return]

    @property
    def read_only(self) -> bool:
        """Whether the database is open read-only (nothing is recorded or written)."""
        return self._store.read_only  # type: ignore[no-any-return]

    @property
    def store(self) -> Store:
        """The database (a :class:`cortex.pg.store.PgStore` on PostgreSQL); every search
        recorded so far is written first (whoever reads the store reads this Engine's
        searches)."""
        self.flush_recalls()
        return self._store  # type: ignore[no-any-return]

    @property
    def model_id(self) -> str:
        """The active embedding model's id (loads the model); raises EmbeddingError
        when there is none."""
        return self._semantic.model_id  # type: ignore[no-any-return]

    @property
    def keyword_index(self) -> KeywordIndexer:
        """The in-memory keyword index (see :mod:`cortex.keyword_index`)."""
        return self._keyword_index

    @property
    def query_cache(self) -> QueryCache:
        """The cache of query embeddings (see :mod:`cortex.search.query_cache`):
        ``engine.query_cache.stats()`` says how often it answered,
        ``engine.query_cache.resize(0)`` turns it off."""
        return self._query_cache

    def flush_recalls(self, timeout: float | None = None) -> bool:
        """Return once every search recorded so far is written to the recall log (searches
        record on a writer thread, after their answer: :mod:`cortex.search.recorder`;
        without a `timeout` this thread writes what is queued). False if `timeout`
        seconds passed first. Close and interpreter exit flush too."""
        if self._recorder is None or not self._recorder.pending():
            return True
        if self._store.in_transaction():
            # This thread holds the write lock the writer thread waits for: waiting here
            # would stall both until the busy timeout. Its rows follow the transaction.
            return False
        return self._recorder.flush(timeout)

    def when_recalls_written(self, callback: Callable[[], None]) -> None:
        """Call `callback` once every search recorded so far is written: at once if it
        is, else on the recorder's thread (keep it short). For an event loop:
        ``engine.when_recalls_written(lambda: loop.call_soon_threadsafe(done.set))``."""
        if self._recorder is None:
            callback()
        else:
            self._recorder.when_written(callback)

    def close(self) -> None:
        if self._recorder is not None:
            self._recorder.close()  # flushed and fsync'd before the store closes
        self._pipeline.close()
        self._keyword_index.close()
        if self._pg:
            self._pg_keywords.close()
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
        """Store one memory (and its embedding, when a model is installed); return its id.

        For many memories use :meth:`add_many`: one transaction and batched embedding,
        1.6x faster than a loop of `add`."""
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

    def add_many(
        self,
        records: Iterable[Mapping[str, Any]],
        *,
        vectors: Any = None,
        model_id: str | None = None,
    ) -> list[int]:
        """Store several memories in one transaction (all or none); returns their ids.

        The bulk path: each record is a mapping of :meth:`add`'s arguments
        (``{"content": ..., "project": ...}``); their embeddings are computed in batches.

        `vectors`, when given, are the memories' embeddings computed beforehand by the
        active model (``engine.model_id``): an array of shape ``(len(records), dim)``, one
        finite, non-zero row per record in order, stored as given instead of embedding
        the texts (rows are L2-normalised in the index). `model_id` names the model that
        computed them; when it is not the active model's, nothing is written (vectors of
        two models are never mixed). Without it, the vectors are taken as the active
        model's.
        """
        items = []
        for record in records:
            # a copy only where a field changes or the record is not a dict
            fields = record if type(record) is dict else dict(record)
            if "created_at" in fields:
                fields = {**fields, "created_at": _epoch(fields["created_at"])}
            try:
                items.append(MemoryInput(**fields))
            except TypeError as exc:
                raise InvalidOptionError(f"bad memory record: {exc}") from None
        if vectors is None:
            return self._write_many(items)
        if model_id is not None and model_id != self._semantic.model_id:
            raise InvalidOptionError(
                f"the vectors are of model {model_id!r}, but this database embeds with "
                f"{self._semantic.model_id!r}; embed the texts with the active model or"
                " leave out vectors= to let cortex embed them"
            )
        rows = self._semantic.supplied(vectors, len(items))
        if self._pg:
            given = {i.content_hash: r for i, r in zip(items, rows, strict=True)}
            return self._store.add_many(items, self._semantic.batch(given))  # type: ignore[no-any-return]
        store_vectors = self._semantic.bulk_writer(time.time())

        def after(tx: Any, ids: list[int], written: list[MemoryInput]) -> None:
            store_vectors(tx, ids, [i.content_hash for i in written], rows)

        return self._store.add_many(items, after=after)  # type: ignore[no-any-return]

    def _embedding_hook(self, items: Sequence[MemoryInput], progress: Any = None) -> Any:
        """Embed `items` (before any transaction) and return the hook that stores each
        vector with its memory; None when no model is available (keyword still works)."""
        if self._semantic.unavailable() is not None:
            return None
        if self._pg:  # the store writes the batch with the rows, in their transaction
            return self._semantic.embed_batch(items, progress)
        vectors = self._semantic.vectors_for([i.content for i in items], progress)
        now = time.time()

        def on_write(tx: Any, memory_id: int, item: MemoryInput, changed: bool) -> None:
            chash = item.content_hash
            self._semantic.write(tx, memory_id, chash, vectors[chash], now, replace=changed)

        return on_write

    def _write_many(self, items: list[MemoryInput]) -> list[int]:
        return self._store.add_many(items, self._embedding_hook(items))  # type: ignore[no-any-return]

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
        `progress` reports files done; `embed_progress` the texts embedded of the current
        window of files (see :data:`cortex.ingest.IMPORT_WINDOW`; one large JSONL file
        is one window, minutes of embedding).
        Symbolic links out of the imported folder are not followed unless `follow_links`
        (``report.skipped``).
        """
        if not os.fspath(path).strip():  # an unset shell variable; Path("") is "." (all of it)
            raise ImportFileError("the path to import is empty; give a file or a folder")
        reason = self._semantic.unavailable()
        embedded = 0

        def embed(chunks: list[MemoryInput]) -> Any:
            nonlocal embedded
            hook = self._embedding_hook(chunks, embed_progress)
            embedded += len(chunks)
            return hook

        from cortex.ingest import import_path  # only imports pay for the parsers

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
        c = report.counts
        _log.info(
            "imported %s: %d file(s), %d added, %d updated, %d unchanged, %d removed,"
            " %d failed, %d embedded%s", path, report.files, c.added, c.updated, c.unchanged,
            c.removed, len(report.errors), embedded, f" (not embedded: {reason})" if reason else "",
        )  # fmt: skip
        return report

    def flush(self) -> None:
        """Bring the derived files up to date and checkpoint the WAL: what a bulk load
        calls at its end, so that the files on disk are complete and compact (a search
        would otherwise sync the vector index first). The keyword index is saved too
        (built first if need be; stores of AUTO_MIN memories and more), so that a fresh
        process loads it (the CLI's searches from SAVED_MIN) instead of scanning FTS5."""
        self.flush_recalls()
        if self._semantic.unavailable() is None and not self._store.read_only and not self._pg:
            self._semantic.index()
        if not self._pg:
            self._keyword_index.persist()
        else:  # builds PostgreSQL's in-memory keyword index, when its policy would
            self._pg_keywords.persist()
        self._store.after_bulk_write()

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Embed every live memory that has no vector of the active model (after a model
        change, or memories added while no model was installed), then rebuild the vector
        index from SQLite, the code references (cortex.code) of every memory, the documents
        of the imported files (cortex.documents) and the per-project keyword statistics.
        Returns what it did."""
        if self._store.read_only:
            raise StorageError(
                f"cannot reindex {self.path}: it is open read-only "
                + ("(this user cannot write it)" if self._store.notice else "")
                + "; reindex where the database is writable"
            )
        refs = self._store.rebuild_code()  # first: they need no model
        docs = self._store.rebuild_documents()
        backlog = self._semantic.backlog()
        by_id = dict(backlog)
        done = 0
        # Windows of REINDEX_WINDOW texts, each embedded in one length-sorted call (short
        # and long texts apart: less padding), then written in one transaction.
        for start in range(0, len(backlog), REINDEX_WINDOW):
            part = backlog[start : start + REINDEX_WINDOW]
            step = None
            if progress is not None:
                step = lambda n, _total, base=start: progress(base + n, len(backlog))  # noqa: E731
            vectors = self._semantic.vectors_for([c for _, c in part], step)
            now = time.time()
            if self._pg:
                self._store.write_vectors(self._semantic.batch(vectors), part)
                done += len(part)
                if progress is not None:
                    progress(done, len(backlog))
                continue
            with self._store.transaction() as tx:
                for memory_id, _ in part:
                    chash = content_hash(by_id[memory_id])
                    self._semantic.write(tx, memory_id, chash, vectors[chash], now)
            done += len(part)
            if progress is not None:
                progress(done, len(backlog))
        nlist = self._approximate_nlist()  # of the vector file the rebuild replaces
        rows = self._semantic.rebuild()
        approximate = self._rebuild_approximate(nlist)
        # The per-project keyword statistics, recounted from FTS5's own size records.
        self._store.rebuild_keyword_totals()
        _log.info(
            "reindexed: %d memories embedded, the index holds %d vectors, %d code references",
            done, rows, refs,
        )  # fmt: skip
        return {
            "embedded": done,
            "model_id": self._semantic.model_id,
            "rows": rows,
            "code_refs": refs,
            "documents": docs,
            **({"approximate": approximate} if approximate is not None else {}),
        }

    def _approximate_nlist(self) -> int | None:
        """The list count of the approximate index built of the current vector file: None
        when none was built (or the store is on PostgreSQL: pgvector has no such file), 0
        when one was but cannot be read."""
        if self._pg:
            return None
        from cortex import ann

        path = ann.ann_path(self._semantic.index_path())
        if not path.exists():
            return None
        return ann.built_nlist(path) or 0  # 0: built, but unreadable: the default lists

    def _rebuild_approximate(self, nlist: int | None) -> dict[str, Any] | None:
        """After a rebuild of the vector index (a new vector file, of a new generation):
        build the approximate index again when one was built of the file it replaced (it
        was opted into), with the same list count; else None."""
        if nlist is None:
            return None
        from cortex import ann

        index = self._semantic.index()
        if index.rows == 0:  # nothing to index; a search ignores the stale file
            return None
        return ann.build(index, nlist=nlist or None)

    def build_approximate_index(self, **params: Any) -> dict[str, Any]:
        """Build (or rebuild) the opt-in approximate vector index (cortex.ann: IVF) of the
        vector index as it is now; searches use it only with ``approximate=True``, and
        rows added later are searched exactly until the next build. `params`: ``nlist``,
        ``sample``, ``iters``, ``seed``, ``threads`` (defaults: cortex.ann.default_params).
        Returns what was built. SQLite stores only."""
        if self._pg:
            raise InvalidOptionError("the approximate index is built for SQLite stores only")
        if self._store.read_only:
            raise StorageError(f"cannot build an index of {self.path}: it is open read-only")
        reason = self._semantic.unavailable()
        if reason is not None:
            raise EmbeddingError(f"the approximate index is of the vectors: {reason}")
        from cortex import ann

        return ann.build(self._semantic.index(), **params)

    def get(self, memory_id: int, *, project: str | None = None) -> Memory:
        """One live memory by id; with `project`, only if it belongs to that project (a
        memory of another project is not found: a project is a wall)."""
        self.flush_recalls()  # its access count includes this Engine's searches
        return self._store.get(memory_id, project=project)  # type: ignore[no-any-return]

    def update(self, memory_id: int, **fields: Any) -> Memory:
        """Change fields of a memory; new content is re-embedded in the same transaction."""
        if "created_at" in fields:
            fields["created_at"] = _epoch(fields["created_at"])
        hook = None
        if isinstance(fields.get("content"), str):
            hook = self._embedding_hook([MemoryInput(content=fields["content"])])
        return self._store.update(memory_id, on_write=hook, **fields)  # type: ignore[no-any-return]

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
        reinforced = _epoch(last_reinforced, "last_reinforced")
        return self._store.add_fact(  # type: ignore[no-any-return]
            memory_id,
            type,
            content,
            confidence=confidence,
            decay_rate=decay_rate,
            last_reinforced=reinforced if reinforced is not None else time.time(),
        )

    def stats(self) -> dict[str, Any]:
        self.flush_recalls()
        return self._store.stats()  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ search

    def search(
        self, query: str | None = None, options: Options | None = None, **changes: Any
    ) -> Results:
        """Search the memories; `query` None or blank lists the memories that pass the
        filters (newest first).

        `options` defaults to :class:`Options`'s documented defaults; keyword arguments
        change single fields (``engine.search("deploy", limit=5)``). Returns
        :class:`Results`, a ``list[Result]`` that also says how it ran. The pipeline is
        :mod:`cortex.search`.
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
        wants = [
            name for name, on in (
                ("lens", opts.lens is not None),
                ("code", opts.code is not None),
                ("include_documents", opts.include_documents),
            ) if on
        ]  # fmt: skip
        if wants:
            sqlite_only = [w for w in wants if w != "lens"]
            if sqlite_only:
                self._sqlite_only(", ".join(sqlite_only))
            self._upgraded(", ".join(wants))
        opts = lenses.apply(self._store, opts)
        # the recorder's worker woken once the answer is whole (Recorder.deferred)
        with self._recorder.deferred() if self._recorder is not None else nullcontext():
            results = self._pipeline.search(query, opts)
            if query and query.strip() and opts.offset == 0 and not opts.cursor:
                results.suggestions = tuple(
                    self._suggest(query, results, opts, related=len(results) < FEW)
                )
            if opts.include_documents:
                # the words searched: without the time words the interpretation took out
                searched = (results.interpretation or {}).get("searched") or query
                results.documents = documents.search(
                    self._store, searched, opts, limit=min(opts.limit, DOCUMENTS_WITH_RESULTS)
                )
        return results

    def search_documents(
        self,
        query: str | None = None,
        *,
        project: str | Sequence[str] | None = None,
        source_prefix: str | None = None,
        limit: int = 10,
        content: bool = False,
    ) -> list[documents.Document]:
        """Search the imported Markdown files as whole documents (seed 000), apart from
        their chunks: BM25 over each file's whole text and title, best first; without
        text, the newest files. `project` walls the search like ``Options.project``;
        `content` adds each file's whole text."""
        if query is not None and not isinstance(query, str):
            raise QueryError(f"a query is a string or None, not {type(query).__name__}")
        if query is not None and not validate.is_encodable(query):
            raise QueryError("the query holds a lone surrogate (not valid Unicode); give UTF-8")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidOptionError(f"limit must be an integer from 1 to 1000, not {limit!r}")
        if not isinstance(content, bool):
            raise InvalidOptionError("content must be True or False")
        opts = Options(project=project, source_prefix=source_prefix)
        self._sqlite_only("search_documents")
        self._upgraded("search_documents")
        return documents.search(self._store, query, opts, limit=limit, content=content)

    def _upgraded(self, what: str) -> None:
        """Refuse `what` on a database of an older cortex opened read-only: its tables
        (code references, lenses, documents) come with the upgrade a writable open does."""
        if self._store.read_only and self._store.schema_version() < SCHEMA_VERSION:
            raise StorageError(
                f"{self.path} was written by an older cortex and is open read-only: {what}"
                " needs its upgrade; open it writable once (any cortex command that writes)"
            )

    # ------------------------------------------------------------------ lenses

    def save_lens(
        self,
        name: str,
        options: Options | None = None,
        *,
        description: str | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """Save (or replace) a lens (seed 002): a named set of filters and boosts that
        ``Options(lens=name)`` applies; `fields` are :class:`Options` fields
        (``engine.save_lens("ops", project=["api", "infra"], order_by="recency")``), or
        give an Options whose non-default fields are saved. Returns the lens."""
        return lenses.save(self._store, name, options, description=description, **fields)

    def lenses(self) -> list[dict[str, Any]]:
        """Every saved lens: {name, options, description, created_at, updated_at}."""
        return lenses.list_lenses(self._store)

    def delete_lens(self, name: str) -> None:
        """Delete a saved lens (NotFoundError when there is none)."""
        lenses.delete(self._store, name)

    def _suggest(
        self, query: str, results: Results, opts: Options, *, related: bool = True
    ) -> list[str]:
        """Follow-up queries (cortex.suggest) within the search's filters: its words
        corrected when a memory lacks them, related terms when it found little (`related`).
        The words are those searched, after the time words."""
        if self._pg:
            return []  # suggestions read FTS5's vocabulary: SQLite-only for now
        from cortex.suggest import suggest

        searched = (results.interpretation or {}).get("searched") or query
        return suggest(
            self._store, str(searched), opts, results, related=related, native=self._keyword_index
        )

    def context(
        self,
        prompt: str,
        *,
        max_tokens: int = 2000,
        format: str = "detailed",
        project: str | Sequence[str] | None = None,
        task: str | None = None,
        language: str | None = None,
        options: Options | None = None,
        **changes: Any,
    ) -> ContextAnswer:
        """What an agent should read before it answers `prompt` (seed 003's LLM endpoint):
        the best memories, in the `detailed` format each with the chunks around it,
        packed into `max_tokens` (characters / 4), with a calibrated `confidence` for the
        whole answer and follow-up `suggestions` (see :mod:`cortex.context`).

        `project` (one or several) is a wall, as in a search; one `project`, `task` and
        `language` make seed 004's scope pattern (``project:X:task:Y``, ``project:X*``,
        ``language:X`` or ``universal``), reported as ``scope`` and preferred among
        near-equal memories.
        `options` and keyword `changes` are the search's (``now=``, ``mode=``, ...)."""
        from cortex import context as ctx

        if not isinstance(prompt, str):
            raise QueryError(f"a prompt is a string, not {type(prompt).__name__}")
        fmt = ctx.check_format(format)
        budget = ctx.check_budget(max_tokens)
        for name, value in (("task", task), ("language", language)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise InvalidOptionError(f"{name} must be a non-empty string or None")
        opts = options if options is not None else Options()
        if not isinstance(opts, Options):
            raise InvalidOptionError(f"options must be cortex.Options, not {type(opts).__name__}")
        wanted: dict[str, Any] = {"explain": True, "limit": min(opts.limit, ctx.CANDIDATES)}
        if project is not None:
            wanted["project"] = project
        if fmt == "detailed" and opts.context == 0:
            wanted["context"] = 1
        try:
            opts = opts.replace(**{**wanted, **changes})
        except TypeError as exc:
            raise InvalidOptionError(str(exc)) from None
        results = self.search(prompt, opts)
        suggestions = list(results.suggestions)
        if not suggestions and prompt.strip():
            suggestions = self._suggest(prompt, results, opts)
        return ctx.build(
            prompt,
            results,
            fmt=fmt,
            max_tokens=budget,
            scope=ctx.scope_pattern(
                _one_project(project if project is not None else opts.project), task, language
            ),
            suggestions=suggestions,
            prefer_scope=opts.order_by == "relevance",
        )

    def similar(self, memory_id: int, k: int = 10, *, project: str | None = None) -> Results:
        """The `k` memories nearest to `memory_id` by meaning (cosine of their embeddings),
        best first, without itself, superseded and deleted ones.

        Only memories of the same project (or, for a memory without one, without one): a
        project is a wall. With `project`, a memory of another project is not found.
        Needs the embedding model (EmbeddingError otherwise) and the memory's embedding
        (`cortex reindex` makes it).
        """
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_LIMIT:
            raise InvalidOptionError(f"k must be an integer from 1 to {MAX_LIMIT}, not {k!r}")
        anchor = self._store.get(memory_id, project=project)
        reason = self._semantic.unavailable()
        if reason is not None:
            raise EmbeddingError(f"similar memories are found by meaning: {reason}")
        model = self._semantic.model_id
        if self._pg:
            vector = self._store.vector_of(anchor.id, model)
        else:  # from the vector file, its row checked against SQLite's checksum
            vector = self._semantic.vector_of(anchor.id)
        if vector is None:
            raise NotFoundError(
                f"memory {anchor.id} has no embedding of {model}; run `cortex reindex`"
            )
        opts = Options(project=anchor.project, limit=k, record=False)
        if self._pg:  # pgvector, the wall and the filters in its SQL
            from cortex.pg import vectors as pg_vectors

            hits = pg_vectors.search(self._store, vector, model, opts, k + 1 + CANDIDATE_POOL)
            found = [(h.memory_id, h.score) for h in hits]
        else:
            allowed = self._store.allowed_ids(opts)
            if allowed is not None:
                allowed = allowed[allowed != anchor.id]
                if len(allowed) == 0:
                    return Results(query=None, mode="similar")
            index = self._semantic.index()
            want = min(len(index), k + 1 + CANDIDATE_POOL)
            if allowed is not None:
                want = min(want, len(allowed))
            ids, scores = self._semantic.verified_search(vector, want, allowed=allowed)
            found = [(int(i), float(c)) for i, c in zip(ids.tolist(), scores.tolist(), strict=True)]
        memories = self._store.get_many([i for i, _ in found])
        kept = [
            (memories[i], c)
            for i, c in found
            if i != anchor.id
            and i in memories
            and memories[i].deleted_at is None
            and memories[i].superseded_by is None
            and memories[i].project == anchor.project
        ][:k]
        extra = recall.enrichment(self._store, [m for m, _ in kept])
        out = [
            Result(
                memory=m,
                score=c,
                semantic_score=c,
                effective_confidence=m.confidence,
                snippet=m.content[:200] + ("…" if len(m.content) > 200 else ""),
                match_type=MatchType.SEMANTIC,
                source_session=extra.source_session.get(m.id),
                related_memory_count=extra.related.get(m.id, 0),
            )
            for m, c in kept
        ]
        return Results(out, query=None, mode="similar")

    def reinforce(self, ids: Sequence[int], amount: float = 0.02) -> None:
        """Raise the salience of memories that proved useful (seed 000: +0.02 a time, up to
        1.0): the one way reading feeds back into later rankings. A search does not
        reinforce what it returns unless asked (``Options(reinforce=...)``)."""
        if (
            isinstance(amount, bool)
            or not isinstance(amount, int | float)
            or not 0.0 <= amount <= 1.0
        ):
            raise InvalidOptionError(f"amount must be a number in [0, 1], not {amount!r}")
        wanted = list(dict.fromkeys(ids))
        for memory_id in wanted:  # in SQLite's rowid range: never an OverflowError
            validate.memory_id(memory_id)
        self.flush_recalls()
        found = self._store.get_many(wanted)
        missing = [i for i in wanted if i not in found]
        if missing:
            raise NotFoundError(f"no live memory with id {missing[0]}")
        recall.reinforce(self._store, wanted, float(amount))

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
        self.flush_recalls()
        return recall.timeline(self._store, anchor_id, before, after, project=project)

    def session_context(
        self, memory_id: int, *, project: str | None = None
    ) -> recall.SessionContext | None:
        """The latest session the memory took part in, and how."""
        self.flush_recalls()
        return recall.session_context(self._store, memory_id, project=project)


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
    more), "on" (built at the first search, which waits for it), "saved" (only the index
    file a build saved beside the database, when valid) or "off" (FTS5 only). Results are
    the same either way; see :mod:`cortex.keyword_index`.
    """
    where = db_location(path)
    store: Any
    if isinstance(where, str):  # a URL of a supported scheme
        if url_scheme(where) not in ("postgresql", "postgres"):
            raise StorageError(f"{url_scheme(where)}:// databases are not supported yet")
        try:
            from cortex.pg.store import PgStore
        except ImportError as exc:  # psycopg is an extra
            raise StorageError(
                f"PostgreSQL needs psycopg: pip install 'cortex-memory[postgres]' ({exc})"
            ) from None
        store = PgStore.open(where, read_only=read_only)
    else:
        store = Store.open(where, read_only=read_only)
    try:
        return Engine(store, embedder, keyword_index)
    except BaseException:
        store.close()
        raise
