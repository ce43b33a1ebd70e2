//! Indexing what the compressor and the pattern service write: structured observations, session
//! summaries, checkpoints and patterns become memory items next to the raw events they came
//! from, so search finds them and session-start context can show them.
//!
//! Their rows are rewritten as work goes on (an edit run grows, a summary becomes final, a
//! pattern is seen again); each rewrite is announced again, and the item is replaced when its
//! text changed ([`crate::index::replace_items`]).

use crate::index::{self, NewItem, cut};
use crate::lexical::Lexical;
use serde_json::Value;
use sqlx::SqlitePool;

/// The longest text of one derived item.
const MAX_TEXT_CHARS: usize = 4_000;

/// A row of another service's table that retrieval indexes, named by its notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Structured(i64),
    Summary(i64),
    Checkpoint(i64),
    Pattern(i64),
}

impl Source {
    /// The `memory_items.source` of this kind of row, and the row's id.
    pub fn key(self) -> (&'static str, i64) {
        match self {
            Source::Structured(id) => ("structured", id),
            Source::Summary(id) => ("summary", id),
            Source::Checkpoint(id) => ("checkpoint", id),
            Source::Pattern(id) => ("pattern", id),
        }
    }

    /// The source named by a compressor notice's kind.
    pub fn of_compressor(kind: &str, id: i64) -> Option<Source> {
        match kind {
            "structured" => Some(Source::Structured(id)),
            "summary" => Some(Source::Summary(id)),
            "checkpoint" => Some(Source::Checkpoint(id)),
            _ => None,
        }
    }
}

/// Index (or re-index) these rows; returns the ids of replaced or removed items, whose vectors
/// are now stale, and how many items were written. A row that is gone (a pattern whose every
/// occurrence was in deleted sessions, a summary of a deleted session) takes its item with it.
pub async fn index(
    pool: &SqlitePool,
    lexical: &Lexical,
    sources: &[Source],
) -> anyhow::Result<(Vec<i64>, usize)> {
    let mut items = Vec::with_capacity(sources.len());
    let mut gone = Vec::new();
    for source in sources {
        match item_of(pool, *source).await? {
            Some(item) => items.push(item),
            None => gone.push(source.key()),
        }
    }
    index::replace_items(pool, lexical, &items, &gone).await
}

/// The memory items of these patterns (a pattern not indexed has none).
pub async fn pattern_items(pool: &SqlitePool, patterns: &[i64]) -> sqlx::Result<Vec<i64>> {
    if patterns.is_empty() {
        return Ok(Vec::new());
    }
    let marks = vec!["?"; patterns.len()].join(", ");
    let sql =
        format!("SELECT id FROM memory_items WHERE source = 'pattern' AND source_id IN ({marks})");
    let mut query = sqlx::query_as::<_, (i64,)>(sqlx::AssertSqlSafe(sql));
    for id in patterns {
        query = query.bind(id);
    }
    Ok(query
        .fetch_all(pool)
        .await?
        .into_iter()
        .map(|(id,)| id)
        .collect())
}

