//! The SQLite store: [`Store::open`] gives a pool in WAL mode with a busy timeout, sqlite-vec
//! registered on every connection and the migrations in `migrations/` applied.
//!
//! Architecture invariant: every table has exactly one writing service (named in its migration);
//! others only read. The store itself holds no domain SQL: each service owns the statements for
//! the tables it writes.

pub mod fts;

use sqlx::sqlite::SqliteSynchronous;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use std::path::{Path, PathBuf};
use std::str::FromStr as _;
use std::sync::Once;
use std::time::Duration;

/// Errors a caller may want to tell apart.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the store {path}: {source}")]
    Open { path: PathBuf, source: sqlx::Error },
    #[error("cannot migrate the store {path}: {source}")]
    Migrate {
        path: PathBuf,
        source: sqlx::migrate::MigrateError,
    },
    #[error("store {path} does not exist yet")]
    Missing { path: PathBuf },
    /// Another process runs the same service on this store.
    #[error(
        "the store {path} is in use: {holder} runs {service} on it; stop that mneme first, or give this one a store of its own (MNEME_HOME)"
    )]
    Locked {
        path: PathBuf,
        service: String,
        /// Who holds it, as far as its lock file says ("process 1234 (mneme)").
        holder: String,
    },
}

/// Held for as long as a service writes the store: the exclusive lock on
/// `<store>.<service>.lock`, released by the kernel when the process ends, however it ends.
#[derive(Debug)]
pub struct WriterLock {
    _file: std::fs::File,
}

/// The migrations compiled into every binary, applied by [`Store::open`].
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// An open store.
#[derive(Clone, Debug)]
pub struct Store {
    pool: SqlitePool,
    path: PathBuf,
}

impl Store {
    /// Open (creating when needed) the store at `path` for writing, and migrate it.
    pub async fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            create_private_dirs(dir).map_err(|source| StoreError::CreateDir {
                path: dir.to_owned(),
                source,
            })?;
        }
        // SQLite creates the -wal and -shm files with the database file's permissions, so the
        // database file is made (or narrowed to) owner-only before SQLite ever opens it. An
        // existing database is only narrowed, never opened here: closing any descriptor of a
        // file drops every POSIX lock this process holds on it, and SQLite's connections in this
        // process (another service of `mneme up`, an earlier pool) would lose theirs. A process
        // whose last connection then closed would find the database unused, checkpoint it and
        // delete the WAL under those connections, which then read a malformed database.
        for suffix in ["", "-wal", "-shm"] {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            let file = PathBuf::from(name);
            let made = if suffix.is_empty() {
                private_file(&file)
            } else {
                narrow_file(&file)
            };
            made.map_err(|source| StoreError::CreateDir { path: file, source })?;
        }
        // Several services open the same new store at once (`mneme up`, compose). Switching a
        // new file to WAL and migrating it both need the database to themselves, and sqlx
        // serialises neither, so racing openers fail with "database is locked" or try to create
        // the schema twice. An exclusive lock on a file beside the database makes them take
        // turns; later opens find WAL set and the migrations applied.
        let lock = lock_file(path).await?;
        let pool = pool(path, false, 4).await?;
        let migrated = MIGRATOR.run(&pool).await;
        drop(lock);
        migrated.map_err(|source| StoreError::Migrate {
            path: path.to_owned(),
            source,
        })?;
        Ok(Store {
            pool,
            path: path.to_owned(),
        })
    }

    /// Take the writer lock of `service` on this store, or say who holds it. Two processes
    /// running one service on one store would consume their streams into the same tables (two
    /// `mneme up` sharing a home, two boxes sharing a volume); the second refuses to start.
    pub fn hold_writer(&self, service: &str) -> Result<WriterLock, StoreError> {
        use std::io::{Read as _, Seek as _, Write as _};
        let (mut file, lock_path) = open_lock(&self.path, &format!(".{service}.lock"))?;
        let error = |source| StoreError::CreateDir {
            path: lock_path.clone(),
            source,
        };
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(StoreError::Locked {
                    path: self.path.clone(),
                    service: service.to_owned(),
                    holder: holder(text.trim()),
                });
            }
            Err(std::fs::TryLockError::Error(source)) => return Err(error(source)),
        }
        // Who holds it, for the message the next one gets: the pid and the host, since a pid
        // means nothing in another container or on another machine sharing the volume. Best
        // effort: the lock is what counts.
        let _ = file.set_len(0);
        let _ = file.rewind();
        let _ = write!(file, "{} {}", std::process::id(), host_name());
        Ok(WriterLock { _file: file })
    }

    /// Open an existing store for reading only; it must already exist and be migrated.
    pub async fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        if !path.exists() {
            return Err(StoreError::Missing {
                path: path.to_owned(),
            });
        }
        let pool = pool(path, true, 4).await?;
        Ok(Store {
            pool,
            path: path.to_owned(),
        })
    }

    /// The connection pool.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes on disk: the database file plus its WAL and shared-memory files.
    pub fn size_bytes(&self) -> u64 {
        ["", "-wal", "-shm"]
            .iter()
            .filter_map(|suffix| {
                let mut name = self.path.as_os_str().to_owned();
                name.push(suffix);
                std::fs::metadata(PathBuf::from(name)).ok()
            })
            .map(|m| m.len())
            .sum()
    }

    /// Checkpoint the WAL and close every connection.
    pub async fn close(self) {
        let _ = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&self.pool)
            .await;
        self.pool.close().await;
    }
}

