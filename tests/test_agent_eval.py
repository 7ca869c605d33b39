"""The agent-setting evaluation sets (eval/) and their runner (cortex.agent_eval).

The data tests hold the committed files to the rules they were written by: labels point
into their own store, paraphrases share no content word with their notes, operator labels
are what FTS5 matches, temporal labels fall in the window their words mean relative to
the recorded `now`. The end-to-end test builds the 30-note store with the real model.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from collections import Counter
from datetime import date, datetime
from pathlib import Path

import pytest

from cortex import agent_eval
from cortex.agent_eval import (
    QueryOutcome,
    content_words,
    evaluate_set,
    load_set,
    score,
    shared_words,
    split_of,
    summarise,
)
from cortex.errors import CortexError, InvalidOptionError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache of built stores for the module: the 30 store is embedded once."""
    return tmp_path_factory.mktemp("agent-eval-cache")


@pytest.fixture(scope="module")
def agent() -> agent_eval.EvalSet:
    return load_set("agent")


@pytest.fixture(scope="module")
def temporal() -> agent_eval.EvalSet:
    return load_set("temporal")


@pytest.fixture(scope="module")
def conversations() -> agent_eval.EvalSet:
    return load_set("conversations")


@pytest.mark.parametrize("name", agent_eval.SETS)
def test_every_label_points_to_a_memory_of_its_store(name: str) -> None:
    s = load_set(name)
    keys = [m["key"] for m in s.memories]
    assert len(keys) == len(set(keys)), "memory keys are unique"
    ids = [q["id"] for q in s.queries]
    assert len(ids) == len(set(ids)), "query ids are unique"
    for m in s.memories:
        assert m["content"].strip() and m["store"] in s.stores
        datetime.fromisoformat(m["created_at"])
    members = {store: {m["key"] for m in s.members(store)} for store in s.stores}
    for q in s.queries:
        assert q["store"] in s.stores, q["id"]
        assert set(q["relevant"]) <= members[q["store"]], q["id"]
        assert all(g in (1, 2) for g in q["relevant"].values()), q["id"]
        assert q["kind"] == "none" or 2 in q["relevant"].values(), q["id"]


