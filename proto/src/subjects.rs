//! Every NATS subject, JetStream stream and durable consumer mneme uses.
//!
//! Naming rule: `mneme.<emitter>.<event>` for events and `mneme.<owner>.<verb>` for
//! request/reply, so `nats sub 'mneme.ingest.>'` shows everything one stage emits.
//! Streams and consumers are created idempotently by the service that consumes them, at start.

/// Prefix of every hook event: `mneme.events.<agent>.<kind>`.
pub const EVENTS_PREFIX: &str = "mneme.events";
/// Wildcard matching every hook event.
pub const EVENTS_ALL: &str = "mneme.events.>";
/// JetStream stream holding hook events (the write path's durable inbox).
pub const EVENTS_STREAM: &str = "MNEME_EVENTS";
/// Durable pull consumer through which ingest reads [`EVENTS_STREAM`].
pub const INGEST_CONSUMER: &str = "ingest";

/// Emitted by ingest after an observation is committed ([`crate::ObservationStored`]).
pub const OBSERVATION_STORED: &str = "mneme.ingest.stored";
/// Emitted by ingest after sessions were deleted ([`crate::SessionsDeleted`]); the services
/// holding rows made from them read it on the same durable consumer as
/// [`OBSERVATION_STORED`], so it arrives after every notice of those sessions.
pub const SESSIONS_DELETED: &str = "mneme.ingest.deleted";
/// JetStream stream holding everything ingest emits, for downstream durable consumers.
pub const INGEST_STREAM: &str = "MNEME_INGEST";
/// Wildcard matching everything ingest emits.
pub const INGEST_ALL: &str = "mneme.ingest.>";

/// Prefix of dead letters: `mneme.dlq.<service>` carries [`crate::DeadLetter`].
pub const DLQ_PREFIX: &str = "mneme.dlq";
/// Wildcard matching every dead letter.
pub const DLQ_ALL: &str = "mneme.dlq.>";
/// JetStream stream keeping dead letters for inspection and replay.
pub const DLQ_STREAM: &str = "MNEME_DLQ";

/// Request/reply: context to inject at session start or on a prompt
/// ([`crate::ContextRequest`] → [`crate::ContextReply`]).
pub const RETRIEVAL_CONTEXT: &str = "mneme.retrieval.context";
/// Request/reply: search ([`crate::SearchRequest`] → [`crate::SearchReply`]).
pub const RETRIEVAL_SEARCH: &str = "mneme.retrieval.search";
/// Request/reply: the items around one item ([`crate::TimelineRequest`] → [`crate::ItemsReply`]).
pub const RETRIEVAL_TIMELINE: &str = "mneme.retrieval.timeline";
/// Request/reply: whole items by id ([`crate::GetRequest`] → [`crate::ItemsReply`]).
pub const RETRIEVAL_GET: &str = "mneme.retrieval.get";
/// Durable consumer through which retrieval indexes what ingest stored ([`INGEST_STREAM`]).
pub const RETRIEVAL_CONSUMER: &str = "retrieval";
/// Queue group retrieval instances share, so each request is answered once.
pub const RETRIEVAL_QUEUE: &str = "retrieval";

/// Request/reply: drop the memory items of sessions ([`crate::ForgetRequest`] →
/// [`crate::ForgetReply`]).
pub const RETRIEVAL_FORGET: &str = "mneme.retrieval.forget";

/// Request/reply: write exported memory items as they were ([`crate::ImportItemsRequest`] →
/// [`crate::ImportItemsReply`]).
pub const RETRIEVAL_IMPORT: &str = "mneme.retrieval.import";
/// Request/reply: create a collection ([`crate::CreateCollectionRequest`] →
/// [`crate::CollectionReply`]).
pub const COLLECTIONS_CREATE: &str = "mneme.retrieval.collections.create";
/// Request/reply: list collections ([`crate::ListCollectionsRequest`] →
/// [`crate::CollectionsReply`]).
pub const COLLECTIONS_LIST: &str = "mneme.retrieval.collections.list";
/// Request/reply: one collection with its items ([`crate::CollectionRequest`] →
/// [`crate::CollectionReply`]).
pub const COLLECTIONS_GET: &str = "mneme.retrieval.collections.get";
/// Request/reply: delete a collection, not its items ([`crate::CollectionRequest`] →
/// [`crate::CollectionReply`]).
pub const COLLECTIONS_DELETE: &str = "mneme.retrieval.collections.delete";
/// Request/reply: the items of a collection most relevant to a question
/// ([`crate::AskCollectionRequest`] → [`crate::AskCollectionReply`]).
pub const COLLECTIONS_ASK: &str = "mneme.retrieval.collections.ask";

