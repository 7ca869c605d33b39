"""Keyword search on PostgreSQL: BM25 computed in SQL, with the FTS5 path's query language.

Ranking is Okapi BM25 with FTS5's constants (k1 = 1.2, b = 0.75, idf = ln((N - n + 0.5) /
(n + 0.5)), floored at 1e-6), not ``ts_rank_cd``:

* N and the average length come from ``keyword_stats`` (kept by triggers on write), of the
  project when the search is walled to one, else of every project;
* n, a term's document frequency, is counted when the query runs, from the GIN index
  (exact, and it costs writers nothing; a df table kept on write would be a hot row per
  common word for every concurrent writer);
* tf is the number of positions of the term in the document's ``tsvector``; the
  document's length is its word count (``doc_len``), as FTS5 counts it.

Queries follow :mod:`cortex.keyword`: plain words run as AND, then OR, then as prefixes
(stop words left out unless nothing else is left); FTS5 syntax — AND, OR, NOT, "phrase",
prefix*, parentheses, NEAR (as AND) and ``content:`` — is parsed here and mapped to a
``tsquery`` built from lexemes the server normalises; what FTS5 would reject is retried
as plain terms with a notice, never a server error. CJK text ranks as on SQLite, each
term weighed by its rarity and any term may be missing: runs of three characters or more
alone by FTS5's trigram BM25 (:func:`_trigram`, through the pg_trgm index), anything
else by BM25 over substring counts (:func:`_weighted`); plain text that matches nothing
falls back to LIKE, weighted the same way. Scores map onto [0, 1) with
:func:`cortex.keyword.bm25_to_score`. The plain-text AND and OR tiers are answered by
the in-memory index when one is built (:mod:`cortex.pg.keyword_index`): the same hits.

A phrase is ranked by the BM25 of its words (FTS5 ranks it as one term); it matches only
where its words are adjacent.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cortex.errors import StorageError
from cortex.filters import project_ids
from cortex.keyword import (
    STOPWORDS,
    Hit,
    KeywordResult,
    _cjk_terms,
    _excluded,
    _like_param,
    _terms,
    bm25_to_score,
    clean,
    quote,
    without_terms,
)
from cortex.options import Options, OrderBy
from cortex.pg import filters
from cortex.pg.keyword_index import PgKeywordIndex
from cortex.pg.store import PgStore, db_project, rank_info
from cortex.pg.text import exact_tokens, stemmed_tokens
from cortex.ranking import RANK_COLUMNS, RankInfo
from cortex.search.plan import DROPPED
from cortex.store import has_cjk

__all__ = ["K1", "B", "ParseError", "parse", "search", "share"]

K1 = 1.2
B = 0.75
_MIN_IDF = 1e-6
#: Terms scored per query (the first ones; every term still counts for matching).
MAX_SCORED = 32

Index = tuple[str, Callable[[str], list[str]]]

#: The indexes: (column, how a query's words become its terms).
STEMMED = ("tsv", stemmed_tokens)
EXACT = ("tsv_simple", exact_tokens)
#: A KeywordResult's rescore_table when the trigram tier ran (_trigram).
TRIGRAM = "trigram"

_SYNTAX = re.compile(r'["*()^]|\b(?:AND|OR|NOT|NEAR)\b|\w:')


# --------------------------------------------------------------------------- the parser


class ParseError(ValueError):
    """A query FTS5 would reject; the message says what is wrong, as FTS5's would."""


@dataclass(slots=True)
class Atom:
    text: str
    prefix: bool = False


@dataclass(slots=True)
class Node:
    op: str  # "and" | "or" | "not" (left AND NOT right)
    kids: list[Any] = field(default_factory=list)


_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"]|"")*")|(?P<word>[\w\x80-\U0010ffff]+)|(?P<punct>[()*:^,+]))',
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            if text[pos] == '"':
                raise ParseError("unterminated string")
            raise ParseError(f'syntax error near "{text[pos]}"')
        if m.group("str") is not None:
            out.append(("str", m.group("str")[1:-1].replace('""', '"')))
        elif m.group("word") is not None:
            out.append(("word", m.group("word")))
        else:
            out.append(("punct", m.group("punct")))
        pos = m.end()
    return out


def parse(text: str) -> Any:
    """The expression tree of an FTS5 query: Atom leaves under and/or/not nodes."""
    toks = _tokens(text)
    i = 0

    def peek() -> tuple[str, str] | None:
        return toks[i] if i < len(toks) else None

    def take() -> tuple[str, str]:
        nonlocal i
        tok = toks[i]
        i += 1
        return tok

    def is_op(tok: tuple[str, str] | None, name: str) -> bool:
        return tok is not None and tok == ("word", name)

    def primary() -> Any:
        tok = peek()
        if tok is None:
            raise ParseError("syntax error: the query ends where a term is expected")
        if tok == ("punct", "^"):
            take()
            return primary()
        if tok == ("punct", "("):
            take()
            node = expr()
            if peek() != ("punct", ")"):
                raise ParseError('syntax error: a "(" is not closed')
            take()
            return node
        if is_op(tok, "NEAR") and i + 1 < len(toks) and toks[i + 1] == ("punct", "("):
            take()
            take()
            kids = []
            while peek() is not None and peek() != ("punct", ")"):
                if peek() == ("punct", ","):
                    take()
                    nxt = take()
                    if nxt[0] != "word" or not nxt[1].isdigit():
                        raise ParseError("syntax error: NEAR's distance is a number")
                    continue
                kids.append(phrase())
            if peek() != ("punct", ")") or not kids:
                raise ParseError("syntax error in NEAR(...)")
            take()
            return Node("and", kids)
        if tok[0] == "word" and tok[1] in ("AND", "OR", "NOT"):
            raise ParseError(f'syntax error near "{tok[1]}"')
        if tok[0] == "word" and i + 1 < len(toks) and toks[i + 1] == ("punct", ":"):
            if tok[1].lower() != "content":
                raise ParseError(f"no such column: {tok[1]}")
            take()
            take()
            return primary()
        return phrase()

    def phrase() -> Atom:
        tok = take()
        if tok[0] not in ("word", "str"):
            raise ParseError(f'syntax error near "{tok[1]}"')
        atom = Atom(tok[1])
        while peek() == ("punct", "+"):
            take()
            nxt = take()
            if nxt[0] not in ("word", "str"):
                raise ParseError('syntax error near "+"')
            atom.text += " " + nxt[1]
        if peek() == ("punct", "*"):
            take()
            atom.prefix = True
        return atom

    def negation() -> Any:
        node = primary()
        while is_op(peek(), "NOT"):
            take()
            node = Node("not", [node, primary()])
        return node

    def conjunction() -> Any:
        kids = [negation()]
        while True:
            tok = peek()
            if tok is None or tok == ("punct", ")") or is_op(tok, "OR"):
                break
            if is_op(tok, "AND"):
                take()
            kids.append(negation())
        return kids[0] if len(kids) == 1 else Node("and", kids)

    def expr() -> Any:
        kids = [conjunction()]
        while is_op(peek(), "OR"):
            take()
            kids.append(conjunction())
        return kids[0] if len(kids) == 1 else Node("or", kids)

    tree = expr()
    if i != len(toks):
        raise ParseError(f'syntax error near "{toks[i][1]}"')
    return tree


