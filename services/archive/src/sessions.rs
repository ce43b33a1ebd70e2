//! Sessions and their observations (ingest's tables), as the api and the command line show them.

use crate::JsonList;
use crate::derived::{self, Checkpoint, SUMMARY_COLUMNS, Summary};
use serde::Serialize;
use sqlx::SqlitePool;

/// Which sessions a list shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Archived {
    Hide,
    Only,
    Include,
}

/// A session in a list: its counts, and its first prompt's title.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct Session {
    pub id: String,
    pub agent: String,
    pub project: String,
    pub cwd: String,
    pub model: String,
    pub started_at_ms: i64,
    pub ended_at_ms: Option<i64>,
    pub end_reason: Option<String>,
    pub last_event_at_ms: i64,
    pub events: i64,
    pub prompts: i64,
    pub tools: i64,
    pub errors: i64,
    pub archived_at_ms: Option<i64>,
    /// The title of the session's first prompt, when it has one.
    pub title: Option<String>,
}

const SESSION_COLUMNS: &str = "id, agent, project, cwd, model, started_at AS started_at_ms,
    ended_at AS ended_at_ms, end_reason, last_event_at AS last_event_at_ms,
    event_count AS events, prompt_count AS prompts, tool_count AS tools, error_count AS errors,
    archived_at AS archived_at_ms,
    (SELECT title FROM observations o WHERE o.session_id = sessions.id AND o.kind = 'prompt'
     ORDER BY o.id LIMIT 1) AS title";

/// A page of sessions, with the total matching: list entries ([`Session`]), or list entries
/// with their summaries ([`SummarisedSession`]).
#[derive(Debug, Clone, Serialize)]
pub struct SessionPage<S = Session> {
    pub total: i64,
    pub limit: u32,
    pub offset: u32,
    pub sessions: Vec<S>,
}

/// A session in a list, with its summary when the compressor has written one.
#[derive(Debug, Clone, Serialize)]
pub struct SummarisedSession {
    #[serde(flatten)]
    pub session: Session,
    pub summary: Option<Summary>,
}

/// A summary with the session it belongs to, to pair summaries with a page of sessions.
#[derive(sqlx::FromRow)]
struct SessionSummary {
    session_id: String,
    #[sqlx(flatten)]
    summary: Summary,
}

/// Sessions, most recent first, with the total matching; an empty `project` matches all.
pub async fn sessions(
    pool: &SqlitePool,
    project: &str,
    archived: Archived,
    limit: u32,
    offset: u32,
) -> Result<SessionPage, sqlx::Error> {
    let filter = match archived {
        Archived::Hide => "archived_at IS NULL",
        Archived::Only => "archived_at IS NOT NULL",
        Archived::Include => "1",
    };
    let condition = format!("(?1 = '' OR project = ?1) AND {filter}");
    let sessions = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE {condition}
         ORDER BY last_event_at DESC, id LIMIT ?2 OFFSET ?3"
    )))
    .bind(project)
    .bind(i64::from(limit))
    .bind(i64::from(offset))
    .fetch_all(pool)
    .await?;
    let (total,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM sessions WHERE {condition}"
    )))
    .bind(project)
    .fetch_one(pool)
    .await?;
    Ok(SessionPage {
        total,
        limit,
        offset,
        sessions,
    })
}

/// Like [`sessions`], each session with its summary (`None` before the compressor wrote one):
/// what a list needs to say what each session did without opening it.
pub async fn sessions_with_summaries(
    pool: &SqlitePool,
    project: &str,
    archived: Archived,
    limit: u32,
    offset: u32,
) -> Result<SessionPage<SummarisedSession>, sqlx::Error> {
    let page = sessions(pool, project, archived, limit, offset).await?;
    // One query for the page's summaries, the ids passed as one JSON array.
    let ids = serde_json::Value::from(
        page.sessions
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>(),
    )
    .to_string();
    let found: Vec<SessionSummary> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT session_id, {SUMMARY_COLUMNS} FROM session_summaries
         WHERE session_id IN (SELECT value FROM json_each(?))"
    )))
    .bind(ids)
    .fetch_all(pool)
    .await?;
    let mut summaries: std::collections::HashMap<String, Summary> = found
        .into_iter()
        .map(|row| (row.session_id, row.summary))
        .collect();
    Ok(SessionPage {
        total: page.total,
        limit: page.limit,
        offset: page.offset,
        sessions: page
            .sessions
            .into_iter()
            .map(|session| SummarisedSession {
                summary: summaries.remove(&session.id),
                session,
            })
            .collect(),
    })
}

/// An observation as a session's page lists it: the start of its body, and the memory item
/// made of it, when there is one.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct SessionObservation {
    pub id: i64,
    pub kind: String,
    pub tool_name: String,
    pub title: String,
    /// The first 2000 characters of the body.
    pub body: String,
    pub occurred_at_ms: i64,
    pub item_id: Option<i64>,
}

/// One session with a page of its observations, its summary and its latest checkpoints.
#[derive(Debug, Clone, Serialize)]
pub struct SessionDetail {
    #[serde(flatten)]
    pub session: Session,
    pub observations: Vec<SessionObservation>,
    pub observations_offset: u32,
    pub summary: Option<Summary>,
    pub checkpoints: Vec<Checkpoint>,
}

