"""Evaluation on the agent setting: short, dated notes queried in plain words.

Three sets live in ``eval/`` of the repository (see eval/README.md for how they were
written and the baseline figures):

- ``agent``: stores of about 30, 300 and 3,000 notes of six projects, each larger store
  holding the smaller one plus distractors, and 330 labelled queries of nine kinds
  (exact, paraphrase, cjk, operator, misspelling, filtered, stopwords, none);
- ``temporal``: questions that name a time ("last Tuesday", "三天前", "since 2026-10-01")
  over notes dated across six months, with a fixed ``now``, plus control questions without
  time words;
- ``conversations``: long multi-session conversations, one turn per memory, one store per
  conversation, with questions whose evidence is one or more turns.

Each set is two JSONL files: ``memories.jsonl`` (``key``, ``store``, ``content`` and the
memory's fields) and ``queries.jsonl`` (``id``, ``store``, ``query``, ``kind``, ``options``,
``relevant`` = {memory key: grade}), plus ``meta.json``. Every store is built through the
public API (:func:`cortex.open`, ``Engine.add_many``) in a SQLite file that is cached per
(set, store, hash of its memories, schema, model) under ``$CORTEX_EVAL_CACHE`` (default: a
``cortex-agent-eval`` folder in the system's temp dir), so repeated tuning runs only search.
Every search runs with ``record=False``: an evaluation must not change what it measures.

The ranking metrics are those of :mod:`cortex.eval` (nDCG@10, Recall@k, MRR@10). Queries of
kind ``none`` have no relevant memory: their right answer is empty, and they count only in
the abstention accuracy (the share that came back empty); the other queries count in the
ranking metrics and in the share that came back non-empty.

``python -m cortex.agent_eval --set agent --split test`` prints the table;
``--option alpha=0.3`` changes any :class:`cortex.Options` field; ``--json`` prints the
report as JSON; ``--plot out.png`` draws it (needs matplotlib).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from cortex.errors import CortexError, ImportFileError, InvalidOptionError
from cortex.eval import mrr_at_k, ndcg_at_k, recall_at_k

__all__ = [
    "MODES",
    "SETS",
    "EvalSet",
    "QueryOutcome",
    "Report",
    "build_store",
    "content_words",
    "evaluate_set",
    "load_set",
    "main",
    "shared_words",
    "split_of",
]

#: The sets shipped in eval/ of the repository, by name.
SETS = ("agent", "temporal", "conversations")
MODES = ("hybrid", "keyword", "semantic")
#: Results fetched per query: the deepest cut-off any metric reads.
DEPTH = 25
CUTOFFS = (5, 10, 25)


# --------------------------------------------------------------------------- words
# Words that carry no topic: English function words, question words, and the auxiliaries of
# plain questions ("how do we", "what did I"). A paraphrase query shares no other word with
# the notes it is labelled with.
FUNCTION_WORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing done down during each
    few for from further had has have having he her here hers him his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our
    ours out over own same she should so some such than that the their theirs them then there
    these they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours us s t don let get got ever
    many much per""".split()  # noqa: SIM905 (a word list reads better as text)
)

_TOKEN = re.compile(r"[^\W_]+")
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def content_words(text: str) -> set[str]:
    """The lowercased words of `text` that carry content: not function words, not CJK (a CJK
    run has no word boundaries; CJK queries are checked by their own labels)."""
    return {
        w
        for w in (t.lower() for t in _TOKEN.findall(text))
        if w not in FUNCTION_WORDS and not _CJK_CHAR.search(w)
    }


def _stem(word: str) -> str:
    for suffix in ("ations", "ation", "ments", "ment", "ings", "ing", "ies", "ied", "ers", "er",
                   "ed", "es", "ly", "s"):  # fmt: skip
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _same_word(a: str, b: str) -> bool:
    """Whether two words are forms of one word, generously: equal stems, one a prefix of the
    other ("prod" / "production", "config" / "configuration"), or a long common prefix."""
    if a == b or _stem(a) == _stem(b):
        return True
    short, long_ = sorted((a, b), key=len)
    if len(short) >= 4 and long_.startswith(short):
        return True
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    return common >= 6


