//! The hosts' own session files, turned back into the hook payloads each host would have sent:
//! what every host's `import.rs` shares, and the [`Import`] each declares.
//!
//! Each reader is pure: files in, [`Session`]s out, each a list of [`Item`]s holding a payload
//! in the host's own hook shape (so the host's adapter normalises it exactly as
//! it would a live event), the time of the record behind it, and a key built from the host's
//! own record ids (tool call ids, message ids, line timestamps) from which the import derives
//! the event id. Lines that do not parse are reported with their file and line; a last line
//! without its newline is still being written and is left for the next import.
//!
//! The files are not trusted: they are read a line at a time, a line longer than
//! [`MAX_LINE_BYTES`] is reported and skipped without being held in memory, no more than
//! [`MAX_FILE_BYTES`] of one file is read, a record whose time or number is malformed or out of
//! range is reported like a line that does not parse, and finding files never follows a
//! symbolic link to a directory, so a link loop cannot make the walk endless.

use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead as _, Read as _};
use std::path::{Path, PathBuf};

/// The longest line read, 16 MiB. The hosts write one record a line and a record holds at most
/// a tool's output or a pasted file, which they cap well below this; a longer line is reported
/// as a bad line and skipped, and the lines after it are still read.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// The most of one file read, 1 GiB: far beyond the longest session seen, while a file that
/// never ends (a device, a runaway writer) still ends the read. What lies past it is reported
/// as one bad line.
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// The latest time accepted, 9999-12-31T23:59:59.999Z in Unix milliseconds; a record claiming
/// a later (or a negative) time is malformed.
pub const MAX_TIME_MS: i64 = 253_402_300_799_999;

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
    /// The 1-based line number; 0 when the file is one JSON document (Gemini's `.json`, Kiro's
    /// session metadata) and the error is in a part of it rather than on a line.
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

impl Read {
    /// Report line `line` of `file` as not imported, for `error`.
    pub fn bad_line(&mut self, file: &Path, line: usize, error: impl Into<String>) {
        self.bad_lines.push(BadLine {
            file: file.display().to_string(),
            line,
            error: error.into(),
        });
    }
}

/// How much of a file is read: [`MAX_LINE_BYTES`] and [`MAX_FILE_BYTES`], smaller in tests.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub line: usize,
    pub file: u64,
}

/// The limits every import reads with.
pub const LIMITS: Limits = Limits {
    line: MAX_LINE_BYTES,
    file: MAX_FILE_BYTES,
};

/// Read `path` a line at a time, handing each complete line (1-based number, text without its
/// line ending) to `each`, or the reason it was not read: longer than `limits.line` (its bytes
/// are skipped, never held), or past `limits.file` (reported once; nothing more is read).
/// Bytes that are not UTF-8 are replaced, as a lossy conversion of the whole file would.
/// Returns whether the file ends in a line without its newline, which is still being written
/// and is left out for the next import.
pub fn read_lines(
    path: &Path,
    limits: Limits,
    mut each: impl FnMut(usize, Result<&str, String>),
) -> std::io::Result<bool> {
    let file = std::fs::File::open(path)?;
    // One byte past the cap is read, so a file of exactly the cap is read whole and a longer
    // one is known to be longer.
    let mut reader = std::io::BufReader::new(file.take(limits.file.saturating_add(1)));
    let mut line = Vec::new();
    let mut number = 0;
    let mut consumed: u64 = 0;
    loop {
        // Read up to the next newline, keeping at most `limits.line` bytes of it.
        let mut too_long = false;
        let mut ended = false;
        line.clear();
        loop {
            let available = reader.fill_buf()?;
            if available.is_empty() {
                break;
            }
            let (chunk, newline) = match available.iter().position(|&b| b == b'\n') {
                Some(at) => (&available[..at], true),
                None => (available, false),
            };
            if !too_long && line.len() + chunk.len() <= limits.line {
                line.extend_from_slice(chunk);
            } else {
                too_long = true;
                line.clear();
            }
            let used = chunk.len() + usize::from(newline);
            reader.consume(used);
            consumed += used as u64;
            if newline {
                ended = true;
                break;
            }
        }
        if consumed > limits.file {
            number += 1;
            each(
                number,
                Err(format!(
                    "the file is longer than {} bytes; the rest of it is not read",
                    limits.file
                )),
            );
            return Ok(false);
        }
        if !ended {
            // The end of the file: anything after the last newline is still being written.
            return Ok(too_long || !line.is_empty());
        }
        number += 1;
        if too_long {
            each(
                number,
                Err(format!("line longer than {} bytes", limits.line)),
            );
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        each(number, Ok(text.trim_end_matches('\r')));
    }
}

/// The JSON objects of a JSONL file, with bad lines reported and a partial last line left out.
pub fn read_jsonl(
    path: &Path,
    out: &mut Read,
) -> std::io::Result<Vec<(usize, Map<String, Value>)>> {
    read_jsonl_with(path, LIMITS, out)
}

/// [`read_jsonl`] within `limits`.
pub fn read_jsonl_with(
    path: &Path,
    limits: Limits,
    out: &mut Read,
) -> std::io::Result<Vec<(usize, Map<String, Value>)>> {
    let mut records = Vec::new();
    let mut bad = Vec::new();
    let partial = read_lines(path, limits, |number, line| {
        let line = match line {
            Ok(line) => line.trim(),
            Err(error) => return bad.push((number, error)),
        };
        if line.is_empty() {
            return;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(map)) => records.push((number, map)),
            Ok(_) => bad.push((number, "not a json object".to_owned())),
            Err(error) => bad.push((number, error.to_string())),
        }
    })?;
    out.partial |= partial;
    for (number, error) in bad {
        out.bad_line(path, number, error);
    }
    Ok(records)
}

