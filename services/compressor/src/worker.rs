//! The compressor's loops: stored-observation notices in batches (walk, commit, announce, ack)
//! and compress/checkpoint requests.

use crate::{Compressor, SERVICE, Written, llm::Llm};
use async_nats::jetstream::{self, AckKind};
use common::health::Counters;
use futures::StreamExt as _;
use proto::{Message as _, subjects};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;

/// How long JetStream waits for an ack before redelivering a notice.
const ACK_WAIT: Duration = Duration::from_secs(30);
/// Notices handled per transaction.
const BATCH: usize = 256;
/// A notice whose batch failed this many times is dead-lettered instead of retried.
const MAX_DELIVER: i64 = 5;

struct Worker {
    client: async_nats::Client,
    jetstream: jetstream::Context,
    compressor: Compressor,
    llm: Option<Arc<Llm>>,
    counters: Arc<Counters>,
    refining: TaskTracker,
}

pub async fn run(
    client: async_nats::Client,
    compressor: Compressor,
    llm: Option<Llm>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let jetstream = jetstream::new(client.clone());
    common::streams::ensure(&jetstream).await?;
    let mut messages = common::streams::pull_batches(
        &jetstream,
        common::streams::Durable {
            stream: subjects::INGEST_STREAM,
            name: subjects::COMPRESSOR_CONSUMER,
            description: "compressor: structure and summarise observations",
            filter_subjects: &[subjects::OBSERVATION_STORED, subjects::SESSIONS_DELETED],
            ack_wait: ACK_WAIT,
            batch: BATCH,
        },
    )
    .await?;
    let mut requests = futures::stream::select_all(
        futures::future::try_join_all(
            [
                subjects::COMPRESSOR_COMPRESS,
                subjects::COMPRESSOR_CHECKPOINT,
            ]
            .map(|subject| client.queue_subscribe(subject, subjects::COMPRESSOR_QUEUE.to_owned())),
        )
        .await?,
    );
    let counters = Arc::new(Counters::default());
    counters.set_detail(if llm.is_some() {
        "heuristic + llm"
    } else {
        "heuristic"
    });
    let health = tokio::spawn(common::health::serve(
        client.clone(),
        SERVICE,
        counters.clone(),
        shutdown.clone(),
    ));
    let worker = Arc::new(Worker {
        client,
        jetstream,
        compressor,
        llm: llm.map(Arc::new),
        counters,
        refining: TaskTracker::new(),
    });
    let answering = TaskTracker::new();
    tracing::info!(
        consumer = subjects::COMPRESSOR_CONSUMER,
        "compressor running"
    );
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            chunk = messages.next() => match chunk {
                Some(batch) => {
                    if !batch.is_empty() {
                        worker.handle(batch).await;
                    }
                }
                None => break,
            },
            Some(request) = requests.next() => {
                let worker = worker.clone();
                let span = tracing::info_span!("compressor.request", subject = %request.subject);
                common::nats::continue_trace(&span, request.headers.as_ref());
                answering.spawn(async move { worker.answer(request).await }.instrument(span));
            }
        }
    }
    answering.close();
    answering.wait().await;
    worker.refining.close();
    worker.refining.wait().await;
    health.abort();
    tracing::info!("compressor stopped");
    Ok(())
}

