"""The SQLite store: schema, migrations, transactions, and the memory table's reads and writes.

The store is the single source of truth of cortex: every other file (the vector index) is
derived from it and can be rebuilt from it. One file in WAL mode, so any number of readers
run beside the one writer; every connection waits on a busy database instead of failing.

Each thread gets its own connection (a service calling cortex from a thread pool must not
share cursors across threads). Every SQL value is a bound parameter.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cortex import validate
from cortex.code import CodeRef, refs_of, write_refs
from cortex.errors import DamagedRowError, InvalidOptionError, NotFoundError, StorageError
from cortex.result import Memory, from_epoch, memory_of
from cortex.store_shared import M_COLUMNS, MEMORY_COLUMNS, Dialect, SharedStore

__all__ = ["SCHEMA_VERSION", "MemoryInput", "Store", "SyncCounts", "content_hash", "has_cjk"]

#: Word queries run on a Porter-stemmed index: on SciFact it lifts keyword nDCG@10 from
#: 0.668 to 0.683 (README, "Stemming"). Prefix queries (`deploy*`) run on an unstemmed twin,
#: because Porter stems the prefix too ("deploy" -> "deploi", "deployment" -> "deploy") and
#: `deploy*` would miss "deployment".
STEMMED_TOKENIZER = "porter unicode61 remove_diacritics 2"
EXACT_TOKENIZER = "unicode61 remove_diacritics 2"

# Text a memory may hold. Bigger inputs are almost always a mistake (a binary file, a dump);
# they are refused with the limit named rather than indexed.
MAX_CONTENT_CHARS = 1_000_000


# The same ranges as _is_cjk, as one character class: re scans in C, ~100x faster than a
# Python loop over every character (which was 71 % of add_many's time on English text).
_CJK = re.compile(
    "[\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # hangul syllables
    "\u1100-\u11ff"  # hangul jamo
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U0002fa1f]"  # CJK extensions B-F, compatibility supplement
)


def has_cjk(text: str) -> bool:
    """True when `text` holds a Chinese, Japanese or Korean character."""
    # isascii reads a flag of the string: most text is spared the scan (10k SciFact
    # abstracts: 0.030 CPU-s a bulk write spent here)
    return not text.isascii() and _CJK.search(text) is not None


def _is_cjk(ch: str) -> bool:
    o = ord(ch)
    return (
        0x3040 <= o <= 0x30FF  # hiragana, katakana
        or 0x3400 <= o <= 0x4DBF  # CJK extension A
        or 0x4E00 <= o <= 0x9FFF  # CJK unified ideographs
        or 0xAC00 <= o <= 0xD7AF  # hangul syllables
        or 0x1100 <= o <= 0x11FF  # hangul jamo
        or 0xF900 <= o <= 0xFAFF  # CJK compatibility ideographs
        or 0x20000 <= o <= 0x2FA1F  # CJK extensions B-F, compatibility supplement
    )


def _varint(blob: bytes) -> int:
    """The SQLite varint at the start of `blob` (FTS5's size and totals records)."""
    value = 0
    for n, byte in enumerate(blob[:9]):
        if n == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            break
    return value


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- schema

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE memories (
    id            INTEGER PRIMARY KEY,
    project_id    TEXT,
    content       TEXT NOT NULL,
    content_hash  TEXT NOT NULL,
    source_path   TEXT,
    chunk_index   INTEGER,
    sector        TEXT,
    tier          TEXT,
    scope         TEXT,
    category      TEXT,
    salience      REAL NOT NULL DEFAULT 0.5,
    confidence    REAL NOT NULL DEFAULT 1.0,
    created_at    REAL NOT NULL,
    updated_at    REAL NOT NULL,
    valid_until   REAL,
    superseded_by INTEGER REFERENCES memories(id),
    deleted_at    REAL,
    last_accessed REAL,
    access_count  INTEGER NOT NULL DEFAULT 0,
    metadata      TEXT NOT NULL DEFAULT '{}',
    has_cjk       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX memories_project_created ON memories(project_id, created_at);
CREATE INDEX memories_created ON memories(created_at);
CREATE INDEX memories_source ON memories(source_path, chunk_index);
CREATE INDEX memories_hash ON memories(content_hash);
CREATE INDEX memories_scope ON memories(scope);
CREATE INDEX memories_category ON memories(category);
CREATE INDEX memories_deleted ON memories(deleted_at) WHERE deleted_at IS NOT NULL;

-- Keyword indexes over live memories only: a soft-deleted memory leaves them, so it
-- neither matches nor skews BM25's statistics. memories_fts is stemmed (word queries),
-- memories_exact is not (prefix queries).
CREATE VIRTUAL TABLE memories_fts USING fts5(
    content, content='memories', content_rowid='id', tokenize='{stemmed}'
);
CREATE VIRTUAL TABLE memories_exact USING fts5(
    content, content='memories', content_rowid='id', tokenize='{exact}'
);
-- Trigram index for Chinese, Japanese and Korean text, which unicode61 cannot split into
-- words. Only memories that hold such text are in it, so English-only stores pay nothing.
CREATE VIRTUAL TABLE memories_trigram USING fts5(
    content, content='memories', content_rowid='id', tokenize='trigram'
);

-- One trigger per event, so that the index rows of an update are deleted before they are
-- re-inserted (SQLite gives no order between two triggers on the same event).
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, content)
        SELECT new.id, new.content WHERE new.deleted_at IS NULL;
    INSERT INTO memories_exact(rowid, content)
        SELECT new.id, new.content WHERE new.deleted_at IS NULL;
    INSERT INTO memories_trigram(rowid, content)
        SELECT new.id, new.content WHERE new.deleted_at IS NULL AND new.has_cjk;
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, content)
        SELECT 'delete', old.id, old.content WHERE old.deleted_at IS NULL;
    INSERT INTO memories_exact(memories_exact, rowid, content)
        SELECT 'delete', old.id, old.content WHERE old.deleted_at IS NULL;
    INSERT INTO memories_trigram(memories_trigram, rowid, content)
        SELECT 'delete', old.id, old.content WHERE old.deleted_at IS NULL AND old.has_cjk;
END;
CREATE TRIGGER memories_au AFTER UPDATE OF content, deleted_at, has_cjk ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, content)
        SELECT 'delete', old.id, old.content WHERE old.deleted_at IS NULL;
    INSERT INTO memories_exact(memories_exact, rowid, content)
        SELECT 'delete', old.id, old.content WHERE old.deleted_at IS NULL;
    INSERT INTO memories_trigram(memories_trigram, rowid, content)
        SELECT 'delete', old.id, old.content WHERE old.deleted_at IS NULL AND old.has_cjk;
    INSERT INTO memories_fts(rowid, content)
        SELECT new.id, new.content WHERE new.deleted_at IS NULL;
    INSERT INTO memories_exact(rowid, content)
        SELECT new.id, new.content WHERE new.deleted_at IS NULL;
    INSERT INTO memories_trigram(rowid, content)
        SELECT new.id, new.content WHERE new.deleted_at IS NULL AND new.has_cjk;
END;

CREATE TABLE facts (
    id              INTEGER PRIMARY KEY,
    memory_id       INTEGER NOT NULL REFERENCES memories(id),
    type            TEXT NOT NULL,
    content         TEXT NOT NULL,
    confidence      REAL NOT NULL DEFAULT 1.0,
    decay_rate      REAL NOT NULL DEFAULT 0.0,
    last_reinforced REAL NOT NULL,
    created_at      REAL NOT NULL
);
CREATE INDEX facts_memory ON facts(memory_id);

CREATE TABLE sessions (
    id         TEXT PRIMARY KEY,
    project_id TEXT,
    started_at REAL NOT NULL,
    ended_at   REAL,
    summary    TEXT
);

CREATE TABLE session_memories (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    memory_id  INTEGER NOT NULL REFERENCES memories(id),
    usage      TEXT NOT NULL CHECK (usage IN ('created', 'recalled', 'updated', 'reinforced')),
    created_at REAL NOT NULL
);
CREATE INDEX session_memories_memory ON session_memories(memory_id, created_at);
CREATE INDEX session_memories_session ON session_memories(session_id);

CREATE TABLE memory_relationships (
    id         INTEGER PRIMARY KEY,
    source_id  INTEGER NOT NULL REFERENCES memories(id),
    target_id  INTEGER NOT NULL REFERENCES memories(id),
    type       TEXT NOT NULL,
    created_by TEXT,
    created_at REAL NOT NULL,
    UNIQUE (source_id, target_id, type)
);
CREATE INDEX memory_relationships_target ON memory_relationships(target_id);

CREATE TABLE recall_log (
    id          INTEGER PRIMARY KEY,
    memory_id   INTEGER NOT NULL REFERENCES memories(id),
    fact_id     INTEGER REFERENCES facts(id),
    query       TEXT,
    session_id  TEXT,
    lens        TEXT,
    score       REAL,
    recalled_at REAL NOT NULL
);
CREATE INDEX recall_log_memory ON recall_log(memory_id);

CREATE TABLE embeddings (
    memory_id    INTEGER NOT NULL REFERENCES memories(id),
    model_id     TEXT NOT NULL,
    dim          INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    vector       BLOB NOT NULL,
    created_at   REAL NOT NULL,
    PRIMARY KEY (memory_id, model_id)
);
CREATE INDEX embeddings_model_hash ON embeddings(model_id, content_hash);
"""

# Version 2: a log of the memories whose indexed text changed (inserted, content edited,
# deleted or undeleted), so that an index kept outside SQLite (the in-memory keyword
# index, cortex.keyword_index) catches up by reading only what changed since it last
# looked. These triggers only append to the log; the order between them and the FTS
# triggers of the same event does not matter.
_SCHEMA_V2 = """
CREATE TABLE memory_changes (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id INTEGER NOT NULL
);
CREATE TRIGGER memories_log_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memory_changes(memory_id) VALUES (new.id);
END;
CREATE TRIGGER memories_log_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memory_changes(memory_id) VALUES (old.id);
END;
CREATE TRIGGER memories_log_au AFTER UPDATE OF content, deleted_at ON memories
WHEN old.content IS NOT new.content OR old.deleted_at IS NOT new.deleted_at BEGIN
    INSERT INTO memory_changes(memory_id) VALUES (new.id);
END;
"""

# Sessions belong to a project: the same session id used in two projects is two sessions
# (before, project B's memories in session "s" showed project A's session and summary). A
# session is keyed by (id, project); `ifnull(project_id, char(0))` keys the memories without
# a project apart from every named one (a project name never holds NUL). A memory's
# session is the one of its own project, so session_memories keeps its columns and every
# join adds `s.project_id IS m.project_id`; its foreign key to sessions(id), no longer
# unique, is dropped. Existing links of a memory to another project's session become a
# session of the memory's project (started at the first link, without the summary).
# import_sources records which projects the records of a file imported under a default
# project went to, so that a record removed from the file is soft-deleted on re-import
# even when it named its own project. Self-contained: it reads only version-1 tables.
_SCHEMA_SESSIONS_BY_PROJECT = """
CREATE TABLE sessions_new (
    id         TEXT NOT NULL,
    project_id TEXT,
    started_at REAL NOT NULL,
    ended_at   REAL,
    summary    TEXT
);
INSERT INTO sessions_new (id, project_id, started_at, ended_at, summary)
    SELECT id, project_id, started_at, ended_at, summary FROM sessions ORDER BY rowid;
INSERT INTO sessions_new (id, project_id, started_at)
    SELECT sm.session_id, m.project_id, MIN(sm.created_at)
    FROM session_memories sm
    JOIN memories m ON m.id = sm.memory_id
    JOIN sessions s ON s.id = sm.session_id
    WHERE m.project_id IS NOT s.project_id
    GROUP BY sm.session_id, m.project_id;
CREATE TABLE session_memories_new (
    session_id TEXT NOT NULL,
    memory_id  INTEGER NOT NULL REFERENCES memories(id),
    usage      TEXT NOT NULL CHECK (usage IN ('created', 'recalled', 'updated', 'reinforced')),
    created_at REAL NOT NULL
);
INSERT INTO session_memories_new (rowid, session_id, memory_id, usage, created_at)
    SELECT rowid, session_id, memory_id, usage, created_at FROM session_memories;
