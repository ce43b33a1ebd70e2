//! The pattern service: what recurs across sessions.
//!
//! Consumes `mneme.ingest.stored` (durable consumer `pattern` on stream `MNEME_INGEST`) and, per
//! session, walks the observations it has not read yet:
//! - error: the same failure (normalised signature: tool, command, error class, file) seen at
//!   least twice, in one session or across sessions and checkouts;
//! - fix: a failure followed by a success on the same command or file, linking both;
//! - procedure: the steps between such a failure and its fix;
//! - decision, preference, architecture: statements in prompts ("let's use", "we decided",
//!   "prefer X over Y", "always/never", 我们决定, 总是 …);
//! - reflection: at session end, what kept failing and was never fixed, with the request it
//!   happened under;
//! - workflow: what a turn did that changed something (commands and edits, reads and failed
//!   tries left out), counted as a success or a failure of the same workflow each time it runs
//!   again ([`workflow`]), and runs reported on purpose (`record_workflow`).
//!
//! Each pattern has a stable hash, occurrence counts, first and last session, related files and
//! observations; every change is announced on `mneme.pattern.updated` (stream `MNEME_PATTERN`).
//!
//! Writes: `patterns`, `pattern_occurrences`, `pattern_failures`, `pattern_sessions`. Reads
//! ingest's `observations`. A workflow's runs are its occurrences with the role `success` or
//! `failure`; its signature keeps the steps of the last run that worked and the last failure.
//!
//! Invariants: a notice is acked only after its patterns are committed; a session's cursor
//! and the occurrence keys make a redelivered notice change nothing.

pub mod db;
pub mod detect;
pub mod walk;
mod worker;
pub mod workflow;

use anyhow::Context as _;
use common::CommonArgs;
use common::service::Service;
use tokio_util::sync::CancellationToken;

pub use db::{Updated, Updates};

/// Configuration of the pattern binary.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "mneme-pattern", version, about = "mneme pattern service")]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub pattern: PatternArgs,
}

/// The settings specific to the pattern service, also flattened into `mneme up`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PatternArgs {
    /// Turn pattern detection off (the service still answers health probes).
    #[arg(long, env = "MNEME_PATTERN_DISABLED", default_value_t = false)]
    pub pattern_disabled: bool,
}

/// The service name, used in subjects and logs.
pub const SERVICE: &str = "pattern";

/// The detector's work on the store: one transaction per batch.
#[derive(Clone)]
pub struct Detector {
    pool: sqlx::SqlitePool,
}

impl Detector {
    pub fn new(pool: sqlx::SqlitePool) -> Detector {
        Detector { pool }
    }

    /// Walk each session up to the observation id given with it, then drop what was learnt
    /// from the `deleted` sessions; one transaction. A deleted session's observations are gone,
    /// so its walk finds nothing whatever the order of the notices.
    pub async fn process(
        &self,
        sessions: &[(String, i64)],
        deleted: &[String],
    ) -> anyhow::Result<Vec<Updated>> {
        let mut tx = store::begin_write(&self.pool).await?;
        let mut updates = Updates::default();
        let now = common::time::now_ms();
        for (session, upto) in sessions {
            walk::walk_session(&mut tx, session, *upto, now, &mut updates)
                .await
                .with_context(|| format!("detecting patterns in session {session}"))?;
        }
        if !deleted.is_empty() {
            let rows = db::forget_sessions(&mut tx, deleted, now, &mut updates)
                .await
                .context("forgetting deleted sessions")?;
            tracing::info!(sessions = deleted.len(), rows, "forgot deleted sessions");
        }
        tx.commit().await.context("committing")?;
        Ok(updates.0)
    }
}

/// Run the pattern service until `shutdown` is cancelled; the batch in hand is finished first.
pub async fn run(
    common: CommonArgs,
    args: PatternArgs,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let mut service = Service::start(&common, SERVICE).await?;
    let detector = Detector::new(service.store.pool().clone());
    let result = worker::run(&mut service, detector, args, &shutdown).await;
    service.stop().await;
    result
}
