//! The compressor's loops: ingest's notices in batches (walk, commit, announce, ack), read by
//! [`common::notices::Reader`], and the compress and checkpoint requests, answered from a
//! [`common::requests::Requests`] table.

use crate::{Compressor, SERVICE, Written, llm::Llm};
use async_nats::jetstream;
use common::notices::{Handled, Handler, Reader};
use common::requests::{Requests, Turns};
use common::service::Service;
use observation::{Notice, Walks};
use proto::{Message as _, subjects};
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
    jetstream: jetstream::Context,
    compressor: Compressor,
    llm: Option<Arc<Llm>>,
    refining: TaskTracker,
}

pub async fn run(
    service: &mut Service,
    compressor: Compressor,
    llm: Option<Llm>,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let reader = Reader::open(
        &service.jetstream,
        SERVICE,
        common::streams::Durable {
            stream: subjects::INGEST_STREAM,
            name: subjects::COMPRESSOR_CONSUMER,
            description: "compressor: structure and summarise observations",
            filter_subjects: &[subjects::OBSERVATION_STORED, subjects::SESSIONS_DELETED],
            ack_wait: ACK_WAIT,
            batch: BATCH,
        },
    )
    .await?
    .dead_letter_after(MAX_DELIVER)
    .counting(service.counters.clone());
    service.counters.set_detail(if llm.is_some() {
        "heuristic + llm"
    } else {
        "heuristic"
    });
    let worker = Arc::new(Worker {
        jetstream: service.jetstream.clone(),
        compressor,
        llm: llm.map(Arc::new),
        refining: TaskTracker::new(),
    });
    let requests = Requests::new(
        worker.clone(),
        |request| tracing::info_span!("compressor.request", subject = %request.subject),
    )
    .counting(service.counters.clone())
    .on(
        subjects::COMPRESSOR_COMPRESS,
        |error| compress_error(format!("request is not a compress request: {error}")),
        |worker: Arc<Worker>, request: proto::CompressRequest| async move {
            worker.answer_compress(request).await
        },
    )
    .on(
        subjects::COMPRESSOR_CHECKPOINT,
        |error| checkpoint_error(format!("request is not a checkpoint request: {error}")),
        |worker: Arc<Worker>, request: proto::CheckpointRequest| async move {
            worker.answer_checkpoint(request).await
        },
    )
    .on(
        subjects::COMPRESSOR_REWRITE,
        |error| rewrite_error(format!("request is not a rewrite request: {error}")),
        |worker: Arc<Worker>, request: proto::RewriteRequest| async move {
            worker.answer_rewrite(request).await
        },
    )
    .listen(&service.client, subjects::COMPRESSOR_QUEUE)
    .await?;
    service.answer_health(shutdown);
    tracing::info!(
        consumer = subjects::COMPRESSOR_CONSUMER,
        "compressor running"
    );
    // The notices and the requests stop together: on shutdown, or when the consumer ends.
    let stop = shutdown.child_token();
    tokio::join!(
        async {
            reader.run(&*worker, &stop).await;
            stop.cancel();
        },
        requests.serve(&stop, Turns::Concurrent),
    );
    worker.refining.close();
    worker.refining.wait().await;
    tracing::info!("compressor stopped");
    Ok(())
}

impl Handler for Worker {
    type Notice = Notice;

    const WORK: &'static str = "compressing";

    fn decode(&self, message: &jetstream::Message) -> Result<Notice, String> {
        observation::notices::read(message, |stored| {
            tracing::info_span!(
                "compressor.notice",
                subject = %message.subject,
                event_id = %stored.event_id,
                session_id = %stored.session_id,
            )
        })
    }

    async fn handle(&self, notices: &[Notice]) -> anyhow::Result<Handled> {
        let walks = Walks::of(notices);
        let written = self
            .compressor
            .process(&walks.upto(), &walks.deleted)
            .await?;
        if !self
            .announce(&written, |w| walks.span(&w.session_id).cloned())
            .await
        {
            return Ok(Handled::Redeliver);
        }
        self.refine(written, Some(&walks));
        Ok(Handled::Ack)
    }
}

