"""The PostgreSQL schema of cortex: the same data model as the SQLite store, and its migrations.

Differences from SQLite, and why:

* ``project_id`` is the leading key of every distributed table's primary key and of its
  b-tree indexes, so that the tables can be distributed by project (Citus: see
  docs/postgres.md). It is NOT NULL: a memory without a project has ``''``.
* Keyword search runs on two ``tsvector`` columns with partial GIN indexes over live
  memories: ``tsv`` (Porter-stemmed words, for word queries) and ``tsv_simple`` (the words
  as written, lowercased, for prefix queries), and ``doc_len`` (the number of words).
  They are computed by the store on every write from the same tokenizer as the SQLite
  backend's FTS5 index (cortex._native: unicode61 rules, diacritics removed, Porter), so
  both backends see the same terms; the server's own ``to_tsvector`` was 7x slower per
  document and splits words differently (e-mails, URLs and hyphenated words kept whole).
  CJK text is matched through pg_trgm.
* BM25's collection statistics (live documents and their total length, per project) are
  kept by statement-level triggers in ``keyword_stats``, spread over a few slots per
  project so that concurrent writers do not queue on one hot row; document frequencies are
  counted at query time from the GIN index (exact, and free on write).
* Vectors are pgvector ``vector`` values, one row per (memory, model); every query names
  its model, and the HNSW index of a model is a partial expression index over that
  model's rows at its dimension (``cortex.pg.vectors``), so two models never mix.
* ``session_memories`` gets an id (SQLite's rowid), so that a copy between the two backends
  can resume and stay idempotent.

Migrations run in one transaction each, under an advisory lock, and are recorded in
``cortex_schema``; a database newer than this cortex is refused.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "STAT_SLOTS"]

#: Slots per project in keyword_stats: a writer adds its deltas to slot (backend pid % N).
STAT_SLOTS = 8

_V1 = """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- A term's frequency in a document, from ts_rank's weight of a one-term query: with every
-- weight 1, ts_rank returns H(tf) / (pi^2 / 6), H(n) = 1 + 1/4 + ... + 1/n^2, whose tail
-- pi^2/6 - H(n) lies in (1/(n+1), 1/n); inverted exactly for tf 1..256 (tsvector keeps
-- 256 positions a word). One C call a term instead of unnesting the whole tsvector: 3.5x
-- faster on SciFact's OR queries (docs/postgres.md).
CREATE FUNCTION cortex_tf(doc tsvector, term tsquery) RETURNS double precision
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT round(1.0 / (1.6449340668482264
        - ts_rank('{1,1,1,1}', doc, term)::double precision * 1.64493406685) - 0.5)
$$;

CREATE TABLE IF NOT EXISTS meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE memories (
    project_id    text NOT NULL DEFAULT '',
    id            bigserial NOT NULL,
    content       text NOT NULL,
    content_hash  text NOT NULL,
    source_path   text,
    chunk_index   integer,
    sector        text,
    tier          text,
    scope         text,
    category      text,
    salience      double precision NOT NULL DEFAULT 0.5,
    confidence    double precision NOT NULL DEFAULT 1.0,
    created_at    double precision NOT NULL,
    updated_at    double precision NOT NULL,
    valid_until   double precision,
    superseded_by bigint,
    deleted_at    double precision,
    last_accessed double precision,
    access_count  bigint NOT NULL DEFAULT 0,
    metadata      text NOT NULL DEFAULT '{}',
    has_cjk       boolean NOT NULL DEFAULT false,
    doc_len       integer NOT NULL DEFAULT 0,
    tsv           tsvector NOT NULL DEFAULT '',
    tsv_simple    tsvector NOT NULL DEFAULT '',
    PRIMARY KEY (project_id, id)
);
-- A memory row and its two tsvectors (~5 KB for an abstract) stay in the heap page: out
-- of line in TOAST, reading them for BM25 cost 6x more (468 -> 74 ms for an OR query
-- over 5k abstracts).
ALTER TABLE memories SET (toast_tuple_target = 8160);
ALTER TABLE memories ALTER COLUMN tsv SET STORAGE MAIN;
ALTER TABLE memories ALTER COLUMN tsv_simple SET STORAGE MAIN;
-- Lookups by id alone (the public API names a memory by its id): not unique, because a
-- distributed table's unique indexes must hold the distribution column.
CREATE INDEX memories_id ON memories (id);
CREATE INDEX memories_project_created ON memories (project_id, created_at);
CREATE INDEX memories_project_source ON memories (project_id, source_path, chunk_index);
CREATE INDEX memories_project_hash ON memories (project_id, content_hash);
CREATE INDEX memories_project_scope ON memories (project_id, scope);
CREATE INDEX memories_project_category ON memories (project_id, category);
CREATE INDEX memories_project_deleted ON memories (project_id, deleted_at)
    WHERE deleted_at IS NOT NULL;
