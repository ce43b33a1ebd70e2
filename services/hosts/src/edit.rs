//! Editing a file that belongs to the user, safely: the one way mneme writes a host's
//! configuration.
//!
//! A run that would change nothing leaves the file's bytes alone; a run that changes an existing
//! file first copies it to `<name>.mneme-backup-<unix seconds>` and then replaces it atomically,
//! so a crash or a full disk can never leave the user with a half-written settings file. Files
//! that do not parse, or whose `hooks` is not an object, are refused rather than "repaired".
//! An uninstall that brings a file back to what a backup held writes the backup's own bytes,
//! and a file mneme created that an uninstall left empty is removed.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Map, Value};

use crate::install::InstallReport;

/// A parsed settings file together with what is needed to write it back safely.
pub(crate) struct Loaded {
    /// The file actually read and written, which differs from the requested path when that
    /// is a symlink: replacing the link itself would break dotfile managers.
    target: PathBuf,
    /// The bytes read, or `None` when the file did not exist.
    original: Option<Vec<u8>>,
    pub(crate) root: Map<String, Value>,
}

/// Reads and validates a settings file. A missing or blank file counts as `{}`.
pub(crate) fn load(settings_path: &Path) -> Result<Loaded> {
    let target = match fs::symlink_metadata(settings_path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            fs::canonicalize(settings_path).with_context(|| {
                format!(
                    "settings file {} is a symlink that cannot be resolved",
                    settings_path.display()
                )
            })?
        }
        _ => settings_path.to_path_buf(),
    };
    let original = match fs::read(&target) {
        Ok(bytes) => Some(bytes),
        Err(err) if err.kind() == io::ErrorKind::NotFound => None,
        Err(err) => {
            return Err(err)
                .with_context(|| format!("cannot read settings file {}", settings_path.display()));
        }
    };

    let mut root = Map::new();
    if let Some(bytes) = &original {
        // Some Windows editors prefix a byte order mark, which serde_json rejects.
        let text = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        if !text.iter().all(u8::is_ascii_whitespace) {
            let value: Value = serde_json::from_slice(text).with_context(|| {
                format!(
                    "settings file {} is not valid json; fix or move it, mneme will not overwrite it",
                    settings_path.display()
                )
            })?;
            let Value::Object(map) = value else {
                bail!(
                    "settings file {} does not hold a json object; fix or move it, mneme will not overwrite it",
                    settings_path.display()
                );
            };
            root = map;
        }
    }
    if root.get("hooks").is_some_and(|hooks| !hooks.is_object()) {
        return Err(hooks_not_object(settings_path));
    }

    Ok(Loaded {
        target,
        original,
        root,
    })
}

/// Edit any JSON settings file with the same care as the hook installers: a missing file is
/// `{}`, one that does not parse is refused untouched, `edit` says which changes it made (an
/// empty list writes nothing), and a changed file is backed up first and replaced atomically.
pub fn edit_json(
    path: &Path,
    edit: impl FnOnce(&mut Map<String, Value>) -> Result<Vec<String>>,
) -> Result<InstallReport> {
    let mut loaded = load(path)?;
    let changes = edit(&mut loaded.root)?;
    finish(path, &loaded, changes)
}

/// Read a JSON settings file as [`edit_json`] would (missing or blank = `{}`).
pub fn read_json(path: &Path) -> Result<Map<String, Value>> {
    Ok(load(path)?.root)
}

pub(crate) fn hooks_not_object(settings_path: &Path) -> anyhow::Error {
    anyhow!(
        "\"hooks\" in settings file {} is not an object; fix or move it, mneme will not overwrite it",
        settings_path.display()
    )
}

/// Writes the file if `events` says something changed and builds the report.
pub(crate) fn finish(
    settings_path: &Path,
    loaded: &Loaded,
    events: Vec<String>,
) -> Result<InstallReport> {
    let changed = !events.is_empty();
    let backup_path = if changed {
        save(settings_path, loaded)?
    } else {
        None
    };
    Ok(InstallReport {
        settings_path: settings_path.to_path_buf(),
        backup_path,
        changed,
        events,
    })
}

