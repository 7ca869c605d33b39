"""The in-memory keyword index inside the Engine: the same results as FTS5 alone, kept in
step with every kind of write, never leaking across a filter (cortex.keyword_index)."""

from __future__ import annotations

import random
import threading

import pytest

import cortex
from cortex import keyword_index
from cortex.errors import InvalidOptionError
from cortex.options import Options

WORDS = (
    "deploy",
    "deployment",
    "server",
    "database",
    "index",
    "query",
    "latency",
    "cache",
    "memory",
    "vector",
    "search",
    "token",
    "session",
    "agent",
    "project",
    "config",
    "error",
    "retry",
    "timeout",
    "backup",
    "restore",
    "schema",
    "migration",
    "replica",
    "shard",
    "cluster",
    "network",
    "packet",
    "route",
    "proxy",
    "kernel",
    "thread",
)


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 25)))


def _pair(tmp_path, name: str = "kw.db"):
    """The same database opened twice: with the in-memory index, and FTS5 only."""
    path = tmp_path / name
    native = cortex.open(path, embedder=None, keyword_index="on")
    fts = cortex.open(path, embedder=None, keyword_index="off")
    return native, fts


def _same(native, fts, query: str, **opts) -> None:
    a = native.search(query, Options(mode="keyword", limit=30, record=False, **opts))
    b = fts.search(query, Options(mode="keyword", limit=30, record=False, **opts))
    assert [r.memory.id for r in a] == [r.memory.id for r in b], query
    for x, y in zip(a, b, strict=True):  # the BM25 part; the boosts depend on the clock
        assert x.bm25_score == pytest.approx(y.bm25_score, rel=1e-12, abs=1e-15)
    assert a.rewritten == b.rewritten


def _queries(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.sample(WORDS, rng.randint(1, 6))) for _ in range(n)]


def test_policy_is_checked(tmp_path):
    with pytest.raises(InvalidOptionError, match="keyword_index"):
        cortex.open(tmp_path / "x.db", keyword_index="fast")


def test_same_results_as_fts5_and_the_index_is_used(tmp_path):
    rng = random.Random(1)
    native, fts = _pair(tmp_path)
    with native, fts:
        native.add_many([{"content": _text(rng)} for _ in range(800)])
        for q in _queries(rng, 60):
            _same(native, fts, q)
        assert native.keyword_index.ready()
        assert not fts.keyword_index.ready()


def test_kept_in_step_with_updates_deletes_and_other_processes_writes(tmp_path):
    rng = random.Random(2)
    native, fts = _pair(tmp_path)
    with native, fts:
        ids = native.add_many([{"content": _text(rng)} for _ in range(300)])
        queries = _queries(rng, 25)
        for q in queries:
            _same(native, fts, q)
        # writes through the other engine (another process would look the same: the log)
        for i in rng.sample(ids, 40):
            fts.update(i, content=_text(rng))
        for i in rng.sample(ids, 30):
            fts.delete(i)
        fts.add_many([{"content": _text(rng)} for _ in range(50)])
        for q in queries:
            _same(native, fts, q)
        # a memory with a word no other memory has: found at once, gone at once
        new = fts.add("zyzzyva deployment")
        assert [r.memory.id for r in native.search("zyzzyva", mode="keyword")] == [new]
        fts.delete(new)
        assert list(native.search("zyzzyva", mode="keyword")) == []


def test_filters_never_leak_and_match_fts5(tmp_path):
    rng = random.Random(3)
    native, fts = _pair(tmp_path)
    with native, fts:
        for project in ("alpha", "beta", "gamma"):
            native.add_many([{"content": _text(rng), "project": project} for _ in range(200)])
        for q in _queries(rng, 30):
            for project in ("alpha", "beta"):
                _same(native, fts, q, project=project)
                got = native.search(q, Options(mode="keyword", project=project, limit=50))
                assert all(r.memory.project == project for r in got)