/// Request/reply: replace one scope's capability registry
/// ([`crate::SyncCapabilitiesRequest`] → [`crate::SyncCapabilitiesReply`]).
pub const CAPABILITIES_SYNC: &str = "mneme.retrieval.capabilities.sync";
/// Request/reply: the capabilities that fit a prompt ([`crate::MatchCapabilitiesRequest`] →
/// [`crate::MatchCapabilitiesReply`]).
pub const CAPABILITIES_MATCH: &str = "mneme.retrieval.capabilities.match";
/// Request/reply: the capabilities retrieval holds ([`crate::ListCapabilitiesRequest`] →
/// [`crate::ListCapabilitiesReply`]).
pub const CAPABILITIES_LIST: &str = "mneme.retrieval.capabilities.list";

/// Request/reply, answered by ingest: archive or unarchive sessions
/// ([`crate::ArchiveSessionsRequest`] → [`crate::SessionsChangedReply`]). Not under
/// `mneme.ingest.` because [`INGEST_STREAM`] captures `mneme.ingest.>`, and a request captured
/// by a stream is answered by JetStream's publish ack instead of by ingest.
pub const SESSIONS_ARCHIVE: &str = "mneme.sessions.archive";
/// Request/reply, answered by ingest: delete sessions with their observations
/// ([`crate::DeleteSessionsRequest`] → [`crate::SessionsChangedReply`]).
pub const SESSIONS_DELETE: &str = "mneme.sessions.delete";
/// Request/reply, answered by ingest: store exported sessions and observations as they were
/// ([`crate::ImportRecordsRequest`] → [`crate::ImportRecordsReply`]).
pub const SESSIONS_IMPORT: &str = "mneme.sessions.import";
/// Request/reply, answered by ingest: the retention policy ([`crate::RetentionGetRequest`] →
/// [`crate::RetentionReply`]).
pub const RETENTION_GET: &str = "mneme.retention.get";
/// Request/reply, answered by ingest: replace the retention policy and apply it
/// ([`crate::RetentionSetRequest`] → [`crate::RetentionReply`]).
pub const RETENTION_SET: &str = "mneme.retention.set";
/// Request/reply, answered by ingest: apply the retention policy now
/// ([`crate::RetentionApplyRequest`] → [`crate::RetentionReply`]).
pub const RETENTION_APPLY: &str = "mneme.retention.apply";
/// Queue group ingest instances share for session requests.
pub const INGEST_QUEUE: &str = "ingest";

/// Prefix of what the compressor emits: `mneme.compressor.written.<kind>` carries
/// [`crate::MemoryWritten`] for kind `structured`, `summary` or `checkpoint`.
pub const COMPRESSOR_WRITTEN_PREFIX: &str = "mneme.compressor.written";
/// Wildcard matching everything the compressor emits (and none of its request subjects).
pub const COMPRESSOR_WRITTEN_ALL: &str = "mneme.compressor.written.>";
/// JetStream stream holding the compressor's notices, for downstream durable consumers.
pub const COMPRESSOR_STREAM: &str = "MNEME_COMPRESSOR";
/// Durable consumer through which the compressor reads [`INGEST_STREAM`].
pub const COMPRESSOR_CONSUMER: &str = "compressor";
/// Request/reply: compress a session now ([`crate::CompressRequest`] → [`crate::CompressReply`]).
pub const COMPRESSOR_COMPRESS: &str = "mneme.compressor.compress";
/// Request/reply: make a checkpoint now ([`crate::CheckpointRequest`] →
/// [`crate::CheckpointReply`]).
pub const COMPRESSOR_CHECKPOINT: &str = "mneme.compressor.checkpoint";
/// Request/reply: other wordings of a search query from the optional LLM
/// ([`crate::RewriteRequest`] → [`crate::RewriteReply`]); retrieval asks it for a search with
/// `rewrite`.
pub const COMPRESSOR_REWRITE: &str = "mneme.compressor.rewrite";
/// Queue group compressor instances share, so each request is answered once.
pub const COMPRESSOR_QUEUE: &str = "compressor";

/// Emitted by the pattern service after a pattern row is committed ([`crate::PatternUpdated`]).
pub const PATTERN_UPDATED: &str = "mneme.pattern.updated";
/// JetStream stream holding the pattern service's notices.
pub const PATTERN_STREAM: &str = "MNEME_PATTERN";
/// Durable consumer through which the pattern service reads [`INGEST_STREAM`].
pub const PATTERN_CONSUMER: &str = "pattern";