CREATE INDEX memories_tsv ON memories USING gin (tsv) WHERE deleted_at IS NULL;
CREATE INDEX memories_tsv_simple ON memories USING gin (tsv_simple) WHERE deleted_at IS NULL;
CREATE INDEX memories_trgm ON memories USING gin (content gin_trgm_ops)
    WHERE has_cjk AND deleted_at IS NULL;

CREATE TABLE keyword_stats (
    project_id text NOT NULL,
    slot       smallint NOT NULL,
    docs       bigint NOT NULL DEFAULT 0,
    total_len  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (project_id, slot)
);

CREATE FUNCTION cortex_stats_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO keyword_stats AS s (project_id, slot, docs, total_len)
    SELECT project_id, (pg_backend_pid() % {slots})::smallint, count(*), sum(doc_len)
      FROM new_rows WHERE deleted_at IS NULL GROUP BY project_id ORDER BY project_id
    ON CONFLICT (project_id, slot) DO UPDATE
       SET docs = s.docs + excluded.docs, total_len = s.total_len + excluded.total_len;
    RETURN NULL;
END $$;

CREATE FUNCTION cortex_stats_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO keyword_stats AS s (project_id, slot, docs, total_len)
    SELECT project_id, (pg_backend_pid() % {slots})::smallint, sum(d), sum(l)
      FROM (
        SELECT project_id, 1 AS d, doc_len AS l FROM new_rows WHERE deleted_at IS NULL
        UNION ALL
        SELECT project_id, -1, -doc_len FROM old_rows WHERE deleted_at IS NULL
      ) delta
     GROUP BY project_id HAVING sum(d) <> 0 OR sum(l) <> 0 ORDER BY project_id
    ON CONFLICT (project_id, slot) DO UPDATE
       SET docs = s.docs + excluded.docs, total_len = s.total_len + excluded.total_len;
    RETURN NULL;
END $$;

CREATE FUNCTION cortex_stats_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO keyword_stats AS s (project_id, slot, docs, total_len)
    SELECT project_id, (pg_backend_pid() % {slots})::smallint, -count(*), -sum(doc_len)
      FROM old_rows WHERE deleted_at IS NULL GROUP BY project_id ORDER BY project_id
    ON CONFLICT (project_id, slot) DO UPDATE
       SET docs = s.docs + excluded.docs, total_len = s.total_len + excluded.total_len;
    RETURN NULL;
END $$;

CREATE TRIGGER memories_stats_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION cortex_stats_insert();
CREATE TRIGGER memories_stats_update AFTER UPDATE ON memories
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION cortex_stats_update();
CREATE TRIGGER memories_stats_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION cortex_stats_delete();

CREATE TABLE facts (
    project_id      text NOT NULL DEFAULT '',
    id              bigserial NOT NULL,
    memory_id       bigint NOT NULL,
    type            text NOT NULL,
    content         text NOT NULL,
    confidence      double precision NOT NULL DEFAULT 1.0,
    decay_rate      double precision NOT NULL DEFAULT 0.0,
    last_reinforced double precision NOT NULL,
    created_at      double precision NOT NULL,
    PRIMARY KEY (project_id, id),
    FOREIGN KEY (project_id, memory_id) REFERENCES memories (project_id, id) ON UPDATE CASCADE
);
CREATE INDEX facts_memory ON facts (project_id, memory_id);
CREATE INDEX facts_memory_id ON facts (memory_id);