def test_a_pruned_log_makes_it_rebuild(tmp_path):
    rng = random.Random(4)
    native, fts = _pair(tmp_path)
    with native, fts:
        native.add_many([{"content": _text(rng)} for _ in range(100)])
        _same(native, fts, "deploy server")
        fts.add_many([{"content": _text(rng)} for _ in range(100)])
        fts.store.after_bulk_write(keep_changes=10)  # the log no longer reaches back
        for q in _queries(rng, 10):
            _same(native, fts, q)


def test_phrases_and_syntax_still_go_to_fts5(tmp_path):
    native, fts = _pair(tmp_path)
    with native, fts:
        native.add_many(
            [{"content": "snake_case names"}, {"content": "snake case names"}, {"content": "x"}]
        )
        for q in ("snake_case", '"snake case"', "snake OR case", "sna*", "names"):
            _same(native, fts, q)


def test_auto_builds_in_the_background_only_for_large_stores(tmp_path, monkeypatch):
    monkeypatch.setattr(keyword_index, "AUTO_MIN", 50)
    rng = random.Random(5)
    path = tmp_path / "auto.db"
    with cortex.open(path, embedder=None, keyword_index="auto") as small:
        small.add_many([{"content": _text(rng)} for _ in range(20)])
        small.search("deploy", mode="keyword")
        assert not small.keyword_index.wait(5)
        small.add_many([{"content": _text(rng)} for _ in range(100)])
    with (
        cortex.open(path, embedder=None, keyword_index="auto") as big,
        cortex.open(path, embedder=None, keyword_index="off") as fts,
    ):
        assert big.keyword_index.wait(30)
        for q in _queries(rng, 10):
            _same(big, fts, q)


def test_searches_and_writes_from_threads(tmp_path):
    rng = random.Random(6)
    native, fts = _pair(tmp_path)
    errors: list[BaseException] = []
    with native, fts:
        native.add_many([{"content": _text(rng)} for _ in range(200)])

        def writer() -> None:
            r = random.Random(7)
            try:
                for _ in range(40):
                    native.add(_text(r))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        def searcher(seed: int) -> None:
            r = random.Random(seed)
            try:
                for q in _queries(r, 40):
                    native.search(q, mode="keyword", record=False)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=writer)] + [
            threading.Thread(target=searcher, args=(s,)) for s in (8, 9)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        for q in _queries(rng, 15):
            _same(native, fts, q)


def test_disagreeing_with_fts5s_totals_leaves_fts5_answering(tmp_path, monkeypatch):
    rng = random.Random(10)
    native, fts = _pair(tmp_path)
    with native, fts:
        native.add_many([{"content": _text(rng)} for _ in range(50)])
        real = keyword_index._fts5_totals
        monkeypatch.setattr(keyword_index, "_fts5_totals", lambda b: (real(b)[0], 1))
        _same(native, fts, "deploy server")
        assert not native.keyword_index.ready()
        assert "FTS5 counts 50 and 1" in (native.keyword_index.error or "")


def test_odd_unicode_queries_agree_with_fts5(tmp_path):
    rng = random.Random(11)
    alphabet = (
        "abcdefghijklmnopqrstuvwxyz0123456789_-'’.  éèêëÉßﬁæøåÅñçÇαβγΣσςЖжЁё"
        "\u0301\u0308\u200d\u00a0😀👍🏽日本語한국"
    )
    native, fts = _pair(tmp_path)
    with native, fts:
        texts = [
            "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60))) for _ in range(300)
        ]
        native.add_many([{"content": t} for t in texts if t.strip()])
        for _ in range(150):
            query = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 20)))
            if query.strip():
                _same(native, fts, query)


# ------------------------------------------------------------------ the saved file


def _small_thresholds(monkeypatch) -> None:
    """Save and load at test sizes (the real floors are thousands of memories)."""
    monkeypatch.setattr(keyword_index, "AUTO_MIN", 50)
    monkeypatch.setattr(keyword_index, "SAVED_MIN", 50)


def _no_builds(monkeypatch) -> None:
    def refuse(self):
        raise AssertionError("built from SQLite where the saved file should have been loaded")

    monkeypatch.setattr(keyword_index.KeywordIndexer, "_build", refuse)