def shared_words(query: str, text: str) -> set[tuple[str, str]]:
    """Pairs (query word, text word) that are forms of one content word."""
    note = content_words(text)
    return {(q, n) for q in content_words(query) for n in note if _same_word(q, n)}


# --------------------------------------------------------------------------- the data
@dataclass(slots=True)
class EvalSet:
    """One evaluation set: memories of one or more stores and the queries over them."""

    name: str
    root: Path
    meta: dict[str, Any]
    memories: list[dict[str, Any]]
    queries: list[dict[str, Any]]
    data_hash: str

    @property
    def stores(self) -> list[str]:
        return [str(s) for s in self.meta["stores"]]

    def members(self, store: str) -> list[dict[str, Any]]:
        """The memories of `store`. In a nested set (agent) a store holds every memory of the
        stores listed before it too: the 3,000 store contains the 300 and the 30."""
        order = self.stores
        if store not in order:
            raise InvalidOptionError(f"{self.name} has no store {store!r}; it has {order}")
        if self.meta.get("nested"):
            upto = set(order[: order.index(store) + 1])
            return [m for m in self.memories if str(m["store"]) in upto]
        return [m for m in self.memories if str(m["store"]) == store]


def _default_root() -> Path:
    """eval/ of the repository this module runs from (python/cortex/ -> ../../eval)."""
    return Path(__file__).resolve().parents[2] / "eval"


def load_set(name_or_path: str | Path) -> EvalSet:
    """Read a set by name (``agent``, ``temporal``, ``conversations``) or from a folder."""
    root = Path(name_or_path)
    if str(name_or_path) in SETS and not root.is_dir():
        root = _default_root() / str(name_or_path)
    try:
        meta = json.loads((root / "meta.json").read_text(encoding="utf-8"))
        raw = (root / "memories.jsonl").read_bytes()
        memories = [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]
        qtext = (root / "queries.jsonl").read_text(encoding="utf-8")
        queries = [json.loads(line) for line in qtext.splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise ImportFileError(
            f"{root}: not an evaluation set ({exc}); pass --set {'|'.join(SETS)} "
            "or a folder holding meta.json, memories.jsonl and queries.jsonl"
        ) from None
    digest = hashlib.sha256(raw).hexdigest()[:16]
    return EvalSet(str(meta.get("name", root.name)), root, meta, memories, queries, digest)


def split_of(query_id: str) -> str:
    """``tune`` or ``test``, by a hash of the query id: about half each, stable forever."""
    return "tune" if hashlib.sha256(query_id.encode()).digest()[0] % 2 == 0 else "test"


def record_of(memory: Mapping[str, Any]) -> dict[str, Any]:
    """The ``add_many`` record of a memory of a set: its key goes into the metadata."""
    rec: dict[str, Any] = {"content": memory["content"], "metadata": {"key": memory["key"]}}
    for name in ("project", "session", "source_path", "chunk_index", "category"):
        if memory.get(name) is not None:
            rec[name] = memory[name]
    if memory.get("created_at"):
        rec["created_at"] = datetime.fromisoformat(memory["created_at"])
    return rec


# --------------------------------------------------------------------------- building
def cache_dir() -> Path:
    env = os.environ.get("CORTEX_EVAL_CACHE")
    return Path(env) if env else Path(tempfile.gettempdir()) / "cortex-agent-eval"


def _model_id() -> str:
    try:
        from cortex.model import model_info

        return model_info().model_id
    except CortexError:
        return "no-model"


def build_store(
    evalset: EvalSet,
    store: str,
    *,
    cache: Path | None = None,
    rebuild: bool = False,
    model_id: str | None = None,
    progress: Any = None,
) -> tuple[Path, dict[int, str]]:
    """The database of `store` (built once, then reused) and its memory id -> key map.

    The cache entry is named by the set, the store, a hash of the store's memories, the
    schema version and the embedding model, so a change to any of them builds a new database.
    """
    from cortex import open as open_engine
    from cortex.store import SCHEMA_VERSION

    model = model_id if model_id is not None else _model_id()
    members = evalset.members(store)
    # keyed by this store's own memories: a change to a larger store's distractors
    # leaves the smaller stores cached
    data = json.dumps(members, sort_keys=True, ensure_ascii=False).encode()
    digest = hashlib.sha256(data).hexdigest()
    tag = hashlib.sha256(f"{digest}|{SCHEMA_VERSION}|{model}".encode()).hexdigest()
    root = (cache or cache_dir()) / f"{evalset.name}-{store}-{tag[:12]}"
    db, ids_file = root / "cortex.db", root / "ids.json"
    if rebuild and root.exists():
        shutil.rmtree(root)
    if not ids_file.exists():
        root.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=root.parent))
        try:
            mapping: dict[int, str] = {}
            with open_engine(work / "cortex.db") as engine:
                for start in range(0, len(members), 500):
                    part = members[start : start + 500]
                    got = engine.add_many(record_of(m) for m in part)
                    mapping.update(zip(got, (m["key"] for m in part), strict=True))
                    if progress is not None:
                        progress(min(start + 500, len(members)), len(members))
            (work / "ids.json").write_text(json.dumps({str(k): v for k, v in mapping.items()}))
            if root.exists():  # another run finished it first
                shutil.rmtree(work)
            else:
                work.rename(root)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    ids = {int(k): v for k, v in json.loads(ids_file.read_text()).items()}
    return db, ids


