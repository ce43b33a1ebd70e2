//! The JSON-lines archive of all memory: one JSON object a line, tagged by `type`.
//!
//! A file is a `mneme` header (`format`, `exported_at_ms`), every session, every observation,
//! every memory item, every collection (its items named by their ids in the export), then an
//! `end` line with the counts; a file without `end` was cut short. Each row line holds every
//! column of its table under the column's name (times as `…_ms`), so an import puts back the
//! rows as they were, ids included.
//!
//! Fields are added, never renamed or removed; a reader takes the fields it knows and leaves
//! the others, and an import refuses a `format` newer than [`FORMAT`].

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The export format's version; an import refuses newer ones.
pub const FORMAT: u32 = 1;

/// A session line (every column of `sessions`).
#[derive(Debug, Default, Serialize, Deserialize, sqlx::FromRow)]
#[serde(default)]
pub struct SessionLine {
    pub id: String,
    pub agent: String,
    pub agent_version: String,
    pub project: String,
    pub cwd: String,
    pub host: String,
    pub user: String,
    pub model: String,
    pub transcript_path: String,
    pub started_at_ms: i64,
    pub ended_at_ms: Option<i64>,
    pub end_reason: Option<String>,
    pub last_event_at_ms: i64,
    pub event_count: i64,
    pub prompt_count: i64,
    pub tool_count: i64,
    pub error_count: i64,
    pub archived_at_ms: Option<i64>,
}

/// An observation line (every column of `observations`).
#[derive(Debug, Default, Serialize, Deserialize, sqlx::FromRow)]
#[serde(default)]
pub struct ObservationLine {
    pub id: i64,
    pub event_id: String,
    pub session_id: String,
    pub project: String,
    pub agent: String,
    pub author: String,
    pub kind: String,
    pub host_event: String,
    pub tool_name: String,
    pub tool_use_id: String,
    pub subagent_id: String,
    pub title: String,
    pub body: String,
    pub input: Option<String>,
    pub output: Option<String>,
    pub meta: String,
    pub content_hash: String,
    pub occurred_at_ms: i64,
    pub stored_at_ms: i64,
}

/// A memory item line (every column of `memory_items`, and the event id of its observation).
#[derive(Debug, Default, Serialize, Deserialize, sqlx::FromRow)]
#[serde(default)]
pub struct ItemLine {
    pub id: i64,
    pub source: String,
    pub source_id: i64,
    pub source_event_id: String,
    pub kind: String,
    pub session_id: String,
    pub project: String,
    pub agent: String,
    pub author: String,
    pub tool_name: String,
    pub title: String,
    pub text: String,
    pub context: String,
    pub seq: i64,
    pub files: String,
    pub concepts: String,
    pub text_hash: String,
    pub occurred_at_ms: i64,
    pub indexed_at_ms: i64,
}

/// A collection line: its columns and its items' ids (in the export's ids), in order.
#[derive(Debug, Default, Serialize, Deserialize, sqlx::FromRow)]
#[serde(default)]
pub struct CollectionLine {
    pub id: i64,
    pub name: String,
    pub description: String,
    pub query: String,
    pub created_at_ms: i64,
    #[sqlx(try_from = "String")]
    pub item_ids: ItemIds,
}

/// A collection's item ids, in order; read from the store as a JSON array, which the query
/// builds.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ItemIds(pub Vec<i64>);

impl From<String> for ItemIds {
    fn from(text: String) -> ItemIds {
        ItemIds(serde_json::from_str(&text).unwrap_or_default())
    }
}

/// One line of an export, as an import reads it.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line {
    Mneme {
        #[serde(default)]
        format: u32,
    },
    Session(SessionLine),
    Observation(ObservationLine),
    MemoryItem(ItemLine),
    Collection(CollectionLine),
    End {},
}

/// One line of type `kind` holding the fields of `row`, newline included.
pub fn line(kind: &str, row: &impl Serialize) -> String {
    let mut value = serde_json::to_value(row).unwrap_or_default();
    let mut out = serde_json::Map::new();
    out.insert("type".to_owned(), json!(kind));
    if let Value::Object(fields) = value.take() {
        out.extend(fields);
    }
    let mut text = Value::Object(out).to_string();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_type_reads_back() {
        let session = line(
            "session",
            &SessionLine {
                id: "s".into(),
                ended_at_ms: Some(3),
                ..Default::default()
            },
        );
        assert!(matches!(
            serde_json::from_str::<Line>(&session).unwrap(),
            Line::Session(SessionLine {
                ended_at_ms: Some(3),
                ..
            })
        ));
        let item = line("memory_item", &ItemLine::default());
        assert!(matches!(
            serde_json::from_str::<Line>(&item).unwrap(),
            Line::MemoryItem(_)
        ));
        assert!(matches!(
            serde_json::from_str::<Line>(r#"{"type":"mneme","format":1,"exported_at_ms":5}"#)
                .unwrap(),
            Line::Mneme { format: 1 }
        ));
        assert!(serde_json::from_str::<Line>(r#"{"type":"secret"}"#).is_err());
    }
}
