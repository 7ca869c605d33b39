"""Does a query that names a file find the memories referencing it? MRR@10 and hit@1 with
the code boost (cortex.search.pipeline.CODE_WEIGHT) and without it.

    python benches/bench_code_query.py [--mode hybrid] [--distractors 300]

A synthetic, seeded set (the labels are this script's own): 24 files in four folders
whose names overlap (``src/auth/session.ts`` beside ``src/auth/session_store.ts`` and
``src/billing/session.ts``). Each file has one memory that references it, written as an
agent would ("Fixed the expiry check in `src/auth/session.ts`: ..."), and two
distractors on the same topic: one naming its test file (``src/auth/session_test.ts``),
one saying the words in prose without a path. Around them, `--distractors` notes of the
agent set (eval/agent). Each query names the file and asks about it in other words ("what
went wrong in src/auth/session.ts?", "auth/session.ts changes?"). The real default model
embeds everything.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

import cortex
from cortex.search import pipeline

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ["auth", "billing", "search", "jobs"]
NAMES = ["session", "session_store", "middleware", "client", "retry", "config"]
EXTS = ["ts", "py", "go"]
TOPICS = {
    "session": ("expiry check", "sessions ended early", "compare against the server clock"),
    "session_store": ("cache eviction", "stale entries came back", "evict on write"),
    "middleware": ("token validation", "requests were rejected", "accept the rotated key"),
    "client": ("connection pool", "calls hung under load", "cap the pool at 20"),
    "retry": ("backoff", "retries stormed the API", "add jitter to the backoff"),
    "config": ("default timeout", "jobs timed out", "raise the timeout to 30 s"),
}
QUERIES = [
    "what went wrong in {path}?",
    "{base} changes?",
    "why did we touch {path}",
    "the fix in {base}",
]


def build(
    rng: random.Random, distractors: int
) -> tuple[list[dict[str, object]], list[tuple[str, str]]]:
    records: list[dict[str, object]] = []
    queries: list[tuple[str, str]] = []
    files = [(f, n, rng.choice(EXTS)) for f in FOLDERS for n in NAMES]
    for folder, name, ext in files:
        path = f"src/{folder}/{name}.{ext}"
        topic, symptom, fix = TOPICS[name]
        key = f"answer:{path}"
        records.append(
            {"key": key, "content": f"Fixed the {topic} in `{path}`: {symptom}; we {fix}."}
        )
        # a distractor naming a file of the same folder that no query names
        sibling = f"src/{folder}/{name}_test.{ext}"
        records.append(
            {"key": f"sib:{path}", "content": f"The {topic} in {sibling} fails: {symptom} again."}
        )
        prose = f"Talked about the {topic} of the {folder} {name.replace('_', ' ')}; {symptom}."
        records.append({"key": f"prose:{path}", "content": prose})
        template = rng.choice(QUERIES)
        queries.append((template.format(path=path, base=f"{folder}/{name}.{ext}"), key))
    agent = [json.loads(line) for line in (ROOT / "eval/agent/memories.jsonl").open()]
    for m in rng.sample(agent, distractors):
        records.append({"key": f"agent:{m['key']}", "content": m["content"]})
    rng.shuffle(records)
    return records, queries


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="hybrid", choices=("hybrid", "keyword", "semantic"))
    parser.add_argument("--distractors", type=int, default=300)
    args = parser.parse_args()
    records, queries = build(random.Random(7), args.distractors)
    out = {}
    with tempfile.TemporaryDirectory() as tmp, cortex.open(Path(tmp) / "c.db") as engine:
        ids = engine.add_many({"content": r["content"]} for r in records)
        key_of = {i: r["key"] for i, r in zip(ids, records, strict=True)}
        for weight in (0.0, pipeline.CODE_WEIGHT):
            pipeline.CODE_WEIGHT = weight
            rr, hit1 = [], 0
            for query, want in queries:
                found = engine.search(query, mode=args.mode, limit=10, record=False)
                keys = [key_of[r.memory.id] for r in found]
                rank = keys.index(want) + 1 if want in keys else 0
                rr.append(1.0 / rank if rank else 0.0)
                hit1 += rank == 1
            out[f"code_weight={weight}"] = {
                "queries": len(queries),
                "mrr@10": round(sum(rr) / len(rr), 4),
                "hit@1": round(hit1 / len(queries), 4),
                "found@10": round(sum(1 for r in rr if r) / len(rr), 4),
            }
    print(json.dumps({"mode": args.mode, "distractors": args.distractors, **out}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