impl Worker {
    /// Publish a notice for each written row; `false` when one was not acknowledged (the
    /// batch is then redelivered; the notices repeat with the same ids and are deduplicated).
    async fn announce(
        &self,
        written: &[Written],
        span_of: impl Fn(&Written) -> Option<tracing::Span>,
    ) -> bool {
        let announcements = written
            .iter()
            .map(|w| common::streams::Announcement {
                subject: subjects::compressor_written_subject(w.kind),
                id: format!("compressor-{}-{}-{}", w.kind, w.id, w.revision),
                span: Some(span_of(w).unwrap_or_else(tracing::Span::current)),
                payload: notice(w).encode_to_vec().into(),
            })
            .collect();
        common::streams::announce(&self.jetstream, announcements).await
    }

    /// Let the LLM compressor rewrite new summaries and checkpoints in the background; the
    /// heuristic rows stay when it cannot.
    fn refine(&self, written: Vec<Written>, walks: Option<&Walks>) {
        let Some(llm) = &self.llm else { return };
        for w in written
            .into_iter()
            .filter(|w| w.kind != "structured" && w.compressor == "heuristic")
        {
            let (llm, jetstream) = (llm.clone(), self.jetstream.clone());
            // The rewrite belongs to the trace of the notice (or the request) that made the row.
            let parent = walks
                .and_then(|walks| walks.span(&w.session_id))
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

    async fn answer_compress(&self, request: proto::CompressRequest) -> proto::CompressReply {
        if request.session_id.is_empty() {
            return compress_error("session id is required".to_owned());
        }
        match self.compressor.compress(&request.session_id).await {
            Ok((Some(id), written)) => {
                self.announce(&written, |_| None).await;
                let structured = written.iter().filter(|w| w.kind == "structured").count();
                self.refine(written, None);
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

    /// Other wordings of a search query from the LLM, or why there are none.
    async fn answer_rewrite(&self, request: proto::RewriteRequest) -> proto::RewriteReply {
        let Some(llm) = &self.llm else {
            return rewrite_error(
                "query rewriting needs an llm endpoint (MNEME_COMPRESS_LLM_URL)".to_owned(),
            );
        };
        if request.query.trim().is_empty() {
            return rewrite_error("query is required".to_owned());
        }
        match llm.rewrite_query(&request.query, &request.project).await {
            Ok(queries) => proto::RewriteReply {
                queries,
                error: String::new(),
            },
            Err(error) => {
                tracing::info!(%error, "no rewrite of the query");
                rewrite_error(error.to_string())
            }
        }
    }

    async fn answer_checkpoint(&self, request: proto::CheckpointRequest) -> proto::CheckpointReply {
        if request.session_id.is_empty() {
            return checkpoint_error("session id is required".to_owned());
        }
        match self.compressor.checkpoint(&request.session_id).await {
            Ok((Some(row), written)) => {
                self.announce(&written, |_| None).await;
                self.refine(written, None);
                proto::CheckpointReply {
                    checkpoint_id: row.id,
                    text: row.text,
                    tokens_before: row.tokens_before,
                    tokens_after: row.tokens_after,
                    error: String::new(),
                }
            }
            Ok((None, _)) => checkpoint_error(format!("no session {}", request.session_id)),
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), "checkpoint request failed");
                checkpoint_error("checkpoint failed".to_owned())
            }
        }
    }
}

fn rewrite_error(error: String) -> proto::RewriteReply {
    proto::RewriteReply {
        error,
        ..Default::default()
    }
}

fn compress_error(error: String) -> proto::CompressReply {
    proto::CompressReply {
        error,
        ..Default::default()
    }
}

fn checkpoint_error(error: String) -> proto::CheckpointReply {
    proto::CheckpointReply {
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
