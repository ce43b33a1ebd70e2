//! The compressor service: turns raw observations into memory worth keeping.
//!
//! Consumes `mneme.ingest.stored` (durable consumer `compressor` on stream `MNEME_INGEST`) and,
//! per session, walks the observations it has not read yet:
//! - tool calls become structured observations (category, type, title, narrative, facts,
//!   concepts, files read and modified, links to the raw rows); a run of edits to one file is
//!   one row that grows;
//! - a compaction (PreCompact, completed by PostCompact) makes a checkpoint;
//! - session end, or enough raw text since the last summary, (re)writes the session summary.
//!
//! It also answers `mneme.compressor.compress`, `mneme.compressor.checkpoint` and, with an
//! LLM, `mneme.compressor.rewrite` (other wordings of a search query) over request/reply, and
//! announces every row it writes on `mneme.compressor.written.<kind>`
//! (stream `MNEME_COMPRESSOR`), forwarding the trace context.
//!
//! The heuristic compressor ([`heuristic`]) is the default and needs no model; the optional
//! LLM compressor ([`llm`]) rewrites summaries and checkpoints afterwards, within hard token
//! budgets, and leaves the heuristic rows in place whenever it cannot do better.
//!
//! Writes: `structured_observations`, `session_summaries`, `checkpoints`,
//! `compressor_sessions`, `compressor_llm_usage`. Reads ingest's `observations` and
//! `compactions`.
//!
//! Invariants: a notice is acked only after what it caused is committed; a session's cursor
//! makes a redelivered notice change nothing.

pub mod db;
pub mod heuristic;
pub mod llm;
pub mod walk;
mod worker;

use anyhow::Context as _;
use common::CommonArgs;
use common::service::Service;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub use db::CheckpointRow;
pub use walk::{Walk, Writes, Written};

/// Configuration of the compressor binary.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "mneme-compressor", version, about = "mneme compressor service")]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub compressor: CompressorArgs,
}

/// The settings specific to the compressor, also flattened into `mneme up`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompressorArgs {
    /// Estimated tokens of raw observations after which a running session's summary is
    /// (re)written.
    #[arg(
        long,
        env = "MNEME_COMPRESS_THRESHOLD_TOKENS",
        default_value_t = 30_000
    )]
    pub compress_threshold_tokens: i64,

    /// Base URL of an OpenAI-compatible API for the optional LLM compressor, for example
    /// `http://127.0.0.1:11434/v1` (Ollama); unset, only the heuristic compressor runs.
    #[arg(long, env = "MNEME_COMPRESS_LLM_URL")]
    pub compress_llm_url: Option<String>,

    /// Model name sent to the LLM endpoint.
    #[arg(long, env = "MNEME_COMPRESS_LLM_MODEL", default_value = "qwen2.5:3b")]
    pub compress_llm_model: String,

    /// API key for the LLM endpoint, when it needs one.
    #[arg(long, env = "MNEME_COMPRESS_LLM_API_KEY", hide_env_values = true)]
    pub compress_llm_api_key: Option<String>,

    /// Tokens the LLM compressor may spend per UTC day, prompts and answers counted; never
    /// exceeded.
    #[arg(
        long,
        env = "MNEME_COMPRESS_LLM_DAILY_TOKENS",
        default_value_t = 200_000
    )]
    pub compress_llm_daily_tokens: i64,

    /// Tokens the LLM compressor may spend on one session; never exceeded.
    #[arg(
        long,
        env = "MNEME_COMPRESS_LLM_SESSION_TOKENS",
        default_value_t = 20_000
    )]
    pub compress_llm_session_tokens: i64,

    /// Longest wait for one LLM answer, in milliseconds, before the heuristic result stands.
    #[arg(long, env = "MNEME_COMPRESS_LLM_TIMEOUT_MS", default_value_t = 20_000)]
    pub compress_llm_timeout_ms: u64,

    /// Largest answer asked of the model, in tokens.
    #[arg(long, env = "MNEME_COMPRESS_LLM_MAX_TOKENS", default_value_t = 600)]
    pub compress_llm_max_tokens: i64,
}

impl Default for CompressorArgs {
    fn default() -> Self {
        CompressorArgs {
            compress_threshold_tokens: 30_000,
            compress_llm_url: None,
            compress_llm_model: "qwen2.5:3b".to_owned(),
            compress_llm_api_key: None,
            compress_llm_daily_tokens: 200_000,
            compress_llm_session_tokens: 20_000,
            compress_llm_timeout_ms: 20_000,
            compress_llm_max_tokens: 600,
        }
    }
}