/// A JSON array of strings as a list; anything else as nothing.
fn list(json: &str) -> Vec<String> {
    match serde_json::from_str::<Value>(json) {
        Ok(Value::Array(values)) => values
            .into_iter()
            .filter_map(|v| match v {
                Value::String(s) if !s.trim().is_empty() => Some(s),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn first_line(text: &str, max: usize) -> String {
    cut(
        text.lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim(),
        max,
    )
}

fn item(source: &'static str, id: i64, kind: &str, session: &str, project: &str) -> NewItem {
    NewItem {
        source,
        source_id: id,
        kind: kind.to_owned(),
        session_id: session.to_owned(),
        project: project.to_owned(),
        agent: String::new(),
        author: String::new(),
        tool_name: String::new(),
        title: String::new(),
        text: String::new(),
        files: Vec::new(),
        concepts: Vec::new(),
        occurred_at: 0,
        with_context: false,
    }
}

#[derive(sqlx::FromRow)]
struct StructuredRow {
    session_id: String,
    project: String,
    r#type: String,
    category: String,
    tool_name: String,
    title: String,
    narrative: String,
    facts: String,
    concepts: String,
    files_read: String,
    files_modified: String,
    occurred_at: i64,
}

#[derive(sqlx::FromRow)]
struct PatternRow {
    kind: String,
    title: String,
    text: String,
    project: String,
    last_session_id: String,
    occurrences: i64,
    files: String,
    last_seen_at: i64,
}

/// The memory item of one row, or `None` when the row is gone or not worth an item.
async fn item_of(pool: &SqlitePool, source: Source) -> anyhow::Result<Option<NewItem>> {
    Ok(match source {
        Source::Structured(id) => {
            let row: Option<StructuredRow> = sqlx::query_as(
                "SELECT session_id, project, type, category, tool_name, title, narrative, facts,
                        concepts, files_read, files_modified, occurred_at
                 FROM structured_observations WHERE id = ?",
            )
            .bind(id)
            .fetch_optional(pool)
            .await?;
            row.map(|row| {
                let mut text = row.narrative.trim().to_owned();
                for fact in list(&row.facts) {
                    text.push_str("\n- ");
                    text.push_str(&fact);
                }
                let mut files = list(&row.files_modified);
                for file in list(&row.files_read) {
                    if !files.contains(&file) {
                        files.push(file);
                    }
                }
                let mut concepts = list(&row.concepts);
                concepts.push(row.category);
                NewItem {
                    tool_name: row.tool_name,
                    title: cut(&row.title, 200),
                    text: cut(&text, MAX_TEXT_CHARS),
                    files,
                    concepts,
                    occurred_at: row.occurred_at,
                    ..item("structured", id, &row.r#type, &row.session_id, &row.project)
                }
            })
        }
        Source::Summary(id) => {
            let row: Option<(String, String, String, String, String, i64)> = sqlx::query_as(
                "SELECT session_id, project, request, text, files_modified, occurred_at
                 FROM session_summaries WHERE id = ?",
            )
            .bind(id)
            .fetch_optional(pool)
            .await?;
            row.map(|(session, project, request, text, files, at)| NewItem {
                title: format!("Session: {}", first_line(&request, 160)),
                text: cut(text.trim(), MAX_TEXT_CHARS),
                files: list(&files),
                concepts: vec!["summary".to_owned()],
                occurred_at: at,
                ..item("summary", id, "summary", &session, &project)
            })
        }
        Source::Checkpoint(id) => {
            let row: Option<(String, String, String, String, String, i64)> = sqlx::query_as(
                "SELECT session_id, project, trigger, text, files_modified, occurred_at
                 FROM checkpoints WHERE id = ?",
            )
            .bind(id)
            .fetch_optional(pool)
            .await?;
            row.map(|(session, project, trigger, text, files, at)| NewItem {
                title: format!("Checkpoint ({})", trigger.replace('_', " ")),
                text: cut(text.trim(), MAX_TEXT_CHARS),
                files: list(&files),
                concepts: vec!["checkpoint".to_owned()],
                occurred_at: at,
                ..item("checkpoint", id, "checkpoint", &session, &project)
            })
        }
        Source::Pattern(id) => {
            let row: Option<PatternRow> = sqlx::query_as(
                "SELECT kind, title, text, project, last_session_id, occurrences, files,
                        last_seen_at
                 FROM patterns WHERE id = ?",
            )
            .bind(id)
            .fetch_optional(pool)
            .await?;
            // One failure is not yet a pattern, and a workflow that never worked is nothing to
            // offer (its failures are reflections); every other kind says something on its
            // first sighting (a decision, a fix).
            row.filter(|p| match p.kind.as_str() {
                "error" => p.occurrences >= 2,
                "workflow" => p.occurrences >= 1,
                _ => true,
            })
            .map(|p| NewItem {
                title: cut(&p.title, 200),
                text: cut(p.text.trim(), MAX_TEXT_CHARS),
                files: list(&p.files),
                concepts: vec![p.kind.clone()],
                occurred_at: p.last_seen_at,
                ..item("pattern", id, "pattern", &p.last_session_id, &p.project)
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_json_string_arrays() {
        assert_eq!(list(r#"["a", "", 3, "b"]"#), ["a", "b"]);
        assert!(list("not json").is_empty());
        assert!(list(r#"{"a": 1}"#).is_empty());
        assert_eq!(first_line("\n  first \nsecond", 3), "fir");
    }
}
