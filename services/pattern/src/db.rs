//! The pattern service's statements: what it reads of ingest's `observations`, and everything
//! it writes to its own tables (`patterns`, `pattern_occurrences`, `pattern_failures`,
//! `pattern_sessions`). All run inside the caller's write transaction; the walk that decides
//! what to write is [`crate::walk`].

use crate::detect::Signature;
use observation::row::Observation;
use sqlx::SqliteConnection;
use std::collections::BTreeSet;

/// A pattern row created or changed, to be announced once the transaction commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Updated {
    pub id: i64,
    pub kind: String,
    pub hash: String,
    pub project: String,
    pub session_id: String,
    pub occurrences: i64,
    pub revision: i64,
    pub last_seen_at: i64,
}

/// The patterns changed by one transaction, each once with its latest revision.
#[derive(Debug, Default)]
pub struct Updates(pub Vec<Updated>);

impl Updates {
    pub(crate) fn push(&mut self, updated: Option<Updated>) {
        let Some(updated) = updated else { return };
        match self.0.iter_mut().find(|u| u.id == updated.id) {
            Some(existing) => *existing = updated,
            None => self.0.push(updated),
        }
    }
}

/// One occurrence of a pattern in an observation.
pub(crate) struct Occurrence<'a> {
    pub observation_id: i64,
    pub role: &'static str,
    pub session_id: &'a str,
    pub project: &'a str,
    pub occurred_at: i64,
}

/// A pattern to record.
pub(crate) struct Pattern<'a> {
    pub hash: String,
    pub kind: &'a str,
    pub title: String,
    pub text: String,
    pub signature: serde_json::Value,
    pub files: Vec<String>,
}

/// The most related observation ids kept on a pattern row.
const MAX_IDS: i64 = 50;

/// How far the walk of a session has read (an observation id; 0 before its first walk).
pub(crate) async fn cursor(tx: &mut SqliteConnection, session_id: &str) -> sqlx::Result<i64> {
    Ok(
        sqlx::query_as::<_, (i64,)>("SELECT cursor FROM pattern_sessions WHERE session_id = ?")
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await?
            .map_or(0, |(c,)| c),
    )
}

/// Record how far the walk of a session has read.
pub(crate) async fn save_cursor(
    tx: &mut SqliteConnection,
    session_id: &str,
    cursor: i64,
    now: i64,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT INTO pattern_sessions (session_id, cursor, updated_at) VALUES (?, ?, ?)
         ON CONFLICT (session_id) DO UPDATE SET cursor = excluded.cursor,
             updated_at = excluded.updated_at",
    )
    .bind(session_id)
    .bind(cursor)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The session's observations after `cursor`, up to `upto`, of the kinds patterns come from.
/// Nothing here estimates tokens, so the body's length is not measured (`0 AS body_chars`).
pub(crate) async fn observations_after(
    tx: &mut SqliteConnection,
    session_id: &str,
    cursor: i64,
    upto: i64,
) -> sqlx::Result<Vec<Observation>> {
    sqlx::query_as(
        "SELECT id, session_id, project, kind, tool_name, title, substr(body, 1, 4000) AS body,
             substr(input, 1, 4000) AS input, substr(output, 1, 3000) AS output,
             0 AS body_chars, occurred_at
         FROM observations
         WHERE session_id = ? AND id > ? AND id <= ?
           AND kind IN ('post_tool', 'tool_failure', 'prompt', 'stop', 'session_end', 'workflow')
         ORDER BY id",
    )
    .bind(session_id)
    .bind(cursor)
    .bind(upto)
    .fetch_all(&mut *tx)
    .await
}

/// The session's prompts before an observation, newest first (at most `limit`), for the
/// situation a turn answers.
pub(crate) async fn prompts_before(
    tx: &mut SqliteConnection,
    session_id: &str,
    before: i64,
    limit: i64,
) -> sqlx::Result<Vec<Observation>> {
    sqlx::query_as(
        "SELECT id, session_id, project, kind, tool_name, title, substr(body, 1, 2000) AS body,
             NULL AS input, NULL AS output, 0 AS body_chars, occurred_at
         FROM observations
         WHERE session_id = ? AND id < ? AND kind = 'prompt'
         ORDER BY id DESC LIMIT ?",
    )
    .bind(session_id)
    .bind(before)
    .bind(limit)
    .fetch_all(&mut *tx)
    .await
}

