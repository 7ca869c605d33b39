"""Write eval/agent/{memories,queries}.jsonl and meta.json from the hand-written material.

    PYTHONPATH=python python eval/agent/generate.py

Deterministic (seeded): running it again rewrites the same bytes. It refuses to write a set
that breaks its own rules: a label pointing outside its store, a filtered label outside the
filter, a paraphrase sharing a content word with its note, a nothing-relevant query whose
every word occurs in the store, or a distractor holding every content word of a query.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
import sys
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from notes import CORE, MORE, Note  # noqa: E402
from queries import QUERIES  # noqa: E402
from routine import Versions, routine  # noqa: E402

from cortex.agent_eval import _CJK_CHAR, _same_word, _stem, content_words, shared_words  # noqa: E402

SEED = 20261123
#: The clock searches run against (Options.now, once cortex has it): after the last note.
NOW = "2026-11-23T12:00:00+00:00"
SIZES = (30, 300, 3000)
TIER300_KINDS = ["deploy", "deploy", "bump", "review", "ci"]
TIER3000_KINDS = ["deploy", "deploy", "bump", "review", "standup", "standup", "ci", "reading",
                  "dashboard", "zh", "ja"]  # fmt: skip


def _stamp(rng: random.Random, day: str) -> str:
    return f"{day}T{rng.randint(7, 19):02d}:{rng.randint(0, 59):02d}:00+00:00"


def build_memories(rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    chunks: Counter[str] = Counter()

    def add(key: str, store: int, day: str, project: str | None, category: str, content: str,
            extra: dict[str, Any]) -> None:  # fmt: skip
        m: dict[str, Any] = {"key": key, "store": store, "content": content, "project": project,
                             "category": category, "created_at": _stamp(rng, day)}  # fmt: skip
        if extra.get("session"):
            m["session"] = extra["session"]
        if extra.get("source"):
            path = f"{extra['source']}{day}.md"
            m["source_path"], m["chunk_index"] = path, chunks[path]
            chunks[path] += 1
        out.append(m)

    notes: list[tuple[int, Note]] = [(30, n) for n in CORE] + [(300, n) for n in MORE]
    for store, (key, day, project, category, content, extra) in notes:
        add(key, store, day, project, category, content, extra)
    seen = {m["content"] for m in out}
    versions = Versions()
    for store, kinds, prefix in ((300, TIER300_KINDS, "r"), (3000, TIER3000_KINDS, "d")):
        n = 0
        while len(out) < store:
            note = routine(rng, versions, kinds)
            if note["content"] in seen:
                continue
            seen.add(note["content"])
            n += 1
            extra = {"source": "journal/"} if note["category"] == "standup" else {}
            if note["category"] == "deploy" and rng.random() < 0.3:
                extra["session"] = f"s-{note['project']}-{note['date'][5:7]}{note['date'][8:]}"
            add(f"{prefix}{n:04d}", store, note["date"], note["project"], note["category"],
                note["content"], extra)  # fmt: skip
    return out


def members(memories: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    return [m for m in memories if m["store"] <= size]


def fts_matches(mems: list[dict[str, Any]], expression: str) -> set[str]:
    """Keys of the memories FTS5 matches with `expression`, on the index cortex uses for it:
    the Porter-stemmed one for words, the unstemmed one when the expression has a prefix."""
    tokenizer = "unicode61 remove_diacritics 2"
    if "*" not in expression:
        tokenizer = "porter " + tokenizer
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(key UNINDEXED, content, tokenize='{tokenizer}')")
    db.executemany("INSERT INTO t VALUES (?, ?)", [(m["key"], m["content"]) for m in mems])
    got = {k for (k,) in db.execute("SELECT key FROM t WHERE t MATCH ?", (expression,))}
    db.close()
    return got


def _terms(query: str) -> list[str]:
    """Content words plus CJK runs of a query (for the distractor and none checks)."""
    words = sorted(content_words(query))
    runs = [r for piece in query.split() for r in re.findall(r"[\u3040-\u30ff\u3400-\u9fff]+", piece)]
    return words + runs


class Holders:
    """Which memories hold a term: a CJK run as a substring; a word in any form (loosely:
    `_same_word`; strictly: the same stem, or one a prefix of the other of five letters)."""

    def __init__(self, mems: list[dict[str, Any]]) -> None:
        self.mems = mems
        self.by_word: dict[str, set[str]] = {}
        for m in mems:
            for w in content_words(m["content"]):
                self.by_word.setdefault(w, set()).add(m["key"])
        self.cache: dict[tuple[str, bool], set[str]] = {}

    def __call__(self, term: str, strict: bool = False) -> set[str]:
        if (term, strict) not in self.cache:
            if _CJK_CHAR.search(term):
                got = {m["key"] for m in self.mems if term in m["content"].lower()}
            else:
                got = set()
                for w, keys in self.by_word.items():
                    if strict:
                        same = _stem(term) == _stem(w) or (min(len(term), len(w)) >= 5 and (
                            term.startswith(w) or w.startswith(term)))  # fmt: skip
                    else:
                        same = _same_word(term, w)
                    if same:
                        got |= keys
            self.cache[(term, strict)] = got
        return self.cache[(term, strict)]


def _passes(m: dict[str, Any], options: dict[str, Any]) -> bool:
    for name, value in options.items():
        if name == "source_prefix":
            if not str(m.get("source_path") or "").startswith(value):
                return False
        elif m.get(name) != value:
            return False
    return True


def build_queries(memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    problems: list[str] = []
    largest = members(memories, SIZES[-1])
    holders = Holders(largest)
    by_key = {m["key"]: m for m in largest}
    for size in SIZES:
        store = {m["key"]: m for m in members(memories, size)}
        for kind, items in QUERIES[size].items():
            for n, (query, relevant, options) in enumerate(items, 1):
                qid = f"{kind}-{size}-{n:02d}"
                rel = dict(relevant)
                if kind == "operator":
                    matched = fts_matches(list(store.values()), query)
                    if not 1 <= len(matched) <= 10:
                        problems.append(f"{qid} {query!r} matches {len(matched)} memories")
                    rel = {k: 2 for k in sorted(matched)}
                for key in rel:
                    if key not in store:
                        problems.append(f"{qid}: {key} is not in store {size}")
                    elif not _passes(store[key], options):
                        problems.append(f"{qid}: {key} does not pass {options}")
                if kind == "paraphrase":
                    for key in rel:
                        if shared := shared_words(query, store[key]["content"]):
                            problems.append(f"{qid}: shares {sorted(shared)} with {key}")
                terms = _terms(query)
                if kind == "none":
                    if rel:
                        problems.append(f"{qid}: a none query has labels")
                    if all(holders(term) for term in terms):
                        problems.append(f"{qid}: every word of {query!r} occurs in the store")
                elif kind not in ("operator", "paraphrase", "misspelling") and terms:
                    # no routine note (a distractor, in this store or a larger one) may hold
                    # the whole query
                    later = {m["key"] for m in largest if m["key"][0] in "rd"} - set(rel)
                    for term in terms:
                        later &= holders(term, True)
                    hits = sorted(k for k in later if _passes(by_key[k], options))
                    if hits:
                        problems.append(f"{qid}: distractor {hits[0]} holds {terms}")
                out.append({"id": qid, "store": str(size), "query": query, "kind": kind,
                            "options": options, "relevant": rel})  # fmt: skip
    if problems:
        raise SystemExit("the set breaks its rules:\n  " + "\n  ".join(problems))
    return out


def main(argv: list[str] | None = None) -> int:
    """Write the set; with --check, only say whether the files on disk are what this script
    writes (the test suite runs it so: the committed data always obey the rules above)."""
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    files: dict[str, str] = {}
    rng = random.Random(SEED)
    memories = build_memories(rng)
    queries = build_queries(memories)
    files["memories.jsonl"] = (
        "".join(json.dumps({**m, "store": str(m["store"])}, ensure_ascii=False) + "\n"
                for m in memories))  # fmt: skip
    files["queries.jsonl"] = (
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries)
    )
    meta = {"name": "agent", "stores": [str(s) for s in SIZES], "nested": True, "seed": SEED,
            "now": NOW, "kinds": sorted({q["kind"] for q in queries})}  # fmt: skip
    files["meta.json"] = json.dumps(meta, indent=2) + "\n"
    if check:
        stale = [n for n, text in files.items()
                 if not (HERE / n).exists() or (HERE / n).read_text(encoding="utf-8") != text]
        if stale:
            print(f"{HERE.name}: {stale} differ from what generate.py writes; run it")
        return 1 if stale else 0
    for name, text in files.items():
        (HERE / name).write_text(text, encoding="utf-8")
    per = Counter((q["store"], q["kind"]) for q in queries)
    print(f"{len(memories)} memories, {len(queries)} queries")
    for size in SIZES:
        print(size, {k: per[(str(size), k)] for k in meta["kinds"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
