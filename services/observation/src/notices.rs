//! Ingest's notices as the services downstream read them: `mneme.ingest.stored` (an observation
//! was stored) and `mneme.ingest.deleted` (sessions were deleted). Both come through one durable
//! consumer per service, so the notice of a delete is read after every stored notice of the
//! sessions it names.

use async_nats::jetstream;
use proto::{Message as _, subjects};
use std::collections::BTreeMap;

/// One of ingest's notices, read.
#[derive(Debug)]
pub enum Notice {
    /// An observation was stored: the walk of its session goes up to it.
    Stored {
        session_id: String,
        observation_id: i64,
        span: tracing::Span,
    },
    /// Sessions were deleted: what was made of them goes.
    Deleted {
        session_ids: Vec<String>,
        span: tracing::Span,
    },
}

/// Read a notice of deleted sessions (`mneme.ingest.deleted`) from a consumer that carries
/// stored notices too: `None` for any other subject; otherwise the sessions, with a span that
/// continues the notice's trace, or why the payload cannot be read.
pub fn deleted_sessions(
    message: &jetstream::Message,
) -> Option<Result<(Vec<String>, tracing::Span), String>> {
    if message.subject.as_str() != subjects::SESSIONS_DELETED {
        return None;
    }
    let notice = match proto::SessionsDeleted::decode(message.payload.as_ref()) {
        Ok(notice) => notice,
        Err(error) => return Some(Err(format!("not a SessionsDeleted: {error}"))),
    };
    let span = tracing::info_span!(
        "sessions.deleted",
        subject = %message.subject,
        sessions = notice.session_ids.len(),
    );
    common::nats::continue_trace(&span, message.headers.as_ref());
    Some(Ok((notice.session_ids, span)))
}

/// Read one message of a consumer of both notices, or say why it cannot be used. `stored_span`
/// makes the span a stored notice is handled in (a function, because a span's name is the
/// service's); it is made to continue the notice's trace. A stored notice that names no session
/// or no observation is refused.
pub fn read(
    message: &jetstream::Message,
    stored_span: impl FnOnce(&proto::ObservationStored) -> tracing::Span,
) -> Result<Notice, String> {
    if let Some(deleted) = deleted_sessions(message) {
        let (session_ids, span) = deleted?;
        return Ok(Notice::Deleted { session_ids, span });
    }
    let stored = proto::ObservationStored::decode(message.payload.as_ref())
        .map_err(|error| format!("not an ObservationStored: {error}"))?;
    if stored.session_id.is_empty() || stored.observation_id <= 0 {
        return Err("notice has no session or observation id".to_owned());
    }
    let span = stored_span(&stored);
    common::nats::continue_trace(&span, message.headers.as_ref());
    Ok(Notice::Stored {
        session_id: stored.session_id,
        observation_id: stored.observation_id,
        span,
    })
}

/// What one batch of notices asks of a service that walks sessions from a cursor: each session
/// named, up to the latest observation announced for it, and the sessions deleted.
#[derive(Debug, Default)]
pub struct Walks {
    /// Each session with its latest observation and the span of that notice.
    sessions: BTreeMap<String, (i64, tracing::Span)>,
    /// The sessions deleted, in the order their notices came.
    pub deleted: Vec<String>,
}

impl Walks {
    /// Gather the notices of one batch.
    pub fn of(notices: &[Notice]) -> Walks {
        let mut walks = Walks::default();
        for notice in notices {
            match notice {
                Notice::Stored {
                    session_id,
                    observation_id,
                    span,
                } => {
                    let entry = walks
                        .sessions
                        .entry(session_id.clone())
                        .or_insert_with(|| (0, span.clone()));
                    // What the session's walk writes is announced under the trace of the latest
                    // notice it covers.
                    if *observation_id > entry.0 {
                        *entry = (*observation_id, span.clone());
                    }
                }
                Notice::Deleted { session_ids, .. } => walks.deleted.extend_from_slice(session_ids),
            }
        }
        walks
    }

    /// Each session to walk with the observation id to walk it up to, in session order.
    pub fn upto(&self) -> Vec<(String, i64)> {
        self.sessions
            .iter()
            .map(|(session, (upto, _))| (session.clone(), *upto))
            .collect()
    }

    /// The span of the latest notice of `session`, for what its walk writes.
    pub fn span(&self, session: &str) -> Option<&tracing::Span> {
        self.sessions.get(session).map(|(_, span)| span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(session: &str, id: i64) -> Notice {
        Notice::Stored {
            session_id: session.to_owned(),
            observation_id: id,
            span: tracing::Span::none(),
        }
    }

    #[test]
    fn a_batch_walks_each_session_to_its_latest_observation() {
        let walks = Walks::of(&[
            stored("b", 4),
            stored("a", 7),
            stored("b", 9),
            stored("b", 6),
            Notice::Deleted {
                session_ids: vec!["c".to_owned()],
                span: tracing::Span::none(),
            },
        ]);
        assert_eq!(walks.upto(), [("a".to_owned(), 7), ("b".to_owned(), 9)]);
        assert_eq!(walks.deleted, ["c"]);
        assert!(walks.span("a").is_some() && walks.span("c").is_none());
    }
}
