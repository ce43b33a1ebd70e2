//! Reads of the store for what no service answers over NATS yet: session lists, patterns,
//! checkpoints, stats. The api opens the store read-only and never writes it.

use crate::error::ApiResult;
use serde_json::{Value, json};
use sqlx::{Row as _, SqlitePool, sqlite::SqliteRow};

/// A JSON array stored as text, or an empty array when it is not one.
fn json_list(text: &str) -> Value {
    serde_json::from_str::<Value>(text)
        .ok()
        .filter(Value::is_array)
        .unwrap_or_else(|| json!([]))
}

/// Which sessions a list shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Archived {
    Hide,
    Only,
    Include,
}

fn session_json(row: &SqliteRow) -> Value {
    json!({
        "id": row.get::<String, _>("id"),
        "agent": row.get::<String, _>("agent"),
        "project": row.get::<String, _>("project"),
        "cwd": row.get::<String, _>("cwd"),
        "model": row.get::<String, _>("model"),
        "started_at_ms": row.get::<i64, _>("started_at"),
        "ended_at_ms": row.get::<Option<i64>, _>("ended_at"),
        "end_reason": row.get::<Option<String>, _>("end_reason"),
        "last_event_at_ms": row.get::<i64, _>("last_event_at"),
        "events": row.get::<i64, _>("event_count"),
        "prompts": row.get::<i64, _>("prompt_count"),
        "tools": row.get::<i64, _>("tool_count"),
        "errors": row.get::<i64, _>("error_count"),
        "archived_at_ms": row.get::<Option<i64>, _>("archived_at"),
        "title": row.get::<Option<String>, _>("title"),
    })
}

const SESSION_COLUMNS: &str = "id, agent, project, cwd, model, started_at, ended_at, end_reason,
    last_event_at, event_count, prompt_count, tool_count, error_count, archived_at,
    (SELECT title FROM observations o WHERE o.session_id = sessions.id AND o.kind = 'prompt'
     ORDER BY o.id LIMIT 1) AS title";

/// Sessions, most recent first, with the total matching.
pub async fn sessions(
    pool: &SqlitePool,
    project: &str,
    archived: Archived,
    limit: u32,
    offset: u32,
) -> ApiResult<Value> {
    let filter = match archived {
        Archived::Hide => "archived_at IS NULL",
        Archived::Only => "archived_at IS NOT NULL",
        Archived::Include => "1",
    };
    let condition = format!("(?1 = '' OR project = ?1) AND {filter}");
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
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
    Ok(json!({
        "total": total,
        "limit": limit,
        "offset": offset,
        "sessions": rows.iter().map(session_json).collect::<Vec<_>>(),
    }))
}

/// One session with a page of its observations, its summary and its checkpoints.
pub async fn session(
    pool: &SqlitePool,
    id: &str,
    limit: u32,
    offset: u32,
) -> ApiResult<Option<Value>> {
    let Some(row) = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?"
    )))
    .bind(id)
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    let mut session = session_json(&row);
    let observations = sqlx::query(
        "SELECT o.id, o.kind, o.tool_name, o.title, substr(o.body, 1, 2000) AS body,
                o.occurred_at, m.id AS item_id
         FROM observations o
         LEFT JOIN memory_items m ON m.source = 'observation' AND m.source_id = o.id
         WHERE o.session_id = ? ORDER BY o.occurred_at, o.id LIMIT ? OFFSET ?",
    )
    .bind(id)
    .bind(i64::from(limit))
    .bind(i64::from(offset))
    .fetch_all(pool)
    .await?;
    session["observations"] = observations
        .iter()
        .map(|r| {
            json!({
                "id": r.get::<i64, _>("id"),
                "kind": r.get::<String, _>("kind"),
                "tool_name": r.get::<String, _>("tool_name"),
                "title": r.get::<String, _>("title"),
                "body": r.get::<String, _>("body"),
                "occurred_at_ms": r.get::<i64, _>("occurred_at"),
                "item_id": r.get::<Option<i64>, _>("item_id"),
            })
        })
        .collect();
    session["observations_offset"] = json!(offset);
    session["summary"] = match sqlx::query(
        "SELECT status, request, done, decisions, open_items, files_modified, text, compressor,
                updated_at
         FROM session_summaries WHERE session_id = ?",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?
    {
        Some(r) => json!({
            "status": r.get::<String, _>("status"),
            "request": r.get::<String, _>("request"),
            "done": json_list(&r.get::<String, _>("done")),
            "decisions": json_list(&r.get::<String, _>("decisions")),
            "open_items": json_list(&r.get::<String, _>("open_items")),
            "files_modified": json_list(&r.get::<String, _>("files_modified")),
            "text": r.get::<String, _>("text"),
            "compressor": r.get::<String, _>("compressor"),
            "updated_at_ms": r.get::<i64, _>("updated_at"),
        }),
        None => Value::Null,
    };
    session["checkpoints"] = checkpoints(pool, "", id, 50, 0).await?["checkpoints"].take();
    Ok(Some(session))
}

