"""Planning a search: a pure function of the query, the options and what is available.

`plan()` decides, before anything is read, which legs run (keyword, semantic), how deep
each fetches, what text each leg sees and how they will be fused. It reads no database
and calls no model, so every decision it makes can be tested alone.

What each leg sees:

- the keyword leg gets the query as typed (it parses FTS5 syntax itself) and drops stop
  words and question words from plain-text queries ("how do we deploy" searches
  "deploy": question words pull in every other question, and their BM25 weight is nil);
- the semantic leg gets the query without FTS5 operators and without what a ``NOT``
  excludes (``deploy* NOT staging`` embeds "deploy"): an embedding cannot say "not".

A query written in FTS5 syntax is a constraint as well as a ranking: when it excludes
(``NOT``) or requires a phrase or an explicit operator, every result of every mode must
match the expression (`Plan.constrained`); the semantic leg then only scores memories
the expression admits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cortex.options import Mode, Options
from cortex.store import has_cjk

__all__ = [
    "CANDIDATE_POOL",
    "CJK_ALPHA",
    "QUESTION_WORDS",
    "STOPWORDS",
    "Plan",
    "clean",
    "plan",
    "pool_for",
    "semantic_text",
    "syntax",
]

#: Each retriever fetches at least this many candidates (or 2 x limit if more), whatever
#: the limit: the first n results are then the same for every limit up to half of it.
CANDIDATE_POOL = 100

#: Longer queries are refused: no memory search needs them, and FTS5 would parse every term.
MAX_QUERY_CHARS = 10_000

#: The weight of the semantic leg for a query in a script the default model was not
#: trained on (all-MiniLM-L6-v2 is English-only: its cosine between two Chinese texts says
#: little). Chosen on the agent evaluation set's tune split (eval/README.md).
CJK_ALPHA = 0.15

# Lucene's English stop words. Plain-text queries search without them (unless nothing else
# is left): their BM25 weight is nil, yet an OR over "the" or "of" scores nearly every
# memory, which is what made long natural-language queries slow.
STOPWORDS = frozenset(
    {"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
     "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
     "these", "they", "this", "to", "was", "will", "with"}
)  # fmt: skip

#: Words of questions and of the first person: an agent asks "how did we fix ..." and
#: "what was I working on"; matched as keywords they pull in every note that asks a
#: question or says "we". Left out of the keyword side of plain queries (the semantic
#: side keeps the whole question).
QUESTION_WORDS = frozenset(
    {"what", "when", "where", "who", "whom", "whose", "which", "why", "how", "did", "do",
     "does", "done", "doing", "i", "me", "my", "mine", "we", "us", "our", "ours", "you",
     "your", "yours", "he", "she", "him", "her", "his", "its", "were", "been", "being",
     "am", "have", "has", "had", "can", "could", "would", "should", "shall", "about",
     "any", "some", "ever", "again", "here", "so", "just", "also", "from", "there", "was",
     "is", "anything", "something", "thing", "things", "know", "tell", "remember"}
)  # fmt: skip

#: Chinese and Japanese function characters (particles, the possessive, "and", "is"): a
#: query's lone の or 的 is a substring of most CJK memories, and as a LIKE term it made
#: "Spinnaker の 導入計画" match every Japanese note of a store that holds none of its words.
CJK_PARTICLES = frozenset("のはがをにでともへや的了是在和与及或也之")

DROPPED = STOPWORDS | QUESTION_WORDS | CJK_PARTICLES

# FTS5 syntax a user may write on purpose. Operators are case-sensitive in FTS5.
_SYNTAX = re.compile(r'["*()^]|\b(?:AND|OR|NOT|NEAR)\b|\w:')
# What makes a syntax query a constraint: an exclusion, a phrase, or an explicit operator
# other than OR (an OR of words is a ranking request, not a filter).
#: A word of the query that names something: a capital letter in it (Heroku, RabbitMQ,
#: GDPR) or a digit after a letter (k8s, S3). Sentence case is no sign of a name, so the
#: words every query starts with (DROPPED) never count.
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_.][A-Za-z0-9]+)*")
_OPERATORS = frozenset({"AND", "OR", "NOT", "NEAR"})
_NAME_LIKE = re.compile(r"[A-Z0-9]")

_CONSTRAINT = re.compile(r'"|\b(?:AND|NOT|NEAR)\b|[()]')
_NOT_CLAUSE = re.compile(r'\bNOT\s+(?:"[^"]*"|\([^)]*\)|\S+)')
#: A word written with a leading dash (``deploy -staging``), as web search engines read an
#: exclusion: FTS5 has no such operator, and its tokenizer drops the dash, so the word is
#: searched for; the search says so (a notice) rather than guess ("ls -la" is a flag).
_DASHED = re.compile(r"(?:^|(?<=\s))-([^\W\d_]\w*)")
_OPERATOR = re.compile(r'\b(?:AND|OR|NOT|NEAR)\b|["*()^]|\w+:')


def clean(query: str) -> str:
    """The query with NUL and other control characters made spaces; refuses huge queries."""
    from cortex.errors import QueryError

    if not isinstance(query, str):
        raise QueryError(f"a query is a string, not {type(query).__name__}")
    if len(query) > MAX_QUERY_CHARS:
        raise QueryError(
            f"the query is {len(query):,} characters long; the limit is {MAX_QUERY_CHARS:,}"
        )
    return query.translate(_CONTROLS).strip()


#: NUL and the other control characters (below 32, and 127), each made a space.
_CONTROLS = {c: " " for c in (*range(32), 127)}


def syntax(text: str) -> bool:
    """Whether `text` is written in FTS5 syntax (an operator, a phrase, a prefix...)."""
    return _SYNTAX.search(text) is not None


def semantic_text(text: str) -> str:
    """What the semantic leg embeds: `text` without FTS5 operators and NOT clauses."""
    if not syntax(text):
        return text
    kept = _OPERATOR.sub(" ", _NOT_CLAUSE.sub(" ", text))
    return " ".join(kept.split())


@dataclass(frozen=True, slots=True)
class Plan:
    """What a search will do, decided before it reads anything."""

    query: str  # as typed
    text: str  # cleaned: control characters made spaces, trimmed
    semantic_text: str  # what the semantic leg embeds
    mode: Mode  # the mode that will run (hybrid degrades when a leg cannot)
    use_keyword: bool
    use_semantic: bool
    pool: int  # candidates each leg fetches
    alpha: float  # the semantic weight of the fusion (hybrid only)
    cjk: bool  # the query holds Chinese, Japanese or Korean text
    constrained: bool  # every result must match the FTS5 expression
    threshold: float  # the minimum final score
    notices: tuple[str, ...] = ()
    named: tuple[str, ...] = ()  # words that look like names (named_terms), hybrid only
    rare: tuple[str, ...] = ()  # lower-case words rare in English (rare_terms), hybrid only

    @property
    def hybrid(self) -> bool:
        return self.use_keyword and self.use_semantic


def named_terms(text: str) -> tuple[str, ...]:
    """The words of `text` that look like names (see _WORD), in order, without repeats:
    when the store holds none of one, the meaning of the query is about something the
    store has never seen, and a semantic neighbour is no answer to it."""
    found: dict[str, None] = {}
    for m in _WORD.finditer(text):
        word = m.group()
        if word in _OPERATORS or word.lower() in DROPPED:
            continue
        if any(ch.isupper() for ch in word) or re.search(r"[A-Za-z][0-9]", word):
            found.setdefault(word, None)
    return tuple(found)


#: A lower-case word of a hybrid query past this position in the model's vocabulary (or
#: not a whole word of it: cortex.commonness) is rare in English, and names something as a
#: capital does: "what is the on-call compensation policy?" asks about compensation, and
#: when no memory holds the word, a note about the on-call rotation is no answer to it.
#: 0: off. Chosen on the tune halves (BENCHMARKS.md, "Ranking: rare words as names").
RARE_WORD_RANK = 8000


def rare_terms(text: str) -> tuple[str, ...]:
    """The lower-case words of `text` rare in English (RARE_WORD_RANK; cortex.commonness),
    in order, without repeats, leaving out the words left out of every search (DROPPED):
    a word with a capital or a digit is a name already (named_terms). Reads the
    model's vocabulary at the first call of the process."""
    if RARE_WORD_RANK <= 0:
        return ()
    from cortex import commonness

    vocab = commonness.ranks()
    if vocab is None:
        return ()
    found: dict[str, None] = {}
    for m in _WORD.finditer(text):
        word = m.group()
        if _NAME_LIKE.search(word) or word.lower() in DROPPED:
            continue  # capitals and digits are names already (named_terms)
        if commonness.rare(word, RARE_WORD_RANK, vocab):
            found.setdefault(word, None)
    return tuple(found)


