"""Does a word's nearest held word, by all-MiniLM-L6-v2's input-embedding table, tell a
name the store lacks ("Twilio") from a word the store says otherwise ("CTO" for the note
naming the chief technology officer)? Issue 11's fallback idea, measured.

For each query of the agent set's split (and SciFact's claims) that holds words no memory
of the searched projects holds (as benches/ignored_features.py finds them) and that the
hybrid search answers: each such word's vector is the mean of its WordPiece tokens' rows
of the model's word-embedding table (``embeddings.word_embeddings.weight`` of cortex's
fp32 graph), and two nearest-word cosines are taken:

- ``store``: the largest cosine to any word the searched project's memories hold (their
  words as ``[a-z0-9]+`` runs of the lower-cased text, each embedded the same way);
- ``note``: the largest cosine to any word of the best answer.

The query's figure is the smallest over its missing words (the word least like anything
held). A rule "no answer when that figure is under T" is then scored as
benches/ignored_features.py scores its rules: nothing-relevant queries emptied (right),
answerable queries and SciFact claims emptied (wrong).

    CORTEX_EVAL_CACHE=... python benches/input_nearest.py [--split tune]
        [--scifact DATA --scifact-db DB --scifact-split train]

BENCHMARKS.md, "Ranking: a cross-encoder's answerability (issue 11; 2026-11-27)", quotes
what it printed.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from tokenizers import Tokenizer

import cortex
from cortex import agent_eval as ae
from cortex import eval as ev

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ignored_features import agent_queries, features, scifact_claims

TABLE = "embeddings.word_embeddings.weight"
WORD = re.compile(r"[a-z0-9]+")


class Table:
    """Word vectors from the model's input-embedding table (mean of a word's pieces)."""

    def __init__(self, model_dir: Path) -> None:
        graph = onnx.load(str(model_dir / "model.onnx"))
        table = next(numpy_helper.to_array(i) for i in graph.graph.initializer if i.name == TABLE)
        self.table = np.asarray(table, dtype=np.float64)
        self.tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tok.no_padding()
        self.tok.no_truncation()
        self.cache: dict[str, np.ndarray] = {}

    def vec(self, word: str) -> np.ndarray:
        v = self.cache.get(word)
        if v is None:
            ids = self.tok.encode(word, add_special_tokens=False).ids
            m = self.table[ids].mean(axis=0) if ids else np.zeros(self.table.shape[1])
            v = m / (np.linalg.norm(m) or 1.0)
            self.cache[word] = v
        return v

    def matrix(self, words: list[str]) -> np.ndarray:
        return np.stack([self.vec(w) for w in words]) if words else np.zeros((0, 384))


def words_of(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def nearest(table: Table, word: str, held: np.ndarray, held_words: list[str]) -> tuple[float, str]:
    """The largest cosine from `word` to a held word other than itself, and that word."""
    if not held_words:
        return 0.0, ""
    sims = held @ table.vec(word)
    for i in np.argsort(-sims):
        if held_words[i] != word:
            return float(sims[i]), held_words[i]
    return 0.0, ""


def measure(
    table: Table, f: dict[str, Any], held: np.ndarray, held_words: list[str], note: str
) -> tuple[float, float, str]:
    """(store figure, note figure, the words' nearest held words) for one query."""
    nw = sorted(words_of(note))
    nm = table.matrix(nw)
    store, near, shown = [], [], []
    for w in f["words"]:
        for piece in WORD.findall(w.lower()) or [w.lower()]:
            s, sw = nearest(table, piece, held, held_words)
            n, _ = nearest(table, piece, nm, nw)
            store.append(s)
            near.append(n)
            shown.append(f"{piece}->{sw}")
    return min(store), min(near), ",".join(shown)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--split", default="tune")
    ap.add_argument("--scifact", type=Path)
    ap.add_argument("--scifact-db", type=Path)
    ap.add_argument("--scifact-split", default="train")
    args = ap.parse_args()
    s = ae.load_set("agent")
    now = datetime.fromisoformat(s.meta["now"])
    table: Table | None = None
    rows: list[tuple[str, float, float, str, str]] = []  # (kind, store, note, nearest, query)
    for store in s.stores:
        db, _ = ae.build_store(s, store)
        con = sqlite3.connect(str(db))
        by_project: dict[str, set[str]] = {}
        for project, content in con.execute(
            "SELECT project_id, content FROM memories WHERE deleted_at IS NULL"
        ):
            by_project.setdefault(str(project), set()).update(words_of(content))
        con.close()
        with cortex.open(db) as engine:
            if table is None:
                emb = engine._pipeline._semantic._semantic.embedder()
                table = Table(Path(emb._located.onnx.path).parent)
            held_of: dict[str, tuple[np.ndarray, list[str]]] = {}
            for q, opts in agent_queries(s, store, args.split, now):
                f = features(engine, q["query"], opts)
                if f is None:
                    continue
                found = list(engine.search(q["query"], opts))
                if not found:
                    continue
                project = opts.project if isinstance(opts.project, str) else None
                key = project or "*"
                if key not in held_of:
                    vocab: set[str] = set()
                    for p, ws in by_project.items():
                        if project is None or p == project:
                            vocab |= ws
                    hw = sorted(vocab)
                    held_of[key] = (table.matrix(hw), hw)
                hm, hw = held_of[key]
                st, nt, shown = measure(table, f, hm, hw, found[0].memory.content)
                rows.append((q["kind"], st, nt, shown, q["query"]))
    claims: list[tuple[float, float, float]] = []  # (store, note, nDCG@10)
    total = 0
    if args.scifact is not None and args.scifact_db is not None and table is not None:
        data = ev.load_beir(args.scifact, args.scifact_split)
        total = len(data.queries)
        con = sqlite3.connect(str(args.scifact_db))
        vocab = set()
        for (content,) in con.execute("SELECT content FROM memories WHERE deleted_at IS NULL"):
            vocab |= words_of(content)
        con.close()
        hw = sorted(vocab)
        hm = table.matrix(hw)
        with cortex.open(args.scifact_db) as engine:
            ids = ev._doc_ids(engine)
            for qid, text, opts, f in scifact_claims(engine, data):
                found = list(engine.search(text, opts))
                if not found:
                    continue
                st, nt, shown = measure(table, f, hm, hw, found[0].memory.content)
                ranked = [ids[r.memory.id] for r in found]
                claims.append((st, nt, ev.ndcg_at_k(ranked, data.qrels.get(qid, {}), 10)))
                rows.append(("scifact", st, nt, shown, text))
    for kind, st, nt, shown, query in sorted(rows, key=lambda r: r[1]):
        print(f"{kind:10} store {st:.3f} note {nt:.3f} {shown[:44]:44} | {query[:60]}")
    for which, i in (("store", 1), ("note", 2)):
        print(f"\nrule: answered, a missing word's nearest held word ({which}) under T -> empty")
        for t in (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6):
            right = sum(1 for r in rows if r[0] == "none" and r[i] < t)
            wrong = sum(1 for r in rows if r[0] not in ("none", "scifact") and r[i] < t)
            unheld = sum(1 for r in rows if r[0] == "unheld" and r[i] < t)
            lost = [c[2] for c in claims if c[i - 1] < t]
            print(f"T {t:.2f}: none emptied {right} of "
                  f"{sum(1 for r in rows if r[0] == 'none')}, answerable emptied {wrong} "
                  f"(unheld {unheld}); SciFact claims emptied {len(lost)} of {len(claims)}, "
                  f"nDCG@10 -{sum(lost) / max(total, 1):.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