/// Checkpoints, most recent first.
pub async fn checkpoints(
    pool: &SqlitePool,
    project: &str,
    session: &str,
    limit: u32,
    offset: u32,
) -> ApiResult<Value> {
    let rows = sqlx::query(
        "SELECT id, session_id, project, trigger, summary, decisions, open_tasks, files_modified,
                tokens_before, tokens_after, text, compressor, occurred_at
         FROM checkpoints WHERE (?1 = '' OR project = ?1) AND (?2 = '' OR session_id = ?2)
         ORDER BY occurred_at DESC, id DESC LIMIT ?3 OFFSET ?4",
    )
    .bind(project)
    .bind(session)
    .bind(i64::from(limit))
    .bind(i64::from(offset))
    .fetch_all(pool)
    .await?;
    Ok(json!({
        "limit": limit,
        "offset": offset,
        "checkpoints": rows.iter().map(|r| json!({
            "id": r.get::<i64, _>("id"),
            "session_id": r.get::<String, _>("session_id"),
            "project": r.get::<String, _>("project"),
            "trigger": r.get::<String, _>("trigger"),
            "summary": r.get::<String, _>("summary"),
            "decisions": json_list(&r.get::<String, _>("decisions")),
            "open_tasks": json_list(&r.get::<String, _>("open_tasks")),
            "files_modified": json_list(&r.get::<String, _>("files_modified")),
            "tokens_before": r.get::<i64, _>("tokens_before"),
            "tokens_after": r.get::<i64, _>("tokens_after"),
            "text": r.get::<String, _>("text"),
            "compressor": r.get::<String, _>("compressor"),
            "occurred_at_ms": r.get::<i64, _>("occurred_at"),
        })).collect::<Vec<_>>(),
    }))
}

/// Patterns, most recently seen first.
pub async fn patterns(
    pool: &SqlitePool,
    project: &str,
    kind: &str,
    min_occurrences: u32,
    limit: u32,
    offset: u32,
) -> ApiResult<Value> {
    let rows = sqlx::query(
        "SELECT id, kind, title, text, project, occurrences, sessions, first_seen_at,
                last_seen_at, files
         FROM patterns
         WHERE (?1 = '' OR id IN (SELECT pattern_id FROM pattern_occurrences WHERE project = ?1))
           AND (?2 = '' OR kind = ?2) AND occurrences >= ?3
         ORDER BY last_seen_at DESC, id DESC LIMIT ?4 OFFSET ?5",
    )
    .bind(project)
    .bind(kind)
    .bind(i64::from(min_occurrences))
    .bind(i64::from(limit))
    .bind(i64::from(offset))
    .fetch_all(pool)
    .await?;
    Ok(json!({
        "limit": limit,
        "offset": offset,
        "patterns": rows.iter().map(|r| json!({
            "id": r.get::<i64, _>("id"),
            "kind": r.get::<String, _>("kind"),
            "title": r.get::<String, _>("title"),
            "text": r.get::<String, _>("text"),
            "project": r.get::<String, _>("project"),
            "occurrences": r.get::<i64, _>("occurrences"),
            "sessions": r.get::<i64, _>("sessions"),
            "first_seen_at_ms": r.get::<i64, _>("first_seen_at"),
            "last_seen_at_ms": r.get::<i64, _>("last_seen_at"),
            "files": json_list(&r.get::<String, _>("files")),
        })).collect::<Vec<_>>(),
    }))
}