# --------------------------------------------------------------------------- running
@dataclass(slots=True)
class QueryOutcome:
    """What one query returned under one mode, and its metrics."""

    id: str
    store: str
    kind: str
    mode: str
    ranked: list[str]
    relevant: dict[str, int]
    ndcg10: float = 0.0
    recall: dict[int, float] = field(default_factory=dict)
    mrr10: float = 0.0

    @property
    def empty(self) -> bool:
        return not self.ranked

    @property
    def answerable(self) -> bool:
        return any(g > 0 for g in self.relevant.values())


def score(outcome: QueryOutcome) -> QueryOutcome:
    """Fill the metrics of `outcome` (cortex.eval's definitions)."""
    if outcome.answerable:
        outcome.ndcg10 = ndcg_at_k(outcome.ranked, outcome.relevant, 10)
        outcome.recall = {k: recall_at_k(outcome.ranked, outcome.relevant, k) for k in CUTOFFS}
        outcome.mrr10 = mrr_at_k(outcome.ranked, outcome.relevant, 10)
    return outcome


def summarise(outcomes: Sequence[QueryOutcome]) -> dict[str, Any]:
    """Mean metrics of answerable queries plus both abstention accuracies."""
    ans = [o for o in outcomes if o.answerable]
    none = [o for o in outcomes if not o.answerable]
    out: dict[str, Any] = {"queries": len(outcomes), "answerable": len(ans), "none": len(none)}
    if ans:
        n = len(ans)
        out["ndcg@10"] = sum(o.ndcg10 for o in ans) / n
        for k in CUTOFFS:
            out[f"recall@{k}"] = sum(o.recall[k] for o in ans) / n
        out["mrr@10"] = sum(o.mrr10 for o in ans) / n
        out["answered"] = sum(not o.empty for o in ans) / n  # relevant -> non-empty
    if none:
        out["abstained"] = sum(o.empty for o in none) / len(none)  # none -> empty
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}


