"""Import of Markdown, JSON and JSONL: chunking, dates, fields, idempotence, errors."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

import cortex
from cortex.errors import ImportFileError
from cortex.ingest import MAX_CHUNK_CHARS, chunk_markdown, date_of

from .conftest import SAMPLE

KW = cortex.Options(mode="keyword")


def live(engine: cortex.Engine) -> list[cortex.Memory]:
    rows = engine.store.query("SELECT id FROM memories WHERE deleted_at IS NULL ORDER BY id")
    return [engine.get(r[0]) for r in rows]


def test_chunk_markdown_splits_by_heading() -> None:
    text = "intro line\n\n# One\nbody one\n\n## Two\nbody two\n"
    assert chunk_markdown(text) == ["intro line", "# One\nbody one", "## Two\nbody two"]


def test_heading_without_text_joins_the_next_section() -> None:
    text = "# Project\n## Setup\nrun make\n# Other\ntext"
    assert chunk_markdown(text) == ["# Project\n## Setup\nrun make", "# Other\ntext"]


def test_headings_inside_code_fences_do_not_split() -> None:
    text = "# Build\n```sh\n# not a heading\nmake\n```\nafter"
    assert chunk_markdown(text) == [text]


def test_long_sections_are_split_with_their_heading() -> None:
    para = "word " * 300
    text = "# Big\n\n" + "\n\n".join([para] * 4)
    chunks = chunk_markdown(text)
    assert len(chunks) > 1
    assert all(len(c) <= MAX_CHUNK_CHARS + 10 for c in chunks)
    assert all(c.startswith("# Big") for c in chunks)


def test_dated_file_names() -> None:
    assert (
        date_of(Path("notes/2026/2026-11-18.md")) == datetime(2026, 11, 18, tzinfo=UTC).timestamp()
    )
    assert date_of(Path("MEMORY.md")) is None
    assert date_of(Path("2026-13-45.md")) is None
    assert date_of(Path("x2026-11-18.md")) is None


def test_import_sample_folder(engine: cortex.Engine) -> None:
    report = engine.import_path(SAMPLE)
    assert report.errors == []
    assert report.files == 4
    assert report.counts.added == len(live(engine)) > 0
    memories = live(engine)
    dated = [m for m in memories if m.source_path and m.source_path.endswith("2026-11-02.md")]
    assert dated and all(m.created_at == datetime(2026, 11, 2, tzinfo=UTC) for m in dated)
    assert [m.chunk_index for m in dated] == [0, 1]
    records = [m for m in memories if m.source_path and m.source_path.endswith(".jsonl")]
    go = next(m for m in records if "Go code" in m.content)
    assert (go.category, go.scope, go.confidence) == ("rule", "language:go", 0.8)


def test_reimport_of_unchanged_content_adds_nothing(engine: cortex.Engine) -> None:
    engine.import_path(SAMPLE)
    before = {m.id: m.content for m in live(engine)}
    report = engine.import_path(SAMPLE)
    assert (report.counts.added, report.counts.updated, report.counts.removed) == (0, 0, 0)
    assert report.counts.unchanged == len(before)
    assert {m.id: m.content for m in live(engine)} == before


def test_changed_chunk_updates_its_memory(tmp_path: Path, engine: cortex.Engine) -> None:
    note = tmp_path / "notes.md"
    note.write_text("# A\nalpha text\n\n# B\nbravo text\n\n# C\ncharlie text\n")
    engine.import_path(note)
    ids = {m.content.split("\n")[0]: m.id for m in live(engine)}
    note.write_text("# A\nalpha text\n\n# B\nbravo text, revised\n\n# C\ncharlie text\n")
    report = engine.import_path(note)
    assert (report.counts.added, report.counts.updated, report.counts.unchanged) == (0, 1, 2)
    after = {m.content.split("\n")[0]: m for m in live(engine)}
    assert after["# B"].id == ids["# B"]
    assert "revised" in after["# B"].content
    assert [r.memory.id for r in engine.search("revised", KW)] == [ids["# B"]]


def test_inserted_section_keeps_the_ids_of_moved_chunks(
    tmp_path: Path, engine: cortex.Engine
) -> None:
    note = tmp_path / "notes.md"
    note.write_text("# A\nalpha\n\n# C\ncharlie\n")
    engine.import_path(note)
    ids = {m.content: m.id for m in live(engine)}
    note.write_text("# A\nalpha\n\n# B\nbravo\n\n# C\ncharlie\n")
    report = engine.import_path(note)
    assert (report.counts.added, report.counts.unchanged) == (1, 2)
    after = {m.content: m for m in live(engine)}
    assert after["# C\ncharlie"].id == ids["# C\ncharlie"]
    assert after["# C\ncharlie"].chunk_index == 2


def test_removed_chunk_is_soft_deleted(tmp_path: Path, engine: cortex.Engine) -> None:
    note = tmp_path / "notes.md"
    note.write_text("# A\nalpha\n\n# B\nbravo\n")
    engine.import_path(note)
    note.write_text("# A\nalpha\n")
    report = engine.import_path(note)
    assert report.counts.removed == 1
    assert [m.content for m in live(engine)] == ["# A\nalpha"]
    assert list(engine.search("bravo", KW)) == []


def test_json_and_jsonl_records(tmp_path: Path, engine: cortex.Engine) -> None:
    (tmp_path / "a.json").write_text(
        json.dumps(
            [
                {
                    "content": "first record",
                    "project": "p1",
                    "session": "s1",
                    "sector": "semantic",
                    "tier": "core",
                    "scope": "universal",
                    "category": "rule",
                    "salience": 0.9,
                    "confidence": 0.8,
                    "created_at": "2025-01-02T03:04:05Z",
                    "metadata": {"k": 1},
                    "source": "x",
                },
                {"text": "second record"},
            ]
        )
    )
    (tmp_path / "b.jsonl").write_text('{"content": "third"}\n\n{"content": "fourth"}\n')
    report = engine.import_path(tmp_path, project="default")
    assert report.errors == [] and report.counts.added == 4
    first = next(m for m in live(engine) if m.content == "first record")
    assert (first.project, first.sector, first.tier, first.scope) == (
        "p1",
        "semantic",
        "core",
        "universal",
    )
    assert (first.category, first.salience, first.confidence) == ("rule", 0.9, 0.8)
    assert first.created_at == datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert first.metadata == {"k": 1, "source": "x"}  # unknown fields are kept in metadata
    second = next(m for m in live(engine) if m.content == "second record")
    assert second.project == "default"
    sessions = engine.store.query("SELECT session_id, memory_id, usage FROM session_memories")
    assert sessions == [("s1", first.id, "created")]


def test_bad_jsonl_line_imports_nothing_of_that_file(tmp_path: Path, engine: cortex.Engine) -> None:
    (tmp_path / "good.jsonl").write_text('{"content": "good one"}\n')
    (tmp_path / "bad.jsonl").write_text('{"content": "fine"}\n{"content": oops}\n')
    report = engine.import_path(tmp_path)
    assert report.counts.added == 1
    assert len(report.errors) == 1
    path, error = report.errors[0]
    assert path.endswith("bad.jsonl") and "bad.jsonl:2" in error and "invalid JSON" in error
    assert [m.content for m in live(engine)] == ["good one"]


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("latin1.md", "caf\xe9 notes".encode("latin-1"), "not valid UTF-8"),
        ("binary.md", b"abc\x00def", "NUL"),
        ("array.json", b"[1, 2]", "JSON object"),
        ("nocontent.jsonl", b'{"title": "x"}\n', "content"),
        ("badconf.jsonl", b'{"content": "x", "confidence": 2}\n', "confidence"),
        ("baddate.jsonl", b'{"content": "x", "created_at": "yesterday"}\n', "ISO 8601"),
    ],
)
def test_bad_files_are_reported_and_nothing_is_lost(
    tmp_path: Path, engine: cortex.Engine, name: str, data: bytes, message: str
) -> None:
    engine.add("already here")
    (tmp_path / name).write_bytes(data)
    report = engine.import_path(tmp_path)
    assert len(report.errors) == 1 and message in report.errors[0][1]
    assert [m.content for m in live(engine)] == ["already here"]


def test_missing_path_and_unknown_suffix(tmp_path: Path, engine: cortex.Engine) -> None:
    with pytest.raises(ImportFileError, match="no such file"):
        engine.import_path(tmp_path / "nope")
    (tmp_path / "x.pdf").write_bytes(b"%PDF")
    with pytest.raises(ImportFileError, match="cannot import"):
        engine.import_path(tmp_path / "x.pdf")


def test_hidden_folders_are_skipped(tmp_path: Path, engine: cortex.Engine) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.md").write_text("# hidden\nsecret")
    (tmp_path / "y.md").write_text("# shown\nvisible")
    report = engine.import_path(tmp_path)
    assert report.files == 1
    assert [m.content for m in live(engine)] == ["# shown\nvisible"]


def test_a_folder_is_embedded_in_one_length_sorted_call(tmp_path: Path, embedder) -> None:
    """The chunks of every file of an import are embedded together (one sort by length
    over the import), and each file is still written in its own transaction."""
    import numpy as np

    calls: list[list[str]] = []

    class Counting:
        model_id = embedder.model_id
        dim = embedder.dim

        def embed(self, text: str) -> np.ndarray:
            return np.asarray(embedder.embed(text))

        def embed_batch(self, texts: list[str]) -> np.ndarray:
            calls.append(list(texts))
            return np.asarray(embedder.embed_batch(texts))

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\na much longer text about the release\n\n# B\nbeta\n")
    (folder / "b.jsonl").write_text('{"content": "gamma ray"}\n{"content": "d"}\n')
    (folder / "c.jsonl").write_text('{"content": "fine"}\nnot json\n')
    with cortex.open(tmp_path / "c.db", embedder=Counting()) as engine:
        report = engine.import_path(folder)
        assert [p for p, _ in report.errors] == [str(folder / "c.jsonl")]
        assert report.files == 2 and report.counts.added == 4
        assert len(calls) == 1
        assert calls[0] == sorted(calls[0], key=len)  # one call, shortest first
        assert len(calls[0]) == 4
        rows = engine.store.query("SELECT COUNT(*) FROM embeddings")
        assert rows[0][0] == 4
        sources = engine.store.query("SELECT DISTINCT source_path FROM memories")
        assert str((folder / "c.jsonl").resolve()) not in {r[0] for r in sources}  # skipped whole
        assert engine.search("gamma", mode="keyword")[0].memory.content == "gamma ray"


def test_sync_plan_keeps_moves_rewrites_and_retires_memories() -> None:
    from cortex.store import SYNC_COLUMNS, MemoryInput, plan_sync

    assert SYNC_COLUMNS.startswith("id, chunk_index, content_hash")
    old = [MemoryInput(t, source_path="n.md", chunk_index=i) for i, t in enumerate("abcd")]
    # (id, chunk_index, hash, sector, tier, scope, category, salience, confidence,
    # created_at, metadata) as the store reads them
    rows = [
        (10 + i, i, m.content_hash, m.sector, m.tier, m.scope, m.category,
         float(m.salience), float(m.confidence), None, m.metadata_json())
        for i, m in enumerate(old)
    ]  # fmt: skip
    # "a" stays, "x" is inserted before "c" (which moves), "b" is edited, "d" is gone:
    now = [MemoryInput(t, source_path="n.md") for t in ("a", "b2", "x", "c")]
    plan = plan_sync(rows, now)
    assert [(i, c.content, moved) for i, c, moved in plan.kept] == [(10, "a", None), (12, "c", 3)]
    # the edited "b2" takes the memory at its position; "x" has none left (12 kept "c")
    assert [(i, c.content, c.chunk_index) for i, c in plan.rewritten] == [(11, "b2", 1)]
    assert [(c.content, c.chunk_index) for c in plan.fresh] == [("x", 2)]
    assert plan.stale == [13]
    counts = plan.counts()
    assert (counts.added, counts.updated, counts.unchanged, counts.removed) == (1, 1, 2, 1)
    # a changed field is a change, not the same chunk
    salty = [MemoryInput("a", source_path="n.md", salience=0.9)]
    assert plan_sync(rows[:1], salty).rewritten == [(10, replace(salty[0], chunk_index=0))]
