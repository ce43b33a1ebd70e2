//! The statements ingest runs against the tables it owns. All run inside the caller's
//! transaction, so an event's session, observation, index entry and compaction commit together.

use crate::record::Observation;
use proto::Event;
use proto::event::Payload;
use sqlx::SqliteConnection;

/// What storing an event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// A new observation with this row id.
    New(i64),
    /// This event id was stored before (a redelivery or a replay); nothing changed.
    Again(i64),
    /// The same content arrived in this session within the dedup window (a host firing the same
    /// hook twice); nothing changed.
    Duplicate,
}

/// Store one event: observation, full-text entry, session, compaction. `team_member` names the
/// member whose machine the event came from through the team, empty for this machine's own.
pub async fn store_event(
    tx: &mut SqliteConnection,
    event: &Event,
    obs: &Observation,
    team_member: &str,
    dedup_window_ms: i64,
    now_ms: i64,
) -> sqlx::Result<Stored> {
    if let Some((id,)) =
        sqlx::query_as::<_, (i64,)>("SELECT id FROM observations WHERE event_id = ?")
            .bind(&obs.event_id)
            .fetch_optional(&mut *tx)
            .await?
    {
        return Ok(Stored::Again(id));
    }
    let duplicate: Option<(i64,)> = sqlx::query_as(
        "SELECT id FROM observations
         WHERE session_id = ? AND content_hash = ? AND occurred_at BETWEEN ? AND ?
         LIMIT 1",
    )
    .bind(&obs.session_id)
    .bind(&obs.content_hash)
    .bind(obs.occurred_at - dedup_window_ms)
    .bind(obs.occurred_at + dedup_window_ms)
    .fetch_optional(&mut *tx)
    .await?;
    if duplicate.is_some() {
        return Ok(Stored::Duplicate);
    }

    let id = sqlx::query(
        "INSERT INTO observations (event_id, session_id, project, agent, author, kind, host_event,
             tool_name, tool_use_id, subagent_id, title, body, input, output, meta, content_hash,
             occurred_at, stored_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&obs.event_id)
    .bind(&obs.session_id)
    .bind(&obs.project)
    .bind(&obs.agent)
    .bind(&obs.author)
    .bind(obs.kind)
    .bind(&obs.host_event)
    .bind(&obs.tool_name)
    .bind(&obs.tool_use_id)
    .bind(&obs.subagent_id)
    .bind(&obs.title)
    .bind(&obs.body)
    .bind(&obs.input)
    .bind(&obs.output)
    .bind(obs.meta.to_string())
    .bind(&obs.content_hash)
    .bind(obs.occurred_at)
    .bind(now_ms)
    .execute(&mut *tx)
    .await?
    .last_insert_rowid();

    sqlx::query("INSERT INTO observations_fts (rowid, title, body) VALUES (?, ?, ?)")
        .bind(id)
        .bind(store::fts::index_text(&obs.title))
        .bind(store::fts::index_text(&obs.body))
        .execute(&mut *tx)
        .await?;

    upsert_session(tx, event, obs, team_member).await?;

    if let Some(Payload::PreCompact(c) | Payload::PostCompact(c)) = &event.payload {
        let phase = if matches!(event.payload, Some(Payload::PreCompact(_))) {
            "pre"
        } else {
            "post"
        };
        sqlx::query(
            "INSERT OR IGNORE INTO compactions (event_id, session_id, project, phase, trigger,
                 custom_instructions, summary, tokens_before, tokens_after, occurred_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&event.id)
        .bind(&event.session_id)
        .bind(&event.project)
        .bind(phase)
        .bind(&c.trigger)
        // The observation holds the sanitised text; the compaction row reuses it.
        .bind(if phase == "pre" {
            obs.body.as_str()
        } else {
            ""
        })
        .bind(if phase == "post" {
            obs.body.as_str()
        } else {
            ""
        })
        .bind((c.tokens_before > 0).then_some(c.tokens_before))
        .bind((c.tokens_after > 0).then_some(c.tokens_after))
        .bind(event.occurred_at_ms)
        .execute(&mut *tx)
        .await?;
    }
    Ok(Stored::New(id))
}

