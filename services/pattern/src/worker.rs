//! The pattern service's loop: stored-observation notices in batches (walk, commit, announce,
//! ack).

use crate::{Detector, PatternArgs, SERVICE, Updated};
use anyhow::Context as _;
use async_nats::jetstream::{self, AckKind, consumer::pull};
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
    let consumer: jetstream::consumer::PullConsumer = jetstream
        .get_stream(subjects::INGEST_STREAM)
        .await
        .context("opening the ingest stream")?
        .get_or_create_consumer(
            subjects::PATTERN_CONSUMER,
            pull::Config {
                durable_name: Some(subjects::PATTERN_CONSUMER.to_owned()),
                description: Some("pattern: detect recurring patterns".to_owned()),
                filter_subject: subjects::OBSERVATION_STORED.to_owned(),
                ack_policy: jetstream::consumer::AckPolicy::Explicit,
                ack_wait: ACK_WAIT,
                max_ack_pending: 20_000,
                ..Default::default()
            },
        )
        .await
        .context("creating the pattern consumer")?;
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(BATCH)
        .heartbeat(Duration::from_secs(5))
        .messages()
        .await
        .context("pulling from the pattern consumer")?
        .ready_chunks(BATCH);
    tracing::info!(consumer = subjects::PATTERN_CONSUMER, "pattern running");
    loop {
        let chunk = tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            chunk = messages.next() => match chunk {
                Some(chunk) => chunk,
                None => break,
            },
        };
        let batch: Vec<jetstream::Message> = chunk
            .into_iter()
            .filter_map(|m| {
                m.map_err(|e| tracing::warn!(error = %e, "pull failed"))
                    .ok()
            })
            .collect();
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
    for message in messages {
        match proto::ObservationStored::decode(message.payload.as_ref()) {
            Ok(stored) if !stored.session_id.is_empty() && stored.observation_id > 0 => {
                let entry = sessions
                    .entry(stored.session_id.clone())
                    .or_insert_with(|| {
                        let span =
                            tracing::info_span!("pattern.session", session_id = %stored.session_id);
                        common::nats::continue_trace(&span, message.headers.as_ref());
                        (0, span)
                    });
                entry.0 = entry.0.max(stored.observation_id);
                good.push(message);
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
    match detector.process(&work).await {
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
    tracing::warn!(%reason, subject = %message.subject, "dead-lettering");
    let seq = message
        .info()
        .map(|i| i.stream_sequence)
        .unwrap_or_default();
    let letter = proto::DeadLetter {
        subject: message.subject.to_string(),
        reason: reason.to_owned(),
        event_id: String::new(),
        excerpt: String::new(),
        size_bytes: message.payload.len() as u64,
        at_ms: common::now_ms(),
    };
    let mut headers = async_nats::HeaderMap::new();
    let id = format!("dlq-{SERVICE}-{seq}");
    headers.insert(async_nats::header::NATS_MESSAGE_ID, id.as_str());
    match jetstream
        .publish_with_headers(
            subjects::dlq_subject(SERVICE),
            headers,
            letter.encode_to_vec().into(),
        )
        .await
    {
        Ok(ack) => {
            if let Err(error) = ack.await {
                tracing::warn!(%error, "dead letter not acknowledged");
            }
        }
        Err(error) => tracing::warn!(%error, "dead letter not published"),
    }
    if let Err(error) = message.ack().await {
        tracing::warn!(%error, "ack of a dead letter failed");
    }
}
