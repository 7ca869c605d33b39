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