impl Worker {
    async fn handle(&self, messages: Vec<jetstream::Message>) {
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
                    Err(reason) => self.dead_letter(&message, &reason).await,
                }
                continue;
            }
            match proto::ObservationStored::decode(message.payload.as_ref()) {
                Ok(stored) if !stored.session_id.is_empty() && stored.observation_id > 0 => {
                    let span = tracing::info_span!(
                        "compressor.notice",
                        subject = %message.subject,
                        event_id = %stored.event_id,
                        session_id = %stored.session_id,
                    );
                    common::nats::continue_trace(&span, message.headers.as_ref());
                    let entry = sessions
                        .entry(stored.session_id.clone())
                        .or_insert_with(|| (0, span.clone()));
                    // What the session's walk writes is announced under the trace of the
                    // latest notice it covers.
                    if stored.observation_id > entry.0 {
                        *entry = (stored.observation_id, span.clone());
                    }
                    good.push(message);
                    notices.push(span);
                }
                Ok(_) => {
                    self.dead_letter(&message, "notice has no session or observation id")
                        .await
                }
                Err(error) => {
                    self.dead_letter(&message, &format!("not an ObservationStored: {error}"))
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
        match self.compressor.process(&work, &deleted).await {
            Ok(written) => {
                let spans: BTreeMap<String, tracing::Span> = sessions
                    .into_iter()
                    .map(|(session, (_, span))| (session, span))
                    .collect();
                if self
                    .announce(&written, |w| spans.get(&w.session_id).cloned())
                    .await
                {
                    for message in &good {
                        if let Err(error) = message.ack().await {
                            tracing::warn!(%error, "ack failed; the notice will be redelivered and change nothing");
                        }
                        self.counters.handled();
                    }
                    self.refine(written, &spans);
                } else {
                    nak(&good).await;
                }
            }
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), "compressing failed; will retry");
                for message in good {
                    let delivered = message.info().map(|i| i.delivered).unwrap_or(1);
                    if delivered >= MAX_DELIVER {
                        self.dead_letter(
                            &message,
                            &format!("compressing failed {delivered} times: {error:#}"),
                        )
                        .await;
                    } else {
                        let _ = message
                            .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                            .await;
                    }
                }
            }
        }
    }

    /// Publish a notice for each written row; `false` when one was not acknowledged (the
    /// batch is then redelivered; the notices repeat with the same ids and are deduplicated).
    async fn announce(
        &self,
        written: &[Written],
        span_of: impl Fn(&Written) -> Option<tracing::Span>,
    ) -> bool {
        let mut acks = Vec::with_capacity(written.len());
        for w in written {
            let mut headers = async_nats::HeaderMap::new();
            let span = span_of(w).unwrap_or_else(tracing::Span::current);
            span.in_scope(|| common::nats::inject_trace(&mut headers));
            let id = format!("compressor-{}-{}-{}", w.kind, w.id, w.revision);
            headers.insert(async_nats::header::NATS_MESSAGE_ID, id.as_str());
            let notice = notice(w);
            match self
                .jetstream
                .publish_with_headers(
                    subjects::compressor_written_subject(w.kind),
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

    /// Let the LLM compressor rewrite new summaries and checkpoints in the background; the
    /// heuristic rows stay when it cannot.
    fn refine(&self, written: Vec<Written>, spans: &BTreeMap<String, tracing::Span>) {
        let Some(llm) = &self.llm else { return };
        for w in written
            .into_iter()
            .filter(|w| w.kind != "structured" && w.compressor == "heuristic")
        {
            let (llm, jetstream) = (llm.clone(), self.jetstream.clone());
            // The rewrite belongs to the trace of the notice (or the request) that made the row.
            let parent = spans
                .get(&w.session_id)
                .and_then(tracing::Span::id)
                .or_else(|| tracing::Span::current().id());
            let span = tracing::info_span!(
                parent: parent,
                "compressor.llm",
                kind = w.kind,
                id = w.id,
                session_id = %w.session_id,
            );
            self.refining.spawn(
                async move {
                    match llm.refine(&w).await {
                        Ok(Some(better)) => {
                            let mut headers = async_nats::HeaderMap::new();
                            common::nats::inject_trace(&mut headers);
                            let id = format!("compressor-{}-{}-{}", better.kind, better.id, better.revision);
                            headers.insert(async_nats::header::NATS_MESSAGE_ID, id.as_str());
                            let published = jetstream
                                .publish_with_headers(
                                    subjects::compressor_written_subject(better.kind),
                                    headers,
                                    notice(&better).encode_to_vec().into(),
                                )
                                .await;
                            if let Err(error) = published {
                                tracing::warn!(%error, "announcing the llm rewrite failed");
                            }
                        }
                        Ok(None) => {}
                        Err(error) => {
                            tracing::warn!(error = %format!("{error:#}"), "llm rewrite failed; the heuristic result stands")
                        }
                    }
                }
                .instrument(span),
            );
        }
    }

    async fn answer(&self, request: async_nats::Message) {
        let Some(reply_to) = request.reply.clone() else {
            return;
        };
        let body = if request.subject.as_str() == subjects::COMPRESSOR_CHECKPOINT {
            self.answer_checkpoint(&request.payload)
                .await
                .encode_to_vec()
        } else {
            self.answer_compress(&request.payload).await.encode_to_vec()
        };
        if let Err(error) = self.client.publish(reply_to, body.into()).await {
            tracing::warn!(%error, "reply failed");
        }
        self.counters.handled();
    }

    async fn answer_compress(&self, payload: &[u8]) -> proto::CompressReply {
        let request = match proto::CompressRequest::decode(payload) {
            Ok(r) if !r.session_id.is_empty() => r,
            Ok(_) => return compress_error("session id is required".to_owned()),
            Err(e) => return compress_error(format!("request is not a compress request: {e}")),
        };
        match self.compressor.compress(&request.session_id).await {
            Ok((Some(id), written)) => {
                self.announce(&written, |_| None).await;
                let structured = written.iter().filter(|w| w.kind == "structured").count();
                self.refine(written, &BTreeMap::new());
                proto::CompressReply {
                    summary_id: id,
                    structured: structured as u32,
                    error: String::new(),
                }
            }
            Ok((None, _)) => compress_error(format!("no session {}", request.session_id)),
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), "compress request failed");
                compress_error("compressing failed".to_owned())
            }
        }
    }

    async fn answer_checkpoint(&self, payload: &[u8]) -> proto::CheckpointReply {
        let fail = |error: String| proto::CheckpointReply {
            error,
            ..Default::default()
        };
        let request = match proto::CheckpointRequest::decode(payload) {
            Ok(r) if !r.session_id.is_empty() => r,
            Ok(_) => return fail("session id is required".to_owned()),
            Err(e) => return fail(format!("request is not a checkpoint request: {e}")),
        };
        match self.compressor.checkpoint(&request.session_id).await {
            Ok((Some(row), written)) => {
                self.announce(&written, |_| None).await;
                self.refine(written, &BTreeMap::new());
                proto::CheckpointReply {
                    checkpoint_id: row.id,
                    text: row.text,
                    tokens_before: row.tokens_before,
                    tokens_after: row.tokens_after,
                    error: String::new(),
                }
            }
            Ok((None, _)) => fail(format!("no session {}", request.session_id)),
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), "checkpoint request failed");
                fail("checkpoint failed".to_owned())
            }
        }
    }

    /// Publish a notice the compressor cannot use to its dead-letter subject, then ack it.
    async fn dead_letter(&self, message: &jetstream::Message, reason: &str) {
        common::streams::dead_letter(&self.jetstream, SERVICE, message, reason).await;
    }
}

fn compress_error(error: String) -> proto::CompressReply {
    proto::CompressReply {
        error,
        ..Default::default()
    }
}

/// The notice announcing a written row.
pub fn notice(w: &Written) -> proto::MemoryWritten {
    proto::MemoryWritten {
        id: w.id,
        kind: w.kind.to_owned(),
        session_id: w.session_id.clone(),
        project: w.project.clone(),
        revision: w.revision,
        trigger: w.trigger.clone(),
        occurred_at_ms: w.occurred_at,
        compressor: w.compressor.clone(),
    }
}

async fn nak(messages: &[jetstream::Message]) {
    for message in messages {
        let _ = message
            .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
            .await;
    }
}