def test_a_saved_index_is_loaded_and_follows_later_writes(tmp_path, monkeypatch):
    _small_thresholds(monkeypatch)
    rng = random.Random(11)
    native, fts = _pair(tmp_path)
    with native, fts:
        ids = native.add_many([{"content": _text(rng), "project": "p"} for _ in range(300)])
        _same(native, fts, "deploy server")  # built, and saved
        assert native.keyword_index.file.is_file()
        # writes the file does not hold: another engine (another process) makes them
        for i in rng.sample(ids, 20):
            fts.update(i, content=_text(rng))
        fts.delete(ids[0])
        fts.add_many([{"content": "zyzzyva " + _text(rng)} for _ in range(5)])
    _no_builds(monkeypatch)
    for policy in ("on", "saved", "auto"):
        native = cortex.open(tmp_path / "kw.db", embedder=None, keyword_index=policy)
        fts = cortex.open(tmp_path / "kw.db", embedder=None, keyword_index="off")
        with native, fts:
            for q in [*_queries(rng, 15), "zyzzyva"]:
                _same(native, fts, q)
                _same(native, fts, q, project="p")
            assert native.keyword_index.ready(), policy
            assert native.keyword_index.error is None


def test_a_damaged_stale_or_foreign_file_is_rebuilt(tmp_path, monkeypatch):
    _small_thresholds(monkeypatch)
    rng = random.Random(12)
    with cortex.open(tmp_path / "other.db", embedder=None, keyword_index="on") as other:
        other.add_many([{"content": _text(rng)} for _ in range(400)])
        other.search("deploy", mode="keyword")
        foreign = other.keyword_index.file.read_bytes()
    native, fts = _pair(tmp_path)
    with native, fts:
        native.add_many([{"content": _text(rng)} for _ in range(200)])
        native.search("deploy", mode="keyword")
        good = native.keyword_index.file.read_bytes()
        fts.add_many([{"content": _text(rng)} for _ in range(100)])
        fts.store.after_bulk_write(keep_changes=10)  # the log no longer reaches the file
    path = tmp_path / "kw.db-index" / keyword_index.FILE_NAME
    damaged = bytearray(good)
    damaged[len(good) // 2] ^= 0x40
    for content in (bytes(damaged), good[:-100], b"", foreign, good):
        path.write_bytes(content)
        native, fts = _pair(tmp_path)
        with native, fts:
            for q in _queries(rng, 8):
                _same(native, fts, q)
            assert native.keyword_index.ready()
            # rebuilt, and saved over the unusable file: the next process loads it
            assert path.read_bytes() not in (bytes(damaged), good[:-100], b"", foreign, good)
    with pytest.raises(cortex.IndexFormatError, match="checksum"):
        from cortex._native import KeywordIndex

        KeywordIndex.from_bytes(bytes(damaged))
    # `load` maps the file: the same index as `from_bytes` of its bytes, the same errors
    path.write_bytes(good)
    loaded, tag = KeywordIndex.load(path)
    assert (loaded.to_bytes(tag), tag) == (KeywordIndex.from_bytes(good)[0].to_bytes(tag), tag)
    path.write_bytes(bytes(damaged))
    with pytest.raises(cortex.IndexFormatError, match="checksum"):
        KeywordIndex.load(path)
    path.unlink()
    with pytest.raises(cortex.StorageError):
        KeywordIndex.load(path)


def test_saved_never_builds_and_small_stores_save_nothing(tmp_path, monkeypatch):
    rng = random.Random(13)
    with cortex.open(tmp_path / "kw.db", embedder=None, keyword_index="on") as small:
        small.add_many([{"content": _text(rng)} for _ in range(100)])
        small.search("deploy", mode="keyword")
        assert small.keyword_index.ready()
        assert not small.keyword_index.file.exists()  # under AUTO_MIN: FTS5 is fast there
        assert not small.keyword_index.persist()
    _small_thresholds(monkeypatch)
    with cortex.open(tmp_path / "kw.db", embedder=None, keyword_index="saved") as saved:
        saved.search("deploy", mode="keyword")
        assert not saved.keyword_index.ready()  # no file: FTS5 answers, nothing is built
        assert saved.keyword_index.persist()  # what `cortex import` does at its end
    with cortex.open(tmp_path / "kw.db", embedder=None, keyword_index="saved") as saved:
        saved.search("deploy", mode="keyword")
        assert saved.keyword_index.ready()
    monkeypatch.setattr(keyword_index, "SAVED_MIN", 1_000)
    with cortex.open(tmp_path / "kw.db", embedder=None, keyword_index="saved") as saved:
        saved.search("deploy", mode="keyword")
        assert not saved.keyword_index.ready()  # a small store: one FTS5 query is cheaper


def test_cli_import_saves_the_index(tmp_path, monkeypatch):
    import contextlib
    import io
    import json

    from cortex import cli

    _small_thresholds(monkeypatch)
    rng = random.Random(14)
    records = tmp_path / "r.jsonl"
    records.write_text(
        "".join(json.dumps({"content": _text(rng)}) + "\n" for _ in range(120)), encoding="utf-8"
    )
    db = tmp_path / "cli.db"
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["--db", str(db), "import", str(records)]) == 0
    assert (tmp_path / "cli.db-index" / keyword_index.FILE_NAME).is_file()
    _no_builds(monkeypatch)
    loaded = []
    real_load = keyword_index.KeywordIndexer._load

    def spy(self, **kw):
        got = real_load(self, **kw)
        loaded.append(got is not None)
        return got

    monkeypatch.setattr(keyword_index.KeywordIndexer, "_load", spy)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert cli.main(["--db", str(db), "search", "deploy server", "--mode", "keyword"]) == 0
    assert "deploy" in out.getvalue() or "server" in out.getvalue()
    assert loaded == [True]  # the CLI's search answered from the saved file


