//! The spool: where events wait, on local disk, while NATS cannot take them.
//!
//! Each spooled event is one file named after its event id (`<id>.ev`, the protobuf bytes),
//! written to a temporary name, fsync'd and renamed into place, then the directory is fsync'd:
//! a crash leaves either the whole event or nothing, and no two hook processes ever write the
//! same file, so spooling needs no lock. Event ids start with nanoseconds, so sorting the names
//! replays events in the order they were captured. Files are never modified after the rename;
//! replay deletes each one only after JetStream acknowledged it, and a replay cut short leaves
//! the rest for the next run. Only one process replays at a time (an advisory lock on `.lock`),
//! so replays never interleave.

use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Extension of spooled event files.
const EXTENSION: &str = "ev";
/// Extension of an event set aside: one that NATS refused again and again while the events
/// after it went through, kept for a person instead of blocking every later replay.
const FAILED: &str = "failed";
/// Extension of a file that is not an event any more (damaged on disk), set aside too.
const CORRUPT: &str = "corrupt";
/// Extension of the count of an event's refusals (a small file beside it).
const FAILURES: &str = "failures";
/// One line per event dropped to keep the spool within its bounds: `<event id> <reason>`.
const DROPPED_LOG: &str = "dropped.log";
/// Refusals after which an event is set aside.
pub const MAX_FAILURES: u32 = 3;

/// How much the spool may hold: beyond either bound the oldest events are dropped (and
/// counted), so a machine offline for weeks, or a host stuck in a loop, cannot fill the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub max_bytes: u64,
    pub max_age: Duration,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            max_bytes: 256 * 1024 * 1024,
            max_age: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

/// What the spool holds, for `mneme status` and `mneme doctor`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events waiting to be replayed.
    pub pending: usize,
    /// Their size on disk.
    pub bytes: u64,
    /// When the oldest of them was captured (Unix milliseconds), when there is one.
    pub oldest_ms: Option<i64>,
    /// Events dropped to keep within the bounds, ever.
    pub dropped: usize,
    /// Events set aside (refused again and again, or damaged).
    pub set_aside: usize,
}

/// A spool directory.
#[derive(Debug, Clone)]
pub struct Spool {
    dir: PathBuf,
}

/// Held while replaying; dropping it releases the lock.
#[derive(Debug)]
pub struct ReplayLock {
    _file: File,
}