def _atoms(tree: Any) -> list[Atom]:
    if isinstance(tree, Atom):
        return [tree]
    return [a for kid in tree.kids for a in _atoms(kid)]


def _positive(tree: Any) -> list[Atom]:
    """The atoms that count towards a match's score (not the right side of NOT)."""
    if isinstance(tree, Atom):
        return [tree]
    if tree.op == "not":
        return _positive(tree.kids[0])
    return [a for kid in tree.kids for a in _positive(kid)]


# --------------------------------------------------------------------------- tsquery


def _lit(lexeme: str) -> str:
    """One tsquery operand: the lexeme quoted as the tsquery input syntax wants it."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


@dataclass(slots=True)
class Compiled:
    tsquery: str  # "" when nothing is left to match
    terms: list[tuple[str, bool]]  # (lexeme, prefix) scored by BM25


def _normalise(atoms: list[Atom], tokens: Callable[[str], list[str]]) -> list[list[str]]:
    """The terms of each atom, in text order, as the index's tokenizer makes them."""
    return [tokens(a.text) for a in atoms]


def _compile(tree: Any, lexemes: dict[int, list[str]]) -> str:
    """The tsquery text of `tree`; "" for a branch with nothing to match."""
    if isinstance(tree, Atom):
        seq = lexemes.get(id(tree), [])
        if not seq:
            return ""
        parts = [_lit(x) for x in seq]
        if tree.prefix:
            parts[-1] += ":*"
        return parts[0] if len(parts) == 1 else "(" + " <-> ".join(parts) + ")"
    kids = [_compile(k, lexemes) for k in tree.kids]
    if tree.op == "not":
        left, right = kids
        if not left:
            return ""
        return f"({left} & !{right})" if right else left
    kept = [k for k in kids if k]
    if tree.op == "and" and len(kept) < len(kids):
        return ""  # an AND with an empty member can match nothing, as in FTS5
    if not kept:
        return ""
    joiner = " & " if tree.op == "and" else " | "
    return "(" + joiner.join(kept) + ")" if len(kept) > 1 else kept[0]


# --------------------------------------------------------------------------- BM25 in SQL


def _order_sql(opts: Options) -> str:
    if opts.order_by is OrderBy.RECENCY:
        return "m.created_at DESC, m.id DESC"
    if opts.order_by is OrderBy.CONFIDENCE:
        return "m.confidence DESC, score DESC, m.id"
    return "score DESC, m.id"


def _idf(n_docs: int, df: int) -> float:
    return max(_MIN_IDF, math.log((n_docs - df + 0.5) / (df + 0.5)))


@dataclass(slots=True)
class Ran:
    """The BM25 query a tier ran: enough to score other memories against it later."""

    column: str = ""
    match: str | None = None
    terms: list[tuple[str, bool]] = field(default_factory=list)
    bound: float = 0.0
    #: the scored terms' IDFs and the average length the search used (rescore reuses them)
    idf: list[float] = field(default_factory=list)
    avgdl: float = 1.0
    #: only whether a memory matches (holds): one EXISTS, no scores; hits are stand-ins
    exists_only: bool = False
    #: the query's words when the in-memory index answered (it rescores them too)
    words: list[str] | None = None


#: What an exists-only tier returns for "some memory matches" (never ranked or shown).
_SOME = Hit(0, 0.0, 0.0, RankInfo(0.0, 0.0, 0.0, None, None))


def _tf_columns(
    column: str, scored: list[tuple[str, bool]], operands: list[str]
) -> tuple[str, list[Any]]:
    """The select list of the scored terms' tf (``t0, t1, …``) and its parameters. A
    word's tf comes from ts_rank (one C call, see cortex_tf); a prefix's is the positions
    of every word it starts (ts_rank would blend them), counted over the unnested
    tsvector. `column` is one of the fixed tsvector columns (an identifier)."""
    tfs = ", ".join(
        f"(SELECT COALESCE(sum(cardinality(u.positions)), 0) FROM unnest(m.{column}) u"
        f" WHERE starts_with(u.lexeme, %s))::float8 AS t{i}"
        if prefix
        else f"cortex_tf(m.{column}, %s::tsquery) AS t{i}"
        for i, (_, prefix) in enumerate(scored)
    )
    params = [
        lexeme if prefix else operand
        for (lexeme, prefix), operand in zip(scored, operands, strict=False)
    ]
    return tfs, params