/// How many checkpoints a session's page shows.
const SESSION_CHECKPOINTS: u32 = 50;

/// One session with a page of its observations, its summary and its checkpoints; `None` when
/// there is no such session.
pub async fn session(
    pool: &SqlitePool,
    id: &str,
    limit: u32,
    offset: u32,
) -> Result<Option<SessionDetail>, sqlx::Error> {
    let Some(session) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?"
    )))
    .bind(id)
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    let observations = sqlx::query_as(
        "SELECT o.id, o.kind, o.tool_name, o.title, substr(o.body, 1, 2000) AS body,
                o.occurred_at AS occurred_at_ms, m.id AS item_id
         FROM observations o
         LEFT JOIN memory_items m ON m.source = 'observation' AND m.source_id = o.id
         WHERE o.session_id = ? ORDER BY o.occurred_at, o.id LIMIT ? OFFSET ?",
    )
    .bind(id)
    .bind(i64::from(limit))
    .bind(i64::from(offset))
    .fetch_all(pool)
    .await?;
    Ok(Some(SessionDetail {
        session,
        observations,
        observations_offset: offset,
        summary: derived::summary(pool, id).await?,
        checkpoints: derived::checkpoints(pool, "", id, SESSION_CHECKPOINTS, 0)
            .await?
            .checkpoints,
    }))
}

/// How many memory items retrieval holds of a session.
pub async fn session_item_count(pool: &SqlitePool, session_id: &str) -> Result<i64, sqlx::Error> {
    let (held,): (i64,) = sqlx::query_as("SELECT count(*) FROM memory_items WHERE session_id = ?")
        .bind(session_id)
        .fetch_one(pool)
        .await?;
    Ok(held)
}

/// A session as `mneme sessions` lists it.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct SessionBrief {
    pub id: String,
    pub agent: String,
    pub project: String,
    pub started_at_ms: i64,
    pub ended_at_ms: Option<i64>,
    /// Observations stored of the session.
    pub observations: i64,
}

/// At most `limit` sessions, most recent first, of one agent and one project when given.
pub async fn session_list(
    pool: &SqlitePool,
    agent: Option<&str>,
    project: Option<&str>,
    limit: i64,
) -> Result<Vec<SessionBrief>, sqlx::Error> {
    sqlx::query_as(
        "SELECT s.id, s.agent, s.project, s.started_at AS started_at_ms,
                s.ended_at AS ended_at_ms,
                (SELECT count(*) FROM observations o WHERE o.session_id = s.id) AS observations
         FROM sessions s
         WHERE (?1 IS NULL OR s.agent = ?1) AND (?2 IS NULL OR s.project = ?2)
         ORDER BY s.last_event_at DESC LIMIT ?3",
    )
    .bind(agent)
    .bind(project)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// An observation as an import of host files checks it against what it would publish.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct StoredEvent {
    pub event_id: String,
    pub kind: String,
    pub tool_use_id: String,
    pub occurred_at_ms: i64,
    /// The file an import read the observation from; `None` for one captured live.
    pub imported_from: Option<String>,
}

/// Every observation stored of one session.
pub async fn session_events(
    pool: &SqlitePool,
    session_id: &str,
) -> Result<Vec<StoredEvent>, sqlx::Error> {
    sqlx::query_as(
        "SELECT event_id, kind, tool_use_id, occurred_at AS occurred_at_ms,
                json_extract(meta, '$.host_fields.imported_from') AS imported_from
         FROM observations WHERE session_id = ?",
    )
    .bind(session_id)
    .fetch_all(pool)
    .await
}

/// What one agent host has recorded: its sessions and its newest event.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct AgentActivity {
    pub agent: String,
    pub sessions: i64,
    pub last_event_at_ms: i64,
}

/// Every agent host with sessions stored, by name.
pub async fn agent_activity(pool: &SqlitePool) -> Result<Vec<AgentActivity>, sqlx::Error> {
    sqlx::query_as(
        "SELECT agent, count(*) AS sessions, max(last_event_at) AS last_event_at_ms
         FROM sessions GROUP BY agent ORDER BY agent",
    )
    .fetch_all(pool)
    .await
}

/// Every project with sessions, by name; sessions with no project are left out.
pub async fn projects(pool: &SqlitePool) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT DISTINCT project FROM sessions WHERE project <> '' ORDER BY project")
        .fetch_all(pool)
        .await
}

/// A session with what its summary says of it, for a project's history.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct SessionHistory {
    pub id: String,
    pub started_at_ms: i64,
    /// What the session was asked to do; `None` before it has a summary.
    pub request: Option<String>,
    #[sqlx(try_from = "Option<String>")]
    pub files_modified: JsonList,
    /// The summary's status (`partial` while the session runs); `None` without a summary.
    pub status: Option<String>,
}

/// A project's sessions, oldest first, each with its summary's request, files and status.
pub async fn project_history(
    pool: &SqlitePool,
    project: &str,
) -> Result<Vec<SessionHistory>, sqlx::Error> {
    sqlx::query_as(
        "SELECT s.id, s.started_at AS started_at_ms, m.request, m.files_modified, m.status
         FROM sessions s LEFT JOIN session_summaries m ON m.session_id = s.id
         WHERE s.project = ? ORDER BY s.started_at, s.id",
    )
    .bind(project)
    .fetch_all(pool)
    .await
}