/// The tool calls of a session strictly between two observations (a turn, from its prompt to
/// what closed it; a failure and its fix), failures included, with the start of their inputs
/// and outputs; at most 400.
pub(crate) async fn turn_calls(
    tx: &mut SqliteConnection,
    session_id: &str,
    after: i64,
    before: i64,
) -> sqlx::Result<Vec<Observation>> {
    sqlx::query_as(
        "SELECT id, session_id, project, kind, tool_name, title, '' AS body,
             substr(input, 1, 2000) AS input, substr(output, 1, 1000) AS output,
             0 AS body_chars, occurred_at
         FROM observations
         WHERE session_id = ? AND id > ? AND id < ? AND kind IN ('post_tool', 'tool_failure')
         ORDER BY id LIMIT 400",
    )
    .bind(session_id)
    .bind(after)
    .bind(before)
    .fetch_all(&mut *tx)
    .await
}

/// What a workflow remembers between its runs (its signature), and how many runs worked and
/// failed, with whether this observation was already counted in `role`; `None` for a workflow
/// not seen before.
pub(crate) async fn workflow_so_far(
    tx: &mut SqliteConnection,
    hash: &str,
    observation_id: i64,
    role: &str,
) -> sqlx::Result<Option<(String, i64, i64, bool)>> {
    sqlx::query_as(
        "SELECT p.signature,
             (SELECT count(DISTINCT observation_id) FROM pattern_occurrences
              WHERE pattern_id = p.id AND role = 'success'),
             (SELECT count(DISTINCT observation_id) FROM pattern_occurrences
              WHERE pattern_id = p.id AND role = 'failure'),
             EXISTS (SELECT 1 FROM pattern_occurrences
                     WHERE pattern_id = p.id AND observation_id = ?2 AND role = ?3)
         FROM patterns p WHERE p.hash = ?1",
    )
    .bind(hash)
    .bind(observation_id)
    .bind(role)
    .fetch_optional(&mut *tx)
    .await
}