def _bm25(
    conn: Any,
    column: str,
    match: str | None,
    terms: list[tuple[str, bool]],
    opts: Options,
    pool: int,
    *,
    only: Sequence[int] | None = None,
    sink: Ran | None = None,
) -> list[tuple[Hit, bool]]:
    """Up to `pool` memories under the filters by BM25, with whether each holds every term.

    One scan: the memories of the collection (the project, when walled) holding any of
    `terms` get each term's tf; the terms' document frequencies are counted over that
    same set (a memory holding a term is in it), so nothing else is read. `match` (a
    tsquery) narrows the answer; None keeps every memory with a term, those holding all
    of them first (the plain-text AND tier, then its OR tier, from the one scan).
    """
    terms = list(dict.fromkeys(terms))
    if not terms:
        return []
    scored = terms[:MAX_SCORED]
    operands = [_lit(lexeme) + (":*" if prefix else "") for lexeme, prefix in terms]
    any_term = " | ".join(operands)
    projects = project_ids(opts)
    wall = " AND m.project_id = ANY(%s)" if projects is not None else ""
    wall_params = [[db_project(p) for p in projects]] if projects is not None else []
    predicate, fparams = filters.where(opts)
    if sink is not None and sink.exists_only:
        # the same admitted set as below (a term, live, the wall, the filters, `match`),
        # stopped at its first row: the unknown-name check of a hybrid search asks only
        # this, and scoring every memory holding a common word cost it a whole BM25 scan
        narrowed = f" AND m.{column} @@ %s::tsquery" if match is not None else ""
        found = conn.execute(
            f"SELECT EXISTS (SELECT 1 FROM memories m WHERE m.{column} @@ %s::tsquery"
            f" AND m.deleted_at IS NULL{wall} AND ({predicate}){narrowed})",
            [any_term, *wall_params, *fparams, *([match] if match is not None else [])],
        ).fetchone()[0]
        sink.column, sink.match, sink.terms = column, match, terms
        return [(_SOME, True)] if found else []
    tfs, tf_params = _tf_columns(column, scored, operands)
    dfs = ", ".join(f"count(*) FILTER (WHERE t{i} > 0) AS d{i}" for i in range(len(scored)))
    # The collection statistics (N and the average length, keyword_stats) are read by the
    # same statement (the CTE st): one round trip a search, not two.
    # IDFs once a statement (the CTE w), all in float8: numeric arithmetic (a bigint
    # plus a literal 0.5) on every matched row cost more than the tf itself (25 -> 11 ms
    # for 1,864 matches at 100k); the numbers are the same (exact in both).
    idf = (
        "GREATEST({min}::float8, ln((st.n - d.d{i}::float8 + 0.5::float8)"
        " / (d.d{i}::float8 + 0.5::float8)))"
    )
    idfs = ", ".join(f"{idf.format(min=_MIN_IDF, i=i)} AS i{i}" for i in range(len(scored)))
    norm = f"{K1}::float8 * (1::float8 - {B}::float8 + {B}::float8 * c.doc_len / w.avgdl)"
    score = " + ".join(
        f"w.i{i} * c.t{i} * {K1 + 1}::float8 / (c.t{i} + {norm})" for i in range(len(scored))
    )
    every = " AND ".join(f"c.t{i} > 0" for i in range(len(scored)))
    if len(scored) < len(terms):
        every = "false"  # unscored terms: no claim that a memory holds them all
    narrow = "c.matched" if match is not None else "true"
    if only is not None:
        narrow += " AND c.id = ANY(%s)"
    bound = " + ".join(f"w.i{i}" for i in range(len(scored)))
    order = _order_sql(opts).replace("m.", "c.")
    if match is None:
        order = f"every DESC, {order}"
    stats_wall = " WHERE project_id = ANY(%s)" if projects is not None else ""
    # The scan (c) carries only what scoring and ordering read; the columns a hit shows
    # are read for the `pool` best alone (the last join, by the primary key): carrying
    # them through the materialised scan and the sort of every match cost a third of the
    # statement (10.2 -> 6.2 ms for 3,486 matches at 100k).
    sql = (
        "WITH st AS (SELECT COALESCE(SUM(docs), 0)::float8 AS n, CASE WHEN COALESCE(SUM(docs),"
        " 0) > 0 THEN SUM(total_len)::float8 / SUM(docs)::float8 ELSE 1.0::float8 END AS avgdl"
        f" FROM keyword_stats{stats_wall}),"
        " c AS MATERIALIZED (SELECT m.project_id, m.id, m.doc_len, m.created_at, m.confidence,"
        f" ({predicate}) AS ok,"
        f" {'m.' + column + ' @@ %s::tsquery' if match is not None else 'true'} AS matched,"
        f" {tfs} FROM memories m WHERE m.{column} @@ %s::tsquery AND m.deleted_at IS NULL"
        f"{wall}), d AS (SELECT {dfs} FROM c),"
        f" w AS (SELECT {idfs}, st.avgdl FROM d, st),"
        f" top AS (SELECT c.project_id, c.id, c.created_at, c.confidence, {score} AS score,"
        f" ({every}) AS every, {bound} AS bound,"
        f" ARRAY[{', '.join(f'w.i{i}' for i in range(len(scored)))}]::float8[] AS idfs,"
        f" w.avgdl FROM c, w WHERE c.ok AND {narrow} ORDER BY {order} LIMIT %s)"
        " SELECT c.id, c.score, c.every, c.bound, c.idfs, c.avgdl, m.created_at, m.confidence,"
        " m.salience, m.sector, m.source_path, m.superseded_by IS NOT NULL, m.project_id,"
        " m.category FROM top c JOIN memories m ON m.project_id = c.project_id AND m.id = c.id"
        f" ORDER BY {order}"
    )
    params = [
        *wall_params,
        *fparams,
        *([match] if match is not None else []),
        *tf_params,
        any_term,
        *wall_params,
        *([sorted({int(i) for i in only})] if only is not None else []),
        pool if only is None else len(only),
    ]
    # Prepared on first use (psycopg keeps it per connection): the statement's text
    # repeats (it varies only by the number of terms, the column and the filters), and
    # planning it each time cost 0.4-2.5 ms of its 2.5-9 ms at 100k (psycopg prepares
    # on its own only from a text's fifth run on one connection of the pool).
    rows = conn.execute(sql, params, prepare=True).fetchall()
    if sink is not None:
        sink.column, sink.match, sink.terms = column, match, terms
        sink.bound = float(rows[0][3]) if rows else sink.bound
        sink.idf = [float(x) for x in rows[0][4]] if rows else []
        sink.avgdl = float(rows[0][5]) if rows else 1.0
    return [
        (Hit(int(i), bm25_to_score(-float(s)), float(s), rank_info(rest)), bool(every))
        for i, s, every, _, _, _, *rest in rows
    ]


def _bm25_of(
    conn: Any,
    column: str,
    match: str | None,
    terms: list[tuple[str, bool]],
    idf: list[float],
    avgdl: float,
    opts: Options,
    ids: Sequence[int],
) -> dict[int, float]:
    """BM25 of the memories `ids` against a query that ran (:func:`_bm25` with `only`),
    from the IDFs and average length that search computed: the same numbers, reading
    only these memories (by id) instead of every memory holding a term again."""
    terms = list(dict.fromkeys(terms))
    scored = terms[: len(idf)]
    if not scored:
        return {}
    operands = [_lit(lexeme) + (":*" if prefix else "") for lexeme, prefix in terms]
    projects = project_ids(opts)
    wall = " AND m.project_id = ANY(%s)" if projects is not None else ""
    wall_params = [[db_project(p) for p in projects]] if projects is not None else []
    predicate, fparams = filters.where(opts)
    tfs, tf_params = _tf_columns(column, scored, operands)
    norm = f"{K1} * (1 - {B} + {B} * c.doc_len / %s::float8)"
    score = " + ".join(
        f"%s::float8 * c.t{i} * {K1 + 1} / (c.t{i} + {norm})" for i in range(len(scored))
    )
    score_params: list[Any] = []
    for value in idf[: len(scored)]:
        score_params += [value, avgdl]
    matched = f" AND m.{column} @@ %s::tsquery" if match is not None else ""
    sql = (
        f"SELECT c.id, {score} FROM (SELECT m.id, m.doc_len, {tfs} FROM memories m"
        f" WHERE m.id = ANY(%s) AND m.deleted_at IS NULL{wall}"
        f" AND m.{column} @@ %s::tsquery{matched} AND {predicate}) c"
    )
    params = [
        *score_params,
        *tf_params,
        sorted({int(i) for i in ids}),
        *wall_params,
        " | ".join(operands),
        *([match] if match is not None else []),
        *fparams,
    ]
    rows = conn.execute(sql, params, prepare=True).fetchall()
    return {int(i): float(s) for i, s in rows}