@dataclass(slots=True)
class Report:
    set: str
    split: str
    options: dict[str, Any]
    outcomes: list[QueryOutcome]
    seconds: float
    now: str | None = None

    def table(self) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
        """mode -> store -> kind (and ``all``) -> summary."""
        out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
        for mode in dict.fromkeys(o.mode for o in self.outcomes):
            per_store: dict[str, dict[str, dict[str, Any]]] = {}
            mine = [o for o in self.outcomes if o.mode == mode]
            for store in dict.fromkeys(o.store for o in mine):
                in_store = [o for o in mine if o.store == store]
                kinds = sorted({o.kind for o in in_store})
                per_store[store] = {k: summarise([o for o in in_store if o.kind == k])
                                    for k in kinds}  # fmt: skip
                per_store[store]["all"] = summarise(in_store)
            per_store["all"] = {"all": summarise(mine)}
            for kind in sorted({o.kind for o in mine}):
                per_store["all"][kind] = summarise([o for o in mine if o.kind == kind])
            out[mode] = per_store
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "set": self.set,
            "split": self.split,
            "options": self.options,
            "now": self.now,
            "seconds": round(self.seconds, 1),
            "results": self.table(),
        }

    def text(self, conversations: bool = False) -> str:
        """The report as aligned text tables: one per store, rows = kinds, columns = modes."""
        table = self.table()
        modes = list(table)
        metrics = (
            ["recall@5", "recall@10", "recall@25", "ndcg@10"]
            if conversations
            else ["ndcg@10", "recall@10", "mrr@10", "answered", "abstained"]
        )
        short = {"ndcg@10": "nDCG", "recall@10": "R@10", "recall@5": "R@5", "recall@25": "R@25",
                 "mrr@10": "MRR", "answered": "ans", "abstained": "abst"}  # fmt: skip
        lines = [
            f"{self.set} set, split {self.split}, options {self.options or 'defaults'}"
            + (f", now {self.now}" if self.now else "")
        ]
        stores = list(next(iter(table.values()))) if table else []
        if len(stores) == 2:
            stores = stores[:1]  # one store: its table is the whole report
        if conversations and len(stores) > 2:
            stores = ["all"]  # one line per conversation is noise; the kinds say more
        for store in stores:
            kinds = list(table[modes[0]][store])
            head = f"{'store ' + store:<18}{'n':>4} " + " ".join(
                f"{m[:3] + ' ' + short[x]:>10}" for m in modes for x in metrics
            )
            lines += ["", head, "-" * len(head)]
            for kind in kinds:
                n = table[modes[0]][store][kind]["queries"]
                cells = []
                for m in modes:
                    row = table[m][store].get(kind, {})
                    cells += [f"{row[x]:>10.3f}" if x in row else f"{'':>10}" for x in metrics]
                lines.append(f"{kind:<18}{n:>4} " + " ".join(cells))
        lines.append(f"\n{len(self.outcomes)} searches in {self.seconds:.1f} s")
        return "\n".join(lines)


def _options_fields() -> set[str]:
    from cortex.options import Options

    return {f.name for f in dataclasses.fields(Options)}


def evaluate_set(
    evalset: EvalSet,
    *,
    stores: Iterable[str] | None = None,
    modes: Sequence[str] = MODES,
    split: str = "all",
    options: Mapping[str, Any] | None = None,
    cache: Path | None = None,
    rebuild: bool = False,
    progress: Any = None,
) -> Report:
    """Build (or reuse) each store, run its queries in every mode, and score them."""
    from cortex import open as open_engine
    from cortex.options import Options

    if split not in ("tune", "test", "all"):
        raise InvalidOptionError(f"split must be tune, test or all, not {split!r}")
    extra = dict(options or {})
    fields = _options_fields()
    unknown = sorted(set(extra) - fields)
    if unknown:
        raise InvalidOptionError(f"unknown option(s) {unknown}; Options has {sorted(fields)}")
    now = evalset.meta.get("now")
    if now is not None and "now" in fields and "now" not in extra:
        extra["now"] = datetime.fromisoformat(now)
    chosen = [str(s) for s in stores] if stores else evalset.stores
    missing = [s for s in chosen if s not in evalset.stores]
    if missing:
        raise InvalidOptionError(
            f"{evalset.name} has no store {', '.join(missing)}; its stores are "
            f"{', '.join(evalset.stores)}"
        )
    started = time.perf_counter()
    outcomes: list[QueryOutcome] = []
    model = _model_id()
    for store in chosen:
        queries = [
            q
            for q in evalset.queries
            if str(q["store"]) == store and (split == "all" or split_of(q["id"]) == split)
        ]
        if not queries:
            continue
        db, ids = build_store(evalset, store, cache=cache, rebuild=rebuild, model_id=model,
                              progress=progress(f"building {evalset.name}/{store}")
                              if progress else None)  # fmt: skip
        with open_engine(db) as engine:
            for mode in modes:
                for q in queries:
                    opts = Options(**{**extra, **q.get("options", {}), "mode": mode,
                                      "limit": DEPTH, "record": False})  # fmt: skip
                    results = engine.search(q["query"], opts)
                    ranked = [ids.get(r.memory.id, f"?{r.memory.id}") for r in results]
                    outcomes.append(score(QueryOutcome(
                        q["id"], store, q["kind"], mode, ranked,
                        {str(k): int(v) for k, v in q["relevant"].items()},
                    )))  # fmt: skip
    shown = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in extra.items()}
    shown.pop("now", None)
    # `now` is reported only when the searches ran against it
    applied = now if now is not None and "now" in fields else None
    return Report(evalset.name, split, shown, outcomes, time.perf_counter() - started, applied)


