-- Where each hook event ingest took sits in the MNEME_EVENTS stream, with its session, so
-- deleting a session erases its raw events from JetStream as well as its rows (and, through
-- the event ids, its dead letters). Written by ingest. Events taken before this table existed
-- are not listed: they leave the stream when they reach its age limit.
CREATE TABLE event_messages (
    stream_seq INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    event_id   TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX event_messages_session ON event_messages (session_id);