# --------------------------------------------------------------------------- tiers


def holds(store: PgStore, word: str, opts: Options) -> bool:
    """Whether a memory under `opts`'s filters holds `word` as a word or a word's prefix:
    the index tiers of a search, never its substring scan (as
    :func:`cortex.keyword.holds`; the hybrid search's unknown-name check). CJK text asks
    the CJK tier (:func:`_cjk`), not the last tier's bigrams, as on SQLite."""
    text = clean(word)
    if not text:
        return False
    import psycopg

    try:
        with store.db.reads() as conn:
            if has_cjk(text):
                return bool(_cjk(store, conn, text, opts, 1).hits)
            return bool(_latin(store, conn, text, opts, 1, Ran(exists_only=True)).hits)
    except psycopg.Error:
        return True  # not an answer either way: never discount on a failed check


def search(
    store: PgStore, query: str, opts: Options, pool: int, native: PgKeywordIndex | None = None
) -> KeywordResult:
    """Up to `pool` keyword hits for `query` under `opts`'s filters, best first (the same
    tiers and result as :func:`cortex.keyword.search`). `native`: the in-memory index,
    which answers the plain-text tiers when it can (the same hits and scores)."""
    text = clean(query)
    if not text:
        return KeywordResult(notices=["the query is empty"])
    import psycopg

    try:
        with store.db.reads() as conn:
            ran = Ran()
            if has_cjk(text):
                result = _cjk(store, conn, text, opts, pool)
            else:
                result = _latin(store, conn, text, opts, pool, ran, native)
                if ran.column:
                    result.bound = ran.bound
                    result.rescore_table = ran.column
                    result.rescore_expression = json.dumps(
                        {
                            "match": ran.match,
                            "terms": [list(t) for t in ran.terms],
                            "idf": ran.idf,
                            "avgdl": ran.avgdl,
                            **({"words": ran.words} if ran.words is not None else {}),
                            # the wall the statistics are of (share() counts in it)
                            "projects": _wall_projects(opts),
                        }
                    )
            if not result.hits and not result.final:
                fallback = _like(conn, text, opts, pool, indexed=has_cjk(text))
                if fallback.hits:
                    fallback.notices = [
                        *result.notices,
                        "no full-text match; showing memories that contain the terms as substrings",
                    ]
                    return fallback
            return result
    except psycopg.Error as exc:
        raise StorageError(store.db.explain(exc)) from None


def _run(
    store: PgStore,
    conn: Any,
    tree: Any,
    index: Index,
    opts: Options,
    pool: int,
    *,
    plain: bool = False,
    sink: Ran | None = None,
) -> tuple[list[tuple[Hit, bool]], str]:
    """Compile `tree` on `index` (column, tokenizer) and rank its matches; `plain`: the
    OR of plain words, those holding every word first (the AND and OR tiers at once)."""
    column, tokens = index
    atoms = _atoms(tree)
    lexemes = dict(zip((id(a) for a in atoms), _normalise(atoms, tokens), strict=True))
    tsquery = _compile(tree, lexemes)
    if not tsquery:
        return [], ""
    terms: list[tuple[str, bool]] = []
    for atom in _positive(tree):
        seq = lexemes.get(id(atom), [])
        terms += [(lex, atom.prefix and k == len(seq) - 1) for k, lex in enumerate(seq)]
    rows = _bm25(conn, column, None if plain else tsquery, terms, opts, pool, sink=sink)
    return rows, tsquery


def _latin(
    store: PgStore,
    conn: Any,
    text: str,
    opts: Options,
    pool: int,
    ran: Ran,
    native: PgKeywordIndex | None = None,
) -> KeywordResult:
    terms = _terms(text)
    notices: list[str] = []
    if _SYNTAX.search(text):
        try:
            tree = parse(text)
        except ParseError as exc:
            excluded = _excluded(text)
            if excluded:  # as the SQLite tier: the NOT kept, its words never required
                return _without(store, conn, text, opts, pool, ran, excluded, str(exc))
            if not terms:
                return KeywordResult(
                    notices=[f"not a valid FTS5 query ({exc}) and no words to search for"],
                    final=True,
                )
            notices.append(f"not a valid FTS5 query ({exc}); searched for the quoted terms instead")
        else:
            index = EXACT if "*" in text else STEMMED
            rows, _ = _run(store, conn, tree, index, opts, pool, sink=ran)
            hits = [h for h, _ in rows]
            return KeywordResult(hits, "fts", text, None, [], terms, final=True)
    elif not terms:
        return KeywordResult(notices=["the query holds no words to search for"], final=True)
    # As the SQLite tier: stop, question and first-person words left out unless nothing
    # else is left.
    terms = (
        [t for t in terms if t not in DROPPED] or [t for t in terms if t not in STOPWORDS] or terms
    )
    quoted = [quote(t) for t in terms]
    if any(len(STEMMED[1](t)) > 1 for t in terms):
        # A compound (REPORTING_DSN, cert-manager) is one quoted term: a phrase of its
        # parts, as in FTS5, not an OR of them (the plain scan's words).
        tier_expr = " ".join(quoted)
        rows, _ = _run(
            store, conn, Node("and", [Atom(t) for t in terms]), STEMMED, opts, pool, sink=ran
        )
        if not rows and len(terms) > 1:
            tier_expr = " OR ".join(quoted)
            rows, _ = _run(
                store, conn, Node("or", [Atom(t) for t in terms]), STEMMED, opts, pool,
                sink=ran,
            )  # fmt: skip
        hits = [h for h, _ in rows]
    elif (answered := _native_plain(store, native, terms, opts, pool, ran)) is not None:
        hits, every = answered
        tier_expr = " ".join(quoted) if every else " OR ".join(quoted)
    else:
        # One scan answers both plain tiers: the memories holding every word come first.
        rows, _ = _run(
            store, conn, Node("or", [Atom(t) for t in terms]), STEMMED, opts, pool, plain=True,
            sink=ran,
        )  # fmt: skip
        hits = [h for h, every in rows if every]
        if hits or len(terms) == 1:
            tier_expr = " ".join(quoted)
            hits = hits or [h for h, _ in rows]
        else:
            tier_expr = " OR ".join(quoted)
            hits = [h for h, _ in rows]
    if hits:
        return KeywordResult(hits, "fts", tier_expr, tier_expr, notices, terms)
    prefix_expr = " OR ".join(q + "*" for q in quoted)
    rows, _ = _run(
        store, conn, Node("or", [Atom(t, prefix=True) for t in terms]), EXACT, opts, pool,
        sink=ran,
    )  # fmt: skip
    hits = [h for h, _ in rows]
    return KeywordResult(
        hits, "prefix" if hits else "none", prefix_expr, prefix_expr, notices, terms
    )