# --------------------------------------------------------------------------- plot
def plot(report: Report, path: str | Path) -> None:
    """nDCG@10 (Recall@10 for the temporal and conversation sets) per kind, one panel per
    store, each mode a bar; for nothing-relevant queries the abstention accuracy."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportFileError("--plot needs matplotlib: pip install matplotlib") from None
    table = report.table()
    modes = list(table)
    metric = "recall@10" if report.set in ("conversations", "temporal") else "ndcg@10"
    stores = [s for s in next(iter(table.values())) if s != "all"] or ["all"]
    if len(stores) > 3:
        stores = ["all"]
    fig, axes = plt.subplots(1, len(stores), figsize=(5.5 * len(stores), 4.2), squeeze=False)
    for ax, store in zip(axes[0], stores, strict=True):
        kinds = list(table[modes[0]][store])
        width = 0.8 / max(len(modes), 1)
        for i, mode in enumerate(modes):
            # nothing-relevant queries have no ranking: their bar is the abstention accuracy
            vals = [
                table[mode][store].get(k, {}).get("abstained" if k == "none" else metric, 0.0)
                for k in kinds
            ]
            ax.bar([j + i * width for j in range(len(kinds))], vals, width, label=mode)
        ax.set_xticks([j + width * (len(modes) - 1) / 2 for j in range(len(kinds))])
        labels = ["none (abstained)" if k == "none" else k for k in kinds]
        ax.set_xticklabels(labels, rotation=40, ha="right", fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{report.set} · store {store} · {metric}", fontsize=9)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- command line
def _parse_option(text: str) -> tuple[str, Any]:
    name, sep, raw = text.partition("=")
    if not sep or not name.strip():
        raise InvalidOptionError(f"--option takes name=value (alpha=0.3), not {text!r}")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return name.strip(), value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cortex.agent_eval",
        description="Evaluate cortex on the agent-setting sets of eval/ (see eval/README.md).",
    )
    parser.add_argument(
        "--set", default="agent", help=f"{', '.join(SETS)}, or a folder in the same layout"
    )
    parser.add_argument(
        "--size",
        "--store",
        dest="stores",
        action="append",
        help="a store of the set (agent: 30, 300, 3000); repeatable; default every store",
    )
    parser.add_argument(
        "--split",
        default="all",
        choices=("tune", "test", "all"),
        help="queries by a hash of their id: tune and test are disjoint halves",
    )
    parser.add_argument(
        "--mode",
        action="append",
        choices=MODES,
        help="repeatable; default hybrid, keyword and semantic",
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="change a cortex.Options field, e.g. alpha=0.3 min_score=0.2",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--per-query",
        action="store_true",
        help="with --json: add each query's ranked keys and metrics",
    )
    parser.add_argument("--plot", metavar="PNG", help="draw the report (needs matplotlib)")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached stores")
    args = parser.parse_args(argv)
    try:
        options = dict(_parse_option(o) for o in args.option)
        evalset = load_set(args.set)
        progress = None
        if sys.stderr.isatty():

            def progress(label: str) -> Any:
                def show(done: int, total: int) -> None:
                    print(f"\r{label}: {done}/{total}", end="\n" if done >= total else "",
                          file=sys.stderr, flush=True)  # fmt: skip

                return show

        report = evaluate_set(
            evalset,
            stores=args.stores,
            modes=args.mode or MODES,
            split=args.split,
            options=options,
            rebuild=args.rebuild,
            progress=progress,
        )
        if args.json:
            data = report.to_dict()
            if args.per_query:
                data["per_query"] = [
                    {"id": o.id, "mode": o.mode, "ranked": o.ranked[:10], "ndcg@10": o.ndcg10,
                     "recall@10": o.recall.get(10)}
                    for o in report.outcomes
                ]  # fmt: skip
            print(json.dumps(data, indent=2, ensure_ascii=False))
        else:
            print(report.text(conversations=evalset.name == "conversations"))
        if args.plot:
            plot(report, args.plot)
    except CortexError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
