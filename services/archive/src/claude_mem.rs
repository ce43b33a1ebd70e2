//! claude-mem's database brought in as mneme memory (`mneme import claude-mem`).
//!
//! claude-mem (github.com/thedotmack/claude-mem) keeps what it learns of coding sessions in one
//! SQLite file, `claude-mem.db` in its data directory ([`default_path`]): `sdk_sessions` (one
//! row a session), `observations` (what its model distilled from the work: a type, a title, a
//! subtitle, a narrative, facts, concepts, the files read and modified), `session_summaries`
//! (request, investigated, learned, completed, next steps, notes) and, from its tenth migration
//! on, `user_prompts`. Older databases lack columns and tables newer ones have, and name two
//! columns differently (`claude_session_id` and `sdk_session_id` before its seventeenth
//! migration); what is missing is read as empty, and what a database cannot lack and still be
//! claude-mem's ([`ClaudeMemError::NotClaudeMem`]) is named.
//!
//! [`read`] opens the file read-only (`mode=ro`: nothing is ever written to it, and a running
//! claude-mem, which keeps it in WAL mode, goes on writing while it is read) and reads it in one
//! read transaction, so the rows are one consistent snapshot; the file is closed before anything
//! is sent. [`ClaudeMem::import`] then hands the rows to their owners as the archive's lines,
//! through the same [`Importer`] as `mneme import mneme`: one session a claude-mem session, and
//! for each observation, summary and prompt one observation (ingest's) with its memory item
//! (retrieval's), with claude-mem's times and projects.
//!
//! Identities come from claude-mem's own: a session is `claude-mem:<its content session id>`,
//! a row's event id `claude-mem:<table>:<row id>:<created_at_epoch>`, and its memory item is
//! named by that event id. The owners leave alone what they hold, so importing twice doubles
//! nothing, and importing again after claude-mem grew adds only its new rows. Every text is
//! scrubbed of secrets here, before the item's hash is taken, and again by the importer.

use crate::format::{self, FORMAT, ItemLine, ObservationLine, SessionLine};
use crate::import::{ImportError, Imported, Importer};
use serde::Serialize;
use serde_json::{Value, json};
use sha2::Digest as _;
use sqlx::Connection as _;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The environment variable naming claude-mem's data directory; claude-mem also reads it from
/// its `settings.json`.
pub const DATA_DIR_VAR: &str = "CLAUDE_MEM_DATA_DIR";
/// The database's file name in claude-mem's data directory.
pub const DB_FILE: &str = "claude-mem.db";
/// The agent of sessions claude-mem recorded from Claude Code, its first and default platform.
const AGENT: &str = "claude-code";
/// The platform claude-mem records when it names none.
const DEFAULT_PLATFORM: &str = "claude";
/// The project of claude-mem's own observer sessions (its model's work, not the user's), which
/// claude-mem hides from its lists and deletes in its clean-ups; they are left out.
const OBSERVER_PROJECT: &str = "observer-sessions";
/// The longest title, as ingest cuts titles.
const MAX_TITLE_CHARS: usize = 160;
/// The longest observation body, as ingest cuts bodies.
const MAX_BODY_CHARS: usize = 20_000;
/// The longest memory item text, as retrieval cuts what it indexes.
const MAX_TEXT_CHARS: usize = 4_000;
/// The longest text retrieval embeds: the item's hash is taken of what it embeds.
const MAX_EMBED_CHARS: usize = 1_500;
/// The most files or concepts kept of one row, and the longest of each.
const MAX_LIST: usize = 200;
const MAX_LIST_ITEM_CHARS: usize = 500;
/// Rows sent as observations before their memory items, so the importer sends each batch of
/// observations once, then their items, instead of one request a row.
const CHUNK_ROWS: usize = 200;
/// How long a read waits for claude-mem's write lock (a checkpoint) before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Why claude-mem's database could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClaudeMemError {
    /// There is no file at the path.
    #[error(
        "no claude-mem database at {}: give its path with --path, or set {DATA_DIR_VAR} to claude-mem's data directory",
        .0.display()
    )]
    Missing(PathBuf),
    /// The file is not an SQLite database, or not one claude-mem wrote.
    #[error("{} is not a claude-mem database: {why}", path.display())]
    NotClaudeMem { path: PathBuf, why: String },
    /// The database could not be read.
    #[error("reading {}: {source}", path.display())]
    Read { path: PathBuf, source: sqlx::Error },
}

/// Where claude-mem keeps its database, as claude-mem itself finds it: in the directory named
/// by `CLAUDE_MEM_DATA_DIR` (`data_dir`, from the environment), else in the one named by that
/// key of `~/.claude-mem/settings.json` (under `env`, or at the top level), else in
/// `~/.claude-mem`; a leading `~` is the home directory. `None` without a home directory.
pub fn default_path(data_dir: Option<&Path>, home: Option<&Path>) -> Option<PathBuf> {
    let expand = |dir: &Path| -> Option<PathBuf> {
        match dir.to_str() {
            Some("~") => home.map(Path::to_path_buf),
            Some(text) if text.starts_with("~/") => home.map(|h| h.join(&text[2..])),
            _ => Some(dir.to_path_buf()),
        }
    };
    if let Some(dir) = data_dir.filter(|d| !d.as_os_str().is_empty()) {
        return expand(dir).map(|d| d.join(DB_FILE));
    }
    let default = home?.join(".claude-mem");
    let settings = std::fs::read(default.join("settings.json"))
        .ok()
        .and_then(|bytes| {
            let text = String::from_utf8_lossy(&bytes);
            serde_json::from_str::<Value>(text.trim_start_matches('\u{feff}')).ok()
        });
    let configured = settings.as_ref().and_then(|s| {
        s.get("env")
            .filter(|env| !env.is_null())
            .unwrap_or(s)
            .get(DATA_DIR_VAR)
            .and_then(Value::as_str)
            .filter(|d| !d.trim().is_empty())
            .map(str::to_owned)
    });
    match configured {
        Some(dir) => expand(Path::new(&dir)).map(|d| d.join(DB_FILE)),
        None => Some(default.join(DB_FILE)),
    }
}