def _without(
    store: PgStore,
    conn: Any,
    text: str,
    opts: Options,
    pool: int,
    ran: Ran,
    excluded: list[str],
    message: str,
) -> KeywordResult:
    """cortex.keyword._without on PostgreSQL: the words an invalid query asks for (all,
    then any), without the words its NOT excludes."""
    terms, notices = without_terms(text, excluded, message)
    if not terms:
        return KeywordResult(notices=notices, final=True)
    quoted = [quote(t) for t in terms]
    without = " NOT (" + " OR ".join(quote(t) for t in excluded) + ")"
    rows: list[tuple[Hit, bool]] = []
    expression = ""
    for op in ("and", "or") if len(terms) > 1 else ("and",):
        asked = Node(op, [Atom(t) for t in terms])
        tree = Node("not", [asked, Node("or", [Atom(t) for t in excluded])])
        rows, _ = _run(store, conn, tree, STEMMED, opts, pool, sink=ran)
        expression = "(" + (" " if op == "and" else " OR ").join(quoted) + ")" + without
        if rows:
            break
    hits = [h for h, _ in rows]
    return KeywordResult(
        hits, "fts" if hits else "none", expression, expression, notices, terms, final=True
    )


#: The in-memory index is asked for the pool, then PREFILTER times more while the
#: filters (superseded memories above all) leave it short; past NATIVE_MAX_FETCH, SQL.
PREFILTER = 4
NATIVE_MAX_FETCH = 8192


def _native_plain(
    store: PgStore,
    native: PgKeywordIndex | None,
    terms: list[str],
    opts: Options,
    pool: int,
    ran: Ran,
) -> tuple[list[Hit], bool] | None:
    """The plain-text AND tier, then its OR tier, from the in-memory index: (hits,
    whether they hold every word); None when SQL must answer. The filters are applied in
    SQL over the index's best rows only (by primary key), fetching deeper while they leave
    the pool short. `ran` gets what the SQL tier would have given it (the terms, IDFs,
    average length and bound), so rescoring works either way."""
    if native is None or opts.order_by is not OrderBy.RELEVANCE or len(terms) > MAX_SCORED:
        return None
    projects = project_ids(opts)
    scope = None if projects is None else [db_project(p) for p in projects]
    predicate, fparams = filters.where(opts)

    def admit(ids: list[int]) -> tuple[str, list[Any]]:
        """The rank columns of those of `ids` that pass the filters (filters.admitted)."""
        return (
            f"SELECT m.id, {RANK_COLUMNS} FROM memories m WHERE m.id = ANY(%s) AND {predicate}",
            [ids, *fparams],
        )

    hits: list[Hit] = []
    sync = True
    every = True
    for require_all in (True, False) if len(terms) > 1 else (True,):
        every = require_all
        fetch = pool
        while True:
            if sync:  # the log is read in the same round trip as the filters (usually)
                checked = native.search_checked(
                    terms, fetch, require_all=require_all, projects=scope, then=admit
                )
                if checked is None:
                    return None
                ids, bm25, rows = checked
                info = {int(r[0]): rank_info(r[1:]) for r in rows}
            else:
                found = native.search(terms, fetch, require_all=require_all, projects=scope,
                                      sync=False)  # fmt: skip
                if found is None:
                    return None
                ids, bm25 = found
                info = filters.admitted(store, ids.tolist(), opts) if len(ids) else {}
            sync = False
            hits = [
                Hit(i, bm25_to_score(-r), r, info[i])
                for i, r in zip(ids.tolist(), bm25.tolist(), strict=True)
                if i in info
            ]
            if len(hits) >= pool or len(ids) < fetch:
                break
            fetch *= PREFILTER
            if fetch > NATIVE_MAX_FETCH:
                return None  # a filter that rejects most matches: SQL applies it in the scan
        if hits:
            break
    if not hits:  # the prefix tier next (SQL), which sets `ran` itself
        return [], every
    stats = native.statistics(terms, scope)
    if stats is None:
        return None
    docs, tokens, dfs = stats
    ran.column, ran.match = STEMMED[0], None
    ran.terms = [(term, False) for term, _ in dfs]
    ran.idf = [_idf(docs, df) for _, df in dfs]
    ran.avgdl = tokens / docs if docs else 1.0
    ran.bound = sum(ran.idf)
    ran.words = list(terms)
    return hits[:pool], every


def _wall_sql(opts: Options) -> tuple[str, list[Any]]:
    """The live memories of the searched projects (a project is a wall), else all."""
    projects = project_ids(opts)
    if projects is None:
        return "m.deleted_at IS NULL", []
    return "m.deleted_at IS NULL AND m.project_id = ANY(%s)", [[db_project(p) for p in projects]]


def holding(
    store: PgStore, ids: Sequence[int], excluded: Sequence[str], phrases: Sequence[str]
) -> set[int]:
    """cortex.store.Store.holding on PostgreSQL: those of `ids` that hold none of
    `excluded` and every one of `phrases` (as a substring, and for text without CJK also
    as the stemmed index reads it)."""
    import psycopg

    keep = {int(i) for i in ids}
    if not keep:
        return keep

    def found(text: str) -> set[int]:
        where, params = "strpos(lower(m.content), lower(%s)) > 0", [text]
        lexemes = [] if has_cjk(text) else STEMMED[1](text)
        if lexemes:
            phrase = " <-> ".join(_lit(x) for x in lexemes)
            where, params = f"({where} OR m.tsv @@ %s::tsquery)", [text, phrase]
        rows = conn.execute(
            f"SELECT m.id FROM memories m WHERE m.id = ANY(%s) AND {where}",
            [sorted(keep), *params],
        ).fetchall()
        return {int(r[0]) for r in rows}

    try:
        with store.db.reads() as conn:
            for text in excluded:
                keep -= found(text)
            for text in phrases:
                keep &= found(text)
    except psycopg.Error as exc:
        raise StorageError(store.db.explain(exc)) from None
    return keep


