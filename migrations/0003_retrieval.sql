-- Retrieval's index. Every table here is written by retrieval alone; others only read.

-- Written by retrieval: one memory item per indexed source row (an observation now; structured
-- observations, summaries, checkpoints and patterns as later services emit them).
CREATE TABLE memory_items (
    id          INTEGER PRIMARY KEY,
    -- Where the item came from (`observation`, ...) and that row's id; indexing is idempotent.
    source      TEXT NOT NULL,
    source_id   INTEGER NOT NULL,
    -- prompt, tool, error, reply, compaction, ...
    kind        TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    project     TEXT NOT NULL,
    agent       TEXT NOT NULL DEFAULT '',
    author      TEXT NOT NULL DEFAULT '',
    tool_name   TEXT NOT NULL DEFAULT '',
    title       TEXT NOT NULL,
    -- The text that is indexed and embedded.
    text        TEXT NOT NULL,
    -- The text of the item before this one in its session: indexed with a lower weight and
    -- embedded with the item, so an item is also found by what it answers.
    context     TEXT NOT NULL DEFAULT '',
    -- Position in its session (1, 2, ...), for neighbours at search time and for timelines.
    seq         INTEGER NOT NULL,
    -- Newline-separated file paths and concept tags, for filters.
    files       TEXT NOT NULL DEFAULT '',
    concepts    TEXT NOT NULL DEFAULT '',
    -- sha256 of what was embedded: the key of embedding_cache.
    text_hash   TEXT NOT NULL,
    occurred_at INTEGER NOT NULL,
    indexed_at  INTEGER NOT NULL,
    UNIQUE (source, source_id)
) STRICT;
CREATE INDEX memory_by_session ON memory_items (session_id, seq);
CREATE INDEX memory_by_project ON memory_items (project, occurred_at DESC);

-- Written by retrieval: full-text index of memory_items (contentless; CJK pre-segmented, see
-- store::fts). `title` only when the text does not already hold it; `prev` and `prev2` are the
-- texts of the two items before in the session; `date` is when it happened, in words.
CREATE VIRTUAL TABLE memory_fts USING fts5 (
    title,
    text,
    prev,
    prev2,
    date,
    content = '',
    contentless_delete = 1,
    tokenize = 'porter unicode61 remove_diacritics 2'
);

-- Written by retrieval: every vector ever computed, by model and text hash, so the same text is
-- never embedded twice and switching back to a model costs nothing.
CREATE TABLE embedding_cache (
    model     TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    -- Little-endian f32, L2-normalised.
    vector    BLOB NOT NULL,
    PRIMARY KEY (model, text_hash)
) STRICT, WITHOUT ROWID;

-- Written by retrieval: one vector space per embedding model. Vectors of different models are
-- never mixed: each space has its own vector table, filled in the background up to
-- `embedded_upto` (the highest memory item id embedded).
CREATE TABLE vector_spaces (
    model         TEXT PRIMARY KEY,
    dim           INTEGER NOT NULL,
    table_name    TEXT NOT NULL UNIQUE,
    embedded_upto INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    last_used_at  INTEGER NOT NULL
) STRICT;
