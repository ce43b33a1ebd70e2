//! The ingest service: the first stage of the write path.
//!
//! Consumes hook events from `mneme.events.>` (durable pull consumer `ingest` on stream
//! `MNEME_EVENTS`). For each event it sanitises (system tags, secrets, private blocks, excluded
//! paths, truncation), deduplicates (by event id, and by content hash within a short window for
//! hosts that fire the same hook twice), upserts the session, stores the observation and any
//! compaction, then emits `mneme.ingest.stored` and acks. Malformed messages are dead-lettered
//! on `mneme.dlq.ingest` with the reason, recorded in `dead_letters`, and acked.
//!
//! It also answers `mneme.sessions.archive`, `.delete` and `.import` ([`sessions`], [`import`]),
//! and applies and answers the retention policy ([`retention`]), because it owns the tables
//! they change.
//!
//! Writes: `sessions`, `observations`, `observations_fts`, `compactions`, `dead_letters`,
//! `retention`.
//!
//! Invariants: a message is acked only after its effects are committed, so a crash redelivers
//! it; handling is idempotent, so a redelivery changes nothing but re-emits the notification.

mod db;
pub mod import;
mod record;
pub mod retention;
pub mod sessions;
mod team;
mod worker;

pub use record::{Observation, build_observation};

use anyhow::Context as _;
use common::CommonArgs;
use common::service::Service;
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// Configuration of the ingest service.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "mneme-ingest", version, about = "mneme ingest service")]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub ingest: IngestArgs,
}

/// The settings specific to ingest, also flattened into `mneme up`.
#[derive(Debug, Clone, clap::Args)]
pub struct IngestArgs {
    /// Comma-separated globs of file paths whose content is never stored.
    #[arg(long, env = "MNEME_EXCLUDE_GLOBS", value_delimiter = ',')]
    pub exclude_globs: Option<Vec<String>>,

    /// Comma-separated working directories whose sessions are not recorded at all.
    #[arg(long, env = "MNEME_EXCLUDE_DIRS", value_delimiter = ',')]
    pub exclude_dirs: Vec<PathBuf>,

    /// Tool outputs longer than this many characters keep only a head and a tail preview.
    #[arg(long, env = "MNEME_MAX_OUTPUT_CHARS", default_value_t = 100_000)]
    pub max_output_chars: usize,

    /// Largest number of messages handled in one transaction.
    #[arg(long, env = "MNEME_INGEST_BATCH", default_value_t = 256)]
    pub batch: usize,

    /// Two events of one session with the same content within this window are one event.
    #[arg(long, env = "MNEME_DEDUP_WINDOW_MS", default_value_t = 5_000)]
    pub dedup_window_ms: i64,

    /// A message that failed this many deliveries is dead-lettered instead of retried.
    #[arg(long, env = "MNEME_MAX_DELIVER", default_value_t = 5)]
    pub max_deliver: i64,

    /// Seconds between two runs of the retention policy (it also runs at start and whenever
    /// it is set).
    #[arg(long, env = "MNEME_RETENTION_INTERVAL_SECS", default_value_t = 3_600)]
    pub retention_interval_secs: u64,
}

impl Default for IngestArgs {
    fn default() -> Self {
        IngestArgs {
            exclude_globs: None,
            exclude_dirs: Vec::new(),
            max_output_chars: 100_000,
            batch: 256,
            dedup_window_ms: 5_000,
            max_deliver: 5,
            retention_interval_secs: 3_600,
        }
    }
}

/// The service name, used in subjects and logs.
pub const SERVICE: &str = "ingest";

/// Run ingest until `shutdown` is cancelled; in-flight messages are finished and acked first.
pub async fn run(
    common: CommonArgs,
    args: IngestArgs,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut config = sanitize::Config::default();
    if let Some(globs) = &args.exclude_globs {
        config.exclude_globs = globs.iter().filter(|g| !g.is_empty()).cloned().collect();
    }
    config.max_output_chars = args.max_output_chars;
    let sanitizer =
        std::sync::Arc::new(sanitize::Sanitizer::new(&config).context("invalid exclude globs")?);
    let sharing = std::sync::Arc::new(team::Sharing::new(common.home_dir()));

    let mut service = Service::start(&common, SERVICE).await?;
    // The worker ends on shutdown or on an error; the session requests end with it.
    let sessions_stop = shutdown.child_token();
    let sessions = tokio::spawn(sessions::serve(
        service.client.clone(),
        service.store.pool().clone(),
        sharing.clone(),
        sessions_stop.clone(),
    ));
    let retention = tokio::spawn(retention::serve(
        service.client.clone(),
        service.store.pool().clone(),
        sharing.clone(),
        std::time::Duration::from_secs(args.retention_interval_secs),
        sessions_stop.clone(),
    ));
    let team = tokio::spawn(team_loop(
        worker::Worker::new(
            &service,
            sanitizer.clone(),
            args.clone(),
            sharing.clone(),
            worker::Origin::Team,
        ),
        sharing.clone(),
        service.jetstream.clone(),
        sessions_stop.clone(),
    ));
    let worker = worker::Worker::new(&service, sanitizer, args, sharing, worker::Origin::Local);
    let result = match worker.consume().await {
        Ok(batches) => {
            service.answer_health(&shutdown);
            worker.run(batches, shutdown).await;
            Ok(())
        }
        Err(error) => Err(error),
    };
    sessions_stop.cancel();
    match sessions.await {
        Ok(Err(error)) => tracing::warn!(error = %format!("{error:#}"), "session requests failed"),
        Err(error) => tracing::warn!(%error, "session requests task failed"),
        Ok(Ok(())) => {}
    }
    if let Err(error) = team.await {
        tracing::warn!(%error, "team task failed");
    }
    match retention.await {
        Ok(Err(error)) => tracing::warn!(error = %format!("{error:#}"), "retention failed"),
        Err(error) => tracing::warn!(%error, "retention task failed"),
        Ok(Ok(())) => {}
    }
    service.stop().await;
    result
}

/// How often ingest looks whether this machine joined a team and its incoming stream exists.
const TEAM_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Once this machine is in a team: make the stream of what it shares, wait for the stream of
/// what the team shares (`mneme up` makes it, with its sources on the hub), then store what
/// arrives there until `shutdown`.
async fn team_loop(
    worker: worker::Worker,
    sharing: std::sync::Arc<team::Sharing>,
    jetstream: async_nats::jetstream::Context,
    shutdown: CancellationToken,
) {
    let batches = loop {
        if sharing.current().is_some() {
            match team::ensure_out_stream(&jetstream).await {
                Ok(()) => {
                    if jetstream
                        .get_stream(proto::subjects::TEAM_IN_STREAM)
                        .await
                        .is_ok()
                    {
                        match worker.consume().await {
                            Ok(batches) => break batches,
                            Err(error) => {
                                tracing::warn!(error = %format!("{error:#}"), "cannot read what the team shares yet")
                            }
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(error = %format!("{error:#}"), "cannot make the team's outgoing stream yet")
                }
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(TEAM_POLL) => {}
        }
    };
    worker.run(batches, shutdown).await;
}
