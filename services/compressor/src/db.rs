//! The compressor's statements: what it reads of ingest's `observations` and `compactions`,
//! and what it writes to its own tables (`structured_observations`, `session_summaries`,
//! `checkpoints`, `compressor_sessions`). Everything here runs inside the caller's write
//! transaction; the walk that decides what to write is [`crate::walk`].

use crate::heuristic::{
    self, CheckpointFields, Prompt, SessionMaterial, Structured, StructuredRow, SummaryFields, Todo,
};
use crate::walk::Written;
use observation::row::Observation;
use sqlx::SqliteConnection;

/// What the compressor remembers of a session between batches (`compressor_sessions`).
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub(crate) struct State {
    pub project: String,
    pub cursor: i64,
    pub pending_tokens: i64,
    pub total_tokens: i64,
    pub open_group: i64,
    pub todos: String,
    pub ended: i64,
}

/// The edit run a following edit of the same file extends.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct Group {
    pub id: i64,
    pub subject_key: String,
    #[sqlx(rename = "type")]
    pub kind: String,
    pub observation_ids: String,
    pub title: String,
    pub revision: i64,
}

/// Delete every row made from these sessions (structured observations, summaries, checkpoints
/// and the walk's cursor), for sessions ingest deleted; returns how many rows went. The LLM
/// usage rows stay: they hold only token counts, and the daily budget must not be reset by a
/// delete.
pub async fn forget_sessions(tx: &mut SqliteConnection, sessions: &[String]) -> sqlx::Result<u64> {
    let mut rows = 0;
    for session in sessions {
        for sql in [
            "DELETE FROM structured_observations WHERE session_id = ?",
            "DELETE FROM session_summaries WHERE session_id = ?",
            "DELETE FROM checkpoints WHERE session_id = ?",
            "DELETE FROM compressor_sessions WHERE session_id = ?",
        ] {
            rows += sqlx::query(sql)
                .bind(session)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
    }
    Ok(rows)
}

/// What the compressor remembers of a session; `None` before its first walk.
pub(crate) async fn load_state(
    tx: &mut SqliteConnection,
    session_id: &str,
) -> sqlx::Result<Option<State>> {
    sqlx::query_as(
        "SELECT project, cursor, pending_tokens, total_tokens, open_group, todos, ended
         FROM compressor_sessions WHERE session_id = ?",
    )
    .bind(session_id)
    .fetch_optional(&mut *tx)
    .await
}

/// When the session's latest observation happened (0 for a session with none).
pub(crate) async fn last_occurred(
    tx: &mut SqliteConnection,
    session_id: &str,
) -> sqlx::Result<i64> {
    let (at,): (Option<i64>,) =
        sqlx::query_as("SELECT max(occurred_at) FROM observations WHERE session_id = ?")
            .bind(session_id)
            .fetch_one(&mut *tx)
            .await?;
    Ok(at.unwrap_or_default())
}

/// Record what the compressor remembers of a session.
pub(crate) async fn save_state(
    tx: &mut SqliteConnection,
    session_id: &str,
    state: &State,
    now: i64,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO compressor_sessions (session_id, project, cursor, pending_tokens,
             total_tokens, open_group, todos, ended, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (session_id) DO UPDATE SET
             project = excluded.project, cursor = excluded.cursor,
             pending_tokens = excluded.pending_tokens, total_tokens = excluded.total_tokens,
             open_group = excluded.open_group, todos = excluded.todos, ended = excluded.ended,
             updated_at = excluded.updated_at",
    )
    .bind(session_id)
    .bind(&state.project)
    .bind(state.cursor)
    .bind(state.pending_tokens)
    .bind(state.total_tokens)
    .bind(state.open_group)
    .bind(&state.todos)
    .bind(state.ended)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The session's observations after `cursor`, up to `upto`, in id order, their long fields cut.
pub(crate) async fn observations_after(
    tx: &mut SqliteConnection,
    session_id: &str,
    cursor: i64,
    upto: i64,
) -> sqlx::Result<Vec<Observation>> {
    sqlx::query_as(
        "SELECT id, session_id, project, kind, tool_name, title, substr(body, 1, 2000) AS body,
             substr(input, 1, 8000) AS input, substr(output, 1, 4000) AS output,
             length(body) AS body_chars, occurred_at
         FROM observations WHERE session_id = ? AND id > ? AND id <= ? ORDER BY id",
    )
    .bind(session_id)
    .bind(cursor)
    .bind(upto)
    .fetch_all(&mut *tx)
    .await
}

/// The start of the session's last prompt at or before observation `upto`, lowercased.
pub(crate) async fn last_prompt(
    tx: &mut SqliteConnection,
    session_id: &str,
    upto: i64,
) -> sqlx::Result<Option<String>> {
    let prompt: Option<(String,)> = sqlx::query_as(
        "SELECT lower(substr(body, 1, 300)) FROM observations
         WHERE session_id = ? AND kind = 'prompt' AND id <= ? ORDER BY id DESC LIMIT 1",
    )
    .bind(session_id)
    .bind(upto)
    .fetch_optional(&mut *tx)
    .await?;
    Ok(prompt.map(|(p,)| p))
}

/// The subject and outcome of each of the session's structured observations that has a
/// subject, in order.
pub(crate) async fn subject_outcomes(
    tx: &mut SqliteConnection,
    session_id: &str,
) -> sqlx::Result<Vec<(String, String)>> {
    sqlx::query_as(
        "SELECT subject_key, outcome FROM structured_observations
         WHERE session_id = ? AND subject_key <> '' ORDER BY id",
    )
    .bind(session_id)
    .fetch_all(&mut *tx)
    .await
}

/// The edit run stored under this id, if it is still there.
pub(crate) async fn group(tx: &mut SqliteConnection, id: i64) -> sqlx::Result<Option<Group>> {
    sqlx::query_as(
        "SELECT id, subject_key, type, observation_ids, title, revision
         FROM structured_observations WHERE id = ?",
    )
    .bind(id)
    .fetch_optional(&mut *tx)
    .await
}

fn json(list: &[String]) -> String {
    serde_json::to_string(list).unwrap_or_else(|_| "[]".to_owned())
}

/// Insert a structured observation of one raw observation; returns its id.
pub(crate) async fn insert_structured(
    tx: &mut SqliteConnection,
    raw: &Observation,
    s: &Structured,
    now: i64,
) -> sqlx::Result<i64> {
    Ok(sqlx::query(
        "INSERT INTO structured_observations (session_id, project, category, type, tool_name,
             outcome, subject_key, title, narrative, facts, concepts, files_read, files_modified,
             observation_ids, first_observation_id, last_observation_id, occurred_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&raw.session_id)
    .bind(&raw.project)
    .bind(&s.category)
    .bind(&s.kind)
    .bind(&s.tool_name)
    .bind(&s.outcome)
    .bind(&s.subject_key)
    .bind(&s.title)
    .bind(&s.narrative)
    .bind(json(&s.facts))
    .bind(json(&s.concepts))
    .bind(json(&s.files_read))
    .bind(json(&s.files_modified))
    .bind(format!("[{}]", raw.id))
    .bind(raw.id)
    .bind(raw.id)
    .bind(raw.occurred_at)
    .bind(now)
    .execute(&mut *tx)
    .await?
    .last_insert_rowid())
}

/// Store an edit run grown by one more edit (`raw`), under its new title.
pub(crate) async fn update_group(
    tx: &mut SqliteConnection,
    group: &Group,
    title: &str,
    raw: &Observation,
    now: i64,
) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE structured_observations SET type = ?, title = ?, observation_ids = ?,
             last_observation_id = ?, revision = ?, occurred_at = ?, updated_at = ?
         WHERE id = ?",
    )
    .bind(&group.kind)
    .bind(title)
    .bind(&group.observation_ids)
    .bind(raw.id)
    .bind(group.revision)
    .bind(raw.occurred_at)
    .bind(now)
    .bind(group.id)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Add an observation (a read of the file being edited) to an edit run.
pub(crate) async fn append_observation(
    tx: &mut SqliteConnection,
    group: &mut Group,
    id: i64,
) -> sqlx::Result<()> {
    let mut ids: Vec<i64> = serde_json::from_str(&group.observation_ids).unwrap_or_default();
    ids.push(id);
    group.observation_ids = serde_json::to_string(&ids).unwrap_or_default();
    sqlx::query("UPDATE structured_observations SET observation_ids = ? WHERE id = ?")
        .bind(&group.observation_ids)
        .bind(group.id)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// Prompts and structured observations of a session up to observation `upto`.
pub(crate) async fn material(
    tx: &mut SqliteConnection,
    session_id: &str,
    upto: i64,
    todos: &str,
) -> sqlx::Result<SessionMaterial> {
    let prompts: Vec<Prompt> = sqlx::query_as(
        "SELECT id, substr(body, 1, 400) AS text FROM observations
         WHERE session_id = ? AND kind = 'prompt' AND id <= ? ORDER BY id",
    )
    .bind(session_id)
    .bind(upto)
    .fetch_all(&mut *tx)
    .await?;
    let structured: Vec<StructuredRow> = sqlx::query_as(
        "SELECT id, category, type, outcome, subject_key, title, narrative, files_read,
             files_modified, last_observation_id
         FROM structured_observations WHERE session_id = ? ORDER BY id",
    )
    .bind(session_id)
    .fetch_all(&mut *tx)
    .await?;
    let todos: Vec<Todo> = serde_json::from_str(todos).unwrap_or_default();
    Ok(SessionMaterial {
        prompts,
        structured,
        todos,
    })
}

/// A summary to upsert.
pub struct SummaryRow<'a> {
    pub session_id: &'a str,
    pub project: &'a str,
    pub status: &'a str,
    pub trigger: &'a str,
    pub fields: &'a SummaryFields,
    pub files_read: &'a [String],
    pub files_modified: &'a [String],
    pub last_observation_id: i64,
    pub compressor: &'a str,
    pub occurred_at: i64,
    pub now: i64,
}

/// Insert or rewrite a session's summary; returns its id and new revision.
pub async fn upsert_summary(
    tx: &mut SqliteConnection,
    row: SummaryRow<'_>,
) -> sqlx::Result<(i64, i64)> {
    let text = heuristic::render_summary(row.fields, row.files_modified, row.project, row.status);
    let errors = serde_json::to_string(&row.fields.errors).unwrap_or_else(|_| "[]".to_owned());
    sqlx::query_as(
        "INSERT INTO session_summaries (session_id, project, status, trigger, request, done,
             decisions, open_items, files_read, files_modified, errors, text,
             last_observation_id, compressor, occurred_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (session_id) DO UPDATE SET
             project = excluded.project, status = excluded.status, trigger = excluded.trigger,
             request = excluded.request, done = excluded.done, decisions = excluded.decisions,
             open_items = excluded.open_items, files_read = excluded.files_read,
             files_modified = excluded.files_modified, errors = excluded.errors,
             text = excluded.text, last_observation_id = excluded.last_observation_id,
             compressor = excluded.compressor, occurred_at = excluded.occurred_at,
             updated_at = excluded.updated_at, revision = revision + 1
         RETURNING id, revision",
    )
    .bind(row.session_id)
    .bind(row.project)
    .bind(row.status)
    .bind(row.trigger)
    .bind(&row.fields.request)
    .bind(json(&row.fields.done))
    .bind(json(&row.fields.decisions))
    .bind(json(&row.fields.open_items))
    .bind(json(row.files_read))
    .bind(json(row.files_modified))
    .bind(errors)
    .bind(text)
    .bind(row.last_observation_id)
    .bind(row.compressor)
    .bind(row.occurred_at)
    .bind(row.now)
    .fetch_one(&mut *tx)
    .await
}

/// A checkpoint as stored.
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub struct CheckpointRow {
    pub id: i64,
    pub session_id: String,
    pub project: String,
    pub trigger: String,
    pub summary: String,
    pub decisions: String,
    pub open_tasks: String,
    pub host_summary: String,
    pub tokens_before: i64,
    pub tokens_after: i64,
    pub text: String,
    pub revision: i64,
    pub occurred_at: i64,
}

impl CheckpointRow {
    pub fn fields(&self) -> CheckpointFields {
        CheckpointFields {
            summary: self.summary.clone(),
            decisions: serde_json::from_str(&self.decisions).unwrap_or_default(),
            open_tasks: serde_json::from_str(&self.open_tasks).unwrap_or_default(),
        }
    }

    pub fn written(&self, trigger: &str) -> Written {
        Written {
            id: self.id,
            kind: "checkpoint",
            session_id: self.session_id.clone(),
            project: self.project.clone(),
            revision: self.revision,
            trigger: trigger.to_owned(),
            occurred_at: self.occurred_at,
            compressor: "heuristic".to_owned(),
        }
    }
}

pub(crate) struct NewCheckpoint<'a> {
    pub session_id: &'a str,
    pub project: &'a str,
    pub trigger: &'a str,
    pub observation_id: i64,
    pub fields: &'a CheckpointFields,
    pub files: &'a [String],
    pub host_summary: &'a str,
    pub tokens_before: i64,
    pub tokens_after: i64,
    pub text: &'a str,
    pub last_observation_id: i64,
    pub occurred_at: i64,
    pub now: i64,
}