@pytest.mark.parametrize("name", agent_eval.SETS)
def test_the_committed_files_are_what_the_seeded_generator_writes(name: str) -> None:
    # The generator also refuses a set that breaks its rules (a distractor holding a
    # query's words, a nothing-relevant query whose words all occur in the store).
    script = ROOT / "eval" / name / "generate.py"
    env = {"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True,
                          text=True, env=env, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_agent_set_has_300_queries_and_every_kind_at_every_size(agent: agent_eval.EvalSet) -> None:
    assert len(agent.queries) >= 300
    kinds = {"exact", "paraphrase", "cjk", "operator", "misspelling", "filtered", "stopwords",
             "none"}  # fmt: skip
    per = Counter((q["store"], q["kind"]) for q in agent.queries)
    for size in ("30", "300", "3000"):
        assert len(agent.members(size)) == int(size)
        for kind in kinds:
            assert per[(size, kind)] >= 10, (size, kind)


def test_larger_stores_hold_the_smaller_ones(agent: agent_eval.EvalSet) -> None:
    small, mid, large = ({m["key"] for m in agent.members(s)} for s in ("30", "300", "3000"))
    assert small < mid < large


def test_paraphrases_share_no_content_word_with_their_notes(agent: agent_eval.EvalSet) -> None:
    content = {m["key"]: m["content"] for m in agent.memories}
    paraphrases = [q for q in agent.queries if q["kind"] == "paraphrase"]
    assert len(paraphrases) >= 30
    for q in paraphrases:
        for key in q["relevant"]:
            assert not shared_words(q["query"], content[key]), (q["id"], key)


def test_shared_words_sees_forms_of_one_word() -> None:
    assert shared_words("how we ship code to prod", "deploys before production")
    assert shared_words("configuration", "the config file")
    assert not shared_words("who answers the pager this week",
                            "The on-call rotation changes every Monday")  # fmt: skip
    assert content_words("How do we deploy it?") == {"deploy"}


def test_none_queries_have_no_labels_and_the_others_do(agent: agent_eval.EvalSet) -> None:
    text = " ".join(m["content"].lower() for m in agent.memories)
    for q in agent.queries:
        if q["kind"] == "none":
            assert q["relevant"] == {}, q["id"]
            # at least one word of the question is nowhere in the store
            words = content_words(q["query"]) | set(re.findall(r"[\u3040-\u9fff]+", q["query"]))
            assert any(w not in text for w in words), q["id"]
        else:
            assert q["relevant"], q["id"]


def test_filtered_labels_pass_their_filters(agent: agent_eval.EvalSet) -> None:
    by_key = {m["key"]: m for m in agent.memories}
    filtered = [q for q in agent.queries if q["kind"] == "filtered"]
    for q in filtered:
        assert q["options"], q["id"]
        for key in q["relevant"]:
            m = by_key[key]
            for name, value in q["options"].items():
                if name == "source_prefix":
                    assert str(m.get("source_path", "")).startswith(value), (q["id"], key)
                else:
                    assert m.get(name) == value, (q["id"], key, name)


def test_operator_labels_are_exactly_what_fts5_matches(agent: agent_eval.EvalSet) -> None:
    for q in (q for q in agent.queries if q["kind"] == "operator"):
        tokenizer = "unicode61 remove_diacritics 2"
        if "*" not in q["query"]:
            tokenizer = "porter " + tokenizer
        db = sqlite3.connect(":memory:")
        db.execute(f"CREATE VIRTUAL TABLE t USING fts5(k UNINDEXED, c, tokenize='{tokenizer}')")
        db.executemany("INSERT INTO t VALUES (?, ?)",
                       [(m["key"], m["content"]) for m in agent.members(q["store"])])  # fmt: skip
        matched = {k for (k,) in db.execute("SELECT k FROM t WHERE t MATCH ?", (q["query"],))}
        assert matched == set(q["relevant"]), q["id"]


def test_temporal_labels_agree_with_now_and_their_window(temporal: agent_eval.EvalSet) -> None:
    now = datetime.fromisoformat(temporal.meta["now"])
    assert now.weekday() == 0  # the definitions in eval/README.md assume a Monday
    by_key = {m["key"]: m for m in temporal.memories}
    assert all(datetime.fromisoformat(m["created_at"]) <= now for m in temporal.memories)
    timed = [q for q in temporal.queries if q["kind"] != "control"]
    controls = [q for q in temporal.queries if q["kind"] == "control"]
    assert len(timed) >= 100 and len(controls) >= 50
    for q in temporal.queries:
        assert q["now"] == temporal.meta["now"]
    for q in timed:
        since, until = (date.fromisoformat(d) for d in q["window"])
        assert since <= until <= now.date(), q["id"]
        for key in q["relevant"]:
            assert since <= date.fromisoformat(by_key[key]["created_at"][:10]) <= until, q["id"]
        if not q["id"].startswith("time-day"):
            # the same topic at other dates: a search blind to time cannot tell them apart
            topic = {by_key[k]["category"] for k in q["relevant"]}
            assert len(topic) == 1, q["id"]
            others = [m for m in temporal.memories
                      if m["category"] in topic and m["key"] not in q["relevant"]]  # fmt: skip
            assert len(others) >= 10, q["id"]
    time_words = re.compile(
        r"\b(yesterday|today|week|month|ago|since|before|after|between|last|monday|tuesday|"
        r"wednesday|thursday|friday|january|june|july|august|september|october|november)\b"
        r"|昨天|前天|上周|本周|这周|月|天前",
        re.IGNORECASE,
    )
    for q in controls:
        assert not time_words.search(q["query"]), q["id"]


def test_conversations_are_long_and_each_has_15_questions(
    conversations: agent_eval.EvalSet,
) -> None:
    assert len(conversations.stores) >= 10
    for store in conversations.stores:
        turns = conversations.members(store)
        assert len({t["session"] for t in turns}) >= 20, store
        assert sum(q["store"] == store for q in conversations.queries) >= 15, store
    kinds = Counter(q["kind"] for q in conversations.queries)
    assert kinds["coref"] >= 50 and kinds["multi"] >= 10


def test_metrics_on_a_hand_checked_case() -> None:
    # ranked a, x, b; a is the answer (2), b related (1):
    # DCG = 2/log2(2) + 1/log2(4) = 2.5; ideal = 2 + 1/log2(3) = 2.6309
    o = score(QueryOutcome("q", "30", "exact", "hybrid", ["a", "x", "b"], {"a": 2, "b": 1}))
    assert o.ndcg10 == pytest.approx(2.5 / (2 + 1 / 1.584962500721156))
    assert o.recall == {5: 1.0, 10: 1.0, 25: 1.0}
    assert o.mrr10 == 1.0
    late = score(QueryOutcome("r", "30", "exact", "hybrid", ["x"] * 5 + ["a"], {"a": 2}))
    assert late.recall[5] == 0.0 and late.recall[10] == 1.0
    assert late.mrr10 == pytest.approx(1 / 6)
    empty_none = score(QueryOutcome("n", "30", "none", "hybrid", [], {}))
    noisy_none = score(QueryOutcome("m", "30", "none", "hybrid", ["x"], {}))
    missed = score(QueryOutcome("s", "30", "exact", "hybrid", [], {"a": 2}))
    summary = summarise([o, late, empty_none, noisy_none, missed])
    assert summary["abstained"] == 0.5  # one of the two none queries came back empty
    assert summary["answered"] == pytest.approx(2 / 3, abs=1e-4)  # two of three answerable did
    assert summary["recall@10"] == pytest.approx(2 / 3, abs=1e-4)
    assert summary["queries"] == 5 and summary["none"] == 2


def test_split_is_stable_and_about_half(agent: agent_eval.EvalSet) -> None:
    splits = Counter(split_of(q["id"]) for q in agent.queries)
    assert set(splits) == {"tune", "test"}
    assert 0.35 < splits["tune"] / len(agent.queries) < 0.65
    assert split_of("exact-30-01") == split_of("exact-30-01")


def test_end_to_end_on_the_30_store_with_the_real_model(cache: Path) -> None:
    s = load_set("agent")
    report = evaluate_set(s, stores=["30"], modes=("hybrid", "keyword"), split="test",
                          cache=cache)  # fmt: skip
    table = report.table()
    assert set(table) == {"hybrid", "keyword"}
    expected = sum(q["store"] == "30" and split_of(q["id"]) == "test" for q in s.queries)
    assert len(report.outcomes) == 2 * expected
    for mode in table.values():
        for kinds in mode.values():
            for row in kinds.values():
                for name in ("ndcg@10", "recall@10", "mrr@10", "answered", "abstained"):
                    if name in row:
                        assert 0.0 <= row[name] <= 1.0
    # keyword search finds a rare exact term: the one kind every mode must get right
    assert table["keyword"]["30"]["exact"]["ndcg@10"] >= 0.9
    # the ranked keys are keys of the store, not database ids
    keys = {m["key"] for m in s.members("30")}
    assert all(set(o.ranked) <= keys for o in report.outcomes)
    # the built store is reused: a second run finds it in the cache
    built = sorted(cache.iterdir())
    evaluate_set(s, stores=["30"], modes=("keyword",), split="tune", cache=cache)
    assert sorted(cache.iterdir()) == built


def test_main_prints_json_and_refuses_bad_input(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORTEX_EVAL_CACHE", str(cache))
    code = agent_eval.main(["--set", "agent", "--size", "30", "--mode", "keyword", "--split",
                            "tune", "--option", "min_score=0.0", "--json"])  # fmt: skip
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["options"] == {"min_score": 0.0}
    assert data["results"]["keyword"]["30"]["all"]["queries"] > 0
    assert agent_eval.main(["--set", str(tmp_path / "nowhere")]) == 1
    assert "not an evaluation set" in capsys.readouterr().err
    assert agent_eval.main(["--set", "agent", "--option", "alhpa=0.3"]) == 1
    assert "unknown option" in capsys.readouterr().err
    assert agent_eval.main(["--set", "agent", "--size", "31"]) == 1
    assert "has no store 31; its stores are 30, 300, 3000" in capsys.readouterr().err
    with pytest.raises(InvalidOptionError):
        agent_eval._parse_option("alpha")
    assert issubclass(InvalidOptionError, CortexError)