DROP TABLE session_memories;
DROP TABLE sessions;
ALTER TABLE sessions_new RENAME TO sessions;
ALTER TABLE session_memories_new RENAME TO session_memories;
CREATE UNIQUE INDEX sessions_key ON sessions(id, ifnull(project_id, char(0)));
CREATE INDEX session_memories_memory ON session_memories(memory_id, created_at);
CREATE INDEX session_memories_session ON session_memories(session_id);

CREATE TABLE import_sources (
    source_path    TEXT NOT NULL,
    import_project TEXT,
    project        TEXT
);
CREATE UNIQUE INDEX import_sources_key ON import_sources(
    source_path, ifnull(import_project, char(0)), ifnull(project, char(0))
);
"""

#: The conflict target of the sessions key (see _SCHEMA_SESSIONS_BY_PROJECT).
SESSION_KEY = "(id, ifnull(project_id, char(0)))"

# Bulk inserts: maintaining FTS5 row by row from a trigger cost 2.5x one INSERT ... SELECT
# over the rows of the transaction (3.41 against 1.38 CPU-s for 10k SciFact texts, both
# indexes). While a row keyed 'bulk_insert' is in meta, the insert trigger leaves the
# keyword indexes alone; Store.add_many writes that row, its memories and their index rows
# in ONE transaction and deletes the row before committing, so no other connection ever
# sees it (a crash rolls all of it back). Every other insert still goes through the
# trigger. The content-hash index on memories served no query and goes (83 B a memory).
# (Since issue 16, Store._insert_bulk drops the insert triggers for its rows instead and
# no longer writes the flag row: a muted trigger still ran once a row.)
_SCHEMA_BULK_INSERT = """
DROP TRIGGER memories_ai;
CREATE TRIGGER memories_ai AFTER INSERT ON memories
WHEN NOT EXISTS (SELECT 1 FROM meta WHERE key = 'bulk_insert') BEGIN
    INSERT INTO memories_fts(rowid, content)
        SELECT new.id, new.content WHERE new.deleted_at IS NULL;
    INSERT INTO memories_exact(rowid, content)
        SELECT new.id, new.content WHERE new.deleted_at IS NULL;
    INSERT INTO memories_trigram(rowid, content)
        SELECT new.id, new.content WHERE new.deleted_at IS NULL AND new.has_cjk;
END;
DROP INDEX IF EXISTS memories_hash;
"""

_HEX = "'0123456789ABCDEF'"


def _byte(h: str, i: int) -> str:
    """SQL: the `i`-th byte (1-based) of the hex string `h`."""
    return (
        f"((instr({_HEX}, substr({h}, {2 * i - 1}, 1)) - 1) * 16"
        f" + instr({_HEX}, substr({h}, {2 * i}, 1)) - 1)"
    )


def _varint_sql(h: str) -> str:
    """SQL: the SQLite varint at the start of the hex string `h` (up to 4 bytes: 2^28,
    beyond any memory's token count), as FTS5 writes a row's size in `<table>_docsize`."""
    b = [_byte(h, i) for i in range(1, 5)]
    return (
        f"CASE WHEN {b[0]} < 128 THEN {b[0]}"
        f" WHEN {b[1]} < 128 THEN ({b[0]} & 127) * 128 + {b[1]}"
        f" WHEN {b[2]} < 128 THEN (({b[0]} & 127) * 128 + ({b[1]} & 127)) * 128 + {b[2]}"
        f" ELSE ((({b[0]} & 127) * 128 + ({b[1]} & 127)) * 128 + ({b[2]} & 127)) * 128"
        f" + {b[3]} END"
    )


def _tokens_sql(memory_id: str, docsize: str = "memories_fts_docsize") -> str:
    """SQL: the token count an FTS5 table (its `docsize` record) holds for `memory_id`."""
    return (
        f"ifnull((SELECT {_varint_sql('h')} FROM (SELECT hex(sz) AS h FROM"
        f" {docsize} WHERE id = {memory_id})), 0)"
    )


# Per-project BM25 statistics (issue 14: a project is a wall). FTS5's bm25() counts N,
# avgdl and df over the whole table, so another project's memories changed this project's
# ranking. memories.tokens is each memory's token count as memories_fts counts it (read off
# FTS5's own docsize record right after the memory is indexed, in the FTS triggers), and
# keyword_totals holds per project (NUL for none) the live memories and their tokens, kept
# by triggers that only add signed amounts (so the order in which SQLite fires them does
# not matter). Document frequencies per project are counted at query time (cortex.keyword).
# The change log now also records a memory moving to another project (the in-memory index
# keeps each memory's project). memories_live_project gives the ids a project filter admits
# in id order without reading a table row each (Store.allowed_ids: 38 -> 2.5 ms for a
# project of 10k memories in 100k).
_SCHEMA_KEYWORD_TOTALS = f"""
ALTER TABLE memories ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;
UPDATE memories SET tokens = {_tokens_sql("memories.id")} WHERE deleted_at IS NULL;
CREATE TABLE keyword_totals (
    project TEXT PRIMARY KEY NOT NULL,
    docs    INTEGER NOT NULL,
    tokens  INTEGER NOT NULL
);
INSERT INTO keyword_totals(project, docs, tokens)
    SELECT ifnull(project_id, char(0)), COUNT(*), SUM(tokens) FROM memories
    WHERE deleted_at IS NULL GROUP BY ifnull(project_id, char(0));
CREATE TRIGGER keyword_totals_ai AFTER INSERT ON memories WHEN new.deleted_at IS NULL BEGIN
    INSERT INTO keyword_totals(project, docs, tokens)
        VALUES (ifnull(new.project_id, char(0)), 1, new.tokens)
        ON CONFLICT(project) DO UPDATE SET docs = docs + excluded.docs,
            tokens = tokens + excluded.tokens;
END;
CREATE TRIGGER keyword_totals_ad AFTER DELETE ON memories WHEN old.deleted_at IS NULL BEGIN
    INSERT INTO keyword_totals(project, docs, tokens)
        VALUES (ifnull(old.project_id, char(0)), -1, -old.tokens)
        ON CONFLICT(project) DO UPDATE SET docs = docs + excluded.docs,
            tokens = tokens + excluded.tokens;
END;
CREATE TRIGGER keyword_totals_au AFTER UPDATE OF tokens, project_id, deleted_at ON memories
BEGIN
    INSERT INTO keyword_totals(project, docs, tokens)
        SELECT ifnull(old.project_id, char(0)), -1, -old.tokens WHERE old.deleted_at IS NULL
        ON CONFLICT(project) DO UPDATE SET docs = docs + excluded.docs,
            tokens = tokens + excluded.tokens;
    INSERT INTO keyword_totals(project, docs, tokens)
        SELECT ifnull(new.project_id, char(0)), 1, new.tokens WHERE new.deleted_at IS NULL
        ON CONFLICT(project) DO UPDATE SET docs = docs + excluded.docs,
            tokens = tokens + excluded.tokens;
END;
DROP TRIGGER memories_ai;
CREATE TRIGGER memories_ai AFTER INSERT ON memories
WHEN NOT EXISTS (SELECT 1 FROM meta WHERE key = 'bulk_insert') BEGIN
    INSERT INTO memories_fts(rowid, content)
        SELECT new.id, new.content WHERE new.deleted_at IS NULL;
    INSERT INTO memories_exact(rowid, content)
        SELECT new.id, new.content WHERE new.deleted_at IS NULL;
    INSERT INTO memories_trigram(rowid, content)
        SELECT new.id, new.content WHERE new.deleted_at IS NULL AND new.has_cjk;
    UPDATE memories SET tokens = {_tokens_sql("new.id")}
        WHERE id = new.id AND new.deleted_at IS NULL;
END;
DROP TRIGGER memories_au;
CREATE TRIGGER memories_au AFTER UPDATE OF content, deleted_at, has_cjk ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, content)
        SELECT 'delete', old.id, old.content WHERE old.deleted_at IS NULL;
    INSERT INTO memories_exact(memories_exact, rowid, content)
        SELECT 'delete', old.id, old.content WHERE old.deleted_at IS NULL;
    INSERT INTO memories_trigram(memories_trigram, rowid, content)
        SELECT 'delete', old.id, old.content WHERE old.deleted_at IS NULL AND old.has_cjk;
    INSERT INTO memories_fts(rowid, content)
        SELECT new.id, new.content WHERE new.deleted_at IS NULL;
    INSERT INTO memories_exact(rowid, content)
        SELECT new.id, new.content WHERE new.deleted_at IS NULL;
    INSERT INTO memories_trigram(rowid, content)
        SELECT new.id, new.content WHERE new.deleted_at IS NULL AND new.has_cjk;
    UPDATE memories SET tokens = {_tokens_sql("new.id")}
        WHERE id = new.id AND new.deleted_at IS NULL;
END;
CREATE INDEX memories_live_project ON memories(project_id)
    WHERE deleted_at IS NULL AND superseded_by IS NULL;
DROP TRIGGER memories_log_au;
CREATE TRIGGER memories_log_au AFTER UPDATE OF content, deleted_at, project_id ON memories
WHEN old.content IS NOT new.content OR old.deleted_at IS NOT new.deleted_at
    OR old.project_id IS NOT new.project_id BEGIN
    INSERT INTO memory_changes(memory_id) VALUES (new.id);
END;
"""

# Code references (cortex.code): the file paths, dotted names and backticked identifiers
# each memory's content names, written with the memory (Store._insert, _insert_bulk,
# _rewrite), rebuilt by `cortex reindex`, and backfilled here for the memories written
# before (_BACKFILLS). `key` is the reference lower-cased, what filters match; `name` its
# last part (a file's name, a dotted name's last identifier), what finds it by index.
_SCHEMA_CODE_REFS = """
CREATE TABLE memory_code (
    memory_id INTEGER NOT NULL REFERENCES memories(id),
    ref       TEXT NOT NULL,
    key       TEXT NOT NULL,
    name      TEXT NOT NULL,
    kind      TEXT NOT NULL,
    line      INTEGER,
    UNIQUE (memory_id, key)
);
CREATE INDEX memory_code_key ON memory_code(key);
CREATE INDEX memory_code_name ON memory_code(name);
"""

# Lenses (cortex.lenses): named, saved sets of search options. Documents
# (cortex.documents): the whole text of each imported Markdown file, one row per (source,
# project), searchable apart from its chunks through documents_fts; written by
# Store.sync_file with the chunks, backfilled here from the chunks already stored.
_SCHEMA_LENSES_DOCUMENTS = """
CREATE TABLE lenses (
    name        TEXT PRIMARY KEY,
    options     TEXT NOT NULL,
    description TEXT,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);
CREATE TABLE documents (
    id          INTEGER PRIMARY KEY,
    project_id  TEXT,
    source_path TEXT NOT NULL,
    title       TEXT NOT NULL,
    content     TEXT NOT NULL,
    chunks      INTEGER NOT NULL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);
CREATE UNIQUE INDEX documents_key ON documents(source_path, ifnull(project_id, char(0)));
CREATE VIRTUAL TABLE documents_fts USING fts5(
    title, content, content='documents', content_rowid='id', tokenize='{stemmed}'
);
CREATE TRIGGER documents_ai AFTER INSERT ON documents BEGIN
    INSERT INTO documents_fts(rowid, title, content) VALUES (new.id, new.title, new.content);
END;
CREATE TRIGGER documents_ad AFTER DELETE ON documents BEGIN
    INSERT INTO documents_fts(documents_fts, rowid, title, content)
        VALUES ('delete', old.id, old.title, old.content);
END;
CREATE TRIGGER documents_au AFTER UPDATE ON documents BEGIN
    INSERT INTO documents_fts(documents_fts, rowid, title, content)
        VALUES ('delete', old.id, old.title, old.content);
    INSERT INTO documents_fts(rowid, title, content) VALUES (new.id, new.title, new.content);
