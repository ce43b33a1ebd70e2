//! The retrieval service: the read side.
//!
//! Answers `mneme.retrieval.search` ([`proto::SearchRequest`] → [`proto::SearchReply`]) and
//! `mneme.retrieval.context` ([`proto::ContextRequest`] → [`proto::ContextReply`]) over NATS
//! request/reply, in the `retrieval` queue group so instances share the load.
//!
//! This first version searches with FTS5 (BM25) only and assembles context from recent sessions
//! of the project; embeddings and hybrid search come next.
//!
//! Invariant: retrieval reads the store and never writes a table.

pub mod context;
pub mod search;

use anyhow::Context as _;
use common::CommonArgs;
use common::health::Counters;
use futures::StreamExt as _;
use proto::{Message as _, subjects};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;

/// Configuration of the retrieval service.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "mneme-retrieval", version, about = "mneme retrieval service")]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The service name, used in subjects and logs.
pub const SERVICE: &str = "retrieval";

/// Run retrieval until `shutdown` is cancelled; requests in progress are answered first.
pub async fn run(common: CommonArgs, shutdown: CancellationToken) -> anyhow::Result<()> {
    let db_path = common.db_path();
    // Opening migrates the schema when retrieval happens to start before ingest; it writes no
    // table of its own.
    let store = store::Store::open(&db_path)
        .await
        .with_context(|| format!("opening store {}", db_path.display()))?;
    let client =
        common::nats::connect(&common, SERVICE, std::time::Duration::from_secs(30)).await?;
    let counters = Arc::new(Counters::default());
    let mut search = client
        .queue_subscribe(
            subjects::RETRIEVAL_SEARCH,
            subjects::RETRIEVAL_QUEUE.to_owned(),
        )
        .await?;
    let mut context = client
        .queue_subscribe(
            subjects::RETRIEVAL_CONTEXT,
            subjects::RETRIEVAL_QUEUE.to_owned(),
        )
        .await?;
    let health = tokio::spawn(common::health::serve(
        client.clone(),
        SERVICE,
        counters.clone(),
        shutdown.clone(),
    ));
    let tracker = TaskTracker::new();
    tracing::info!("retrieval running");
    loop {
        let message = tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(message) = search.next() => message,
            Some(message) = context.next() => message,
            else => break,
        };
        let Some(reply_to) = message.reply.clone() else {
            continue;
        };
        let (client, store, counters) = (client.clone(), store.clone(), counters.clone());
        let span = tracing::info_span!("retrieval.request", subject = %message.subject);
        common::nats::continue_trace(&span, message.headers.as_ref());
        tracker.spawn(
            async move {
                let body = answer(&store, &message.subject, &message.payload).await;
                if let Err(error) = client.publish(reply_to, body.into()).await {
                    tracing::warn!(%error, "reply failed");
                }
                counters.handled();
            }
            .instrument(span),
        );
    }
    tracker.close();
    tracker.wait().await;
    health.abort();
    let _ = client.drain().await;
    store.close().await;
    tracing::info!("retrieval stopped");
    Ok(())
}

async fn answer(store: &store::Store, subject: &str, payload: &[u8]) -> Vec<u8> {
    if subject == subjects::RETRIEVAL_SEARCH {
        let reply = match proto::SearchRequest::decode(payload) {
            Ok(request) => match search::search(store.pool(), &request).await {
                Ok(hits) => proto::SearchReply {
                    hits,
                    error: String::new(),
                },
                Err(error) => {
                    tracing::warn!(error = %format!("{error:#}"), "search failed");
                    proto::SearchReply {
                        hits: Vec::new(),
                        error: "search failed".to_owned(),
                    }
                }
            },
            Err(error) => proto::SearchReply {
                hits: Vec::new(),
                error: format!("request is not a search request: {error}"),
            },
        };
        reply.encode_to_vec()
    } else {
        // A failed context request answers with empty context: the agent goes on without it.
        let reply = match proto::ContextRequest::decode(payload) {
            Ok(request) => context::assemble(store.pool(), &request)
                .await
                .unwrap_or_else(|error| {
                    tracing::warn!(error = %format!("{error:#}"), "context failed");
                    proto::ContextReply::default()
                }),
            Err(_) => proto::ContextReply::default(),
        };
        reply.encode_to_vec()
    }
}