/// Backs up the existing file (if any) and atomically replaces it with the new contents,
/// keeping its permissions. Returns the backup's path.
fn save(settings_path: &Path, loaded: &Loaded) -> Result<Option<PathBuf>> {
    let target = &loaded.target;
    let mut bytes = serde_json::to_vec_pretty(&loaded.root)
        .with_context(|| format!("cannot serialise settings for {}", settings_path.display()))?;
    bytes.push(b'\n');
    // When the edit brings the file back to what a backup held (an uninstall after an
    // install), the backup's own bytes are written, so the user's formatting comes back too.
    if let Some(original) = matching_backup(target, &loaded.root) {
        bytes = original;
    }

    let dir = parent_dir(target);
    let permissions = match &loaded.original {
        Some(_) => Some(
            fs::metadata(target)
                .with_context(|| format!("cannot stat settings file {}", settings_path.display()))?
                .permissions(),
        ),
        None => {
            fs::create_dir_all(dir)
                .with_context(|| format!("cannot create directory {}", dir.display()))?;
            None
        }
    };

    let backup_path = match &loaded.original {
        Some(original) => Some(write_backup(target, original, permissions.as_ref())?),
        None => None,
    };
    if let Err(err) = write_atomically(target, &bytes, loaded.original.as_deref(), permissions) {
        // The file was not changed, so the backup would only be clutter.
        if let Some(backup) = &backup_path {
            let _ = fs::remove_file(backup);
        }
        return Err(err)
            .with_context(|| format!("cannot write settings file {}", settings_path.display()));
    }
    Ok(backup_path)
}

/// The bytes of the newest backup of `target` whose JSON equals `root`, if any.
fn matching_backup(target: &Path, root: &Map<String, Value>) -> Option<Vec<u8>> {
    let prefix = format!("{}.mneme-backup-", file_name(target));
    let mut backups: Vec<(std::time::SystemTime, PathBuf)> = fs::read_dir(parent_dir(target))
        .ok()?
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
        .filter_map(|entry| Some((entry.metadata().ok()?.modified().ok()?, entry.path())))
        .collect();
    backups.sort();
    backups.into_iter().rev().take(8).find_map(|(_, path)| {
        let bytes = fs::read(&path).ok()?;
        let text = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
        let value: Value = serde_json::from_slice(text).ok()?;
        (value.as_object() == Some(root)).then_some(bytes)
    })
}

/// The directory holding `path`, as something that can be opened (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Copies the bytes that were parsed (not whatever is on disk now) next to the file.
fn write_backup(
    target: &Path,
    original: &[u8],
    permissions: Option<&Permissions>,
) -> Result<PathBuf> {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or_default();
    let name = format!("{}.mneme-backup-{seconds}", file_name(target));
    let (path, mut file) = create_unique(parent_dir(target), &name, permissions.is_some())
        .with_context(|| format!("cannot create a backup of {}", target.display()))?;
    let written = (|| {
        file.write_all(original)?;
        if let Some(permissions) = permissions {
            file.set_permissions(permissions.clone())?;
        }
        file.sync_all()
    })();
    if let Err(err) = written {
        let _ = fs::remove_file(&path);
        return Err(err).with_context(|| format!("cannot write backup {}", path.display()));
    }
    Ok(path)
}

/// Writes `bytes` to a temporary file beside `target`, syncs it and renames it over `target`,
/// so readers see either the old or the new file, never a partial one.
fn write_atomically(
    target: &Path,
    bytes: &[u8],
    expected: Option<&[u8]>,
    permissions: Option<Permissions>,
) -> Result<()> {
    let dir = parent_dir(target);
    let name = format!(".{}.mneme-tmp-{}", file_name(target), std::process::id());
    let (temp_path, file) = create_unique(dir, &name, permissions.is_some())?;
    let result = fill_and_swap(file, &temp_path, target, bytes, expected, permissions);
    if result.is_err() {
        let _ = fs::remove_file(&temp_path);
        return result;
    }
    // Syncing the directory makes the rename itself durable; failing to is not worth an
    // error because the new contents are already in place.
    #[cfg(unix)]
    if let Ok(dir) = File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

fn fill_and_swap(
    mut file: File,
    temp_path: &Path,
    target: &Path,
    bytes: &[u8],
    expected: Option<&[u8]>,
    permissions: Option<Permissions>,
) -> Result<()> {
    file.write_all(bytes)?;
    if let Some(permissions) = permissions {
        file.set_permissions(permissions)?;
    }
    file.sync_all()?;
    drop(file);

    // Claude Code itself rewrites this file (for example from `/config`); if it did so while
    // we were working, renaming would silently discard its change.
    let current = match fs::read(target) {
        Ok(bytes) => Some(bytes),
        Err(err) if err.kind() == io::ErrorKind::NotFound => None,
        Err(err) => return Err(err.into()),
    };
    if current.as_deref() != expected {
        bail!(
            "the file changed while mneme was updating it; nothing was written, run the command again"
        );
    }
    fs::rename(temp_path, target)?;
    Ok(())
}

/// Creates a new file named `name` in `dir`, or `name-1`, `name-2`, … if that exists, so
/// two backups within one second, or a stale temporary file, never collide. A file meant to
/// receive the original's permissions starts owner-only, so a private settings file is never
/// briefly readable by others through its copy.
fn create_unique(dir: &Path, name: &str, private: bool) -> Result<(PathBuf, File)> {
    for attempt in 0..1000 {
        let path = if attempt == 0 {
            dir.join(name)
        } else {
            dir.join(format!("{name}-{attempt}"))
        };
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        if private {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        #[cfg(not(unix))]
        let _ = private;
        match options.open(&path) {
            Ok(file) => return Ok((path, file)),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(err) => {
                return Err(err).with_context(|| format!("cannot create {}", path.display()));
            }
        }
    }
    bail!(
        "cannot find a free file name for {} in {}",
        name,
        dir.display()
    )
}

pub(crate) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "settings.json".to_owned())
}

