//! The exporter: every line of the archive, read from the store a page at a time, so an export
//! of any size holds one page in memory.

use crate::format::{CollectionLine, FORMAT, ItemLine, ObservationLine, SessionLine, line};
use serde_json::json;
use sqlx::SqlitePool;

/// Rows read from the store per page of an export.
const PAGE: i64 = 500;

const SESSION_SELECT: &str = "SELECT id, agent, agent_version, project, cwd, host, user, model,
        transcript_path, started_at AS started_at_ms, ended_at AS ended_at_ms, end_reason,
        last_event_at AS last_event_at_ms, event_count, prompt_count, tool_count, error_count,
        archived_at AS archived_at_ms
     FROM sessions WHERE id > ? ORDER BY id LIMIT ?";
const OBSERVATION_SELECT: &str = "SELECT id, event_id, session_id, project, agent, author, kind,
        host_event, tool_name, tool_use_id, subagent_id, title, body, input, output, meta,
        content_hash, occurred_at AS occurred_at_ms, stored_at AS stored_at_ms
     FROM observations WHERE id > ? ORDER BY id LIMIT ?";
const ITEM_SELECT: &str = "SELECT m.id, m.source, m.source_id,
        coalesce(o.event_id, '') AS source_event_id, m.kind, m.session_id, m.project, m.agent,
        m.author, m.tool_name, m.title, m.text, m.context, m.seq, m.files, m.concepts,
        m.text_hash, m.occurred_at AS occurred_at_ms, m.indexed_at AS indexed_at_ms
     FROM memory_items m
     LEFT JOIN observations o ON m.source = 'observation' AND o.id = m.source_id
     WHERE m.id > ? ORDER BY m.id LIMIT ?";
const COLLECTION_SELECT: &str = "SELECT c.id, c.name, c.description, c.query,
        c.created_at AS created_at_ms,
        coalesce((SELECT json_group_array(item_id) FROM
            (SELECT item_id FROM collection_items WHERE collection_id = c.id
             ORDER BY position)), '[]') AS item_ids
     FROM collections c WHERE c.id > ? ORDER BY c.id LIMIT ?";

/// Where an export has got to.
enum Cursor {
    Header,
    Sessions(String),
    Observations(i64),
    Items(i64),
    Collections(i64),
    End,
    Done,
}

#[derive(Default, Clone, Copy)]
struct Counts {
    sessions: u64,
    observations: u64,
    items: u64,
    collections: u64,
}

/// A page of rows after `after` (in key order), as lines, and the key of its last row when the
/// page is full (there may be more).
async fn page<'q, T, K>(
    pool: &SqlitePool,
    sql: &'static str,
    after: K,
    kind: &str,
    key: impl Fn(&T) -> K,
) -> Result<(String, Option<K>, u64), sqlx::Error>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> + serde::Serialize + Send + Unpin,
    K: 'q + Send + sqlx::Encode<'q, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>,
{
    let rows: Vec<T> = sqlx::query_as(sql)
        .bind(after)
        .bind(PAGE)
        .fetch_all(pool)
        .await?;
    let more = match rows.last() {
        Some(last) if rows.len() as i64 == PAGE => Some(key(last)),
        _ => None,
    };
    let lines = rows.iter().map(|row| line(kind, row)).collect();
    Ok((lines, more, rows.len() as u64))
}

/// The next chunk of an export, and where it leaves off.
async fn next_page(
    pool: &SqlitePool,
    cursor: Cursor,
    counts: &mut Counts,
) -> Result<(String, Cursor), sqlx::Error> {
    Ok(match cursor {
        Cursor::Header => (
            line(
                "mneme",
                &json!({"format": FORMAT, "exported_at_ms": common::time::now_ms()}),
            ),
            Cursor::Sessions(String::new()),
        ),
        Cursor::Sessions(after) => {
            let (lines, more, n) =
                page(pool, SESSION_SELECT, after, "session", |r: &SessionLine| {
                    r.id.clone()
                })
                .await?;
            counts.sessions += n;
            (
                lines,
                more.map_or(Cursor::Observations(0), Cursor::Sessions),
            )
        }
        Cursor::Observations(after) => {
            let (lines, more, n) = page(
                pool,
                OBSERVATION_SELECT,
                after,
                "observation",
                |r: &ObservationLine| r.id,
            )
            .await?;
            counts.observations += n;
            (lines, more.map_or(Cursor::Items(0), Cursor::Observations))
        }
        Cursor::Items(after) => {
            let (lines, more, n) =
                page(pool, ITEM_SELECT, after, "memory_item", |r: &ItemLine| r.id).await?;
            counts.items += n;
            (lines, more.map_or(Cursor::Collections(0), Cursor::Items))
        }
        Cursor::Collections(after) => {
            let (lines, more, n) = page(
                pool,
                COLLECTION_SELECT,
                after,
                "collection",
                |r: &CollectionLine| r.id,
            )
            .await?;
            counts.collections += n;
            (lines, more.map_or(Cursor::End, Cursor::Collections))
        }
        Cursor::End => (
            line(
                "end",
                &json!({
                    "sessions": counts.sessions,
                    "observations": counts.observations,
                    "memory_items": counts.items,
                    "collections": counts.collections,
                }),
            ),
            Cursor::Done,
        ),
        Cursor::Done => (String::new(), Cursor::Done),
    })
}

/// Every line of an export, a page of rows at a time: the header, every session, observation,
/// memory item and collection, then the `end` line. An error ends the lines early, without
/// `end`, so a reader knows the export is incomplete.
pub fn export_lines(
    pool: SqlitePool,
) -> impl futures::Stream<Item = Result<String, sqlx::Error>> + Send + 'static {
    futures::stream::unfold(
        (Cursor::Header, Counts::default()),
        move |(cursor, mut counts)| {
            let pool = pool.clone();
            async move {
                if matches!(cursor, Cursor::Done) {
                    return None;
                }
                match next_page(&pool, cursor, &mut counts).await {
                    Ok((chunk, next)) => Some((Ok(chunk), (next, counts))),
                    Err(error) => Some((Err(error), (Cursor::Done, counts))),
                }
            }
        },
    )
}
