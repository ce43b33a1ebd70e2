//! The read side of the store, for everything that is not a service: the api and the `mneme`
//! command.
//!
//! Each service owns the statements for the tables it writes; the api and the command line
//! only read, and this crate is where they do it. It holds:
//!
//! - the read models: one [`sqlx::FromRow`] + [`serde::Serialize`] struct per row shape read
//!   from another service's tables ([`sessions`], [`derived`], [`stats`], [`titles`]), and the
//!   read-only queries that return them. The api answers with them as they serialise, so a
//!   model's field names are the JSON names of the REST responses, and its fields are declared
//!   in the order those responses list them: serde_json keeps keys in insertion order once any
//!   crate in a build turns its `preserve_order` on, which one in this workspace does;
//! - the archive: the JSON-lines format of all memory ([`format`]), the exporter that reads it
//!   from the store a page at a time ([`export_lines`]), and the importer that hands its rows to
//!   their owners over NATS ([`Importer`]).
//!
//! It knows nothing of HTTP: the api wraps these in handlers, the command line in commands.

pub mod claude_mem;
pub mod derived;
mod export;
pub mod format;
mod import;
pub mod sessions;
pub mod stats;
pub mod titles;

#[cfg(test)]
mod tests;

pub use claude_mem::{ClaudeMem, ClaudeMemError, ClaudeMemImported};
pub use derived::{
    Checkpoint, CheckpointPage, Pattern, PatternPage, Summary, checkpoints, patterns,
    project_patterns, project_summaries,
};
pub use export::export_lines;
pub use import::{ImportError, Imported, Importer};
pub use sessions::{
    AgentActivity, Archived, Session, SessionBrief, SessionDetail, SessionHistory,
    SessionObservation, SessionPage, StoredEvent, agent_activity, project_history, projects,
    session, session_events, session_item_count, session_list, sessions,
};
pub use stats::{Counts, Stats, counts, stats};
pub use titles::{Titled, title};

use serde::Serialize;
use serde_json::Value;

/// A JSON array stored as text, as the compressor and the pattern service store lists; text
/// that is not an array reads as an empty one, so one bad row never fails a whole list.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct JsonList(pub Value);

impl Default for JsonList {
    fn default() -> JsonList {
        JsonList(Value::Array(Vec::new()))
    }
}

impl From<String> for JsonList {
    fn from(text: String) -> JsonList {
        serde_json::from_str::<Value>(&text)
            .ok()
            .filter(Value::is_array)
            .map_or_else(JsonList::default, JsonList)
    }
}

impl From<Option<String>> for JsonList {
    fn from(text: Option<String>) -> JsonList {
        text.map_or_else(JsonList::default, JsonList::from)
    }
}

impl JsonList {
    /// The list as strings; empty when any element is not one, as a list of files or
    /// decisions with a stray element is not to be trusted in part.
    pub fn strings(&self) -> Vec<String> {
        serde_json::from_value(self.0.clone()).unwrap_or_default()
    }
}