/// Begin a write transaction that takes SQLite's write lock at once (`BEGIN IMMEDIATE`).
///
/// Several services write one WAL database. A deferred transaction that reads first and writes
/// later cannot wait for the lock when another writer committed in between: SQLite answers
/// SQLITE_BUSY at once instead of honouring the busy timeout. Taking the lock up front makes
/// writers queue on the busy timeout instead of failing.
pub async fn begin_write(
    pool: &SqlitePool,
) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, sqlx::Error> {
    pool.begin_with("BEGIN IMMEDIATE").await
}

/// Owner-only permissions for mneme's directories and files: the store, the spool and the
/// exports hold everything an agent saw, which other local users must not read.
#[cfg(unix)]
const DIR_MODE: u32 = 0o700;
#[cfg(unix)]
const FILE_MODE: u32 = 0o600;

/// Create `dir` and any missing parents owner-only (0700), whatever the process umask. An
/// existing directory is left as it is: it may be shared (`/tmp`), and only mneme's own data
/// directory is narrowed, by [`private_dir`].
pub fn create_private_dirs(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, DIR_MODE);
    builder.create(dir)
}

/// Make mneme's data directory `dir` owner-only: create it 0700, or narrow it to 0700 when
/// group or others may read it (saying so in the log). A directory with the sticky bit (a
/// shared one such as `/tmp`, given as `MNEME_HOME` by mistake) is never narrowed.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    create_private_dirs(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir)?.permissions().mode();
        if mode & 0o077 != 0 && mode & 0o1000 == 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))?;
            tracing::warn!(
                dir = %dir.display(),
                was = format!("{:o}", mode & 0o7777),
                "mneme's data directory was readable by other users; narrowed it to 0700"
            );
        }
    }
    Ok(())
}

/// Create the file at `path` owner-only (0600) when it does not exist, or narrow an existing
/// one to 0600 when group or others may read it (saying so in the log). An existing file is
/// never opened: it may be the store, whose SQLite connections in this process would lose
/// their locks when the descriptor closed (see [`Store::open`]).
pub fn private_file(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.create_new(true).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, FILE_MODE);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => narrow_file(path),
        Err(e) => Err(e),
    }
}