impl CompressorArgs {
    /// The LLM settings, when an endpoint is configured.
    pub fn llm(&self) -> Option<llm::LlmConfig> {
        let url = self.compress_llm_url.as_deref()?.trim();
        (!url.is_empty()).then(|| llm::LlmConfig {
            url: url.to_owned(),
            model: self.compress_llm_model.clone(),
            api_key: self.compress_llm_api_key.clone(),
            daily_tokens: self.compress_llm_daily_tokens,
            session_tokens: self.compress_llm_session_tokens,
            timeout: Duration::from_millis(self.compress_llm_timeout_ms),
            max_tokens: self.compress_llm_max_tokens,
        })
    }
}

/// The service name, used in subjects and logs.
pub const SERVICE: &str = "compressor";

/// The compressor's work on the store: walks, summaries and checkpoints, one transaction each,
/// one at a time (notices and requests share it).
#[derive(Clone)]
pub struct Compressor {
    pool: sqlx::SqlitePool,
    threshold_tokens: i64,
    lock: std::sync::Arc<tokio::sync::Mutex<()>>,
}

impl Compressor {
    pub fn new(pool: sqlx::SqlitePool, threshold_tokens: i64) -> Compressor {
        Compressor {
            pool,
            threshold_tokens,
            lock: Default::default(),
        }
    }

    fn walk(&self) -> Walk {
        Walk {
            threshold_tokens: self.threshold_tokens.max(1),
            now: common::time::now_ms(),
        }
    }

    /// Walk each session up to the observation id given with it, then drop every row made from
    /// the `deleted` sessions; one transaction. Deleting last is safe whatever the order of the
    /// notices: a deleted session's observations are gone, so its walk writes nothing.
    pub async fn process(
        &self,
        sessions: &[(String, i64)],
        deleted: &[String],
    ) -> anyhow::Result<Vec<Written>> {
        let _turn = self.lock.lock().await;
        let mut tx = store::begin_write(&self.pool).await?;
        let mut writes = Writes::default();
        for (session, upto) in sessions {
            walk::walk_session(&mut tx, session, *upto, self.walk(), &mut writes)
                .await
                .with_context(|| format!("compressing session {session}"))?;
        }
        if !deleted.is_empty() {
            let rows = db::forget_sessions(&mut tx, deleted)
                .await
                .context("forgetting deleted sessions")?;
            tracing::info!(sessions = deleted.len(), rows, "forgot deleted sessions");
            writes.0.retain(|w| !deleted.contains(&w.session_id));
        }
        tx.commit().await.context("committing")?;
        Ok(writes.0)
    }

    /// Bring a session up to date and (re)write its summary now.
    pub async fn compress(&self, session: &str) -> anyhow::Result<(Option<i64>, Vec<Written>)> {
        let _turn = self.lock.lock().await;
        let mut tx = store::begin_write(&self.pool).await?;
        let mut writes = Writes::default();
        let id = walk::summary_now(&mut tx, session, self.walk(), &mut writes).await?;
        tx.commit().await.context("committing")?;
        Ok((id, writes.0))
    }

    /// Bring a session up to date and make a checkpoint of it now.
    pub async fn checkpoint(
        &self,
        session: &str,
    ) -> anyhow::Result<(Option<CheckpointRow>, Vec<Written>)> {
        let _turn = self.lock.lock().await;
        let mut tx = store::begin_write(&self.pool).await?;
        let mut writes = Writes::default();
        let row = walk::checkpoint_now(&mut tx, session, self.walk(), &mut writes).await?;
        tx.commit().await.context("committing")?;
        Ok((row, writes.0))
    }
}

/// Run the compressor until `shutdown` is cancelled; the batch in hand is finished first.
pub async fn run(
    common: CommonArgs,
    args: CompressorArgs,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut service = Service::start(&common, SERVICE).await?;
    let result = serve(&mut service, &args, &shutdown).await;
    service.stop().await;
    result
}

async fn serve(
    service: &mut Service,
    args: &CompressorArgs,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let pool = service.store.pool().clone();
    let compressor = Compressor::new(pool.clone(), args.compress_threshold_tokens);
    let llm = match args.llm() {
        Some(config) => Some(llm::Llm::new(config, pool)?),
        None => None,
    };
    worker::run(service, compressor, llm, shutdown).await
}