def _holds_sql(term: str) -> tuple[str, list[Any]]:
    """Whether memory ``m`` holds `term` as the SQLite backend's index tiers find it
    (cortex.keyword._holders): CJK text as a substring of a memory with CJK text (the
    trigram index: a FTS5 trigram phrase matches what ILIKE does), a Latin word as a
    word or a word's prefix (``deploy`` holds in "Deployed"), in the unstemmed index."""
    if has_cjk(term):
        return "(m.has_cjk AND m.content ILIKE %s)", [_like_param(term)]
    parts = [_lit(x) for x in exact_tokens(term)]
    if not parts:
        return "false", []
    parts[-1] += ":*"
    query = parts[0] if len(parts) == 1 else "(" + " <-> ".join(parts) + ")"
    return "m.tsv_simple @@ %s::tsquery", [query]


def _substring_score(
    terms: Sequence[str], idfs: Sequence[float], mean: float
) -> tuple[str, list[Any]]:
    """The substring BM25 of memory ``m`` (cortex.keyword._weighted_sql): each term's
    count in the content (non-overlapping, case folded), saturated by k1 and normalised
    by the memory's length in characters against `mean`, weighed by its IDF."""
    parts: list[str] = []
    params: list[Any] = []
    for term, idf in zip(terms, idfs, strict=True):
        count = (
            "((length(m.content) - length(replace(lower(m.content), %s, '')))::float8 / %s::float8)"
        )
        parts.append(
            f"%s::float8 * {count} * {K1 + 1}::float8 / ({count} + {K1}::float8"
            f" * ({1 - B}::float8 + {B}::float8 * length(m.content) / %s::float8))"
        )
        low = term.lower()
        params += [idf, low, len(term), low, len(term), max(mean, 1.0)]
    return " + ".join(parts), params


def _idf_sql(i: int) -> str:
    """FTS5's IDF of term `i` (its holders ``s.d{i}`` of ``s.n`` rows), clamp included,
    as cortex.keyword._idf computes it."""
    held = f"LEAST(GREATEST(s.d{i}, 0), s.n)::float8"
    return (
        f"GREATEST(CASE WHEN s.n > 0 THEN ln((s.n::float8 - {held} + 0.5::float8)"
        f" / ({held} + 0.5::float8)) ELSE 0::float8 END, {_MIN_IDF}::float8) AS i{i}"
    )


def _ranked(
    conn: Any,
    terms: Sequence[str],
    opts: Options,
    pool: int,
    *,
    rows: str,
    rows_params: list[Any],
    holds: list[tuple[str, list[Any]]],
    stats: str,
    stats_params: list[Any],
    tf: Callable[[int], tuple[str, list[Any]]],
    norm: str,
) -> tuple[list[Hit], list[float], float]:
    """One statement, one scan: the memories `rows` (an SQL condition on ``m``) with
    whether each holds each term (`holds`), the collection statistics over them
    (`stats`: the select list of ``n`` and ``mean`` over CTE ``a``), the IDFs, and the
    best `pool` under the filters by BM25 with `tf(i)` (over ``m``) and the length
    normaliser `norm` (over ``m`` and ``w.mean``). Returns (hits, IDFs, mean); no
    hits: no IDFs either."""
    predicate, fparams = filters.where(opts)
    flags = ", ".join(f"({c}) AS h{i}" for i, (c, _) in enumerate(holds))
    flag_params = [p for _, ps in holds for p in ps]
    dfs = ", ".join(f"count(*) FILTER (WHERE a.h{i}) AS d{i}" for i in range(len(terms)))
    idfs = ", ".join(_idf_sql(i) for i in range(len(terms)))
    score_parts: list[str] = []
    score_params: list[Any] = []
    for i in range(len(terms)):
        f, p = tf(i)
        score_parts.append(
            f"CASE WHEN a.h{i} THEN w.i{i} * {f} * {K1 + 1}::float8 / ({f} + {K1}::float8"
            f" * ({1 - B}::float8 + {B}::float8 * {norm})) ELSE 0::float8 END"
        )
        score_params += [*p, *p]
    any_held = " OR ".join(f"a.h{i}" for i in range(len(terms)))
    order = _order_sql(opts).replace("score", "r").replace("m.", "a.")
    # `a` carries the content of the memories holding a term only (the others count for
    # the statistics alone), so scoring reads no row twice
    held = ", ".join(f"x.h{i}" for i in range(len(terms)))
    # (OFFSET 0: the subquery is not flattened, so each term's test runs once a row)
    sql = (
        f"WITH a AS MATERIALIZED (SELECT x.id, x.ok, {held},"
        f" x.len, x.created_at, x.confidence, CASE WHEN {any_held.replace('a.', 'x.')}"
        f" THEN x.content END AS content FROM (SELECT m.id, ({predicate}) AS ok, {flags},"
        f" length(m.content) AS len, m.created_at, m.confidence, m.content"
        f" FROM memories m WHERE {rows} OFFSET 0) x),"
        f" s AS (SELECT {stats}, {dfs} FROM a),"
        f" w AS (SELECT {idfs}, s.mean FROM s),"
        f" top AS (SELECT a.id, {' + '.join(score_parts)} AS r, a.created_at, a.confidence"
        f" FROM a, w WHERE a.ok AND ({any_held}) ORDER BY {order} LIMIT %s)"
        f" SELECT m.id, a.r, ARRAY[{', '.join(f'w.i{i}' for i in range(len(terms)))}],"
        f" w.mean, {RANK_COLUMNS} FROM top a JOIN memories m ON m.id = a.id, w"
        f" ORDER BY {order}"
    )
    params = [
        *fparams, *flag_params, *rows_params, *stats_params, *score_params, pool,
    ]  # fmt: skip
    found = conn.execute(sql, params).fetchall()
    hits = [
        Hit(int(i), bm25_to_score(-float(r)), float(r), rank_info(rest))
        for i, r, _, _, *rest in found
    ]
    if not found:
        return [], [], 1.0
    return hits, [float(x) for x in found[0][2]], float(found[0][3] or 1.0)