const CHECKPOINT_COLUMNS: &str = "id, session_id, project, trigger, summary, decisions,
    open_tasks, host_summary, tokens_before, tokens_after, text, revision, occurred_at";

/// Insert a checkpoint; returns it as stored.
pub(crate) async fn insert_checkpoint(
    tx: &mut SqliteConnection,
    c: NewCheckpoint<'_>,
) -> sqlx::Result<CheckpointRow> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO checkpoints (session_id, project, trigger, observation_id, summary,
             decisions, open_tasks, files_modified, host_summary, tokens_before, tokens_after,
             text, last_observation_id, occurred_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         RETURNING {CHECKPOINT_COLUMNS}"
    )))
    .bind(c.session_id)
    .bind(c.project)
    .bind(c.trigger)
    .bind(c.observation_id)
    .bind(&c.fields.summary)
    .bind(json(&c.fields.decisions))
    .bind(json(&c.fields.open_tasks))
    .bind(json(c.files))
    .bind(c.host_summary)
    .bind(c.tokens_before)
    .bind(c.tokens_after)
    .bind(c.text)
    .bind(c.last_observation_id)
    .bind(c.occurred_at)
    .bind(c.now)
    .fetch_one(&mut *tx)
    .await
}

/// The token counts the host reported with the compaction of this observation, when it did.
pub(crate) async fn reported_tokens(
    tx: &mut SqliteConnection,
    observation_id: i64,
) -> sqlx::Result<(Option<i64>, Option<i64>)> {
    let reported: Option<(Option<i64>, Option<i64>)> = sqlx::query_as(
        "SELECT c.tokens_before, c.tokens_after FROM compactions c
         JOIN observations o ON o.event_id = c.event_id WHERE o.id = ?",
    )
    .bind(observation_id)
    .fetch_optional(&mut *tx)
    .await?;
    Ok(reported.unwrap_or_default())
}

