"""A query's NOT and its phrases are constraints: no result of any mode may break them.

A property over a random store and random queries, in keyword, semantic and the default
hybrid mode, with FTS5 itself as the judge (the same tokenizer: a word "held" is a word
FTS5 matches; CJK text, which has no spaces between words, is held as a substring).
Besides valid FTS5 (``a NOT b``, ``"a b"``), the forms people type that FTS5 rejects:
``a AND NOT b`` (SQL's), a leading ``NOT b``, a NOT inside an unbalanced parenthesis.
Before session 11's fix their retry as quoted words *required* the excluded word:
``delta AND NOT charlie`` found only memories holding charlie. And a query with CJK text
ran its NOT and its phrases as plain terms in every mode (the CJK tiers read no
operator): ``数据库 NOT 索引`` found the memories holding 索引.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cortex
from cortex.store import has_cjk

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
CJK = ["数据库", "索引", "很快", "部署"]
EXTRA = ["alphas", "Échec", "échec", "🚀", "charlies", "DELTA", "数据库索引", "索引很快"]
VOCAB = WORDS + CJK + EXTRA

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder) -> Iterator[cortex.Engine]:
    rng = random.Random(11)
    path = Path(tmp_path_factory.mktemp("constraints")) / "c.db"
    with cortex.open(path, embedder=embedder) as e:
        e.add_many(
            [
                {"content": " ".join(rng.choice(VOCAB) for _ in range(rng.randint(1, 9))),
                 "project": rng.choice(["p", "q", None])}
                for _ in range(160)
            ]
        )  # fmt: skip
        yield e


def _holders(e: cortex.Engine, phrase: str) -> set[int]:
    """The memories holding `phrase`: as FTS5 reads it (stems, diacritics), or, for CJK
    text (which has no spaces between words), as a substring."""
    if has_cjk(phrase):
        rows = e.store.query(
            "SELECT id FROM memories WHERE instr(lower(content), lower(?)) > 0", (phrase,)
        )
    else:
        rows = e.store.query(
            "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?",
            ('"' + phrase.replace('"', '""') + '"',),
        )
    return {int(r[0]) for r in rows}


TEMPLATES = [
    ("{a} NOT {b}", "not"),
    ("{a} {c} NOT {b}", "not"),
    ("({a} OR {c}) NOT {b}", "not"),
    ('"{a}" NOT "{b}"', "not"),
    ("{a} AND NOT {b}", "not"),  # invalid FTS5: retried, the NOT kept
    ("{a} {c} AND NOT {b}", "not"),
    ("NOT {b}", "not"),  # invalid: nothing asked for
    ("({a} OR {c} AND NOT {b}", "not"),  # unbalanced
    ('"{a} {c}"', "phrase"),
    ('"{a} {c}" {b}', "phrase"),
]


@SETTINGS
@given(
    template=st.sampled_from(TEMPLATES),
    a=st.sampled_from([*WORDS, *CJK, "alphas", "échec"]),
    b=st.sampled_from([*WORDS, *CJK, "échec"]),
    c=st.sampled_from([*WORDS, *CJK]),
    mode=st.sampled_from(["keyword", "semantic", "hybrid"]),
    project=st.sampled_from([None, "p"]),
)
def test_no_result_breaks_a_not_or_a_phrase(
    store: cortex.Engine, template: tuple[str, str], a: str, b: str, c: str, mode: str,
    project: str | None,
) -> None:  # fmt: skip
    form, kind = template
    if kind == "not" and b in (a, c):
        return  # "x NOT x" asks for nothing
    query = form.format(a=a, b=b, c=c)
    got = store.search(query, mode=mode, project=project, limit=50, record=False)
    ids = {r.memory.id for r in got}
    if kind == "not":
        held = ids & _holders(store, b)
        assert not held, (query, mode, [store.get(i).content for i in held])
    else:
        phrase = f"{a} {c}"
        assert ids <= _holders(store, phrase), (query, mode)
    if project is not None:
        assert {r.memory.project for r in got} <= {project}


def test_the_retry_of_an_invalid_not_keeps_it_and_says_so(store: cortex.Engine) -> None:
    holders = _holders(store, "charlie")
    for mode in ("keyword", "semantic", "hybrid"):
        got = store.search("delta AND NOT charlie", mode=mode, limit=50, record=False)
        assert got, mode  # delta without charlie exists in the store
        assert not {r.memory.id for r in got} & holders
        assert any("without charlie" in n for n in got.notices), got.notices
        nothing = store.search("NOT charlie", mode=mode, limit=50, record=False)
        assert not nothing
        assert any("excludes words but asks for none" in n for n in nothing.notices)


def test_a_cjk_not_or_phrase_holds_in_every_mode(store: cortex.Engine) -> None:
    for query, excluded, phrase in (
        ("数据库 NOT 索引", "索引", None),
        ('"数据库索引" NOT 很快', "很快", "数据库索引"),
        ("数据库 AND NOT 部署", "部署", None),
        ('"索引很快"', None, "索引很快"),
        ("数据库 NOT alpha", "alpha", None),
    ):
        for mode in ("keyword", "semantic", "hybrid"):
            got = {r.memory.id for r in store.search(query, mode=mode, limit=50, record=False)}
            if excluded is not None:
                assert not got & _holders(store, excluded), (query, mode)
            if phrase is not None:
                assert got <= _holders(store, phrase), (query, mode)
        # and a constraint that leaves matches leaves them found
    assert store.search("数据库 NOT 索引", mode="keyword", limit=50, record=False)


def test_a_not_holds_on_both_backends(any_engine: cortex.Engine) -> None:
    """The same cases on SQLite and PostgreSQL (whose keyword leg is its own code)."""
    e = any_engine
    texts = ["数据库索引 很快", "数据 库 索引 分开", "索引数据库 reversed", "数据库 部署",
             "delta charlie", "delta bravo", "charlie only", "bravo echo"]  # fmt: skip
    ids = dict(zip(e.add_many([{"content": t} for t in texts]), texts, strict=True))
    for query, excluded, found in (
        ("delta AND NOT charlie", "charlie", {"delta bravo"}),
        ("NOT charlie", "charlie", set()),
        ("数据库 NOT 索引", "索引", {"数据库 部署"}),
        ('"数据库索引" NOT 很快', "很快", set()),
        ("数据库 AND NOT 部署", "部署", None),
    ):
        for mode in ("keyword", "semantic", "hybrid"):
            got = {ids[r.memory.id] for r in e.search(query, mode=mode, limit=50, record=False)}
            assert not {t for t in got if excluded in t}, (query, mode, got)
            if found is not None and mode == "keyword":
                assert got == found, (query, got)
