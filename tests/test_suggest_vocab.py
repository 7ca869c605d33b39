"""The corrections' vocabulary from the in-memory keyword index's surface words (issue 16:
FTS5's ``fts5vocab`` walks every word's doclist to count it, the tail of first-time
searches): the same words and counts as FTS5's unstemmed index while nothing is removed,
upper bounds after (never a word no live memory's index term holds), and the same
corrections as the FTS5 read before and after deletions and updates."""

from __future__ import annotations

import random

import cortex
from cortex import suggest

_WORDS = [
    "pgbouncer", "pooling", "connections", "zookeeper", "leader", "election", "kafka",
    "topics", "partitions", "replica", "replicas", "failover", "deploying", "deployment",
    "deploys", "Café", "naïve", "Ångström", "billing", "migration", "migrations", "rollback",
    "latency", "throughput", "postgres", "postgresql", "sharding", "indexes", "indexing",
]  # fmt: skip
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _fts_words(store, first: str) -> list[tuple[str, int]]:
    return suggest._starting(store, suggest.Vocabulary(), first)


def _native_words(engine, first: str) -> list[tuple[str, int]]:
    words = engine.keyword_index.words_starting(first)
    assert words is not None, "the index answers"
    return words


def _typos(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        w = rng.choice(_WORDS).lower()
        i = rng.randrange(1, len(w))
        kind = rng.randrange(3)
        if kind == 0:
            out.append(w[:i] + w[i + 1 :])
        elif kind == 1:
            out.append(w[:i] + rng.choice(_LETTERS) + w[i:])
        else:
            out.append(w[:i] + rng.choice(_LETTERS) + w[i + 1 :])
    return [w for w in out if len(w) >= suggest.MIN_WORD]


def _corrections(engine, typos: list[str], native: bool) -> dict[str, str]:
    suggest._CACHE.clear()  # each side reads its own vocabulary
    opts = suggest._probe_options(cortex.Options(mode="keyword"))
    return suggest.corrections(
        engine.store, typos, opts, native=engine.keyword_index if native else None
    )


def test_surface_words_equal_fts5s_unstemmed_vocabulary_and_correct_alike(tmp_path) -> None:
    rng = random.Random(16)
    with cortex.open(tmp_path / "v.db", embedder=None, keyword_index="on") as engine:
        ids = [
            engine.add(
                " ".join(rng.sample(_WORDS, 4)) + f" note{i}",
                project=rng.choice(["alpha", "beta", None]),
            )
            for i in range(300)
        ]
        engine.search("pgbouncer", mode="keyword", record=False)
        assert engine.keyword_index.ready()
        for first in _LETTERS + "åé":
            assert _native_words(engine, first) == _fts_words(engine.store, first), first
        typos = _typos(rng, 300)
        fixed = _corrections(engine, typos, native=True)
        assert len(fixed) > 100
        assert fixed == _corrections(engine, typos, native=False)

        # deletions and updates: FTS5's words are all there, counts at least FTS5's
        for i in rng.sample(ids, 120):
            engine.delete(i)
        for i in rng.sample(
            [
                i
                for i in ids
                if engine.store.query(
                    "SELECT 1 FROM memories WHERE id = ? AND deleted_at IS NULL", (i,)
                )
            ],
            40,
        ):
            engine.update(i, content=" ".join(rng.sample(_WORDS, 3)))
        only = engine.add("quixotically unusual")  # a word only one memory holds...
        engine.delete(only)  # ...then none
        engine.search("pgbouncer", mode="keyword", record=False)
        for first in _LETTERS:
            native = dict(_native_words(engine, first))
            for word, n in _fts_words(engine.store, first):
                assert native.get(word, -1) >= n, (word, n, native.get(word))
        assert "quixotically" not in dict(_native_words(engine, "q"))
        # the counts only order candidates, which are then counted within the filters
        fixed = _corrections(engine, typos, native=True)
        assert fixed == _corrections(engine, typos, native=False)
        assert "quixoticaly" not in _corrections(engine, ["quixoticaly"], native=True)


def test_a_search_uses_the_index_s_words_when_it_answers(tmp_path) -> None:
    with cortex.open(tmp_path / "v.db", embedder=None, keyword_index="on") as engine:
        for i in range(6):
            engine.add(f"pgbouncer pools connections {i}", project="alpha")
        engine.add("pgbouncers elsewhere", project="beta")
        found = engine.search("pgbouncr", mode="keyword", record=False, project="alpha")
        assert found.suggestions and found.suggestions[0] == "pgbouncer"
        # the index compared its words: FTS5's vocabulary was never read
        vocab = suggest.vocabulary(engine.store)
        assert vocab is not None and not vocab.by_first and "pgbouncer" not in vocab.docs
        near = engine.keyword_index.words_near("p", "pgbouncr", 1)
        assert near == [("pgbouncer", 6, 1)]
        assert engine.keyword_index.words_starting("pgb") == [("pgbouncer", 6), ("pgbouncers", 1)]
        # a project is a wall: beta's word is never offered to alpha's search
        found = engine.search("pgbouncerz", mode="keyword", record=False, project="alpha")
        assert "pgbouncers" not in (found.suggestions or [])
