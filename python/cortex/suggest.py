"""Suggestions (issue 12, item 7): spelling corrections drawn from the store's own
vocabulary, for every search whose words some memory lacks, and, when a query finds
little, related terms that co-occur in its top results.

Corrections: each query word that no memory within the search's filters holds is compared
with the words of the unstemmed FTS5 index: the in-memory keyword index's surface words
when it answers (the same words, kept beside its postings), else read through an
``fts5vocab`` table in the connection's temp schema, so a read-only database works:
words within an edit distance of 1 (2 for words of 10 letters or more), ranked by
distance, then by how many memories *within the filters* hold them. Every candidate is
checked against the filters with a keyword search before it is offered, so a word that
only another project holds is never suggested (a project is a wall; the vocabulary itself
is store-wide).

Related terms: the content words the top results share that the query does not name,
weighted by how rare they are in the store (document frequency within the results times
log inverse document frequency). They come from the results, which already passed the
filters.

Suggestions are follow-up queries: the query with a word corrected, then the query's
searched words with a related term added.
"""

from __future__ import annotations

import functools
import math
import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cortex import keyword
from cortex.errors import StorageError
from cortex.options import Mode, Options
from cortex.search.plan import DROPPED
from cortex.store import Store, has_cjk

if TYPE_CHECKING:
    from cortex.keyword_index import KeywordIndexer

__all__ = ["FEW", "MAX_SUGGESTIONS", "corrections", "edit_distance", "related_terms", "suggest"]

#: A search that returns fewer results than this gets suggestions.
FEW = 3
#: At most this many suggestions, corrections first.
MAX_SUGGESTIONS = 5
#: Words shorter than this are not corrected (too many neighbours at distance 1).
MIN_WORD = 4
#: Words of this many letters or more may be two edits off; shorter ones one. On the
#: agent set's misspellings every right correction was one edit away, and two edits on
#: a 9-letter word made "stitching" "sketching".
LONG_WORD = 10
_WORD = re.compile(r"[^\W_]+")
#: Words too common to be a related term (beyond the search's own stop words).
_COMMON = frozenset(
    {"about", "after", "again", "all", "also", "any", "back", "been", "before", "behind",
     "being", "both", "can", "could", "did", "does", "done", "each", "every", "from", "get",
     "gets", "goes", "had", "has", "have", "her", "here", "his", "its", "just", "like",
     "made", "make", "many", "more", "most", "much", "must", "new", "now", "off", "old",
     "once", "one", "only", "other", "our", "out", "over", "same", "should", "since", "some",
     "still", "than", "them", "through", "too", "two", "under", "until", "use", "used",
     "uses", "using", "very", "via", "was", "way", "were", "what", "when", "where", "which",
     "while", "who", "why", "would", "yes", "yet", "you", "your"}
)  # fmt: skip
_VOCAB = "temp.cortex_vocab"