/// Counts, activity per project and per day, and what compression saved.
pub async fn stats(pool: &SqlitePool, days: u32) -> ApiResult<Value> {
    let mut counts = serde_json::Map::new();
    for table in [
        "sessions",
        "observations",
        "memory_items",
        "structured_observations",
        "session_summaries",
        "checkpoints",
        "patterns",
        "dead_letters",
    ] {
        let (n,): (i64,) =
            sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
                .fetch_one(pool)
                .await?;
        counts.insert(table.to_owned(), json!(n));
    }
    let (archived,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM sessions WHERE archived_at IS NOT NULL")
            .fetch_one(pool)
            .await?;
    counts.insert("archived_sessions".to_owned(), json!(archived));

    let kinds = sqlx::query(
        "SELECT kind, count(*) AS n FROM memory_items GROUP BY kind ORDER BY n DESC, kind",
    )
    .fetch_all(pool)
    .await?;
    let projects = sqlx::query(
        "SELECT project, count(*) AS sessions, sum(event_count) AS events,
                max(last_event_at) AS last
         FROM sessions GROUP BY project ORDER BY last DESC LIMIT 50",
    )
    .fetch_all(pool)
    .await?;
    let since = common::now_ms() - i64::from(days) * 86_400_000;
    let per_day = sqlx::query(
        "SELECT occurred_at / 86400000 AS day, count(*) AS n,
                sum(kind = 'prompt') AS prompts, sum(kind = 'tool_failure') AS errors
         FROM observations WHERE occurred_at >= ? GROUP BY day ORDER BY day",
    )
    .bind(since)
    .fetch_all(pool)
    .await?;
    let (raw_tokens,): (i64,) =
        sqlx::query_as("SELECT coalesce(sum(total_tokens), 0) FROM compressor_sessions")
            .fetch_one(pool)
            .await?;
    let (summary_tokens,): (i64,) =
        sqlx::query_as("SELECT coalesce(sum(length(text)), 0) / 4 FROM session_summaries")
            .fetch_one(pool)
            .await?;
    let (checkpoint_saved,): (i64,) = sqlx::query_as(
        "SELECT coalesce(sum(max(tokens_before - tokens_after, 0)), 0) FROM checkpoints",
    )
    .fetch_one(pool)
    .await?;
    Ok(json!({
        "counts": counts,
        "kinds": kinds.iter().map(|r| json!({
            "kind": r.get::<String, _>("kind"),
            "items": r.get::<i64, _>("n"),
        })).collect::<Vec<_>>(),
        "projects": projects.iter().map(|r| json!({
            "project": r.get::<String, _>("project"),
            "sessions": r.get::<i64, _>("sessions"),
            "events": r.get::<i64, _>("events"),
            "last_event_at_ms": r.get::<i64, _>("last"),
        })).collect::<Vec<_>>(),
        "per_day": per_day.iter().map(|r| json!({
            "day": common::utc_day(r.get::<i64, _>("day") * 86_400_000),
            "observations": r.get::<i64, _>("n"),
            "prompts": r.get::<i64, _>("prompts"),
            "errors": r.get::<i64, _>("errors"),
        })).collect::<Vec<_>>(),
        "tokens": {
            "raw": raw_tokens,
            "summaries": summary_tokens,
            "saved_by_summaries": (raw_tokens - summary_tokens).max(0),
            "saved_by_checkpoints": checkpoint_saved,
        },
    }))
}
