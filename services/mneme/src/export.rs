//! `mneme export --markdown`: workspace memory files, per project (`--jsonl`, all memory as
//! JSON lines, is in [`crate::backup`]).
//!
//! `MEMORY.md` holds the project's stable facts: decisions, architecture choices, preferences,
//! recurring errors and their fixes, procedures, lessons, and the files most worked on.
//! `HISTORY.md` holds one line per session. Both are regenerated from the store between
//! `<!-- mneme:begin -->` and `<!-- mneme:end -->` markers: text a person wrote outside them is
//! kept, the block is replaced whole (so nothing is ever listed twice), and running the export
//! again on the same store writes the same bytes.

use anyhow::Context as _;
use common::CommonArgs;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    #[command(flatten)]
    common: CommonArgs,

    /// Write MEMORY.md and HISTORY.md per project.
    #[arg(long, conflicts_with = "jsonl")]
    markdown: bool,

    /// Write all memory as JSON lines (the format `mneme import mneme` and `POST /v1/import`
    /// read), to `--out` or standard output.
    #[arg(long)]
    jsonl: bool,

    /// With `--jsonl`: the file to write (written beside it, then renamed when complete).
    #[arg(long, requires = "jsonl")]
    out: Option<PathBuf>,

    /// Directory to write into: one subdirectory per project. Defaults to `$MNEME_HOME/export`;
    /// with `--project` and no `--dir`, the files go into the project directory itself.
    #[arg(long)]
    dir: Option<PathBuf>,

    /// Export only this project (its path, as stored).
    #[arg(long)]
    project: Option<String>,
}

const BEGIN: &str =
    "<!-- mneme:begin (written by `mneme export --markdown`; edit outside these markers) -->";
const END: &str = "<!-- mneme:end -->";