-- A session belongs to a project: the same id in two projects is two sessions (as on
-- SQLite since its schema 3); a memory's session is the one of the memory's project.
CREATE TABLE sessions (
    project_id text NOT NULL DEFAULT '',
    id         text NOT NULL,
    started_at double precision NOT NULL,
    ended_at   double precision,
    summary    text,
    PRIMARY KEY (project_id, id)
);
CREATE INDEX sessions_project ON sessions (project_id, started_at);

CREATE TABLE session_memories (
    project_id text NOT NULL DEFAULT '',
    id         bigserial NOT NULL,
    session_id text NOT NULL,
    memory_id  bigint NOT NULL,
    usage      text NOT NULL CHECK (usage IN ('created', 'recalled', 'updated', 'reinforced')),
    created_at double precision NOT NULL,
    PRIMARY KEY (project_id, id),
    -- No key to sessions: a memory moved to another project keeps its links, which then
    -- name that project's session of the same id (none, until one is started), as on
    -- SQLite, where this foreign key was dropped for the same reason.
    FOREIGN KEY (project_id, memory_id) REFERENCES memories (project_id, id) ON UPDATE CASCADE
);
CREATE INDEX session_memories_memory ON session_memories (project_id, memory_id, created_at);
CREATE INDEX session_memories_memory_id ON session_memories (memory_id, created_at);
CREATE INDEX session_memories_session ON session_memories (session_id);

CREATE TABLE memory_relationships (
    project_id text NOT NULL DEFAULT '',
    id         bigserial NOT NULL,
    source_id  bigint NOT NULL,
    target_id  bigint NOT NULL,
    type       text NOT NULL,
    created_by text,
    created_at double precision NOT NULL,
    PRIMARY KEY (project_id, id),
    UNIQUE (project_id, source_id, target_id, type),
    FOREIGN KEY (project_id, source_id) REFERENCES memories (project_id, id) ON UPDATE CASCADE
);
CREATE INDEX memory_relationships_target ON memory_relationships (target_id);

CREATE TABLE recall_log (
    project_id  text NOT NULL DEFAULT '',
    id          bigserial NOT NULL,
    memory_id   bigint NOT NULL,
    fact_id     bigint,
    query       text,
    session_id  text,
    lens        text,
    score       double precision,
    recalled_at double precision NOT NULL,
    PRIMARY KEY (project_id, id),
    FOREIGN KEY (project_id, memory_id) REFERENCES memories (project_id, id) ON UPDATE CASCADE
);
CREATE INDEX recall_log_memory ON recall_log (project_id, memory_id);

CREATE TABLE embeddings (
    project_id   text NOT NULL DEFAULT '',
    memory_id    bigint NOT NULL,
    model_id     text NOT NULL,
    dim          integer NOT NULL,
    content_hash text NOT NULL,
    vector       vector NOT NULL,
    created_at   double precision NOT NULL,
    PRIMARY KEY (project_id, memory_id, model_id),
    FOREIGN KEY (project_id, memory_id) REFERENCES memories (project_id, id) ON UPDATE CASCADE,
    CHECK (vector_dims(vector) = dim)
);
CREATE INDEX embeddings_model_hash ON embeddings (project_id, model_id, content_hash);
CREATE INDEX embeddings_hash ON embeddings (model_id, content_hash);

-- Which projects the records of a file imported under a default project went to (as on
-- SQLite): small, read by the importer; a reference table when distributed.
CREATE TABLE import_sources (
    source_path    text NOT NULL,
    import_project text NOT NULL DEFAULT '',
    project        text NOT NULL DEFAULT '',
    PRIMARY KEY (import_project, source_path, project)
);
"""

# Lenses (cortex.lenses): named sets of search options, as on SQLite. Few and small: a
# reference table when distributed (no project key; a lens may name several projects).
_LENSES = """
CREATE TABLE IF NOT EXISTS lenses (
    name        text PRIMARY KEY,
    options     text NOT NULL,
    description text,
    created_at  double precision NOT NULL,
    updated_at  double precision NOT NULL
);
"""

# A change counter for what the semantic calibration samples (cortex.pg.retrievers): which
# memories are live, in which project, and their vectors. Every statement that can change
# that (insert, delete, truncate; an update of a memory's id, project or deleted_at; any
# write to embeddings) adds 1 to a slot row in its own transaction, so a reader that sees
# the same sum twice saw no committed change in between (the sum only grows). Recall
# counts, salience and supersession do not bump it. Slots by backend as in keyword_stats,
# so that concurrent writers do not queue on one row; the trigger named first
# (memories_changed < memories_stats_*) locks its slot before keyword_stats' slot, always
# in that order.
_CHANGES = """
CREATE TABLE IF NOT EXISTS cortex_changes (
    slot smallint PRIMARY KEY,
    n    bigint NOT NULL DEFAULT 0
);

