//! Context for injection: what the agent is told at session start and on each prompt.
//!
//! This first version is deliberately modest: at session start, the prompts of the project's
//! most recent sessions; on a prompt, past observations of the project that share most
//! of its significant words. Nothing is returned when nothing is confidently related.

use proto::{ContextReply, ContextRequest, context_request::Moment};
use sqlx::SqlitePool;
use std::fmt::Write as _;

/// Sessions summarised at session start.
const RECENT_SESSIONS: i64 = 3;
/// Prompts listed per session.
const PROMPTS_PER_SESSION: i64 = 5;
/// Memories injected with a prompt.
const PROMPT_HITS: u32 = 3;

/// Build the context for `request`; empty text when there is nothing worth saying.
pub async fn assemble(pool: &SqlitePool, request: &ContextRequest) -> anyhow::Result<ContextReply> {
    let max = if request.max_chars == 0 {
        10_000
    } else {
        request.max_chars as usize
    };
    let mut reply = match request.moment() {
        Moment::SessionStart => session_start(pool, request).await?,
        Moment::Prompt => prompt(pool, request).await?,
        Moment::Unspecified => ContextReply::default(),
    };
    if reply.text.chars().count() > max {
        reply.text = reply.text.chars().take(max).collect();
    }
    Ok(reply)
}

async fn session_start(
    pool: &SqlitePool,
    request: &ContextRequest,
) -> anyhow::Result<ContextReply> {
    let sessions: Vec<(String, String, i64, i64, i64)> = sqlx::query_as(
        "SELECT id, agent, last_event_at, tool_count, error_count FROM sessions
         WHERE project = ? AND id <> ?
         ORDER BY last_event_at DESC LIMIT ?",
    )
    .bind(&request.project)
    .bind(&request.session_id)
    .bind(RECENT_SESSIONS)
    .fetch_all(pool)
    .await?;
    let mut reply = ContextReply::default();
    let mut text = String::new();
    for (session, agent, last, tools, errors) in sessions {
        let prompts: Vec<(i64, String)> = sqlx::query_as(
            "SELECT id, title FROM observations WHERE session_id = ? AND kind = 'prompt'
             ORDER BY occurred_at DESC LIMIT ?",
        )
        .bind(&session)
        .bind(PROMPTS_PER_SESSION)
        .fetch_all(pool)
        .await?;
        if prompts.is_empty() {
            continue;
        }
        let _ = writeln!(
            text,
            "\n## Session {} ({agent}, {tools} tool calls, {errors} failed), last active {}",
            short(&session),
            day(last)
        );
        for (id, title) in prompts.into_iter().rev() {
            let _ = writeln!(text, "- [#{id}] {title}");
            reply.item_ids.push(id);
        }
    }
    if !text.is_empty() {
        reply.text = format!(
            "# mneme: recent work in this project\nWhat was asked in the latest sessions (oldest first). Look an item up with `mneme search` or by its #id.\n{text}"
        );
    }
    Ok(reply)
}

async fn prompt(pool: &SqlitePool, request: &ContextRequest) -> anyhow::Result<ContextReply> {
    let terms = significant_terms(&request.prompt);
    let Some(expression) = store::fts::match_query_any(&terms.join(" ")) else {
        return Ok(ContextReply::default());
    };
    let candidates = crate::search::run(
        pool,
        &expression,
        &request.project,
        &request.session_id,
        PROMPT_HITS * 4,
    )
    .await?;
    // Any-term matching finds candidates; only those sharing most of the prompt's significant
    // words are confident enough to inject.
    let needed = terms.len().div_ceil(2).max(2.min(terms.len()));
    let hits: Vec<_> = candidates
        .into_iter()
        .filter(|hit| {
            let text = format!("{} {}", hit.title, hit.snippet).to_lowercase();
            terms.iter().filter(|t| text.contains(t.as_str())).count() >= needed
        })
        .take(PROMPT_HITS as usize)
        .collect();
    let mut reply = ContextReply::default();
    if hits.is_empty() {
        return Ok(reply);
    }
    let mut text = String::from("# mneme: related memory from earlier sessions\n");
    for hit in hits {
        let _ = writeln!(
            text,
            "- [#{}] {} ({}, {}): {}",
            hit.id,
            hit.title,
            hit.kind,
            day(hit.occurred_at_ms),
            crate::search::snippet(&hit.snippet, &terms)
        );
        reply.item_ids.push(hit.id);
    }
    reply.text = text;
    Ok(reply)
}

/// Words too common to say anything about what a prompt is about.
const STOPWORDS: &[&str] = &[
    "about", "after", "again", "also", "because", "been", "before", "being", "could", "does",
    "doing", "done", "each", "from", "have", "here", "into", "just", "like", "make", "more",
    "much", "need", "only", "other", "please", "should", "some", "than", "that", "them", "then",
    "there", "these", "they", "this", "those", "very", "want", "were", "what", "when", "where",
    "which", "while", "will", "with", "would", "your",
];

/// The lowercased words of a prompt that carry meaning: four letters or more and not a
/// stopword, or any CJK run.
fn significant_terms(prompt: &str) -> Vec<String> {
    let mut terms: Vec<String> = prompt
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .map(str::to_lowercase)
        .filter(|w| {
            w.chars().any(store::fts::is_cjk)
                || (w.chars().count() >= 4 && !STOPWORDS.contains(&w.as_str()))
        })
        .collect();
    terms.sort();
    terms.dedup();
    terms
}

fn short(session: &str) -> &str {
    session.get(..8).unwrap_or(session)
}

/// A Unix-millisecond time as `YYYY-MM-DD`, computed without a date library.
fn day(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    // Civil-from-days (proleptic Gregorian), after Howard Hinnant's published algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn significant_terms_drop_short_and_common_words() {
        assert_eq!(
            super::significant_terms("the websocket reconnect is flaky again"),
            ["flaky", "reconnect", "websocket"]
        );
        assert_eq!(super::significant_terms("修复 it"), ["修复"]);
    }

    #[test]
    fn days_are_civil_dates() {
        assert_eq!(super::day(0), "1970-01-01");
        assert_eq!(super::day(1_795_000_000_000), "2026-11-18");
        assert_eq!(super::day(951_782_400_000), "2000-02-29");
    }
}
