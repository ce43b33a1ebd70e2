//! An observation as the services downstream of ingest read it from ingest's `observations`
//! table. The shape and its row mapping live here, once; the statements that read it stay with
//! each service, which cuts the long texts to what it needs.

/// One row of ingest's `observations`, its long texts cut short by the reader's statement.
///
/// A statement reading it names every field, in SQL or as a constant, so a column missing from
/// one service's SELECT fails loudly instead of reading as empty.
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub struct Observation {
    pub id: i64,
    pub session_id: String,
    pub project: String,
    pub kind: String,
    pub tool_name: String,
    pub title: String,
    /// The start of the body: the prompt, the reply, the compaction summary.
    pub body: String,
    pub input: Option<String>,
    /// The start of the tool output (or the failure text).
    pub output: Option<String>,
    /// The length of the whole body in characters, which the compressor's token estimates
    /// need; a reader with no use for it selects `0 AS body_chars`.
    pub body_chars: i64,
    pub occurred_at: i64,
}
