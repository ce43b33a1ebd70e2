//! `mneme import <host>`: backfill past sessions from a host's own files through the same
//! pipeline as live events, and `mneme sessions`: list what is stored.
//!
//! Each session file is read by the host's `import.rs` (in the `hosts` crate) into the hook
//! payloads the host would have sent; each payload goes through the host's adapter (so it is
//! mapped and scrubbed exactly like a live event) and is published to JetStream for ingest to
//! sanitise and store. Event ids are derived from the file's own record ids and times, so a
//! second import publishes nothing new (ids already stored are skipped here, and ingest and
//! JetStream deduplicate on them anyway).
//!
//! A session that was also captured live is not doubled: live capture is complete from its
//! first event on (the hook spools when NATS is down), so only the part of the file before
//! the first live event is imported, and never a tool call whose id is already stored.

use anyhow::{Context as _, Result, bail};
use common::CommonArgs;
use hosts::import::{BadLine, Read, Session};
use proto::Message as _;
use std::collections::HashSet;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The host whose history to import: claude-code, codex, kimi, kiro or gemini; mneme, for a
    /// file written by `mneme export --jsonl` (given with `--path`, `-` for stdin); or
    /// claude-mem, for claude-mem's database (its default place, or `--path`).
    agent: String,
    /// A session file or a directory to search instead of the host's default location.
    #[arg(long)]
    path: Option<PathBuf>,
    /// Only events on or after this date (YYYY-MM-DD, or a number of days like 30d).
    #[arg(long)]
    since: Option<String>,
    /// Only sessions whose working directory is inside this project.
    #[arg(long)]
    project: Option<PathBuf>,
    /// Read and count, publish nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print a JSON summary instead of text.
    #[arg(long)]
    json: bool,
    /// Return once everything is published, without following the storing, indexing and
    /// embedding that make it searchable (`mneme status` shows how far they have got).
    #[arg(long)]
    no_wait: bool,
    #[command(flatten)]
    common: CommonArgs,
}

/// What an import did.
#[derive(Debug, Default, serde::Serialize)]
pub struct Summary {
    pub agent: String,
    pub dry_run: bool,
    pub files: usize,
    pub sessions: usize,
    pub records: usize,
    /// Events read from the files (after `--since` and `--project`).
    pub events: usize,
    /// Events published now.
    pub published: usize,
    /// Events whose id is already stored (an earlier import).
    pub already_stored: usize,
    /// Events of sessions also captured live, at or after the first live event.
    pub captured_live: usize,
    pub before_since: usize,
    /// Files whose last line was still being written; it is left for the next import.
    pub partial_files: usize,
    pub bad_lines: Vec<BadLine>,
    pub failed_files: Vec<String>,
    pub seconds: f64,
    pub records_per_second: f64,
    /// Seconds spent waiting for the services to catch up (see [`Publisher`]).
    pub waited_seconds: f64,
}

/// `--since`: a date (YYYY-MM-DD) or a number of days back (`30d`), as Unix milliseconds.
fn since_ms(since: &str) -> Result<i64> {
    if let Some(days) = since.strip_suffix('d').and_then(|d| d.parse::<i64>().ok()) {
        // Saturating, so an absurd count means "from the beginning" rather than an overflow.
        return Ok(common::time::now_ms().saturating_sub(days.saturating_mul(common::time::DAY_MS)));
    }
    common::time::parse_rfc3339_ms(&format!("{since}T00:00:00Z")).with_context(|| {
        format!("--since {since:?}: expected YYYY-MM-DD or a number of days like 30d")
    })
}

/// The event id of an imported item: the time of the session's first record (so ids of one
/// session share a prefix that does not change as the file grows) and a hash of the agent,
/// session and the item's key.
fn event_id(agent: &str, session: &str, key: &str, at_ms: i64) -> String {
    let hash = sanitize::content_hash(&[agent, session, key]);
    let nanos = (at_ms.max(0) as u64).saturating_mul(1_000_000);
    format!("{nanos:016x}{}", &hash[..16])
}

/// What the store already holds of one session.
#[derive(Default)]
struct Known {
    ids: HashSet<String>,
    tool_calls: HashSet<(String, String)>,
    first_live_ms: Option<i64>,
}