def edit_distance(a: str, b: str, limit: int = 2) -> int:
    """Damerau-Levenshtein distance (adjacent swaps count 1) of `a` and `b`, or
    ``limit + 1`` as soon as it is known to exceed `limit`."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[len(b)]


def _one_apart(a: str, b: str) -> bool:
    """``edit_distance(a, b, 1) == 1`` in one pass, without the table: one substitution,
    insertion, deletion or adjacent swap makes `b` of `a` (a != b). A correction compares
    a word with hundreds of the vocabulary's (~95 % of a search's time when a word is
    unknown)."""
    la, lb = len(a), len(b)
    if la > lb:
        a, b, la, lb = b, a, lb, la
    if lb - la > 1:
        return False
    i = 0
    while i < la and a[i] == b[i]:
        i += 1
    if la < lb:
        return a[i:] == b[i + 1 :]
    if i >= la:
        return False  # equal
    return a[i + 1 :] == b[i + 1 :] or (
        i + 1 < la and a[i] == b[i + 1] and a[i + 1] == b[i] and a[i + 2 :] == b[i + 2 :]
    )


@dataclass(slots=True)
class Vocabulary:
    """The unstemmed index's words, read as needed: by first letter (the candidates of a
    correction) and how many live memories hold a word. Reading the whole ``fts5vocab``
    counts every posting of the store (2.3 s at 1M memories, ~40 ms at 100k, again after
    every write); a correction reads only its first letters' terms (a ``term`` range the
    vocabulary table answers from the index) and related terms only their own words."""

    seq: int = 0  # the change log's position the words were read at
    by_first: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    # the same words by (first letter, length): a correction compares only lengths near
    # its word's
    by_length: dict[tuple[str, int], list[tuple[str, int]]] = field(default_factory=dict)
    docs: dict[str, int] = field(default_factory=dict)
    total: int | None = None  # live memories, counted when first asked for


#: Vocabularies kept, one per database (a process rarely opens more).
CACHED_DATABASES = 8
_CACHE: dict[str, Vocabulary] = {}
_CACHE_LOCK = threading.Lock()


def vocabulary(store: Store) -> Vocabulary | None:
    """The store's vocabulary at its current state (the last entry of the memory_changes
    log), kept for the next searches while no write comes between; None when the store
    has no FTS5 vocabulary (no corrections then)."""
    try:
        seq = int(store.query("SELECT COALESCE(MAX(seq), 0) FROM memory_changes")[0][0])
        key = str(store.path)
        with _CACHE_LOCK:
            hit = _CACHE.get(key)
        if hit is not None and hit.seq == seq:
            return hit
        _vocab_rows(store, f"SELECT 1 FROM {_VOCAB} LIMIT 0", [()])
    except (sqlite3.Error, StorageError):
        return None
    vocab = Vocabulary(seq=seq)
    with _CACHE_LOCK:
        if key not in _CACHE and len(_CACHE) >= CACHED_DATABASES:
            _CACHE.pop(next(iter(_CACHE)))  # the oldest entry
        _CACHE[key] = vocab
    return vocab


def _vocab_rows(store: Store, sql: str, each: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
    """The rows of a statement over the vocabulary table for each parameter tuple of
    `each`, the table made first in the temp schema of the connection that runs it (each
    connection has its own; a cached vocabulary may be read through another than the one
    that made it)."""
    store.query(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {_VOCAB}"
        " USING fts5vocab(main, 'memories_exact', 'row')"
    )
    return [store.query(sql, params) for params in each]


def _starting(
    store: Store, vocab: Vocabulary, first: str, native: KeywordIndexer | None = None
) -> list[tuple[str, int]]:
    """The vocabulary's words that start with `first` (one character), with their counts:
    from the in-memory keyword index's surface words when it can answer (~1 ms: FTS5's
    ``fts5vocab`` walks every word's doclist to count its documents, 10-60 ms per letter
    at 100k memories, 33-134 ms at 1M, the tail of first-time searches), else from FTS5.
    The index's counts are upper bounds once a memory was removed: they only order the
    candidates, which `_count` then counts within the filters, and are not kept as
    `vocab.docs` (related terms' rarity reads FTS5's exact counts)."""
    known = vocab.by_first.get(first)
    if known is not None:
        return known
    words = native.words_starting(first) if native is not None else None
    exact = words is None
    if words is None:
        try:
            (rows,) = _vocab_rows(
                store,
                f"SELECT term, doc FROM {_VOCAB} WHERE term >= ? AND term < ?",
                [(first, chr(ord(first) + 1))],
            )
        except (sqlite3.Error, StorageError):
            return []  # not kept: the next search asks again
        words = [(str(t), int(n)) for t, n in rows if str(t).startswith(first)]
    buckets: dict[int, list[tuple[str, int]]] = {}
    for word, n in words:
        if exact:
            vocab.docs[word] = n
        buckets.setdefault(len(word), []).append((word, n))
    for length, part in buckets.items():  # whole lists: another thread may read the same
        vocab.by_length[(first, length)] = part
    vocab.by_first[first] = words  # last: a reader that sees it sees the buckets too
    return words


def _doc_counts(store: Store, vocab: Vocabulary, words: Sequence[str]) -> dict[str, int]:
    """How many live memories hold each of `words` (0 for a word the store lacks)."""
    missing = [w for w in dict.fromkeys(words) if w not in vocab.docs]
    if missing:
        try:
            found = _vocab_rows(
                store, f"SELECT doc FROM {_VOCAB} WHERE term = ?", [(w,) for w in missing]
            )
        except (sqlite3.Error, StorageError):
            found = []  # not kept: counted as rare this time
        for word, rows in zip(missing, found, strict=False):
            vocab.docs[word] = int(rows[0][0]) if rows else 0
    return {w: vocab.docs.get(w, 0) for w in words}


def _total(store: Store, vocab: Vocabulary) -> int:
    if vocab.total is None:
        try:
            # all rows (counted from an index) less the deleted ones (a partial index):
            # ~0.02 ms, where `WHERE deleted_at IS NULL` reads every row (~50 ms at 100k)
            rows = store.query(
                "SELECT (SELECT COUNT(*) FROM memories)"
                " - (SELECT COUNT(*) FROM memories WHERE deleted_at IS NOT NULL)"
            )
            vocab.total = int(rows[0][0])
        except (sqlite3.Error, StorageError):
            vocab.total = 0
    return vocab.total


def _candidates(
    store: Store,
    vocab: Vocabulary,
    word: str,
    limit: int,
    native: KeywordIndexer | None = None,
) -> list[tuple[str, int]]:
    """Words of the vocabulary that may be within `limit` edits of `word`: those that
    start with its first letter, or with its second (a first letter dropped, added or
    swapped). A misspelt first letter with neither is not corrected: the price of not
    comparing the whole vocabulary.

    One edit away, a word that starts with the second letter (not the first) is one of
    four strings, each an edit at position 0 -- looked up alone instead of reading every
    word of that letter (each letter read is 10-60 ms at 100k memories, the tail of
    first-time searches; the first letter's words still have to be read: an edit at
    position 1 leaves any second letter)."""
    out: list[tuple[str, int]] = []
    firsts = list(dict.fromkeys(word[:2]))
    if limit == 1 and len(firsts) == 2 and firsts[1] not in vocab.by_first:
        a, b = word[0], word[1]
        edits = [b + word[1:], word[1:], b + a + word[2:], b + word]
        counts = _doc_counts(store, vocab, edits)
        out.extend((t, counts[t]) for t in dict.fromkeys(edits) if counts[t] > 0)
        firsts = firsts[:1]
    for first in firsts:
        _starting(store, vocab, first, native)
        for length in range(len(word) - limit, len(word) + limit + 1):
            out.extend(vocab.by_length.get((first, length), ()))
    return out


def _close(
    store: Store, vocab: Vocabulary, word: str, limit: int, native: KeywordIndexer | None
) -> list[tuple[int, int, str]]:
    """The words within `limit` edits of `word` among its candidates (see `_candidates`),
    as (distance, -memories holding it, word), sorted. The in-memory keyword index
    compares its own words with `word` when it answers (the words of both first letters:
    what the look-ups of `_candidates` find among the second letter's are all of that
    letter's words one edit away); in Python ~4 ms per 1,000 words of two edits (a
    correction of a long word compares ~2,000 at 100k memories)."""
    if native is not None:
        found: list[tuple[int, int, str]] = []
        for first in dict.fromkeys(word[:2]):
            near = native.words_near(first, word, limit)
            if near is None:
                break
            found.extend((d, -n, term) for term, n, d in near)
        else:
            return sorted(found)
    if limit == 1:  # the same words, found without the distance table
        return sorted(
            (1, -n, term)
            for term, n in _candidates(store, vocab, word, 1, native)
            if _one_apart(word, term)
        )
    # an edit changes the set of letters by two at most: most words fail that
    letters = set(word)
    return sorted(
        (d, -n, term)
        for term, n in _candidates(store, vocab, word, limit, native)
        if term != word
        and len(letters.symmetric_difference(term)) <= 2 * limit
        and (d := edit_distance(word, term, limit)) <= limit
    )


def _holds(store: Store, word: str, opts: Options, seen: dict[str, bool] | None = None) -> bool:
    """Whether a memory within `opts`'s filters holds `word` (or a word it begins): the
    index tiers only, never the substring scan of every row (keyword.holds). `seen`: the
    answers of this suggestion so far (a word is looked up once)."""
    if seen is not None and word in seen:
        return seen[word]
    quoted = '"' + word.replace('"', '""') + '"'
    found = keyword.holds(store, quoted, opts)
    if seen is not None:
        seen[word] = found
    return found


def _count(store: Store, word: str, opts: Options, cap: int = 50) -> int:
    """How many memories within `opts`'s filters hold `word` (up to `cap`)."""
    if not _holds(store, word, opts):  # absent: never let the search reach its LIKE scan
        return 0
    quoted = '"' + word.replace('"', '""') + '"'
    try:  # counted, not ranked: a common word's BM25 over 100k memories is ~5 ms
        return keyword.count(store, quoted, opts, cap)
    except StorageError:  # not an expression FTS5 takes alone: the search's own tiers
        return len(keyword.search(store, quoted, opts, cap).hits)


