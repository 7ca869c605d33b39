"""The one-edit check of suggestions' corrections against the distance table it replaces
(cortex.suggest._one_apart vs edit_distance), over every pair of short words of a small
alphabet (insertions, deletions, substitutions, adjacent swaps and more)."""

from __future__ import annotations

import itertools

from cortex.suggest import _one_apart, edit_distance


def test_one_apart_is_edit_distance_one() -> None:
    words = [""] + ["".join(p) for n in range(1, 5) for p in itertools.product("abc", repeat=n)]
    found = 0
    for a in words:
        for b in words:
            want = a != b and edit_distance(a, b, 1) <= 1
            assert _one_apart(a, b) == want, (a, b)
            found += want
    assert found > 1000  # the pairs one edit apart are many, and all were checked


def test_count_is_the_number_of_hits_under_the_filters(tmp_path) -> None:
    """keyword.count (suggestions' capped count of a word's memories) says what the
    length of the quoted word's keyword search did, under a project wall and the cap."""
    import cortex
    from cortex import keyword

    words = ["deploy", "rollback", "cluster", "ghost"]
    with cortex.open(tmp_path / "c.db", embedder=None, keyword_index="off") as engine:
        for i in range(60):
            text = " ".join(w for j, w in enumerate(words[:3]) if (i >> j) & 1) or "nothing"
            engine.add(f"note {i}: {text} deployed", project="a" if i % 3 else "b")
        engine.delete(1)
        store = engine.store
        checked = 0
        for opts in (cortex.Options(), cortex.Options(project="b"), cortex.Options(project="a")):
            for word in [*words, "deployed"]:
                quoted = '"' + word + '"'
                for cap in (3, 50):
                    want = len(keyword.search(store, quoted, opts, cap).hits)
                    assert keyword.count(store, quoted, opts, cap) == want, (word, opts, cap)
                    checked += want > 0
        assert checked > 10


def test_words_the_search_matched_together_are_not_looked_up_again(tmp_path) -> None:
    """A search whose plain terms all matched one memory hands them to the suggestions
    as held (no lookup); a misspelt word is not among them and is still corrected."""
    import cortex
    from cortex import suggest

    with cortex.open(tmp_path / "c.db", embedder=None, keyword_index="off") as engine:
        engine.add("the deploy pipeline runs the rollback when the canary fails")
        engine.add("rollback steps for the billing service")
        found = engine.search("rollback canary", mode="keyword", record=False)
        assert set(found._held) == {"rollback", "canary"}
        typo = engine.search("rollbakc canary", mode="keyword", record=False)
        assert "rollbakc" not in typo._held
        assert typo.suggestions and typo.suggestions[0] == "rollback canary"
        opts = cortex.Options(mode="keyword", limit=1, record=False)
        words = ["rollbakc", "canary"]
        assert suggest.corrections(engine.store, words, opts, typo._held) == (
            suggest.corrections(engine.store, words, opts)
        )


def test_the_letter_set_filter_never_drops_a_word_two_edits_away() -> None:
    """corrections() skips the distance table for words whose sets of letters differ by
    more than two per allowed edit: never one within the limit."""
    words = [""] + ["".join(p) for n in range(1, 6) for p in itertools.product("abcd", repeat=n)]
    kept = 0
    for a in words[:200]:
        for b in words:
            if edit_distance(a, b, 2) <= 2:
                assert len(set(a).symmetric_difference(b)) <= 4, (a, b)
                kept += 1
    assert kept > 10_000


def test_corrections_read_only_their_first_letters_and_survive_a_new_connection(
    tmp_path,
) -> None:
    """A correction reads the vocabulary's words of its first two letters only (reading
    it whole counts every posting of the store), the kept vocabulary is the very one the
    next search uses while nothing is written, and a second engine on the same file (a
    connection whose temp schema never held the vocabulary table) corrects alike; a
    write starts a new vocabulary."""
    import cortex
    from cortex import suggest

    path = tmp_path / "v.db"
    with cortex.open(path, embedder=None, keyword_index="off") as engine:
        for i, text in enumerate(
            ["pgbouncer pools connections", "zookeeper holds leader election", "kafka topics"] * 3
        ):
            engine.add(f"{text} note {i}")
        found = engine.search("pgbouncr", mode="keyword", record=False)
        assert found.suggestions and found.suggestions[0] == "pgbouncer"
        vocab = suggest.vocabulary(engine.store)
        assert vocab is not None and set(vocab.by_first) <= {"p", "g"}
        assert ("pgbouncer", 3) in vocab.by_first["p"]
        assert "zookeeper" not in vocab.docs  # never read: not a candidate
    with cortex.open(path, embedder=None, keyword_index="off") as again:
        assert suggest.vocabulary(again.store) is vocab  # nothing written since
        found = again.search("zookeepr", mode="keyword", record=False)
        assert found.suggestions and found.suggestions[0] == "zookeeper"
        again.add("another note")
        assert suggest.vocabulary(again.store) is not vocab


def test_second_letter_candidates_are_looked_up_not_read_and_equal_a_full_read(
    tmp_path,
) -> None:
    """One edit away, a word starting with the query word's second letter is one of four
    strings (an edit at position 0): those are looked up alone, never the whole letter.
    The candidates equal a comparison with every word of the two letters."""
    import cortex
    from cortex import suggest

    words = [
        "pgbouncer", "gpbouncer", "bouncer", "gbouncer", "pbouncer", "replica", "erplica",
        "eplica", "rreplica", "failover", "afilover", "ailover", "leader", "eleader",
        "eader", "lader", "kafka", "akfka", "afka", "topic", "otpic", "opic",
    ]  # fmt: skip
    path = tmp_path / "v.db"
    with cortex.open(path, embedder=None, keyword_index="off") as engine:
        for i in range(0, len(words), 3):
            engine.add(" ".join(words[i : i + 3]) + f" note{i}")
        store = engine.store
        full = suggest.Vocabulary()
        for first in "abcdefghijklmnopqrstuvwxyz":
            suggest._starting(store, full, first)
        alphabet = "abcdefghijklmnopqrstuvwxyz"
        queries = set()
        for w in words:
            for i in range(len(w) + 1):
                queries.add(w[:i] + w[i + 1 :])
                queries.update(w[:i] + c + w[i:] for c in alphabet[:6] + w)
                queries.update(w[:i] + c + w[i + 1 :] for c in alphabet[:6] + w)
                queries.add(w[:i] + w[i + 1 : i + 2] + w[i : i + 1] + w[i + 2 :])
        checked = 0
        for q in sorted(x for x in queries if len(x) >= 4):
            fresh = suggest.Vocabulary()
            got = sorted(
                t for t, _ in suggest._candidates(store, fresh, q, 1) if suggest._one_apart(q, t)
            )
            want = sorted(
                t
                for first in dict.fromkeys(q[:2])
                for t, _ in full.by_first.get(first, [])
                if suggest._one_apart(q, t)
            )
            assert got == want, q
            if q[0] != q[1]:
                assert q[1] not in fresh.by_first  # looked up, not read
            checked += bool(want)
        assert checked > 100
