//! What the compressor and the pattern service made of the sessions: summaries, checkpoints and
//! patterns.

use crate::JsonList;
use serde::Serialize;
use sqlx::SqlitePool;

/// A session's summary.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct Summary {
    /// `partial` while the session runs, `final` once it ended.
    pub status: String,
    pub request: String,
    #[sqlx(try_from = "String")]
    pub done: JsonList,
    #[sqlx(try_from = "String")]
    pub decisions: JsonList,
    #[sqlx(try_from = "String")]
    pub open_items: JsonList,
    #[sqlx(try_from = "String")]
    pub files_modified: JsonList,
    pub text: String,
    /// Which compressor wrote it (the heuristic, or a model).
    pub compressor: String,
    pub updated_at_ms: i64,
}

pub(crate) const SUMMARY_COLUMNS: &str =
    "status, request, done, decisions, open_items, files_modified,
    text, compressor, updated_at AS updated_at_ms";

/// The summary of one session, when it has one.
pub async fn summary(pool: &SqlitePool, session_id: &str) -> Result<Option<Summary>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {SUMMARY_COLUMNS} FROM session_summaries WHERE session_id = ?"
    )))
    .bind(session_id)
    .fetch_optional(pool)
    .await
}

/// The summaries of a project's sessions, in the order the sessions happened.
pub async fn project_summaries(
    pool: &SqlitePool,
    project: &str,
) -> Result<Vec<Summary>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {SUMMARY_COLUMNS} FROM session_summaries WHERE project = ?
         ORDER BY occurred_at, id"
    )))
    .bind(project)
    .fetch_all(pool)
    .await
}

/// A checkpoint: what a session had done and still meant to do when its context was compacted.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct Checkpoint {
    pub id: i64,
    pub session_id: String,
    pub project: String,
    pub trigger: String,
    pub summary: String,
    #[sqlx(try_from = "String")]
    pub decisions: JsonList,
    #[sqlx(try_from = "String")]
    pub open_tasks: JsonList,
    #[sqlx(try_from = "String")]
    pub files_modified: JsonList,
    pub tokens_before: i64,
    pub tokens_after: i64,
    pub text: String,
    pub compressor: String,
    pub occurred_at_ms: i64,
}

/// A page of checkpoints.
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointPage {
    pub limit: u32,
    pub offset: u32,
    pub checkpoints: Vec<Checkpoint>,
}

/// Checkpoints, most recent first; an empty `project` or `session` matches all.
pub async fn checkpoints(
    pool: &SqlitePool,
    project: &str,
    session: &str,
    limit: u32,
    offset: u32,
) -> Result<CheckpointPage, sqlx::Error> {
    let checkpoints = sqlx::query_as(
        "SELECT id, session_id, project, trigger, summary, decisions, open_tasks, files_modified,
                tokens_before, tokens_after, text, compressor, occurred_at AS occurred_at_ms
         FROM checkpoints WHERE (?1 = '' OR project = ?1) AND (?2 = '' OR session_id = ?2)
         ORDER BY occurred_at DESC, id DESC LIMIT ?3 OFFSET ?4",
    )
    .bind(project)
    .bind(session)
    .bind(i64::from(limit))
    .bind(i64::from(offset))
    .fetch_all(pool)
    .await?;
    Ok(CheckpointPage {
        limit,
        offset,
        checkpoints,
    })
}

/// Something that recurs across sessions: an error, a fix, a procedure, a decision, a
/// preference, an architecture choice, a reflection.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct Pattern {
    pub id: i64,
    pub kind: String,
    pub title: String,
    pub text: String,
    /// The project it was last seen in; every project it was seen in has an occurrence.
    pub project: String,
    pub occurrences: i64,
    /// A workflow's runs that failed (its `occurrences` are the runs that worked); 0 for the
    /// other kinds.
    pub failures: i64,
    pub sessions: i64,
    pub first_seen_at_ms: i64,
    pub last_seen_at_ms: i64,
    #[sqlx(try_from = "String")]
    pub files: JsonList,
}

const PATTERN_COLUMNS: &str = "id, kind, title, text, project, occurrences,
    (SELECT count(DISTINCT observation_id) FROM pattern_occurrences f
     WHERE f.pattern_id = patterns.id AND f.role = 'failure') AS failures,
    sessions, first_seen_at AS first_seen_at_ms, last_seen_at AS last_seen_at_ms, files";

/// A page of patterns.
#[derive(Debug, Clone, Serialize)]
pub struct PatternPage {
    pub limit: u32,
    pub offset: u32,
    pub patterns: Vec<Pattern>,
}

/// Patterns seen at least `min_occurrences` times, most recently seen first; an empty
/// `project` or `kind` matches all.
pub async fn patterns(
    pool: &SqlitePool,
    project: &str,
    kind: &str,
    min_occurrences: u32,
    limit: u32,
    offset: u32,
) -> Result<PatternPage, sqlx::Error> {
    let patterns = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {PATTERN_COLUMNS} FROM patterns
         WHERE (?1 = '' OR id IN (SELECT pattern_id FROM pattern_occurrences WHERE project = ?1))
           AND (?2 = '' OR kind = ?2) AND occurrences >= ?3
         ORDER BY last_seen_at DESC, id DESC LIMIT ?4 OFFSET ?5"
    )))
    .bind(project)
    .bind(kind)
    .bind(i64::from(min_occurrences))
    .bind(i64::from(limit))
    .bind(i64::from(offset))
    .fetch_all(pool)
    .await?;
    Ok(PatternPage {
        limit,
        offset,
        patterns,
    })
}

/// Every pattern seen in a project, most frequent first (ties in a stable order, so a project's
/// memory file is written the same way twice).
pub async fn project_patterns(
    pool: &SqlitePool,
    project: &str,
) -> Result<Vec<Pattern>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {PATTERN_COLUMNS} FROM patterns
         WHERE id IN (SELECT pattern_id FROM pattern_occurrences WHERE project = ?)
         ORDER BY occurrences DESC, hash"
    )))
    .bind(project)
    .fetch_all(pool)
    .await
}
