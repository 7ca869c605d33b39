"""Retrieval evaluation on datasets in BEIR layout: nDCG@10, Recall@10/100 and MRR@10.

The metric functions follow the definitions of BEIR (pytrec_eval): linear gain,
``DCG@k = Σ rel_i / log2(i + 1)`` over ranks i = 1..k, ideal DCG from the judged documents
sorted by grade; Recall@k is the share of relevant (grade > 0) documents in the top k;
MRR@k the reciprocal rank of the first relevant one (0 when none is in the top k).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cortex.errors import ImportFileError

__all__ = [
    "Dataset",
    "Evaluation",
    "evaluate",
    "import_corpus",
    "load_beir",
    "mrr_at_k",
    "ndcg_at_k",
    "recall_at_k",
]

Qrels = Mapping[str, Mapping[str, int]]


def ndcg_at_k(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k of one ranked list of doc ids against graded judgements."""
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    wanted = {doc for doc, g in relevant.items() if g > 0}
    if not wanted:
        return 0.0
    return len(wanted.intersection(ranked[:k])) / len(wanted)


def mrr_at_k(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    for i, doc in enumerate(ranked[:k]):
        if relevant.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


@dataclass(slots=True)
class Dataset:
    corpus: dict[str, tuple[str, str]]  # doc id -> (title, text)
    queries: dict[str, str]  # query id -> text, only those judged in the split
    qrels: dict[str, dict[str, int]]


def load_beir(root: str | Path, split: str = "test") -> Dataset:
    """Read `corpus.jsonl`, `queries.jsonl` and `qrels/<split>.tsv` from `root`."""
    root = Path(root)
    try:
        corpus: dict[str, tuple[str, str]] = {}
        with (root / "corpus.jsonl").open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    d = json.loads(line)
                    corpus[str(d["_id"])] = (d.get("title") or "", d.get("text") or "")
        qrels: dict[str, dict[str, int]] = {}
        with (root / "qrels" / f"{split}.tsv").open(encoding="utf-8") as f:
            for n, line in enumerate(f):
                parts = line.strip().split("\t")
                if len(parts) < 3 or (n == 0 and not parts[2].lstrip("-").isdigit()):
                    continue
                qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
        queries: dict[str, str] = {}
        with (root / "queries.jsonl").open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    d = json.loads(line)
                    if str(d["_id"]) in qrels:
                        queries[str(d["_id"])] = d["text"]
    except (OSError, KeyError, json.JSONDecodeError) as exc:
        raise ImportFileError(f"{root}: not a BEIR dataset ({exc})") from None
    return Dataset(corpus, queries, qrels)


def import_corpus(
    engine: Any, dataset: Dataset, *, batch: int = 1000, progress: Callable[..., None] | None = None
) -> dict[int, str]:
    """Add every document (title, blank line, text) and return memory id -> doc id."""
    mapping: dict[int, str] = {}
    items = list(dataset.corpus.items())
    for start in range(0, len(items), batch):
        part = items[start : start + batch]
        ids = engine.add_many(
            {"content": f"{title}\n\n{text}".strip(), "metadata": {"doc_id": doc}}
            for doc, (title, text) in part
        )
        mapping.update(zip(ids, (doc for doc, _ in part), strict=True))
        if progress is not None:
            progress(min(start + batch, len(items)), len(items))
    return mapping


@dataclass(slots=True)
class Evaluation:
    name: str
    queries: int
    ndcg_at_10: float
    recall_at_10: float
    recall_at_100: float
    mrr_at_10: float
    seconds: float
    per_query: dict[str, float] = field(default_factory=dict)  # nDCG@10 per query

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "queries": self.queries,
            "ndcg@10": round(self.ndcg_at_10, 4),
            "recall@10": round(self.recall_at_10, 4),
            "recall@100": round(self.recall_at_100, 4),
            "mrr@10": round(self.mrr_at_10, 4),
            "seconds": round(self.seconds, 2),
        }