def test_an_index_far_past_its_file_is_saved_again_at_close(tmp_path, monkeypatch):
    _small_thresholds(monkeypatch)
    monkeypatch.setattr(keyword_index, "RESAVE_AFTER", 30)
    rng = random.Random(15)
    path = tmp_path / "kw.db"
    with cortex.open(path, embedder=None, keyword_index="on") as native:
        native.add_many([{"content": _text(rng)} for _ in range(100)])
        native.search("deploy", mode="keyword")  # built and saved
        first = native.keyword_index.file.read_bytes()
        native.add_many([{"content": _text(rng)} for _ in range(10)])
        native.search("deploy", mode="keyword")  # 10 changes replayed: not worth a write
    assert native.keyword_index.file.read_bytes() == first
    with cortex.open(path, embedder=None, keyword_index="on") as native:
        native.add_many([{"content": "zyzzyva " + _text(rng)} for _ in range(40)])
        native.search("deploy", mode="keyword")  # loaded, then 40 changes replayed
    second = native.keyword_index.file.read_bytes()
    assert second != first
    _no_builds(monkeypatch)
    native, fts = _pair(tmp_path)
    with native, fts:
        for q in ["zyzzyva", *_queries(rng, 8)]:
            _same(native, fts, q)
        assert native.keyword_index.ready()


def test_flush_after_a_bulk_load_saves_the_index_once(tmp_path, monkeypatch):
    """A library bulk load (add_many, then flush) leaves the file the CLI's searches load;
    a second flush with nothing new writes nothing."""
    _small_thresholds(monkeypatch)
    rng = random.Random(14)
    with cortex.open(tmp_path / "kw.db", embedder=None) as engine:
        engine.add_many([{"content": _text(rng)} for _ in range(200)])
        engine.flush()
        file = engine.keyword_index.file
        assert file.is_file()
        written = file.stat().st_mtime_ns, file.stat().st_ino
        engine.flush()
        assert (file.stat().st_mtime_ns, file.stat().st_ino) == written
    _no_builds(monkeypatch)
    native = cortex.open(tmp_path / "kw.db", embedder=None, keyword_index="saved")
    fts = cortex.open(tmp_path / "kw.db", embedder=None, keyword_index="off")
    with native, fts:
        for q in _queries(rng, 8):
            _same(native, fts, q)
        assert native.keyword_index.ready()
