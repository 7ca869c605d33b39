"""Words of a memory as the keyword index sees them, written as ``tsvector`` literals.

The SQLite backend indexes with FTS5's ``porter unicode61 remove_diacritics 2`` (word
queries) and ``unicode61 remove_diacritics 2`` (prefix queries); cortex._native has the
same tokenizer (the in-memory keyword index answers exactly as FTS5). This backend uses it
too, so a word is the same term on both backends, and BM25 sees the same lengths.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from cortex._native import KeywordIndex

__all__ = ["Indexed", "exact_tokens", "index_text", "stemmed_tokens", "tsvector_literal"]

# unicode61's token characters: letters, digits (and private-use); everything else splits.
_WORD = re.compile(r"[^\W_]+")
#: PostgreSQL's limits: a lexeme of at most 2047 bytes, positions up to 16383, and 256
#: positions kept a lexeme (more are dropped by the server too).
_MAX_LEXEME_BYTES = 2047
_MAX_POS = 16383
_MAX_POSITIONS = 256


def _fold(text: str) -> str:
    """Lowercase with diacritics removed (remove_diacritics 2)."""
    text = text.lower()
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def exact_tokens(text: str) -> list[str]:
    """The words of `text` as the unstemmed index holds them."""
    return _WORD.findall(_fold(text))


def stemmed_tokens(text: str) -> list[str]:
    """The words of `text` as the stemmed index holds them (FTS5's porter tokenizer)."""
    return list(KeywordIndex.tokenize(text))


def tsvector_literal(tokens: list[str], *, checked: bool = False) -> str:
    """The tsvector input text of `tokens` in order (position = index + 1).

    `checked`: the caller knows no token holds a quote or backslash or is too long for
    a lexeme, and there are at most 16,383 of them; the literal is then one entry per
    token (``'a':1 'b':2 'a':3``: the server merges repeats and keeps 256 positions a
    word, as to_tsvector does), built without a Python loop over the tokens.
    """
    if checked and len(tokens) <= _MAX_POS:
        return " ".join([f"'{tok}':{i}" for i, tok in enumerate(tokens, 1)])
    parts = []
    for i, tok in enumerate(tokens, 1):
        if len(tok) * 4 > _MAX_LEXEME_BYTES and len(tok.encode()) > _MAX_LEXEME_BYTES:
            continue
        if "'" in tok or "\\" in tok:
            tok = tok.replace("\\", "\\\\").replace("'", "''")
        parts.append(f"'{tok}':{min(i, _MAX_POS)}")
    return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Indexed:
    """What the store writes beside a memory's content for keyword search."""

    tsv: str
    tsv_simple: str
    doc_len: int


def index_text(content: str) -> Indexed:
    stemmed = stemmed_tokens(content)
    exact = exact_tokens(content)
    # Tokens are letters and digits only (unicode61): never a quote or a backslash; the
    # literal is built without a loop a token unless one could be too long for a lexeme.
    return Indexed(
        tsvector_literal(stemmed, checked=_short(stemmed)),
        tsvector_literal(exact, checked=_short(exact)),
        len(stemmed),
    )


def _short(tokens: list[str]) -> bool:
    return not tokens or max(map(len, tokens)) * 4 <= _MAX_LEXEME_BYTES