def _weighted(
    conn: Any, terms: Sequence[str], opts: Options, pool: int, *, indexed: bool
) -> KeywordResult:
    """Memories holding any of `terms` as a substring, ranked by a BM25 over substrings,
    as the SQLite backend's :func:`cortex.keyword._weighted` ranks them: each term weighs
    its IDF over the live memories of the wall (a rare term outweighs common ones), its
    count saturates and is normalised by the memory's length in characters against the
    mean length of the memories ranked. `indexed` (CJK text): the memories holding a
    term are those the indexes find (:func:`_holds_sql`), else every memory holding
    it as a substring (the LIKE fallback of plain text). One statement, one scan."""
    wall, wall_params = _wall_sql(opts)
    holds = [_holds_sql(t) if indexed else ("m.content ILIKE %s", [_like_param(t)]) for t in terms]
    if indexed:  # N: the wall's live memories (keyword_stats); the mean: of the holders
        among = " OR ".join(c for c, _ in holds)
        rows, rows_params = (
            f"{wall} AND ({among})",
            [*wall_params, *(p for _, ps in holds for p in ps)],
        )
        projects = project_ids(opts)
        stats = (
            "(SELECT COALESCE(sum(docs), 0) FROM keyword_stats"
            + (" WHERE project_id = ANY(%s)" if projects is not None else "")
            + ") AS n, avg(a.len) AS mean"
        )
        stats_params = [[db_project(p) for p in projects]] if projects is not None else []
    else:  # the LIKE fallback: N and the mean of every live memory of the wall
        rows, rows_params = wall, list(wall_params)
        stats, stats_params = "count(*) AS n, avg(a.len) AS mean", []
    lowered = [t.lower() for t in terms]

    def tf(i: int) -> tuple[str, list[Any]]:
        return (
            "((length(a.content) - length(replace(lower(a.content), %s, '')))::float8"
            " / %s::float8)",
            [lowered[i], len(terms[i])],
        )

    hits, idfs, mean = _ranked(
        conn, terms, opts, pool, rows=rows, rows_params=rows_params, holds=holds,
        stats=stats, stats_params=stats_params, tf=tf,
        norm="a.len::float8 / GREATEST(w.mean, 1)::float8",
    )  # fmt: skip
    if not hits:
        return KeywordResult(terms=list(terms))
    return KeywordResult(
        hits, "like", None, None, [], list(terms), bound=sum(idfs),
        weights=(tuple(terms), tuple(idfs), mean),
    )  # fmt: skip


def _overlaps(term: str) -> str:
    """A regular expression whose matches are the (overlapping) occurrences of `term`."""
    return "(?=" + re.escape(term.lower()) + ")"


def _trigram_score(
    terms: Sequence[str], idfs: Sequence[float], avgdl: float
) -> tuple[str, list[Any]]:
    """FTS5's BM25 of memory ``m`` in the trigram index (cortex.keyword's TRIGRAM table):
    a term is a phrase of trigrams, its tf the number of places it occurs (overlapping),
    and a memory's length its number of trigrams (characters - 2)."""
    parts: list[str] = []
    params: list[Any] = []
    dl = "greatest(length(m.content) - 2, 0)::float8"
    for idf, term in zip(idfs, terms, strict=True):
        tf = "regexp_count(lower(m.content), %s)::float8"
        parts.append(
            f"%s::float8 * {tf} * {K1 + 1}::float8 / ({tf} + {K1}::float8"
            f" * ({1 - B}::float8 + {B}::float8 * {dl} / %s::float8))"
        )
        params += [idf, _overlaps(term), _overlaps(term), avgdl]
    return " + ".join(parts), params


def _trigram(conn: Any, terms: list[str], opts: Options, pool: int) -> KeywordResult:
    """CJK runs of three or more characters alone: the OR of their phrases, ranked by the
    BM25 the SQLite backend's trigram index gives them (N, lengths and document
    frequencies over the live memories with CJK text of the wall). One statement."""
    wall, wall_params = _wall_sql(opts)
    holds: list[tuple[str, list[Any]]] = [("m.content ILIKE %s", [_like_param(t)]) for t in terms]

    def tf(i: int) -> tuple[str, list[Any]]:
        return "regexp_count(lower(a.content), %s)::float8", [_overlaps(terms[i])]

    hits, idfs, avgdl = _ranked(
        conn, terms, opts, pool, rows=f"m.has_cjk AND {wall}", rows_params=list(wall_params),
        holds=holds, stats="count(*) AS n, avg(greatest(a.len - 2, 0)) AS mean", stats_params=[],
        tf=tf, norm="greatest(a.len - 2, 0)::float8 / w.mean::float8",
    )  # fmt: skip
    expression = " OR ".join(quote(t) for t in terms)
    if not hits:
        return KeywordResult(tier="none", rewritten=expression, terms=list(terms))
    return KeywordResult(
        hits, "trigram", None, expression, [], list(terms), bound=sum(idfs),
        rescore_table=TRIGRAM,
        rescore_expression=json.dumps({"terms": list(terms), "idf": idfs, "avgdl": avgdl}),
    )  # fmt: skip


def _cjk(store: PgStore, conn: Any, text: str, opts: Options, pool: int) -> KeywordResult:
    """CJK and mixed-script text, as the SQLite backend's :func:`cortex.keyword._cjk`:
    every term may be missing, a memory ranks by how much of the query's weight it holds.
    CJK runs of three or more characters alone: :func:`_trigram`; otherwise substrings
    weighted by rarity (:func:`_weighted`)."""
    everything = _cjk_terms(text, bigrams=False)
    terms = [t for t in everything if t not in DROPPED] or everything
    if not terms:
        return KeywordResult(notices=["the query holds no words to search for"])
    if all(len(t) >= 3 and has_cjk(t) for t in terms):
        return _trigram(conn, terms, opts, pool)
    return _weighted(conn, terms, opts, pool, indexed=True)


def _like(
    conn: Any, text: str, opts: Options, pool: int, *, indexed: bool = False
) -> KeywordResult:
    """The last tier: CJK runs as bigrams and Latin words as substrings, weighted by
    rarity (:func:`_weighted`). Stop and question words are left out, as on SQLite:
    they are substrings of everything ("our" of "hours", "the" of "then"). `indexed`
    (CJK text): the memories holding them are found through the indexes."""
    terms = [t for t in _cjk_terms(text, bigrams=True) if t not in DROPPED]
    if not terms:
        return KeywordResult()
    return _weighted(conn, terms, opts, pool, indexed=indexed)


def _rescore_weighted(
    conn: Any, result: KeywordResult, ids: Sequence[int], opts: Options
) -> dict[int, float]:
    """The substring (or trigram) BM25 of each memory among `ids` holding any term, as
    the tier that ran scored its own hits."""
    wall, wall_params = _wall_sql(opts)
    wanted = sorted({int(i) for i in ids})
    if result.weights is not None:
        terms, idfs, mean = result.weights
        score, score_params = _substring_score(terms, idfs, mean)
        rows = conn.execute(
            f"SELECT m.id, {score} FROM memories m WHERE m.id = ANY(%s) AND {wall}",
            [*score_params, wanted, *wall_params],
        ).fetchall()
    else:
        spec = json.loads(result.rescore_expression or "{}")
        phrases = [str(t) for t in spec["terms"]]
        score, score_params = _trigram_score(
            phrases, [float(x) for x in spec["idf"]], float(spec["avgdl"])
        )
        any_term = " OR ".join("m.content ILIKE %s" for _ in phrases)
        rows = conn.execute(
            f"SELECT m.id, {score} FROM memories m WHERE m.id = ANY(%s) AND m.has_cjk"
            f" AND ({any_term}) AND {wall}",
            [*score_params, wanted, *(_like_param(t) for t in phrases), *wall_params],
        ).fetchall()
    return {int(i): float(r) for i, r in rows if r is not None and r > 0}


