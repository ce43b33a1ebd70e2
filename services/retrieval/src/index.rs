//! Indexing: from stored observations to memory items (full-text now, vectors in the
//! background, see [`crate::embedder`]).
//!
//! Retrieval consumes `mneme.ingest.stored` through a durable consumer and indexes each
//! observation worth remembering as a memory item with a kind. Indexing is idempotent (one item
//! per source row), so redelivery and the start-up catch-up cannot duplicate anything.

use serde_json::Value;
use sha2::Digest as _;
use sqlx::SqlitePool;

/// The longest indexed text of one item; the whole observation stays available through `get`.
const MAX_TEXT_CHARS: usize = 4_000;
/// The longest text handed to the embedding model (it reads about 256 tokens anyway).
const MAX_EMBED_CHARS: usize = 1_500;
/// The longest text of a neighbouring item indexed with an item.
const MAX_CONTEXT_CHARS: usize = 1_000;
/// The longest part of the previous item embedded with an item.
const MAX_PREV_EMBED_CHARS: usize = 300;

/// One observation as retrieval reads it.
#[derive(Debug, sqlx::FromRow)]
struct ObservationRow {
    id: i64,
    session_id: String,
    project: String,
    agent: String,
    author: String,
    kind: String,
    tool_name: String,
    title: String,
    body: String,
    input: Option<String>,
    occurred_at: i64,
}

/// A memory item about to be indexed.
#[derive(Debug, Clone, PartialEq)]
pub struct NewItem {
    pub source: &'static str,
    pub source_id: i64,
    pub kind: String,
    pub session_id: String,
    pub project: String,
    pub agent: String,
    pub author: String,
    pub tool_name: String,
    pub title: String,
    pub text: String,
    pub files: Vec<String>,
    pub concepts: Vec<String>,
    pub occurred_at: i64,
    /// Whether the items before it in its session are indexed with it (raw events: yes; items
    /// that sum up, like summaries and patterns, stand alone).
    pub with_context: bool,
}

impl NewItem {
    /// What the embedding model reads: the end of the previous item of the session, then the
    /// title (unless the text starts with it) and the text.
    pub fn embed_text(title: &str, text: &str, prev: &str) -> String {
        let own = if text.starts_with(title) {
            text.to_owned()
        } else {
            format!("{title}\n{text}")
        };
        let prev = prev.trim();
        let joined = if prev.is_empty() {
            own
        } else {
            // Only the end of a long previous item: it is context, the item itself must fit.
            let skip = prev.chars().count().saturating_sub(MAX_PREV_EMBED_CHARS);
            let tail: String = prev.chars().skip(skip).collect();
            format!("{tail} {own}")
        };
        cut(&joined, MAX_EMBED_CHARS)
    }
}

/// The memory kind of an observation kind, or `None` when it is not worth indexing (starts,
/// ends and pre-tool events say nothing a later post-tool or prompt does not).
fn memory_kind(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "prompt" => "prompt",
        "post_tool" => "tool",
        "tool_failure" => "error",
        "stop" | "subagent_stop" => "reply",
        "post_compact" => "compaction",
        _ => return None,
    })
}

/// Index the observations with these ids; returns how many new items were written.
pub async fn index_observations(pool: &SqlitePool, ids: &[i64]) -> anyhow::Result<usize> {
    if ids.is_empty() {
        return Ok(0);
    }
    let marks = vec!["?"; ids.len()].join(", ");
    let sql = format!(
        "SELECT id, session_id, project, agent, author, kind, tool_name, title, body, input, occurred_at
         FROM observations WHERE id IN ({marks}) ORDER BY occurred_at, id"
    );
    let mut query = sqlx::query_as::<_, ObservationRow>(sqlx::AssertSqlSafe(sql));
    for id in ids {
        query = query.bind(id);
    }
    let rows = query.fetch_all(pool).await?;
    let items: Vec<NewItem> = rows.iter().filter_map(item_of).collect();
    write_items(pool, &items).await
}

/// Index every observation newer than the newest one already indexed: the safety net for
/// notifications that never arrived. Returns how many items were written.
pub async fn catch_up(pool: &SqlitePool) -> anyhow::Result<usize> {
    const BATCH: i64 = 500;
    let mut total = 0;
    let (mut after,): (i64,) = sqlx::query_as(
        "SELECT COALESCE(MAX(source_id), 0) FROM memory_items WHERE source = 'observation'",
    )
    .fetch_one(pool)
    .await?;
    loop {
        let ids: Vec<(i64,)> =
            sqlx::query_as("SELECT id FROM observations WHERE id > ? ORDER BY id LIMIT ?")
                .bind(after)
                .bind(BATCH)
                .fetch_all(pool)
                .await?;
        let Some(&(last,)) = ids.last() else {
            return Ok(total);
        };
        let ids: Vec<i64> = ids.into_iter().map(|(id,)| id).collect();
        total += index_observations(pool, &ids).await?;
        after = last;
    }
}

