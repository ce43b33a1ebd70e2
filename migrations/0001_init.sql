-- mneme store, first schema.
-- Every table names the one service that writes it; every other service only reads it.

-- Written by ingest: one row per agent session.
CREATE TABLE sessions (
    id              TEXT PRIMARY KEY,
    agent           TEXT NOT NULL,
    agent_version   TEXT NOT NULL DEFAULT '',
    project         TEXT NOT NULL,
    cwd             TEXT NOT NULL DEFAULT '',
    host            TEXT NOT NULL DEFAULT '',
    user            TEXT NOT NULL DEFAULT '',
    model           TEXT NOT NULL DEFAULT '',
    transcript_path TEXT NOT NULL DEFAULT '',
    started_at      INTEGER NOT NULL,
    ended_at        INTEGER,
    end_reason      TEXT,
    last_event_at   INTEGER NOT NULL,
    event_count     INTEGER NOT NULL DEFAULT 0,
    prompt_count    INTEGER NOT NULL DEFAULT 0,
    tool_count      INTEGER NOT NULL DEFAULT 0,
    error_count     INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX sessions_by_project ON sessions (project, last_event_at DESC);

-- Written by ingest: one row per stored hook event, already sanitised.
CREATE TABLE observations (
    id           INTEGER PRIMARY KEY,
    event_id     TEXT NOT NULL UNIQUE,
    session_id   TEXT NOT NULL,
    project      TEXT NOT NULL,
    agent        TEXT NOT NULL,
    kind         TEXT NOT NULL,
    host_event   TEXT NOT NULL,
    tool_name    TEXT NOT NULL DEFAULT '',
    tool_use_id  TEXT NOT NULL DEFAULT '',
    subagent_id  TEXT NOT NULL DEFAULT '',
    title        TEXT NOT NULL,
    -- The searchable text (prompt, command, file, output excerpt).
    body         TEXT NOT NULL,
    -- The tool input as JSON and the tool output, sanitised and truncated.
    input        TEXT,
    output       TEXT,
    -- JSON: what sanitisation did (redactions, truncation, exclusion) and unmapped host fields.
    meta         TEXT NOT NULL DEFAULT '{}',
    content_hash TEXT NOT NULL,
    occurred_at  INTEGER NOT NULL,
    stored_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX observations_by_session ON observations (session_id, occurred_at);
CREATE INDEX observations_by_project ON observations (project, occurred_at DESC);
CREATE INDEX observations_by_hash ON observations (session_id, content_hash, occurred_at);

-- Written by ingest: full-text index over observations.title and observations.body.
-- Contentless (the text lives in observations) and fed pre-segmented text, so Chinese and
-- Japanese are searchable by character (see store::fts).
CREATE VIRTUAL TABLE observations_fts USING fts5 (
    title,
    body,
    content = '',
    contentless_delete = 1,
    tokenize = 'porter unicode61 remove_diacritics 2'
);

-- Written by ingest: compaction events (PreCompact/PostCompact), for checkpoints.
CREATE TABLE compactions (
    event_id            TEXT PRIMARY KEY,
    session_id          TEXT NOT NULL,
    project             TEXT NOT NULL,
    phase               TEXT NOT NULL CHECK (phase IN ('pre', 'post')),
    trigger             TEXT NOT NULL DEFAULT '',
    custom_instructions TEXT NOT NULL DEFAULT '',
    summary             TEXT NOT NULL DEFAULT '',
    tokens_before       INTEGER,
    tokens_after        INTEGER,
    occurred_at         INTEGER NOT NULL
) STRICT;
CREATE INDEX compactions_by_session ON compactions (session_id, occurred_at);

-- Written by ingest: messages it could not process, with the reason.
-- Keyed by JetStream stream sequence so a redelivered poison message is counted once.
CREATE TABLE dead_letters (
    id          INTEGER PRIMARY KEY,
    service     TEXT NOT NULL,
    stream_seq  INTEGER NOT NULL,
    subject     TEXT NOT NULL,
    reason      TEXT NOT NULL,
    event_id    TEXT NOT NULL DEFAULT '',
    excerpt     TEXT NOT NULL DEFAULT '',
    size_bytes  INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    UNIQUE (service, stream_seq)
) STRICT;