/// What a claude-mem database holds, as read.
#[derive(Debug, Default, Clone, Serialize)]
pub struct ReadCounts {
    /// Sessions with something to import.
    pub sessions: u64,
    pub observations: u64,
    pub summaries: u64,
    pub prompts: u64,
    /// Rows left out: of claude-mem's own observer sessions, or without any text.
    pub left_out: u64,
}

/// What an import of claude-mem's database did.
#[derive(Debug, Clone, Serialize)]
pub struct ClaudeMemImported {
    /// The database read.
    pub path: String,
    /// What it holds.
    pub read: ReadCounts,
    /// Sessions, observations and memory items mneme took now.
    pub sessions: u64,
    pub observations: u64,
    pub memory_items: u64,
    /// Sessions, observations and memory items mneme held already (an earlier import).
    pub skipped: u64,
}

/// One row of claude-mem as mneme's observation and the memory item made of it.
#[derive(Debug)]
struct Row {
    observation: ObservationLine,
    item: ItemLine,
    /// Where it stands in its session: time, then prompt before observation before summary,
    /// then claude-mem's id.
    order: (i64, u8, i64),
}

/// One claude-mem session and its rows.
#[derive(Debug)]
struct Session {
    line: SessionLine,
    rows: Vec<Row>,
}

/// A claude-mem database, read: its sessions and rows as the archive's lines.
#[derive(Debug)]
pub struct ClaudeMem {
    path: PathBuf,
    counts: ReadCounts,
    sessions: Vec<Session>,
}

/// The tables of a database and their columns.
struct Schema(HashMap<String, HashSet<String>>);

impl Schema {
    fn has_table(&self, table: &str) -> bool {
        self.0.contains_key(table)
    }

    fn has(&self, table: &str, column: &str) -> bool {
        self.0.get(table).is_some_and(|c| c.contains(column))
    }

    /// The first of these names the table has: a column claude-mem renamed is read under
    /// either name.
    fn first<'a>(&self, table: &str, names: &[&'a str]) -> Option<&'a str> {
        names.iter().copied().find(|n| self.has(table, n))
    }

    /// A column as text, or NULL when this version of the table lacks it. The cast reads a
    /// value of another type (SQLite keeps what it was given) instead of failing the import.
    fn text(&self, table: &str, names: &[&str], alias: &str) -> String {
        match self.first(table, names) {
            Some(column) => format!("CAST(\"{column}\" AS TEXT) AS {alias}"),
            None => format!("NULL AS {alias}"),
        }
    }

    /// A column as an integer, or NULL when this version of the table lacks it.
    fn int(&self, table: &str, names: &[&str], alias: &str) -> String {
        match self.first(table, names) {
            Some(column) => format!("CAST(\"{column}\" AS INTEGER) AS {alias}"),
            None => format!("NULL AS {alias}"),
        }
    }

    /// Every column a table cannot lack and still be claude-mem's, each given as the names it
    /// has had; the missing ones, named.
    fn missing(&self, table: &str, required: &[&[&str]]) -> Vec<String> {
        required
            .iter()
            .filter(|names| self.first(table, names).is_none())
            .map(|names| format!("{table}.{}", names[0]))
            .collect()
    }
}

/// The columns naming an observation's or a summary's session, newest name first.
const MEMORY_SESSION: &[&str] = &["memory_session_id", "sdk_session_id"];
/// The columns naming a session's (or a prompt's) host session, newest name first.
const CONTENT_SESSION: &[&str] = &["content_session_id", "claude_session_id"];

#[derive(Debug, sqlx::FromRow)]
struct SessionRow {
    id: i64,
    content_id: Option<String>,
    memory_id: Option<String>,
    project: Option<String>,
    platform: Option<String>,
    user_prompt: Option<String>,
    started: Option<i64>,
    completed: Option<i64>,
    prompt_counter: Option<i64>,
}

#[derive(Debug, sqlx::FromRow)]
struct ObservationRow {
    id: i64,
    memory_id: Option<String>,
    project: Option<String>,
    kind: Option<String>,
    text: Option<String>,
    title: Option<String>,
    subtitle: Option<String>,
    narrative: Option<String>,
    facts: Option<String>,
    concepts: Option<String>,
    files_read: Option<String>,
    files_modified: Option<String>,
    created: Option<i64>,
}

#[derive(Debug, sqlx::FromRow)]
struct SummaryRow {
    id: i64,
    memory_id: Option<String>,
    project: Option<String>,
    request: Option<String>,
    investigated: Option<String>,
    learned: Option<String>,
    completed: Option<String>,
    next_steps: Option<String>,
    files_read: Option<String>,
    files_edited: Option<String>,
    notes: Option<String>,
    created: Option<i64>,
}