END;
"""

# Embeddings stored as float16 (cortex.vectors.encode_stored: L2-normalised, then rounded;
# half the bytes of float32). Nothing in the schema changes: the backfill rewrites every
# float32 vector in place, and drops the state of the vector indexes derived from them so
# that they are rebuilt from the rounded rows (their scores are checked against SQLite).
_SCHEMA_EMBEDDINGS_F16 = """
-- embeddings.vector: float16 from this version on (the backfill converts float32 rows)
"""

# The change log also records a change of the columns ranking reads (cortex.ranking.
# RANK_COLUMNS): the in-memory keyword index keeps them beside its postings, so that the
# keyword leg ranks without reading them back from SQLite (cortex.keyword_index), and it
# must see a memory superseded, reinforced or re-dated as it sees one edited. Not a
# migration: the trigger only appends to the log, which every version since 2 reads, so a
# file that has it stays readable and writable by an older cortex (whose writes it logs
# too). A writable open creates it when missing (Store._log_ranks); `Store.logs_ranks`
# says whether the file has it.
RANK_LOG = "memories_log_rank"
_RANK_LOG_TRIGGER = f"""
CREATE TRIGGER IF NOT EXISTS {RANK_LOG}
AFTER UPDATE OF created_at, confidence, salience, sector, source_path, superseded_by, category
ON memories
WHEN old.created_at IS NOT new.created_at OR old.confidence IS NOT new.confidence
    OR old.salience IS NOT new.salience OR old.sector IS NOT new.sector
    OR old.source_path IS NOT new.source_path OR old.superseded_by IS NOT new.superseded_by
    OR old.category IS NOT new.category BEGIN
    INSERT INTO memory_changes(memory_id) VALUES (new.id);
END;
"""

# Where each vector came from, and a lookup by content hash that costs ~20 B a memory
# instead of the 128 B of (model id, content hash): the full 64-character hash and the
# model id are compared on the few rows the 8-character prefix finds (`Semantic.vectors_for`,
# the only reader). `supplied`: 1 when the caller gave the vector (`add_many(vectors=...)`),
# which cortex cannot make again, 0 when the model made it from the text; NULL for vectors
# written before this was recorded (treated as supplied: never silently replaced).
_SCHEMA_EMBEDDINGS_ORIGIN = """
ALTER TABLE embeddings ADD COLUMN supplied INTEGER;
DROP INDEX IF EXISTS embeddings_model_hash;
CREATE INDEX embeddings_hash ON embeddings(substr(content_hash, 1, 8));
"""

# Each vector stored once: the vector file of its model (`<db>-vectors/`, see semantic.py,
# "the vector file") becomes the source of truth and `embeddings` keeps, instead of the
# vector, a checksum of the stored row. The backfill writes every vector into a new file,
# syncs it and checks every row against its blob before the blobs go; `vectors_lost`
# lists the supplied vectors a damaged file took with it (they cannot be made again).
_SCHEMA_VECTORS_ONCE = """
CREATE TABLE embeddings_once (
    memory_id    INTEGER NOT NULL REFERENCES memories(id),
    model_id     TEXT NOT NULL,
    dim          INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    checksum     INTEGER NOT NULL,
    supplied     INTEGER,
    created_at   REAL NOT NULL,
    PRIMARY KEY (memory_id, model_id)
);
CREATE TABLE vectors_lost (
    memory_id INTEGER NOT NULL,
    model_id  TEXT NOT NULL,
    lost_at   REAL NOT NULL,
    PRIMARY KEY (memory_id, model_id)
);
"""

# Forward migrations: MIGRATIONS[i] takes a database at schema version i to i + 1. A
# migration never edits an earlier entry; a new schema is a new entry at the end.
MIGRATIONS: tuple[str, ...] = (
    _SCHEMA_V1,
    _SCHEMA_V2,
    _SCHEMA_SESSIONS_BY_PROJECT,
    _SCHEMA_BULK_INSERT,
    _SCHEMA_KEYWORD_TOTALS,
    _SCHEMA_CODE_REFS,
    _SCHEMA_LENSES_DOCUMENTS,
    _SCHEMA_EMBEDDINGS_F16,
    _SCHEMA_EMBEDDINGS_ORIGIN,
    _SCHEMA_VECTORS_ONCE,
)


def _backfill_code(tx: sqlite3.Connection) -> None:
    """The references of every memory written before memory_code existed."""
    from cortex.code import write_refs

    cur = tx.execute("SELECT id, content FROM memories WHERE deleted_at IS NULL ORDER BY id")
    while rows := cur.fetchmany(2048):
        write_refs(tx, rows, replace=False)


def _backfill_documents(tx: sqlite3.Connection) -> None:
    """The documents of the Markdown files imported before the documents table existed."""
    from cortex.documents import write_document

    keys = tx.execute(
        "SELECT DISTINCT project_id, source_path FROM memories"
        f" WHERE deleted_at IS NULL AND chunk_index IS NOT NULL AND {_DOCUMENT_SOURCE}"
    ).fetchall()
    for project, source in keys:
        rows = tx.execute(
            "SELECT content, created_at FROM memories WHERE source_path = ? AND project_id IS ?"
            " AND deleted_at IS NULL ORDER BY chunk_index, id",
            (source, project),
        ).fetchall()
        write_document(tx, source, project, [r[0] for r in rows], rows[0][1] if rows else None)


def _backfill_embeddings_f16(tx: sqlite3.Connection) -> None:
    """Every float32 embedding rewritten as float16 (see `_SCHEMA_EMBEDDINGS_F16`), then the
    state files of the derived vector indexes removed: a missing state means a rebuild."""
    from cortex.semantic import index_dir
    from cortex.vectors import decode_stored, encode_stored

    last = 0
    while True:
        rows = tx.execute(
            "SELECT rowid, dim, vector FROM embeddings WHERE rowid > ? AND length(vector) = 4 * dim"
            " ORDER BY rowid LIMIT 2048",
            (last,),
        ).fetchall()
        if not rows:
            break
        last = int(rows[-1][0])
        for dim in {int(r[1]) for r in rows}:
            part = [r for r in rows if r[1] == dim]
            blobs = encode_stored(decode_stored([r[2] for r in part], dim))
            tx.executemany(
                "UPDATE embeddings SET vector = ? WHERE rowid = ?",
                [(b, r[0]) for b, r in zip(blobs, part, strict=True)],
            )
    main = next((r[2] for r in tx.execute("PRAGMA database_list") if r[1] == "main"), "")
    if main:
        folder = index_dir(Path(main))
        for state in folder.glob("vectors-*.state") if folder.is_dir() else ():
            with suppress(OSError):
                state.unlink()


def _backfill_vectors_once(tx: sqlite3.Connection) -> None:
    """Every vector written to a new vector file of its model (synced, then each row
    checked against its blob), `embeddings_once` filled with their checksums, then the
    old table (and its blobs) dropped. The derived index files of the old layout go."""
    from cortex.semantic import index_dir, migrate_vectors

    main = next((r[2] for r in tx.execute("PRAGMA database_list") if r[1] == "main"), "")
    models = [
        (str(m), int(d))
        for m, d in tx.execute("SELECT model_id, MAX(dim) FROM embeddings GROUP BY model_id")
    ]
    for model, dim in models:
        if not main:
            raise StorageError("cannot move the vectors of an in-memory database to a file")
        migrate_vectors(tx, Path(main), model, dim)
    tx.execute("DROP TABLE embeddings")
    tx.execute("ALTER TABLE embeddings_once RENAME TO embeddings")
    tx.execute("CREATE INDEX embeddings_hash ON embeddings(substr(content_hash, 1, 8))")
    if main:
        folder = index_dir(Path(main))
        for old in folder.glob("vectors-*") if folder.is_dir() else ():
            with suppress(OSError):
                old.unlink()


#: Python steps run right after a migration's script, in its transaction (keyed by the
#: script, so that they follow it when merges renumber the list).
_BACKFILLS: dict[str, Callable[[sqlite3.Connection], None]] = {
    _SCHEMA_CODE_REFS: _backfill_code,
    _SCHEMA_LENSES_DOCUMENTS: _backfill_documents,
    _SCHEMA_EMBEDDINGS_F16: _backfill_embeddings_f16,
    _SCHEMA_VECTORS_ONCE: _backfill_vectors_once,
}
SCHEMA_VERSION = len(MIGRATIONS)
#: The version from which embeddings are stored as float16.
_EMBEDDINGS_F16_VERSION = MIGRATIONS.index(_SCHEMA_EMBEDDINGS_F16) + 1
#: The version from which vectors live in the vector files, not in SQLite.
VECTORS_ONCE_VERSION = MIGRATIONS.index(_SCHEMA_VECTORS_ONCE) + 1
#: The version from which memories.tokens and keyword_totals exist.
_KEYWORD_TOTALS_VERSION = MIGRATIONS.index(_SCHEMA_KEYWORD_TOTALS) + 1
#: The insert triggers of `memories` whose work Store._insert_bulk does itself for many
#: rows at once (any other trigger a later schema adds still fires for each row).
_BULK_DOES = ("memories_ai", "memories_log_ai", "keyword_totals_ai")
#: Entries of memory_changes kept by the housekeeping after a bulk import.
CHANGES_KEPT = 100_000


def row_to_memory(row: Sequence[Any]) -> Memory:
    """A Memory from a row selected with `MEMORY_COLUMNS` (in that order).

    A row that cannot be converted (a date out of range or not a number, metadata that is
    not a JSON object: written by an older cortex or another tool) raises DamagedRowError
    naming the memory, never a raw exception: readers skip it or report it.
    """
    (i, project, content, path, chunk, sector, tier, scope, category, salience, confidence,
     created, updated, valid, by, deleted, accessed, count, raw) = row  # fmt: skip
    if (  # what cortex writes, checked without a call per column (a page reads 20 rows)
        type(content) is str
        and (project is None or type(project) is str)
        and type(salience) is float
        and type(confidence) is float
        and type(created) is float
        and type(updated) is float
        and valid is None
        and deleted is None
        and (accessed is None or type(accessed) is float)
        and (not raw or raw == "{}")
    ):
        try:
            return memory_of((
                i, content, project, path, chunk, sector, tier, scope, category, salience,
                confidence, _utc(created, UTC), _utc(updated, UTC), None, by, None,
                None if accessed is None else _utc(accessed, UTC), count, {},
            ))  # fmt: skip
        except (ValueError, OverflowError, OSError):
            pass  # a date out of range: the checked path names the damage
    return _checked_row_to_memory(row)


_utc = datetime.fromtimestamp


def _checked_row_to_memory(row: Sequence[Any]) -> Memory:
    """row_to_memory, each column checked and converted on its own."""
    try:
        raw = row[18]
        metadata = {} if not raw or raw == "{}" else json.loads(raw)  # most hold none
        if not isinstance(metadata, dict):
            raise TypeError("metadata is not a JSON object")
        if not isinstance(row[2], str) or not isinstance(row[1], str | None):
            raise TypeError("content or project is not text")
        return Memory(
            id=row[0],
            project=row[1],
            content=row[2],
            source_path=row[3],
            chunk_index=row[4],
            sector=row[5],
            tier=row[6],
            scope=row[7],
            category=row[8],
            salience=_real(row[9]),
            confidence=_real(row[10]),
            created_at=from_epoch(_real(row[11])),
            updated_at=from_epoch(_real(row[12])),
            valid_until=from_epoch(_real(row[13], optional=True)),
            superseded_by=row[14],
            deleted_at=from_epoch(_real(row[15], optional=True)),
            last_accessed=from_epoch(_real(row[16], optional=True)),
            access_count=row[17],
            metadata=metadata,
        )
    except (TypeError, ValueError, OverflowError, OSError, RecursionError) as exc:
        raise DamagedRowError(
            f"memory {row[0]} is damaged and cannot be read ({type(exc).__name__}: "
            f"{validate.display(str(exc))[:120]}); delete it or repair the row"
        ) from None


def _real(value: Any, *, optional: bool = False) -> Any:
    """A stored number as a float; a text or blob in a REAL column is damage."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{value!r:.40} is not a number")
    return float(value)


# --------------------------------------------------------------------------- input


