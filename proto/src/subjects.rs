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

/// Subject of a service's health probe.
pub fn health_subject(service: &str) -> String {
    format!("{HEALTH_PREFIX}.{service}")
}