#[derive(Debug, sqlx::FromRow)]
struct PromptRow {
    id: i64,
    session_db_id: Option<i64>,
    content_id: Option<String>,
    text: Option<String>,
    created: Option<i64>,
}

/// Open claude-mem's database read-only and read it whole; `path` may also be claude-mem's
/// data directory. Every text is scrubbed with `sanitizer`.
pub async fn read(
    path: &Path,
    sanitizer: &sanitize::Sanitizer,
) -> Result<ClaudeMem, ClaudeMemError> {
    let path = if path.is_dir() {
        path.join(DB_FILE)
    } else {
        path.to_path_buf()
    };
    if !path.is_file() {
        return Err(ClaudeMemError::Missing(path));
    }
    let failed = |source: sqlx::Error| classify(&path, source);
    // `read_only` opens with SQLITE_OPEN_READONLY, what `mode=ro` asks for: this connection can
    // neither write the database nor checkpoint claude-mem's WAL into it. On a database in WAL
    // mode whose `-wal` and `-shm` files are gone (claude-mem not running), SQLite makes them
    // anew, empty, to read; the database file itself is never touched.
    let options = SqliteConnectOptions::new()
        .filename(&path)
        .read_only(true)
        .create_if_missing(false)
        .foreign_keys(false)
        .busy_timeout(BUSY_TIMEOUT);
    let mut conn = SqliteConnection::connect_with(&options)
        .await
        .map_err(failed)?;
    let result = read_from(&mut conn, &path, sanitizer).await;
    conn.close().await.ok();
    result
}

/// An error opening or reading `path`: a file that is not a database says so.
fn classify(path: &Path, source: sqlx::Error) -> ClaudeMemError {
    let not_a_database =
        matches!(&source, sqlx::Error::Database(e) if e.code().as_deref() == Some("26"));
    if not_a_database {
        return ClaudeMemError::NotClaudeMem {
            path: path.to_path_buf(),
            why: "it is not an SQLite database".to_owned(),
        };
    }
    ClaudeMemError::Read {
        path: path.to_path_buf(),
        source,
    }
}

async fn read_from(
    conn: &mut SqliteConnection,
    path: &Path,
    sanitizer: &sanitize::Sanitizer,
) -> Result<ClaudeMem, ClaudeMemError> {
    let failed = |source: sqlx::Error| classify(path, source);
    // One read transaction: claude-mem may write while it is read, and an observation must not
    // be read without the session it names.
    let mut tx = conn.begin().await.map_err(failed)?;
    let schema = schema(&mut tx).await.map_err(failed)?;
    check(&schema, path)?;

    let sessions: Vec<SessionRow> = fetch(
        &mut tx,
        format!(
            "SELECT CAST(id AS INTEGER) AS id, {}, {}, {}, {}, {}, {}, {}, {} FROM sdk_sessions ORDER BY id",
            schema.text("sdk_sessions", CONTENT_SESSION, "content_id"),
            schema.text("sdk_sessions", MEMORY_SESSION, "memory_id"),
            schema.text("sdk_sessions", &["project"], "project"),
            schema.text("sdk_sessions", &["platform_source"], "platform"),
            schema.text("sdk_sessions", &["user_prompt"], "user_prompt"),
            schema.int("sdk_sessions", &["started_at_epoch"], "started"),
            schema.int("sdk_sessions", &["completed_at_epoch"], "completed"),
            schema.int("sdk_sessions", &["prompt_counter"], "prompt_counter"),
        ),
    )
    .await
    .map_err(failed)?;
    let o = |names: &[&str], alias: &str| schema.text("observations", names, alias);
    let observations: Vec<ObservationRow> = fetch(
        &mut tx,
        format!(
            "SELECT CAST(id AS INTEGER) AS id, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}
             FROM observations ORDER BY id",
            o(MEMORY_SESSION, "memory_id"),
            o(&["project"], "project"),
            o(&["type"], "kind"),
            o(&["text"], "text"),
            o(&["title"], "title"),
            o(&["subtitle"], "subtitle"),
            o(&["narrative"], "narrative"),
            o(&["facts"], "facts"),
            o(&["concepts"], "concepts"),
            o(&["files_read"], "files_read"),
            o(&["files_modified"], "files_modified"),
            schema.int("observations", &["created_at_epoch"], "created"),
        ),
    )
    .await
    .map_err(failed)?;
    let summaries: Vec<SummaryRow> = if schema.has_table("session_summaries") {
        let s = |names: &[&str], alias: &str| schema.text("session_summaries", names, alias);
        fetch(
            &mut tx,
            format!(
                "SELECT CAST(id AS INTEGER) AS id, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}
                 FROM session_summaries ORDER BY id",
                s(MEMORY_SESSION, "memory_id"),
                s(&["project"], "project"),
                s(&["request"], "request"),
                s(&["investigated"], "investigated"),
                s(&["learned"], "learned"),
                s(&["completed"], "completed"),
                s(&["next_steps"], "next_steps"),
                s(&["files_read"], "files_read"),
                s(&["files_edited"], "files_edited"),
                s(&["notes"], "notes"),
                schema.int("session_summaries", &["created_at_epoch"], "created"),
            ),
        )
        .await
        .map_err(failed)?
    } else {
        Vec::new()
    };
    let prompts: Option<Vec<PromptRow>> = if schema.has_table("user_prompts") {
        Some(
            fetch(
                &mut tx,
                format!(
                    "SELECT CAST(id AS INTEGER) AS id, {}, {}, {}, {} FROM user_prompts ORDER BY id",
                    schema.int("user_prompts", &["session_db_id"], "session_db_id"),
                    schema.text("user_prompts", CONTENT_SESSION, "content_id"),
                    schema.text("user_prompts", &["prompt_text"], "text"),
                    schema.int("user_prompts", &["created_at_epoch"], "created"),
                ),
            )
            .await
            .map_err(failed)?,
        )
    } else {
        None
    };
    tx.rollback().await.ok();

    let mut build = Build::new(path, sanitizer);
    build.sessions(&sessions);
    for row in &observations {
        build.observation(row);
    }
    for row in &summaries {
        build.summary(row);
    }
    match &prompts {
        Some(prompts) => {
            for row in prompts {
                build.prompt(row);
            }
        }
        // Before claude-mem kept every prompt, a session kept its first one.
        None => {
            for row in &sessions {
                build.first_prompt(row);
            }
        }
    }
    Ok(build.finish())
}