def evaluate(
    name: str,
    search: Callable[[str], Sequence[str]],
    dataset: Dataset,
    *,
    progress: Callable[..., None] | None = None,
) -> Evaluation:
    """Run `search` (query text -> ranked doc ids, at least 100 deep) over every query."""
    ndcg = r10 = r100 = mrr = 0.0
    per_query: dict[str, float] = {}
    started = time.perf_counter()
    total = len(dataset.queries)
    for n, (qid, text) in enumerate(dataset.queries.items(), 1):
        ranked = list(search(text))
        rel = dataset.qrels.get(qid, {})
        q_ndcg = ndcg_at_k(ranked, rel, 10)
        per_query[qid] = q_ndcg
        ndcg += q_ndcg
        r10 += recall_at_k(ranked, rel, 10)
        r100 += recall_at_k(ranked, rel, 100)
        mrr += mrr_at_k(ranked, rel, 10)
        if progress is not None:
            progress(n, total)
    elapsed = time.perf_counter() - started
    count = max(total, 1)
    return Evaluation(
        name, total, ndcg / count, r10 / count, r100 / count, mrr / count, elapsed, per_query
    )


#: The configurations `cortex eval` runs by default: (name, options changes).
CONFIGS: dict[str, dict[str, Any]] = {
    "keyword": {"mode": "keyword"},
    "semantic": {"mode": "semantic"},
    "hybrid": {"mode": "hybrid"},  # the defaults (evidence fusion, calibrated scores)
    "hybrid-rrf": {"mode": "hybrid", "fusion": "rrf"},
    "hybrid-linear": {"mode": "hybrid", "fusion": "linear"},
}


def run(
    engine: Any,
    dataset: Dataset,
    configs: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    depth: int = 100,
    progress: Callable[[str], Callable[..., None] | None] | None = None,
) -> list[Evaluation]:
    """Import `dataset` into `engine` (unless it already holds it) and evaluate every
    configuration: each is :class:`cortex.Options` defaults changed by its mapping, with
    `limit=depth` and recording off (an evaluation must not reinforce what it measures)."""
    from cortex.options import Options

    mapping = _doc_ids(engine)
    if not mapping:
        mapping = import_corpus(
            engine, dataset, progress=progress("importing") if progress else None
        )
    out = []
    for name, changes in (configs or CONFIGS).items():
        opts = Options(**{**changes, "limit": depth, "record": False})

        def search(text: str, opts: Options = opts) -> list[str]:
            return [mapping[r.memory.id] for r in engine.search(text, opts)]

        out.append(evaluate(name, search, dataset, progress=progress(name) if progress else None))
    return out


def _doc_ids(engine: Any) -> dict[int, str]:
    """memory id -> doc id of a database an earlier evaluation filled."""
    return dict(engine.store.metadata_values("doc_id"))


def plot(evaluations: Sequence[Evaluation], path: str | Path, title: str = "") -> None:
    """A grouped bar chart of the four metrics per configuration (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportFileError(
            "--plot needs matplotlib: pip install 'cortex-memory[plot]' (or matplotlib)"
        ) from None
    metrics = [("nDCG@10", "ndcg_at_10"), ("Recall@10", "recall_at_10"),
               ("Recall@100", "recall_at_100"), ("MRR@10", "mrr_at_10")]  # fmt: skip
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / max(len(evaluations), 1)
    for i, ev in enumerate(evaluations):
        xs = [j + i * width for j in range(len(metrics))]
        values = [getattr(ev, attr) for _, attr in metrics]
        bars = ax.bar(xs, values, width, label=ev.name)
        for bar, v in zip(bars, values, strict=True):
            ax.text(bar.get_x() + bar.get_width() / 2, v + 0.01, f"{v:.3f}", ha="center",
                    va="bottom", fontsize=7)  # fmt: skip
    ax.set_xticks([j + width * (len(evaluations) - 1) / 2 for j in range(len(metrics))])
    ax.set_xticklabels([m for m, _ in metrics])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score")
    ax.set_title(title or "cortex retrieval quality")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