/// Replace a pattern's signature (a workflow keeps its last working steps and last failure
/// there).
pub(crate) async fn set_signature(
    tx: &mut SqliteConnection,
    id: i64,
    signature: &serde_json::Value,
) -> sqlx::Result<()> {
    sqlx::query("UPDATE patterns SET signature = ? WHERE id = ?")
        .bind(signature.to_string())
        .bind(id)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// Remember a failure under its signature (once per observation).
pub(crate) async fn insert_failure(
    tx: &mut SqliteConnection,
    raw: &Observation,
    hash: &str,
    sig: &Signature,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT OR IGNORE INTO pattern_failures (observation_id, session_id, project,
             signature_hash, subject_key, tool_name, error_class, occurred_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(raw.id)
    .bind(&raw.session_id)
    .bind(&raw.project)
    .bind(hash)
    .bind(sig.subject())
    .bind(&sig.tool)
    .bind(&sig.error_class)
    .bind(raw.occurred_at)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Every failure with this signature, anywhere: observation, session, project, time.
pub(crate) async fn failures_of(
    tx: &mut SqliteConnection,
    hash: &str,
) -> sqlx::Result<Vec<(i64, String, String, i64)>> {
    sqlx::query_as(
        "SELECT observation_id, session_id, project, occurred_at FROM pattern_failures
         WHERE signature_hash = ? ORDER BY observation_id",
    )
    .bind(hash)
    .fetch_all(&mut *tx)
    .await
}

/// The session's failures on `subject` no success has fixed yet: observation, signature,
/// error class, tool, time.
pub(crate) async fn open_failures(
    tx: &mut SqliteConnection,
    session_id: &str,
    subject: &str,
) -> sqlx::Result<Vec<(i64, String, String, String, i64)>> {
    sqlx::query_as(
        "SELECT observation_id, signature_hash, error_class, tool_name, occurred_at
         FROM pattern_failures
         WHERE session_id = ? AND subject_key = ? AND fixed_by IS NULL ORDER BY observation_id",
    )
    .bind(session_id)
    .bind(subject)
    .fetch_all(&mut *tx)
    .await
}

/// Mark the session's open failures on `subject` as fixed by observation `fixed_by`.
pub(crate) async fn mark_fixed(
    tx: &mut SqliteConnection,
    session_id: &str,
    subject: &str,
    fixed_by: i64,
) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE pattern_failures SET fixed_by = ?
         WHERE session_id = ? AND subject_key = ? AND fixed_by IS NULL",
    )
    .bind(fixed_by)
    .bind(session_id)
    .bind(subject)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The signatures of the session's unfixed failures, first failure first: signature, subject,
/// tool, error class.
pub(crate) async fn unfixed_signatures(
    tx: &mut SqliteConnection,
    session_id: &str,
) -> sqlx::Result<Vec<(String, String, String, String)>> {
    sqlx::query_as(
        "SELECT signature_hash, subject_key, tool_name, error_class FROM pattern_failures
         WHERE session_id = ? AND fixed_by IS NULL
         GROUP BY signature_hash ORDER BY min(observation_id)",
    )
    .bind(session_id)
    .fetch_all(&mut *tx)
    .await
}

/// The session's unfixed failures with one signature: observation and time.
pub(crate) async fn unfixed_failures(
    tx: &mut SqliteConnection,
    session_id: &str,
    hash: &str,
) -> sqlx::Result<Vec<(i64, i64)>> {
    sqlx::query_as(
        "SELECT observation_id, occurred_at FROM pattern_failures
         WHERE session_id = ? AND signature_hash = ? AND fixed_by IS NULL",
    )
    .bind(session_id)
    .bind(hash)
    .fetch_all(&mut *tx)
    .await
}

/// Create or update a pattern with its occurrences; `None` when nothing new was learnt (every
/// occurrence was recorded before).
pub(crate) async fn record(
    tx: &mut SqliteConnection,
    pattern: &Pattern<'_>,
    occurrences: &[Occurrence<'_>],
    raw: &Observation,
    now: i64,
) -> sqlx::Result<Option<Updated>> {
    let (id,): (i64,) = sqlx::query_as(
        "INSERT INTO patterns (hash, kind, title, text, signature, project, first_session_id,
             last_session_id, first_seen_at, last_seen_at, revision, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)
         ON CONFLICT (hash) DO UPDATE SET hash = excluded.hash
         RETURNING id",
    )
    .bind(&pattern.hash)
    .bind(pattern.kind)
    .bind(&pattern.title)
    .bind(&pattern.text)
    .bind(pattern.signature.to_string())
    .bind(&raw.project)
    .bind(&raw.session_id)
    .bind(&raw.session_id)
    .bind(raw.occurred_at)
    .bind(raw.occurred_at)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    let mut added = 0;
    for o in occurrences {
        added += sqlx::query(
            "INSERT OR IGNORE INTO pattern_occurrences (pattern_id, observation_id, role,
                 session_id, project, occurred_at)
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(id)
        .bind(o.observation_id)
        .bind(o.role)
        .bind(o.session_id)
        .bind(o.project)
        .bind(o.occurred_at)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    }
    if added == 0 {
        return Ok(None);
    }
    let files: Vec<String> = {
        let (existing,): (String,) = sqlx::query_as("SELECT files FROM patterns WHERE id = ?")
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        let mut files: Vec<String> = serde_json::from_str(&existing).unwrap_or_default();
        for file in &pattern.files {
            if !files.contains(file) {
                files.push(file.clone());
            }
        }
        files
    };
    sqlx::query("UPDATE patterns SET title = ?, text = ?, project = ?, files = ? WHERE id = ?")
        .bind(&pattern.title)
        .bind(&pattern.text)
        .bind(&raw.project)
        .bind(serde_json::to_string(&files).unwrap_or_else(|_| "[]".to_owned()))
        .bind(id)
        .execute(&mut *tx)
        .await?;
    let (occurrences, revision, last_seen_at) = recount(tx, id, pattern.kind, now).await?;
    Ok(Some(Updated {
        id,
        kind: pattern.kind.to_owned(),
        hash: pattern.hash.clone(),
        project: raw.project.clone(),
        session_id: raw.session_id.clone(),
        occurrences,
        revision,
        last_seen_at,
    }))
}

/// The role whose occurrences a pattern of `kind` counts; the other roles are links (the
/// failure a fix answered, the prompt a statement came from).
fn counted_role(kind: &str) -> &'static str {
    match kind {
        "error" => "error",
        "fix" => "fix",
        "procedure" | "workflow" => "success",
        "reflection" => "reflection",
        _ => "statement",
    }
}

/// Bring a pattern's counts, first and last sightings and related ids in line with its
/// occurrences, and bump its revision; returns occurrences, revision and last sighting.
async fn recount(
    tx: &mut SqliteConnection,
    id: i64,
    kind: &str,
    now: i64,
) -> sqlx::Result<(i64, i64, i64)> {
    sqlx::query_as(
        "UPDATE patterns SET
             occurrences = (SELECT count(DISTINCT observation_id) FROM pattern_occurrences
                            WHERE pattern_id = ?1 AND role = ?2),
             sessions = (SELECT count(DISTINCT session_id) FROM pattern_occurrences
                         WHERE pattern_id = ?1 AND role = ?2),
             first_session_id = (SELECT session_id FROM pattern_occurrences
                                 WHERE pattern_id = ?1 ORDER BY occurred_at, observation_id LIMIT 1),
             last_session_id = (SELECT session_id FROM pattern_occurrences
                                WHERE pattern_id = ?1
                                ORDER BY occurred_at DESC, observation_id DESC LIMIT 1),
             first_seen_at = (SELECT min(occurred_at) FROM pattern_occurrences WHERE pattern_id = ?1),
             last_seen_at = (SELECT max(occurred_at) FROM pattern_occurrences WHERE pattern_id = ?1),
             observation_ids = (SELECT json_group_array(observation_id) FROM (
                                  SELECT DISTINCT observation_id FROM pattern_occurrences
                                  WHERE pattern_id = ?1 ORDER BY observation_id DESC LIMIT ?3)),
             revision = revision + 1, updated_at = ?4
         WHERE id = ?1
         RETURNING occurrences, revision, last_seen_at",
    )
    .bind(id)
    .bind(counted_role(kind))
    .bind(MAX_IDS)
    .bind(now)
    .fetch_one(&mut *tx)
    .await
}

/// Drop what was learnt from these sessions, for sessions ingest deleted: their occurrences,
/// failures and cursors. A pattern seen elsewhere too is recounted; one seen only there is
/// deleted. Each changed or deleted pattern is pushed to `updates` with a new revision, so
/// retrieval re-reads it (and drops its item when the row is gone). Returns the rows deleted.
pub async fn forget_sessions(
    tx: &mut SqliteConnection,
    sessions: &[String],
    now: i64,
    updates: &mut Updates,
) -> sqlx::Result<u64> {
    let mut rows = 0;
    let mut touched = BTreeSet::new();
    for session in sessions {
        let ids: Vec<(i64,)> = sqlx::query_as(
            "SELECT DISTINCT pattern_id FROM pattern_occurrences WHERE session_id = ?",
        )
        .bind(session)
        .fetch_all(&mut *tx)
        .await?;
        touched.extend(ids.into_iter().map(|(id,)| id));
        for sql in [
            "DELETE FROM pattern_occurrences WHERE session_id = ?",
            "DELETE FROM pattern_failures WHERE session_id = ?",
            "DELETE FROM pattern_sessions WHERE session_id = ?",
        ] {
            rows += sqlx::query(sql)
                .bind(session)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
    }
    for id in touched {
        let Some((kind, hash, project, revision)) =
            sqlx::query_as::<_, (String, String, String, i64)>(
                "SELECT kind, hash, project, revision FROM patterns WHERE id = ?",
            )
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?
        else {
            continue;
        };
        let (counted,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM pattern_occurrences WHERE pattern_id = ? AND role = ?",
        )
        .bind(id)
        .bind(counted_role(&kind))
        .fetch_one(&mut *tx)
        .await?;
        let updated = if counted == 0 {
            rows += sqlx::query("DELETE FROM pattern_occurrences WHERE pattern_id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            rows += sqlx::query("DELETE FROM patterns WHERE id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            Updated {
                id,
                kind,
                hash,
                project,
                session_id: String::new(),
                occurrences: 0,
                revision: revision + 1,
                last_seen_at: 0,
            }
        } else {
            let (occurrences, revision, last_seen_at) = recount(tx, id, &kind, now).await?;
            let (session_id,): (String,) =
                sqlx::query_as("SELECT last_session_id FROM patterns WHERE id = ?")
                    .bind(id)
                    .fetch_one(&mut *tx)
                    .await?;
            Updated {
                id,
                kind,
                hash,
                project,
                session_id,
                occurrences,
                revision,
                last_seen_at,
            }
        };
        updates.push(Some(updated));
    }
    Ok(rows)
}