async fn fetch<T>(conn: &mut SqliteConnection, sql: String) -> sqlx::Result<Vec<T>>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> + Send + Unpin,
{
    // The statement is built from this module's own column names only, never from the file.
    sqlx::query_as::<_, T>(sqlx::AssertSqlSafe(sql))
        .fetch_all(conn)
        .await
}

async fn schema(conn: &mut SqliteConnection) -> sqlx::Result<Schema> {
    let tables: Vec<(String,)> =
        sqlx::query_as("SELECT name FROM sqlite_master WHERE type = 'table'")
            .fetch_all(&mut *conn)
            .await?;
    let mut schema = HashMap::new();
    for (table,) in tables {
        if ![
            "sdk_sessions",
            "observations",
            "session_summaries",
            "user_prompts",
        ]
        .contains(&table.as_str())
        {
            continue;
        }
        let columns: Vec<(String,)> = sqlx::query_as("SELECT name FROM pragma_table_info(?)")
            .bind(&table)
            .fetch_all(&mut *conn)
            .await?;
        schema.insert(table, columns.into_iter().map(|(c,)| c).collect());
    }
    Ok(Schema(schema))
}

/// Refuse a database that is not claude-mem's, naming what it lacks.
fn check(schema: &Schema, path: &Path) -> Result<(), ClaudeMemError> {
    let not = |why: String| ClaudeMemError::NotClaudeMem {
        path: path.to_path_buf(),
        why,
    };
    let tables: Vec<&str> = ["sdk_sessions", "observations"]
        .into_iter()
        .filter(|t| !schema.has_table(t))
        .collect();
    if !tables.is_empty() {
        return Err(not(format!(
            "it has no table {} (claude-mem keeps its memory in sdk_sessions, observations and session_summaries)",
            tables.join(", ")
        )));
    }
    let mut missing = schema.missing(
        "sdk_sessions",
        &[
            &["id"],
            CONTENT_SESSION,
            &["project"],
            &["started_at_epoch"],
        ],
    );
    missing.extend(schema.missing(
        "observations",
        &[
            &["id"],
            MEMORY_SESSION,
            &["project"],
            &["type"],
            &["created_at_epoch"],
        ],
    ));
    if schema.has_table("session_summaries") {
        missing.extend(schema.missing(
            "session_summaries",
            &[&["id"], MEMORY_SESSION, &["created_at_epoch"]],
        ));
    }
    if schema.has_table("user_prompts") {
        missing.extend(schema.missing(
            "user_prompts",
            &[&["id"], &["prompt_text"], &["created_at_epoch"]],
        ));
    }
    if !missing.is_empty() {
        return Err(not(format!("it has no column {}", missing.join(", "))));
    }
    Ok(())
}

/// mneme's kind for a claude-mem observation type, and whether the type is kept as a concept
/// too. The types mneme's compressor writes as well keep their name; claude-mem's others
/// (security alerts and notes, sensitive information, the types of its other modes) are
/// things learned in the work, which is what `discovery` holds, and stay findable by their type.
fn kind_of(kind: &str) -> (&'static str, bool) {
    match kind {
        "decision" => ("decision", false),
        "bugfix" => ("bugfix", false),
        "feature" => ("feature", false),
        "refactor" => ("refactor", false),
        "change" => ("change", false),
        "discovery" => ("discovery", false),
        _ => ("discovery", true),
    }
}

/// A list as claude-mem stores it: a JSON array, or (in older rows) one value as plain text.
fn list(text: Option<&str>) -> Vec<String> {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Vec::new();
    };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(values)) => values
            .into_iter()
            .filter_map(|v| match v {
                Value::String(s) => Some(s),
                Value::Null => None,
                other => Some(other.to_string()),
            })
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect(),
        Ok(Value::String(s)) if !s.trim().is_empty() => vec![s.trim().to_owned()],
        _ => vec![text.to_owned()],
    }
}

