//! The pattern service's loop: stored-observation notices in batches (walk, commit, announce,
//! ack).

use crate::{Detector, PatternArgs, SERVICE, Updated};
use async_nats::jetstream::{self, AckKind};
use common::health::Counters;
use futures::StreamExt as _;
use proto::{Message as _, subjects};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long JetStream waits for an ack before redelivering a notice.
const ACK_WAIT: Duration = Duration::from_secs(30);
/// Notices handled per transaction.
const BATCH: usize = 256;
/// A notice whose batch failed this many times is dead-lettered instead of retried.
const MAX_DELIVER: i64 = 5;

pub async fn run(
    client: async_nats::Client,
    detector: Detector,
    args: PatternArgs,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let jetstream = jetstream::new(client.clone());
    common::streams::ensure(&jetstream).await?;
    let counters = Arc::new(Counters::default());
    let health = tokio::spawn(common::health::serve(
        client.clone(),
        SERVICE,
        counters.clone(),
        shutdown.clone(),
    ));
    if args.pattern_disabled {
        counters.set_detail("disabled (MNEME_PATTERN_DISABLED)");
        shutdown.cancelled().await;
        health.abort();
        return Ok(());
    }
    let mut messages = common::streams::pull_batches(
        &jetstream,
        common::streams::Durable {
            stream: subjects::INGEST_STREAM,
            name: subjects::PATTERN_CONSUMER,
            description: "pattern: detect recurring patterns",
            filter_subjects: &[subjects::OBSERVATION_STORED, subjects::SESSIONS_DELETED],
            ack_wait: ACK_WAIT,
            batch: BATCH,
        },
    )
    .await?;
    tracing::info!(consumer = subjects::PATTERN_CONSUMER, "pattern running");
    loop {
        let batch = tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            batch = messages.next() => match batch {
                Some(batch) => batch,
                None => break,
            },
        };
        if !batch.is_empty() {
            handle(&jetstream, &detector, &counters, batch).await;
        }
    }
    health.abort();
    tracing::info!("pattern stopped");
    Ok(())
}

async fn handle(
    jetstream: &jetstream::Context,
    detector: &Detector,
    counters: &Counters,
    messages: Vec<jetstream::Message>,
) {
    let mut sessions: BTreeMap<String, (i64, tracing::Span)> = BTreeMap::new();
    let mut good = Vec::with_capacity(messages.len());
    // Each notice's span stays open until the batch holding it is acked or given back.
    let mut notices = Vec::with_capacity(messages.len());
    let mut deleted: Vec<String> = Vec::new();
    for message in messages {
        if let Some(deletion) = common::streams::deleted_sessions(&message) {
            match deletion {
                Ok((ids, span)) => {
                    deleted.extend(ids);
                    good.push(message);
                    notices.push(span);
                }
                Err(reason) => dead_letter(jetstream, &message, &reason).await,
            }
            continue;
        }
        match proto::ObservationStored::decode(message.payload.as_ref()) {
            Ok(stored) if !stored.session_id.is_empty() && stored.observation_id > 0 => {
                let span = tracing::info_span!(
                    "pattern.notice",
                    subject = %message.subject,
                    event_id = %stored.event_id,
                    session_id = %stored.session_id,
                );
                common::nats::continue_trace(&span, message.headers.as_ref());
                let entry = sessions
                    .entry(stored.session_id.clone())
                    .or_insert_with(|| (0, span.clone()));
                // What the session's walk finds is announced under the trace of the latest
                // notice it covers.
                if stored.observation_id > entry.0 {
                    *entry = (stored.observation_id, span.clone());
                }
                good.push(message);
                notices.push(span);
            }
            Ok(_) => {
                dead_letter(
                    jetstream,
                    &message,
                    "notice has no session or observation id",
                )
                .await
            }
            Err(error) => {
                dead_letter(
                    jetstream,
                    &message,
                    &format!("not an ObservationStored: {error}"),
                )
                .await
            }
        }
    }
    if good.is_empty() {
        return;
    }
    let work: Vec<(String, i64)> = sessions
        .iter()
        .map(|(session, (upto, _))| (session.clone(), *upto))
        .collect();
    match detector.process(&work, &deleted).await {
        Ok(updated) => {
            if announce(jetstream, &updated, &sessions).await {
                for message in &good {
                    if let Err(error) = message.ack().await {
                        tracing::warn!(%error, "ack failed; the notice will be redelivered and change nothing");
                    }
                    counters.handled();
                }
            } else {
                for message in &good {
                    let _ = message
                        .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                        .await;
                }
            }
        }
        Err(error) => {
            tracing::warn!(error = %format!("{error:#}"), "pattern detection failed; will retry");
            for message in good {
                let delivered = message.info().map(|i| i.delivered).unwrap_or(1);
                if delivered >= MAX_DELIVER {
                    let reason = format!("pattern detection failed {delivered} times: {error:#}");
                    dead_letter(jetstream, &message, &reason).await;
                } else {
                    let _ = message
                        .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                        .await;
                }
            }
        }
    }
}

/// Publish a notice for each changed pattern; `false` when one was not acknowledged.
async fn announce(
    jetstream: &jetstream::Context,
    updated: &[Updated],
    sessions: &BTreeMap<String, (i64, tracing::Span)>,
) -> bool {
    let mut acks = Vec::with_capacity(updated.len());
    for u in updated {
        let mut headers = async_nats::HeaderMap::new();
        if let Some((_, span)) = sessions.get(&u.session_id) {
            span.in_scope(|| common::nats::inject_trace(&mut headers));
        }
        let id = format!("pattern-{}-{}", u.id, u.revision);
        headers.insert(async_nats::header::NATS_MESSAGE_ID, id.as_str());
        let notice = proto::PatternUpdated {
            pattern_id: u.id,
            kind: u.kind.clone(),
            hash: u.hash.clone(),
            project: u.project.clone(),
            session_id: u.session_id.clone(),
            occurrences: u.occurrences,
            revision: u.revision,
            last_seen_at_ms: u.last_seen_at,
        };
        match jetstream
            .publish_with_headers(
                subjects::PATTERN_UPDATED,
                headers,
                notice.encode_to_vec().into(),
            )
            .await
        {
            Ok(ack) => acks.push(ack),
            Err(error) => {
                tracing::warn!(%error, "announcing failed");
                return false;
            }
        }
    }
    for ack in acks {
        if let Err(error) = ack.await {
            tracing::warn!(%error, "announcement not acknowledged");
            return false;
        }
    }
    true
}

/// Publish a notice the service cannot use to its dead-letter subject, then ack it.
async fn dead_letter(jetstream: &jetstream::Context, message: &jetstream::Message, reason: &str) {
    common::streams::dead_letter(jetstream, SERVICE, message, reason).await;
}
