//! The retrieval service: indexes memory and answers every question about it.
//!
//! - Indexing ([`worker`]): consumes `mneme.ingest.stored` and `mneme.ingest.deleted` (durable
//!   consumer `retrieval`) and turns observations into memory items with a kind ([`index`]),
//!   and what the compressor and the pattern service write likewise ([`derived`]); embeds them
//!   in the background with the configured model ([`models`]) into the configured vector index
//!   ([`backfill`], [`vector`]).
//! - Answers ([`answer`]), over NATS request/reply in the `retrieval` queue group: hybrid
//!   search ([`search`]), timeline and get ([`items`]), context for injection ([`context`]),
//!   forgetting, import and collections ([`collections`]).
//!
//! Invariants: retrieval alone loads an embedding model; it writes only its own tables
//! (`memory_items`, `memory_fts`, `embedding_cache`, `vector_spaces`, the vector tables); with
//! no model it keeps working on full-text search and says so in its health detail.

mod answer;
pub mod backfill;
pub mod capabilities;
pub mod collections;
mod config;
pub mod context;
pub mod derived;
pub mod index;
pub mod items;
pub mod lexical;
pub mod models;
pub mod search;
pub mod static_model;
pub mod text;
pub mod vector;
pub mod when;
mod worker;

pub use config::{Args, RetrievalArgs, open_vectors};

use anyhow::Context as _;
use common::CommonArgs;
use common::requests::Turns;
use common::service::Service;
use proto::subjects;
use search::Searcher;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;
use worker::Feed;

/// The service name, used in subjects and logs.
pub const SERVICE: &str = "retrieval";

/// Run retrieval until `shutdown` is cancelled; requests in progress are answered first.
pub async fn run(
    common: CommonArgs,
    args: RetrievalArgs,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut service = Service::start(&common, SERVICE).await?;
    let result = serve(&mut service, &common, &args, &shutdown).await;
    service.stop().await;
    tracing::info!("retrieval stopped");
    result
}

async fn serve(
    service: &mut Service,
    common: &CommonArgs,
    args: &RetrievalArgs,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let pool = service.store.pool().clone();
    let counters = service.counters.clone();
    let vectors = match open_vectors(common, args, &pool).await {
        Ok(vectors) => {
            tracing::info!(
                model = vectors.space.model,
                index = vectors.index.name(),
                "hybrid search ready"
            );
            Some(vectors)
        }
        Err(reason) => {
            // Said once, here and in the health detail; search goes on with full-text only.
            tracing::warn!(%reason, "running full-text only");
            counters.set_detail(format!("full-text only: {reason}"));
            None
        }
    };
    let lexical = Arc::new(lexical::Lexical::new());
    let searcher = Searcher {
        pool: pool.clone(),
        vectors: vectors.clone(),
        lexical: lexical.clone(),
        tuning: search::Tuning::default(),
    };
    let context = context::ContextConfig {
        budget_tokens: args.context_tokens,
        min_relevance: args.context_min_relevance,
        ..context::ContextConfig::default()
    };

    let caught_up = index::catch_up(&pool, &lexical).await?;
    if caught_up > 0 {
        tracing::info!(
            items = caught_up,
            "indexed observations stored while retrieval was away"
        );
    }
    // The background work stops with the service, or as soon as starting it fails.
    let stop = shutdown.child_token();
    let _stop_on_error = stop.clone().drop_guard();
    let tasks = TaskTracker::new();
    if args.lexical_memory {
        tasks.spawn(worker::load_lexical(pool.clone(), lexical.clone()));
    }
    if let Some(vectors) = &vectors {
        tasks.spawn(vectors.clone().run(pool.clone(), stop.clone()));
        tasks.spawn(vectors.clone().run_ahead(pool.clone(), stop.clone()));
        tasks.spawn(worker::report_progress(
            vectors.clone(),
            pool.clone(),
            counters.clone(),
            stop.clone(),
        ));
    }
    let indexer = worker::Indexer {
        pool,
        lexical,
        vectors,
    };
    for feed in [Feed::Observations, Feed::Compressor, Feed::Patterns] {
        tasks.spawn(
            worker::index_feed(
                feed,
                service.jetstream.clone(),
                indexer.clone(),
                stop.clone(),
            )
            .instrument(tracing::info_span!(
                "retrieval.indexer",
                feed = feed.stream()
            )),
        );
    }

    let capabilities = capabilities::Registry::load(&searcher.pool, searcher.vectors.as_deref())
        .await
        .context("loading the capability registry")?;
    capabilities.warm(searcher.vectors.as_deref()).await;
    let requests = answer::requests(
        answer::Answers {
            client: service.client.clone(),
            searcher,
            context,
            capabilities,
        },
        counters,
    )
    .listen(&service.client, subjects::RETRIEVAL_QUEUE)
    .await?;
    service.answer_health(shutdown);
    tracing::info!("retrieval running");
    requests.serve(shutdown, Turns::Concurrent).await;
    tasks.close();
    tasks.wait().await;
    Ok(())
}
