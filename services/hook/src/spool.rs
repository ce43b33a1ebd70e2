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

/// Extension of spooled event files.
const EXTENSION: &str = "ev";

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

    /// Durably store one encoded event under its id.
    pub fn write(&self, id: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
        private_dir(&self.dir)?;
        let path = self.dir.join(format!("{id}.{EXTENSION}"));
        let temp = self.dir.join(format!(".{id}.{}.tmp", std::process::id()));
        let mut file = private_options().create_new(true).open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, &path)?;
        // The rename itself must survive a power cut, which takes an fsync of the directory.
        File::open(&self.dir)?.sync_all()?;
        Ok(path)
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
}