/// claude-mem's epoch as Unix milliseconds: it writes milliseconds, but a value too small to
/// be a millisecond of this century is read as seconds.
fn ms(epoch: Option<i64>) -> Option<i64> {
    match epoch? {
        e if e <= 0 => None,
        e if e < 100_000_000_000 => Some(e.saturating_mul(1000)),
        e => Some(e),
    }
}

/// At most `max` characters of `text`.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => text[..at].to_owned(),
        None => text.to_owned(),
    }
}

fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

/// The hash retrieval gives an item: sha256 of what it embeds, the title (unless the text
/// starts with it) and the text, cut as it cuts them. An item stands alone, so no previous
/// item is embedded with it; the embedding cache is keyed by this hash.
fn text_hash(title: &str, text: &str) -> String {
    let own = if text.starts_with(title) {
        text.to_owned()
    } else {
        format!("{title}\n{text}")
    };
    sha2::Sha256::digest(cut(&own, MAX_EMBED_CHARS).as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The mneme agent of a claude-mem platform: Claude Code unless it names another host mneme
/// knows.
fn agent_of(platform: &str) -> &'static str {
    match platform {
        "codex" => "codex",
        "cursor" => "cursor",
        _ => AGENT,
    }
}

/// One row being made: its texts scrubbed, with what the scrubbing did.
struct Scrub<'a> {
    sanitizer: &'a sanitize::Sanitizer,
    report: sanitize::Report,
}

impl Scrub<'_> {
    fn text(&mut self, text: &str) -> String {
        let (clean, report) = self.sanitizer.clean_text(text.trim());
        self.report.merge(report);
        clean.trim().to_owned()
    }

    fn list(&mut self, values: Vec<String>) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for value in values {
            let value = cut(&self.text(&value), MAX_LIST_ITEM_CHARS);
            if !value.is_empty() && !out.contains(&value) && out.len() < MAX_LIST {
                out.push(value);
            }
        }
        out
    }
}

/// What one claude-mem row becomes, before its session and place are known.
struct Made {
    table: &'static str,
    id: i64,
    at: Option<i64>,
    kind: &'static str,
    item_kind: &'static str,
    title: String,
    text: String,
    input: Option<Value>,
    files: Vec<String>,
    concepts: Vec<String>,
    report: sanitize::Report,
}

/// The sessions and rows being made.
struct Build<'a> {
    path: String,
    sanitizer: &'a sanitize::Sanitizer,
    now: i64,
    sessions: Vec<Session>,
    /// claude-mem's started time of each session, before its rows are known.
    started: Vec<Option<i64>>,
    by_memory: HashMap<String, usize>,
    by_db_id: HashMap<i64, usize>,
    by_content: HashMap<String, usize>,
    /// The keys of claude-mem's observer sessions, whose rows are left out.
    observer_memory: HashSet<String>,
    observer_db_ids: HashSet<i64>,
    observer_content: HashSet<String>,
    counts: ReadCounts,
}

impl<'a> Build<'a> {
    fn new(path: &Path, sanitizer: &'a sanitize::Sanitizer) -> Build<'a> {
        Build {
            path: path.display().to_string(),
            sanitizer,
            now: common::time::now_ms(),
            sessions: Vec::new(),
            started: Vec::new(),
            by_memory: HashMap::new(),
            by_db_id: HashMap::new(),
            by_content: HashMap::new(),
            observer_memory: HashSet::new(),
            observer_db_ids: HashSet::new(),
            observer_content: HashSet::new(),
            counts: ReadCounts::default(),
        }
    }

    fn scrub(&self) -> Scrub<'a> {
        Scrub {
            sanitizer: self.sanitizer,
            report: sanitize::Report::default(),
        }
    }

    fn new_session(
        &mut self,
        id: String,
        agent: &str,
        project: &str,
        started: Option<i64>,
    ) -> usize {
        let project = self.scrub().text(project);
        self.sessions.push(Session {
            line: SessionLine {
                id,
                agent: agent.to_owned(),
                project,
                ..Default::default()
            },
            rows: Vec::new(),
        });
        self.started.push(started);
        self.sessions.len() - 1
    }

    fn sessions(&mut self, rows: &[SessionRow]) {
        // A host session id claude-mem recorded on several platforms names the Claude one
        // first, as claude-mem itself resolves it.
        let mut ordered: Vec<&SessionRow> = rows.iter().collect();
        ordered.sort_by_key(|s| {
            let platform = s.platform.as_deref().unwrap_or(DEFAULT_PLATFORM);
            (platform != DEFAULT_PLATFORM, s.id)
        });
        for s in ordered {
            let content = s.content_id.clone().filter(|c| !c.is_empty());
            let memory = s.memory_id.clone().filter(|m| !m.is_empty());
            let project = s.project.clone().unwrap_or_default();
            if project == OBSERVER_PROJECT {
                self.observer_db_ids.insert(s.id);
                self.observer_memory.extend(memory);
                self.observer_content.extend(content);
                continue;
            }
            let platform = s
                .platform
                .as_deref()
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .unwrap_or(DEFAULT_PLATFORM);
            let key = content
                .clone()
                .unwrap_or_else(|| format!("session-{}", s.id));
            let id = if platform == DEFAULT_PLATFORM {
                format!("claude-mem:{key}")
            } else {
                format!("claude-mem:{platform}:{key}")
            };
            let at = self.new_session(id, agent_of(platform), &project, ms(s.started));
            let line = &mut self.sessions[at].line;
            line.ended_at_ms = ms(s.completed);
            line.prompt_count = s.prompt_counter.unwrap_or(0).max(0);
            self.by_db_id.insert(s.id, at);
            if let Some(memory) = memory {
                self.by_memory.entry(memory).or_insert(at);
            }
            if let Some(content) = content {
                self.by_content.entry(content).or_insert(at);
            }
        }
    }