CREATE FUNCTION cortex_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO cortex_changes AS c (slot, n) VALUES ((pg_backend_pid() % {slots})::smallint, 1)
    ON CONFLICT (slot) DO UPDATE SET n = c.n + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER memories_changed
    AFTER INSERT OR DELETE OR UPDATE OF id, project_id, deleted_at OR TRUNCATE ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION cortex_changed();
CREATE TRIGGER embeddings_changed AFTER INSERT OR DELETE OR UPDATE OR TRUNCATE ON embeddings
    FOR EACH STATEMENT EXECUTE FUNCTION cortex_changed();
"""

# The keyword log: which memories' indexed text may have changed, for a client that keeps
# the keyword index in memory (cortex.pg.keyword_index). One row a statement (not a row a
# memory: a bulk insert of 100k memories adds one row of two arrays), tagged with its
# transaction's id: a reader that read the log up to its snapshot's xmin knows every
# transaction older than that is in what it read (commit order is not id order, so a
# sequence alone would miss a transaction that commits after a younger one). An update
# is logged only when it changes a memory's content, project, id or whether it is live
# (recall counts, salience and supersession are not); a TRUNCATE logs NULL arrays: every
# reader rebuilds. `seq` only names a row (a reader skips the rows it already applied).
_KEYWORD_LOG = """
CREATE TABLE IF NOT EXISTS keyword_log (
    seq      bigserial PRIMARY KEY,
    xid      xid8 NOT NULL DEFAULT pg_current_xact_id(),
    projects text[],
    ids      bigint[]
);
CREATE INDEX keyword_log_xid ON keyword_log (xid);

CREATE FUNCTION cortex_keyword_log_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO keyword_log (projects, ids)
        SELECT array_agg(project_id), array_agg(id) FROM old_rows HAVING count(*) > 0;
    ELSE
        INSERT INTO keyword_log (projects, ids)
        SELECT array_agg(project_id), array_agg(id) FROM new_rows HAVING count(*) > 0;
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION cortex_keyword_log_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO keyword_log (projects, ids)
    SELECT array_agg(c.project_id), array_agg(c.id) FROM (
        SELECT n.project_id, n.id FROM new_rows n
          LEFT JOIN old_rows o ON o.project_id = n.project_id AND o.id = n.id
         WHERE o.id IS NULL OR o.content IS DISTINCT FROM n.content
            OR (o.deleted_at IS NULL) <> (n.deleted_at IS NULL)
        UNION ALL
        SELECT o.project_id, o.id FROM old_rows o
          LEFT JOIN new_rows n ON n.project_id = o.project_id AND n.id = o.id
         WHERE n.id IS NULL
    ) c HAVING count(*) > 0;
    RETURN NULL;
END $$;

CREATE FUNCTION cortex_keyword_log_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO keyword_log (projects, ids) VALUES (NULL, NULL);
    RETURN NULL;
END $$;

CREATE TRIGGER memories_keyword_log_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION cortex_keyword_log_rows();
CREATE TRIGGER memories_keyword_log_update AFTER UPDATE ON memories
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION cortex_keyword_log_update();
CREATE TRIGGER memories_keyword_log_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION cortex_keyword_log_rows();
CREATE TRIGGER memories_keyword_log_truncate AFTER TRUNCATE ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION cortex_keyword_log_truncate();
"""

# Forward migrations: MIGRATIONS[i] takes a database at schema version i to i + 1. An
# entry is never edited once released; a new schema is a new entry at the end.
MIGRATIONS: tuple[str, ...] = (
    _V1.replace("{slots}", str(STAT_SLOTS)),
    _LENSES,
    _CHANGES.replace("{slots}", str(STAT_SLOTS)),
    _KEYWORD_LOG,
)
SCHEMA_VERSION = len(MIGRATIONS)
