//! `mneme export --jsonl` and `mneme import mneme`: all memory as JSON lines, the same format as
//! the api's `GET /v1/export` and `POST /v1/import` (the `archive` crate writes and reads it for
//! both; this is the command line around it, so a backup needs no running api).

use anyhow::Context as _;
use common::CommonArgs;
use futures::StreamExt as _;
use std::io::Write as _;
use std::path::Path;
use tokio::io::AsyncReadExt as _;

/// Write every line of the export to `out` (standard output when `None`). A file is written
/// beside its final name and renamed once complete, so a failed export never leaves a file
/// that looks whole.
pub async fn export(common: &CommonArgs, out: Option<&Path>) -> anyhow::Result<()> {
    let db = common.db_path();
    let store = store::Store::open_read_only(&db)
        .await
        .with_context(|| format!("opening store {}", db.display()))?;
    let mut lines = Box::pin(archive::export_lines(store.pool().clone()));
    let (mut writer, partial): (Box<dyn std::io::Write>, Option<std::path::PathBuf>) = match out {
        Some(path) => {
            let partial = path.with_extension("jsonl.partial");
            // Owner-only whatever the umask: the export is all memory there is.
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let file = options
                .open(&partial)
                .with_context(|| format!("creating {}", partial.display()))?;
            // A partial file left by an earlier run keeps its mode when opened again.
            store::private_file(&partial)
                .with_context(|| format!("creating {}", partial.display()))?;
            (Box::new(std::io::BufWriter::new(file)), Some(partial))
        }
        None => (
            Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
            None,
        ),
    };
    let mut last = String::new();
    while let Some(chunk) = lines.next().await {
        let chunk = chunk.context("reading the store")?;
        writer
            .write_all(chunk.as_bytes())
            .context("writing the export")?;
        last = chunk;
    }
    writer.flush().context("writing the export")?;
    drop(writer);
    if let (Some(partial), Some(path)) = (partial, out) {
        std::fs::rename(&partial, path)
            .with_context(|| format!("moving the export to {}", path.display()))?;
        // The `end` line carries the counts: say them, on stderr, when stdout is not the file.
        if let Some(end) = last.lines().last() {
            eprintln!("exported to {}: {end}", path.display());
        }
    }
    store.close().await;
    Ok(())
}

/// Import a file written by [`export`] (or `GET /v1/export`; `-` reads standard input) through
/// ingest and retrieval, as `POST /v1/import` does; prints the counts as JSON.
pub async fn import(common: &CommonArgs, path: &Path) -> anyhow::Result<()> {
    let nats = common::nats::connect(common, "import", std::time::Duration::from_secs(5))
        .await
        .context("connecting to nats: is mneme running?")?;
    let sanitizer = sanitize::Sanitizer::new(&sanitize::Config::default())?;
    let mut input: Box<dyn tokio::io::AsyncRead + Unpin> = if path == Path::new("-") {
        Box::new(tokio::io::stdin())
    } else {
        Box::new(
            tokio::fs::File::open(path)
                .await
                .with_context(|| format!("opening {}", path.display()))?,
        )
    };
    let mut importer = archive::Importer::new(&nats, &sanitizer);
    let mut buffer = vec![0u8; 256 * 1024];
    let refused = |e: archive::ImportError| anyhow::anyhow!("{e} ({})", e.code());
    loop {
        let n = input
            .read(&mut buffer)
            .await
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        importer.feed(&buffer[..n]).await.map_err(refused)?;
    }
    let done = importer.finish().await.map_err(refused)?;
    // Through a JSON value, as the api's answer to the same import, so both list the counts in
    // one order however serde_json orders keys.
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::to_value(&done)?)?
    );
    nats.flush().await.ok();
    Ok(())
}

/// `mneme import claude-mem`: claude-mem's database, read-only, brought in as mneme memory.
/// The database is `path` (a file, or claude-mem's data directory), else where claude-mem keeps
/// it; it is read whole and closed before anything is sent, so its errors come first and it is
/// open only briefly while claude-mem may be writing it.
pub async fn import_claude_mem(
    common: &CommonArgs,
    path: Option<&Path>,
    json: bool,
) -> anyhow::Result<()> {
    let path = match path {
        Some(path) => path.to_path_buf(),
        None => archive::claude_mem::default_path(
            hosts::paths::env_dir(archive::claude_mem::DATA_DIR_VAR).as_deref(),
            hosts::paths::home().as_deref(),
        )
        .context("no home directory to find claude-mem's database in: give it with --path")?,
    };
    let sanitizer = sanitize::Sanitizer::new(&sanitize::Config::default())?;
    let read = archive::claude_mem::read(&path, &sanitizer).await?;
    let nats = common::nats::connect(common, "import", std::time::Duration::from_secs(5))
        .await
        .context("connecting to nats: is mneme running?")?;
    let done = read
        .import(&nats, &sanitizer)
        .await
        .map_err(|e| anyhow::anyhow!("{e} ({})", e.code()))?;
    nats.flush().await.ok();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::to_value(&done)?)?
        );
        return Ok(());
    }
    let r = &done.read;
    println!(
        "claude-mem {}: {} sessions, {} observations, {} summaries, {} prompts",
        done.path, r.sessions, r.observations, r.summaries, r.prompts
    );
    if r.left_out > 0 {
        println!(
            "left out {} rows: of claude-mem's own observer sessions, or without text",
            r.left_out
        );
    }
    println!(
        "imported {} sessions, {} observations, {} memory items; {} already here",
        done.sessions, done.observations, done.memory_items, done.skipped
    );
    Ok(())
}
