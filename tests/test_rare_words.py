"""Rare words as names (issue 11; BENCHMARKS.md, "Ranking: rare words as names").

A lower-case word rare in English (cortex.commonness: its position in the model's
WordPiece vocabulary) that no memory of the searched projects holds counts as an unknown
name; when it is much of the question and the best match ignores it, the hybrid search
does not answer. Real vocabulary, real model, real SQLite (and PostgreSQL for the
backend's own parts), the agent set's own notes for the regression examples.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cortex
from cortex import agent_eval, commonness

plan_module = importlib.import_module("cortex.search.plan")


# ------------------------------------------------------------------ the vocabulary reader


def _tokenizer(path: Path, vocab: Any, kind: str = "WordPiece") -> Path:
    path.write_text(json.dumps({"model": {"type": kind, "vocab": vocab}}), encoding="utf-8")
    return path


def _ordered(words: list[str], start: int = 1996) -> dict[str, int]:
    """A vocabulary whose whole words start at `start`, in the order given."""
    vocab = {"[PAD]": 0, "[UNK]": 100, "a": 1037, "##s": 2015}
    vocab.update({w: start + i for i, w in enumerate(words)})
    return vocab


def test_the_real_vocabulary_is_ordered_as_the_brief_says() -> None:
    vocab = commonness.ranks()
    assert vocab is not None
    for word, position in (("the", 1996), ("huge", 4121), ("agree", 5993),
                           ("compensation", 9430), ("penetration", 20015)):  # fmt: skip
        assert commonness.rank(word, vocab) == position
    for word in ("glossary", "kafka", "monorepo", "invoice"):
        assert commonness.rank(word, vocab) is None  # no whole-word entry: rarer still
    assert not any(w.startswith("##") for w in vocab)  # word pieces are no words
    threshold = plan_module.RARE_WORD_RANK
    assert commonness.rare("compensation", threshold, vocab)
    assert commonness.rare("Glossary", threshold, vocab)  # looked up lower-cased
    assert not any(commonness.rare(w, threshold, vocab) for w in ("agree", "handle", "huge"))


def test_a_missing_or_foreign_tokenizer_makes_no_word_rare(tmp_path: Path) -> None:
    words = ["the", "of", "and"]
    assert commonness.ranks(tmp_path / "none.json") is None
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    assert commonness.ranks(bad) is None
    assert commonness.ranks(_tokenizer(tmp_path / "bpe.json", _ordered(words), "BPE")) is None
    assert commonness.ranks(_tokenizer(tmp_path / "list.json", ["the", "of"])) is None
    # "the" far down the list: not a vocabulary ordered by frequency
    late = _tokenizer(tmp_path / "late.json", _ordered(words, start=9000))
    assert commonness.ranks(late) is None
    nomodel = tmp_path / "nomodel.json"
    nomodel.write_text(json.dumps({"vocab": _ordered(words)}), encoding="utf-8")
    assert commonness.ranks(nomodel) is None
    good = commonness.ranks(_tokenizer(tmp_path / "good.json", _ordered(words)))
    assert good is not None and good["the"] == 1996 and "##s" not in good


def test_the_vocabulary_is_read_once_per_process(tmp_path: Path) -> None:
    path = _tokenizer(tmp_path / "once.json", _ordered(["the", "ledger"]))
    first = commonness.ranks(path)
    path.unlink()  # a second read would find nothing
    assert commonness.ranks(path) is first
    assert first is not None and first["ledger"] == 1997


def test_a_word_is_as_common_as_the_form_it_inflects() -> None:
    vocab = _ordered(["the", "policy", "stop", "run", "decide", "quick", "box", "cluster"])
    assert commonness.rank("policies", vocab) == vocab["policy"]
    assert commonness.rank("stopped", vocab) == vocab["stop"]
    assert commonness.rank("running", vocab) == vocab["run"]
    assert commonness.rank("deciding", vocab) == vocab["decide"]
    assert commonness.rank("quickly", vocab) == vocab["quick"]
    assert commonness.rank("boxes", vocab) == vocab["box"]
    assert commonness.rank("CLUSTERS", vocab) == vocab["cluster"]
    assert commonness.rank("glossary", vocab) is None


def test_short_words_and_compounds() -> None:
    vocab = _ordered(["the", "call", "blue", "green", "premise"] + [f"w{i}" for i in range(50)])
    # under MIN_LENGTH letters a word is never rare (abbreviations say nothing)
    assert not commonness.rare("xyz", 0, vocab)
    # a compound is as rare as its rarest part of MIN_LENGTH letters or more
    assert not commonness.rare("on-call", 2000, vocab)  # "on" too short, "call" common
    assert commonness.rare("on-prem", 2000, vocab)  # "prem": no whole word
    assert commonness.rare("blue-green", 1998, vocab)  # green is 2000, past 1998
    assert not commonness.rare("blue-green", 2000, vocab)
    assert not commonness.rare("k8s", 0, vocab)  # digits: a name, not a rare word


def test_a_misspelling_of_an_english_word_is_no_rare_name() -> None:
    vocab = commonness.ranks()
    assert vocab is not None
    for typo in ("drfit", "adoptoin", "certficate"):  # one edit from drift, adoption, ...
        assert commonness.misspelt(typo, vocab), typo
    for word in ("glossary", "monorepo", "compensation", "kafak"):
        assert not commonness.misspelt(word, vocab), word  # in vocab, or no neighbour
    edits = commonness.one_edit("ab")
    assert {"a", "b", "ba", "xab", "axb", "abx", "xb", "ax"} <= edits and "ab" not in edits
    assert len(commonness.one_edit("abc")) == len(set(commonness.one_edit("abc")))


# ------------------------------------------------------------------ the plan


def test_the_plan_names_rare_lower_case_words_of_hybrid_queries_only() -> None:
    plan = plan_module.plan
    opts = cortex.Options()
    p = plan("what is the on-call compensation policy?", opts)
    assert p.rare == ("compensation",) and p.named == ()
    p = plan("did the Kafka glossary drfit?", opts)
    # the typo is rare too: the search leaves it out once no memory holds it (misspelt)
    assert p.named == ("Kafka",) and p.rare == ("glossary", "drfit")
    assert plan("what is the on-call compensation policy?", opts.replace(mode="keyword")).rare == ()
    assert plan("compensation NOT policy", opts).rare == ()  # FTS5 syntax: as typed
    assert plan("报销 compensation 政策", opts).rare == ("compensation",)  # CJK: never rare


def test_keyword_search_and_version_never_read_the_vocabulary(tmp_path: Path) -> None:
    """The vocabulary is read by a hybrid search only (issue 16's lazy imports)."""
    db = tmp_path / "c.db"
    with cortex.open(db) as engine:
        engine.add("The on-call rotation changes every Monday.", project="p")
    probe = (
        "import sys, json, contextlib, io, cortex.cli\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    with contextlib.suppress(SystemExit):\n"
        "        cortex.cli.main(sys.argv[1:])\n"
        "print(json.dumps({'out': out.getvalue(), 'read': 'cortex.commonness' in sys.modules}))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    query = "on-call compensation"
    runs = (
        (["--version"], False),
        (["--db", str(db), "search", query, "--mode", "keyword"], False),
        (["--db", str(db), "search", query], True),  # hybrid, the default
    )
    for args, read in runs:
        done = subprocess.run(
            [sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True,
            env=env, timeout=300,
        )  # fmt: skip
        assert json.loads(done.stdout)["read"] is read, args


# ------------------------------------------------------------------ the fixed examples


@pytest.fixture(scope="module")
def agent() -> agent_eval.EvalSet:
    return agent_eval.load_set("agent")


@pytest.fixture(scope="module")
def stores(
    agent: agent_eval.EvalSet, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Path, dict[int, str]]]:
    cache = tmp_path_factory.mktemp("agent-eval")
    return {s: agent_eval.build_store(agent, s, cache=cache) for s in ("30", "300")}


def _search(
    stores: dict[str, tuple[Path, dict[int, str]]],
    agent: agent_eval.EvalSet,
    store: str,
    query: str,
) -> tuple[list[str], cortex.Results]:
    from datetime import datetime

    db, ids = stores[store]
    now = datetime.fromisoformat(agent.meta["now"])
    with cortex.open(db) as engine:
        found = engine.search(query, cortex.Options(record=False, now=now, explain=True))
    return [ids[r.memory.id] for r in found], found


@pytest.mark.parametrize(
    ("store", "query"),
    [
        ("30", "where do we keep the quill translation glossary?"),
        ("300", "when is the next penetration test of the ledger API?"),
        ("300", "what is the on-call compensation policy?"),
    ],
)
def test_a_question_about_a_rare_word_no_memory_holds_comes_back_empty(
    stores: Any, agent: agent_eval.EvalSet, store: str, query: str
) -> None:
    ranked, found = _search(stores, agent, store, query)
    assert ranked == []
    assert any("no memory holds" in n for n in found.notices)


def test_the_rule_is_what_empties_it(stores: Any, agent: agent_eval.EvalSet) -> None:
    query = "what is the on-call compensation policy?"
    old = plan_module.RARE_WORD_RANK
    try:
        plan_module.RARE_WORD_RANK = 0
        ranked, _ = _search(stores, agent, "300", query)
    finally:
        plan_module.RARE_WORD_RANK = old
    assert ranked  # answered with a note about the on-call rotation before
    db, _ = stores["300"]
    with cortex.open(db) as engine:
        *_, candidates, _ = engine._pipeline.candidates(query, cortex.Options(record=False))
    assert candidates and all(c.ignored and c.answer_base == 0.0 for c in candidates)
    assert all(c.unknown_name < 1.0 for c in candidates)


@pytest.mark.parametrize(
    ("store", "query", "key"),
    [
        # paraphrases: made of words no memory holds, found by meaning alone
        ("30", "map pictures came back empty at high magnification", "c04"),
        ("30", "billing amounts a penny wrong", "c06"),
        # a rare word no memory holds, a small part of the question the note answers
        ("30", "why did the Kafka consumer keep rebalancing?", "c12"),
        # misspellings: of a word the store holds, of an English word
        ("30", "terrafrom", "c03"),
        ("300", "chronyd clock drfit", "h04"),
    ],
)
def test_answers_the_rule_keeps(
    stores: Any, agent: agent_eval.EvalSet, store: str, query: str, key: str
) -> None:
    ranked, found = _search(stores, agent, store, query)
    assert ranked[:1] == [key], query
    assert all(r.explain is not None and r.explain["ignored"] == 0.0 for r in found)


def test_the_rare_word_counts_by_its_share_of_the_keyword_weight(
    stores: Any, agent: agent_eval.EvalSet
) -> None:
    _, found = _search(stores, agent, "30", "why did the Kafka consumer keep rebalancing?")
    assert "no memory holds rebalancing: matches count for less" in found.notices
    factors = {r.explain["unknown_name"] for r in found if r.explain is not None}
    assert len(factors) == 1
    (factor,) = factors
    assert 0.5 < factor < 1.0  # sqrt(1 - share): rebalancing is a third of the weight


# ------------------------------------------------------------------ both backends


@pytest.fixture
def notes_engine(any_engine: cortex.Engine, agent: agent_eval.EvalSet) -> Iterator[Any]:
    members = agent.members("30")
    ids = any_engine.add_many(agent_eval.record_of(m) for m in members)
    yield any_engine, dict(zip(ids, (m["key"] for m in members), strict=True))


def test_both_backends_judge_rare_words_alike(notes_engine: Any, agent: agent_eval.EvalSet) -> None:
    from datetime import datetime

    engine, keys = notes_engine
    now = datetime.fromisoformat(agent.meta["now"])
    opts = cortex.Options(record=False, now=now, explain=True)

    def ranked(query: str) -> list[str]:
        return [keys[r.memory.id] for r in engine.search(query, opts)]

    assert ranked("where do we keep the quill translation glossary?") == []
    assert ranked("map pictures came back empty at high magnification")[:1] == ["c04"]
    assert ranked("terrafrom")[:1] == ["c03"]
    pipe = engine._pipeline
    wall = cortex.Options()
    assert pipe._keyword.near(["terrafrom", "glossary", "kafak"], wall) == {"terrafrom", "kafak"}
    # the near spelling is looked for inside the wall only
    assert pipe._keyword.near(["terrafrom"], cortex.Options(project="no-such")) == set()
    cosine = pipe._semantic.cosines_of("terraform state", [min(keys)])
    assert set(cosine) == {min(keys)} and -1.0 <= cosine[min(keys)] <= 1.0