def corrections(
    store: Store,
    words: Sequence[str],
    opts: Options,
    held: Sequence[str] = (),
    seen: dict[str, bool] | None = None,
    native: KeywordIndexer | None = None,
) -> dict[str, str]:
    """The best correction of each of `words` that no memory within the filters holds
    (`held`: words known to be held, not looked up; `seen`: see _holds; `native`: the
    in-memory keyword index, whose surface words spare FTS5's vocabulary walk)."""
    wanted = [w for w in words if len(w) >= MIN_WORD and not has_cjk(w) and not w.isdigit()]
    missing = [w for w in wanted if w not in held and not _holds(store, w, opts, seen)]
    if not missing:
        return {}
    vocab = vocabulary(store)
    if vocab is None:
        return {}
    out: dict[str, str] = {}
    for word in missing:
        limit = 2 if len(word) >= LONG_WORD else 1
        close = _close(store, vocab, word, limit, native)[:8]
        best: tuple[int, int, str] | None = None
        for d, _, term in close:
            inside = _count(store, term, opts)  # the wall: only words the filters admit
            if inside and (best is None or (d, -inside) < best[:2]):
                best = (d, -inside, term)
        if best is not None:
            out[word] = best[2]
    return out


def related_terms(
    store: Store, contents: Sequence[str], query_words: Sequence[str], k: int = 3
) -> list[str]:
    """Up to `k` words the `contents` (the top results) share, rare in the store, that the
    query does not already name."""
    if not contents:
        return []
    named = {w.lower() for w in query_words}
    stems = {w[:5] for w in named if len(w) >= 5}
    df: Counter[str] = Counter()
    for text in contents:
        df.update(
            {
                w.lower()
                for w in _WORD.findall(text)
                if len(w) >= 3 and not w.isdigit() and not has_cjk(w)
            }
        )
    pool = [
        w
        for w in df
        if w not in DROPPED
        and w not in _COMMON
        and w not in named
        and not (len(w) >= 5 and w[:5] in stems)
    ]
    if not pool:
        return []
    vocab = vocabulary(store)
    if vocab is None:
        total, docs = 1, {}
    else:
        total, docs = max(1, _total(store, vocab)), _doc_counts(store, vocab, pool)
    scored = [(df[w] * math.log(1 + total / max(1, docs.get(w, 1))), w) for w in pool]
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [w for _, w in scored[:k]]


