//! The live stream (`GET /v1/stream`): server-sent events of what the pipeline writes, as it
//! writes it: observations stored by ingest, structured observations, summaries and checkpoints
//! written by the compressor, patterns updated by the pattern service.
//!
//! The api subscribes to the services' notices with plain NATS subscriptions (no durable
//! consumer: a live view has nothing to catch up on) and adds the title of what each notice
//! names from the store, so a client can show it without asking again.

use crate::State;
use crate::error::{ApiError, ApiResult};
use crate::extract::Query;
use archive::Titled;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt as _};
use proto::{Message as _, subjects};
use serde::Deserialize;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The event names a client may ask for.
pub const KINDS: [&str; 5] = [
    "observation",
    "structured",
    "summary",
    "checkpoint",
    "pattern",
];

#[derive(Debug, Deserialize)]
pub struct StreamQuery {
    /// Comma-separated event names; all when absent.
    kinds: Option<String>,
    /// Only notices of this project.
    project: Option<String>,
}

/// Counts a connected client for as long as its stream lives, and holds its place among the
/// streams the api allows (none when the client's address is unknown, which only a request
/// that did not come through a socket has).
struct Connected {
    state: Arc<State>,
    /// Held, not read: the place is given back when the stream ends.
    _slot: Option<crate::security::StreamSlot>,
}

impl Connected {
    fn new(state: Arc<State>, slot: Option<crate::security::StreamSlot>) -> Connected {
        state.metrics.stream_clients.fetch_add(1, Ordering::Relaxed);
        Connected { state, _slot: slot }
    }
}

impl Drop for Connected {
    fn drop(&mut self) {
        self.state
            .metrics
            .stream_clients
            .fetch_sub(1, Ordering::Relaxed);
    }
}

pub async fn stream(
    axum::extract::State(state): axum::extract::State<Arc<State>>,
    client: Option<axum::Extension<crate::security::ClientAddress>>,
    Query(query): Query<StreamQuery>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let kinds: Vec<String> = match query.kinds.as_deref() {
        None | Some("") => KINDS.iter().map(|k| (*k).to_owned()).collect(),
        Some(list) => {
            let kinds: Vec<String> = list.split(',').map(|k| k.trim().to_owned()).collect();
            if let Some(bad) = kinds.iter().find(|k| !KINDS.contains(&k.as_str())) {
                return Err(ApiError::invalid(
                    "invalid_parameter",
                    format!("unknown kind {bad:?}: one of {}", KINDS.join(", ")),
                ));
            }
            kinds
        }
    };
    let project = query.project.unwrap_or_default();
    // Taken before subscribing, so a refused client costs no subscription.
    let slot = client
        .map(|axum::Extension(client)| crate::security::StreamSlots::take(&state, client.0))
        .transpose()?;
    let mut subscriptions = Vec::new();
    for subject in [
        subjects::OBSERVATION_STORED,
        subjects::COMPRESSOR_WRITTEN_ALL,
        subjects::PATTERN_UPDATED,
    ] {
        match state.nats.subscribe(subject).await {
            Ok(subscription) => subscriptions.push(subscription),
            Err(error) => {
                tracing::warn!(%error, "cannot subscribe for the live stream");
                return Err(ApiError::unavailable("nats is unreachable"));
            }
        }
    }
    // The first event tells the client the subscriptions are in place, so nothing written from
    // now on is missed.
    let ready = futures::stream::once(async {
        Event::default()
            .event("ready")
            .json_data(json!({"kinds": KINDS}))
            .unwrap_or_default()
    });
    let connected = Connected::new(state.clone(), slot);
    let shutdown = state.shutdown.clone();
    let notices = futures::stream::select_all(subscriptions).filter_map(move |message| {
        let state = connected.state.clone();
        let kinds = kinds.clone();
        let project = project.clone();
        async move {
            let (name, data) = describe(&state, &message.subject, &message.payload).await?;
            if !kinds.iter().any(|k| k == name) {
                return None;
            }
            if !project.is_empty() && data["project"] != project.as_str() {
                return None;
            }
            Event::default().event(name).json_data(data).ok()
        }
    });
    let events = ready
        .chain(notices)
        .take_until(shutdown.cancelled_owned())
        .map(Ok);
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// The event name and data of one notice; `None` for what cannot be read.
async fn describe(state: &State, subject: &str, payload: &[u8]) -> Option<(&'static str, Value)> {
    let pool = state.pool().await.ok();
    // A title that cannot be read leaves the notice without one rather than dropping it.
    let title = async |of: Titled, id: i64| match &pool {
        Some(pool) => archive::title(pool, of, id).await.ok().flatten(),
        None => None,
    };
    if subject == subjects::OBSERVATION_STORED {
        let notice = proto::ObservationStored::decode(payload).ok()?;
        let title = title(Titled::Observation, notice.observation_id).await;
        return Some((
            "observation",
            json!({
                "observation_id": notice.observation_id,
                "session_id": notice.session_id,
                "project": notice.project,
                "kind": notice.kind,
                "tool_name": notice.tool_name,
                "occurred_at_ms": notice.occurred_at_ms,
                "title": title.unwrap_or_default(),
            }),
        ));
    }
    if subject == subjects::PATTERN_UPDATED {
        let notice = proto::PatternUpdated::decode(payload).ok()?;
        let title = title(Titled::Pattern, notice.pattern_id).await;
        return Some((
            "pattern",
            json!({
                "pattern_id": notice.pattern_id,
                "kind": notice.kind,
                "project": notice.project,
                "session_id": notice.session_id,
                "occurrences": notice.occurrences,
                "revision": notice.revision,
                "last_seen_at_ms": notice.last_seen_at_ms,
                "title": title.unwrap_or_default(),
            }),
        ));
    }
    let notice = proto::MemoryWritten::decode(payload).ok()?;
    let (name, of) = match notice.kind.as_str() {
        "structured" => ("structured", Titled::Structured),
        "summary" => ("summary", Titled::Summary),
        "checkpoint" => ("checkpoint", Titled::Checkpoint),
        _ => return None,
    };
    let title = title(of, notice.id).await;
    Some((
        name,
        json!({
            "id": notice.id,
            "kind": notice.kind,
            "session_id": notice.session_id,
            "project": notice.project,
            "revision": notice.revision,
            "trigger": notice.trigger,
            "occurred_at_ms": notice.occurred_at_ms,
            "title": title.unwrap_or_default(),
        }),
    ))
}