/// Narrow an existing file to owner-only (0600) when group or others may read it; a missing
/// file is nothing to do.
fn narrow_file(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = match std::fs::metadata(path) {
            Ok(metadata) => metadata.permissions().mode(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        if mode & 0o077 != 0 {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(FILE_MODE))?;
            tracing::warn!(
                file = %path.display(),
                was = format!("{:o}", mode & 0o777),
                "a store file was readable by other users; narrowed it to 0600"
            );
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// "process 1234 (mneme)" from what a lock file holds (a pid and a host name), with the
/// program's name when the holder runs on this host, and the host's name when it does not.
fn holder(text: &str) -> String {
    let mut parts = text.split_whitespace();
    let Some(pid) = parts.next().and_then(|p| p.parse::<u32>().ok()) else {
        return "another process".to_owned();
    };
    let host = parts.next().unwrap_or_default();
    if !host.is_empty() && host != host_name() {
        return format!("process {pid} on {host} (another container or machine)");
    }
    match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(name) => format!("process {pid} ({})", name.trim()),
        Err(_) => format!("process {pid}"),
    }
}

/// This machine's (or container's) name, as the kernel says it; empty where it cannot tell.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_default()
}

/// Open (creating it owner-only) the lock file beside the store at `path` named by `suffix`,
/// for reading and writing; the caller takes the lock.
fn open_lock(path: &Path, suffix: &str) -> Result<(std::fs::File, PathBuf), StoreError> {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    let lock_path = PathBuf::from(name);
    let error = |source| StoreError::CreateDir {
        path: lock_path.clone(),
        source,
    };
    private_file(&lock_path).map_err(error)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&lock_path)
        .map_err(error)?;
    Ok((file, lock_path))
}

/// Take the migration lock of the store at `path`, waiting for other openers to finish. The
/// wait polls instead of blocking, so openers sharing one task (as in `mneme up`) cannot
/// deadlock each other.
async fn lock_file(path: &Path) -> Result<std::fs::File, StoreError> {
    let (file, lock_path) = open_lock(path, ".migrate-lock")?;
    let error = |source| StoreError::CreateDir {
        path: lock_path.clone(),
        source,
    };
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(std::fs::TryLockError::Error(source)) => return Err(error(source)),
        }
    }
}

async fn pool(path: &Path, read_only: bool, max: u32) -> Result<SqlitePool, StoreError> {
    register_sqlite_vec();
    let url = format!("sqlite://{}", path.display());
    let options = SqliteConnectOptions::from_str(&url)
        .map_err(|source| StoreError::Open {
            path: path.to_owned(),
            source,
        })?
        .create_if_missing(!read_only)
        .read_only(read_only)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10))
        .foreign_keys(true)
        // Freed pages are overwritten with zeros, so the text of a deleted session does not
        // linger in the database or its WAL for anyone reading the raw file.
        .pragma("secure_delete", "ON");
    SqlitePoolOptions::new()
        .max_connections(max)
        .connect_with(options)
        .await
        .map_err(|source| StoreError::Open {
            path: path.to_owned(),
            source,
        })
}

