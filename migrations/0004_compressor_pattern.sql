-- The compressor's and the pattern service's tables. Each table names its one writer; every other
-- service only reads. List columns (files, facts, concepts, observation ids) are JSON arrays.

-- Written by compressor: one structured memory distilled from one or more raw observations
-- (a run of edits to one file is one row, extended while the run goes on: `revision` then grows
-- and a new notice is emitted, so readers re-index the row).
CREATE TABLE structured_observations (
    id                   INTEGER PRIMARY KEY,
    session_id           TEXT NOT NULL,
    project              TEXT NOT NULL,
    -- file_read, file_edit, shell, search, web, subagent, mcp, prompt, other.
    category             TEXT NOT NULL,
    -- bugfix, feature, refactor, change, discovery, decision.
    type                 TEXT NOT NULL,
    tool_name            TEXT NOT NULL DEFAULT '',
    -- ok or error: whether the tool call (the last one of a group) succeeded.
    outcome              TEXT NOT NULL DEFAULT 'ok',
    -- What errors and their fixes are matched on: the normalised command (`git push`) or the
    -- file relative to the project; empty when neither applies.
    subject_key          TEXT NOT NULL DEFAULT '',
    title                TEXT NOT NULL,
    -- One or two sentences.
    narrative            TEXT NOT NULL,
    facts                TEXT NOT NULL DEFAULT '[]',
    concepts             TEXT NOT NULL DEFAULT '[]',
    files_read           TEXT NOT NULL DEFAULT '[]',
    files_modified       TEXT NOT NULL DEFAULT '[]',
    -- The raw `observations.id`s this row was made from, in order.
    observation_ids      TEXT NOT NULL DEFAULT '[]',
    first_observation_id INTEGER NOT NULL,
    last_observation_id  INTEGER NOT NULL,
    -- `heuristic` or `llm`.
    compressor           TEXT NOT NULL DEFAULT 'heuristic',
    revision             INTEGER NOT NULL DEFAULT 1,
    occurred_at          INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL
) STRICT;
CREATE INDEX structured_by_session ON structured_observations (session_id, id);
CREATE INDEX structured_by_project ON structured_observations (project, occurred_at DESC);