    /// The session of a row naming its claude-mem session by memory session id; a row whose
    /// session claude-mem no longer has (it kept such rows in older versions) gets one of its
    /// own. `None` for rows of observer sessions.
    fn session_of_memory(
        &mut self,
        memory: Option<&str>,
        project: &str,
        at: Option<i64>,
    ) -> Option<usize> {
        let memory = memory.filter(|m| !m.is_empty()).unwrap_or("unknown");
        if self.observer_memory.contains(memory) || project == OBSERVER_PROJECT {
            return None;
        }
        if let Some(&found) = self.by_memory.get(memory) {
            return Some(found);
        }
        let made = self.new_session(format!("claude-mem:{memory}"), AGENT, project, at);
        self.by_memory.insert(memory.to_owned(), made);
        Some(made)
    }

    /// The session of a prompt: by claude-mem's session row when the prompt names it, else by
    /// its host session id.
    fn session_of_prompt(&mut self, row: &PromptRow) -> Option<usize> {
        if let Some(db_id) = row.session_db_id {
            if self.observer_db_ids.contains(&db_id) {
                return None;
            }
            if let Some(&found) = self.by_db_id.get(&db_id) {
                return Some(found);
            }
        }
        let content = row
            .content_id
            .as_deref()
            .filter(|c| !c.is_empty())
            .unwrap_or("unknown");
        if self.observer_content.contains(content) {
            return None;
        }
        if let Some(&found) = self.by_content.get(content) {
            return Some(found);
        }
        let made = self.new_session(format!("claude-mem:{content}"), AGENT, "", ms(row.created));
        self.by_content.insert(content.to_owned(), made);
        Some(made)
    }

    fn observation(&mut self, row: &ObservationRow) {
        let project = row.project.clone().unwrap_or_default();
        let Some(session) =
            self.session_of_memory(row.memory_id.as_deref(), &project, ms(row.created))
        else {
            self.counts.left_out += 1;
            return;
        };
        let mut scrub = self.scrub();
        let raw_type = row.kind.as_deref().unwrap_or("").trim().to_owned();
        let (kind, keep_type) = kind_of(&raw_type);
        let title = scrub.text(row.title.as_deref().unwrap_or(""));
        let subtitle = scrub.text(row.subtitle.as_deref().unwrap_or(""));
        let narrative = scrub.text(row.narrative.as_deref().unwrap_or(""));
        let legacy = scrub.text(row.text.as_deref().unwrap_or(""));
        let facts = scrub.list(list(row.facts.as_deref()));
        let mut parts: Vec<String> = Vec::new();
        for part in [subtitle.clone(), narrative, legacy] {
            if !part.is_empty() && part != title && !parts.contains(&part) {
                parts.push(part);
            }
        }
        let mut text = parts.join("\n");
        for fact in &facts {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str("- ");
            text.push_str(fact);
        }
        let title = [title.as_str(), subtitle.as_str(), text.as_str()]
            .into_iter()
            .map(first_line)
            .find(|t| !t.is_empty())
            .map(|t| cut(t, MAX_TITLE_CHARS))
            .unwrap_or_default();
        if title.is_empty() && text.is_empty() {
            self.counts.left_out += 1;
            return;
        }
        let mut files = list(row.files_modified.as_deref());
        files.extend(list(row.files_read.as_deref()));
        let files = scrub.list(files);
        // Search matches concepts in lower case.
        let own_concepts: Vec<String> = scrub
            .list(list(row.concepts.as_deref()))
            .into_iter()
            .map(|c| c.to_lowercase())
            .collect();
        let mut concepts = own_concepts.clone();
        if keep_type && !raw_type.is_empty() {
            concepts.push(scrub.text(&raw_type).to_lowercase());
        }
        concepts.push("claude-mem".to_owned());
        let input = json!({"type": raw_type, "concepts": own_concepts, "files": files});
        self.counts.observations += 1;
        self.add(
            session,
            Made {
                table: "observations",
                id: row.id,
                at: ms(row.created),
                kind: "memory",
                item_kind: kind,
                title,
                text,
                input: Some(input),
                files,
                concepts,
                report: scrub.report,
            },
        );
    }

