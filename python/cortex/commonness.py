"""How common a word is in English, read from the embedding model's WordPiece vocabulary.

BERT's uncased vocabulary (the tokenizer of all-MiniLM-L6-v2, ``tokenizer.json``'s
``model.vocab``) lists its whole words by their frequency in the corpus it was built
from, after the reserved entries and the single characters: "the" is 1996, "next" 2279,
"huge" 4121, "agree" 5993, "compensation" 9430, "penetration" 20015, "ledger" 27106, and
"glossary", "kafka" or "monorepo" have no whole-word entry at all. A word's position is
the one statistic cortex has of how generic the word is in English, which no statistic of
a store can say (BENCHMARKS.md, "Ranking: rare words as names").

The vocabulary is read once per process, at the first look-up: only a hybrid search
asks (cortex.search.plan), never `cortex --version` or a keyword search. A model folder
whose tokenizer is not such a vocabulary (another tokenizer type, no "the" among its
first words, an unreadable file) answers None: no word is rare then.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from pathlib import Path

__all__ = ["WORD_RANKS_FROM", "misspelt", "one_edit", "rank", "ranks", "rare"]

#: Where BERT's uncased vocabulary starts listing whole words by frequency ("the"): a
#: vocabulary whose "the" is not in the first WORD_RANKS_FROM + 100 entries is not one.
WORD_RANKS_FROM = 1996

#: The shortest word looked up: shorter ones are abbreviations whose rank says nothing.
MIN_LENGTH = 4

_LOCK = threading.Lock()
_CACHE: dict[str, Mapping[str, int] | None] = {}


def ranks(path: str | Path | None = None) -> Mapping[str, int] | None:
    """The whole-word entries of the WordPiece vocabulary in `path` (a tokenizer.json;
    default the active model's) with their positions, read once per process; None when
    the file is missing or unreadable, or is not a frequency-ordered WordPiece vocabulary."""
    key = _default_key() if path is None else str(path)
    with _LOCK:
        if key in _CACHE:
            return _CACHE[key]
    found = _read(Path(key))
    with _LOCK:
        _CACHE[key] = found
    return found


def _default_key() -> str:
    """The active model's tokenizer.json (cortex.model_dir.resolve_model_dir: ~11 us)."""
    from cortex.model_dir import TOKENIZER_FILE, resolve_model_dir

    return str(resolve_model_dir()[0] / TOKENIZER_FILE)


def _read(path: Path) -> Mapping[str, int] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        model = data["model"]
        vocab = model["vocab"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(model, dict) or model.get("type") != "WordPiece":
        return None
    if not isinstance(vocab, dict):
        return None
    the = vocab.get("the")
    if not isinstance(the, int) or the > WORD_RANKS_FROM + 100:
        return None
    return {w: i for w, i in vocab.items() if isinstance(i, int) and not w.startswith("##")}


def _variants(word: str) -> list[str]:
    """`word` and the forms it may be an inflection of (plural, past, -ing, -ly)."""
    out = [word]
    if word.endswith("ies") and len(word) > 4:
        out.append(word[:-3] + "y")
    if word.endswith("es") and len(word) > 4:
        out.append(word[:-2])
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        out.append(word[:-1])
    if word.endswith("ed") and len(word) > 4:
        out += [word[:-2], word[:-1]]
        if len(word) > 5 and word[-3] == word[-4]:
            out.append(word[:-3])  # stopped -> stop
    if word.endswith("ing") and len(word) > 5:
        out += [word[:-3], word[:-3] + "e"]
        if word[-4] == word[-5]:
            out.append(word[:-4])  # running -> run
    if word.endswith("ly") and len(word) > 4:
        out.append(word[:-2])
    return out


def rank(word: str, vocab: Mapping[str, int]) -> int | None:
    """The position of `word` (lower-cased, or of the word it inflects: its best) among
    `vocab`'s whole words; None when it has no whole-word entry."""
    best: int | None = None
    for form in _variants(word.lower()):
        i = vocab.get(form)
        if i is not None and (best is None or i < best):
            best = i
    return best


def rare(word: str, threshold: int, vocab: Mapping[str, int] | None = None) -> bool:
    """Whether `word` is rare in English: at least MIN_LENGTH letters, and past
    `threshold` in the vocabulary or not a whole word of it. A compound (on-call,
    blue-green) is as rare as its rarest part of MIN_LENGTH letters or more. Without a
    vocabulary (`vocab` None and the active model's unreadable) no word is."""
    if vocab is None:
        vocab = ranks()
        if vocab is None:
            return False
    parts = [p for p in word.replace("_", "-").replace(".", "-").split("-") if p]
    parts = [p for p in parts if len(p) >= MIN_LENGTH and p.isalpha() and p.isascii()]
    for part in parts:
        i = rank(part, vocab)
        if i is None or i > threshold:
            return True
    return False


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def misspelt(word: str, vocab: Mapping[str, int]) -> bool:
    """Whether `word` (no whole word of `vocab`, MIN_LENGTH letters or more) is one edit
    (a letter dropped, added, changed, or two swapped) from a whole word of `vocab` of
    MIN_LENGTH letters or more: "drfit" (drift), "adoptoin" (adoption). Such a word is a
    misspelling of an English word, not a name. (~0.1 ms: the edits are looked up as
    they are, not as inflections.)"""
    w = word.lower()
    if len(w) < MIN_LENGTH or not (w.isalpha() and w.isascii()) or rank(w, vocab) is not None:
        return False
    return any(len(e) >= MIN_LENGTH and e in vocab for e in one_edit(w))


def one_edit(word: str) -> set[str]:
    """Every string one edit from `word` (lower-case ASCII letters): a letter dropped,
    added or changed, or two adjacent letters swapped; `word` itself left out."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    out = {a + b[1:] for a, b in splits if b}
    out |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    out |= {a + c + b[1:] for a, b in splits if b for c in _LETTERS}
    out |= {a + c + b for a, b in splits for c in _LETTERS}
    out.discard(word)
    return out