/// The whole of a file that is one JSON document, refused when it is longer than
/// `limits.file` rather than read into memory.
pub fn read_capped(path: &Path, limits: Limits) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limits.file.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limits.file {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("longer than {} bytes", limits.file),
        ));
    }
    Ok(bytes)
}

/// A malformed value, shortened for an error message (a record's whole text could be
/// megabytes); cut by characters, never inside one.
fn shown(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((end, _)) => format!("{:?}…", &text[..end]),
        None => format!("{text:?}"),
    }
}

/// Milliseconds since the epoch of an RFC 3339 time, as every host writes its records' times
/// (`common::time::parse_rfc3339_ms`, which accepts only real times: `2026-13-99T99:00:00Z` is
/// none), or `None` when it is not one or lies before 1970 or after the year 9999.
pub fn parse_time(text: &str) -> Option<i64> {
    common::time::parse_rfc3339_ms(text).filter(|ms| (0..=MAX_TIME_MS).contains(ms))
}

/// The time in the string `value`: `Ok(None)` when there is none (absent, null or empty),
/// an error naming the value when it is not a time [`parse_time`] accepts.
pub fn time_of(value: Option<&Value>) -> Result<Option<i64>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.is_empty() => Ok(None),
        Some(Value::String(text)) => parse_time(text)
            .map(Some)
            .ok_or_else(|| format!("malformed timestamp {}", shown(text))),
        Some(other) => Err(format!("malformed timestamp {}", shown(&other.to_string()))),
    }
}

/// The time in the integer `value`, counted in units of `unit_ms` milliseconds (1 for
/// milliseconds, 1000 for seconds): `Ok(None)` when absent or null, an error when it is not an
/// integer or the time is before 1970 or past [`MAX_TIME_MS`] (checked, never overflowing).
pub fn time_in(value: Option<&Value>, unit_ms: i64) -> Result<Option<i64>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(number) => number
            .as_i64()
            .and_then(|n| n.checked_mul(unit_ms))
            .filter(|ms| (0..=MAX_TIME_MS).contains(ms))
            .map(Some)
            .ok_or_else(|| {
                format!(
                    "timestamp {} is not a time in range",
                    shown(&number.to_string())
                )
            }),
    }
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