    fn summary(&mut self, row: &SummaryRow) {
        let project = row.project.clone().unwrap_or_default();
        let Some(session) =
            self.session_of_memory(row.memory_id.as_deref(), &project, ms(row.created))
        else {
            self.counts.left_out += 1;
            return;
        };
        let mut scrub = self.scrub();
        let request = scrub.text(row.request.as_deref().unwrap_or(""));
        let mut text = String::new();
        for (label, value) in [
            ("Request", &row.request),
            ("Investigated", &row.investigated),
            ("Learned", &row.learned),
            ("Completed", &row.completed),
            ("Next steps", &row.next_steps),
            ("Notes", &row.notes),
        ] {
            let value = scrub.text(value.as_deref().unwrap_or(""));
            if !value.is_empty() {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&format!("{label}: {value}"));
            }
        }
        if text.is_empty() {
            self.counts.left_out += 1;
            return;
        }
        let title = match first_line(&request) {
            "" => "Session summary".to_owned(),
            first => cut(&format!("Session: {first}"), MAX_TITLE_CHARS),
        };
        let mut files = list(row.files_edited.as_deref());
        files.extend(list(row.files_read.as_deref()));
        let files = scrub.list(files);
        self.counts.summaries += 1;
        self.add(
            session,
            Made {
                table: "session_summaries",
                id: row.id,
                at: ms(row.created),
                kind: "memory",
                item_kind: "summary",
                title,
                text,
                input: Some(json!({"concepts": ["summary"], "files": files})),
                files,
                concepts: vec!["summary".to_owned(), "claude-mem".to_owned()],
                report: scrub.report,
            },
        );
    }

    fn prompt(&mut self, row: &PromptRow) {
        let Some(session) = self.session_of_prompt(row) else {
            self.counts.left_out += 1;
            return;
        };
        let at = ms(row.created);
        self.prompt_text(session, "user_prompts", row.id, at, row.text.as_deref());
    }

    /// The first prompt a session row kept, in databases older than `user_prompts`.
    fn first_prompt(&mut self, row: &SessionRow) {
        let Some(&session) = self.by_db_id.get(&row.id) else {
            return;
        };
        let text = row.user_prompt.as_deref();
        self.prompt_text(session, "sdk_sessions", row.id, ms(row.started), text);
    }

    fn prompt_text(
        &mut self,
        session: usize,
        table: &'static str,
        id: i64,
        at: Option<i64>,
        text: Option<&str>,
    ) {
        let mut scrub = self.scrub();
        let text = scrub.text(text.unwrap_or(""));
        if text.is_empty() {
            self.counts.left_out += 1;
            return;
        }
        self.counts.prompts += 1;
        self.add(
            session,
            Made {
                table,
                id,
                at,
                kind: "prompt",
                item_kind: "prompt",
                title: cut(first_line(&text), MAX_TITLE_CHARS),
                text,
                input: None,
                files: Vec::new(),
                concepts: vec!["claude-mem".to_owned()],
                report: scrub.report,
            },
        );
    }

    /// Make the observation and the memory item of one row of `session`.
    fn add(&mut self, session: usize, made: Made) {
        let at = made.at.or(self.started[session]).unwrap_or(self.now);
        let s = &self.sessions[session].line;
        // The row's time is part of its identity, so two claude-mem databases (two machines)
        // whose ids meet do not pass one row for the other.
        let event_id = format!(
            "claude-mem:{}:{}:{}",
            made.table,
            made.id,
            made.at.unwrap_or(0)
        );
        let host_event = format!("claude-mem:{}", made.table);
        let body = cut(&made.text, MAX_BODY_CHARS);
        let input = made.input.map(|v| v.to_string());
        let mut meta = serde_json::Map::new();
        meta.insert(
            "host_fields".to_owned(),
            json!({"imported_from": self.path, "claude_mem": {"table": made.table, "id": made.id}}),
        );
        // What scrubbing did, under the names ingest records it.
        for (key, n) in [
            ("secrets_redacted", made.report.secrets_redacted),
            ("private_blocks", made.report.private_blocks),
            ("system_tags_stripped", made.report.system_tags_stripped),
        ] {
            if n > 0 {
                meta.insert(key.to_owned(), json!(n));
            }
        }
        let content_hash = sanitize::content_hash(&[
            &s.id,
            &host_event,
            made.kind,
            &made.title,
            &body,
            input.as_deref().unwrap_or(""),
        ]);
        let text = cut(&made.text, MAX_TEXT_CHARS);
        let observation = ObservationLine {
            event_id: event_id.clone(),
            session_id: s.id.clone(),
            project: s.project.clone(),
            agent: s.agent.clone(),
            kind: made.kind.to_owned(),
            host_event,
            title: made.title.clone(),
            body,
            input,
            meta: Value::Object(meta).to_string(),
            content_hash,
            occurred_at_ms: at,
            stored_at_ms: self.now,
            ..Default::default()
        };
        let item = ItemLine {
            source: "observation".to_owned(),
            source_event_id: event_id,
            kind: made.item_kind.to_owned(),
            session_id: s.id.clone(),
            project: s.project.clone(),
            agent: s.agent.clone(),
            text_hash: text_hash(&made.title, &text),
            title: made.title,
            text,
            files: made.files.join("\n"),
            concepts: made.concepts.join("\n"),
            occurred_at_ms: at,
            indexed_at_ms: self.now,
            ..Default::default()
        };
        let order = match made.kind {
            "prompt" => 0,
            _ if made.item_kind == "summary" => 2,
            _ => 1,
        };
        self.sessions[session].rows.push(Row {
            observation,
            item,
            order: (at, order, made.id),
        });
    }

    /// Place each row in its session and give each session its times and counts; sessions
    /// with nothing to import are dropped.
    fn finish(mut self) -> ClaudeMem {
        let started = std::mem::take(&mut self.started);
        let mut sessions = Vec::new();
        for (mut session, started) in self.sessions.into_iter().zip(started) {
            if session.rows.is_empty() {
                continue;
            }
            // Positions follow claude-mem's times, so rows it adds later (later in time) take
            // the places after those an earlier import gave out.
            session.rows.sort_by_key(|r| r.order);
            for (seq, row) in session.rows.iter_mut().enumerate() {
                row.item.seq = seq as i64 + 1;
            }
            let first = session.rows.first().map_or(self.now, |r| r.order.0);
            let last = session.rows.last().map_or(first, |r| r.order.0);
            let line = &mut session.line;
            line.started_at_ms = started.map_or(first, |s| s.min(first));
            line.last_event_at_ms = line.ended_at_ms.map_or(last, |e| e.max(last));
            line.event_count = session.rows.len() as i64;
            let prompts = session
                .rows
                .iter()
                .filter(|r| r.observation.kind == "prompt")
                .count() as i64;
            line.prompt_count = line.prompt_count.max(prompts);
            sessions.push(session);
        }
        self.counts.sessions = sessions.len() as u64;
        ClaudeMem {
            path: PathBuf::from(self.path),
            counts: self.counts,
            sessions,
        }
    }
}

