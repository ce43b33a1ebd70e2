//! The hosts' own session files, turned back into the hook payloads each host would have sent:
//! what every host's `import.rs` shares, and the [`Import`] each declares.
//!
//! Each reader is pure: files in, [`Session`]s out, each a list of [`Item`]s holding a payload
//! in the host's own hook shape (so the host's adapter normalises it exactly as
//! it would a live event), the time of the record behind it, and a key built from the host's
//! own record ids (tool call ids, message ids, line timestamps) from which the import derives
//! the event id. Lines that do not parse are reported with their file and line; a last line
//! without its newline is still being written and is left for the next import.

use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Milliseconds since the epoch of an RFC 3339 time, as every host writes its records' times.
pub use common::time::parse_rfc3339_ms as parse_time;

/// How a host's history is imported: where its session files are and how one is read.
pub struct Import {
    /// The files to read: `path` (a file or a directory) when given, else the host's own place.
    pub sources: fn(Option<&Path>, &mut Read) -> anyhow::Result<Vec<Source>>,
    /// Read one source's sessions into `Read`.
    pub read: fn(&Source, &mut Read) -> anyhow::Result<()>,
}

/// One file to read, with what the host's index says about it when the file does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub path: PathBuf,
    /// The session id, when an index names it (Kimi); empty when the file says.
    pub session: String,
    /// The working directory or project the session belongs to, when the file does not say.
    pub project: String,
}

impl Source {
    /// A file that says everything about itself.
    pub fn file(path: PathBuf) -> Source {
        Source {
            path,
            session: String::new(),
            project: String::new(),
        }
    }
}

/// One event to import.
#[derive(Debug, Clone)]
pub struct Item {
    /// The hook payload, in the host's shape.
    pub payload: Value,
    /// When it happened, Unix milliseconds (0 when the file does not say).
    pub at_ms: i64,
    /// A key unique within the session, stable across imports of the same file.
    pub key: String,
}

/// One session read from a host's files.
#[derive(Debug, Clone, Default)]
pub struct Session {
    pub id: String,
    pub cwd: String,
    pub items: Vec<Item>,
    /// Records (lines) read.
    pub records: usize,
}

/// A line that could not be read.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BadLine {
    pub file: String,
    pub line: usize,
    pub error: String,
}

/// What reading one file gave.
#[derive(Debug, Default)]
pub struct Read {
    pub sessions: Vec<Session>,
    pub bad_lines: Vec<BadLine>,
    /// Whether a last line was left for next time.
    pub partial: bool,
}

/// The JSON objects of a JSONL file, with bad lines reported and a partial last line left out.
pub fn read_jsonl(
    path: &Path,
    out: &mut Read,
) -> std::io::Result<Vec<(usize, Map<String, Value>)>> {
    let bytes = std::fs::read(path)?;
    let text = String::from_utf8_lossy(&bytes);
    let complete = if !text.is_empty() && !text.ends_with('\n') {
        out.partial = true;
        text.rfind('\n').map_or("", |end| &text[..end])
    } else {
        &text[..]
    };
    let mut records = Vec::new();
    for (index, line) in complete.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(map)) => records.push((index + 1, map)),
            Ok(_) => out.bad_lines.push(BadLine {
                file: path.display().to_string(),
                line: index + 1,
                error: "not a json object".to_owned(),
            }),
            Err(error) => out.bad_lines.push(BadLine {
                file: path.display().to_string(),
                line: index + 1,
                error: error.to_string(),
            }),
        }
    }
    Ok(records)
}

/// The string at `key`, or empty.
pub fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Adds items with keys made unique by counting repeats.
pub struct Builder {
    pub session: Session,
    seen: HashMap<String, usize>,
}

impl Builder {
    pub fn new(id: &str, cwd: &str) -> Builder {
        Builder {
            session: Session {
                id: id.to_owned(),
                cwd: cwd.to_owned(),
                ..Default::default()
            },
            seen: HashMap::new(),
        }
    }

    pub fn push(&mut self, payload: Value, at_ms: i64, key: String) {
        let n = self.seen.entry(key.clone()).or_default();
        *n += 1;
        let key = if *n == 1 { key } else { format!("{key}#{n}") };
        self.session.items.push(Item {
            payload,
            at_ms,
            key,
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Finding files.

/// The home directory, or an empty path when `HOME` is unset.
pub fn home() -> PathBuf {
    crate::paths::home().unwrap_or_default()
}

/// The directory an environment variable names, else `default` under the home directory.
pub fn env_dir(var: &str, default: &str) -> PathBuf {
    crate::paths::env_dir(var).unwrap_or_else(|| home().join(default))
}

/// `root` itself when it is a file, or every file under it accepted by `keep`, sorted.
pub fn files_at(root: PathBuf, keep: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    if root.is_file() {
        return vec![root];
    }
    let mut files = Vec::new();
    walk(&root, keep, &mut files);
    files.sort();
    files
}

/// Every file under `dir` (recursively) accepted by `keep`.
fn walk(dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, keep, out);
        } else if keep(&path) {
            out.push(path);
        }
    }
}

/// The last component of a path.
pub fn name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