async fn known(store: Option<&store::Store>, session: &str) -> Known {
    let mut known = Known::default();
    let Some(store) = store else { return known };
    let stored = archive::session_events(store.pool(), session)
        .await
        .unwrap_or_default();
    for event in stored {
        known.ids.insert(event.event_id);
        if !event.tool_use_id.is_empty() {
            known.tool_calls.insert((event.kind, event.tool_use_id));
        }
        if event.imported_from.is_none() {
            let at = event.occurred_at_ms;
            known.first_live_ms = Some(known.first_live_ms.map_or(at, |f| f.min(at)));
        }
    }
    known
}

/// Live hooks fire a moment after the record is written; this much earlier still counts as
/// the same moment.
const LIVE_MARGIN_MS: i64 = 2_000;

pub async fn run(args: ImportArgs) -> Result<()> {
    // A whole archive or database comes in as it is: refuse the filters rather than ignore them.
    if matches!(args.agent.as_str(), "mneme" | "claude-mem") {
        for (given, flag) in [
            (args.since.is_some(), "--since"),
            (args.project.is_some(), "--project"),
            (args.dry_run, "--dry-run"),
        ] {
            if given {
                bail!(
                    "{flag} applies to a host's session files; `mneme import {}` brings in the whole file",
                    args.agent
                );
            }
        }
    }
    if args.agent == "mneme" {
        let path = args.path.as_deref().ok_or_else(|| {
            anyhow::anyhow!("give the export to import with --path FILE (- for standard input)")
        })?;
        crate::backup::import(&args.common, path).await?;
    } else if args.agent == "claude-mem" {
        crate::backup::import_claude_mem(&args.common, args.path.as_deref(), args.json).await?;
    } else {
        let summary = import(&args).await?;
        print_summary(&summary, args.json)?;
        if summary.published == 0 {
            return Ok(());
        }
    }
    if args.dry_run || args.no_wait {
        return Ok(());
    }
    let client = common::nats::connect(&args.common, "import", std::time::Duration::from_secs(5))
        .await
        .context("connecting to nats to follow the import")?;
    crate::progress::follow(&client).await
}

fn print_summary(summary: &Summary, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(summary)?);
        return Ok(());
    }
    println!(
        "{}{}: {} files, {} sessions, {} records, {} events; published {}, already stored {}, captured live {}, before --since {}",
        if summary.dry_run { "dry run, " } else { "" },
        summary.agent,
        summary.files,
        summary.sessions,
        summary.records,
        summary.events,
        summary.published,
        summary.already_stored,
        summary.captured_live,
        summary.before_since,
    );
    for bad in &summary.bad_lines {
        println!("skipped {}:{}: {}", bad.file, bad.line, bad.error);
    }
    for failed in &summary.failed_files {
        println!("could not read {failed}");
    }
    if summary.waited_seconds >= 1.0 {
        println!(
            "waited {:.0}s in all for the services to catch up, so that no event was dropped",
            summary.waited_seconds
        );
    }
    if summary.partial_files > 0 {
        println!(
            "{} files end in a line still being written; it is left for the next import",
            summary.partial_files
        );
    }
    Ok(())
}