def pool_for(opts: Options) -> int:
    """How many candidates each leg fetches for a page of `opts`: at least CANDIDATE_POOL,
    and twice what the page reaches, so that the first n results are the same for every
    limit up to half the pool."""
    return max(CANDIDATE_POOL, 2 * (opts.offset + opts.limit))


def plan(
    query: str,
    opts: Options,
    *,
    semantic_unavailable: str | None = None,
    pool: int | None = None,
) -> Plan:
    """Plan the search of `query` (not None: listing by filters does not plan) under
    `opts`. `semantic_unavailable` is why the semantic leg cannot run, if it cannot;
    `pool` the depth of each leg (default :func:`pool_for`)."""
    from cortex.errors import EmbeddingError

    text = clean(query)
    notices: list[str] = []
    mode = Mode(opts.mode)
    use_kw = mode is Mode.KEYWORD or (mode is Mode.HYBRID and opts.alpha < 1.0)
    use_sem = mode is Mode.SEMANTIC or (mode is Mode.HYBRID and opts.alpha > 0.0)
    sem_text = semantic_text(text)
    if not sem_text:
        use_sem = use_sem and mode is Mode.SEMANTIC
    if use_sem and text and semantic_unavailable is not None:
        if mode is Mode.SEMANTIC:
            raise EmbeddingError(f"semantic search is unavailable: {semantic_unavailable}")
        notices.append(f"semantic search unavailable, keyword results only: {semantic_unavailable}")
        use_sem, use_kw = False, True
    if not text:
        use_sem = False
    if mode is Mode.HYBRID and not (use_kw and use_sem):
        # alpha 0 or 1, or one leg unavailable: the search is that one leg
        mode = Mode.KEYWORD if use_kw or not use_sem else Mode.SEMANTIC
    if use_kw:
        for word in dict.fromkeys(_DASHED.findall(text)):
            notices.append(
                f"-{word} is searched as the word {word!r}: to leave out memories that hold"
                f" it, write NOT {word}"
            )
    cjk = has_cjk(text)
    alpha = opts.alpha
    if cjk and opts.alpha == Options.__dataclass_fields__["alpha"].default:
        # the default model reads only English: lean on the keyword evidence
        alpha = min(alpha, CJK_ALPHA)
    is_syntax = syntax(text) and not cjk
    constrained = is_syntax and _CONSTRAINT.search(text) is not None
    named = named_terms(text) if mode is Mode.HYBRID and not is_syntax else ()
    return Plan(
        query=query,
        text=text,
        semantic_text=sem_text or text,
        mode=mode,
        use_keyword=use_kw,
        use_semantic=use_sem,
        pool=pool if pool is not None else pool_for(opts),
        alpha=alpha,
        cjk=cjk,
        constrained=constrained,
        threshold=opts.threshold(mode),
        notices=tuple(notices),
        named=named,
        rare=rare_terms(text) if mode is Mode.HYBRID and not is_syntax else (),
    )