/// Register sqlite-vec as an auto extension, once per process, before any connection opens, so
/// every connection of every pool has `vec0` and the `vec_*` functions.
#[allow(unsafe_code)]
fn register_sqlite_vec() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        type Init = unsafe extern "C" fn(
            *mut libsqlite3_sys::sqlite3,
            *mut *mut std::ffi::c_char,
            *const libsqlite3_sys::sqlite3_api_routines,
        ) -> std::ffi::c_int;
        // SAFETY: `sqlite3_vec_init` is an SQLite extension entry point with exactly the `Init`
        // signature (the crate declares it without arguments); SQLite calls it with those
        // arguments for each new connection. Registration happens once, before pools open.
        let rc = unsafe {
            let init: Init =
                std::mem::transmute::<*const (), Init>(sqlite_vec::sqlite3_vec_init as *const ());
            libsqlite3_sys::sqlite3_auto_extension(Some(init))
        };
        if rc != 0 {
            tracing::error!(
                rc,
                "registering sqlite-vec failed; vector search is unavailable"
            );
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn open_migrates_and_has_vec_and_fts5() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/mneme.db");
        let store = Store::open(&path).await.unwrap();
        let (version,): (String,) = sqlx::query_as("select vec_version()")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert!(version.starts_with('v'), "{version}");
        let (mode,): (String,) = sqlx::query_as("pragma journal_mode")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(mode, "wal");
        sqlx::query("insert into observations_fts(rowid, title, body) values (1, 'a', ?)")
            .bind(fts::index_text("修复了数据库连接错误"))
            .execute(store.pool())
            .await
            .unwrap();
        let query = fts::match_query("数据库").unwrap();
        let hits: Vec<(i64,)> =
            sqlx::query_as("select rowid from observations_fts where observations_fts match ?")
                .bind(&query)
                .fetch_all(store.pool())
                .await
                .unwrap();
        assert_eq!(hits, vec![(1,)]);
        store.close().await;
        // Opening again applies nothing new and keeps the data.
        let again = Store::open(&path).await.unwrap();
        let (n,): (i64,) = sqlx::query_as("select count(*) from observations_fts")
            .fetch_one(again.pool())
            .await
            .unwrap();
        assert_eq!(n, 1);
        let read_only = Store::open_read_only(&path).await.unwrap();
        assert!(
            sqlx::query("insert into sessions(id, agent, project, started_at, last_event_at) values ('x','a','p',0,0)")
                .execute(read_only.pool())
                .await
                .is_err()
        );
    }

    /// The POSIX locks this process holds on the file at `path`, as the kernel lists them.
    #[cfg(target_os = "linux")]
    fn locks_held_on(path: &Path) -> usize {
        use std::os::unix::fs::MetadataExt as _;
        let inode = std::fs::metadata(path).unwrap().ino();
        let pid = std::process::id().to_string();
        // Lines read "1: POSIX  ADVISORY  READ 1234 08:01:5678 128 128": the owner's pid, then
        // device and inode.
        std::fs::read_to_string("/proc/locks")
            .unwrap()
            .lines()
            .filter(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                fields.get(1) == Some(&"POSIX")
                    && fields.get(4) == Some(&pid.as_str())
                    && fields
                        .get(5)
                        .and_then(|device| device.rsplit(':').next())
                        .and_then(|i| i.parse::<u64>().ok())
                        == Some(inode)
            })
            .count()
    }

    /// A second open in one process (another service of `mneme up`, a test's poll) must leave
    /// the locks of the first pool's connections in place: without them another process closing
    /// its last connection takes the database for unused and deletes the WAL under them.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn opening_the_store_again_keeps_the_locks_of_open_connections() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mneme.db");
        let first = Store::open(&path).await.unwrap();
        let mut held = first.pool().acquire().await.unwrap();
        let mut reading = sqlx::Connection::begin(&mut *held).await.unwrap();
        let _: (i64,) = sqlx::query_as("select count(*) from sessions")
            .fetch_one(&mut *reading)
            .await
            .unwrap();
        let before = locks_held_on(&path);
        assert!(
            before > 0,
            "a reading connection holds a lock on the database"
        );
        let second = Store::open(&path).await.unwrap();
        let read_only = Store::open_read_only(&path).await.unwrap();
        assert_eq!(locks_held_on(&path), before);
        reading.commit().await.unwrap();
        drop(held);
        second.close().await;
        read_only.close().await;
        first.close().await;
    }

    #[tokio::test]
    async fn read_only_open_of_a_missing_store_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let error = Store::open_read_only(&dir.path().join("none.db"))
            .await
            .unwrap_err();
        assert!(matches!(error, StoreError::Missing { .. }), "{error}");
    }
}