impl ClaudeMem {
    /// What the database holds.
    pub fn counts(&self) -> &ReadCounts {
        &self.counts
    }

    /// Hand the rows to their owners over NATS; owners leave alone what they hold already.
    pub async fn import(
        &self,
        nats: &async_nats::Client,
        sanitizer: &sanitize::Sanitizer,
    ) -> Result<ClaudeMemImported, ImportError> {
        let mut importer = Importer::new(nats, sanitizer);
        let header = json!({"format": FORMAT, "exported_at_ms": common::time::now_ms()});
        importer
            .feed(format::line("mneme", &header).as_bytes())
            .await?;
        for session in &self.sessions {
            importer
                .feed(format::line("session", &session.line).as_bytes())
                .await?;
        }
        let rows: Vec<&Row> = self.sessions.iter().flat_map(|s| &s.rows).collect();
        for chunk in rows.chunks(CHUNK_ROWS) {
            for row in chunk {
                importer
                    .feed(format::line("observation", &row.observation).as_bytes())
                    .await?;
            }
            for row in chunk {
                importer
                    .feed(format::line("memory_item", &row.item).as_bytes())
                    .await?;
            }
        }
        let done: Imported = importer.finish().await?;
        Ok(ClaudeMemImported {
            path: self.path.display().to_string(),
            read: self.counts.clone(),
            sessions: done.sessions,
            observations: done.observations,
            memory_items: done.items,
            skipped: done.skipped,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_path_follows_claude_mem() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        assert_eq!(
            default_path(None, Some(h)),
            Some(h.join(".claude-mem").join(DB_FILE))
        );
        assert_eq!(
            default_path(Some(Path::new("/data/cm")), Some(h)),
            Some(PathBuf::from("/data/cm").join(DB_FILE))
        );
        assert_eq!(
            default_path(Some(Path::new("~/elsewhere")), Some(h)),
            Some(h.join("elsewhere").join(DB_FILE))
        );
        std::fs::create_dir_all(h.join(".claude-mem")).unwrap();
        let settings = h.join(".claude-mem/settings.json");
        std::fs::write(&settings, r#"{"env": {"CLAUDE_MEM_DATA_DIR": "~/moved"}}"#).unwrap();
        assert_eq!(
            default_path(None, Some(h)),
            Some(h.join("moved").join(DB_FILE))
        );
        std::fs::write(&settings, "\u{feff}{\"CLAUDE_MEM_DATA_DIR\": \"/flat\"}").unwrap();
        assert_eq!(
            default_path(None, Some(h)),
            Some(PathBuf::from("/flat").join(DB_FILE))
        );
        std::fs::write(&settings, "not json").unwrap();
        assert_eq!(
            default_path(None, Some(h)),
            Some(h.join(".claude-mem").join(DB_FILE))
        );
        assert_eq!(default_path(None, None), None);
    }

    #[test]
    fn types_lists_and_times_read_as_claude_mem_writes_them() {
        assert_eq!(kind_of("bugfix"), ("bugfix", false));
        assert_eq!(kind_of("decision"), ("decision", false));
        assert_eq!(kind_of("security_alert"), ("discovery", true));
        assert_eq!(
            list(Some(r#"["src/a.rs", "", "src/b.rs"]"#)),
            ["src/a.rs", "src/b.rs"]
        );
        assert_eq!(list(Some("src/only.rs")), ["src/only.rs"]);
        assert!(list(Some("  ")).is_empty() && list(None).is_empty());
        assert_eq!(ms(Some(1_700_000_000)), Some(1_700_000_000_000));
        assert_eq!(ms(Some(1_700_000_000_123)), Some(1_700_000_000_123));
        assert_eq!(ms(Some(0)), None);
        assert_eq!(agent_of("claude"), "claude-code");
        assert_eq!(agent_of("codex"), "codex");
    }

    #[test]
    fn the_hash_is_of_what_retrieval_embeds() {
        let hex = |t: &str| -> String {
            sha2::Sha256::digest(t.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect()
        };
        assert_eq!(text_hash("Title", "Title and more"), hex("Title and more"));
        assert_eq!(text_hash("Title", "body"), hex("Title\nbody"));
        let long = "x".repeat(3_000);
        // Every text starts with an empty title, so the text alone is embedded.
        assert_eq!(text_hash("", &long), hex(&long[..1_500]));
    }
}