/// `root` itself when it is a file, or every regular file under it accepted by `keep`, sorted.
///
/// `root` may itself be a symbolic link (a history kept on another disk), but links to
/// directories below it are not followed: a link back up the tree would otherwise make the
/// walk endless, and one to `/` would walk the whole machine. Each directory is also read at
/// most once, so even a loop no link makes (a bind mount) ends. Links to files are followed
/// (they cannot loop), and what is not a regular file (a FIFO, a device) is never kept, so
/// reading cannot block or never end.
pub fn files_at(root: PathBuf, keep: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    if root.is_file() {
        return vec![root];
    }
    let mut files = Vec::new();
    let mut seen = HashSet::new();
    walk(&root, keep, &mut seen, &mut files);
    files.sort();
    files
}

/// Every regular file under `dir` (recursively, without following links to directories)
/// accepted by `keep`; `seen` holds the directories already read, by their canonical path.
fn walk(
    dir: &Path,
    keep: &dyn Fn(&Path) -> bool,
    seen: &mut HashSet<PathBuf>,
    out: &mut Vec<PathBuf>,
) {
    let Ok(canonical) = std::fs::canonicalize(dir) else {
        return;
    };
    if !seen.insert(canonical) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            walk(&path, keep, seen, out);
        } else if (kind.is_file() || (kind.is_symlink() && path.is_file())) && keep(&path) {
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

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Limits = Limits {
        line: 64,
        file: 1 << 20,
    };

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn an_oversized_line_is_reported_and_the_lines_after_it_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let long = format!(r#"{{"n":2,"text":"{}"}}"#, "x".repeat(200));
        let path = write(
            dir.path(),
            "s.jsonl",
            &format!("{{\"n\":1}}\n{long}\n{{\"n\":3}}\r\n\n{{\"n\":5}}\n"),
        );
        let mut out = Read::default();
        let records = read_jsonl_with(&path, SMALL, &mut out).unwrap();
        let read: Vec<(usize, i64)> = records
            .iter()
            .map(|(line, r)| (*line, r["n"].as_i64().unwrap()))
            .collect();
        assert_eq!(read, [(1, 1), (3, 3), (5, 5)]);
        assert_eq!(out.bad_lines.len(), 1);
        assert_eq!(out.bad_lines[0].line, 2);
        assert!(out.bad_lines[0].error.contains("longer than 64 bytes"));
        assert!(!out.partial);
    }

    #[test]
    fn a_line_still_being_written_is_left_out_even_when_long() {
        let dir = tempfile::tempdir().unwrap();
        for tail in ["{\"n\":2", &"y".repeat(500)] {
            let path = write(dir.path(), "s.jsonl", &format!("{{\"n\":1}}\n{tail}"));
            let mut out = Read::default();
            let records = read_jsonl_with(&path, SMALL, &mut out).unwrap();
            assert_eq!(records.len(), 1);
            assert!(
                out.partial && out.bad_lines.is_empty(),
                "{:?}",
                out.bad_lines
            );
        }
    }

    #[test]
    fn no_more_than_the_file_cap_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let line = "{\"n\":1}\n";
        let path = write(dir.path(), "s.jsonl", &line.repeat(10));
        let limits = Limits {
            line: 64,
            file: (line.len() * 4) as u64,
        };
        let mut out = Read::default();
        let records = read_jsonl_with(&path, limits, &mut out).unwrap();
        assert_eq!(records.len(), 4);
        assert_eq!(out.bad_lines.len(), 1);
        assert_eq!(out.bad_lines[0].line, 5);
        assert!(
            out.bad_lines[0]
                .error
                .contains("the rest of it is not read")
        );
        // A file of exactly the cap is read whole.
        let path = write(dir.path(), "t.jsonl", &line.repeat(4));
        let mut out = Read::default();
        assert_eq!(read_jsonl_with(&path, limits, &mut out).unwrap().len(), 4);
        assert!(out.bad_lines.is_empty());
        // A document longer than the cap is refused whole.
        assert!(read_capped(&path, Limits { line: 64, file: 8 }).is_err());
        assert_eq!(read_capped(&path, limits).unwrap().len(), line.len() * 4);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_replaced_as_before() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, b"{\"t\":\"a\xffb\"}\n").unwrap();
        let mut out = Read::default();
        let records = read_jsonl_with(&path, SMALL, &mut out).unwrap();
        assert_eq!(records[0].1["t"], "a\u{fffd}b");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_loop_in_a_history_directory_ends_and_finds_each_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sessions");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        write(&root.join("a/b"), "one.jsonl", "{}\n");
        // Links back up the tree, to itself, and across: none is followed.
        std::os::unix::fs::symlink(&root, root.join("a/b/up")).unwrap();
        std::os::unix::fs::symlink("..", root.join("a/parent")).unwrap();
        std::os::unix::fs::symlink("self", root.join("a/self")).unwrap();
        std::os::unix::fs::symlink(root.join("a/b"), root.join("across")).unwrap();
        // A link to a file is followed; a FIFO is never kept.
        std::os::unix::fs::symlink(root.join("a/b/one.jsonl"), root.join("two.jsonl")).unwrap();
        let fifo = root.join("pipe.jsonl");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        let files = files_at(root.clone(), &|p| {
            p.extension().is_some_and(|e| e == "jsonl")
        });
        assert_eq!(files, [root.join("a/b/one.jsonl"), root.join("two.jsonl")]);
        if made.is_ok_and(|s| s.success()) {
            assert!(fifo.exists());
        }
        // The root itself may be a link.
        let linked = dir.path().join("linked");
        std::os::unix::fs::symlink(&root, &linked).unwrap();
        assert_eq!(files_at(linked, &|p| p.ends_with("one.jsonl")).len(), 1);
    }

    #[test]
    fn times_are_real_ones_or_none() {
        for (text, ms) in [
            ("1970-01-01T00:00:00Z", 0),
            ("2026-02-18T15:09:10.006Z", 1_771_427_350_006),
            ("2026-02-18T16:09:10.006+01:00", 1_771_427_350_006),
            ("2026-02-18T15:09:10.123456789", 1_771_427_350_123),
            ("2024-02-29T00:00:00z", 1_709_164_800_000),
        ] {
            assert_eq!(parse_time(text), Some(ms), "{text}");
            assert_eq!(common::time::parse_rfc3339_ms(text), Some(ms), "{text}");
        }
        for text in [
            "",
            "yesterday",
            "2026-13-99T..",
            "2026-13-01T00:00:00Z",
            "2026-00-10T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-02-18T24:00:00Z",
            "2026-02-18T23:60:00Z",
            "2026-02-18T15:09:10.Z",
            "2026-02-18T15:09:10+0100",
            "2026-02-18T15:09:10+25:00",
            "2026-02-18T15:09:10Zjunk",
            "2026-02-18 15:09:10Z",
            "+026-02-18T15:09:10Z",
            "2026-0é-18T15:09:10Z",
            "2026-02-18T15:09:1é",
            "２０２６-02-18T15:09:10Z",
            "1969-12-31T23:59:59Z",
        ] {
            assert_eq!(parse_time(text), None, "{text}");
        }
        assert_eq!(time_of(None), Ok(None));
        assert_eq!(time_of(Some(&Value::from(""))), Ok(None));
        let error = time_of(Some(&Value::from("2026-13-99T00:00:00Z".repeat(100)))).unwrap_err();
        assert!(
            error.starts_with("malformed timestamp") && error.len() < 80,
            "{error}"
        );
        assert!(time_of(Some(&Value::from(17))).is_err());
    }

    #[test]
    fn integer_times_never_overflow() {
        let at = |v: Value, unit| time_in(Some(&v), unit);
        assert_eq!(
            at(Value::from(1_779_256_800), 1000),
            Ok(Some(1_779_256_800_000))
        );
        assert_eq!(at(Value::from(5), 1), Ok(Some(5)));
        assert_eq!(time_in(None, 1000), Ok(None));
        for bad in [
            Value::from(i64::MAX),
            Value::from(u64::MAX),
            Value::from(-1),
            Value::from(1.5),
            Value::from("1779256800"),
            serde_json::from_str("1e400").unwrap_or(Value::from(f64::MAX)),
        ] {
            assert!(at(bad.clone(), 1000).is_err(), "{bad}");
        }
        assert!(at(Value::from(MAX_TIME_MS), 1).is_ok());
        assert!(at(Value::from(MAX_TIME_MS + 1), 1).is_err());
    }
}