pub async fn run(args: ExportArgs) -> anyhow::Result<()> {
    if args.jsonl {
        return crate::backup::export(&args.common, args.out.as_deref()).await;
    }
    anyhow::ensure!(args.markdown, "choose a format: --markdown or --jsonl");
    let db = args.common.db_path();
    let store = store::Store::open_read_only(&db)
        .await
        .with_context(|| format!("opening store {}", db.display()))?;
    let pool = store.pool();
    let projects = match &args.project {
        Some(project) => vec![project.clone()],
        None => archive::projects(pool).await?,
    };
    for project in projects {
        let dir = match (&args.dir, &args.project) {
            (Some(dir), _) => dir.join(slug(&project)),
            (None, Some(_)) => PathBuf::from(&project),
            (None, None) => args.common.home_dir().join("export").join(slug(&project)),
        };
        // Directories the export makes are owner-only (an existing one, such as a project's,
        // keeps its mode).
        store::create_private_dirs(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let memory = memory_block(pool, &project).await?;
        upsert(
            &dir.join("MEMORY.md"),
            &format!("# Memory: {project}\n"),
            &memory,
        )?;
        let history = history_block(pool, &project).await?;
        upsert(
            &dir.join("HISTORY.md"),
            &format!("# History: {project}\n"),
            &history,
        )?;
        println!("{}", dir.display());
    }
    store.close().await;
    Ok(())
}

/// A directory name for a project path.
fn slug(project: &str) -> String {
    let slug: String = project
        .trim_matches('/')
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '.' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if slug.is_empty() {
        "unknown".to_owned()
    } else {
        slug
    }
}

/// Replace the marked block of `path` with `block`, keeping everything outside the markers;
/// a new file starts with `title`. Writes nothing when the content would not change.
fn upsert(path: &Path, title: &str, block: &str) -> anyhow::Result<()> {
    let marked = format!("{BEGIN}\n{block}{END}\n");
    let existing = std::fs::read_to_string(path).unwrap_or_default();
    let content = match (existing.find(BEGIN), existing.find(END)) {
        (Some(start), Some(end)) if end > start => {
            let after = &existing[end + END.len()..];
            let after = after.strip_prefix('\n').unwrap_or(after);
            format!("{}{marked}{after}", &existing[..start])
        }
        _ if existing.is_empty() => format!("{title}\n{marked}"),
        _ => format!("{}\n\n{marked}", existing.trim_end()),
    };
    if content != existing {
        // A new file is owner-only whatever the umask; an existing one keeps the mode its
        // owner gave it.
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options
            .open(path)
            .with_context(|| format!("writing {}", path.display()))?;
        std::io::Write::write_all(&mut file, content.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

async fn memory_block(pool: &sqlx::SqlitePool, project: &str) -> anyhow::Result<String> {
    let patterns = archive::project_patterns(pool, project).await?;
    let mut out = String::new();
    let sections = [
        ("decision", "Decisions"),
        ("architecture", "Architecture"),
        ("preference", "Preferences"),
        ("error", "Recurring errors"),
        ("fix", "Fixes"),
        ("procedure", "Procedures"),
        ("reflection", "Lessons"),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for (kind, heading) in sections {
        let lines: Vec<String> = patterns
            .iter()
            .filter(|p| p.kind == kind)
            .filter(|p| seen.insert(p.text.to_lowercase()))
            .map(|p| {
                let counts = if p.occurrences > 1 {
                    format!(" (seen {} times in {} sessions)", p.occurrences, p.sessions)
                } else {
                    String::new()
                };
                if matches!(kind, "decision" | "architecture" | "preference") {
                    format!("- {}{counts}", one_line(&p.text))
                } else {
                    format!(
                        "- **{}**: {}{counts}",
                        one_line(&p.title),
                        one_line(&p.text)
                    )
                }
            })
            .collect();
        section(&mut out, heading, &lines);
    }
    // Decisions the summaries recorded that no pattern holds yet.
    let summaries = archive::project_summaries(pool, project).await?;
    let extra: Vec<String> = summaries
        .iter()
        .flat_map(|summary| summary.decisions.strings())
        .filter(|d| seen.insert(d.to_lowercase()))
        .map(|d| format!("- {}", one_line(&d)))
        .collect();
    section(&mut out, "Decisions from session summaries", &extra);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for summary in &summaries {
        for file in summary.files_modified.strings() {
            *counts.entry(file).or_default() += 1;
        }
    }
    let mut ranked: Vec<(String, usize)> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let lines: Vec<String> = ranked
        .into_iter()
        .take(20)
        .map(|(file, n)| {
            let shown = file
                .strip_prefix(&format!("{}/", project.trim_end_matches('/')))
                .unwrap_or(&file)
                .to_owned();
            format!("- {shown} ({n} session{})", if n == 1 { "" } else { "s" })
        })
        .collect();
    section(&mut out, "Files most worked on", &lines);
    if out.is_empty() {
        out.push_str("Nothing recorded yet.\n");
    }
    Ok(out)
}

async fn history_block(pool: &sqlx::SqlitePool, project: &str) -> anyhow::Result<String> {
    let sessions = archive::project_history(pool, project).await?;
    let mut out = String::new();
    for session in sessions {
        let short: String = session.id.chars().take(8).collect();
        let files = session.files_modified.strings().len();
        let request = session
            .request
            .filter(|r| !r.is_empty())
            .map_or_else(|| "(no summary yet)".to_owned(), |r| one_line(&r));
        let open = if session.status.as_deref() == Some("partial") {
            " (in progress)"
        } else {
            ""
        };
        out.push_str(&format!(
            "- {} `{short}`: {request}; {files} file{} changed{open}\n",
            common::time::utc_day(session.started_at_ms),
            if files == 1 { "" } else { "s" }
        ));
    }
    if out.is_empty() {
        out.push_str("No sessions yet.\n");
    }
    Ok(out)
}

fn section(out: &mut String, heading: &str, lines: &[String]) {
    if lines.is_empty() {
        return;
    }
    out.push_str(&format!("\n## {heading}\n\n"));
    for line in lines {
        out.push_str(line);
        out.push('\n');
    }
}

fn one_line(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(300) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_is_replaced_and_text_outside_it_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("MEMORY.md");
        upsert(&path, "# T\n", "- a\n").unwrap();
        let first = std::fs::read_to_string(&path).unwrap();
        upsert(&path, "# T\n", "- a\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), first);
        let edited = first.replace("# T\n", "# T\nmy own note\n") + "footer\n";
        std::fs::write(&path, &edited).unwrap();
        upsert(&path, "# T\n", "- b\n").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("my own note") && text.contains("footer"));
        assert!(text.contains("- b") && !text.contains("- a"));
        assert_eq!(text.matches(BEGIN).count(), 1);
        assert_eq!(slug("/home/u/proj"), "home-u-proj");
    }
}