impl Spool {
    /// A spool in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Spool {
        Spool { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Durably store one encoded event under its id. On failure (a full disk) nothing is left
    /// behind: no temporary file, and every event spooled before is untouched.
    pub fn write(&self, id: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
        private_dir(&self.dir)?;
        let path = self.dir.join(format!("{id}.{EXTENSION}"));
        let temp = self.dir.join(format!(".{id}.{}.tmp", std::process::id()));
        let written = (|| {
            let mut file = private_options().create_new(true).open(&temp)?;
            file.write_all(bytes)?;
            file.sync_all()?;
            drop(file);
            fs::rename(&temp, &path)
        })();
        if let Err(error) = written {
            let _ = fs::remove_file(&temp);
            return Err(error);
        }
        // The rename itself must survive a power cut, which takes an fsync of the directory.
        File::open(&self.dir)?.sync_all()?;
        Ok(path)
    }

    /// Drop the oldest events beyond `bounds` (older than its age, then as many as it takes to
    /// fit its size), each named in `dropped.log`; returns how many were dropped.
    pub fn enforce(&self, bounds: Bounds, now_ms: i64) -> std::io::Result<usize> {
        let mut files: Vec<(PathBuf, u64)> = self
            .pending()?
            .into_iter()
            .filter_map(|path| fs::metadata(&path).ok().map(|m| (path, m.len())))
            .collect();
        let mut total: u64 = files.iter().map(|(_, size)| size).sum();
        let oldest_kept = now_ms.saturating_sub(bounds.max_age.as_millis() as i64);
        let mut dropped = 0;
        // Oldest first: the names sort by capture time.
        for (path, size) in files.drain(..) {
            let too_old = captured_ms(&path).is_some_and(|at| at < oldest_kept);
            if !too_old && total <= bounds.max_bytes {
                break;
            }
            let reason = if too_old {
                "older than the spool's age bound"
            } else {
                "over the spool's size bound"
            };
            match fs::remove_file(&path) {
                Ok(()) => {}
                // Replayed or dropped by another hook run meanwhile.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            let _ = fs::remove_file(path.with_extension(FAILURES));
            total = total.saturating_sub(size);
            dropped += 1;
            let id = path.file_stem().unwrap_or_default().to_string_lossy();
            self.append_dropped(&format!("{id} {reason}\n"))?;
        }
        Ok(dropped)
    }

    fn append_dropped(&self, line: &str) -> std::io::Result<()> {
        // One short append per line, so concurrent hook runs never interleave within a line.
        private_options()
            .append(true)
            .create(true)
            .open(self.dir.join(DROPPED_LOG))?
            .write_all(line.as_bytes())
    }

    /// Count one more refusal of the event in `path`; returns the count so far.
    pub fn count_failure(&self, path: &Path) -> std::io::Result<u32> {
        let counter = path.with_extension(FAILURES);
        let count = fs::read_to_string(&counter)
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok())
            .unwrap_or(0)
            .saturating_add(1);
        fs::write(&counter, count.to_string())?;
        Ok(count)
    }

    /// Forget the refusals counted for the event in `path` (it went through, or was set aside).
    pub fn clear_failures(&self, path: &Path) {
        let _ = fs::remove_file(path.with_extension(FAILURES));
    }

    /// Move the event in `path` aside (`<id>.failed`, or `<id>.corrupt` when `damaged`), so it no
    /// longer blocks the events after it; a person can look at it, and `mneme status` counts it.
    pub fn set_aside(&self, path: &Path, damaged: bool) -> std::io::Result<PathBuf> {
        let aside = path.with_extension(if damaged { CORRUPT } else { FAILED });
        fs::rename(path, &aside)?;
        self.clear_failures(path);
        Ok(aside)
    }

    /// What the spool holds now.
    pub fn stats(&self) -> Stats {
        let mut stats = Stats {
            dropped: fs::read_to_string(self.dir.join(DROPPED_LOG))
                .map_or(0, |log| log.lines().count()),
            ..Stats::default()
        };
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return stats;
        };
        for path in entries.filter_map(Result::ok).map(|e| e.path()) {
            match path.extension().and_then(|e| e.to_str()) {
                Some(EXTENSION) => {
                    stats.pending += 1;
                    stats.bytes += fs::metadata(&path).map_or(0, |m| m.len());
                    if let Some(at) = captured_ms(&path) {
                        stats.oldest_ms = Some(stats.oldest_ms.map_or(at, |o| o.min(at)));
                    }
                }
                Some(FAILED | CORRUPT) => stats.set_aside += 1,
                _ => {}
            }
        }
        stats
    }

    /// Spooled event files, oldest first.
    pub fn pending(&self) -> std::io::Result<Vec<PathBuf>> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == EXTENSION))
            .collect();
        files.sort();
        Ok(files)
    }

    /// Whether the event `id` waits in the spool.
    pub fn holds(&self, id: &str) -> bool {
        self.dir.join(format!("{id}.{EXTENSION}")).exists()
    }

    /// Whether any event is waiting. Cheaper than [`Spool::pending`]: stops at the first file.
    pub fn has_pending(&self) -> bool {
        fs::read_dir(&self.dir).is_ok_and(|mut entries| {
            entries.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == EXTENSION)))
        })
    }

    /// Take the replay lock without waiting; `None` when another process is replaying.
    pub fn try_lock(&self) -> std::io::Result<Option<ReplayLock>> {
        private_dir(&self.dir)?;
        let file = private_options()
            .create(true)
            .truncate(false)
            .open(self.dir.join(".lock"))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(ReplayLock { _file: file })),
            Err(fs::TryLockError::WouldBlock) => Ok(None),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }
}

/// When the event in a spool file was captured: its id begins with 16 hex digits of Unix
/// nanoseconds. `None` for a name that is not an event id.
fn captured_ms(path: &Path) -> Option<i64> {
    let stem = path.file_stem()?.to_str()?;
    let nanos = u64::from_str_radix(stem.get(..16)?, 16).ok()?;
    i64::try_from(nanos / 1_000_000).ok()
}

