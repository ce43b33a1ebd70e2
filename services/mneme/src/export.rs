//! `mneme export --markdown`: workspace memory files, per project (`--jsonl`, all memory as
//! JSON lines, is in [`crate::backup`]).
//!
//! `MEMORY.md` holds the project's stable facts: decisions, architecture choices, preferences,
//! recurring errors and their fixes, procedures, workflows (steps that worked, with how often
//! they worked and failed), lessons, and the files most worked on.
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
        // A symlink in place of the project's directory would send the files somewhere the
        // export never chose; it is refused before anything is created through it.
        refuse_symlink(&dir, "directory")?;
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

/// A directory name for a project path: always one path component of its own, so no project
/// name (`..`, `.`, `/`, `a/../../b`) can place its files outside the export directory.
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
    // Separators are already gone; leading dots are replaced so that `.` and `..` cannot name
    // the export directory itself or its parent, and no project's directory is hidden.
    let dots = slug.len() - slug.trim_start_matches('.').len();
    let slug = format!("{}{}", "-".repeat(dots), &slug[dots..]);
    if slug.is_empty() {
        "unknown".to_owned()
    } else {
        slug
    }
}

/// Fail, naming `path`, when `path` is a symbolic link: the export writes only where it was
/// told to, never where a link planted beside its files points.
fn refuse_symlink(path: &Path, what: &str) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => anyhow::bail!(
            "refusing to write through the symbolic link {} (the export {what} must not be a link)",
            path.display()
        ),
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error).with_context(|| format!("checking {}", path.display())),
    }
}

/// Replace the marked block of `path` with `block`, keeping everything outside the markers;
/// a new file starts with `title`. Writes nothing when the content would not change.
///
/// The new content goes to a temporary file beside `path` that is renamed over it, so a
/// reader never sees half a file and a symbolic link at `path` is never written through (it
/// is refused, as is a link in place of the directory holding `path`).
fn upsert(path: &Path, title: &str, block: &str) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    refuse_symlink(dir, "directory")?;
    refuse_symlink(path, "file")?;
    let marked = format!("{BEGIN}\n{block}{END}\n");
    let (existing, permissions) = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => {
            // A file that is not UTF-8 is not one the export wrote: it is left alone rather
            // than replaced by an empty one.
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            (text, Some(meta.permissions()))
        }
        Ok(_) => anyhow::bail!("refusing to replace {}: not a regular file", path.display()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => (String::new(), None),
        Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
    };
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
        replace(dir, path, content.as_bytes(), permissions)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Write `bytes` to a new temporary file in `dir` and rename it over `path`. The temporary
/// file is created exclusively (so nothing already at its name, a link included, is opened)
/// and owner-only; it then takes `permissions`, those of the file it replaces, when there is
/// one, so a new file is owner-only whatever the umask and an existing one keeps its mode.
fn replace(
    dir: &Path,
    path: &Path,
    bytes: &[u8],
    permissions: Option<std::fs::Permissions>,
) -> anyhow::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (temp, mut file) = (0..1000)
        .find_map(|attempt| {
            let temp = dir.join(format!(
                ".{name}.mneme-tmp-{}-{attempt}",
                std::process::id()
            ));
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            match options.open(&temp) {
                Ok(file) => Some(Ok((temp, file))),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => None,
                Err(error) => Some(Err(error)),
            }
        })
        .unwrap_or_else(|| {
            Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "no free name for a temporary file",
            ))
        })
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    let written = (|| -> std::io::Result<()> {
        std::io::Write::write_all(&mut file, bytes)?;
        if let Some(permissions) = permissions {
            file.set_permissions(permissions)?;
        }
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temp, path)
    })();
    if let Err(error) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(error.into());
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
        ("workflow", "Workflows"),
        ("reflection", "Lessons"),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for (kind, heading) in sections {
        let lines: Vec<String> = patterns
            .iter()
            .filter(|p| p.kind == kind)
            .filter(|p| seen.insert(p.text.to_lowercase()))
            .map(|p| {
                // A workflow's text says how often it worked and failed.
                let counts = if p.occurrences > 1 && kind != "workflow" {
                    format!(" (seen {} times in {} sessions)", p.occurrences, p.sessions)
                } else {
                    String::new()
                };
                if kind == "workflow" {
                    // The title is the situation; the steps and the record follow, a line each.
                    let rest: Vec<String> = p
                        .text
                        .lines()
                        .filter(|l| !l.starts_with("When asked:") && !l.trim().is_empty())
                        .map(|l| format!("  {}", one_line(l)))
                        .collect();
                    format!("- **{}**\n{}", one_line(&p.title), rest.join("\n"))
                } else if matches!(kind, "decision" | "architecture" | "preference") {
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

    #[test]
    fn every_slug_is_one_component_inside_the_export_directory() {
        let root = Path::new("/export");
        for project in [
            "..",
            ".",
            "/..",
            "../",
            "/../..",
            "a/../../b",
            "...",
            ".hidden",
            "",
            "/",
            "\\..",
            "..\\..",
            "a\0b",
            "\u{2215}..",
        ] {
            let name = slug(project);
            let mut components = Path::new(&name).components();
            assert!(
                matches!(components.next(), Some(std::path::Component::Normal(_)))
                    && components.next().is_none(),
                "{project:?} slugs to {name:?}"
            );
            assert!(!name.starts_with('.') && !name.contains(['/', '\\', '\0']));
            assert_eq!(root.join(&name).parent(), Some(root), "{project:?}");
        }
        assert_eq!(slug(".."), "--");
        assert_eq!(slug("/home/u/.config"), "home-u-.config");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_at_the_file_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let path = dir.path().join("MEMORY.md");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        let error = upsert(&path, "# T\n", "- a\n").unwrap_err().to_string();
        assert!(
            error.contains("symbolic link") && error.contains(&path.display().to_string()),
            "{error}"
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert!(
            std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_project_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let project = dir.path().join("project");
        std::os::unix::fs::symlink(&elsewhere, &project).unwrap();
        let error = upsert(&project.join("HISTORY.md"), "# T\n", "- a\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("symbolic link") && error.contains(&project.display().to_string()),
            "{error}"
        );
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        assert!(refuse_symlink(&project, "directory").is_err());
    }

    #[cfg(unix)]
    #[test]
    fn files_are_replaced_whole_owner_only_when_new_keeping_an_existing_mode() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("MEMORY.md");
        upsert(&new, "# T\n", "- a\n").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&new), 0o600);

        let existing = dir.path().join("HISTORY.md");
        std::fs::write(&existing, "my notes\n").unwrap();
        std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o640)).unwrap();
        // A hard link shares the old inode: writing in place would change it too, a rename
        // leaves it as it was.
        let link = dir.path().join("link");
        std::fs::hard_link(&existing, &link).unwrap();
        upsert(&existing, "# T\n", "- a\n").unwrap();
        assert_eq!(mode(&existing), 0o640);
        assert!(
            std::fs::read_to_string(&existing)
                .unwrap()
                .starts_with("my notes\n\n")
        );
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "my notes\n");
        // No temporary file is left behind.
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["HISTORY.md", "MEMORY.md", "link"]);
    }

    #[test]
    fn a_file_that_is_not_text_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("MEMORY.md");
        std::fs::write(&path, b"\xff\xfe binary").unwrap();
        assert!(upsert(&path, "# T\n", "- a\n").is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"\xff\xfe binary");
    }
}