@dataclass(frozen=True, slots=True)
class MemoryInput:
    """A memory to write, validated. `created_at` is epoch seconds (UTC)."""

    content: str
    project: str | None = None
    session: str | None = None
    source_path: str | None = None
    chunk_index: int | None = None
    sector: str | None = None
    tier: str | None = None
    scope: str | None = None
    category: str | None = None
    salience: float = 0.5
    confidence: float = 1.0
    created_at: float | None = None
    metadata: Mapping[str, Any] | None = None

    _metadata_json: str = field(default="{}", init=False, repr=False, compare=False)
    _content_hash: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Every check lives in cortex.validate, shared by every write path: what passes
        # here is what every reader can turn back into a Memory. The content is encoded
        # once (the surrogate check) and hashed from those bytes; the common case (no
        # names, plain floats) is checked without a call per field, with the same outcome
        # (10k records and their hashes: 0.071 -> 0.052 CPU-s).
        s = object.__setattr__
        content = self.content
        if not isinstance(content, str):
            raise InvalidOptionError(f"content must be a string, not {type(content).__name__}")
        if not content.strip():
            raise InvalidOptionError("content is empty: a memory needs some text")
        if len(content) > MAX_CONTENT_CHARS:
            raise InvalidOptionError(
                f"content is {len(content):,} characters; the limit is "
                f"{MAX_CONTENT_CHARS:,} (split it into several memories)"
            )
        if "\x00" in content:
            validate.check_text("content", content)  # raises its NUL error
        try:  # one encoding checks for lone surrogates and gives the bytes hashed
            raw = content.encode("utf-8")
        except UnicodeEncodeError:
            validate.check_text("content", content)  # raises its surrogate error
            raise
        s(self, "_content_hash", hashlib.sha256(raw).hexdigest())
        if not (
            self.project is None
            and self.session is None
            and self.sector is None
            and self.tier is None
            and self.scope is None
            and self.category is None
        ):
            for name, value in (
                ("project", self.project),
                ("session", self.session),
                ("sector", self.sector),
                ("tier", self.tier),
                ("scope", self.scope),
                ("category", self.category),
            ):
                if value is not None:
                    validate.name(name, value)
        if self.source_path is not None:
            validate.name("source_path", self.source_path, max_chars=validate.MAX_PATH_CHARS)
        if self.chunk_index is not None and (
            isinstance(self.chunk_index, bool)
            or not isinstance(self.chunk_index, int)
            or not 0 <= self.chunk_index < 2**62
        ):
            raise InvalidOptionError(
                f"chunk_index must be a small integer, not {self.chunk_index!r}"
            )
        # Stored as shown: rounded to 6 decimals, so what `--json` exports re-imports equal
        # (the defaults, 0.5 and 1.0, are their own rounding: a call spared a record).
        salience, confidence = self.salience, self.confidence
        if salience != 0.5 or type(salience) is not float:
            if type(salience) is not float or not 0.0 <= salience <= 1.0:  # NaN fails it too
                salience = validate.unit("salience", salience)
            s(self, "salience", round(salience, 6))
        if confidence != 1.0 or type(confidence) is not float:
            if type(confidence) is not float or not 0.0 <= confidence <= 1.0:
                confidence = validate.unit("confidence", confidence)
            s(self, "confidence", round(confidence, 6))
        if self.created_at is not None:
            s(self, "created_at", validate.timestamp("created_at", self.created_at))
        if self.metadata is not None:
            s(self, "_metadata_json", validate.metadata_json(self.metadata))

    def row(self, now: float) -> tuple[Any, ...]:
        """Its values for the columns of `memories` from project_id to metadata, in
        table order (both insert paths of Store write them; `now`: the write time)."""
        created = self.created_at if self.created_at is not None else now
        return (
            self.project,
            self.content,
            self.content_hash,
            self.source_path,
            self.chunk_index,
            self.sector,
            self.tier,
            self.scope,
            self.category,
            float(self.salience),
            float(self.confidence),
            created,
            now,
            self.metadata_json(),
        )

    def metadata_json(self) -> str:
        return self._metadata_json

    @property
    def content_hash(self) -> str:
        """SHA-256 of the content (hex): what `content_hash(self.content)` returns."""
        return self._content_hash


#: The fields Store.update and PgStore.update change.
UPDATABLE = frozenset(
    {"content", "project", "sector", "tier", "scope", "category", "salience", "confidence",
     "created_at", "metadata", "valid_until"}
)  # fmt: skip


def check_updatable(fields: Mapping[str, Any]) -> None:
    """Raise InvalidOptionError naming the fields of an update that cannot be changed."""
    unknown = set(fields) - UPDATABLE
    if unknown:
        raise InvalidOptionError(
            f"cannot update {', '.join(sorted(unknown))}; updatable fields: "
            + ", ".join(sorted(UPDATABLE))
        )


def merge_update(current: Memory, fields: Mapping[str, Any]) -> MemoryInput:
    """The memory `current` with the updated `fields` (checked: check_updatable) merged
    in, validated as a write (`valid_until` is not part of it)."""
    return MemoryInput(
        content=fields.get("content", current.content),
        project=fields.get("project", current.project),
        sector=fields.get("sector", current.sector),
        tier=fields.get("tier", current.tier),
        scope=fields.get("scope", current.scope),
        category=fields.get("category", current.category),
        salience=fields.get("salience", current.salience),
        confidence=fields.get("confidence", current.confidence),
        # unchanged unless given: None keeps the stored value (COALESCE in _rewrite), which
        # a round trip through a datetime would move by up to a microsecond
        created_at=fields.get("created_at"),
        metadata=fields.get("metadata", current.metadata),
    )


#: Called inside a write transaction for each memory written: (tx, memory id, the input,
#: whether its content is new or changed).
OnWrite = Callable[[sqlite3.Connection, int, MemoryInput, bool], None]
#: Called once inside Store.add_many's transaction after every insert: (tx, ids, items).
AfterInsert = Callable[[sqlite3.Connection, list[int], list[MemoryInput]], None]