/// Write items (and their full-text rows) in one transaction; items already indexed are left
/// alone.
pub async fn write_items(pool: &SqlitePool, items: &[NewItem]) -> anyhow::Result<usize> {
    let mut tx = store::begin_write(pool).await?;
    let mut written = 0;
    for item in items {
        written += usize::from(insert_item(&mut tx, item).await?.is_some());
    }
    tx.commit().await?;
    Ok(written)
}

/// Write items that replace what their source rows said before (a summary rewritten, a pattern
/// seen again): an item whose title and text are unchanged is left alone, a changed one is
/// deleted and written anew under a new id, so the background embedder, which works upwards
/// through ids, embeds its new text. Returns the ids of the items removed, whose vectors the
/// caller deletes, and how many items were written.
pub async fn replace_items(
    pool: &SqlitePool,
    items: &[NewItem],
) -> anyhow::Result<(Vec<i64>, usize)> {
    let mut tx = store::begin_write(pool).await?;
    let mut removed = Vec::new();
    let mut written = 0;
    for item in items {
        let existing: Option<(i64, String, String)> = sqlx::query_as(
            "SELECT id, title, text FROM memory_items WHERE source = ? AND source_id = ?",
        )
        .bind(item.source)
        .bind(item.source_id)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some((id, title, text)) = existing {
            if title == item.title && text == item.text {
                continue;
            }
            sqlx::query("DELETE FROM memory_fts WHERE rowid = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM memory_items WHERE id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            removed.push(id);
        }
        written += usize::from(insert_item(&mut tx, item).await?.is_some());
    }
    tx.commit().await?;
    Ok((removed, written))
}

/// Insert one item and its full-text row; `None` when its source row is already indexed.
async fn insert_item(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    item: &NewItem,
) -> anyhow::Result<Option<i64>> {
    let now = common::now_ms();
    // The two items before this one in its session: an answer is found by the question it
    // answers, a tool result by the request that led to it. Derived items (summaries,
    // patterns) stand alone.
    let (last_seq,): (i64,) =
        sqlx::query_as("SELECT COALESCE(MAX(seq), 0) FROM memory_items WHERE session_id = ?")
            .bind(&item.session_id)
            .fetch_one(&mut **tx)
            .await?;
    let seq = last_seq + 1;
    // Context comes from items of the same source, so a summary written between two events is
    // not read as what the second one answers.
    let previous: Vec<(String,)> = if item.with_context {
        sqlx::query_as(
            "SELECT text FROM memory_items WHERE session_id = ? AND source = ?
             ORDER BY seq DESC LIMIT 2",
        )
        .bind(&item.session_id)
        .bind(item.source)
        .fetch_all(&mut **tx)
        .await?
    } else {
        Vec::new()
    };
    let context = |i: usize| {
        previous
            .get(i)
            .map(|(t,)| cut(t, MAX_CONTEXT_CHARS))
            .unwrap_or_default()
    };
    let (prev, prev2) = (context(0), context(1));
    let embed_text = NewItem::embed_text(&item.title, &item.text, &prev);
    let text_hash = hash(&embed_text);
    let inserted: Option<(i64,)> = sqlx::query_as(
        "INSERT INTO memory_items (source, source_id, kind, session_id, project, agent, author,
             tool_name, title, text, context, seq, files, concepts, text_hash, occurred_at,
             indexed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (source, source_id) DO NOTHING
         RETURNING id",
    )
    .bind(item.source)
    .bind(item.source_id)
    .bind(&item.kind)
    .bind(&item.session_id)
    .bind(&item.project)
    .bind(&item.agent)
    .bind(&item.author)
    .bind(&item.tool_name)
    .bind(&item.title)
    .bind(&item.text)
    .bind(&prev)
    .bind(seq)
    .bind(item.files.join("\n"))
    .bind(item.concepts.join("\n"))
    .bind(&text_hash)
    .bind(item.occurred_at)
    .bind(now)
    .fetch_optional(&mut **tx)
    .await?;
    let Some((id,)) = inserted else {
        return Ok(None);
    };
    // The title is indexed on its own only when the text does not already say it, so a
    // prompt (whose title is its first line) is not counted twice.
    let title = if item.text.contains(item.title.as_str()) {
        ""
    } else {
        item.title.as_str()
    };
    sqlx::query(
        "INSERT INTO memory_fts (rowid, title, text, prev, prev2, date) VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(id)
    .bind(store::fts::index_text(title))
    .bind(store::fts::index_text(&item.text))
    .bind(store::fts::index_text(&prev))
    .bind(store::fts::index_text(&prev2))
    .bind(crate::text::date_words(item.occurred_at))
    .execute(&mut **tx)
    .await?;
    Ok(Some(id))
}

/// The memory item for an observation, if it is worth one.
fn item_of(row: &ObservationRow) -> Option<NewItem> {
    let kind = memory_kind(&row.kind)?;
    let text = cut(row.body.trim(), MAX_TEXT_CHARS);
    if text.is_empty() && kind != "tool" && kind != "error" {
        return None;
    }
    let input: Option<Value> = row
        .input
        .as_deref()
        .and_then(|i| serde_json::from_str(i).ok());
    let files = input.as_ref().map(files_of).unwrap_or_default();
    let mut concepts = Vec::new();
    if !row.tool_name.is_empty() {
        concepts.push(tool_category(&row.tool_name).to_owned());
    }
    if kind == "error" {
        concepts.push("error".to_owned());
    }
    for file in &files {
        if let Some(language) = language_of(file)
            && !concepts.iter().any(|c| c == language)
        {
            concepts.push(language.to_owned());
        }
    }
    Some(NewItem {
        source: "observation",
        source_id: row.id,
        kind: kind.to_owned(),
        session_id: row.session_id.clone(),
        project: row.project.clone(),
        agent: row.agent.clone(),
        author: row.author.clone(),
        tool_name: row.tool_name.clone(),
        title: row.title.clone(),
        text: if text.is_empty() {
            row.title.clone()
        } else {
            text
        },
        files,
        concepts,
        occurred_at: row.occurred_at,
        with_context: true,
    })
}

/// File paths a tool input names.
fn files_of(input: &Value) -> Vec<String> {
    const KEYS: [&str; 5] = ["file_path", "path", "notebook_path", "filePath", "filename"];
    let mut files: Vec<String> = KEYS
        .iter()
        .filter_map(|k| input.get(*k).and_then(Value::as_str))
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    files.dedup();
    files
}

/// A coarse category of a tool by its name, used as a concept tag.
fn tool_category(tool: &str) -> &'static str {
    match tool {
        "Read" | "NotebookRead" => "file-read",
        "Edit" | "MultiEdit" | "Write" | "NotebookEdit" => "file-edit",
        "Bash" | "BashOutput" | "KillShell" => "shell",
        "Grep" | "Glob" | "LS" => "search",
        "WebFetch" | "WebSearch" => "web",
        "Task" | "Agent" => "subagent",
        t if t.starts_with("mcp__") => "mcp",
        _ => "tool",
    }
}

/// The language a file is written in, by extension, as a concept tag.
fn language_of(path: &str) -> Option<&'static str> {
    let extension = path.rsplit_once('.')?.1;
    Some(match extension {
        "rs" => "rust",
        "py" => "python",
        "ts" | "tsx" => "typescript",
        "js" | "jsx" | "mjs" => "javascript",
        "go" => "go",
        "java" => "java",
        "rb" => "ruby",
        "c" | "h" => "c",
        "cc" | "cpp" | "hpp" => "cpp",
        "sql" => "sql",
        "md" => "markdown",
        "toml" | "yaml" | "yml" | "json" => "config",
        "sh" | "bash" => "shell-script",
        _ => return None,
    })
}