async fn upsert_session(
    tx: &mut SqliteConnection,
    event: &Event,
    obs: &Observation,
    team_member: &str,
) -> sqlx::Result<()> {
    let is_prompt = i64::from(obs.kind == "prompt");
    let is_tool = i64::from(matches!(obs.kind, "post_tool" | "tool_failure"));
    let is_error = i64::from(obs.kind == "tool_failure");
    let (ended_at, end_reason) = match &event.payload {
        Some(Payload::SessionEnd(end)) => (Some(event.occurred_at_ms), Some(end.reason.clone())),
        _ => (None, None),
    };
    sqlx::query(
        "INSERT INTO sessions (id, agent, agent_version, project, cwd, host, user, model,
             transcript_path, started_at, last_event_at, event_count, prompt_count, tool_count,
             error_count, ended_at, end_reason, team_member)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET
             started_at = min(started_at, excluded.started_at),
             last_event_at = max(last_event_at, excluded.last_event_at),
             event_count = event_count + 1,
             prompt_count = prompt_count + excluded.prompt_count,
             tool_count = tool_count + excluded.tool_count,
             error_count = error_count + excluded.error_count,
             agent_version = CASE WHEN excluded.agent_version <> '' THEN excluded.agent_version ELSE agent_version END,
             model = CASE WHEN excluded.model <> '' THEN excluded.model ELSE model END,
             cwd = CASE WHEN cwd = '' THEN excluded.cwd ELSE cwd END,
             project = CASE WHEN project = '' THEN excluded.project ELSE project END,
             transcript_path = CASE WHEN transcript_path = '' THEN excluded.transcript_path ELSE transcript_path END,
             ended_at = coalesce(excluded.ended_at, ended_at),
             end_reason = coalesce(excluded.end_reason, end_reason)",
    )
    .bind(&event.session_id)
    .bind(&obs.agent)
    .bind(&event.agent_version)
    .bind(&event.project)
    .bind(&event.cwd)
    .bind(&event.host)
    .bind(&event.user)
    .bind(&event.model)
    .bind(&event.transcript_path)
    .bind(event.occurred_at_ms)
    .bind(event.occurred_at_ms)
    .bind(is_prompt)
    .bind(is_tool)
    .bind(is_error)
    .bind(ended_at)
    .bind(end_reason)
    .bind(team_member)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Record where a session's raw event sits in the events stream (once; a redelivery changes
/// nothing).
pub async fn record_event_message(
    tx: &mut SqliteConnection,
    stream_seq: u64,
    session_id: &str,
    event_id: &str,
) -> sqlx::Result<()> {
    sqlx::query(
        "INSERT OR IGNORE INTO event_messages (stream_seq, session_id, event_id) VALUES (?, ?, ?)",
    )
    .bind(stream_seq as i64)
    .bind(session_id)
    .bind(event_id)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Record a dead letter; `false` when this stream message was recorded before.
pub async fn store_dead_letter(
    tx: &mut SqliteConnection,
    service: &str,
    stream_seq: u64,
    letter: &proto::DeadLetter,
) -> sqlx::Result<bool> {
    let done = sqlx::query(
        "INSERT OR IGNORE INTO dead_letters (service, stream_seq, subject, reason, event_id,
             excerpt, size_bytes, at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(service)
    .bind(stream_seq as i64)
    .bind(&letter.subject)
    .bind(&letter.reason)
    .bind(&letter.event_id)
    .bind(&letter.excerpt)
    .bind(letter.size_bytes as i64)
    .bind(letter.at_ms)
    .execute(&mut *tx)
    .await?;
    Ok(done.rows_affected() == 1)
}
