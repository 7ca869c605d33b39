"""The native keyword index (`cortex._native.KeywordIndex`) against real SQLite FTS5.

Exactness is checked, not assumed: the tokenizer against what FTS5 indexes (read back
from an `fts5vocab` 'instance' table: every term at every offset), and the top-k with
their scores against `bm25()` of an FTS5 table set up as cortex's store sets it up. The
data is the shared SciFact corpus when it is mounted (found as tests/test_eval.py finds
it), else a seeded synthetic corpus built here, so CI runs the same assertions anywhere.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from cortex._native import KeywordIndex
from cortex.errors import InvalidOptionError
from cortex.keyword import STOPWORDS

from .conftest import ROOT

TOKENIZE = "porter unicode61 remove_diacritics 2"
WORD = re.compile(r"\w+")
REL = 1e-9  # relative score tolerance allowed by the contract (the scores are bit-equal)


def _find_scifact() -> Path | None:
    """$CORTEX_SCIFACT, else ../shared/data/scifact beside the checkout, else /work/shared."""
    candidates = [os.environ.get("CORTEX_SCIFACT"), ROOT.parent / "shared" / "data" / "scifact",
                  "/work/shared/data/scifact"]  # fmt: skip
    for c in candidates:
        if c and (Path(c) / "corpus.jsonl").exists() and (Path(c) / "queries.jsonl").exists():
            return Path(c)
    return None


SCIFACT = _find_scifact()
N_DOCS = 3000  # SciFact docs indexed for the score comparisons (of 5,183), for CI time
N_QUERIES = 600  # of SciFact's 1,109, each run as AND and as OR (all: benches/)

# The synthetic fallback: words that exercise the stemmer, in seeded random documents.
_STEMS = [
    "run",
    "happy",
    "relate",
    "condition",
    "generalize",
    "oscillate",
    "hope",
    "cell",
    "protein",
    "agree",
    "controll",
    "feed",
    "sky",
    "digit",
    "probate",
    "motor",
    "sing",
    "cease",
    "radical",
    "valence",
    "form",
    "adjust",
    "depend",
    "communism",
    "effect",
]
_SUFFIXES = ["", "s", "es", "ed", "ing", "ational", "ness", "ful", "ly", "ies", "ization", "er"]


def _synthetic(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = [s + x for s in _STEMS for x in _SUFFIXES]
    return [
        " ".join(rng.choice(words) for _ in range(rng.randint(0, 60))).capitalize()
        for _ in range(n)
    ]


def corpus() -> list[tuple[int, str]]:
    """(memory id, text): sparse ids, a few empty and separator-only texts included."""
    if SCIFACT is not None:
        rows = []
        with open(SCIFACT / "corpus.jsonl", encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                rows.append((int(d["_id"]), f"{d.get('title', '')} {d['text']}"))
    else:
        rows = [(i * 7919 + 3, t) for i, t in enumerate(_synthetic(1500, 1))]
    rows += [(2**40 + 1, ""), (2**40 + 2, "!!! ... ---"), (2**40 + 3, "Café résumé naïve")]
    return rows


def queries() -> list[str]:
    if SCIFACT is not None:
        with open(SCIFACT / "queries.jsonl", encoding="utf-8") as f:
            return [json.loads(line)["text"] for line in f]
    rng = random.Random(2)
    words = [s + x for s in _STEMS for x in _SUFFIXES]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 9))) for _ in range(300)]


def query_words(text: str) -> list[str]:
    """The words keyword.py searches for plain text: lowercased, distinct, no stop words;
    here also only words that give one index term (the others go to FTS5)."""
    seen: dict[str, None] = {}
    for w in WORD.findall(text):
        key = w.lower()
        if key not in STOPWORDS and len(KeywordIndex.tokenize(key)) == 1:
            seen.setdefault(key, None)
    return list(seen)[:32]


# ------------------------------------------------------------------------------ FTS5


class Fts:
    """An FTS5 index set up as cortex's store sets it up (external content, one column)."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.executescript(f"""
            CREATE TABLE memories (id INTEGER PRIMARY KEY, content TEXT NOT NULL);
            CREATE VIRTUAL TABLE memories_fts USING fts5(
                content, content='memories', content_rowid='id', tokenize='{TOKENIZE}');
            CREATE VIRTUAL TABLE vocab USING fts5vocab(memories_fts, 'instance');
            CREATE VIRTUAL TABLE vocab_row USING fts5vocab(memories_fts, 'row');
        """)

    def add(self, rows: list[tuple[int, str]]) -> None:
        with self.db:
            for i, text in rows:
                old = self.db.execute("SELECT content FROM memories WHERE id = ?", (i,)).fetchone()
                if old is not None:
                    self.remove([i])
                self.db.execute("INSERT INTO memories(id, content) VALUES (?, ?)", (i, text))
                self.db.execute("INSERT INTO memories_fts(rowid, content) VALUES (?, ?)", (i, text))

    def remove(self, ids: list[int]) -> None:
        with self.db:
            for i in ids:
                old = self.db.execute("SELECT content FROM memories WHERE id = ?", (i,)).fetchone()
                if old is None:
                    continue
                self.db.execute(
                    "INSERT INTO memories_fts(memories_fts, rowid, content) "
                    "VALUES ('delete', ?, ?)",
                    (i, old[0]),
                )
                self.db.execute("DELETE FROM memories WHERE id = ?", (i,))

    def terms(self) -> dict[int, list[str]]:
        """Indexed terms of every row, in offset order (offsets checked contiguous)."""
        out: dict[int, list[tuple[int, str]]] = {}
        for term, doc, off in self.db.execute("SELECT term, doc, offset FROM vocab"):
            out.setdefault(doc, []).append((off, term))
        res = {}
        for doc, pairs in out.items():
            pairs.sort()
            assert [o for o, _ in pairs] == list(range(len(pairs))), doc
            res[doc] = [t for _, t in pairs]
        return res

    def total_tokens(self) -> int:
        return int(self.db.execute("SELECT coalesce(sum(cnt), 0) FROM vocab_row").fetchone()[0])

    def search(
        self, words: list[str], k: int, require_all: bool, allowed: list[int] | None = None
    ) -> tuple[list[int], list[float]]:
        expr = (" " if require_all else " OR ").join(
            '"' + w.replace('"', '""') + '"' for w in words
        )
        # With `allowed`, every match is ranked and the filter applied after: the same
        # answer as `AND rowid IN (...)` (bm25() statistics do not see the filter), faster.
        rows = self.db.execute(
            "SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? "
            "ORDER BY bm25(memories_fts), rowid LIMIT ?",
            (expr, k if allowed is None else -1),
        ).fetchall()
        if allowed is not None:
            keep = set(allowed)
            rows = [r for r in rows if r[0] in keep][:k]
        return [r[0] for r in rows], [-r[1] for r in rows]


def build(rows: list[tuple[int, str]]) -> tuple[KeywordIndex, Fts]:
    ix = KeywordIndex()
    ix.add(np.array([r[0] for r in rows], dtype=np.int64), [r[1] for r in rows])
    fts = Fts()
    fts.add(rows)
    return ix, fts


def assert_same_ranking(
    got: tuple[np.ndarray, np.ndarray], want: tuple[list[int], list[float]], what: str
) -> float:
    """Same ids (swaps only between equal scores) and scores within REL; returns the
    largest relative score difference."""
    ids, scores = got
    wids, wscores = want
    assert len(ids) == len(wids), what
    worst = 0.0
    for i, (a, b) in enumerate(zip(scores.tolist(), wscores, strict=True)):
        rel = abs(a - b) / max(abs(b), 1e-300)
        worst = max(worst, rel)
        assert rel <= REL, f"{what}: rank {i}: {a!r} != {b!r}"
    if ids.tolist() != wids:
        # tolerated only inside groups of equal scores
        key = [(round(s, 9), i) for s, i in zip(wscores, wids, strict=True)]
        got_key = [(round(s, 9), i) for s, i in zip(scores.tolist(), ids.tolist(), strict=True)]
        assert sorted(key) == sorted(got_key), what
    return worst


# ----------------------------------------------------------------------------- tests

HARD = [
    "Café résumé NAÏVE Ångström Øresund Łódź ß STRASSE straße ǅemal ﬁne œuvre",
    "ΑΘΉΝΑ Ἀθῆναι ὀδύσσεια Москва ЁЛКА ўсё Ї",
    "e\u0301te\u0301 \u0301abc a\u0308\u0323b x\u20ddy co\u0336de",
    "foo_bar don't it’s rock'n'roll e-mail user@example.com C++ C# .NET 3.14 1,000",
    "emoji 😀 in👍side ❤️ flags 🇫🇷 zwj 👨‍👩‍👧 keycap 1️⃣",
    "東京タワー 北京大学 한국어 テスト ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
    "٣٤٥ ½ ² Ⅻ ⅻ ① ⑴ 𝟘𝟙 𝐀𝐁𝐂 \ue000private\U000f0000",
    "happy happiness ponies ties caresses cats feed agreed bled sized hopping filing sky",
    "relational conditional rational digitizer radically generalizations oscillators",
    "y ay yes syed ying aing eed ed ing bies sses ies s ss ll",
    "a" * 40 + " " + "b" * 64 + "ing " + "c" * 61 + "ings " + "d" * 40_000,
    "tab\tnew\nline\rcr\x00nul\x7fdel\u00a0nbsp\u2009thin\u3000ideo",
    "\ufeffbom \ufffe \uffff \ufffd end",
]


def _bmp_probe_rows() -> Iterator[str]:
    """Every BMP code point but the surrogates, and a sample of the others, each between
    two ASCII letters, 1,000 to a row."""
    cps = [c for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
    cps += list(range(0x10000, 0x110000, 97))
    for i in range(0, len(cps), 1000):
        yield " ".join(f"x{chr(c)}y" for c in cps[i : i + 1000])


def _tokenize_check(texts: list[str]) -> int:
    fts = Fts()
    fts.add(list(enumerate(texts, start=1)))
    indexed = fts.terms()
    n = 0
    for i, text in enumerate(texts, start=1):
        want = indexed.get(i, [])
        got = KeywordIndex.tokenize(text)
        assert got == want, f"text {i}: {text[:80]!r}"
        n += len(got)
    return n


def test_tokenize_matches_fts5_on_hard_cases() -> None:
    assert _tokenize_check(HARD) > 100


def test_tokenize_matches_fts5_on_every_code_point() -> None:
    assert _tokenize_check(list(_bmp_probe_rows())) > 70_000


def test_tokenize_matches_fts5_on_corpus_vocabulary() -> None:
    rows = corpus()
    vocab = sorted({w for _, t in rows for w in WORD.findall(t)})
    vocab += sorted({w.lower() for w in vocab} | {w.upper() for w in vocab[:2000]})
    texts = [" ".join(vocab[i : i + 500]) for i in range(0, len(vocab), 500)]
    texts += [t for _, t in rows[:300]]  # whole documents: offsets of real text
    assert _tokenize_check(texts) > 1000


@pytest.fixture(scope="module")
def pair() -> tuple[KeywordIndex, Fts, list[tuple[int, str]]]:
    rows = corpus()
    rows = rows[:N_DOCS] + rows[-3:]
    ix, fts = build(rows)
    return ix, fts, rows


def test_statistics_match_fts5(pair) -> None:
    ix, fts, rows = pair
    assert len(ix) == len(rows)
    assert ix.total_tokens == fts.total_tokens()
    df = dict(fts.db.execute("SELECT term, doc FROM vocab_row").fetchall())
    assert len(df) > 1000
    assert all(ix.df(t) == n for t, n in df.items())
    assert ix.df("no-such-term") == 0
    assert rows[0][0] in ix and -5 not in ix
    assert ix.memory_bytes() > 0


def _compare_queries(ix, fts, qs, k=100, allowed=None, both=True) -> tuple[int, float]:
    n, worst = 0, 0.0
    for q in qs:
        words = query_words(q)
        if not words:
            continue
        for require_all in (False, True) if both else (False,):
            a = None if allowed is None else np.asarray(allowed, dtype=np.int64)
            got = ix.search(words, k, require_all=require_all, allowed=a)
            want = fts.search(words, k, require_all, allowed)
            worst = max(worst, assert_same_ranking(got, want, f"{words} and={require_all}"))
            n += 1
    return n, worst


def test_search_matches_fts5_bm25(pair) -> None:
    ix, fts, _ = pair
    n, worst = _compare_queries(ix, fts, queries()[:N_QUERIES])
    assert n >= 400
    assert worst <= REL


def test_repeated_and_unknown_terms_match_fts5(pair) -> None:
    ix, fts, rows = pair
    word = query_words(rows[0][1])[0]
    cases = [["run", "running", "runs"], [word, word + "s"], [word, "zzzqqqxxx"],
             ["zzzqqqxxx"], ["cell", "cells", "cellular"], ["the", "of", "and"]]  # fmt: skip
    for words in cases:
        for require_all in (False, True):
            got = ix.search(words, 50, require_all=require_all)
            assert_same_ranking(got, fts.search(words, 50, require_all), f"{words}")


def test_search_after_removal_and_replacement_matches_fts5() -> None:
    rows = corpus()[:1500]
    ix, fts = build(rows)
    rng = random.Random(7)
    gone = rng.sample([r[0] for r in rows], 400)
    assert ix.remove(np.array([*gone, -1, -2], dtype=np.int64)) == 400
    fts.remove(gone)
    kept = [r for r in rows if r[0] not in set(gone)]
    swapped = [(kept[i][0], kept[-1 - i][1]) for i in range(200)]  # other docs' texts
    ix.add(np.array([r[0] for r in swapped], dtype=np.int64), [r[1] for r in swapped])
    fts.add(swapped)
    assert len(ix) == len(rows) - 400
    assert ix.total_tokens == fts.total_tokens()
    n, _ = _compare_queries(ix, fts, queries()[:200])
    assert n > 100
    # removing every document then adding some back leaves consistent statistics
    ix.remove(np.array([r[0] for r in rows], dtype=np.int64))
    assert len(ix) == 0 and ix.total_tokens == 0
    assert ix.search(["cell"], 10)[0].size == 0


def test_search_with_allowed_matches_fts5(pair) -> None:
    ix, fts, rows = pair
    rng = random.Random(3)
    ids = sorted(r[0] for r in rows)
    for size in (5, 60, len(ids) // 2):
        allowed = [*sorted(rng.sample(ids, size)), 2**50]  # an unknown id is ignored
        n, _ = _compare_queries(ix, fts, queries()[:60], k=20, allowed=allowed)
        assert n > 30


def test_query_terms() -> None:
    assert KeywordIndex.query_terms(["Running", "café"]) == ["run", "cafe"]
    assert KeywordIndex.query_terms(["foo_bar"]) is None
    assert KeywordIndex.query_terms(["___"]) is None


@pytest.mark.parametrize(
    ("call", "exc"),
    [
        (lambda ix: ix.search(["cell"], 0), InvalidOptionError),
        (lambda ix: ix.search(["cell"], -3), InvalidOptionError),
        (lambda ix: ix.search([], 5), InvalidOptionError),
        (lambda ix: ix.search(["foo_bar"], 5), InvalidOptionError),
        (lambda ix: ix.search(["!!"], 5), InvalidOptionError),
        (lambda ix: ix.search("cell", 5), TypeError),
        (lambda ix: ix.search([3], 5), TypeError),
        (lambda ix: ix.search(["cell"], 5, allowed=np.array([3, 1], dtype=np.int64)),
         InvalidOptionError),
        (lambda ix: ix.search(["cell"], 5, allowed=np.array([1.0])), TypeError),
        (lambda ix: ix.search(["cell"], 5, allowed=[1, 2]), TypeError),
        (lambda ix: ix.add(np.array([1, 2], dtype=np.int64), ["a"]), InvalidOptionError),
        (lambda ix: ix.add(np.array([1.0]), ["a"]), TypeError),
        (lambda ix: ix.add(np.array([[1]], dtype=np.int64), ["a"]), TypeError),
        (lambda ix: ix.add(np.array([1], dtype=np.int64), "a"), TypeError),
        (lambda ix: ix.add(np.array([1], dtype=np.int64), [b"a"]), TypeError),
        (lambda ix: ix.remove([1]), TypeError),
    ],
)  # fmt: skip
def test_bad_input_raises_typed_errors(call, exc) -> None:
    ix = KeywordIndex()
    ix.add(np.array([1, 2], dtype=np.int64), ["cells divide", "a cell"])
    with pytest.raises(exc):
        call(ix)
    assert len(ix) == 2  # a refused call changes nothing
    assert issubclass(InvalidOptionError, ValueError)


def test_results_are_ordered_and_finite(pair) -> None:
    ix, _, _ = pair
    ids, scores = ix.search(["cell", "protein", "gene"], 1000)
    assert ids.dtype == np.int64 and scores.dtype == np.float64
    assert np.all(np.isfinite(scores)) and np.all(scores > 0)
    order = sorted(zip((-scores).tolist(), ids.tolist(), strict=True))
    assert [i for _, i in order] == ids.tolist()
    assert math.isclose(float(scores[0]), float(scores.max()))
