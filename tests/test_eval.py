"""The retrieval metrics against hand-computed cases, and a small `cortex eval` run on a
slice of SciFact (the full runs are benchmarks, see BENCHMARKS.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import cortex
from cortex import eval as ev

from .conftest import ROOT, run_cli


def _find_scifact() -> Path | None:
    """The shared SciFact folder (read in place, never copied into the repository):
    $CORTEX_SCIFACT, else ../shared/data/scifact beside the checkout, else /work/shared."""
    import os

    candidates = [os.environ.get("CORTEX_SCIFACT"), ROOT.parent / "shared" / "data" / "scifact",
                  "/work/shared/data/scifact"]  # fmt: skip
    for c in candidates:
        if c and (Path(c) / "qrels" / "test.tsv").exists():
            return Path(c)
    return None


SCIFACT = _find_scifact()

# Where the shared data is not mounted, the same run goes over a tiny dataset written for
# the project: different numbers, the same code path and the same assertions of shape.
TINY_CORPUS = {
    "d1": ("Blue-green deploys", "We switch traffic between two identical environments."),
    "d2": ("Database migrations", "Schema changes run forward-only before the release."),
    "d3": ("On-call", "Pages go to the primary engineer and escalate after fifteen minutes."),
    "d4": ("Caching", "Redis keeps sessions for thirty minutes with sliding expiry."),
    "d5": ("Postmortems", "Every incident gets a written postmortem within a week."),
    "d6": ("Code review", "Two approvals are required before merging to main."),
    "d7": ("Backups", "The database is backed up nightly and restores are tested monthly."),
    "d8": ("Feature flags", "New features ship dark behind flags and roll out gradually."),
}
TINY_QUERIES = {
    "q1": ("how do we switch traffic during a deploy", {"d1": 1}),
    "q2": ("schema migrations before a release", {"d2": 1}),
    "q3": ("who gets paged for incidents", {"d3": 1, "d5": 1}),
    "q4": ("database backups and restores", {"d7": 1}),
    "q5": ("merging needs approvals", {"d6": 1}),
}


def test_ndcg_hand_computed() -> None:
    rel = {"a": 1, "b": 1}
    assert ev.ndcg_at_k(["a", "b", "x"], rel, 10) == pytest.approx(1.0)
    # relevant at ranks 2 and 3: (1/log2 3 + 1/log2 4) / (1 + 1/log2 3)
    expected = (1 / math.log2(3) + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    assert ev.ndcg_at_k(["x", "a", "b"], rel, 10) == pytest.approx(expected)
    assert ev.ndcg_at_k(["x", "y"], rel, 10) == 0.0
    # graded: the ideal order puts grade 2 first
    graded = {"a": 2, "b": 1}
    dcg = 1 / 1 + 2 / math.log2(3)
    idcg = 2 / 1 + 1 / math.log2(3)
    assert ev.ndcg_at_k(["b", "a"], graded, 10) == pytest.approx(dcg / idcg)
    # the cut-off applies: a hit at rank 11 counts for nothing at k = 10
    assert ev.ndcg_at_k([f"x{i}" for i in range(10)] + ["a"], rel, 10) == 0.0


def test_recall_and_mrr_hand_computed() -> None:
    rel = {"a": 1, "b": 1, "c": 1, "z": 0}
    ranked = ["x", "a", "y", "b"]
    assert ev.recall_at_k(ranked, rel, 2) == pytest.approx(1 / 3)
    assert ev.recall_at_k(ranked, rel, 4) == pytest.approx(2 / 3)
    assert ev.recall_at_k(ranked, {}, 4) == 0.0
    assert ev.mrr_at_k(ranked, rel, 10) == pytest.approx(1 / 2)
    assert ev.mrr_at_k(["z", "x"], rel, 10) == 0.0  # grade 0 is not relevant
    assert ev.mrr_at_k(["x", "a"], rel, 1) == 0.0


def _tiny(tmp_path: Path) -> Path:
    out = tmp_path / "tiny"
    (out / "qrels").mkdir(parents=True)
    (out / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": d, "title": a, "text": b}) + "\n"
            for d, (a, b) in TINY_CORPUS.items()
        )
    )
    (out / "queries.jsonl").write_text(
        "".join(
            json.dumps({"_id": q, "text": text}) + "\n" for q, (text, _) in TINY_QUERIES.items()
        )
    )
    (out / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(
            f"{q}\t{d}\t{s}\n" for q, (_, rel) in TINY_QUERIES.items() for d, s in rel.items()
        )
    )
    return out


def _slice(tmp_path: Path, queries: int = 12, others: int = 60) -> Path:
    if SCIFACT is None:
        return _tiny(tmp_path)
    """A BEIR folder holding `queries` judged test queries and every judged document plus
    `others` distractors: small enough for CI (abstracts take ~0.1 s each to embed here),
    real enough that the metrics mean something."""
    qrels: dict[str, dict[str, int]] = {}
    lines = (SCIFACT / "qrels" / "test.tsv").read_text().splitlines()
    for line in lines[1:]:
        q, d, s = line.strip().split("\t")
        if q in qrels or len(qrels) < queries:
            qrels.setdefault(q, {})[d] = int(s)
    wanted = {d for docs in qrels.values() for d in docs}
    out = tmp_path / "slice"
    (out / "qrels").mkdir(parents=True)
    with (SCIFACT / "corpus.jsonl").open() as src, (out / "corpus.jsonl").open("w") as dst:
        extra = 0
        for line in src:
            doc = json.loads(line)["_id"]
            if doc in wanted or extra < others:
                extra += doc not in wanted
                dst.write(line)
    with (SCIFACT / "queries.jsonl").open() as src, (out / "queries.jsonl").open("w") as dst:
        for line in src:
            if json.loads(line)["_id"] in qrels:
                dst.write(line)
    (out / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{q}\t{d}\t{s}\n" for q, docs in qrels.items() for d, s in docs.items())
    )
    return out


def test_eval_on_a_slice_of_scifact(tmp_path: Path, embedder) -> None:
    data = _slice(tmp_path)
    dataset = ev.load_beir(data, "test")
    n = 12 if SCIFACT is not None else len(TINY_QUERIES)
    assert len(dataset.queries) == n
    with cortex.open(tmp_path / "eval.db", embedder=embedder) as engine:
        results = {r.name: r for r in ev.run(engine, dataset)}
    assert set(results) == set(ev.CONFIGS)
    for r in results.values():
        assert r.queries == n
        for value in (r.ndcg_at_10, r.recall_at_10, r.recall_at_100, r.mrr_at_10):
            assert 0.0 <= value <= 1.0
        assert r.recall_at_100 >= r.recall_at_10
    # sane bounds: far above chance, and fusion not below the weaker of its two parts
    assert results["keyword"].ndcg_at_10 > 0.5
    assert results["semantic"].ndcg_at_10 > 0.5
    worst_single = min(results["keyword"].ndcg_at_10, results["semantic"].ndcg_at_10)
    assert results["hybrid-linear"].ndcg_at_10 >= worst_single


def test_cortex_eval_command_table_json_and_plot(tmp_path: Path) -> None:
    data = _slice(tmp_path, queries=3, others=10)
    db = tmp_path / "e.db"
    out = run_cli("eval", str(data), "--eval-db", str(db), "--config", "keyword", "--json")
    assert out.code == 0, out.err
    rows = json.loads(out.out)
    n = 3 if SCIFACT is not None else len(TINY_QUERIES)
    assert [r["name"] for r in rows] == ["keyword"] and rows[0]["queries"] == n
    png = tmp_path / "m.png"
    table = run_cli("eval", str(data), "--eval-db", str(db), "--plot", str(png))
    assert table.code == 0, table.err
    assert "hybrid-linear" in table.out and "nDCG@10" in table.out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = run_cli("eval", str(tmp_path / "nope"))
    assert bad.code == 1 and "not a BEIR dataset" in bad.err