@dataclass(slots=True)
class SyncCounts:
    """What syncing a source did to the store."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0

    def __iadd__(self, other: SyncCounts) -> SyncCounts:
        self.added += other.added
        self.updated += other.updated
        self.unchanged += other.unchanged
        self.removed += other.removed
        return self


@dataclass(slots=True)
class SyncPlan:
    """How a store makes the live memories of one source equal its chunks (plan_sync):
    what each backend then writes, in this order."""

    #: (memory, chunk, new position or None): unchanged chunks keep their memory (its id,
    #: counts and vector); a chunk that moved within the source only changes its position
    kept: list[tuple[int, MemoryInput, int | None]] = field(default_factory=list)
    #: (memory, chunk at its position): a changed chunk updates the memory at its position
    rewritten: list[tuple[int, MemoryInput]] = field(default_factory=list)
    #: new memories, each chunk at its position (chunk_index)
    fresh: list[MemoryInput] = field(default_factory=list)
    #: memories of chunks gone from the source: soft-deleted
    stale: list[int] = field(default_factory=list)

    def counts(self) -> SyncCounts:
        return SyncCounts(len(self.fresh), len(self.rewritten), len(self.kept), len(self.stale))


SYNC_COLUMNS = (
    "id, chunk_index, content_hash, sector, tier, scope, category, salience, confidence,"
    " created_at, metadata"
)


def plan_sync(rows: Sequence[Sequence[Any]], chunks: Sequence[MemoryInput]) -> SyncPlan:
    """The plan of a source's sync: `rows` are its live memories (SYNC_COLUMNS, by
    chunk_index then id), `chunks` what the source holds now, in order. A chunk whose
    content and fields a memory holds unchanged keeps that memory (the one already at its
    position first); any other chunk updates the memory at its position when one is left,
    else is new; the memories left over are stale."""
    out = SyncPlan()
    by_hash: dict[str, list[Sequence[Any]]] = {}
    by_index: dict[int, int] = {}
    for row in rows:
        by_hash.setdefault(row[2], []).append(row)
        by_index.setdefault(row[1], row[0])
    index_of = {row[0]: row[1] for row in rows}
    used: set[int] = set()
    pending: list[tuple[int, MemoryInput]] = []
    for position, chunk in enumerate(chunks):
        same = [
            row[0]
            for row in by_hash.get(chunk.content_hash, [])
            if row[0] not in used and _unchanged(chunk, row)
        ]
        if same:
            pick = next((i for i in same if index_of[i] == position), same[0])
            used.add(pick)
            out.kept.append((pick, chunk, position if index_of[pick] != position else None))
        else:
            pending.append((position, chunk))
    for position, chunk in pending:
        target = by_index.get(position)
        if target is not None and target not in used:
            used.add(target)
            out.rewritten.append((target, _with_index(chunk, position)))
        else:
            out.fresh.append(_with_index(chunk, position))
    out.stale = [row[0] for row in rows if row[0] not in used]
    return out


# --------------------------------------------------------------------------- store

#: Sources whose memories are chunks of one text (cortex.ingest's Markdown suffixes): a
#: chunk's neighbours are the chunks before and after it. Records of a JSON/JSONL file are
#: independent of their neighbours.
_DOCUMENT_SUFFIXES = (".md", ".markdown")
_DOCUMENT_SOURCE = "(lower(source_path) LIKE '%.md' OR lower(source_path) LIKE '%.markdown')"


def is_document(source_path: str) -> bool:
    """Whether memories of `source_path` are chunks of one document (_DOCUMENT_SUFFIXES)."""
    return source_path.lower().endswith(_DOCUMENT_SUFFIXES)


#: Tables a search reads for the rows of its page that many stores leave empty (Store.empty).
SPARSE_TABLES = ("facts", "session_memories", "memory_relationships", "memory_code")
_SPARSE_PROBE = "SELECT " + ", ".join(f"EXISTS (SELECT 1 FROM {t})" for t in SPARSE_TABLES)


def _as_stored(project: str | None) -> str | None:
    """A project as SQLite stores it: as named (no project is NULL)."""
    return project


class Store(SharedStore):
    """One cortex database file. Open with :meth:`open`; safe to share between threads."""

    dialect = Dialect(
        mark="?",
        project_is="IS",
        session_join="sm.memory_id = m.id",
        db_project=_as_stored,
        api_project=_as_stored,
        row_to_memory=row_to_memory,
        check_id=validate.memory_id,
    )

    def __init__(self, path: Path, *, read_only: bool = False, immutable: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self.logs_ranks = False  # whether the change log records the ranking columns
        #: Opened with SQLite's immutable=1 (see _read_only_uri): no locks, no -shm.
        self.immutable = immutable
        #: Set when a database asked for writable was opened read-only instead (the user
        #: may read it but not write it); searches report it, nothing is recorded.
        self.notice: str | None = None
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self._closed = False

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
    ) -> Store:
        """Open (and create, unless `read_only`) the database at `path`, migrating it forward."""
        raw = os.fspath(path)
        if not raw or "\x00" in raw:
            raise StorageError(f"invalid database path {raw!r}")
        p = Path(raw).expanduser()
        if p.is_dir():
            raise StorageError(f"{p} is a directory; give the path of a database file in it")
        if read_only and not p.exists():
            raise StorageError(
                f"no database at {p}; create one with `cortex import PATH` or `cortex add TEXT`"
            )
        exists = p.exists() and p.stat().st_size > 0
        immutable = exists and _needs_immutable(p)
        if exists:
            # Before anything is written (the WAL switch, the meta table): another
            # application's SQLite file is refused and left exactly as it was.
            _check_is_cortex(p, immutable)
        notice = None
        if exists and not read_only and not _writable(p):
            read_only = True
            notice = (
                f"{p} is not writable by this user: opened read-only (searches work; "
                "nothing is recorded)"
            )
        if not read_only and not p.exists():
            # The file is created, its folder never: a typo in a path must not leave a tree
            # of folders behind (`/nonexistent/x.db` would create /nonexistent as root).
            folder = p.parent
            if not folder.is_dir():
                if folder.exists() or any(a.exists() and not a.is_dir() for a in folder.parents):
                    raise StorageError(f"cannot create {p}: a part of its folder is a file")
                raise StorageError(
                    f"cannot create {p}: the folder {folder} does not exist; "
                    f"create it first (mkdir -p {folder})"
                )
        store = cls(p, read_only=read_only, immutable=immutable)
        store.notice = notice
        store._migrate()
        store._log_ranks()
        return store

    # ---------------------------------------------------------------- connections

    def _connect(self) -> sqlite3.Connection:
        try:
            if self.read_only:
                uri = _read_only_uri(self.path, self.immutable)
                conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30.0)
            else:
                conn = sqlite3.connect(
                    self.path, isolation_level=None, timeout=30.0, check_same_thread=True
                )
            conn.execute("PRAGMA busy_timeout = 30000")
            if not self.read_only:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if mode.lower() != "wal":
                    raise StorageError(f"{self.path}: cannot switch to WAL mode (got {mode})")
                conn.execute("PRAGMA synchronous = NORMAL")
                # After a checkpoint, cut the WAL back to 64 MiB: without a limit it keeps
                # the size of the largest transaction forever (145 MB after a 1M import).
                conn.execute("PRAGMA journal_size_limit = 67108864")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA temp_store = MEMORY")
            conn.execute("PRAGMA cache_size = -65536")
            conn.execute("PRAGMA mmap_size = 268435456")
        except sqlite3.DatabaseError as exc:
            raise StorageError(_explain(self.path, exc)) from None
        with self._all_lock:
            self._all.append(conn)
        return conn

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's connection."""
        if self._closed:
            raise StorageError(f"{self.path} is closed")
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    def empty(self, table: str) -> bool:
        """Whether `table` (one of SPARSE_TABLES) holds no row. Known per connection until a
        write (this connection's, counted by ``total_changes``, or another's, which moves
        ``PRAGMA data_version``): a search then skips the statements that read them for
        its page (most stores have no facts or relations, many no sessions)."""
        conn = self.conn
        steady = getattr(self._local, "steady", None)
        if steady and steady[0] is conn:
            return table in steady[1]
        try:
            key = (conn.total_changes, conn.execute("PRAGMA data_version").fetchone()[0])
            known = getattr(self._local, "empty", None)
            if known is None or known[0] is not conn or known[1] != key:
                row = conn.execute(_SPARSE_PROBE).fetchone()
                empty = frozenset(t for t, has in zip(SPARSE_TABLES, row, strict=True) if not has)
                known = (conn, key, empty)
                self._local.empty = known
        except sqlite3.DatabaseError:  # an old file read-only lacks one: read them as before
            return False
        if steady is not None:
            self._local.steady = (conn, known[2])
        return table in known[2]

    @contextmanager
    def steady(self) -> Iterator[None]:
        """Within, `empty` probes once for the calling thread (a search's reads of its
        page ask it four to five times, ~3 us a probe): the tables' emptiness as the
        first read saw it."""
        outer = getattr(self._local, "steady", None)
        if outer is None:
            self._local.steady = ()
        try:
            yield
        finally:
            if outer is None:
                self._local.steady = None

    def close_thread_connection(self) -> None:
        """Close the calling thread's connection, if it has one (a worker thread that is
        done: SQLite can close a connection only in the thread that opened it, and the
        last one to close checkpoints the WAL)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            return
        self._local.conn = None
        with self._all_lock:
            if conn in self._all:
                self._all.remove(conn)
        with suppress(sqlite3.Error):
            conn.close()

    def close(self) -> None:
        with self._all_lock:
            for conn in self._all:
                with suppress(sqlite3.Error):  # closing a broken handle
                    conn.close()
            self._all.clear()
        self._closed = True
        self._local = threading.local()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE: the write lock is taken up front, so two
        writers queue on the busy timeout instead of failing half-way)."""
        if self.read_only:
            raise StorageError(f"{self.path} is open read-only")
        conn = self.conn
        if conn.in_transaction:  # nested: join the outer transaction
            yield conn
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StorageError(_explain(self.path, exc)) from None
        self._local.pending = {}
        try:
            yield conn
            # What must be durable elsewhere before this commit (the vector file:
            # semantic.py), written now, in the order it was asked for.
            for part in list(self._local.pending.values()):
                part.flush(conn)
        except BaseException:
            self._local.pending = None
            conn.rollback()
            raise
        else:
            self._local.pending = None
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                conn.rollback()
                raise StorageError(_explain(self.path, exc)) from None

    def pending(self, key: str, make: Callable[[], Any]) -> Any:
        """The object registered under `key` for the transaction this thread is in (made
        by `make` on first use): its ``flush(conn)`` runs inside the transaction, after
        the caller's statements and before COMMIT; it is dropped at the end either way."""
        pending = getattr(self._local, "pending", None)
        if pending is None:
            raise StorageError("Store.pending() outside a transaction")
        if key not in pending:
            pending[key] = make()
        return pending[key]

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a read and return its rows; SQLite failures become StorageError."""
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StorageError(_explain(self.path, exc)) from None

    # ---------------------------------------------------------------- migrations

    def _log_ranks(self) -> None:
        """Create the change log's trigger of the ranking columns (RANK_LOG) when the file
        lacks it and is writable; `logs_ranks` says whether it has it."""
        try:
            found = self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?", (RANK_LOG,)
            ).fetchone()
            if found is None and not self.read_only and self.schema_version() >= 2:
                with self.transaction() as tx:
                    tx.execute(_RANK_LOG_TRIGGER)
                found = (1,)
        except (sqlite3.DatabaseError, StorageError):
            found = None  # busy or locked: the index reads the ranking columns from SQLite
        self.logs_ranks = found is not None

    def _migrate(self) -> None:
        conn = self.conn
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise StorageError(_explain(self.path, exc)) from None
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise StorageError(
                f"{self.path} has schema version {version}, newer than this cortex "
                f"({SCHEMA_VERSION}); upgrade cortex to open it"
            )
        if version == SCHEMA_VERSION:
            return
        if self.read_only and version >= 1:
            # Every later version only added to version 1, which reads need: searching an
            # older file read-only works (without what the additions serve, such as the
            # change log of the in-memory keyword index) until it is opened writable.
            return
        if self.read_only:
            raise StorageError(
                f"{self.path} needs a schema upgrade ({version} -> {SCHEMA_VERSION}); "
                "open it writable once"
            )
        for target in range(version + 1, SCHEMA_VERSION + 1):
            with self.transaction() as tx:
                # The version is re-read under the write lock: another process may have
                # migrated between our read and our BEGIN IMMEDIATE.
                row = tx.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                if row and int(row[0]) >= target:
                    continue
                script = (
                    MIGRATIONS[target - 1]
                    .replace("{stemmed}", STEMMED_TOKENIZER)
                    .replace("{exact}", EXACT_TOKENIZER)
                )
                for statement in _statements(script):
                    tx.execute(statement)
                backfill = _BACKFILLS.get(MIGRATIONS[target - 1])
                if backfill is not None:
                    backfill(tx)
                tx.execute(
                    "INSERT INTO meta(key, value) VALUES ('schema_version', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    (str(target),),
                )
        if version < VECTORS_ONCE_VERSION <= SCHEMA_VERSION and version > 0:
            # The float16 rows left every page of embeddings half empty, and the vectors
            # moved out of SQLite left their pages free: give the space back (1.2 s for
            # 100k memories: 314 -> 208 MB for the first). Skipped at once, not failed
            # and not waited for, when another connection is in the way; a later VACUUM
            # does the same.
            conn.execute("PRAGMA busy_timeout = 0")
            with suppress(sqlite3.Error):
                conn.execute("VACUUM")
            conn.execute("PRAGMA busy_timeout = 30000")

    def rebuild_keyword_totals(self) -> None:
        """Recount every memory's tokens (off FTS5's size records) and the per-project
        totals of the keyword index from scratch (`cortex reindex`); the triggers keep
        them from then on."""
        if self.read_only or self.schema_version() < _KEYWORD_TOTALS_VERSION:
            return
        with self.transaction() as tx:
            tx.execute(
                f"UPDATE memories SET tokens = {_tokens_sql('memories.id')}"
                " WHERE deleted_at IS NULL"
            )
            tx.execute("DELETE FROM keyword_totals")
            tx.execute(
                "INSERT INTO keyword_totals(project, docs, tokens)"
                " SELECT ifnull(project_id, char(0)), COUNT(*), SUM(tokens) FROM memories"
                " WHERE deleted_at IS NULL GROUP BY ifnull(project_id, char(0))"
            )

    def keyword_totals(self, projects: Sequence[str]) -> tuple[int, int]:
        """(live memories, their tokens as memories_fts counts them) of `projects`."""
        if not projects:
            return 0, 0
        marks = ",".join("?" * len(projects))
        row = self.query(
            "SELECT COALESCE(SUM(docs), 0), COALESCE(SUM(tokens), 0) FROM keyword_totals"
            f" WHERE project IN ({marks})",
            list(projects),
        )[0]
        return int(row[0]), int(row[1])

    def after_bulk_write(self, keep_changes: int = CHANGES_KEPT) -> None:
        """Housekeeping after a large import: drop all but the last `keep_changes` entries
        of the change log (an in-memory index further behind rebuilds instead of replaying)
        and checkpoint the WAL so that it shrinks back to its size limit."""
        if self.read_only:
            return
        with self.transaction() as tx:
            tx.execute(
                "DELETE FROM memory_changes WHERE seq <= (SELECT MAX(seq) FROM memory_changes) - ?",
                (keep_changes,),
            )
        with suppress(sqlite3.Error):  # busy readers only make the checkpoint partial
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def rebuild_code(self) -> int:
        """Extract the code references of every live memory again (`cortex reindex`: after
        an upgrade of the extraction rules); returns how many references are stored."""
        with self.transaction() as tx:
            tx.execute("DELETE FROM memory_code")
            _backfill_code(tx)
            return int(tx.execute("SELECT COUNT(*) FROM memory_code").fetchone()[0])

    def rebuild_documents(self) -> int:
        """Write every imported Markdown file's document again from its stored chunks
        (`cortex reindex`, a copy from PostgreSQL); returns how many there are."""
        with self.transaction() as tx:
            tx.execute("DELETE FROM documents")
            _backfill_documents(tx)
            return int(tx.execute("SELECT COUNT(*) FROM documents").fetchone()[0])

    def schema_version(self) -> int:
        row = self.query("SELECT value FROM meta WHERE key = 'schema_version'")
        return int(row[0][0]) if row else 0

    # ---------------------------------------------------------------- writes

    def add(self, item: MemoryInput, on_write: OnWrite | None = None) -> int:
        return self.add_many([item], on_write)[0]

    def add_many(
        self,
        items: Iterable[MemoryInput],
        on_write: OnWrite | None = None,
        *,
        after: AfterInsert | None = None,
    ) -> list[int]:
        """Insert memories in one transaction; all or none are written.

        `on_write(tx, memory_id, item, changed)` runs inside the transaction for each
        memory (the Engine stores its embedding there, so a memory and its vector commit
        together); `after(tx, ids, items)` runs once, inside it too, after every insert.
        The rows go in with one statement and their keyword-index rows with one statement
        per index (see _SCHEMA_BULK_INSERT), instead of a trigger per row.
        """
        items = list(items)
        if not items:
            return []
        now = time.time()
        with self.transaction() as tx:
            if len(items) == 1:  # one memory (an agent's add): the triggers, no flag row
                ids = [self._insert(tx, items[0], now)]
            else:
                ids = self._insert_bulk(tx, items, now)
            if on_write is not None:
                for memory_id, item in zip(ids, items, strict=True):
                    on_write(tx, memory_id, item, True)
            if after is not None:
                after(tx, ids, items)
        return ids

    def _insert_bulk(
        self, tx: sqlite3.Connection, items: list[MemoryInput], now: float
    ) -> list[int]:
        """Insert `items` with consecutive ids (the write lock is held: nobody else
        inserts): their keyword-index rows first, one executemany per index, then the rows
        with the token counts FTS5 just recorded, then the change log and the per-project
        totals in one statement each.

        The insert triggers of `memories` that would do the same one row at a time
        (_BULK_DOES) are dropped for the rows' insert and created again from their own
        stored SQL, all inside this transaction: no other connection ever sees the schema
        without them, and a failure rolls all of it back. A trigger muted by its WHEN
        clause still costs a sub-program run a row: 10k rows went in in 0.148 CPU-s with
        the three muted by the 'bulk_insert' flag row (the earlier way,
        _SCHEMA_BULK_INSERT), 0.069 with them dropped."""
        first = int(tx.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM memories").fetchone()[0])
        ids = range(first, first + len(items))
        span = (first, first + len(items) - 1)
        texts = [(memory_id, item.content) for memory_id, item in zip(ids, items, strict=True)]
        cjk = [has_cjk(item.content) for item in items]
        # An external-content FTS5 table reads nothing from `memories` when a row goes in,
        # so the index rows may precede the memory's row in the same transaction.
        tx.executemany("INSERT INTO memories_fts(rowid, content) VALUES (?, ?)", texts)
        tx.executemany("INSERT INTO memories_exact(rowid, content) VALUES (?, ?)", texts)
        if any(cjk):
            tx.executemany(
                "INSERT INTO memories_trigram(rowid, content) VALUES (?, ?)",
                [row for row, c in zip(texts, cjk, strict=True) if c],
            )
        tokens = {
            int(i): _varint(sz)
            for i, sz in tx.execute(
                "SELECT id, sz FROM memories_fts_docsize WHERE id BETWEEN ? AND ?", span
            )
        }
        triggers = tx.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'memories'"
            f" AND name IN ({','.join('?' * len(_BULK_DOES))})",
            _BULK_DOES,
        ).fetchall()
        for name, _ in triggers:
            # a name of the fixed _BULK_DOES list (the query above selects no other); a
            # trigger's name is an identifier, which SQLite does not take as a parameter
            tx.execute(f'DROP TRIGGER "{name}"')
        tx.executemany(
            "INSERT INTO memories (id, project_id, content, content_hash, source_path,"
            " chunk_index, sector, tier, scope, category, salience, confidence, created_at,"
            " updated_at, metadata, has_cjk, tokens)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (memory_id, *item.row(now), int(c), tokens.get(memory_id, 0))
                for memory_id, item, c in zip(ids, items, cjk, strict=True)
            ],
        )
        for _, sql in triggers:
            tx.execute(sql)
        # one statement over a JSON array of the ids, in order (as the embeddings rows of
        # supplied vectors go in): ~1 ms a 5,000 rows, as an executemany of 100 rows a
        # statement measured
        tx.execute(
            "INSERT INTO memory_changes(memory_id) SELECT value FROM json_each(?) ORDER BY key",
            (json.dumps(list(ids)),),
        )
        totals: dict[str, list[int]] = {}
        for memory_id, item in zip(ids, items, strict=True):
            # keyword_totals keys a memory without a project as ifnull(project_id, char(0))
            total = totals.setdefault("\x00" if item.project is None else item.project, [0, 0])
            total[0] += 1
            total[1] += tokens.get(memory_id, 0)
        tx.executemany(
            "INSERT INTO keyword_totals(project, docs, tokens) VALUES (?, ?, ?)"
            " ON CONFLICT(project) DO UPDATE SET docs = docs + excluded.docs,"
            " tokens = tokens + excluded.tokens",
            [(project, docs, n) for project, (docs, n) in totals.items()],
        )
        write_refs(tx, texts, replace=False)
        for memory_id, item in zip(ids, items, strict=True):
            if item.session:
                self._link_session(tx, item.session, memory_id, "created", item.project, now)
        return list(ids)

    def _insert(self, tx: sqlite3.Connection, item: MemoryInput, now: float) -> int:
        cur = tx.execute(
            "INSERT INTO memories (project_id, content, content_hash, source_path, chunk_index,"
            " sector, tier, scope, category, salience, confidence, created_at, updated_at,"
            " metadata, has_cjk) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*item.row(now), int(has_cjk(item.content))),
        )
        memory_id = int(cur.lastrowid or 0)
        write_refs(tx, [(memory_id, item.content)], replace=False)
        if item.session:
            self._link_session(tx, item.session, memory_id, "created", item.project, now)
        return memory_id

    def _link_session(
        self,
        tx: sqlite3.Connection,
        session_id: str,
        memory_id: int,
        usage: str,
        project: str | None,
        now: float,
    ) -> None:
        tx.execute(
            "INSERT INTO sessions (id, project_id, started_at) VALUES (?, ?, ?) "
            f"ON CONFLICT{SESSION_KEY} DO NOTHING",
            (session_id, project, now),
        )
        tx.execute(
            "INSERT INTO session_memories (session_id, memory_id, usage, created_at) "
            "VALUES (?, ?, ?, ?)",
            (session_id, memory_id, usage, now),
        )

    def update(self, memory_id: int, *, on_write: OnWrite | None = None, **fields: Any) -> Memory:
        """Change some fields of a live memory; returns it as stored afterwards."""
        check_updatable(fields)
        current = self.get(memory_id)
        merged = merge_update(current, fields)
        valid_until = validate.timestamp("valid_until", fields.get("valid_until"))
        with self.transaction() as tx:
            self._rewrite(tx, memory_id, merged, time.time())
            if on_write is not None:
                on_write(tx, memory_id, merged, merged.content != current.content)
            if "valid_until" in fields:
                tx.execute(
                    "UPDATE memories SET valid_until = ? WHERE id = ?", (valid_until, memory_id)
                )
        return self.get(memory_id)

    def _rewrite(
        self, tx: sqlite3.Connection, memory_id: int, item: MemoryInput, now: float
    ) -> None:
        tx.execute(
            "UPDATE memories SET project_id = ?, content = ?, content_hash = ?, sector = ?,"
            " tier = ?, scope = ?, category = ?, salience = ?, confidence = ?,"
            " created_at = COALESCE(?, created_at),"
            " updated_at = ?, metadata = ?, has_cjk = ?, chunk_index = COALESCE(?, chunk_index)"
            " WHERE id = ?",
            (
                item.project,
                item.content,
                item.content_hash,
                item.sector,
                item.tier,
                item.scope,
                item.category,
                float(item.salience),
                float(item.confidence),
                item.created_at,
                now,
                item.metadata_json(),
                int(has_cjk(item.content)),
                item.chunk_index,
                memory_id,
            ),
        )
        write_refs(tx, [(memory_id, item.content)])
        if item.session:
            self._link_session(tx, item.session, memory_id, "updated", item.project, now)

    def sync_source(
        self,
        source_path: str,
        project: str | None,
        chunks: Sequence[MemoryInput],
        on_write: OnWrite | None = None,
    ) -> SyncCounts:
        """Make the live memories of (`project`, `source_path`) equal `chunks`, in one transaction.

        A chunk whose content and fields are unchanged is left alone (its id, access counts
        and embedding survive); a chunk that moved within the file keeps its memory; a changed
        chunk updates the memory at its position; chunks gone from the source are soft-deleted.
        `on_write` runs in the transaction for every live chunk (`changed` False when kept).
        """
        now = time.time()
        with self.transaction() as tx:
            rows = tx.execute(
                f"SELECT {SYNC_COLUMNS} FROM memories"
                " WHERE source_path = ? AND project_id IS ? AND deleted_at IS NULL"
                " ORDER BY chunk_index, id",
                (source_path, project),
            ).fetchall()
            plan = plan_sync(rows, chunks)
            for pick, chunk, moved in plan.kept:
                if on_write is not None:
                    on_write(tx, pick, chunk, False)
                if moved is not None:
                    tx.execute("UPDATE memories SET chunk_index = ? WHERE id = ?", (moved, pick))
            for target, chunk in plan.rewritten:
                self._rewrite(tx, target, chunk, now)
                if on_write is not None:
                    on_write(tx, target, chunk, True)
            fresh = plan.fresh  # inserted together (_insert_bulk)
            if fresh:
                added = (
                    self._insert_bulk(tx, fresh, now)
                    if len(fresh) > 1
                    else [self._insert(tx, fresh[0], now)]
                )
                if on_write is not None:
                    for target, chunk in zip(added, fresh, strict=True):
                        on_write(tx, target, chunk, True)
            for memory_id in plan.stale:
                tx.execute("UPDATE memories SET deleted_at = ? WHERE id = ?", (now, memory_id))
            counts = plan.counts()
        return counts

    def _file_synced(self, tx: Any, path: str, chunks: dict[str | None, list[Any]]) -> None:
        """A Markdown file's document rows (cortex.documents), one per project touched."""
        if is_document(path):
            from cortex.documents import write_document

            for project, parts in chunks.items():
                created = parts[0].created_at if parts else None
                write_document(tx, path, project, [c.content for c in parts], created)

    # ---------------------------------------------------------------- reads

    def get_many(
        self, ids: Sequence[int], *, damaged: list[int] | None = None
    ) -> dict[int, Memory]:
        """The memories of `ids` (deleted ones too). A damaged row is left out, and its id
        appended to `damaged` when a list is given."""
        out: dict[int, Memory] = {}
        for start in range(0, len(ids), 500):
            part = list(ids[start : start + 500])
            marks = ",".join("?" * len(part))
            for row in self.query(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN ({marks})",
                part,
            ):
                try:
                    out[row[0]] = row_to_memory(row)
                except DamagedRowError:
                    if damaged is not None:
                        damaged.append(row[0])
        return out

    def page_rows(
        self, ids: Sequence[int], *, damaged: list[int] | None = None
    ) -> tuple[dict[int, Memory], dict[int, list[CodeRef]]]:
        """get_many and code_refs of a search's page in one statement: the memories of
        `ids` (a damaged row left out and named in `damaged`) and their code references
        (in the order code_refs gives)."""
        if not ids or self.empty("memory_code"):
            return self.get_many(ids, damaged=damaged), {}
        memories: dict[int, Memory] = {}
        refs: dict[int, list[CodeRef]] = {}
        for start in range(0, len(ids), 500):
            part = list(ids[start : start + 500])
            marks = ",".join("?" * len(part))
            last = None
            for row in self.query(
                f"SELECT {M_COLUMNS}, c.ref, c.kind, c.line FROM memories m"
                f" LEFT JOIN memory_code c ON c.memory_id = m.id WHERE m.id IN ({marks})"
                " ORDER BY m.id, c.rowid",
                part,
            ):
                i = row[0]
                if i != last:
                    last = i
                    try:
                        memories[i] = row_to_memory(row[:19])
                    except DamagedRowError:
                        if damaged is not None:
                            damaged.append(i)
                if row[19] is not None:
                    refs.setdefault(int(i), []).append(CodeRef(row[19], row[20], row[21]))
        return memories, refs

    # ---------------------------------------------------------------- search reads
    # The statements the search pipeline runs outside the keyword tiers (which are FTS5's
    # own, in cortex.keyword). Filters are one predicate (cortex.filters.where).

    def rank_info(self, ids: Sequence[int], opts: Any) -> dict[int, Any]:
        """What ranking needs (:class:`cortex.ranking.RankInfo`) of the memories among
        `ids` that pass `opts`'s filters: how retrievers that find ids outside SQLite (the
        vector and in-memory keyword indexes) apply the filters."""
        from cortex.filters import admitted

        return admitted(self, ids, opts)

    def allowed_ids(self, opts: Any) -> Any:
        """The sorted ids (int64 array) of every memory `opts`'s filters admit, or None
        when they admit every live memory (only deleted and superseded ones are left out,
        which retrievers check on their hits)."""
        from cortex.filters import narrows, where

        if not narrows(opts):
            return None
        import numpy as np  # only now: a keyword search without filters never loads it

        predicate, params = where(opts)
        return np.fromiter(
            (
                r[0]
                for r in self.query(
                    f"SELECT m.id FROM memories m WHERE {predicate} ORDER BY m.id", params
                )
            ),
            dtype=np.int64,
        )

    def list_filtered(self, opts: Any, limit: int) -> list[tuple[int, Any]]:
        """(id, RankInfo) of up to `limit` memories passing `opts`'s filters, newest first
        (or by stored confidence): a search without text."""
        from cortex.filters import where
        from cortex.options import OrderBy
        from cortex.ranking import RANK_COLUMNS, RankInfo

        predicate, params = where(opts)
        order = (
            "m.confidence DESC, m.id"
            if opts.order_by is OrderBy.CONFIDENCE
            else "m.created_at DESC, m.id DESC"
        )
        if str(opts.order) == "asc":
            order = (
                "m.confidence, m.id DESC"
                if opts.order_by is OrderBy.CONFIDENCE
                else ("m.created_at, m.id")
            )
        rows = self.query(
            f"SELECT m.id, {RANK_COLUMNS} FROM memories m WHERE {predicate}"
            f" ORDER BY {order} LIMIT ?",
            [*params, limit],
        )
        return [(int(i), RankInfo(*rest)) for i, *rest in rows]

    def filtered_aggregations(self, opts: Any, sessions: int = 50) -> dict[str, Any]:
        """The counts of every memory passing `opts`'s filters, in SQL (a listing whose
        matches outnumber the page's candidate pool): the total, by project, category,
        session (the `sessions` largest) and fact type, and per day of creation (for the
        time buckets of cortex.search.pages.counted). Three statements: one pass over the
        memories grouped by (project, category, day), and one join each for sessions and
        fact types."""
        from cortex.filters import where

        predicate, params = where(opts)
        groups = self.query(
            "SELECT ifnull(m.project_id, ''), m.category,"
            f" CAST(m.created_at / 86400 AS INTEGER), COUNT(*) FROM memories m WHERE {predicate}"
            " GROUP BY 1, 2, 3",
            params,
        )
        by_session = self.query(
            "SELECT sm.session_id, COUNT(DISTINCT m.id) FROM memories m JOIN session_memories sm"
            f" ON sm.memory_id = m.id AND sm.usage = 'created' WHERE {predicate}"
            " GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT ?",
            [*params, sessions],
        )
        by_fact_type = self.query(
            "SELECT f.type, COUNT(DISTINCT m.id) FROM memories m JOIN facts f"
            f" ON f.memory_id = m.id WHERE {predicate} GROUP BY 1 ORDER BY 2 DESC, 1",
            params,
        )
        projects: Counter[str] = Counter()
        categories: Counter[str] = Counter()
        days: Counter[int] = Counter()
        for project, category, day, n in groups:
            projects[str(project)] += n
            if category is not None:
                categories[str(category)] += n
            days[int(day)] += n
        return {
            "total": sum(days.values()),
            "by_project": dict(projects.most_common()),
            "by_category": dict(categories.most_common()),
            "by_session": {str(k): int(n) for k, n in by_session},
            "by_fact_type": {str(k): int(n) for k, n in by_fact_type},
            "days": sorted(days.items()),
        }

    def code_refs(self, ids: Sequence[int]) -> dict[int, list[CodeRef]]:
        """The code references of each memory of `ids` (cortex.code); none in a database
        opened read-only before its upgrade added them."""
        if not ids or self.empty("memory_code"):
            return {}
        try:
            return refs_of(self, ids)
        except StorageError:
            if self.schema_version() < SCHEMA_VERSION:
                return {}
            raise

    def sessions_of(self, ids: Sequence[int]) -> dict[int, str]:
        """The session each memory was created in, for those created in one."""
        out: dict[int, str] = {}
        if self.empty("session_memories"):
            return out
        for start in range(0, len(ids), 500):
            part = list(ids[start : start + 500])
            marks = ",".join("?" * len(part))
            for memory_id, session in self.query(
                "SELECT memory_id, MIN(session_id) FROM session_memories"
                f" WHERE usage = 'created' AND memory_id IN ({marks}) GROUP BY memory_id",
                part,
            ):
                out[int(memory_id)] = str(session)
        return out

    def adjacent(self, ids: Sequence[int], documents: bool = True) -> dict[int, list[int]]:
        """The live memories right before and after each of `ids` in its document (the
        chunks of a Markdown file, by chunk index) and in the session it was created in
        (by time), within its project. The records of a JSON or JSONL file are
        independent memories, not chunks of one text: they have no neighbours there.
        `documents` False: the caller knows that none of `ids` comes from a Markdown
        file (their ranking columns' source paths): the documents are not looked at."""
        out: dict[int, list[int]] = {}
        if not ids:
            return out
        wanted = list(dict.fromkeys(int(i) for i in ids))[:500]
        marks = ",".join("?" * len(wanted))
        by_source = self._adjacent_in_documents(marks, wanted) if documents else []
        if self.empty("session_memories"):  # most stores: no session to look along
            by_session: list[Any] = []
        else:
            by_session = self._adjacent_in_sessions(marks, wanted)
        for memory_id, prev, nxt in [*by_source, *by_session]:
            found = out.setdefault(int(memory_id), [])
            found.extend(int(x) for x in (prev, nxt) if x is not None and int(x) not in found)
        return out

    def _adjacent_in_documents(self, marks: str, wanted: list[int]) -> list[Any]:
        """`adjacent`'s rows (id, previous, next) along the Markdown documents of `wanted`."""
        return self.query(
            "WITH src AS (SELECT DISTINCT project_id, source_path FROM memories"
            f" WHERE id IN ({marks}) AND {_DOCUMENT_SOURCE}),"
            " seq AS (SELECT m.id, LAG(m.id) OVER w AS prev, LEAD(m.id) OVER w AS next"
            " FROM memories m JOIN src ON m.source_path = src.source_path"
            " AND m.project_id IS src.project_id WHERE m.deleted_at IS NULL"
            " WINDOW w AS (PARTITION BY m.project_id, m.source_path"
            " ORDER BY m.chunk_index, m.id))"
            f" SELECT id, prev, next FROM seq WHERE id IN ({marks})",
            [*wanted, *wanted],
        )

    def _adjacent_in_sessions(self, marks: str, wanted: list[int]) -> list[Any]:
        """`adjacent`'s rows (id, previous, next) along the sessions of `wanted`."""
        return self.query(
            "WITH ses AS (SELECT DISTINCT session_id FROM session_memories"
            f" WHERE usage = 'created' AND memory_id IN ({marks})),"
            " seq AS (SELECT m.id, LAG(m.id) OVER w AS prev, LEAD(m.id) OVER w AS next"
            " FROM session_memories sm JOIN ses ON sm.session_id = ses.session_id"
            " JOIN memories m ON m.id = sm.memory_id"
            " WHERE sm.usage = 'created' AND m.deleted_at IS NULL"
            " WINDOW w AS (PARTITION BY sm.session_id, m.project_id"
            " ORDER BY m.created_at, m.id))"
            f" SELECT id, prev, next FROM seq WHERE id IN ({marks})",
            [*wanted, *wanted],
        )

    def facts_for(
        self, ids: Sequence[int], damaged: list[str] | None = None
    ) -> dict[int, list[tuple[Any, ...]]]:
        """Facts of the given memories by memory id: rows (id, memory_id, type, content,
        confidence, decay_rate, last_reinforced), one cheap probe when there are none. A
        damaged fact row is left out (and named in `damaged`)."""
        from cortex.validate import fact_row_ok

        out: dict[int, list[tuple[Any, ...]]] = {}
        if not ids or self.empty("facts"):
            return out
        for start in range(0, len(ids), 500):
            part = list(ids[start : start + 500])
            marks = ",".join("?" * len(part))
            for row in self.query(
                "SELECT id, memory_id, type, content, confidence, decay_rate, last_reinforced"
                f" FROM facts WHERE memory_id IN ({marks}) ORDER BY id",
                part,
            ):
                if not fact_row_ok(row):
                    if damaged is not None and f"fact {row[0]}" not in damaged:
                        damaged.append(f"fact {row[0]}")
                    continue
                out.setdefault(row[1], []).append(row)
        return out

    # ---------------------------------------------------------------- sessions and recall
    # What cortex.recall and the Engine write and read beside the memories themselves:
    # named methods, so that no SQL of this dialect runs outside the store on the paths
    # the Engine uses (cortex.pg.store.PgStore has the same methods in PostgreSQL's).

    def add_fact(
        self,
        memory_id: int,
        type: str,
        content: str,
        *,
        confidence: float,
        decay_rate: float,
        last_reinforced: float,
    ) -> int:
        """Attach a fact to a memory (checked by the caller); returns the fact's id."""
        with self.transaction() as tx:
            cur = tx.execute(
                "INSERT INTO facts (memory_id, type, content, confidence, decay_rate,"
                " last_reinforced, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (memory_id, type, content, confidence, decay_rate, last_reinforced, time.time()),
            )
            return int(cur.lastrowid or 0)

    def start_session(self, session_id: str, project: str | None, summary: str | None) -> None:
        with self.transaction() as tx:
            tx.execute(
                "INSERT INTO sessions (id, project_id, started_at, summary) VALUES (?, ?, ?, ?)"
                f" ON CONFLICT{SESSION_KEY} DO UPDATE SET"
                " summary = COALESCE(excluded.summary, summary)",
                (session_id, project, time.time(), summary),
            )

    def end_session(self, session_id: str, summary: str | None, project: str | None) -> None:
        """End a session. Without `project`, the session id must name exactly one session
        (else the projects holding it are listed)."""
        with self.transaction() as tx:
            if project is None:
                projects = [r[0] for r in tx.execute(
                    "SELECT project_id FROM sessions WHERE id = ?", (session_id,)
                ).fetchall()]  # fmt: skip
                if len(projects) > 1:
                    raise InvalidOptionError(
                        f"session {session_id!r} exists in several projects "
                        f"({', '.join(repr(p) for p in projects)}); pass project="
                    )
                project = projects[0] if projects else None
            cur = tx.execute(
                "UPDATE sessions SET ended_at = ?, summary = COALESCE(?, summary)"
                " WHERE id = ? AND project_id IS ?",
                (time.time(), summary, session_id, project),
            )
            if cur.rowcount == 0:
                raise NotFoundError(f"no session with id {session_id!r}")

    def link(self, memory_id: int, session_id: str, usage: str, project: str | None) -> None:
        """A session link of `usage` for a memory of `project` (its session is created)."""
        with self.transaction() as tx:
            self._link_session(tx, session_id, memory_id, usage, project, time.time())

    def supersede(self, old_id: int, new_id: int) -> None:
        now = time.time()
        with self.transaction() as tx:
            tx.execute(
                "UPDATE memories SET superseded_by = ?, valid_until = COALESCE(valid_until, ?)"
                " WHERE id = ?",
                (new_id, now, old_id),
            )
            tx.execute(
                "INSERT INTO memory_relationships (source_id, target_id, type, created_by,"
                " created_at) VALUES (?, ?, 'SUPERSEDES', 'cortex', ?) ON CONFLICT DO NOTHING",
                (new_id, old_id, now),
            )

    def relate(self, source_id: int, target_id: int, type: str, created_by: str | None) -> None:
        with self.transaction() as tx:
            tx.execute(
                "INSERT INTO memory_relationships (source_id, target_id, type, created_by,"
                " created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (source_id, target_id, type, created_by, time.time()),
            )

    def created_sessions(self, ids: Sequence[int]) -> list[tuple[Any, ...]]:
        """(memory id, session id, project, started_at, ended_at, summary) of the sessions
        `ids` were created in (of each memory's own project), newest link first."""
        if not ids or self.empty("session_memories"):
            return []
        marks = ",".join("?" * len(ids))
        return self.query(
            "SELECT sm.memory_id, s.id, s.project_id, s.started_at, s.ended_at, s.summary"
            " FROM session_memories sm JOIN memories m ON m.id = sm.memory_id"
            " JOIN sessions s ON s.id = sm.session_id AND s.project_id IS m.project_id"
            f" WHERE sm.usage = 'created' AND sm.memory_id IN ({marks})"
            " ORDER BY sm.created_at DESC, sm.rowid DESC",
            list(ids),
        )

    def latest_session(self, memory_id: int, project: str | None) -> tuple[Any, ...] | None:
        """(session id, project, started_at, ended_at, summary, usage, memories in it) of
        the latest session of `project` the memory took part in, or None."""
        rows = self.query(
            "SELECT s.id, s.project_id, s.started_at, s.ended_at, s.summary, sm.usage,"
            " (SELECT COUNT(DISTINCT x.memory_id) FROM session_memories x"
            "  JOIN memories xm ON xm.id = x.memory_id"
            "  WHERE x.session_id = s.id AND xm.project_id IS s.project_id)"
            " FROM session_memories sm JOIN sessions s ON s.id = sm.session_id"
            " WHERE sm.memory_id = ? AND s.project_id IS ?"
            " ORDER BY sm.created_at DESC, sm.rowid DESC LIMIT 1",
            (memory_id, project),
        )
        return rows[0] if rows else None

    def holding(
        self, ids: Sequence[int], excluded: Sequence[str], phrases: Sequence[str]
    ) -> set[int]:
        """Those of `ids` that hold none of `excluded` and every one of `phrases`: as a
        substring (case folded for ASCII), and for text without CJK also as FTS5 reads it
        (stems, diacritics), so that a memory FTS5 or a substring finds holding an
        excluded word is out (see cortex.keyword.constraints)."""
        keep = {int(i) for i in ids}
        if not keep:
            return keep
        marks = ",".join("?" * len(keep))
        order = sorted(keep)

        def substring(text: str) -> set[int]:
            rows = self.query(
                f"SELECT id FROM memories WHERE id IN ({marks})"
                " AND instr(lower(content), lower(?)) > 0",
                [*order, text],
            )
            return {int(r[0]) for r in rows}

        def words(text: str) -> set[int] | None:
            if has_cjk(text):
                return None
            try:
                rows = self.conn.execute(
                    "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?"
                    f" AND rowid IN ({marks})",
                    ['"' + text.replace('"', '""') + '"', *order],
                ).fetchall()
            except sqlite3.OperationalError:  # no token FTS5 reads: the substring decides
                return None
            return {int(r[0]) for r in rows}

        for text in excluded:
            keep -= substring(text) | (words(text) or set())
        for text in phrases:
            found = words(text)
            keep &= substring(text) if found is None else found | substring(text)
        return keep

    def around(self, anchor: Memory, before: int, after: int) -> tuple[list[Memory], list[Memory]]:
        """Up to `before` and `after` live memories of the anchor's project just before and
        after it in time (oldest first); damaged rows are left out."""
        created = self._stored_created(anchor)
        live = "deleted_at IS NULL AND project_id IS ?"
        earlier = self.query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {live}"
            " AND (created_at < ? OR (created_at = ? AND id < ?))"
            " ORDER BY created_at DESC, id DESC LIMIT ?",
            (anchor.project, created, created, anchor.id, before),
        )
        later = self.query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {live}"
            " AND (created_at > ? OR (created_at = ? AND id > ?))"
            " ORDER BY created_at, id LIMIT ?",
            (anchor.project, created, created, anchor.id, after),
        )
        return _readable(reversed(earlier)), _readable(later)

    def sessions_touching(self, ids: Sequence[int], project: str | None) -> list[tuple[Any, ...]]:
        """(id, project, started_at, ended_at, summary) of the sessions of `project` any of
        `ids` is linked to."""
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        return self.query(
            "SELECT DISTINCT s.id, s.project_id, s.started_at, s.ended_at, s.summary"
            " FROM session_memories sm JOIN sessions s ON s.id = sm.session_id"
            f" WHERE sm.memory_id IN ({marks}) AND s.project_id IS ?",
            [*ids, project],
        )

    def related_counts(self, ids: Sequence[int]) -> dict[int, int]:
        """How many relationships each of `ids` has within its own project (a project is
        a wall: relationships across projects do not count)."""
        if not ids or self.empty("memory_relationships"):
            return {}
        marks = ",".join("?" * len(ids))
        return {
            int(memory_id): int(count)
            for memory_id, count in self.query(
                "SELECT id, SUM(n) FROM ("
                " SELECT r.source_id AS id, COUNT(*) AS n FROM memory_relationships r"
                " JOIN memories a ON a.id = r.source_id JOIN memories b ON b.id = r.target_id"
                f" WHERE r.source_id IN ({marks}) AND a.project_id IS b.project_id"
                " GROUP BY r.source_id UNION ALL"
                " SELECT r.target_id AS id, COUNT(*) AS n FROM memory_relationships r"
                " JOIN memories a ON a.id = r.source_id JOIN memories b ON b.id = r.target_id"
                f" WHERE r.target_id IN ({marks}) AND a.project_id IS b.project_id"
                " GROUP BY r.target_id) GROUP BY id",
                [*ids, *ids],
            )
        }

    def reinforce(self, ids: Sequence[int], amount: float) -> None:
        """Raise the salience of `ids` by `amount` (capped at 1.0), in one transaction."""
        if not ids:
            return
        with self.transaction() as tx:
            tx.executemany(
                "UPDATE memories SET salience = MIN(1.0, ROUND(salience + ?, 6)) WHERE id = ?",
                [(amount, m) for m in ids],
            )

    def record_recall(
        self,
        rows: Sequence[tuple[int, int | None, float]],
        *,
        query: str | None,
        session_id: str | None,
        lens: str | None,
        reinforce: float,
        at: float | None = None,
    ) -> None:
        """One transaction after a search has ranked: a recall_log row per result
        ``(memory_id, fact_id, score)``, access counts, reinforcement, and 'recalled'
        links. Inside a caller's transaction it joins it."""
        if not rows:
            return
        now = time.time() if at is None else at
        with self.transaction() as tx:
            tx.executemany(
                "INSERT INTO recall_log (memory_id, fact_id, query, session_id, lens, score,"
                " recalled_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(m, f, query, session_id, lens, s, now) for m, f, s in rows],
            )
            tx.executemany(
                "UPDATE memories SET access_count = access_count + 1, last_accessed = ?,"
                # rounded: 0.5 + 7 × 0.02 is 0.64, not 0.6400000000000001
                " salience = ROUND(MIN(1.0, salience + ?), 6) WHERE id = ?",
                [(now, reinforce, m) for m, _, _ in rows],
            )
            if session_id:
                # The session of each recalled memory's own project (sessions belong to one).
                marks = ",".join("?" * len(rows))
                tx.execute(
                    "INSERT INTO sessions (id, project_id, started_at)"
                    f" SELECT DISTINCT ?, project_id, ? FROM memories WHERE id IN ({marks})"
                    f" ON CONFLICT{SESSION_KEY} DO NOTHING",
                    [session_id, now, *[m for m, _, _ in rows]],
                )
                tx.executemany(
                    "INSERT INTO session_memories (session_id, memory_id, usage, created_at)"
                    " VALUES (?, ?, 'recalled', ?)",
                    [(session_id, m, now) for m, _, _ in rows],
                )

    def referencing(self, keys: Sequence[str], opts: Any, limit: int) -> dict[int, Any]:
        """Up to `limit` memories passing `opts`'s filters that reference one of the code
        `keys` (:func:`cortex.filters.referencing`)."""
        from cortex.filters import referencing

        return referencing(self, keys, opts, limit)

    def in_transaction(self) -> bool:
        """Whether this thread's connection is inside a transaction (holds the write lock
        once it has written)."""
        return self.conn.in_transaction

    def metadata_values(self, key: str) -> dict[int, str]:
        """memory id -> the metadata value of `key` of every live memory that has one."""
        path = "$." + key
        return {
            int(i): str(v)
            for i, v in self.query(
                "SELECT id, json_extract(metadata, ?) FROM memories"
                " WHERE deleted_at IS NULL AND json_extract(metadata, ?) IS NOT NULL",
                (path, path),
            )
        }

    def stats(self) -> dict[str, Any]:
        counts = self._counts()
        lost: list[tuple[Any, ...]] = []
        if self.schema_version() >= VECTORS_ONCE_VERSION:
            lost = self.query(
                "SELECT l.model_id, COUNT(*) FROM vectors_lost l JOIN memories m"
                " ON m.id = l.memory_id WHERE m.deleted_at IS NULL GROUP BY l.model_id"
            )
        span = self.query(  # a damaged date (text, out of range) is not a bound
            "SELECT MIN(created_at), MAX(created_at) FROM memories WHERE deleted_at IS NULL"
            " AND typeof(created_at) IN ('real', 'integer') AND created_at BETWEEN ? AND ?",
            (validate.MIN_TIMESTAMP, validate.MAX_TIMESTAMP),
        )[0]
        files = [self.path, Path(f"{self.path}-wal")]
        vectors = self.path.with_name(f"{self.path.name}-vectors")  # the vector files
        if vectors.is_dir():
            files += [f for f in vectors.iterdir() if f.is_file()]
        size = sum(f.stat().st_size for f in files if f.exists())
        return {
            "path": str(self.path),
            "schema_version": self.schema_version(),
            **counts,
            # Supplied vectors lost with a damaged vector file, by model (keyword only).
            "vectors_lost": dict(lost),
            "oldest": span[0],
            "newest": span[1],
            "size_bytes": size,
        }


