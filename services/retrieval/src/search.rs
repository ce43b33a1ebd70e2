//! Full-text search over observations (FTS5, BM25).

use proto::{SearchHit, SearchRequest};
use sqlx::SqlitePool;

/// Results returned when the request does not say.
const DEFAULT_LIMIT: u32 = 20;
/// The most results one request may ask for.
const MAX_LIMIT: u32 = 200;

/// Search observations: every query term must match; when nothing does, any term may.
pub async fn search(pool: &SqlitePool, request: &SearchRequest) -> anyhow::Result<Vec<SearchHit>> {
    let limit = match request.limit {
        0 => DEFAULT_LIMIT,
        n => n.min(MAX_LIMIT),
    };
    let mut hits = Vec::new();
    for expression in [
        store::fts::match_query(&request.query),
        store::fts::match_query_any(&request.query),
    ]
    .into_iter()
    .flatten()
    {
        hits = run(pool, &expression, &request.project, "", limit).await?;
        if !hits.is_empty() {
            break;
        }
    }
    let terms = words(&request.query);
    for hit in &mut hits {
        hit.snippet = snippet(&hit.snippet, &terms);
    }
    Ok(hits)
}

#[derive(sqlx::FromRow)]
struct HitRow {
    id: i64,
    session_id: String,
    project: String,
    kind: String,
    title: String,
    body: String,
    occurred_at: i64,
    rank: f64,
}

/// Run one FTS expression; `snippet` holds the whole body until the caller cuts it.
pub(crate) async fn run(
    pool: &SqlitePool,
    expression: &str,
    project: &str,
    exclude_session: &str,
    limit: u32,
) -> anyhow::Result<Vec<SearchHit>> {
    let rows: Vec<HitRow> = sqlx::query_as(
        "SELECT o.id, o.session_id, o.project, o.kind, o.title, o.body, o.occurred_at,
                bm25(observations_fts, 4.0, 1.0) AS rank
         FROM observations_fts
         JOIN observations o ON o.id = observations_fts.rowid
         WHERE observations_fts MATCH ?1
           AND (?2 = '' OR o.project = ?2)
           AND (?3 = '' OR o.session_id <> ?3)
         ORDER BY rank
         LIMIT ?4",
    )
    .bind(expression)
    .bind(project)
    .bind(exclude_session)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| SearchHit {
            id: row.id,
            session_id: row.session_id,
            project: row.project,
            kind: row.kind,
            title: row.title,
            snippet: row.body,
            occurred_at_ms: row.occurred_at,
            // BM25 ranks are negative, better ones lower; callers expect higher is better.
            score: -row.rank,
        })
        .collect())
}

/// Lowercased query words, for locating a snippet.
fn words(query: &str) -> Vec<String> {
    query
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// About 200 characters of `body` around the first query word found in it.
pub(crate) fn snippet(body: &str, terms: &[String]) -> String {
    const BEFORE: usize = 60;
    const LENGTH: usize = 200;
    let lower = body.to_lowercase();
    // Lowercasing can change byte lengths; only trust the position when it did not.
    let at = if lower.len() == body.len() {
        terms
            .iter()
            .filter_map(|t| lower.find(t.as_str()))
            .min()
            .unwrap_or(0)
    } else {
        0
    };
    let chars_before = body[..at].chars().count();
    let start = chars_before.saturating_sub(BEFORE);
    let text: String = body.chars().skip(start).take(LENGTH).collect();
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let prefix = if start > 0 { "…" } else { "" };
    let suffix = if body.chars().count() > start + LENGTH {
        "…"
    } else {
        ""
    };
    format!("{prefix}{text}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_centre_on_the_match() {
        let body = format!(
            "{} the nats consumer failed {}",
            "a ".repeat(200),
            "b ".repeat(200)
        );
        let s = snippet(&body, &["consumer".to_owned()]);
        assert!(s.starts_with('…') && s.ends_with('…'));
        assert!(s.contains("nats consumer failed"));
        assert_eq!(snippet("short", &[]), "short");
    }
}