def _together(
    store: Store,
    corrected: Sequence[str],
    words: Sequence[str],
    fixed: dict[str, str],
    opts: Options,
    seen: dict[str, bool] | None = None,
) -> bool:
    """Whether some memory within the filters holds every word of the corrected query
    (words that are neither found nor corrected left aside). A word the store lacks is
    often a plain word no note happens to use ("charges", "sure"); its nearest word
    ("changes", "sre") is a better query only if it meets the query's other words."""
    kept = [
        c
        for w, c in zip(words, corrected, strict=True)
        if w in fixed or _holds(store, w, opts, seen)
    ]
    if not kept:
        return False
    expression = " AND ".join('"' + w.replace('"', '""') + '"' for w in kept)
    return keyword.holds(store, expression, opts)


def _probe_options(opts: Options) -> Options:
    """`opts` as the look-ups of a suggestion run them (keyword, one match, no record):
    the same object for the same options (an agent's searches repeat theirs; building one
    re-validates every field, ~30 us)."""
    try:
        return _probe_options_of(opts)
    except TypeError:  # a field that cannot be hashed (sector weights): built each time
        return _probe_options_of.__wrapped__(opts)


@functools.lru_cache(maxsize=64)
def _probe_options_of(opts: Options) -> Options:
    return opts.replace(mode=Mode.KEYWORD, limit=1, cursor=None, offset=0, record=False)


def suggest(
    store: Store,
    searched: str,
    opts: Options,
    results: Sequence[Any],
    *,
    related: bool = True,
    native: KeywordIndexer | None = None,
) -> list[str]:
    """Follow-up queries for a search of `searched` that returned `results`: the query
    with its unknown words corrected, then (with `related`) with a related term added.
    `native`: the in-memory keyword index, if any (its surface words are the corrections'
    vocabulary; FTS5's otherwise)."""
    words = [w for w in keyword._terms(searched) if w not in DROPPED]
    if not words:
        return []
    out: list[str] = []
    # the words the search matched together are held within its filters (which are
    # these, or narrower: a time window's): nothing to correct, nothing to look up
    held = getattr(results, "_held", ())
    fixed: dict[str, str] = {}
    if any(w not in held for w in words):
        base = _probe_options(opts)
        seen: dict[str, bool] = {}
        fixed = corrections(store, words, base, held, seen, native)
        corrected = [fixed.get(w, w) for w in words]
        if fixed and not _together(store, corrected, words, fixed, base, seen):
            fixed = {}  # each word exists, but no memory holds them together: no better query
    if fixed:
        out.append(" ".join(fixed.get(w, w) for w in words))
    if related:
        contents = [r.memory.content for r in list(results)[:5]]
        for term in related_terms(store, contents, words):
            out.append(f"{' '.join(fixed.get(w, w) for w in words)} {term}")
    return list(dict.fromkeys(out))[:MAX_SUGGESTIONS]