def _readable(rows: Any) -> list[Memory]:
    """The memories of `rows` that can be read (a damaged row is left out)."""
    out = []
    for row in rows:
        try:
            out.append(row_to_memory(row))
        except DamagedRowError:
            continue
    return out


def _read_only_uri(path: Path, immutable: bool) -> str:
    uri = f"{path.resolve().as_uri()}?mode=ro"
    return f"{uri}&immutable=1" if immutable else uri


def _needs_immutable(path: Path) -> bool:
    """Whether a database can only be read with SQLite's ``immutable=1``.

    A reader of a WAL database needs the ``-shm`` index beside it, and creates it when
    missing; in a folder it cannot write (a read-only mount, a shipped snapshot) that
    fails and the file cannot be read at all, even with ``mode=ro``. When the WAL is also
    absent or empty (the database was closed cleanly: every commit is in the main file),
    the main file alone is the whole database, and ``immutable=1`` tells SQLite to read
    it as it is, without locks or ``-shm``. That is only safe while nothing writes the
    file, which holds here: no one who could write it could have left its folder without
    a ``-shm`` they can create. With a non-empty WAL, commits live only there; the normal
    path then reports the folder as unreadable rather than hide them.
    """
    folder = path.parent
    shm = Path(f"{path}-shm")
    wal = Path(f"{path}-wal")
    if shm.exists() or os.access(folder, os.W_OK):
        return False
    if not _is_wal_file(path):
        return False  # a rollback-journal database reads without -shm
    return not wal.exists() or wal.stat().st_size == 0


