-- What the api asks the owners to keep.

-- Written by ingest (on request over `mneme.sessions.archive`): when a session was archived.
-- Archived sessions stay searchable; lists leave them out unless asked for.
ALTER TABLE sessions ADD COLUMN archived_at INTEGER;
CREATE INDEX sessions_archived ON sessions (archived_at) WHERE archived_at IS NOT NULL;
