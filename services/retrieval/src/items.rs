//! The last two steps of progressive disclosure: `timeline` (the items around one item in its
//! session) and `get` (whole items by id).

use proto::Item;
use sqlx::SqlitePool;

/// Items on each side of the anchor when the request does not say.
pub const DEFAULT_RADIUS: u32 = 5;
/// The widest timeline one request may ask for.
pub const MAX_RADIUS: u32 = 50;
/// The most items one `get` may ask for.
pub const MAX_GET: usize = 100;

#[derive(sqlx::FromRow)]
struct ItemRow {
    id: i64,
    kind: String,
    session_id: String,
    project: String,
    agent: String,
    title: String,
    text: String,
    tool_name: String,
    files: String,
    concepts: String,
    occurred_at: i64,
    source: String,
    source_id: i64,
    input: Option<String>,
    output: Option<String>,
    body: Option<String>,
}

const SELECT: &str = "SELECT m.id, m.kind, m.session_id, m.project, m.agent, m.title, m.text,
        m.tool_name, m.files, m.concepts, m.occurred_at, m.source, m.source_id,
        o.input, o.output, o.body
     FROM memory_items m
     LEFT JOIN observations o ON m.source = 'observation' AND o.id = m.source_id";

fn lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

impl From<ItemRow> for Item {
    fn from(row: ItemRow) -> Item {
        Item {
            id: row.id,
            kind: row.kind,
            session_id: row.session_id,
            project: row.project,
            agent: row.agent,
            title: row.title,
            // The index keeps a shortened text; the whole observation body is the real item.
            text: row.body.filter(|b| !b.is_empty()).unwrap_or(row.text),
            tool_name: row.tool_name,
            files: lines(&row.files),
            concepts: lines(&row.concepts),
            occurred_at_ms: row.occurred_at,
            source: row.source,
            source_id: row.source_id,
            input: row.input.unwrap_or_default(),
            output: row.output.unwrap_or_default(),
        }
    }
}

/// The id an item has now: itself, or the rewrite it moved to.
async fn current(pool: &SqlitePool, id: i64) -> sqlx::Result<i64> {
    let moved: Option<(i64,)> =
        sqlx::query_as("SELECT new_id FROM memory_item_moves WHERE old_id = ?")
            .bind(id)
            .fetch_optional(pool)
            .await?;
    Ok(moved.map_or(id, |(new,)| new))
}

/// Whole items by id, in the order asked (unknown ids are left out; an id whose item was
/// rewritten gives the rewrite, under its own id).
pub async fn get(pool: &SqlitePool, ids: &[i64]) -> anyhow::Result<Vec<Item>> {
    let ids = &ids[..ids.len().min(MAX_GET)];
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    // An id handed out before its item was rewritten names the rewrite now.
    let mut ids = ids.to_vec();
    for id in &mut ids {
        *id = current(pool, *id).await?;
    }
    let ids = &ids;
    let marks = vec!["?"; ids.len()].join(", ");
    let sql = format!("{SELECT} WHERE m.id IN ({marks})");
    let mut query = sqlx::query_as::<_, ItemRow>(sqlx::AssertSqlSafe(sql));
    for id in ids {
        query = query.bind(id);
    }
    let mut rows: Vec<Item> = query
        .fetch_all(pool)
        .await?
        .into_iter()
        .map(Item::from)
        .collect();
    rows.sort_by_key(|item| ids.iter().position(|id| *id == item.id));
    Ok(rows)
}

/// The items of the anchor's session around it, in time order, and the anchor's index; `None`
/// when the id is unknown.
pub async fn timeline(
    pool: &SqlitePool,
    id: i64,
    radius: u32,
) -> anyhow::Result<Option<(Vec<Item>, usize)>> {
    let radius = match radius {
        0 => DEFAULT_RADIUS,
        r => r.min(MAX_RADIUS),
    } as i64;
    let anchor: Option<(String, i64)> =
        sqlx::query_as("SELECT session_id, seq FROM memory_items WHERE id = ?")
            .bind(current(pool, id).await?)
            .fetch_optional(pool)
            .await?;
    let Some((session, seq)) = anchor else {
        return Ok(None);
    };
    let before_sql =
        format!("{SELECT} WHERE m.session_id = ? AND m.seq < ? ORDER BY m.seq DESC LIMIT ?");
    let after_sql =
        format!("{SELECT} WHERE m.session_id = ? AND m.seq >= ? ORDER BY m.seq LIMIT ?");
    let mut before: Vec<ItemRow> = sqlx::query_as(sqlx::AssertSqlSafe(before_sql))
        .bind(&session)
        .bind(seq)
        .bind(radius)
        .fetch_all(pool)
        .await?;
    before.reverse();
    let after: Vec<ItemRow> = sqlx::query_as(sqlx::AssertSqlSafe(after_sql))
        .bind(&session)
        .bind(seq)
        .bind(radius + 1)
        .fetch_all(pool)
        .await?;
    let anchor_index = before.len();
    let items = before
        .into_iter()
        .chain(after)
        .map(Item::from)
        .collect::<Vec<_>>();
    Ok(Some((items, anchor_index)))
}