/// Run an import and return its summary.
pub async fn import(args: &ImportArgs) -> Result<Summary> {
    let started = Instant::now();
    let host = hosts::named(&args.agent)?;
    let agent = host.name;
    let Some(reader) = host.import() else {
        bail!(
            "{agent}'s transcripts are not documented well enough to import yet; its live hooks capture everything from now on"
        );
    };
    let since = args.since.as_deref().map(since_ms).transpose()?;
    let project = args
        .project
        .as_deref()
        .map(std::path::absolute)
        .transpose()?;
    let mut summary = Summary {
        agent: agent.to_owned(),
        dry_run: args.dry_run,
        ..Default::default()
    };
    let mut header = Read::default();
    let sources = (reader.sources)(args.path.as_deref(), &mut header)?;
    summary.bad_lines.extend(header.bad_lines);
    summary.files = sources.len();

    let sanitizer = sanitize::Sanitizer::new(&sanitize::Config::default())?;
    let db = args.common.db_path();
    let store = if db.exists() {
        store::Store::open_read_only(&db).await.ok()
    } else {
        None
    };
    let jetstream = if args.dry_run {
        None
    } else {
        let client =
            common::nats::connect(&args.common, "import", std::time::Duration::from_secs(5))
                .await
                .context("connecting to nats (is `mneme up` running?)")?;
        Some(async_nats::jetstream::new(client))
    };
    // Files read, records and events published, drawn on a terminal only (indicatif draws
    // nothing when standard error is not one); the summary line follows either way.
    let bar = if std::io::stderr().is_terminal() && !args.json {
        indicatif::ProgressBar::new(sources.len() as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{prefix:>11} [{bar:30}] {pos}/{len} files, {msg}")
            .expect("a valid template")
            .progress_chars("#>-"),
    );
    bar.set_prefix(if args.dry_run {
        "reading"
    } else {
        "publishing"
    });
    let mut publisher = jetstream.as_ref().map(|jetstream| Publisher {
        jetstream,
        bar: &bar,
        since_look: 0,
        waited: 0.0,
    });

    for source in &sources {
        let mut read = Read::default();
        if let Err(error) = (reader.read)(source, &mut read) {
            summary
                .failed_files
                .push(format!("{}: {error:#}", source.path.display()));
        }
        summary.bad_lines.extend(read.bad_lines);
        summary.partial_files += usize::from(read.partial);
        for session in read.sessions {
            if let Some(project) = &project
                && !Path::new(&session.cwd).starts_with(project)
            {
                continue;
            }
            summary.sessions += 1;
            summary.records += session.records;
            let events = prepare(
                agent,
                host,
                &session,
                since,
                &sanitizer,
                &mut summary,
                store.as_ref(),
                &source.path,
            )
            .await;
            if let Some(publisher) = &mut publisher {
                publisher.publish(&events).await?;
            }
            summary.published += events.len();
        }
        bar.set_message(format!(
            "{} records, {} events {}",
            summary.records,
            summary.published,
            if args.dry_run { "new" } else { "published" }
        ));
        bar.inc(1);
    }
    bar.finish();
    summary.waited_seconds = publisher.map_or(0.0, |p| p.waited);
    summary.seconds = started.elapsed().as_secs_f64();
    summary.records_per_second = summary.records as f64 / summary.seconds.max(1e-9);
    Ok(summary)
}

/// The events of one session that are new to the store, normalised by the host's adapter.
#[allow(clippy::too_many_arguments)]
async fn prepare(
    agent: &str,
    host: &hosts::Host,
    session: &Session,
    since: Option<i64>,
    sanitizer: &sanitize::Sanitizer,
    summary: &mut Summary,
    store: Option<&store::Store>,
    file: &Path,
) -> Vec<proto::Event> {
    let known = known(store, &session.id).await;
    let now = common::time::now_ms();
    let session_ms = session
        .items
        .iter()
        .map(|i| i.at_ms)
        .find(|&ms| ms > 0)
        .unwrap_or(0);
    let mut events = Vec::new();
    for item in &session.items {
        if since.is_some_and(|since| item.at_ms < since) {
            summary.before_since += 1;
            continue;
        }
        summary.events += 1;
        let id = event_id(agent, &session.id, &item.key, session_ms);
        if known.ids.contains(&id) {
            summary.already_stored += 1;
            continue;
        }
        let mut event =
            hosts::adapter::normalise(host, item.payload.to_string().as_bytes(), sanitizer);
        let tool_call = match &event.payload {
            Some(
                proto::event::Payload::PreTool(t)
                | proto::event::Payload::PostTool(t)
                | proto::event::Payload::ToolFailure(t),
            ) if !t.tool_use_id.is_empty() => {
                Some((event.kind().to_owned(), t.tool_use_id.clone()))
            }
            _ => None,
        };
        let live = known
            .first_live_ms
            .is_some_and(|first| item.at_ms >= first - LIVE_MARGIN_MS);
        if live || tool_call.is_some_and(|call| known.tool_calls.contains(&call)) {
            summary.captured_live += 1;
            continue;
        }
        event.id = id;
        if item.at_ms > 0 {
            event.occurred_at_ms = item.at_ms;
        }
        event.captured_at_ms = now;
        // Marks the event as imported, so a later import can tell live capture from its own.
        let mut extra: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&event.extra_json).unwrap_or_default();
        extra.insert(
            "imported_from".to_owned(),
            file.display().to_string().into(),
        );
        event.extra_json = serde_json::Value::Object(extra).to_string();
        hosts::adapter::fit(&mut event, sanitizer);
        events.push(event);
    }
    events
}