def _wall_projects(opts: Options) -> list[str] | None:
    """The searched projects as the database names them (None: every project)."""
    projects = project_ids(opts)
    return None if projects is None else [db_project(p) for p in projects]


def share(store: PgStore, found: KeywordResult, words: Sequence[str]) -> float | None:
    """The share of the query's keyword weight (the sum of its scored terms' IDFs: the
    bound; when nothing matched, the same sum over the query's terms) that the terms of
    `words` carry, under the statistics the search used: its index (stemmed or exact),
    its IDFs, of its projects (:func:`cortex.keyword.share`, the same number on the same
    memories). The weighted substring tiers (CJK) weigh their own terms. None when the
    query has no weight to share."""
    if found.weights is not None:
        terms, idfs, _ = found.weights
        total = sum(idfs)
        named = {
            t.lower()
            for w in words
            for t in (
                [*_cjk_terms(w, bigrams=False), *_cjk_terms(w, bigrams=True)]
                if has_cjk(w)
                else _terms(w)
            )
        }
        weight = sum(i for t, i in zip(terms, idfs, strict=True) if t.lower() in named)
        return min(1.0, weight / total) if total > 0 else None
    if not found.rescore_table or not found.rescore_expression:
        return None
    spec = json.loads(found.rescore_expression)
    column = str(found.rescore_table)
    tokens = stemmed_tokens if column == STEMMED[0] else exact_tokens
    scored = spec.get("idf") or []
    known = {str(t[0]): float(i) for t, i in zip(spec["terms"], scored, strict=False)}
    mine = list(dict.fromkeys(lex for w in words for lex in tokens(w)))
    query = list(dict.fromkeys(str(t[0]) for t in spec["terms"]))
    wanted = [lex for lex in dict.fromkeys(mine + query) if lex not in known]
    if wanted:
        import psycopg

        try:
            with store.db.reads() as conn:
                known.update(_idfs(conn, column, wanted, spec.get("projects")))
        except psycopg.Error as exc:
            raise StorageError(store.db.explain(exc)) from None
    bound = found.bound if found.bound > 0 else sum(known.get(t, 0.0) for t in query)
    if bound <= 0:
        return None
    return min(1.0, sum(known.get(t, 0.0) for t in mine) / bound)


def near(store: PgStore, words: Sequence[str], opts: Options) -> set[str]:
    """The `words` (held by no memory under `opts`'s filters) one edit from a word a
    memory there holds ("terrafrom", "kafak"): misspellings, not names (the hybrid
    search's rare-word check; cortex.suggest.corrections on SQLite, which also tries two
    edits on words of suggest.LONG_WORD letters or more). One query per word, an OR of
    its edits over the exact index."""
    from cortex import commonness, suggest

    wall, params = _wall_sql(opts)
    found: set[str] = set()
    for word in words:
        w = word.lower()
        if len(w) < suggest.MIN_WORD or not (w.isalpha() and w.isascii()):
            continue
        query = " | ".join(_lit(e) for e in sorted(commonness.one_edit(w)))
        row = store.query(
            f"SELECT 1 FROM memories m WHERE {wall} AND m.tsv_simple @@ %s::tsquery LIMIT 1",
            [*params, query],
        )
        if row:
            found.add(word)
    return found


def _idfs(
    conn: Any, column: str, lexemes: Sequence[str], projects: Sequence[str] | None
) -> dict[str, float]:
    """Each lexeme's IDF in `column` over the live memories of `projects` (None: all), as
    a search computes it: N from keyword_stats, the document frequency counted. One
    statement: a document count per lexeme (each through the column's index)."""
    wall = " AND m.project_id = ANY(%s)" if projects is not None else ""
    stats_wall = " WHERE project_id = ANY(%s)" if projects is not None else ""
    wall_params = [list(projects)] if projects is not None else []
    rows = conn.execute(
        f"SELECT (SELECT COALESCE(SUM(docs), 0) FROM keyword_stats{stats_wall}), q.i,"
        f" (SELECT count(*) FROM memories m WHERE m.{column} @@ q.tsq"
        f" AND m.deleted_at IS NULL{wall})"
        " FROM unnest(%s::tsquery[]) WITH ORDINALITY AS q(tsq, i)",
        [*wall_params, *wall_params, [_lit(lex) for lex in lexemes]],
    ).fetchall()
    return {lexemes[int(i) - 1]: _idf(int(n), int(df)) for n, i, df in rows}


def rescore(
    store: PgStore,
    result: KeywordResult,
    ids: Sequence[int],
    opts: Options,
    native: PgKeywordIndex | None = None,
) -> dict[int, float]:
    """BM25 (``raw``) of each memory among `ids` that the query that ran matches: the
    keyword score of memories the other leg found. Filters are the caller's (`ids`
    passed them); the collection statistics are the same as the search's (the
    in-memory index's when it answered the search: the same numbers, read in memory)."""
    import psycopg

    if ids and (result.weights is not None or result.rescore_table == TRIGRAM):
        try:
            with store.db.reads() as conn:
                return _rescore_weighted(conn, result, ids, opts)
        except psycopg.Error as exc:
            raise StorageError(store.db.explain(exc)) from None
    if not ids or not result.rescore_table or not result.rescore_expression:
        return {}
    spec = json.loads(result.rescore_expression)
    if native is not None and spec.get("words"):
        projects = project_ids(opts)
        found = native.search(
            [str(w) for w in spec["words"]], len(ids), require_all=False, allowed=ids,
            projects=None if projects is None else [db_project(p) for p in projects],
            sync=False,
        )  # fmt: skip
        if found is not None:
            return dict(zip(found[0].tolist(), found[1].tolist(), strict=True))
    terms = [(str(t[0]), bool(t[1])) for t in spec["terms"]]
    try:
        with store.db.reads() as conn:
            if spec.get("idf"):
                return _bm25_of(
                    conn, result.rescore_table, spec["match"], terms,
                    [float(x) for x in spec["idf"]], float(spec["avgdl"]), opts, ids,
                )  # fmt: skip
            rows = _bm25(
                conn, result.rescore_table, spec["match"], terms,
                opts, len(ids), only=ids,
            )  # fmt: skip
    except psycopg.Error as exc:
        raise StorageError(store.db.explain(exc)) from None
    return {h.memory_id: h.raw for h, _ in rows}