/// The session's latest checkpoint when it was made at PreCompact and no PostCompact has
/// completed it yet.
pub(crate) async fn open_compaction_checkpoint(
    tx: &mut SqliteConnection,
    session_id: &str,
) -> sqlx::Result<Option<CheckpointRow>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {CHECKPOINT_COLUMNS} FROM checkpoints
         WHERE session_id = ? AND trigger = 'pre_compact' AND host_summary = ''
           AND id = (SELECT max(id) FROM checkpoints WHERE session_id = ?)"
    )))
    .bind(session_id)
    .bind(session_id)
    .fetch_optional(&mut *tx)
    .await
}

/// Complete a PreCompact checkpoint with the host's summary and token counts; returns it as
/// stored, with its new revision.
pub(crate) async fn complete_checkpoint(
    tx: &mut SqliteConnection,
    id: i64,
    host_summary: &str,
    text: &str,
    tokens_after: i64,
    tokens_before: Option<i64>,
    now: i64,
) -> sqlx::Result<CheckpointRow> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "UPDATE checkpoints SET host_summary = ?, text = ?, tokens_after = ?,
             tokens_before = coalesce(?, tokens_before), revision = revision + 1,
             updated_at = ?
         WHERE id = ? RETURNING {CHECKPOINT_COLUMNS}"
    )))
    .bind(host_summary)
    .bind(text)
    .bind(tokens_after)
    .bind(tokens_before)
    .bind(now)
    .bind(id)
    .fetch_one(&mut *tx)
    .await
}