// ---------------------------------------------------------------------------------------------
// TOML files (Kimi's and Codex's), through `toml_edit`, which keeps comments, key order and
// formatting.

/// Read a TOML file as [`edit_toml`] would: its text (`None` when missing) and its document.
pub fn parse_toml(path: &Path) -> Result<(Option<String>, toml_edit::DocumentMut)> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let doc = text
        .as_deref()
        .unwrap_or("")
        .parse::<toml_edit::DocumentMut>()
        .with_context(|| {
            format!(
                "{} is not valid toml; fix or move it, mneme will not overwrite it",
                path.display()
            )
        })?;
    Ok((text, doc))
}

/// Write a TOML file the way [`edit_json`] writes JSON: back up, then replace atomically,
/// keeping its permissions; a file that did not exist gets no backup.
fn save_toml(path: &Path, original: Option<&str>, text: &str) -> Result<Option<PathBuf>> {
    let dir = parent_dir(path);
    let permissions = match original {
        Some(_) => Some(
            fs::metadata(path)
                .with_context(|| format!("cannot stat {}", path.display()))?
                .permissions(),
        ),
        None => {
            fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            None
        }
    };
    let backup = match original {
        Some(original) => Some(write_backup(
            path,
            original.as_bytes(),
            permissions.as_ref(),
        )?),
        None => None,
    };
    if let Err(err) = write_atomically(
        path,
        text.as_bytes(),
        original.map(str::as_bytes),
        permissions,
    ) {
        if let Some(backup) = &backup {
            let _ = fs::remove_file(backup);
        }
        return Err(err).with_context(|| format!("cannot replace {}", path.display()));
    }
    Ok(backup)
}

/// Edit a TOML file as [`edit_json`] edits JSON: `edit` says which changes it made.
pub fn edit_toml(
    path: &Path,
    edit: impl FnOnce(&mut toml_edit::DocumentMut) -> Result<Vec<String>>,
) -> Result<InstallReport> {
    let (original, mut doc) = parse_toml(path)?;
    let events = edit(&mut doc)?;
    let mut report = InstallReport {
        settings_path: path.to_path_buf(),
        backup_path: None,
        changed: !events.is_empty(),
        events,
    };
    if report.changed {
        let text = doc.to_string();
        if original.as_deref() != Some(text.as_str()) {
            report.backup_path = save_toml(path, original.as_deref(), &text)?;
        }
    }
    Ok(report)
}

/// A file that mneme created (no backup of it predates this uninstall) and that the
/// uninstall left empty is removed rather than left behind as `{}`.
pub fn remove_if_emptied(path: &Path, report: &InstallReport) {
    if !report.changed
        || !std::fs::read_to_string(path).is_ok_and(|t| matches!(t.trim(), "{}" | ""))
    {
        return;
    }
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    let prefix = format!("{name}.mneme-backup-");
    let dir = path.parent().unwrap_or(Path::new("."));
    let older_backups = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .filter(|e| Some(e.path()) != report.backup_path)
                .count()
        })
        .unwrap_or(1);
    if older_backups == 0 {
        let _ = std::fs::remove_file(path);
        // That backup only held mneme's own entries.
        if let Some(backup) = &report.backup_path {
            let _ = std::fs::remove_file(backup);
        }
    }
}