-- Written by compressor: one summary per session, upserted. `status` is `partial` while the
-- session runs (written when enough raw text accumulated, or on request) and `final` once the
-- session ended; every rewrite bumps `revision` and emits a notice.
CREATE TABLE session_summaries (
    id                INTEGER PRIMARY KEY,
    session_id        TEXT NOT NULL UNIQUE,
    project           TEXT NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('partial', 'final')),
    -- session_end, threshold or request.
    trigger           TEXT NOT NULL,
    -- What the user asked (the session's prompts, shortened).
    request           TEXT NOT NULL,
    -- JSON arrays of strings: what was done, decisions taken, what remains open.
    done              TEXT NOT NULL DEFAULT '[]',
    decisions         TEXT NOT NULL DEFAULT '[]',
    open_items        TEXT NOT NULL DEFAULT '[]',
    files_read        TEXT NOT NULL DEFAULT '[]',
    files_modified    TEXT NOT NULL DEFAULT '[]',
    -- JSON array of {"error": text, "resolved": bool}.
    errors            TEXT NOT NULL DEFAULT '[]',
    -- The whole summary as readable text: what retrieval should index and inject.
    text              TEXT NOT NULL,
    last_observation_id INTEGER NOT NULL,
    compressor        TEXT NOT NULL DEFAULT 'heuristic',
    revision          INTEGER NOT NULL DEFAULT 1,
    occurred_at       INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;
CREATE INDEX summaries_by_project ON session_summaries (project, occurred_at DESC);

-- Written by compressor: resume points, made when the host compacts its context
-- (PreCompact, completed by the PostCompact that follows) or on request.
CREATE TABLE checkpoints (
    id                  INTEGER PRIMARY KEY,
    session_id          TEXT NOT NULL,
    project             TEXT NOT NULL,
    -- pre_compact, post_compact or request.
    trigger             TEXT NOT NULL,
    -- The raw observation that caused it (0 for a request).
    observation_id      INTEGER NOT NULL DEFAULT 0,
    summary             TEXT NOT NULL,
    -- JSON arrays of strings.
    decisions           TEXT NOT NULL DEFAULT '[]',
    open_tasks          TEXT NOT NULL DEFAULT '[]',
    files_modified      TEXT NOT NULL DEFAULT '[]',
    -- The host's own compaction summary, when the PostCompact carried one.
    host_summary        TEXT NOT NULL DEFAULT '',
    -- Context size before and after, as the host reported them, or else estimated: before is
    -- the raw text of the session so far, after is this checkpoint's text (4 characters a token).
    tokens_before       INTEGER NOT NULL,
    tokens_after        INTEGER NOT NULL,
    -- The whole checkpoint as readable text: what a resume block should show.
    text                TEXT NOT NULL,
    last_observation_id INTEGER NOT NULL,
    compressor          TEXT NOT NULL DEFAULT 'heuristic',
    revision            INTEGER NOT NULL DEFAULT 1,
    occurred_at         INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL
) STRICT;
CREATE INDEX checkpoints_by_session ON checkpoints (session_id, id);
CREATE INDEX checkpoints_by_project ON checkpoints (project, occurred_at DESC);
-- A compaction event makes at most one checkpoint, so a redelivery changes nothing.
CREATE UNIQUE INDEX checkpoints_by_observation ON checkpoints (observation_id)
    WHERE observation_id <> 0;

-- Written by compressor: how far it has read each session, and what it carries between batches.
CREATE TABLE compressor_sessions (
    session_id        TEXT PRIMARY KEY,
    project           TEXT NOT NULL,
    -- The highest observations.id handled; lower ids are never handled again.
    cursor            INTEGER NOT NULL DEFAULT 0,
    -- Estimated tokens of raw text since the last summary or checkpoint (the threshold trigger).
    pending_tokens    INTEGER NOT NULL DEFAULT 0,
    -- Estimated tokens of raw text in the whole session.
    total_tokens      INTEGER NOT NULL DEFAULT 0,
    -- The structured row a following edit of the same file extends (0: none).
    open_group        INTEGER NOT NULL DEFAULT 0,
    -- The latest TodoWrite list, as JSON [{"content", "status"}], for open tasks.
    todos             TEXT NOT NULL DEFAULT '[]',
    ended             INTEGER NOT NULL DEFAULT 0,
    updated_at        INTEGER NOT NULL
) STRICT;

-- Written by compressor: tokens spent on the optional LLM compressor, per UTC day and session.
-- A call reserves its worst case here before it is made, so the budgets cannot be exceeded.
CREATE TABLE compressor_llm_usage (
    day        TEXT NOT NULL,
    session_id TEXT NOT NULL,
    tokens     INTEGER NOT NULL DEFAULT 0,
    calls      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (day, session_id)
) STRICT, WITHOUT ROWID;

-- Written by pattern: one row per recurring pattern, keyed by a stable hash of what makes it the
-- same pattern (never of the project, so a failure seen in two checkouts is one pattern; where it
-- was seen is in pattern_occurrences).
CREATE TABLE patterns (
    id                 INTEGER PRIMARY KEY,
    hash               TEXT NOT NULL UNIQUE,
    -- error, fix, decision, preference, architecture, procedure, reflection.
    kind               TEXT NOT NULL,
    title              TEXT NOT NULL,
    -- The pattern as readable text: what retrieval should index and inject.
    text               TEXT NOT NULL,
    -- JSON: what the hash was made of (tool, command, error class, file, phrase...).
    signature          TEXT NOT NULL DEFAULT '{}',
    -- The project it was last seen in.
    project            TEXT NOT NULL,
    occurrences        INTEGER NOT NULL DEFAULT 0,
    sessions           INTEGER NOT NULL DEFAULT 0,
    first_session_id   TEXT NOT NULL,
    last_session_id    TEXT NOT NULL,
    first_seen_at      INTEGER NOT NULL,
    last_seen_at       INTEGER NOT NULL,
    -- JSON arrays: files involved, and the latest related observations.id (at most 50).
    files              TEXT NOT NULL DEFAULT '[]',
    observation_ids    TEXT NOT NULL DEFAULT '[]',
    revision           INTEGER NOT NULL DEFAULT 1,
    updated_at         INTEGER NOT NULL
) STRICT;
CREATE INDEX patterns_by_project ON patterns (project, last_seen_at DESC);

-- Written by pattern: every observation a pattern was seen in, with the project and its role
-- (error, fix, statement, step); the key makes a redelivered observation count once.
CREATE TABLE pattern_occurrences (
    pattern_id     INTEGER NOT NULL,
    observation_id INTEGER NOT NULL,
    role           TEXT NOT NULL,
    session_id     TEXT NOT NULL,
    project        TEXT NOT NULL,
    occurred_at    INTEGER NOT NULL,
    PRIMARY KEY (pattern_id, observation_id, role)
) STRICT, WITHOUT ROWID;
CREATE INDEX pattern_occurrences_by_project ON pattern_occurrences (project, pattern_id);

-- Written by pattern: every failed tool call with its normalised signature, waiting for a
-- success on the same command or file (`fixed_by`) and counted into error patterns.
CREATE TABLE pattern_failures (
    observation_id INTEGER PRIMARY KEY,
    session_id     TEXT NOT NULL,
    project        TEXT NOT NULL,
    signature_hash TEXT NOT NULL,
    -- The command or file a later success must match to fix it.
    subject_key    TEXT NOT NULL,
    tool_name      TEXT NOT NULL,
    error_class    TEXT NOT NULL,
    fixed_by       INTEGER,
    occurred_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX pattern_failures_by_signature ON pattern_failures (signature_hash);
CREATE INDEX pattern_failures_open ON pattern_failures (session_id, subject_key) WHERE fixed_by IS NULL;

-- Written by pattern: how far it has read each session.
CREATE TABLE pattern_sessions (
    session_id TEXT PRIMARY KEY,
    cursor     INTEGER NOT NULL DEFAULT 0,
    updated_at INTEGER NOT NULL
) STRICT;