def _is_wal_file(path: Path) -> bool:
    """Bytes 18-19 of an SQLite header are 2 in WAL mode."""
    try:
        with open(path, "rb") as f:
            header = f.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[18] == 2 and header[19] == 2


def _writable(path: Path) -> bool:
    """Whether this user can write the database: the file, and its folder too unless the
    WAL's -wal and -shm already exist (SQLite creates them beside the file)."""
    if not os.access(path, os.W_OK):
        return False
    if os.access(path.parent, os.W_OK):
        return True
    return all(
        os.access(f"{path}{suffix}", os.W_OK) for suffix in ("-wal", "-shm")
    ) and _is_wal_file(path)


def _check_is_cortex(path: Path, immutable: bool) -> None:
    """Refuse an existing file that is not a cortex database, reading it read-only so that
    it is left byte for byte as it was (no WAL switch, no meta table). An empty database, or
    one holding only the meta table (another process creating it right now), passes."""
    try:
        conn = sqlite3.connect(_read_only_uri(path, immutable), uri=True, timeout=30.0)
    except sqlite3.Error as exc:
        raise StorageError(_explain(path, exc)) from None
    try:
        tables = {
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
        if not tables - {"meta"}:
            return
        version = None
        if "meta" in tables:
            with suppress(sqlite3.Error):  # another application's `meta` of other columns
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                version = row[0] if row else None
        if version is None or "memories" not in tables:
            shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
            raise StorageError(
                f"{path} is an SQLite database of another application (tables: {shown}), "
                "not a cortex database; give cortex a path of its own"
            )
    except sqlite3.DatabaseError as exc:
        raise StorageError(_explain(path, exc)) from None
    finally:
        conn.close()


def _unchanged(chunk: MemoryInput, row: Sequence[Any]) -> bool:
    """Whether a stored row (id, chunk_index, hash, sector, tier, scope, category, salience,
    confidence, created_at, metadata) already holds `chunk`. A chunk without its own date
    keeps the stored one."""
    return bool(
        row[3] == chunk.sector
        and row[4] == chunk.tier
        and row[5] == chunk.scope
        and row[6] == chunk.category
        and row[7] == float(chunk.salience)
        and row[8] == float(chunk.confidence)
        and (chunk.created_at is None or row[9] == chunk.created_at)
        and row[10] == chunk.metadata_json()
    )


def _with_index(chunk: MemoryInput, index: int) -> MemoryInput:
    """`chunk` at position `index` of its source."""
    if chunk.chunk_index == index:
        return chunk
    from dataclasses import replace

    return replace(chunk, chunk_index=index)


def _statements(script: str) -> list[str]:
    """Split a schema script into statements (sqlite3.complete_statement knows triggers)."""
    out: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        if not buf and (not line.strip() or line.lstrip().startswith("--")):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out


def _explain(path: Path, exc: sqlite3.Error) -> str:
    msg = str(exc)
    if "not a database" in msg or "malformed" in msg:
        return f"{path} is not a cortex database or is damaged ({msg})"
    if "readonly" in msg or "read-only" in msg:
        return f"{path} is read-only ({msg}); open it with read_only=True or fix its permissions"
    if "unable to open" in msg:
        return f"cannot open {path} ({msg}); check that its folder exists and is writable"
    if "locked" in msg or "busy" in msg:
        return f"{path} stayed locked by another writer for 30 s ({msg})"
    return f"{path}: {msg}"
