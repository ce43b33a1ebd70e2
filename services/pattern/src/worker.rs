//! The pattern service's loop: ingest's notices in batches (walk, commit, announce, ack), read
//! by [`common::notices::Reader`].

use crate::{Detector, PatternArgs, SERVICE, Updated};
use async_nats::jetstream;
use common::notices::{Handled, Handler, Reader};
use common::service::Service;
use observation::{Notice, Walks};
use proto::{Message as _, subjects};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long JetStream waits for an ack before redelivering a notice.
const ACK_WAIT: Duration = Duration::from_secs(30);
/// Notices handled per transaction.
const BATCH: usize = 256;
/// A notice whose batch failed this many times is dead-lettered instead of retried.
const MAX_DELIVER: i64 = 5;

pub async fn run(
    service: &mut Service,
    detector: Detector,
    args: PatternArgs,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    if args.pattern_disabled {
        service
            .counters
            .set_detail("disabled (MNEME_PATTERN_DISABLED)");
        service.answer_health(shutdown);
        shutdown.cancelled().await;
        return Ok(());
    }
    let reader = Reader::open(
        &service.jetstream,
        SERVICE,
        common::streams::Durable {
            stream: subjects::INGEST_STREAM,
            name: subjects::PATTERN_CONSUMER,
            description: "pattern: detect recurring patterns",
            filter_subjects: &[subjects::OBSERVATION_STORED, subjects::SESSIONS_DELETED],
            ack_wait: ACK_WAIT,
            batch: BATCH,
        },
    )
    .await?
    .dead_letter_after(MAX_DELIVER)
    .counting(service.counters.clone());
    service.answer_health(shutdown);
    tracing::info!(consumer = subjects::PATTERN_CONSUMER, "pattern running");
    let notices = Notices {
        jetstream: service.jetstream.clone(),
        detector,
    };
    reader.run(&notices, shutdown).await;
    tracing::info!("pattern stopped");
    Ok(())
}

/// Ingest's notices, walked for patterns.
struct Notices {
    jetstream: jetstream::Context,
    detector: Detector,
}

impl Handler for Notices {
    type Notice = Notice;

    const WORK: &'static str = "pattern detection";

    fn decode(&self, message: &jetstream::Message) -> Result<Notice, String> {
        observation::notices::read(message, |stored| {
            tracing::info_span!(
                "pattern.notice",
                subject = %message.subject,
                event_id = %stored.event_id,
                session_id = %stored.session_id,
            )
        })
    }

    async fn handle(&self, notices: &[Notice]) -> anyhow::Result<Handled> {
        let walks = Walks::of(notices);
        let updated = self.detector.process(&walks.upto(), &walks.deleted).await?;
        Ok(if announce(&self.jetstream, &updated, &walks).await {
            Handled::Ack
        } else {
            Handled::Redeliver
        })
    }
}

/// Publish a notice for each changed pattern; `false` when one was not acknowledged.
async fn announce(jetstream: &jetstream::Context, updated: &[Updated], walks: &Walks) -> bool {
    let announcements = updated
        .iter()
        .map(|u| common::streams::Announcement {
            subject: subjects::PATTERN_UPDATED.to_owned(),
            id: format!("pattern-{}-{}", u.id, u.revision),
            span: walks.span(&u.session_id).cloned(),
            payload: proto::PatternUpdated {
                pattern_id: u.id,
                kind: u.kind.clone(),
                hash: u.hash.clone(),
                project: u.project.clone(),
                session_id: u.session_id.clone(),
                occurrences: u.occurrences,
                revision: u.revision,
                last_seen_at_ms: u.last_seen_at,
            }
            .encode_to_vec()
            .into(),
        })
        .collect();
    common::streams::announce(jetstream, announcements).await
}
