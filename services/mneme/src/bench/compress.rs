//! `mneme-bench compress`: what the compressor and the pattern detector cost per event, and how
//! long a checkpoint takes, on the real Claude Code transcripts.
//!
//! The transcripts are replayed as the hook would publish them, through NATS into ingest (the
//! store then holds exactly what production would); the compressor and the detector then walk
//! every session one notice at a time, in process, on that store, each notice its own
//! transaction as in the services. `MNEME_BENCH_KEEP=FILE` keeps a copy of the store.

use crate::{Bed, percentile, sorted};
use anyhow::Context as _;
use proto::Message as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The real Claude Code transcripts beside the repository, in name order.
pub(crate) fn transcripts() -> anyhow::Result<Vec<PathBuf>> {
    let dir = std::env::var_os("MNEME_TRANSCRIPTS").map_or_else(
        || {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/data/claude-code-transcripts")
        },
        PathBuf::from,
    );
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {} (set MNEME_TRANSCRIPTS)", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    Ok(files)
}

pub async fn compress() -> anyhow::Result<()> {
    let bed = Bed::start(true).await?;
    let client = async_nats::connect(&bed.common.nats_url).await?;
    let js = async_nats::jetstream::new(client);
    let sanitizer = sanitize::Sanitizer::new(&sanitize::Config::default())?;
    let mut total = 0usize;
    for file in transcripts()? {
        let replay = hosts::claude_code::transcript::claude_code_replay(&file)?;
        let mut acks = Vec::new();
        for payload in &replay.payloads {
            let event =
                hosts::claude_code::adapter::normalise(payload.to_string().as_bytes(), &sanitizer);
            let mut headers = async_nats::HeaderMap::new();
            headers.insert(async_nats::header::NATS_MESSAGE_ID, event.id.as_str());
            acks.push(
                js.publish_with_headers(event.subject(), headers, event.encode_to_vec().into())
                    .await?,
            );
        }
        for ack in acks {
            ack.await?;
        }
        total += replay.payloads.len();
    }
    let store = store::Store::open(&bed.common.db_path()).await?;
    let started = Instant::now();
    loop {
        let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM observations")
            .fetch_one(store.pool())
            .await?;
        // A few payloads of a transcript can be identical within ingest's dedup window.
        if n as usize >= total * 99 / 100 && started.elapsed() > Duration::from_secs(2) {
            let (again,): (i64,) = sqlx::query_as("SELECT count(*) FROM observations")
                .fetch_one(store.pool())
                .await?;
            if again == n {
                break;
            }
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(300),
            "ingest stored {n} of {total} events"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let notices: Vec<(String, i64)> =
        sqlx::query_as("SELECT session_id, id FROM observations ORDER BY id")
            .fetch_all(store.pool())
            .await?;
    println!(
        "replayed {} events of real transcripts into {}",
        notices.len(),
        bed.common.db_path().display()
    );

    let compressor = compressor::Compressor::new(store.pool().clone(), 30_000);
    let mut per_notice = Vec::with_capacity(notices.len());
    let mut written = 0usize;
    let all = Instant::now();
    for (session, id) in &notices {
        let started = Instant::now();
        written += compressor
            .process(&[(session.clone(), *id)], &[])
            .await?
            .len();
        per_notice.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let compressor_total = all.elapsed();
    let per_notice = sorted(per_notice);
    println!(
        "compressor: {} notices in {:.2}s, {written} rows written; per notice p50={:.3}ms p99={:.3}ms",
        notices.len(),
        compressor_total.as_secs_f64(),
        percentile(&per_notice, 50.0),
        percentile(&per_notice, 99.0)
    );

    let detector = pattern::Detector::new(store.pool().clone());
    let mut per_notice = Vec::with_capacity(notices.len());
    let mut updates = Vec::new();
    let all = Instant::now();
    for (session, id) in &notices {
        let started = Instant::now();
        let changed = detector
            .process(&[(session.clone(), *id)], &[])
            .await?
            .len();
        let took = started.elapsed().as_secs_f64() * 1000.0;
        per_notice.push(took);
        if changed > 0 {
            updates.push(took);
        }
    }
    let pattern_total = all.elapsed();
    let per_notice = sorted(per_notice);
    let updates = sorted(updates);
    let (patterns,): (i64,) = sqlx::query_as("SELECT count(*) FROM patterns")
        .fetch_one(store.pool())
        .await?;
    println!(
        "pattern: {} notices in {:.2}s, {} updates, {patterns} patterns; per notice p50={:.3}ms p99={:.3}ms; per update p50={:.3}ms p95={:.3}ms",
        notices.len(),
        pattern_total.as_secs_f64(),
        updates.len(),
        percentile(&per_notice, 50.0),
        percentile(&per_notice, 99.0),
        percentile(&updates, 50.0),
        percentile(&updates, 95.0)
    );

    // Checkpoints of the largest session, as a request would make them.
    let (largest,): (String,) = sqlx::query_as(
        "SELECT session_id FROM observations GROUP BY session_id ORDER BY count(*) DESC LIMIT 1",
    )
    .fetch_one(store.pool())
    .await?;
    let mut checkpoints = Vec::new();
    for _ in 0..200 {
        let started = Instant::now();
        let (row, _) = compressor.checkpoint(&largest).await?;
        anyhow::ensure!(row.is_some(), "no checkpoint made");
        checkpoints.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let checkpoints = sorted(checkpoints);
    println!(
        "checkpoint of a {}-event session: p50={:.3}ms p95={:.3}ms max={:.3}ms",
        notices.iter().filter(|(s, _)| *s == largest).count(),
        percentile(&checkpoints, 50.0),
        percentile(&checkpoints, 95.0),
        checkpoints[checkpoints.len() - 1]
    );
    let events = notices.len().max(1) as f64;
    println!(
        "compress: events={} compressor_us_per_event={:.1} pattern_us_per_event={:.1} pattern_update_p95_ms={:.3} checkpoint_p50_ms={:.3} checkpoint_p95_ms={:.3}",
        notices.len(),
        compressor_total.as_secs_f64() * 1e6 / events,
        pattern_total.as_secs_f64() * 1e6 / events,
        percentile(&updates, 95.0),
        percentile(&checkpoints, 50.0),
        percentile(&checkpoints, 95.0)
    );
    // Keep the store for a look at what was written, when asked. SQLite writes the copy: copying
    // the file here would open and close it, dropping the locks of the services' connections in
    // this process (see `store::Store::open`).
    if let Some(keep) = std::env::var_os("MNEME_BENCH_KEEP") {
        sqlx::query("VACUUM INTO ?")
            .bind(keep.to_string_lossy().into_owned())
            .execute(store.pool())
            .await
            .with_context(|| format!("copying the store to {}", keep.to_string_lossy()))?;
        println!("store kept at {}", keep.to_string_lossy());
    }
    store.close().await;
    bed.stop().await;
    Ok(())
}
