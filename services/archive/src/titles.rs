//! The title of a row a notice names, for the live stream: notices carry ids and kinds, and a
//! person watching wants to read what happened.

use sqlx::SqlitePool;

/// The kinds of row a notice names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Titled {
    /// An observation ingest stored.
    Observation,
    /// A pattern the pattern service recorded.
    Pattern,
    /// A structured observation the compressor wrote.
    Structured,
    /// A session summary the compressor wrote.
    Summary,
    /// A checkpoint the compressor wrote.
    Checkpoint,
}

/// The title of row `id` (the first line of it, for what the compressor wrote); `None` when the row is gone (or never was).
pub async fn title(pool: &SqlitePool, of: Titled, id: i64) -> Result<Option<String>, sqlx::Error> {
    // Summaries and checkpoints have no title column; their text starts with one.
    let sql = match of {
        Titled::Observation => "SELECT title FROM observations WHERE id = ?",
        Titled::Pattern => "SELECT title FROM patterns WHERE id = ?",
        Titled::Structured => "SELECT title FROM structured_observations WHERE id = ?",
        Titled::Summary => "SELECT substr(text, 1, 200) FROM session_summaries WHERE id = ?",
        Titled::Checkpoint => "SELECT substr(text, 1, 200) FROM checkpoints WHERE id = ?",
    };
    let title: Option<String> = sqlx::query_scalar(sql)
        .bind(id)
        .fetch_optional(pool)
        .await?;
    Ok(title.map(|t| match of {
        Titled::Observation | Titled::Pattern => t,
        // A structured observation's title, like the start of a text, may run over lines; the
        // stream shows one.
        Titled::Structured | Titled::Summary | Titled::Checkpoint => {
            t.lines().next().unwrap_or_default().to_owned()
        }
    }))
}