/// Create `dir` (and missing parents, such as the data directory) owner-only (0700), whatever
/// the umask, and narrow it when it exists readable by others: spooled events hold what the
/// agent saw. The hook links no store, so this is its own copy of the store's rule.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
        builder.mode(0o700);
        builder.create(dir)?;
        let mode = fs::metadata(dir)?.permissions().mode();
        // A shared directory (sticky bit, like `/tmp`) is never narrowed.
        if mode & 0o077 != 0 && mode & 0o1000 == 0 {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
        }
        Ok(())
    }
    #[cfg(not(unix))]
    builder.create(dir)
}

/// Options that create a file owner-only (0600), for writing.
pub fn private_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spooled_events_come_back_in_id_order_and_lock_is_exclusive() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path().join("spool"));
        assert!(!spool.has_pending());
        assert!(spool.pending().unwrap().is_empty());
        let ids: Vec<String> = (0..5).map(|_| proto::new_event_id()).collect();
        for id in ids.iter().rev() {
            spool.write(id, id.as_bytes()).unwrap();
        }
        assert!(spool.has_pending());
        let pending = spool.pending().unwrap();
        let names: Vec<String> = pending
            .iter()
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ids);
        assert_eq!(fs::read(&pending[0]).unwrap(), ids[0].as_bytes());

        let first = spool.try_lock().unwrap();
        assert!(first.is_some());
        assert!(spool.try_lock().unwrap().is_none());
        drop(first);
        assert!(spool.try_lock().unwrap().is_some());
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file_and_keeps_what_was_spooled() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path().join("spool"));
        let first = proto::new_event_id();
        let kept = spool.write(&first, b"first").unwrap();
        // The rename cannot replace a directory, as a full disk cannot take the bytes: the
        // write fails after its temporary file was made.
        let second = proto::new_event_id();
        let blocker = spool.dir().join(format!("{second}.{EXTENSION}"));
        fs::create_dir(&blocker).unwrap();
        assert!(spool.write(&second, b"second").is_err());
        let temporary = fs::read_dir(spool.dir())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .count();
        assert_eq!(temporary, 0, "a temporary file was left behind");
        assert_eq!(fs::read(&kept).unwrap(), b"first");
    }

    #[test]
    fn the_spool_keeps_within_its_bounds_dropping_the_oldest_and_counting_them() {
        use hosts::adapter::now_ms;
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path().join("spool"));
        // An event captured 40 days ago: its id's first 16 hex digits are its nanoseconds.
        let old_nanos = ((now_ms() - 40 * 24 * 3600 * 1000) as u64) * 1_000_000;
        let old = format!("{old_nanos:016x}{:016x}", 7);
        spool.write(&old, &[0; 10]).unwrap();
        let ids: Vec<String> = (0..4).map(|_| proto::new_event_id()).collect();
        for id in &ids {
            spool.write(id, &[1; 100]).unwrap();
        }
        let bounds = Bounds {
            max_bytes: 250,
            max_age: Duration::from_secs(30 * 24 * 3600),
        };
        // The 40-day-old one goes for its age, then the two oldest of the rest for the size.
        assert_eq!(spool.enforce(bounds, now_ms()).unwrap(), 3);
        let left: Vec<String> = spool
            .pending()
            .unwrap()
            .iter()
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ids[2..]);
        let stats = spool.stats();
        assert_eq!((stats.pending, stats.bytes, stats.dropped), (2, 200, 3));
        let log = fs::read_to_string(spool.dir().join(DROPPED_LOG)).unwrap();
        assert!(log.starts_with(&format!("{old} older than")), "{log}");
        // Within bounds nothing more goes.
        assert_eq!(spool.enforce(bounds, now_ms()).unwrap(), 0);

        // Refusals are counted per event, and an event set aside stops being pending.
        let first = &spool.pending().unwrap()[0];
        assert_eq!(spool.count_failure(first).unwrap(), 1);
        assert_eq!(spool.count_failure(first).unwrap(), 2);
        spool.set_aside(first, false).unwrap();
        let stats = spool.stats();
        assert_eq!((stats.pending, stats.set_aside), (1, 1));
        assert!(!first.with_extension(FAILURES).exists());
    }
}
