//! Import of exported sessions and observations, as they were: the other half of the api's
//! export of all memory. Ingest writes them because it owns the tables.
//!
//! Idempotent: a session id or an observation event id already stored is left alone, so
//! importing one file twice doubles nothing. Nothing is announced on `mneme.ingest.stored`: the
//! memory items made of these observations come with the same import, and a notice would make
//! retrieval, the compressor and the pattern service derive them a second time.

use proto::{ImportRecordsReply, ImportRecordsRequest};
use sqlx::SqlitePool;

/// The most rows one import request may carry, so one request holds the write lock briefly.
pub const MAX_ROWS_PER_REQUEST: usize = 2_000;

/// Store the sessions and observations of one import request in one transaction.
pub async fn import(
    pool: &SqlitePool,
    request: &ImportRecordsRequest,
) -> anyhow::Result<ImportRecordsReply> {
    let mut tx = store::begin_write(pool).await?;
    let mut reply = ImportRecordsReply::default();
    for s in &request.sessions {
        let done = sqlx::query(
            "INSERT INTO sessions (id, agent, agent_version, project, cwd, host, user, model,
                 transcript_path, started_at, ended_at, end_reason, last_event_at, event_count,
                 prompt_count, tool_count, error_count, archived_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(&s.id)
        .bind(&s.agent)
        .bind(&s.agent_version)
        .bind(&s.project)
        .bind(&s.cwd)
        .bind(&s.host)
        .bind(&s.user)
        .bind(&s.model)
        .bind(&s.transcript_path)
        .bind(s.started_at_ms)
        .bind(s.ended_at_ms)
        .bind(&s.end_reason)
        .bind(s.last_event_at_ms)
        .bind(s.event_count)
        .bind(s.prompt_count)
        .bind(s.tool_count)
        .bind(s.error_count)
        .bind(s.archived_at_ms)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 1 {
            reply.sessions += 1;
        } else {
            reply.skipped += 1;
        }
    }
    for o in &request.observations {
        let (last,): (i64,) = sqlx::query_as("SELECT COALESCE(MAX(id), 0) FROM observations")
            .fetch_one(&mut *tx)
            .await?;
        // The exported id is kept when nothing here is at or above it, so a fresh store gets
        // the same ids; otherwise the row takes the next one.
        let id = (o.id > last).then_some(o.id);
        let inserted: Option<(i64,)> = sqlx::query_as(
            "INSERT INTO observations (id, event_id, session_id, project, agent, author, kind,
                 host_event, tool_name, tool_use_id, subagent_id, title, body, input, output,
                 meta, content_hash, occurred_at, stored_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
             ON CONFLICT (event_id) DO NOTHING
             RETURNING id",
        )
        .bind(id)
        .bind(&o.event_id)
        .bind(&o.session_id)
        .bind(&o.project)
        .bind(&o.agent)
        .bind(&o.author)
        .bind(&o.kind)
        .bind(&o.host_event)
        .bind(&o.tool_name)
        .bind(&o.tool_use_id)
        .bind(&o.subagent_id)
        .bind(&o.title)
        .bind(&o.body)
        .bind(&o.input)
        .bind(&o.output)
        .bind(&o.meta)
        .bind(&o.content_hash)
        .bind(o.occurred_at_ms)
        .bind(o.stored_at_ms)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((id,)) = inserted else {
            reply.skipped += 1;
            continue;
        };
        sqlx::query("INSERT INTO observations_fts (rowid, title, body) VALUES (?, ?, ?)")
            .bind(id)
            .bind(store::fts::index_text(&o.title))
            .bind(store::fts::index_text(&o.body))
            .execute(&mut *tx)
            .await?;
        reply.observations += 1;
    }
    tx.commit().await?;
    Ok(reply)
}