/// Events published between two looks at how far the services are behind: often enough that
/// a chunk cannot overrun a stream's room, rarely enough that a history of many small sessions
/// does not ask JetStream once a session.
const PACE_EVERY: usize = 256;

/// Publishes an import's events and keeps it from outrunning the services.
struct Publisher<'a> {
    jetstream: &'a async_nats::jetstream::Context,
    bar: &'a indicatif::ProgressBar,
    /// Events published since the last look.
    since_look: usize,
    /// Seconds spent waiting.
    waited: f64,
}

impl Publisher<'_> {
    /// Publish events with their ids as `Nats-Msg-Id`, many in flight, each acknowledged.
    /// Every [`PACE_EVERY`] events it first waits while a running service is too far behind
    /// (`common::streams::wait_for_room`): a long history publishes faster than ingest stores
    /// it, and JetStream would drop the oldest events of a full stream before they were
    /// stored. The bar says whom it waits for.
    async fn publish(&mut self, events: &[proto::Event]) -> Result<()> {
        for chunk in events.chunks(PACE_EVERY) {
            if self.since_look + chunk.len() > PACE_EVERY {
                self.pace().await?;
            }
            self.since_look += chunk.len();
            let mut acks = Vec::with_capacity(chunk.len());
            for event in chunk {
                let mut headers = async_nats::HeaderMap::new();
                headers.insert(async_nats::header::NATS_MESSAGE_ID, event.id.as_str());
                let span = proto::new_event_id();
                headers.insert(
                    proto::subjects::TRACEPARENT_HEADER,
                    format!("00-{}-{}-01", event.id, &span[16..]).as_str(),
                );
                let ack = self
                    .jetstream
                    .publish_with_headers(event.subject(), headers, event.encode_to_vec().into())
                    .await
                    .context("publishing an imported event")?;
                acks.push(ack);
            }
            for ack in acks {
                ack.await
                    .context("waiting for jetstream to acknowledge an imported event")?;
            }
        }
        Ok(())
    }

    /// Wait until the services have room for more.
    async fn pace(&mut self) -> Result<()> {
        self.since_look = 0;
        let started = std::time::Instant::now();
        let mut said = false;
        let bar = self.bar;
        common::streams::wait_for_room(self.jetstream, |behind| {
            if !said {
                said = true;
                tracing::info!(consumer = %behind.consumer, messages = behind.messages, "waiting for the services to catch up");
            }
            bar.set_message(format!(
                "waiting for {} to catch up ({} behind)",
                behind.consumer, behind.messages
            ));
        })
        .await
        .context("reading how far the services are behind")?;
        if said {
            self.waited += started.elapsed().as_secs_f64();
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------

#[derive(Debug, clap::Args)]
pub struct SessionsArgs {
    /// Only sessions of this agent host.
    #[arg(long)]
    agent: Option<String>,
    /// Only sessions of this project (its path).
    #[arg(long)]
    project: Option<String>,
    /// At most this many, newest first.
    #[arg(long, default_value_t = 50)]
    limit: i64,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    common: CommonArgs,
}

/// `mneme sessions`.
pub async fn sessions(args: SessionsArgs) -> Result<()> {
    let agent = args
        .agent
        .as_deref()
        .map(|agent| hosts::named(agent).map(|host| host.name))
        .transpose()?;
    let db = args.common.db_path();
    let store = store::Store::open_read_only(&db)
        .await
        .with_context(|| format!("opening the store {}", db.display()))?;
    let rows =
        archive::session_list(store.pool(), agent, args.project.as_deref(), args.limit).await?;
    if args.json {
        // Through a JSON value, as this list was always built, so its keys print in the same
        // order however serde_json orders them.
        let list = serde_json::to_value(&rows)?;
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(());
    }
    if rows.is_empty() {
        println!("no sessions");
    }
    for session in rows {
        let end = session
            .ended_at_ms
            .map_or_else(|| "open".to_owned(), common::time::utc_minute);
        println!(
            "{}  {:<11}  {}  → {end}  {:>5} observations  {}",
            session.id,
            session.agent,
            common::time::utc_minute(session.started_at_ms),
            session.observations,
            session.project
        );
    }
    Ok(())
}