/// sha256 of `text`, hex.
pub fn hash(text: &str) -> String {
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// At most `max` characters of `text`.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => text[..at].to_owned(),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concepts_and_files_come_from_the_tool_input() {
        let row = ObservationRow {
            id: 7,
            session_id: "s".into(),
            project: "/p".into(),
            agent: "claude-code".into(),
            author: "dev".into(),
            kind: "post_tool".into(),
            tool_name: "Edit".into(),
            title: "Edit src/main.rs".into(),
            body: "Edit src/main.rs".into(),
            input: Some(r#"{"file_path":"/p/src/main.rs","old_string":"a"}"#.into()),
            occurred_at: 1,
        };
        let item = item_of(&row).unwrap();
        assert_eq!(item.kind, "tool");
        assert_eq!(item.files, ["/p/src/main.rs"]);
        assert_eq!(item.concepts, ["file-edit", "rust"]);
        let start = ObservationRow {
            kind: "session_start".into(),
            ..row
        };
        assert!(item_of(&start).is_none());
    }

    #[test]
    fn embed_text_does_not_repeat_the_title() {
        assert_eq!(
            NewItem::embed_text("fix the build", "fix the build now", ""),
            "fix the build now"
        );
        assert_eq!(
            NewItem::embed_text("Bash", "cargo test", "run the tests"),
            "run the tests Bash\ncargo test"
        );
    }
}