/// Every durable consumer of the write path, by stream: ingest reading hook events, then
/// retrieval, the compressor and the pattern service reading ingest's notices, then retrieval
/// reading what the compressor and the pattern service write.
pub const WRITE_PATH_CONSUMERS: [(&str, &str); 6] = [
    (EVENTS_STREAM, INGEST_CONSUMER),
    (INGEST_STREAM, RETRIEVAL_CONSUMER),
    (INGEST_STREAM, COMPRESSOR_CONSUMER),
    (INGEST_STREAM, PATTERN_CONSUMER),
    (COMPRESSOR_STREAM, RETRIEVAL_CONSUMER),
    (PATTERN_STREAM, RETRIEVAL_CONSUMER),
];

/// Prefix of what a team member shares: `mneme.team.<project>.<member>.event` carries an
/// [`crate::Event`] of a shared project, after ingest stored and scrubbed it again, and
/// `mneme.team.<project>.<member>.deleted` a [`crate::SessionsDeleted`] naming sessions of that
/// project deleted on the machine they ran on. `<project>` is the project's team name, the same
/// on every member's machine, whatever the checkout's path.
pub const TEAM_PREFIX: &str = "mneme.team";
/// Wildcard matching everything a member shares.
pub const TEAM_ALL: &str = "mneme.team.>";
/// Stream on a member's own server holding what it shares: JetStream on the hub mirrors it, so
/// what is written while the member is offline leaves when its link returns.
pub const TEAM_OUT_STREAM: &str = "MNEME_TEAM_OUT";
/// Stream on a member's own server sourcing what the other members shared, for the projects it
/// shares, from their streams on the hub.
pub const TEAM_IN_STREAM: &str = "MNEME_TEAM_IN";
/// Prefix of the hub's streams, one a member (`MNEME_TEAM_MEMBER_<member>`), each a mirror of that
/// member's [`TEAM_OUT_STREAM`].
pub const TEAM_MEMBER_STREAM_PREFIX: &str = "MNEME_TEAM_MEMBER_";
/// The JetStream domain of a team's hub.
pub const TEAM_HUB_DOMAIN: &str = "hub";
/// Durable consumer through which ingest stores what the team shared ([`TEAM_IN_STREAM`]).
pub const INGEST_TEAM_CONSUMER: &str = "ingest-team";

/// Prefix of health probes: `mneme.health.<service>` ([`crate::HealthRequest`] →
/// [`crate::HealthReply`]).
pub const HEALTH_PREFIX: &str = "mneme.health";

/// NATS header carrying the W3C trace context, so one hook event is one trace.
pub const TRACEPARENT_HEADER: &str = "traceparent";

/// Subject of a hook event.
pub fn event_subject(agent: &str, kind: &str) -> String {
    format!("{EVENTS_PREFIX}.{agent}.{kind}")
}

/// Subject of a service's dead letters.
pub fn dlq_subject(service: &str) -> String {
    format!("{DLQ_PREFIX}.{service}")
}

/// Subject of a compressor notice of `kind` (`structured`, `summary`, `checkpoint`).
pub fn compressor_written_subject(kind: &str) -> String {
    format!("{COMPRESSOR_WRITTEN_PREFIX}.{kind}")
}

/// Subject of a service's health probe.
pub fn health_subject(service: &str) -> String {
    format!("{HEALTH_PREFIX}.{service}")
}

/// Subject of an event of the team project `project` that `member` shares.
pub fn team_event_subject(project: &str, member: &str) -> String {
    format!("{TEAM_PREFIX}.{project}.{member}.event")
}

/// Subject of a deletion of sessions of the team project `project` that ran on `member`'s
/// machine.
pub fn team_deleted_subject(project: &str, member: &str) -> String {
    format!("{TEAM_PREFIX}.{project}.{member}.deleted")
}

/// Everything `member` shared about the team project `project`.
pub fn team_member_subjects(project: &str, member: &str) -> String {
    format!("{TEAM_PREFIX}.{project}.{member}.>")
}

/// The parts of a team subject (`mneme.team.<project>.<member>.<what>`): project, member and
/// what it carries (`event` or `deleted`); `None` for any other subject.
pub fn parse_team_subject(subject: &str) -> Option<(&str, &str, &str)> {
    let rest = subject.strip_prefix(TEAM_PREFIX)?.strip_prefix('.')?;
    let mut parts = rest.split('.');
    let parsed = (parts.next()?, parts.next()?, parts.next()?);
    parts.next().is_none().then_some(parsed)
}

/// Everything shared about the team project `project`, by any member.
pub fn team_project_subjects(project: &str) -> String {
    format!("{TEAM_PREFIX}.{project}.>")
}

/// The hub's stream holding what `member` shared.
pub fn team_member_stream(member: &str) -> String {
    format!("{TEAM_MEMBER_STREAM_PREFIX}{member}")
}
